"""What streaming-aware verification windows (``STRATA_MOCE_WINDOW``, docs/routing.md) cost and save,
teacher-forced: a held-out text is fed as verification windows of ``rows`` tokens (the pending token and
``rows - 1`` drafts that are all accepted — the most exposure the rule can have), rows >= 1 marked as
draft rows, every row's logits scored against the next token. Per expert store and window log-bonus λw
it reports the perplexity of the text as the verifier sees it (λw = 0 is plain decoding's, exactly),
the expert MiB read per token and the distinct experts a window requests per layer; a row count of 1
(plain steps, no draft rows) is the drafter-off baseline. Measures only; results in docs/benchmarks.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from strata import _strata
from strata.bench.experts import _log_softmax_at, drop_page_cache
from strata.config import Config


@dataclass
class WindowResult:
    store: str            # "mmap" or "stream 25%"
    rows: int             # rows per window (1 = plain steps)
    log_bonus: float      # λw (0 = off)
    tokens: int           # scored tokens
    ppl: float
    mib_per_token: float  # expert bytes read per token (stream mode)
    experts_per_window: float  # distinct experts per (window, main layer)
    tok_s: float


def heldout_tokens(model_path: str | Path, n: int) -> list[int]:
    """The first n tokens of the held-out stdlib prompts (``bench spec``'s), through the model's tokenizer."""
    from strata.bench.drafter_quant import heldout_prompts
    from strata.gguf import GGUFFile
    from strata.tokenizer import Tokenizer

    tok = Tokenizer.from_gguf_metadata(GGUFFile(model_path).metadata)
    ids = [int(i) for i in tok.encode("\n\n".join(heldout_prompts(n_chars=100_000)))]
    if len(ids) < n:
        raise ValueError(f"the held-out prompts give {len(ids)} tokens, the benchmark needs {n}")
    return ids[:n]


def _engine(model_path: str | Path, store: str, threads: int, ctx: int, log_bonus: float) -> Any:
    """A native engine for one run: the store ("mmap" or "stream FRACTION[ direct]") and λw as Config."""
    cfg: dict[str, Any] = {"moce_window": log_bonus}
    parts = store.split()
    if parts[0] == "stream":
        cfg.update(expert_mode="stream", expert_cache=parts[1], expert_io_threads=4,
                   expert_direct_io="on" if "direct" in parts[2:] else "auto")
    return _strata.Engine(str(model_path), n_threads=threads, max_ctx=ctx,
                          settings=Config(**cfg).native())


def run_one(model_path: str | Path, tokens: Sequence[int], store: str, rows: int, log_bonus: float, *,
            prompt: int = 64, threads: int = 0, align: int = 0) -> WindowResult:
    """Prefill ``prompt`` tokens, then feed the rest in windows of ``rows`` (rows >= 1 draft rows). The
    scored tokens are the next ``(len - 1 - prompt)`` rounded down to a multiple of ``align`` (default
    ``rows``), so runs with different window sizes and the same ``align`` score the same tokens."""
    align = align or rows
    if align % rows:
        raise ValueError(f"align {align} is not a multiple of rows {rows}")
    end = prompt + (len(tokens) - 1 - prompt) // align * align  # the last window's last row
    drop_page_cache(model_path)
    eng = _engine(model_path, store, threads, len(tokens) + 8, log_bonus)
    main_layers = int(eng.hparams["layers"])
    eng.eval(list(tokens[:prompt]), logits="none")
    eng.reset_expert_stats()
    eng.set_route_trace(True)
    nll, n, distinct, layer_windows, seconds = 0.0, 0, 0, 0, 0.0
    i = prompt
    while i + rows <= end:
        t0 = time.perf_counter()
        logits = eng.eval(list(tokens[i:i + rows]), start_pos=i, logits="all",
                          draft_from_row=1 if rows > 1 else None)
        seconds += time.perf_counter() - t0
        logits = np.asarray(logits).reshape(rows, -1)
        for r in range(rows):
            nll -= _log_softmax_at(logits[r], tokens[i + r + 1])
        for layer in eng.route_trace()[:main_layers]:
            distinct += len(np.unique(layer["ids"]))
            layer_windows += 1
        n += rows
        i += rows
    tot = eng.expert_stats()["total"]
    return WindowResult(store=store, rows=rows, log_bonus=log_bonus, tokens=n, ppl=math.exp(nll / n),
                        mib_per_token=tot["bytes_read"] / n / (1 << 20),
                        experts_per_window=distinct / max(layer_windows, 1),
                        tok_s=n / seconds if seconds > 0 else 0.0)


def run(model_path: str | Path, *, stores: list[str], rows: int, log_bonuses: list[float], n_tokens: int,
        prompt: int = 64, threads: int = 0) -> list[WindowResult]:
    tokens = heldout_tokens(model_path, n_tokens)
    out = []
    for store in stores:
        out.append(run_one(model_path, tokens, store, 1, 0.0, prompt=prompt, threads=threads, align=rows))
        for lb in [0.0, *[b for b in log_bonuses if b > 0]]:
            out.append(run_one(model_path, tokens, store, rows, lb, prompt=prompt, threads=threads))
    return out


def render(results: list[WindowResult]) -> str:
    lines = ["| store | rows per window | λw | perplexity | vs λw = 0 | expert MiB/token | distinct experts "
             "per window·layer | tok/s |", "|" + "---|" * 8]
    base: dict[tuple[str, int], float] = {}
    for r in results:
        if r.log_bonus == 0:
            base[(r.store, r.rows)] = r.ppl
    for r in results:
        b = base.get((r.store, r.rows))
        rel = f"{100 * (r.ppl / b - 1):+.2f} %" if b else "-"
        lines.append(f"| {r.store} | {r.rows} | {r.log_bonus:g} | {r.ppl:.4f} | {rel} | "
                     f"{r.mib_per_token:.2f} | "
                     f"{r.experts_per_window:.2f} | {r.tok_s:.1f} |")
    return "\n".join(lines)


def as_json(results: list[WindowResult]) -> list[dict[str, Any]]:
    return [asdict(r) for r in results]
