"""Train the glm4moe head-to-head model with its nextn layer (docs/glm-mtp-model.md).

    PYTHONPATH=python python -m strata_train.glm_mtp_train --data .data/stdlib --out out --steps 1200

The demo model's data (.data/stdlib) and most of its recipe: seeded init N(0, 0.02) and data order
(random 512-token crops drawn by numpy's PCG64), AdamW β (0.9, 0.95), weight decay 0.1 on matrices,
clipping at 1.0, linear warm-up then cosine decay, bf16 autocast on CUDA. Loss = lm + 0.3·mtp1 +
0.15·mtp2 (glm_mtp_model.GlmMtpModel.losses). The routers' selection biases move towards a balanced
load after each step (DeepSeek-V3's auxiliary-loss-free rule: bias += rate · sign(mean − load)).
A held-out probe every ``--eval-every`` steps keeps the best weights (the data is small, the model
overfits past a few epochs). At the end the best weights are packed into Q8_0 pieces
(glm_mtp_pack) in ``--out`` with train_log.json.

Needs only torch and numpy.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from strata_train.glm_mtp_model import GlmMtpConfig, GlmMtpModel
from strata_train.glm_mtp_pack import pack

START = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - START:7.1f}s] {msg}", flush=True)


def load_tokens(data: Path, split: str) -> np.ndarray:
    manifest = json.loads((data / "manifest.json").read_text())
    return np.fromfile(data / f"{split}.bin", dtype=np.dtype(manifest["dtype"]))


def special_ids(data: Path) -> tuple[int | None, int | None]:
    tok = json.loads((data / "tokenizer.json").read_text())
    ids = {a["content"]: a["id"] for a in tok.get("added_tokens", [])}
    eos = next((ids[n] for n in ("<|endoftext|>", "<|eot|>", "</s>", "<eos>") if n in ids), None)
    return None, eos


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m strata_train.glm_mtp_train",
                                description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=Path(".data/stdlib"))
    p.add_argument("--out", type=Path, default=Path("out"))
    p.add_argument("--steps", type=int, default=1200, help="planned steps (the cosine schedule's length)")
    p.add_argument("--time-budget", type=float, default=360.0, help="hard stop of the loop, seconds")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--bias-rate", type=float, default=1e-3)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--model-json", default="{}", help="GlmMtpConfig fields to override (JSON)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return p.parse_args(argv)


def heldout_windows(heldout: np.ndarray, n: int, seq: int, device: torch.device) -> torch.Tensor:
    starts = np.round(np.linspace(0, len(heldout) - seq - 1, n)).astype(np.int64)
    return torch.from_numpy(np.stack([heldout[s:s + seq].astype(np.int64) for s in starts])).to(device)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    a = parse_args(argv)
    dev = torch.device(a.device)
    cfg = replace(GlmMtpConfig(), **json.loads(a.model_json))
    train, heldout = load_tokens(a.data, "train"), load_tokens(a.data, "heldout")
    if int(train.max()) >= cfg.vocab:
        raise SystemExit(f"token id {int(train.max())} >= vocabulary {cfg.vocab}")
    torch.manual_seed(a.seed)
    model = GlmMtpModel(cfg)
    model.reset_parameters()
    model.to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"{n_params / 1e6:.2f} M parameters, {len(train):,} train tokens, device {dev}")
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    other = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), fused=dev.type == "cuda")
    data = torch.from_numpy(train.astype(np.int32)).to(dev)
    rng = np.random.default_rng(a.seed)
    offsets = torch.arange(a.seq, device=dev)
    probe = heldout_windows(heldout, a.eval_windows, a.seq, dev)
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda")

    def lr_at(step: int) -> float:
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        t = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
        return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1 + math.cos(math.pi * t))

    @torch.no_grad()
    def evaluate() -> dict[str, float]:
        model.eval()
        with amp:
            parts = [model.losses(probe[i:i + 16]) for i in range(0, len(probe), 16)]
            acc = [model.agreement(probe[i:i + 16]) for i in range(0, len(probe), 16)]
        model.train()
        out = {k: float(np.mean([p[k].item() for p in parts])) for k in parts[0]}
        out["agree1"] = float(np.mean([x[0] for x in acc]))
        out["agree2_given1"] = float(np.mean([x[1] for x in acc]))
        return out

    curve, evals = [], []
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    loop_start = time.perf_counter()
    step = 0
    for step in range(a.steps):
        if time.perf_counter() - loop_start > a.time_budget:
            log(f"time budget reached at step {step}")
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.from_numpy(rng.integers(0, len(train) - a.seq + 1, size=a.batch)).to(dev)
        batch = data[starts[:, None] + offsets].long()
        with amp:
            parts = model.losses(batch)
            loss = parts["lm"] + 0.3 * parts["mtp1"] + 0.15 * parts["mtp2"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            for moe in model.moe_layers():
                assert moe.load is not None
                load = moe.load.float()
                moe.gate.e_score_correction_bias += a.bias_rate * torch.sign(load.mean() - load)
        if step % 25 == 0 or step == a.steps - 1:
            el = time.perf_counter() - loop_start
            row = {"step": step, "t": el, **{k: v.item() for k, v in parts.items()}, "gnorm": gnorm.item(),
                   "lr": lr_at(step), "tok_s": (step + 1) * a.batch * a.seq / el}
            curve.append(row)
            log(f"step {step}/{a.steps} lm {row['lm']:.3f} mtp1 {row['mtp1']:.3f} mtp2 {row['mtp2']:.3f} "
                f"gnorm {row['gnorm']:.2f} lr {row['lr']:.1e} | {row['tok_s']:,.0f} tok/s")
        if (step + 1) % a.eval_every == 0 or step == a.steps - 1:
            ev = {"step": step, **evaluate()}
            evals.append(ev)
            log(f"held-out {ev}")
            if best is None or ev["lm"] < best[0]:
                best = (ev["lm"], step, {k: v.detach().clone() for k, v in model.state_dict().items()})
    train_s = time.perf_counter() - loop_start
    if best is not None:
        model.load_state_dict(best[2])
    final = evaluate()
    log(f"kept step {best[1] if best else step}: {final}")
    state = {k: v.float().cpu().numpy() for k, v in model.state_dict().items()}
    bos, eos = special_ids(a.data)
    report = {
        "args": {k: str(v) for k, v in vars(a).items()}, "config": asdict(cfg), "params": n_params,
        "steps_run": step + 1, "kept_step": best[1] if best else step, "train_seconds": train_s,
        "tokens_seen": (step + 1) * a.batch * a.seq, "final_heldout": final, "curve": curve, "evals": evals,
        "torch": torch.__version__, "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
        "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30 if dev.type == "cuda" else None,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "train_log.json").write_text(json.dumps(report, indent=1))
    pieces = pack(state, cfg.experts, a.out, {"hf_config": cfg.hf_config(bos, eos), "train": final})
    log(f"packed {len(pieces)} pieces into {a.out}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
