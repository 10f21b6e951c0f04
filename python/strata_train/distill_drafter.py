"""Distil the MTP drafter toward the main model it drafts for.

    python -m strata_train.distill_drafter train MODEL.gguf --data .data/stdlib --out out
    python -m strata_train.distill_drafter patch MODEL.gguf NEW.gguf out/drafter-*.safetensors

(with PYTHONPATH=python; `train` needs torch and safetensors, `patch` needs gguf.)

Why: the trainer teaches the MTP layer the real next-next token of the text (hard labels), but the
verifier accepts a draft by the *main model's* distribution: at temperature 0 a draft is kept iff it is
the main model's argmax, and by sampling the best any draft rule reaches is 1 - TV(main, drafter).
So `train` freezes every main-model weight (the output head the drafter shares included), runs the
main model on training crops and trains only the MTP layer to minimise KL(main ‖ drafter) over the
drafter's restricted vocabulary (the main model's next-token distribution at p+1, renormalised over
that vocabulary, is the target of MTP row p). With ``--chain-steps`` above 1 the later chain steps are
taught too (``_chain_pairs``); with 1 the trainer's router balance term is added (the chain path's
forward does not return it). The main model's function is untouched, so its text and perplexity stay
what they were.

`train` measures the teacher-forced numbers the verifier cares about on held-out windows before and
after (agreement with the main model's argmax; at temperature 0.7 the main model's probability of
the drafter's argmax and 1 - TV) and writes the MTP tensors, float32, keyed by GGUF name.
`patch` writes a copy of the GGUF with those tensors stored in each one's original type; every other
tensor and key is copied byte for byte.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from strata_train.evaluate import (
    _autocast,
    _batches,
    _mtp_step,
    drafting_metrics,
    load_model,
    load_split,
    window_starts,
)
from strata_train.gguf_names import named_gguf_tensors
from strata_train.model import StrataModel
from strata_train.train import CropSampler, Schedule
from strata_train.train_forward import DeviceCache, block_forward, main_streams

EVAL_TEMPERATURE = 0.7  # the command line's default


def drafter_tensors(model: StrataModel) -> dict[str, Tensor]:
    """GGUF name -> live tensor for every trainable MTP tensor (vocab_ids excluded)."""
    assert model.mtp is not None
    own = {id(p) for p in model.mtp.parameters()}
    return {name: t for name, t in named_gguf_tensors(model) if id(t) in own}


def _pair(model: StrataModel, tokens: Tensor, cache: DeviceCache) -> tuple[Tensor, Tensor, Tensor]:
    """(main logits [B, T-2, V] at rows 1..T-2, drafter logits [B, T-2, Vr] at rows 0..T-3, balance).

    Drafter row p drafts token p+2; the main model predicts that token from row p+1."""
    mtp = model.mtp
    assert mtp is not None
    with torch.no_grad():
        streams, _, _ = main_streams(model, tokens, cache)
        main = model.head(streams[:, 1:-1])
    x = mtp.inputs(model.token_embd(tokens[:, 1:]), streams[:, :-1])
    x, _, balance = block_forward(mtp.block, x, model.kv_int8, cache)
    draft = mtp.logits(x[:, :-1], model.output.weight)
    return main, draft, balance


def _chain_pairs(
    model: StrataModel, tokens: Tensor, steps: int, cache: DeviceCache
) -> list[tuple[Tensor, Tensor]]:
    """(main logits, drafter logits) per chain step 1..steps, teacher-forced on the text.

    Step j at base p reads step j-1's output streams and the text's token p+j (what the chain reads
    when its earlier drafts were accepted) and is taught the main model's distribution at row p+j.
    Rows whose input token lies past the crop are left out."""
    mtp = model.mtp
    assert mtp is not None
    with torch.no_grad():
        streams, _, _ = main_streams(model, tokens, cache)
        main = model.head(streams)
    x = mtp.inputs(model.token_embd(tokens[:, 1:]), streams[:, :-1])
    out, k, v = _mtp_step(model, x, 1, None, [], cache)
    pairs = [(main[:, 1:], mtp.logits(out, model.output.weight))]
    teacher, chain = (k, v), []
    n = tokens.shape[1] - 1
    for j in range(2, steps + 1):
        nxt = torch.cat([tokens[:, j:], tokens.new_zeros(tokens.shape[0], j - 1)], dim=1)
        out, k, v = _mtp_step(model, mtp.inputs(model.token_embd(nxt), out), j, teacher, chain, cache)
        chain.append((k, v))
        pairs.append((main[:, j:], mtp.logits(out, model.output.weight)[:, : n - j + 1]))
    return pairs


def distill_loss(main: Tensor, draft: Tensor, vocab_ids: Tensor) -> Tensor:
    """Mean over rows of KL(softmax(main restricted to vocab_ids) ‖ softmax(draft))."""
    log_p = F.log_softmax(main[..., vocab_ids].float(), dim=-1)
    log_q = F.log_softmax(draft.float(), dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean()


@torch.no_grad()
def heldout_numbers(
    model: StrataModel, tokens: np.ndarray, *, seq_len: int, windows: int, bf16: bool, cache: DeviceCache
) -> dict[str, float]:
    """Teacher-forced drafter-vs-main numbers over held-out windows (module docstring)."""
    mtp = model.mtp
    assert mtp is not None
    ids = mtp.vocab_ids
    device = next(model.parameters()).device
    sums = dict.fromkeys(("kl", "agree", "det_accept", "one_minus_tv", "peak"), 0.0)
    rows = 0
    for seqs in _batches(tokens, window_starts(len(tokens), seq_len, windows), seq_len, 8, device):
        with _autocast(device, bf16):
            main, draft, _ = _pair(model, seqs, cache)
        main, draft = main.float(), draft.float()
        sums["kl"] += float(distill_loss(main, draft, ids)) * main.shape[0] * main.shape[1]
        pick = ids[draft.argmax(-1)]  # the drafter's token, in the full vocabulary
        sums["agree"] += float((pick == main.argmax(-1)).sum())
        p = torch.softmax(main / EVAL_TEMPERATURE, dim=-1)
        q = torch.softmax(draft / EVAL_TEMPERATURE, dim=-1)
        sums["det_accept"] += float(p.gather(-1, pick.unsqueeze(-1)).sum())
        sums["one_minus_tv"] += float(torch.minimum(p[..., ids], q).sum())
        sums["peak"] += float(p.max(-1).values.sum())
        rows += main.shape[0] * main.shape[1]
    return {k: v / rows for k, v in sums.items()} | {"rows": float(rows)}


def train(argv: Sequence[str]) -> dict[str, Any]:
    ap = argparse.ArgumentParser(prog="strata_train.distill_drafter train")
    ap.add_argument("model", type=Path, help="the strata GGUF whose drafter to distil")
    ap.add_argument("--data", type=Path, required=True, help="prepared data folder (train.bin, heldout.bin)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--time-budget", type=float, default=240.0, help="seconds of training loop")
    ap.add_argument("--steps", type=int, default=None, help="a fixed step count instead of the time budget")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--balance-weight", type=float, default=0.01, help="router balance (chain steps 1 only)")
    ap.add_argument("--chain-steps", type=int, default=1, help="chain steps taught (1: the first draft only)")
    ap.add_argument("--eval-windows", type=int, default=96)
    ap.add_argument("--chain-prompts", type=int, default=64, help="prompts of the chained-draft metrics")
    ap.add_argument("--chain-prompt-len", type=int, default=256)
    ap.add_argument("--chain-new-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--device", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bf16 = device.type == "cuda"
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    args.out.mkdir(parents=True, exist_ok=True)
    train_tokens = np.asarray(load_split(args.data, "train"))
    heldout = np.asarray(load_split(args.data, "heldout"))
    model, _ = load_model(args.model)
    model = model.to(device)
    if model.mtp is None:
        raise ValueError(f"{args.model}: the model has no MTP layer to distil")
    cache = DeviceCache()
    for p in model.parameters():
        p.requires_grad_(False)
    trainable = list(model.mtp.parameters())
    for p in trainable:
        p.requires_grad_(True)

    def measure(tag: str) -> dict[str, Any]:
        model.eval()
        t0 = time.perf_counter()
        teacher = heldout_numbers(
            model, heldout, seq_len=args.seq_len, windows=args.eval_windows, bf16=bf16, cache=cache
        )
        chains = drafting_metrics(
            model,
            heldout,
            prompt_len=args.chain_prompt_len,
            new_tokens=args.chain_new_tokens,
            n_prompts=args.chain_prompts,
            bf16=bf16,
            cache=cache,
        )
        model.train()
        out = {"teacher_forced": teacher, "chains": chains, "seconds": time.perf_counter() - t0}
        print(f"[{tag}] {json.dumps(out)}", flush=True)
        return out

    before = measure("before")
    opt = torch.optim.AdamW(trainable, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    sampler = CropSampler(train_tokens, args.seq_len, args.batch_size, args.seed, device)
    schedule = Schedule(args.lr, args.warmup, 0.1, args.steps)
    budget = args.time_budget if args.steps is None else math.inf
    curve: list[dict[str, float]] = []
    start = time.perf_counter()
    step = 0
    while (args.steps is None or step < args.steps) and time.perf_counter() - start < budget:
        if schedule.total is None and step == 20:
            per_step = (time.perf_counter() - start) / step
            schedule.total = max(step + 1, int(budget / per_step))
        for group in opt.param_groups:
            group["lr"] = schedule.lr(step)
        tokens = sampler.next()
        with _autocast(device, bf16):
            if args.chain_steps == 1:
                main, draft, balance = _pair(model, tokens, cache)
                kl = distill_loss(main, draft, model.mtp.vocab_ids)
            else:
                pairs = _chain_pairs(model, tokens, args.chain_steps, cache)
                kl = sum(distill_loss(m, d, model.mtp.vocab_ids) for m, d in pairs) / len(pairs)
                balance = kl.new_zeros(())
        loss = kl + args.balance_weight * balance.float()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        if step % 25 == 0:
            rec = {
                "step": step,
                "kl": float(kl.detach()),
                "balance": float(balance.detach()),
                "lr": schedule.lr(step),
                "seconds": time.perf_counter() - start,
            }
            curve.append(rec)
            print(json.dumps(rec), flush=True)
        step += 1
    seconds = time.perf_counter() - start
    after = measure("after")
    tensors = {name: t.detach().float().cpu().contiguous() for name, t in drafter_tensors(model).items()}
    from safetensors.torch import save_file

    # two files, each under the 16 MiB a device call may return: names in order until half the elements
    names = sorted(tensors, key=lambda n: ("_exps." not in n, n))
    half = sum(t.numel() for t in tensors.values()) // 2
    first: dict[str, Tensor] = {}
    filled = 0
    for n in names:
        if filled < half:
            first[n] = tensors[n]
            filled += tensors[n].numel()
    save_file(first, str(args.out / "drafter-1.safetensors"))
    save_file({n: t for n, t in tensors.items() if n not in first}, str(args.out / "drafter-2.safetensors"))
    log = {"args": {k: str(v) for k, v in vars(args).items()}, "steps": step, "train_seconds": seconds,
           "tokens_seen": step * args.batch_size * args.seq_len, "before": before, "after": after,
           "curve": curve, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
    (args.out / "distill_log.json").write_text(json.dumps(log, indent=1))
    return log


def patch(argv: Sequence[str]) -> Path:
    """Copy a GGUF with its drafter tensors replaced, each stored in its original type."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import quantize
    from safetensors.numpy import load_file

    ap = argparse.ArgumentParser(prog="strata_train.distill_drafter patch")
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("drafter", type=Path, nargs="+", help="the drafter-*.safetensors `train` wrote")
    args = ap.parse_args(argv)
    new: dict[str, np.ndarray] = {}
    for f in args.drafter:
        new.update(load_file(str(f)))
    reader = GGUFReader(str(args.model))
    names = {t.name for t in reader.tensors}
    unknown = sorted(set(new) - names)
    if unknown:
        raise ValueError(f"{args.drafter}: tensors not in {args.model}: {unknown[:8]}")
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(str(args.out), arch)
    plain = (GGMLQuantizationType.F32, GGMLQuantizationType.I32)
    try:
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == "general.architecture":
                continue
            sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub)
        datas = []
        for t in reader.tensors:
            if t.name in new:
                value = np.asarray(new[t.name], dtype=np.float32)
                data = value if t.tensor_type == GGMLQuantizationType.F32 else quantize(value, t.tensor_type)
                if data.nbytes != t.data.nbytes:
                    raise ValueError(f"{t.name}: {data.nbytes} bytes, the original has {t.data.nbytes}")
                data = data.reshape(t.data.shape)
            else:
                data = np.ascontiguousarray(t.data)
            datas.append(data)
            writer.add_tensor_info(t.name, data.shape, data.dtype, data.nbytes,
                                   raw_dtype=None if t.tensor_type in plain else t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for data in datas:
            writer.write_tensor_data(data)
    finally:
        writer.close()
    return args.out


def main(argv: Sequence[str] | None = None) -> None:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "patch"):
        raise SystemExit("usage: python -m strata_train.distill_drafter {train,patch} ...")
    if argv[0] == "train":
        train(argv[1:])
    else:
        print(patch(argv[1:]))


if __name__ == "__main__":
    main()
