"""GEMV throughput per weight format against this machine's measured memory bandwidth.

Decode is memory-bound GEMV: every weight byte is read once per token. For each format this
multiplies a matrix much larger than the caches (default 256 MiB of weights, 4096 columns) with
one activation row, single-threaded and on all threads, and reports the weight bytes read per
second next to the streaming-read bandwidth measured in the same run (a plain sum over a 512 MiB
buffer, same thread counts). ``ratio`` = GEMV GB/s / read GB/s: 1.0 means the kernel keeps up with
memory. ``in-L2`` runs the same kernel single-threaded on a 512 KiB matrix that stays in cache: the
kernel's compute speed, the figure least disturbed by other processes on a shared machine.
Measures only; it never fails on speed.

``--cpu-time`` times the single-thread columns in process CPU time rather than wall time: on a host
shared with other jobs, time the process spent waiting for a core is then not counted.
``--acts N`` multiplies N activation rows at once (a verification window's rows: each 16-row group of
weights is read once for all of them); GB/s still counts the weight bytes once.
``--isas avx2,avx512`` runs every format once per kernel path (forced with ``force_isa``) so the
paths compare on the same matrices. A format written ``Q4_0_R16`` / ``Q8_0_R16`` / ``Q4_K_R16`` /
``IQ4_XS_R16`` is the plain format's random matrix repacked into the interleaved 16-row layout
(cpu/repack/repack.h) before timing: next to the plain format, the repack's speed-up.

    PYTHONPATH=python python3 bench/gemv_bench.py [--mib 256] [--cols 4096] [--reps 5] [--markdown]
        [--isas avx2,avx512] [--types Q4_0,Q4_0_R16,Q8_0,Q8_0_R16] [--acts 1]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from strata import _strata, quant

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q8_0_R16", "Q5_0", "Q5_0_R16", "Q5_1", "Q4_0", "Q4_0_R16", "IQ4_NL",
         "Q6_K", "Q6_K_R16", "Q5_K", "Q4_K", "Q4_K_R16", "Q3_K", "IQ4_XS", "IQ4_XS_R16", "Q2_K", "IQ3_XXS",
         "IQ2_XXS",
         "IQ2_XS", "IQ2_S", "IQ3_S", "IQ1_S", "IQ1_M"]
REPACKED = {"Q4_0_R16": "Q4_0", "Q5_0_R16": "Q5_0", "Q8_0_R16": "Q8_0", "Q4_K_R16": "Q4_K",
            "Q6_K_R16": "Q6_K", "IQ4_XS_R16": "IQ4_XS"}
# Byte offsets of the fp16 scales inside a block (the rest of a block may be any bytes).
SCALE_FIELDS = {
    "Q4_0": [0],
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "IQ4_NL": [0],
    "Q8_0": [0],
    "Q2_K": [80, 82],
    "Q4_K": [0, 2],
    "Q6_K": [208],
    "IQ4_XS": [0],
    "Q3_K": [108],
    "Q5_K": [0, 2],
    "IQ2_XS": [0],
    "IQ3_XXS": [0],
    "IQ2_XXS": [0],
    "IQ2_S": [0],
    "IQ3_S": [0],
    "IQ1_S": [0],
    "IQ1_M": [],  # its fp16 d is the top nibbles of the 4 scale words at bytes 48..55 (make_weights)
}


def make_weights(type_name: str, rows: int, cols: int, rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    """Random valid rows: Gaussian values for float formats, random blocks with sane scales otherwise;
    a repacked type's plain matrix in its interleaved layout."""
    if type_name in REPACKED:
        rows -= rows % 16
        plain = make_weights(REPACKED[type_name], rows, cols, rng)
        data, name = _strata.quant.repack(plain, REPACKED[type_name], rows, cols)
        assert name == type_name
        return np.asarray(data).reshape(rows, -1)
    if type_name in ("F32", "F16", "BF16"):
        out = np.empty((rows, quant.row_bytes(type_name, cols)), dtype=np.uint8)
        step = max(1, (1 << 22) // cols)
        for r in range(0, rows, step):
            x = rng.standard_normal((min(step, rows - r), cols), dtype=np.float32)
            out[r : r + len(x)] = quant.quantize(x, type_name)
        return out
    bs, ts = quant.block_size(type_name), int(_strata.quant.type_size(type_name))
    nb = cols // bs
    raw = rng.integers(0, 256, size=(rows, nb, ts), dtype=np.uint8)
    for off in SCALE_FIELDS[type_name]:
        raw[:, :, off : off + 2] = (
            rng.uniform(1e-3, 0.05, size=(rows, nb)).astype(np.float16).view(np.uint8).reshape(rows, nb, 2)
        )
    if type_name == "IQ1_M":
        d = rng.uniform(1e-3, 0.05, size=(rows, nb)).astype(np.float16).view(np.uint16)[..., None]
        words = raw[:, :, 48:56].copy().view("<u2")
        words = (words & 0x0FFF) | (((d >> np.array([0, 4, 8, 12], dtype=np.uint16)) & 0xF) << 12)
        raw[:, :, 48:56] = words.astype("<u2").view(np.uint8)
    return raw.reshape(rows, nb * ts)


def time_gemv(
    w: npt.NDArray[np.uint8],
    type_name: str,
    rows: int,
    cols: int,
    x: npt.NDArray[np.float32],
    threaded: bool,
    reps: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    quant.gemv(w, type_name, (rows, cols), x, threaded=threaded)  # warm: scratch, page tables, pool
    best = float("inf")
    for _ in range(reps):
        t0 = clock()
        quant.gemv(w, type_name, (rows, cols), x, threaded=threaded)
        best = min(best, clock() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256, help="weight bytes per matrix (MiB)")
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5, help="timed calls per case (best is reported)")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--acts", type=int, default=1, help="activation rows per call (a window's rows)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the 1-thread columns in process CPU time (a host shared with other jobs: "
                         "time the process was not running is not counted)")
    ap.add_argument("--isas", default="",
                    help="kernel paths to compare, e.g. avx2,avx512 (default: the active one)")
    args = ap.parse_args()

    threads = int(_strata.threads())
    load_before = os.getloadavg()[0]
    isas = [i for i in args.isas.split(",") if i] or [str(_strata.active_isa())]
    print(
        f"ISA {', '.join(isas)} (runnable: {', '.join(_strata.supported_isas())}), {threads} threads, "
        f"{os.cpu_count()} CPUs; weights ~{args.mib} MiB per matrix, {args.cols} columns; "
        f"{args.acts} activation row(s); best of {args.reps}; "
        "read bandwidth measured next to each format"
    )

    rng = np.random.default_rng(0)
    if args.acts < 1:
        ap.error("--acts must be >= 1")
    x = rng.standard_normal(args.cols if args.acts == 1 else (args.acts, args.cols), dtype=np.float32)
    results = []
    saved_isa = str(_strata.active_isa())
    for type_name, isa in ((t, i) for t in args.types.split(",") for i in isas):
        _strata.force_isa(isa)
        stride = quant.row_bytes(REPACKED.get(type_name, type_name), args.cols)
        rows = max(16, (args.mib << 20) // stride)
        w = make_weights(type_name, rows, args.cols, rng)
        w_rows = w.shape[0]
        nbytes = w.nbytes
        # Each GEMV is timed right after the streaming read with the same thread count, so the
        # ratio compares the two under the same (shared-machine) conditions.
        bw1 = quant.read_bandwidth(512 << 20, 1, args.reps)
        clock = time.process_time if args.cpu_time else time.perf_counter
        g1 = nbytes / time_gemv(w, type_name, w_rows, args.cols, x, False, args.reps, clock) / 1e9
        bwn = quant.read_bandwidth(512 << 20, threads, args.reps)
        tn = time_gemv(w, type_name, w_rows, args.cols, x, True, args.reps)
        gn = nbytes / tn / 1e9
        del w
        # The same kernel on a matrix that stays in L2: its compute speed, without memory.
        small_rows = max(16, (512 << 10) // stride)
        ws = make_weights(type_name, small_rows, args.cols, rng)
        tc = time_gemv(ws, type_name, ws.shape[0], args.cols, x, False, 20 * args.reps, clock)
        gc = ws.nbytes / tc / 1e9
        bpw = 8.0 * stride / args.cols
        gw = w_rows * args.cols / tn / 1e9
        results.append((f"{type_name} {isa}", bpw, w_rows, g1, bw1, gn, bwn, gw, gc))
    _strata.force_isa(saved_isa)
    print(
        f"load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
        "(other processes share the CPUs)"
    )

    if args.markdown:
        print(
            f"\n| format | bits/weight | rows x cols | 1 thread GB/s (read GB/s) | ratio "
            f"| {threads} threads GB/s (read GB/s) | ratio | Gweights/s ({threads} thr) "
            "| in-L2 GB/s (1 thr) |"
        )
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
        for name, bpw, rows, g1, bw1, gn, bwn, gw, gc in results:
            print(
                f"| {name} | {bpw:.2f} | {rows}x{args.cols} | {g1:.1f} ({bw1:.1f}) | {g1 / bw1:.2f} "
                f"| {gn:.1f} ({bwn:.1f}) | {gn / bwn:.2f} | {gw:.1f} | {gc:.1f} |"
            )
    else:
        print(
            f"\n{'format':<16}{'bits/w':>7}{'rows':>8}{'1thr GB/s':>11}{'read':>7}{'ratio':>7}"
            f"{f'{threads}thr GB/s':>11}{'read':>7}{'ratio':>7}{'Gw/s':>7}{'inL2 GB/s':>11}"
        )
        for name, bpw, rows, g1, bw1, gn, bwn, gw, gc in results:
            print(
                f"{name:<16}{bpw:>7.2f}{rows:>8}{g1:>11.1f}{bw1:>7.1f}{g1 / bw1:>7.2f}"
                f"{gn:>11.1f}{bwn:>7.1f}{gn / bwn:>7.2f}{gw:>7.1f}{gc:>11.1f}"
            )


if __name__ == "__main__":
    main()
