"""strata against llama.cpp on one glm4moe GGUF with a trained nextn layer: decode tok/s with and
without MTP drafting, same threads, same greedy output (docs/benchmarks.md, "glm4moe with its MTP
layer: strata against llama.cpp's draft-mtp").

    PYTHONPATH=python python3 bench/glm_mtp_vs_llama.py \
        --model ~/.cache/strata/glm-mtp/glm-mtp-143m-q8_0.gguf \
        --llama-bin /path/to/llama.cpp/build/bin --threads 1,2 --runs 3 --tokens 128 --markdown

Every run is a fresh process (load time is not counted; each engine reports its own decode time):
strata's `generate --stats` (speculative off, on with --draft-steps, auto), llama.cpp's
`llama-completion` (no drafting) and `llama-speculative-simple --spec-type draft-mtp` (drafting,
--spec-draft-n-max). The runs are interleaved (one of each mode per prompt, prompt by prompt, run by
run) so that load from other jobs on a shared host falls on every mode alike; the table reports per
mode the median over runs of the tokens-per-second summed over prompts. Greedy (temperature 0, no
repetition penalty) in both; the generated texts are compared with strata's plain decoding.
With ``--short N`` every case also runs with N tokens, and the CPU time per decoded token is the
difference of the two runs' CPU seconds over the difference of their tokens (strata: this process,
every thread; llama.cpp: the child process), so load, warm-up and prompt cancel: on a shared host
it says what each engine costs when it runs, where tok/s also counts the time it waited for a core.
The prompts are held-out text of the demo data (.data/stdlib/heldout.bin, decoded).
llama.cpp is not part of strata: build its tools yourself (the commands are in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


@dataclass
class Mode:
    name: str
    engine: str  # strata | llama
    draft: int  # drafts per round (0: off; -1: strata's auto)


@dataclass
class Result:
    tokens: int
    seconds: float
    text: str
    drafted: int = 0
    accepted: int = 0
    rounds: int = 0
    acceptance: list[float] = field(default_factory=list)
    round_tokens: int = 0
    cpu: float = 0.0  # CPU seconds of the whole call (every thread; for llama.cpp the whole process)


def heldout_prompts(data: Path, n: int, length: int) -> list[str]:
    from tokenizers import Tokenizer

    manifest = json.loads((data / "manifest.json").read_text())
    toks = np.fromfile(data / "heldout.bin", dtype=np.dtype(manifest["dtype"]))
    tok = Tokenizer.from_file(str(data / "tokenizer.json"))
    starts = np.floor(np.linspace(0, len(toks) - length - 1, n)).astype(int)
    out = []
    for s in starts:
        text = tok.decode([int(t) for t in toks[s:s + length]])
        out.append(text[text.find("\n") + 1:] if "\n" in text[:-1] else text)  # start at a line
    return out


def run_strata(model: Any, prompt: str, threads: int, tokens: int, draft: int) -> Result:
    """One fresh session of a loaded strata.Model (warm: the caller ran one generation before)."""
    import strata

    cfg = strata.Config(speculative=False if draft == 0 else (None if draft < 0 else True), threads=threads,
                        draft_steps=draft if draft > 0 else 3)
    s = model.session(config=cfg, sampling=strata.SamplingPolicy(temperature=0.0, seed=1))
    c0 = _cpu(resource.RUSAGE_SELF)
    text = "".join(s.generate(prompt, max_tokens=tokens))
    cpu = _cpu(resource.RUSAGE_SELF) - c0
    st = s.stats
    # decode_seconds runs from the first generated token to the last (as llama.cpp's eval time)
    r = Result(st.generated_tokens - 1, st.decode_seconds, text, rounds=st.rounds)
    r.drafted, r.accepted = sum(st.drafted), sum(st.accepted)
    r.acceptance = [a / d if d else 0.0 for a, d in zip(st.accepted, st.drafted, strict=True)]
    r.round_tokens = st.round_tokens
    r.cpu = cpu
    return r


def run_llama(bin_dir: Path, model: Path, prompt: str, threads: int, tokens: int, draft: int) -> Result:
    common = ["-m", str(model), "-p", prompt, "-n", str(tokens), "-t", str(threads), "-tb", str(threads),
              "--temp", "0", "--repeat-penalty", "1", "-c", "2048", "-s", "1"]
    if draft == 0:
        cmd = [str(bin_dir / "llama-completion"), *common, "-no-cnv", "--no-display-prompt"]
    else:
        cmd = [str(bin_dir / "llama-speculative-simple"), *common, "--spec-type", "draft-mtp",
               "--spec-draft-n-max", str(draft), "--spec-draft-n-min", "0"]
    c0 = _cpu(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=True)
    cpu = _cpu(resource.RUSAGE_CHILDREN) - c0
    if draft == 0:
        m = re.search(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs", p.stderr)
        if m is None:
            raise RuntimeError(f"llama-completion: no eval time in\n{p.stderr[-3000:]}")
        # the runs exclude the first token (sampled from the prompt's logits)
        return Result(int(m.group(2)), float(m.group(1)) / 1e3, p.stdout, cpu=cpu)
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", p.stderr)
    d = re.search(r"n_drafted = (\d+)", p.stderr)
    a = re.search(r"n_accept  = (\d+)", p.stderr)
    if m is None or d is None or a is None:
        raise RuntimeError(f"llama-speculative-simple: no summary in\n{p.stderr[-3000:]}")
    text = p.stdout[p.stdout.find(prompt) + len(prompt):] if prompt in p.stdout else p.stdout
    return Result(int(m.group(1)), float(m.group(2)), text, drafted=int(d.group(1)), accepted=int(a.group(1)),
                  cpu=cpu)


def same_prefix(a: str, b: str) -> bool:
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--llama-bin", type=Path, required=True,
                   help="folder with llama-completion and llama-speculative-simple")
    p.add_argument("--data", type=Path, default=Path(".data/stdlib"))
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--prompt-tokens", type=int, default=96)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--strata-drafts", default="3,auto", help="strata drafting modes: draft counts, auto")
    p.add_argument("--llama-drafts", default="1,2,3", help="llama.cpp --spec-draft-n-max values")
    p.add_argument("--short", type=int, default=0,
                   help="also run every case with this many tokens and report CPU ms per decoded token as "
                        "the difference of the two (load, warm-up and prompt cancel); 0 = off")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args(argv)
    prompts = heldout_prompts(a.data, a.prompts, a.prompt_tokens)
    modes = [Mode("strata off", "strata", 0)]
    modes += [Mode(f"strata {d}", "strata", -1 if d == "auto" else int(d))
              for d in a.strata_drafts.split(",") if d]
    modes += [Mode("llama.cpp off", "llama", 0)]
    modes += [Mode(f"llama.cpp draft-mtp {d}", "llama", int(d)) for d in a.llama_drafts.split(",") if d]
    rows: list[dict[str, Any]] = []
    for threads in [int(t) for t in a.threads.split(",")]:
        runs: dict[str, list[list[Result]]] = {m.name: [] for m in modes}
        cpu_ms: dict[str, list[float]] = {m.name: [] for m in modes}
        import strata

        model = strata.Model(str(a.model))
        run_strata(model, prompts[0], threads, a.tokens, 0)  # warm-up (llama.cpp warms up too)
        for r in range(a.runs):
            per_mode: dict[str, list[Result]] = {m.name: [] for m in modes}
            short: dict[str, list[Result]] = {m.name: [] for m in modes}
            for prompt in prompts:
                for m in modes:
                    for n, into in ((a.tokens, per_mode), (a.short, short)):
                        if n <= 0:
                            continue
                        res = (run_strata(model, prompt, threads, n, m.draft) if m.engine == "strata"
                               else run_llama(a.llama_bin, a.model, prompt, threads, n, m.draft))
                        into[m.name].append(res)
            if a.short > 0:
                for name in cpu_ms:
                    d_cpu = sum(x.cpu for x in per_mode[name]) - sum(x.cpu for x in short[name])
                    d_tok = sum(x.tokens for x in per_mode[name]) - sum(x.tokens for x in short[name])
                    cpu_ms[name].append(1e3 * d_cpu / max(1, d_tok))
            for name, res_list in per_mode.items():
                runs[name].append(res_list)
                tps = sum(x.tokens for x in res_list) / sum(x.seconds for x in res_list)
                print(f"threads {threads} run {r}: {name}: {tps:.1f} tok/s", file=sys.stderr, flush=True)
        reference = [x.text for x in runs["strata off"][0]]
        for m in modes:
            tps = [sum(x.tokens for x in rl) / sum(x.seconds for x in rl) for rl in runs[m.name]]
            first = runs[m.name][0]
            same = all(same_prefix(t.text, ref) for t, ref in zip(first, reference, strict=True))
            row: dict[str, Any] = {"threads": threads, "mode": m.name, "tok_s_runs": tps,
                                   "tok_s": statistics.median(tps), "same_text": same}
            if m.engine == "strata" and m.draft != 0:
                rounds = sum(x.rounds for x in first)
                row["tokens_per_round"] = sum(x.round_tokens for x in first) / max(1, rounds)
                row["acceptance_all"] = sum(x.accepted for x in first) / max(1, sum(x.drafted for x in first))
                depth = max((len(x.acceptance) for x in first), default=0)
                row["acceptance"] = [
                    round(statistics.mean(x.acceptance[j] for x in first if len(x.acceptance) > j), 3)
                    for j in range(depth)]
            if m.engine == "llama" and m.draft != 0:
                drafted, accepted = sum(x.drafted for x in first), sum(x.accepted for x in first)
                toks = sum(x.tokens for x in first)
                row["tokens_per_round"] = toks / max(1, toks - accepted)
                row["acceptance_all"] = accepted / max(1, drafted)
            if cpu_ms[m.name]:
                row["cpu_ms_per_token_runs"] = cpu_ms[m.name]
                row["cpu_ms_per_token"] = statistics.median(cpu_ms[m.name])
            rows.append(row)
    strata_off = {r["threads"]: r["tok_s"] for r in rows if r["mode"] == "strata off"}
    for r in rows:
        r["vs_strata_off"] = r["tok_s"] / strata_off[r["threads"]]
    if a.json:
        a.json.write_text(json.dumps({"prompts": prompts, "rows": rows}, indent=1))
    if a.markdown:
        print("| threads | engine, mode | tok/s per run | median | × strata off | CPU ms/token (median) "
              "| tokens/round | acceptance | greedy text = strata off |")
        print("|---:|---|---|---:|---:|---:|---:|---|---|")
        for r in rows:
            acc = r.get("acceptance", r.get("acceptance_all", "-"))
            acc_s = acc if isinstance(acc, str) else (
                ", ".join(f"{x:.3f}" for x in acc) if isinstance(acc, list) else f"{acc:.3f} (all)")
            tpr = f"{r['tokens_per_round']:.2f}" if "tokens_per_round" in r else "-"
            cpu = f"{r['cpu_ms_per_token']:.2f}" if "cpu_ms_per_token" in r else "-"
            runs_s = ", ".join(f"{x:.1f}" for x in r["tok_s_runs"])
            print(f"| {r['threads']} | {r['mode']} | {runs_s} | {r['tok_s']:.1f} | {r['vs_strata_off']:.2f} "
                  f"| {cpu} | {tpr} | {acc_s} | {'yes' if r['same_text'] else 'NO'} |")
    else:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
