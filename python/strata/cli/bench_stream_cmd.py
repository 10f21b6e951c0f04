"""``python -m strata.cli bench stream-vs-llama``: strata's expert streaming against llama.cpp's mmap under
the same memory cgroup limit (tok/s, MiB read per token, perplexity change, a plot).

Registered in ``bench_cmd.BENCH_TOOLS``; the measurement is ``strata.bench.stream_cgroup``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def register(tools: SubParsers) -> None:
    p = tools.add_parser(
        "stream-vs-llama",
        help="strata expert streaming vs llama.cpp mmap under one memory cgroup limit (needs root)",
        description=(
            "Decode one GGUF (qwen3moe by default, --ds4 for a random DeepSeek-V4) teacher-forced with "
            "strata (stream mode, direct I/O, resident set = FRACTION of the experts, MOCE off and at "
            "--moce) and with llama.cpp (mmap), each in a child process inside a memory cgroup limited to "
            "the file's non-expert bytes + FRACTION x expert bytes + 256 MiB; the file is dropped from the "
            "page cache before each run. Reports decode tok/s, MiB read from storage per token "
            "(/proc/<pid>/io read_bytes), the decoding thread's blocked ms per token (off-CPU and not "
            "runnable: page faults and reads; meaningful with --threads 1), strata's expert stall, and "
            "perplexity against an unlimited run (strata's; llama.cpp's where strata refuses the file, "
            "which the strata rows then say). cgroup v1 or v2; creating one needs root. See "
            "docs/benchmarks.md."
        ),
    )
    p.add_argument("--model", type=Path, default=None,
                   help="a GGUF both engines may load (default: a random ~0.9 GB Q8_0 qwen3moe, built once "
                   "into --workdir)")
    p.add_argument("--ds4", action="store_true",
                   help="use a random DeepSeek-V4 (deepseek4) of V4-Flash's layer structure, ~2.6 GB Q8_0, "
                   "built once into --workdir (strata.bench.ds4_model; `bench ds4-model` writes it alone)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/strata-stream-bench"), help="where models go")
    p.add_argument("--fractions", type=_floats, default=None,
                   help="experts resident (0.25,0.5; with --ds4 0.1,0.25,0.5)")
    p.add_argument("--moce", type=_floats, default=[1.0], help="MOCE λ values to run besides 0 (1)")
    p.add_argument("--tokens", type=int, default=48, help="tokens decoded per run (48)")
    p.add_argument("--prompt", type=int, default=16, help="tokens prefilled first (16)")
    p.add_argument("--threads", type=int, default=2, help="threads for both engines (2)")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds before a run counts as thrashing (600)")
    p.add_argument("--no-llama", action="store_true", help="strata only")
    p.add_argument("--json", type=Path, default=None, help="also write the runs as JSON here")
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    p.add_argument("--plot", type=Path, default=None,
                   help="tok/s and MiB/token against the limit (matplotlib)")
    p.set_defaults(func=_run)


def _model(args: argparse.Namespace) -> Path:
    if args.model is not None:
        return Path(args.model)
    if args.ds4:
        from strata.bench.ds4_model import cached_ds4_model

        print("bench stream-vs-llama: the DeepSeek-V4 bench model (written once, ~2.6 GB)", file=sys.stderr)
        return cached_ds4_model(args.workdir)
    from strata.bench import llama_compare as lc

    shape = lc.MoeShape("stream", d=1024, layers=8, experts=64, experts_used=8, expert_ffn=512, vocab=32000,
                        heads=16, kv_heads=4, head_dim=128)
    return lc.cached_gguf(shape, args.workdir, "Q8_0", 0, log=lambda m: print(m, file=sys.stderr))


def _vocab_size(model: Path) -> int:
    """The vocabulary size from the file's tokenizer (any architecture, without loading an engine)."""
    from gguf import GGUFReader

    field = GGUFReader(str(model)).fields.get("tokenizer.ggml.tokens")
    if field is None:
        raise SystemExit(f"bench stream-vs-llama: {model} has no tokenizer.ggml.tokens")
    return len(field.data)


def _run(args: argparse.Namespace) -> int:
    from strata.bench import stream_cgroup as sc
    from strata.bench.llama_compare import prompt_tokens

    if not args.no_llama and importlib.util.find_spec("llama_cpp") is None:
        print("bench stream-vs-llama: llama_cpp is not importable (pip install llama-cpp-python, or "
              "--no-llama)", file=sys.stderr)
        return 2
    model = _model(args)
    fractions = args.fractions or ([0.1, 0.25, 0.5] if args.ds4 else [0.25, 0.5])
    experts, other = sc.expert_split(model)
    tokens = prompt_tokens(args.prompt + args.tokens + 1, _vocab_size(model), seed=1)
    ref = sc.run_one("strata", model, tokens, args.threads, 1.0, 0.0, args.prompt, None, args.timeout)
    runs, reference = [ref], "unlimited strata"
    if not args.no_llama:
        free = sc.run_one("llama", model, tokens, args.threads, 1.0, 0.0, args.prompt, None, args.timeout)
        free.engine = "llama.cpp"
        runs.append(free)
    if ref.error:
        print(f"bench stream-vs-llama: the unlimited strata run failed: {ref.error}", file=sys.stderr)
        if args.no_llama or runs[-1].error or not ref.error.startswith("strata refuses"):
            return 1
        ref, reference = runs[-1], "unlimited llama.cpp"  # strata's rows will say why they are empty
    for r in runs:
        if r.perplexity:
            r.ppl_change = r.perplexity / ref.perplexity - 1
    try:
        for f in fractions:
            limit = int(other + f * experts + sc.SLACK_BYTES)
            cases = [("strata", 0.0)] + [("strata", m) for m in args.moce if m] + \
                ([] if args.no_llama else [("llama.cpp", 0.0)])
            for engine, moce in cases:
                r = sc.run_one("strata" if engine == "strata" else "llama", model, tokens, args.threads, f,
                               moce, args.prompt, limit, args.timeout)
                r.engine = engine
                if r.perplexity:
                    r.ppl_change = r.perplexity / ref.perplexity - 1
                runs.append(r)
                print(sc.render([r], reference).splitlines()[-1], file=sys.stderr)
    except sc.CgroupUnavailable as e:
        print(f"bench stream-vs-llama: {e}; nothing measured under a limit", file=sys.stderr)
        return 1
    table = sc.render(runs, reference)
    head = (f"{model} ({model.stat().st_size / sc.MIB:.0f} MiB: experts {experts / sc.MIB:.0f} MiB, other "
            f"{other / sc.MIB:.0f} MiB), {args.tokens} tokens decoded after {args.prompt}, "
            f"{args.threads} threads")
    sys.stdout.write(head + "\n\n" + table + "\n")
    if args.markdown is not None:
        args.markdown.write_text(head + "\n\n" + table + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps({"model": str(model), "expert_bytes": experts, "other_bytes": other,
                                         "reference": reference, "runs": [asdict(r) for r in runs]},
                                        indent=1) + "\n")
    if args.plot is not None:
        sc.plot(runs, args.plot, f"{model.name}: {experts / sc.MIB:.0f} MiB experts, {args.threads} threads")
    return 0
