"""GEMV throughput per weight format against this machine's measured memory bandwidth.

Decode is memory-bound GEMV: every weight byte is read once per token. For each format this
multiplies a matrix much larger than the caches (default 256 MiB of weights, 4096 columns) with
one activation row, single-threaded and on all threads, and reports the weight bytes read per
second next to the streaming-read bandwidth measured in the same run (a plain sum over a 512 MiB
buffer, same thread counts). ``ratio`` = GEMV GB/s / read GB/s: 1.0 means the kernel keeps up with
memory. ``in-L2`` runs the same kernel single-threaded on a 512 KiB matrix that stays in cache: the
kernel's compute speed, the figure least disturbed by other processes on a shared machine.
Measures only; it never fails on speed.

    PYTHONPATH=python python3 bench/gemv_bench.py [--mib 256] [--cols 4096] [--reps 5] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import numpy.typing as npt

from strata import _strata, quant

TYPES = ["F32", "F16", "BF16", "Q8_0", "Q5_0", "Q4_0", "Q6_K", "Q5_K", "Q4_K", "Q3_K", "IQ4_XS", "Q2_K",
         "IQ3_XXS", "IQ2_XS"]
# Byte offsets of the fp16 scales inside a block (the rest of a block may be any bytes).
SCALE_FIELDS = {
    "Q4_0": [0],
    "Q5_0": [0],
    "Q8_0": [0],
    "Q2_K": [80, 82],
    "Q4_K": [0, 2],
    "Q6_K": [208],
    "IQ4_XS": [0],
    "Q3_K": [108],
    "Q5_K": [0, 2],
    "IQ2_XS": [0],
    "IQ3_XXS": [0],
}


def make_weights(type_name: str, rows: int, cols: int, rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    """Random valid rows: Gaussian values for float formats, random blocks with sane scales otherwise."""
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
    return raw.reshape(rows, nb * ts)


def time_gemv(
    w: npt.NDArray[np.uint8],
    type_name: str,
    rows: int,
    cols: int,
    x: npt.NDArray[np.float32],
    threaded: bool,
    reps: int,
) -> float:
    quant.gemv(w, type_name, (rows, cols), x, threaded=threaded)  # warm: scratch, page tables, pool
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        quant.gemv(w, type_name, (rows, cols), x, threaded=threaded)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256, help="weight bytes per matrix (MiB)")
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5, help="timed calls per case (best is reported)")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()

    threads = int(_strata.threads())
    load_before = os.getloadavg()[0]
    print(
        f"ISA {_strata.active_isa()}, {threads} threads, {os.cpu_count()} CPUs; weights ~{args.mib} MiB per "
        f"matrix, {args.cols} columns; best of {args.reps}; read bandwidth measured next to each format"
    )

    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.cols, dtype=np.float32)
    results = []
    for type_name in args.types.split(","):
        stride = quant.row_bytes(type_name, args.cols)
        rows = max(1, (args.mib << 20) // stride)
        w = make_weights(type_name, rows, args.cols, rng)
        nbytes = w.nbytes
        # Each GEMV is timed right after the streaming read with the same thread count, so the
        # ratio compares the two under the same (shared-machine) conditions.
        bw1 = quant.read_bandwidth(512 << 20, 1, args.reps)
        g1 = nbytes / time_gemv(w, type_name, rows, args.cols, x, False, args.reps) / 1e9
        bwn = quant.read_bandwidth(512 << 20, threads, args.reps)
        tn = time_gemv(w, type_name, rows, args.cols, x, True, args.reps)
        gn = nbytes / tn / 1e9
        del w
        # The same kernel on a matrix that stays in L2: its compute speed, without memory.
        small_rows = max(1, (512 << 10) // stride)
        ws = make_weights(type_name, small_rows, args.cols, rng)
        gc = ws.nbytes / time_gemv(ws, type_name, small_rows, args.cols, x, False, 20 * args.reps) / 1e9
        bpw = 8.0 * stride / args.cols
        results.append((type_name, bpw, rows, g1, bw1, gn, bwn, rows * args.cols / tn / 1e9, gc))
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
            f"\n{'format':<8}{'bits/w':>7}{'rows':>8}{'1thr GB/s':>11}{'read':>7}{'ratio':>7}"
            f"{f'{threads}thr GB/s':>11}{'read':>7}{'ratio':>7}{'Gw/s':>7}{'inL2 GB/s':>11}"
        )
        for name, bpw, rows, g1, bw1, gn, bwn, gw, gc in results:
            print(
                f"{name:<8}{bpw:>7.2f}{rows:>8}{g1:>11.1f}{bw1:>7.1f}{g1 / bw1:>7.2f}"
                f"{gn:>11.1f}{bwn:>7.1f}{gn / bwn:>7.2f}{gw:>7.1f}{gc:>11.1f}"
            )


if __name__ == "__main__":
    main()
