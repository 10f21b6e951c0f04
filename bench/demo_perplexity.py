"""Held-out perplexity of a strata GGUF through the C++ engine, beside the PyTorch reference.

Both read the same windows of heldout.bin (strata_train.evaluate's rule) from the same GGUF (the
reference dequantizes its weights), so the two numbers must agree; the demo model's doc records them.

    PYTHONPATH=python python bench/demo_perplexity.py python/strata/models/strata-demo.gguf \
        --data .data/stdlib --windows 48
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
from tqdm import tqdm

from strata import _strata
from strata_train.evaluate import load_model, load_split, text_metrics, window_starts


def engine_nll(path: str, tokens: np.ndarray, starts: np.ndarray, seq_len: int, threads: int) -> float:
    engine = _strata.Engine(path, n_threads=threads, max_ctx=seq_len)
    total, count = 0.0, 0
    for s in tqdm(starts, desc="engine", unit="window"):
        window = np.asarray(tokens[s : s + seq_len], dtype=np.int32)
        engine.rollback(0)
        logits = np.asarray(engine.eval(window.tolist(), start_pos=0, logits="all"), dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        total -= float(logp[np.arange(seq_len - 1), window[1:]].sum())
        count += seq_len - 1
    return total / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--data", default=".data/stdlib")
    ap.add_argument("--windows", type=int, default=48)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    import torch

    model, _ = load_model(args.model)
    seq_len = model.cfg.context_length
    tokens = load_split(args.data, "heldout")
    starts = window_starts(len(tokens), seq_len, args.windows)

    t0 = time.perf_counter()
    nll_engine = engine_nll(args.model, tokens, starts, seq_len, args.threads)
    t_engine = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch.set_num_threads(max(1, args.threads) if args.threads else torch.get_num_threads())
    ref = text_metrics(model, tokens, seq_len=seq_len, max_windows=args.windows, batch=8)
    t_ref = time.perf_counter() - t0
    out = {
        "windows": len(starts),
        "seq_len": seq_len,
        "engine_nll": nll_engine,
        "engine_perplexity": math.exp(nll_engine),
        "reference_nll": ref["nll"],
        "reference_perplexity": ref["perplexity"],
        "engine_seconds": round(t_engine, 1),
        "reference_seconds": round(t_ref, 1),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
