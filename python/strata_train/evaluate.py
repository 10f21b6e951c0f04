"""Held-out evaluation of a trained `strata` model with the PyTorch reference (docs/demo-model.md).

    PYTHONPATH=python python -m strata_train.evaluate OUT_DIR_OR_GGUF --data .data/stdlib --json eval.json

Numbers (all on heldout.bin, the files no training step saw):
- **perplexity** of the main head: non-overlapping windows of ``seq_len`` tokens, each read from its
  start (so every token has 0..seq_len-1 tokens of context), every token after the first predicted;
  ``--windows N`` keeps N windows evenly spaced over the file (``round(linspace(0, W-1, N))``).
- **MTP on real text** (teacher forcing): the draft of token p+2 from the streams at p and the real
  token p+1, top-1 against the real token p+2 (``mtp_accuracy``; tokens outside the restricted
  vocabulary count as misses) and against the main model's greedy prediction at p+1
  (``mtp_agreement_text``).
- **MTP drafting** the way speculative decoding uses it: prompts of ``prompt_len`` held-out tokens at
  evenly spaced offsets, continued greedily by the main model for ``new_tokens`` tokens; at every
  position p of the continuation the MTP layer drafts a chain of ``steps`` tokens (step j+1 reads
  step j's output streams and draft token, attends to its own earlier cells, as in
  ``ReferenceRunner.mtp_chain``), and draft j is compared with the main model's greedy token at p+j.
  ``agreement[j]``: fraction of drafts j that match; ``acceptance[j]``: the same given drafts
  1..j-1 matched; ``tokens_per_round``: 1 + the expected number of accepted drafts, all averaged over
  every position. ``decoder_*``: the same chains walked as a greedy speculative decoder does (a round
  at p commits its accepted drafts and one more token, the next round starts there), counted as the
  engine's ``GenerationStats`` counts them: ``decoder_acceptance[j]`` = accepted / drafted at step j.

Importing this module needs only torch and numpy (a GGUF path additionally needs ``gguf``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from strata_train.model import StrataModel
from strata_train.train_forward import DeviceCache, cells_kv, main_streams, moe_forward, project


def _autocast(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager[Any]:
    if bf16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def load_split(data_dir: str | Path, split: str) -> np.ndarray:
    """Token ids of train.bin / heldout.bin with the manifest's dtype (memory-mapped).

    The same as ``strata_train.data.load_split`` without importing the data-preparation module
    (which needs the `strata` package and its native extension)."""
    data_dir = Path(data_dir)
    path = data_dir / f"{split}.bin"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: token file not found (run `python -m strata_train.data prepare`)")
    dtype = "<u2"
    manifest = data_dir / "manifest.json"
    if manifest.is_file():
        dtype = json.loads(manifest.read_text()).get("dtype", dtype)
    return np.memmap(path, dtype=np.dtype(dtype), mode="r")


def window_starts(n_tokens: int, seq_len: int, max_windows: int | None) -> np.ndarray:
    """Start offsets of the evaluation windows (the held-out rule of the module docstring)."""
    total = n_tokens // seq_len
    if total == 0:
        raise ValueError(f"{n_tokens} held-out tokens do not fill one window of {seq_len}")
    idx = np.arange(total)
    if max_windows is not None and max_windows < total:
        idx = np.unique(np.round(np.linspace(0, total - 1, max_windows)).astype(np.int64))
    return idx * seq_len


def prompt_starts(n_tokens: int, length: int, n_prompts: int) -> np.ndarray:
    """Evenly spaced offsets of n_prompts spans of `length` tokens."""
    if n_tokens < length:
        raise ValueError(f"{n_tokens} held-out tokens are fewer than one prompt of {length}")
    return np.unique(np.floor(np.linspace(0, n_tokens - length, n_prompts)).astype(np.int64))


def _batches(
    tokens: np.ndarray, starts: np.ndarray, length: int, batch: int, device: torch.device
) -> Iterator[Tensor]:
    for i in range(0, len(starts), batch):
        rows = [np.asarray(tokens[s : s + length], dtype=np.int64) for s in starts[i : i + batch]]
        yield torch.from_numpy(np.stack(rows)).to(device)


# ------------------------------------------------------------------------------- real text
@torch.no_grad()
def text_metrics(
    model: StrataModel,
    tokens: np.ndarray,
    *,
    seq_len: int,
    max_windows: int | None = None,
    batch: int = 8,
    bf16: bool = False,
    cache: DeviceCache | None = None,
) -> dict[str, Any]:
    """Perplexity of the main head and the teacher-forced MTP numbers over held-out windows."""
    cache = cache or DeviceCache()
    device = next(model.parameters()).device
    starts = window_starts(len(tokens), seq_len, max_windows)
    nll = 0.0
    n_pred = 0
    mtp_hit = mtp_agree = mtp_in_vocab = n_mtp = 0
    for seqs in _batches(tokens, starts, seq_len, batch, device):
        with _autocast(device, bf16):
            streams, _, _ = main_streams(model, seqs, cache)
            logits = model.head(streams).float()
        nll += float(
            F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), seqs[:, 1:].reshape(-1), reduction="sum"
            )
        )
        n_pred += seqs[:, 1:].numel()
        if model.mtp is None or seqs.shape[1] < 3:
            continue
        greedy = logits.argmax(-1)
        with _autocast(device, bf16):
            draft, _, _ = _mtp_first_step(model, seqs, streams, cache)
        target = seqs[:, 2:]
        draft = draft[:, :-1]  # the last MTP row drafts a token past the window
        mtp_hit += int((draft == target).sum())
        mtp_agree += int((draft == greedy[:, 1:-1]).sum())
        mtp_in_vocab += int(cache.target_index(model, device)[target].ge(0).sum())
        n_mtp += target.numel()
    mean_nll = nll / n_pred
    out: dict[str, Any] = {
        "windows": len(starts),
        "seq_len": seq_len,
        "predicted_tokens": n_pred,
        "nll": mean_nll,
        "perplexity": math.exp(mean_nll),
    }
    if n_mtp:
        out.update(
            mtp_accuracy=mtp_hit / n_mtp,
            mtp_agreement_text=mtp_agree / n_mtp,
            mtp_vocab_coverage=mtp_in_vocab / n_mtp,
        )
    return out


# ------------------------------------------------------------------------------- MTP chains
def _mtp_rule(cell_pos: Tensor, row_pos: Tensor, sink: int, window: int) -> Tensor:
    """Sink + window part of the cell rule (the MTP layer never uses the indexer); cells <= row."""
    ok = cell_pos <= row_pos
    if window == 0:
        return ok
    return ok & ((cell_pos < sink) | (cell_pos > row_pos - window))


def _mtp_step(
    model: StrataModel,
    streams_in: Tensor,
    step: int,
    teacher_kv: tuple[Tensor, Tensor] | None,
    chain_kv: Sequence[tuple[Tensor, Tensor]],
    cache: DeviceCache,
) -> tuple[Tensor, Tensor, Tensor]:
    """One MTP row per base position p = 0..R-1, at position p + step - 1.

    step 1 (teacher_kv None): the rows attend to each other (ordinary training attention). Step j > 1:
    row p attends to the step-1 cells c <= p (teacher_kv), to the cells of the same chain's earlier
    steps (chain_kv[i] at position p + 1 + i) and to its own cell. Returns (output streams, k, v).
    """
    mtp = model.mtp
    assert mtp is not None
    blk, attn = mtp.block, mtp.block.attn
    b, r = streams_in.shape[:2]
    offset = step - 1
    dev = streams_in.device
    post, comb, collapsed = blk.hc_attn(streams_in)
    x = blk.attn_norm(collapsed)
    cos, sin = cache.rope(r, offset, attn.rope_dim, attn.rope_theta, dev)
    q, gate, k, v = project(attn, x, cos, sin)
    k, v = cells_kv(attn, k, v, model.kv_int8)  # [B, R, Hq, Dh]
    scale = 1.0 / math.sqrt(attn.head_dim)
    base = torch.arange(r, device=dev)
    row_pos = base + offset
    if teacher_kv is None:
        mask = cache.fixed_mask(r, attn.sink, attn.window, dev)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
        ).transpose(1, 2)
    else:
        kt, vt = teacher_kv
        cell = torch.arange(kt.shape[1], device=dev)
        ok_t = _mtp_rule(cell[None, :], row_pos[:, None], attn.sink, attn.window) & (
            cell[None, :] <= base[:, None]
        )
        s_t = torch.einsum("bphd,bchd->bhpc", q, kt).float() * scale
        s_t = s_t.masked_fill(~ok_t, float("-inf"))
        own = [*chain_kv, (k, v)]
        s_c = []
        for i, (kc, _) in enumerate(own):
            ok_c = _mtp_rule(base + 1 + i, row_pos, attn.sink, attn.window)  # [R]
            s = (q * kc).sum(-1).float().transpose(1, 2) * scale  # [B, H, R]
            s_c.append(s.masked_fill(~ok_c, float("-inf")).unsqueeze(-1))
        probs = torch.softmax(torch.cat([s_t, *s_c], dim=-1), dim=-1)
        p_t, p_c = probs[..., : kt.shape[1]], probs[..., kt.shape[1] :]
        out = torch.einsum("bhpc,bchd->bphd", p_t, vt.float())
        for i, (_, vc) in enumerate(own):
            out = out + p_c[..., i].transpose(1, 2).unsqueeze(-1) * vc.float()
    y = attn.finish(out.to(q.dtype), gate)
    streams = blk.hc_attn.mix(streams_in, post, comb, y)
    post, comb, collapsed = blk.hc_ffn(streams)
    y, _ = moe_forward(blk.moe, blk.ffn_norm(collapsed))
    return blk.hc_ffn.mix(streams, post, comb, y), k, v


def _mtp_first_step(
    model: StrataModel, seqs: Tensor, streams: Tensor, cache: DeviceCache
) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]:
    """Teacher-forced MTP rows 0..L-2: (draft tokens [B, L-1], output streams, their K/V)."""
    mtp = model.mtp
    assert mtp is not None
    x = mtp.inputs(model.token_embd(seqs[:, 1:]), streams[:, :-1])
    out, k, v = _mtp_step(model, x, 1, None, [], cache)
    draft = mtp.vocab_ids[mtp.logits(out, model.output.weight).argmax(-1)]
    return draft, out, (k, v)


@torch.no_grad()
def mtp_chain_logits(
    model: StrataModel, seqs: Tensor, steps: int, cache: DeviceCache | None = None
) -> tuple[list[Tensor], Tensor]:
    """Chained draft logits from every base position of seqs [B, L].

    Returns (logits: one [B, L-1, Vr] per step, logits[j][:, p] drafting position p+j+2 in the chain
    based at p; greedy [B, L]: the main model's argmax at each row, its greedy token for row+1).
    Chain at base p: step 1 reads the main streams at p and token p+1; step j+1 reads step j's output
    streams and draft token, at position p+j, attending to the teacher-forced MTP cells <= p and to
    its own chain's cells (what ``ReferenceRunner.mtp_chain`` computes after a prefill)."""
    if model.mtp is None:
        raise ValueError("the model has no MTP layer")
    cache = cache or DeviceCache()
    mtp = model.mtp
    streams, _, _ = main_streams(model, seqs, cache)
    greedy = model.head(streams).argmax(-1)
    x = mtp.inputs(model.token_embd(seqs[:, 1:]), streams[:, :-1])
    out, k, v = _mtp_step(model, x, 1, None, [], cache)
    teacher = (k, v)
    chain: list[tuple[Tensor, Tensor]] = []
    logits = [mtp.logits(out, model.output.weight)]
    for j in range(2, steps + 1):
        draft = mtp.vocab_ids[logits[-1].argmax(-1)]
        x = mtp.inputs(model.token_embd(draft), out)
        out, k, v = _mtp_step(model, x, j, teacher, chain, cache)
        chain.append((k, v))
        logits.append(mtp.logits(out, model.output.weight))
    return logits, greedy


def mtp_chains(
    model: StrataModel, seqs: Tensor, steps: int, cache: DeviceCache | None = None
) -> tuple[Tensor, Tensor]:
    """(drafts [steps, B, L-1] token ids, greedy [B, L]) of ``mtp_chain_logits``."""
    logits, greedy = mtp_chain_logits(model, seqs, steps, cache)
    assert model.mtp is not None
    return torch.stack([model.mtp.vocab_ids[lg.argmax(-1)] for lg in logits]), greedy


@torch.no_grad()
def greedy_continue(
    model: StrataModel,
    prompts: Tensor,
    new_tokens: int,
    *,
    bf16: bool = False,
    cache: DeviceCache | None = None,
) -> Tensor:
    """prompts [B, P] continued by the main model's greedy choice (full re-forward per token)."""
    cache = cache or DeviceCache()
    seqs = prompts
    for _ in range(new_tokens):
        with _autocast(seqs.device, bf16):
            streams, _, _ = main_streams(model, seqs, cache)
            nxt = model.head(streams[:, -1]).argmax(-1, keepdim=True)
        seqs = torch.cat([seqs, nxt], dim=1)
    return seqs


@torch.no_grad()
def drafting_metrics(
    model: StrataModel,
    tokens: np.ndarray,
    *,
    prompt_len: int,
    new_tokens: int,
    n_prompts: int,
    steps: int = 3,
    batch: int = 16,
    bf16: bool = False,
    cache: DeviceCache | None = None,
) -> dict[str, Any]:
    """Agreement of chained MTP drafts with the main model's greedy continuation (module docstring)."""
    if model.mtp is None:
        return {}
    cache = cache or DeviceCache()
    device = next(model.parameters()).device
    starts = prompt_starts(len(tokens), prompt_len, n_prompts)
    agree = np.zeros(steps)
    all_ok = np.zeros(steps)
    n_bases = 0
    drafted = np.zeros(steps)
    accepted = np.zeros(steps)
    rounds = committed = 0
    for prompts in _batches(tokens, starts, prompt_len, batch, device):
        seqs = greedy_continue(model, prompts, new_tokens, bf16=bf16, cache=cache)
        with _autocast(device, bf16):
            drafts, greedy = mtp_chains(model, seqs, steps, cache)
        length = seqs.shape[1]
        # bases p = prompt_len-1 .. length-1-steps: the chain's tokens lie in the greedy continuation
        bases = torch.arange(prompt_len - 1, length - steps, device=device)
        ok = torch.ones(seqs.shape[0], len(bases), dtype=torch.bool, device=device)
        hits = []
        for j in range(steps):
            hit = drafts[j][:, bases] == greedy[:, bases + j + 1]
            hits.append(hit)
            agree[j] += float(hit.sum())
            ok = ok & hit
            all_ok[j] += float(ok.sum())
        n_bases += hits[0].numel()
        # the decoder's walk: a round at base p commits its accepted drafts + 1, the next starts there
        hit_table = torch.stack(hits, dim=-1).cpu().numpy()  # [B, bases, steps]
        for row in hit_table:
            i = 0
            while i < len(row):
                k = int(np.argmin(row[i])) if not row[i].all() else steps
                drafted += 1
                accepted[:k] += 1
                rounds += 1
                committed += k + 1
                i += k + 1
    prev = np.concatenate([[n_bases], all_ok[:-1]])
    return {
        "prompts": len(starts),
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "chains": n_bases,
        "steps": steps,
        "agreement": (agree / n_bases).tolist(),
        "acceptance": [float(a / p) if p else 0.0 for a, p in zip(all_ok, prev, strict=True)],
        "tokens_per_round": 1.0 + float(all_ok.sum() / n_bases),
        "decoder_rounds": rounds,
        "decoder_acceptance": (accepted / np.maximum(drafted, 1)).tolist(),
        "decoder_tokens_per_round": committed / max(rounds, 1),
    }


# ------------------------------------------------------------------------------- CLI
def load_model(path: str | Path) -> tuple[StrataModel, str]:
    """A model from a trainer output folder (shards + config.json) or a GGUF file (dequantized)."""
    path = Path(path)
    if path.is_dir():
        from strata_train.shards import load_shards

        return load_shards(path)[0], "shards"
    if path.suffix == ".gguf":
        from strata_train.gguf_io import load_model as load_gguf

        return load_gguf(path).eval(), "gguf"
    raise FileNotFoundError(f"{path}: expected a trainer output folder or a .gguf file")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(prog="python -m strata_train.evaluate", description=__doc__.split("\n")[0])
    ap.add_argument("model", help="trainer output folder (shards + config.json) or a .gguf file")
    ap.add_argument("--data", default=".data/stdlib", help="prepared data folder (heldout.bin)")
    ap.add_argument("--seq-len", type=int, default=None, help="window length (default: context_length)")
    ap.add_argument("--windows", type=int, default=48, help="held-out windows kept (0 = all)")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3, help="chained MTP draft steps")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=None, help="write the numbers here too")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, kind = load_model(args.model)
    device = torch.device(args.device)
    model = model.to(device)
    heldout = load_split(args.data, "heldout")
    cache = DeviceCache()
    seq_len = args.seq_len or model.cfg.context_length
    result: dict[str, Any] = {"model": str(args.model), "loaded_from": kind, "heldout_tokens": len(heldout)}
    result["text"] = text_metrics(
        model, heldout, seq_len=seq_len, max_windows=args.windows or None, batch=args.batch, cache=cache
    )
    print(json.dumps(result["text"]), flush=True)
    if args.prompts > 0:
        result["drafting"] = drafting_metrics(
            model,
            heldout,
            prompt_len=args.prompt_len,
            new_tokens=args.new_tokens,
            n_prompts=args.prompts,
            steps=args.steps,
            batch=args.batch,
            cache=cache,
        )
        print(json.dumps(result["drafting"]), flush=True)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"evaluated in {result['seconds']} s", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()
