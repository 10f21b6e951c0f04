"""Train a `strata` model on prepared token files; the recipe of the shipped demo model.

    PYTHONPATH=python python -m strata_train.train --data .data/stdlib --out out --time-budget 290

Seeded init and data order (random crops of train.bin drawn by a seeded numpy generator), AdamW
(fused on CUDA), bf16 autocast on CUDA, linear warm-up then cosine decay over the planned step count
(``--steps``, or estimated from the measured step time to fill ``--time-budget``), a hard stop at the
budget. Loss = lm + mtp_weight * mtp + indexer_weight * indexer + balance_weight * balance
(docs/reference.md). At the end: held-out evaluation (strata_train.evaluate), then the weights as
safetensors shards + config.json (strata_train.shards) and train_log.json in ``--out``.

Needs only torch, numpy and safetensors: nothing here imports the `strata` package or `gguf`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strata_train.config import StrataConfig
from strata_train.demo_config import DEMO_RECIPE, demo_config, smoke_config
from strata_train.evaluate import drafting_metrics, load_split, text_metrics
from strata_train.model import StrataModel
from strata_train.shards import DEFAULT_SHARD_BYTES, save_shards
from strata_train.train_forward import DeviceCache, train_losses

PROCESS_START = time.perf_counter()
LOG_FILE = "train_log.json"
CALIBRATION_STEPS = (10, 30)  # the step time is measured over these steps to plan the schedule
REPLAN_UNTIL = 0.25  # the plan is refined at log points until this fraction of the budget


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - PROCESS_START:7.1f}s] {msg}", flush=True)


# ------------------------------------------------------------------------------------ data
def restricted_vocab(train: np.ndarray, vocab_size: int, size: int) -> tuple[int, ...] | None:
    """The `size` most frequent token ids of the training split (count ties to the lower id), sorted;
    None (the whole vocabulary) when size >= vocab_size."""
    if size <= 0 or size >= vocab_size:
        return None
    counts = np.bincount(np.asarray(train), minlength=vocab_size)[:vocab_size]
    order = np.lexsort((np.arange(vocab_size), -counts))
    return tuple(int(i) for i in np.sort(order[:size]))


class CropSampler:
    """Random windows of train tokens: starts drawn by numpy's PCG64 from the seed, so the data order
    is the same on every machine; the token array lives on the training device."""

    def __init__(self, tokens: np.ndarray, seq_len: int, batch: int, seed: int, device: torch.device) -> None:
        if len(tokens) <= seq_len:
            raise ValueError(f"{len(tokens)} training tokens do not fill one crop of {seq_len}")
        self.data = torch.from_numpy(np.asarray(tokens, dtype=np.int32)).to(device)
        self.rng = np.random.default_rng(seed)
        self.seq_len, self.batch, self.device = seq_len, batch, device
        self.offsets = torch.arange(seq_len, device=device)
        self.high = len(tokens) - seq_len + 1

    def next(self) -> torch.Tensor:
        starts = torch.from_numpy(self.rng.integers(0, self.high, size=self.batch))
        if self.device.type == "cuda":
            starts = starts.pin_memory().to(self.device, non_blocking=True)
        return self.data[starts.unsqueeze(1) + self.offsets].long()


# -------------------------------------------------------------------------------- schedule
@dataclass
class Schedule:
    """Linear warm-up to `peak`, then cosine to peak * min_ratio at step `total`."""

    peak: float
    warmup: int
    min_ratio: float
    total: int | None = None  # unknown until the step time is measured (time-budget mode)

    def lr(self, step: int) -> float:
        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        if self.total is None:
            return self.peak
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.peak * (self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


# -------------------------------------------------------------------------------- model setup
def build_config(args: argparse.Namespace, train: np.ndarray) -> StrataConfig:
    changes = json.loads(args.model_json) if args.model_json else {}
    if args.config == "demo":
        base = demo_config(**changes)
    else:
        base = smoke_config(**changes)
    vocab_ids = restricted_vocab(train, base.vocab_size, args.mtp_vocab) if base.mtp else None
    cfg = base.replace(mtp_vocab_ids=vocab_ids)
    if args.seq_len > cfg.context_length:
        raise ValueError(f"--seq-len {args.seq_len} exceeds the model's context_length {cfg.context_length}")
    return cfg


def param_groups(model: StrataModel, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on matrices and embeddings; none on norms and hyper-connection bases/scales."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def count_params(model: StrataModel) -> dict[str, int]:
    cfg = model.cfg
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if n.endswith("_exps"))
    embedding = model.token_embd.weight.numel()
    active = total - embedding - experts + experts * cfg.n_experts_used // cfg.n_experts
    return {"total": total, "routed_experts": experts, "active_per_token_without_embedding": active}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -------------------------------------------------------------------------------- training
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    r = DEMO_RECIPE
    ap = argparse.ArgumentParser(prog="python -m strata_train.train", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data", default=".data/stdlib", help="folder with train.bin, heldout.bin, manifest.json"
    )
    ap.add_argument("--out", default="out", help="output folder (shards, config.json, train_log.json)")
    ap.add_argument("--config", choices=("demo", "smoke"), default="demo", help="model size (demo_config.py)")
    ap.add_argument("--model-json", default=None, help="JSON object of StrataConfig fields to change")
    ap.add_argument(
        "--mtp-vocab",
        type=int,
        default=r.mtp_vocab_size,
        help="restricted MTP vocabulary: the N most frequent train tokens (0 = all)",
    )
    ap.add_argument("--time-budget", type=float, default=r.time_budget_s, help="seconds of training loop")
    ap.add_argument("--steps", type=int, default=None, help="fixed step count (the schedule's length)")
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="seconds since process start by which everything must be saved (stops early)",
    )
    ap.add_argument("--batch-size", type=int, default=r.batch_size)
    ap.add_argument("--seq-len", type=int, default=r.seq_len)
    ap.add_argument("--lr", type=float, default=r.lr)
    ap.add_argument("--min-lr-ratio", type=float, default=r.min_lr_ratio)
    ap.add_argument("--warmup", type=int, default=r.warmup_steps)
    ap.add_argument("--weight-decay", type=float, default=r.weight_decay)
    ap.add_argument("--beta2", type=float, default=r.beta2)
    ap.add_argument("--grad-clip", type=float, default=r.grad_clip)
    ap.add_argument("--mtp-weight", type=float, default=r.mtp_weight)
    ap.add_argument("--indexer-weight", type=float, default=r.indexer_weight)
    ap.add_argument("--balance-weight", type=float, default=r.balance_weight)
    ap.add_argument("--seed", type=int, default=r.seed)
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast on CUDA")
    ap.add_argument("--log-every", type=int, default=25, help="steps between progress lines")
    ap.add_argument("--eval-every", type=float, default=60.0, help="seconds between quick held-out losses")
    ap.add_argument("--eval-windows", type=int, default=16, help="held-out windows of the quick loss")
    ap.add_argument("--final-windows", type=int, default=0, help="held-out windows at the end (0 = all)")
    ap.add_argument("--final-prompts", type=int, default=64, help="prompts of the final MTP drafting eval")
    ap.add_argument("--prompt-len", type=int, default=256)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument(
        "--shard-mib", type=float, default=DEFAULT_SHARD_BYTES / 2**20, help="payload per safetensors shard"
    )
    args = ap.parse_args(argv)
    if args.seq_len < 3 or args.batch_size < 1:
        ap.error("--seq-len must be >= 3 and --batch-size >= 1")
    if args.steps is not None and args.steps < 1:
        ap.error("--steps must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    bf16 = device.type == "cuda" and not args.fp32
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    data_dir, out_dir = Path(args.data), Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    train = np.asarray(load_split(data_dir, "train"))
    heldout = np.asarray(load_split(data_dir, "heldout"))
    cfg = build_config(args, train)
    torch.manual_seed(args.seed)
    model = StrataModel(cfg, kv_int8=True).to(device)
    params = count_params(model)
    if cfg.mtp_vocab_ids is not None:
        in_vocab = np.zeros(cfg.vocab_size, dtype=bool)
        in_vocab[list(cfg.mtp_vocab_ids)] = True
        coverage = float(in_vocab[train].mean())
    else:
        coverage = 1.0
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    log(f"device {dev_name}, torch {torch.__version__}, bf16 autocast {bf16}")
    log(
        f"train {len(train):,} tokens, held-out {len(heldout):,}; params {params['total']:,} "
        f"(experts {params['routed_experts']:,}, "
        f"active/token {params['active_per_token_without_embedding']:,}); "
        f"MTP vocab {cfg.mtp_vocab_size} covers {coverage:.3f} of train tokens"
    )

    fused = device.type == "cuda"
    opt = torch.optim.AdamW(
        param_groups(model, args.weight_decay), lr=args.lr, betas=(DEMO_RECIPE.beta1, args.beta2), fused=fused
    )
    sampler = CropSampler(train, args.seq_len, args.batch_size, args.seed, device)
    cache = DeviceCache()
    schedule = Schedule(args.lr, args.warmup, args.min_lr_ratio, args.steps)
    weights = {
        "lm": 1.0,
        "mtp": args.mtp_weight,
        "indexer": args.indexer_weight,
        "balance": args.balance_weight,
    }
    tokens_per_step = args.batch_size * args.seq_len
    budget = args.time_budget if args.steps is None else math.inf
    if args.deadline is not None:
        # leave time for the final evaluation and the save (measured: well under a minute on a GPU)
        budget = min(budget, args.deadline - (time.perf_counter() - PROCESS_START) - 45.0)

    def quick_heldout() -> float:
        model.eval()
        m = text_metrics(
            model,
            heldout,
            seq_len=args.seq_len,
            max_windows=args.eval_windows,
            batch=args.eval_windows,
            bf16=bf16,
            cache=cache,
        )
        model.train()
        return float(m["nll"])

    records: list[dict[str, Any]] = []
    heldout_curve: list[dict[str, Any]] = []
    sums = torch.zeros(5, device=device)  # lm, mtp, indexer, balance, grad norm since the last log line
    n_sum = 0
    step = 0
    stop_reason = "steps"
    train_start = time.perf_counter()
    last_log_t, last_log_step = train_start, 0
    calib_t0 = train_start
    eval_spent = 0.0  # seconds of quick held-out evaluations since the last log line (not training)
    eval_total = 0.0
    next_eval = args.eval_every
    log(
        f"training: batch {args.batch_size} x {args.seq_len}, lr {args.lr} (warm-up {args.warmup}, cosine to "
        f"x{args.min_lr_ratio}), " + (f"{args.steps} steps" if args.steps else f"budget {budget:.0f} s")
    )
    model.train()
    while True:
        elapsed = time.perf_counter() - train_start
        if schedule.total is not None and step >= schedule.total:
            break
        if elapsed >= budget:
            stop_reason = "time budget"
            break
        if args.steps is None:
            if step == CALIBRATION_STEPS[0]:
                calib_t0 = time.perf_counter()
            elif step >= CALIBRATION_STEPS[1] and (
                schedule.total is None or (step % args.log_every == 0 and elapsed < REPLAN_UNTIL * budget)
            ):
                per_step = (time.perf_counter() - calib_t0) / (step - CALIBRATION_STEPS[0])
                schedule.total = max(step + 1, step + int((budget - elapsed) / per_step))
        lr = schedule.lr(step)
        for group in opt.param_groups:
            group["lr"] = lr
        batch = sampler.next()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            losses = train_losses(model, batch, cache)
        loss = sum(weights[k] * losses[k] for k in weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        sums += torch.stack(
            [
                losses["lm"].detach(),
                losses["mtp"].detach(),
                losses["indexer"].detach(),
                losses["balance"].detach(),
                grad_norm.detach().float(),
            ]
        )
        n_sum += 1
        step += 1
        if step % args.log_every == 0 or step == 1:
            now = time.perf_counter()
            vals = (sums / n_sum).tolist()
            tok_s = (step - last_log_step) * tokens_per_step / max(now - last_log_t - eval_spent, 1e-9)
            eval_spent = 0.0
            rec = {
                "step": step,
                "tokens": step * tokens_per_step,
                "elapsed_s": round(now - train_start, 2),
                "lr": lr,
                "lm": vals[0],
                "mtp": vals[1],
                "indexer": vals[2],
                "balance": vals[3],
                "grad_norm": vals[4],
                "tokens_per_s": round(tok_s),
            }
            records.append(rec)
            mem = (
                f", mem {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB"
                if device.type == "cuda"
                else ""
            )
            plan = f"/{schedule.total}" if schedule.total else ""
            log(
                f"step {step}{plan} lm {vals[0]:.3f} mtp {vals[1]:.3f} idx {vals[2]:.3f} bal {vals[3]:.3f} "
                f"gnorm {vals[4]:.2f} lr {lr:.2e} | {tok_s:,.0f} tok/s{mem}"
            )
            sums.zero_()
            n_sum = 0
            last_log_t, last_log_step = now, step
        if args.eval_every > 0 and time.perf_counter() - train_start >= next_eval:
            t_quick = time.perf_counter()
            nll = quick_heldout()
            eval_spent += time.perf_counter() - t_quick
            eval_total += time.perf_counter() - t_quick
            heldout_curve.append(
                {"step": step, "elapsed_s": round(time.perf_counter() - train_start, 1), "heldout_nll": nll}
            )
            log(f"held-out ({args.eval_windows} windows) nll {nll:.3f} ppl {math.exp(nll):.2f}")
            next_eval += args.eval_every
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    train_s = time.perf_counter() - train_start
    tokens_seen = step * tokens_per_step
    tok_s = tokens_seen / max(train_s - eval_total, 1e-9)
    log(
        f"stopped ({stop_reason}) after {step} steps, {tokens_seen:,} tokens "
        f"({tokens_seen / len(train):.2f} epochs) in {train_s:.1f} s: {tok_s:,.0f} tok/s"
    )

    # the weights first: whatever happens in the evaluation, the run's result is on disk
    t_save = time.perf_counter()
    files = save_shards(
        model,
        out_dir,
        max_bytes=int(args.shard_mib * 2**20),
        extra={"trained_by": "strata_train.train", "steps": step, "tokens_seen": tokens_seen},
    )
    save_s = time.perf_counter() - t_save
    sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in files)
    log(f"saved {sizes}")

    t_eval = time.perf_counter()
    model.eval()
    final: dict[str, Any] = {"bf16_autocast": bf16}
    failure: BaseException | None = None
    try:
        final["text"] = text_metrics(
            model,
            heldout,
            seq_len=args.seq_len,
            max_windows=args.final_windows or None,
            batch=16,
            bf16=bf16,
            cache=cache,
        )
        log(f"held-out: {json.dumps(final['text'])}")
        if args.final_prompts > 0 and model.mtp is not None:
            final["drafting"] = drafting_metrics(
                model,
                heldout,
                prompt_len=args.prompt_len,
                new_tokens=args.new_tokens,
                n_prompts=args.final_prompts,
                batch=32,
                bf16=bf16,
                cache=cache,
            )
            log(f"MTP drafting: {json.dumps(final['drafting'])}")
    except Exception as exc:  # the log below still records the training run; re-raised after it
        failure = exc
        final["error"] = "".join(traceback.format_exception(exc))
        log(f"final evaluation failed:\n{final['error']}")
    eval_s = time.perf_counter() - t_eval

    manifest = data_dir / "manifest.json"
    report = {
        "args": vars(args),
        "config": cfg.to_dict(),
        "params": params,
        "mtp_vocab_train_coverage": coverage,
        "device": dev_name,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "seed": args.seed,
        "data": {
            "train_tokens": len(train),
            "heldout_tokens": len(heldout),
            "train_sha256": sha256_file(data_dir / "train.bin"),
            "heldout_sha256": sha256_file(data_dir / "heldout.bin"),
            "manifest_sha256": sha256_file(manifest) if manifest.is_file() else None,
        },
        "schedule": {**asdict(schedule), "calibration_steps": list(CALIBRATION_STEPS)},
        "stop_reason": stop_reason,
        "steps": step,
        "tokens_seen": tokens_seen,
        "epochs": tokens_seen / len(train),
        "train_seconds": round(train_s, 1),
        "heldout_eval_seconds_during_training": round(eval_total, 1),
        "tokens_per_s": round(tok_s),
        "max_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        if device.type == "cuda"
        else None,
        "loss_curve": records,
        "heldout_curve": heldout_curve,
        "final_eval": final,
        "eval_seconds": round(eval_s, 1),
        "files": [p.name for p in files],
    }
    report["save_seconds"] = round(save_s, 1)
    report["total_seconds"] = round(time.perf_counter() - PROCESS_START, 1)
    (out_dir / LOG_FILE).write_text(json.dumps(report, indent=1) + "\n")
    log(f"wrote {out_dir / LOG_FILE}; {report['total_seconds']} s since start")
    if failure is not None:
        raise failure
    return report


if __name__ == "__main__":
    main()
