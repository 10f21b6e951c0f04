"""The README's main job on the shipped demo model, through the real ``strata`` console script: with the
default sampling the output over code prompts does not loop (>= 60 % distinct non-empty lines on the
README's prompt and four others), and ``--temp 0`` is exactly greedy decoding."""

from __future__ import annotations

import pytest

import strata
from test_cli_options import run_strata

README_PROMPT = "def fibonacci(n):"
CODE_PROMPTS = [README_PROMPT, "import os\n\ndef walk(root):", "class Stack:", "def read_config(path):",
                "import json\n\n\ndef load(path):"]


def distinct_line_share(text: str) -> float:
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert len(lines) >= 5, text  # enough lines for the share to mean something
    return len(set(lines)) / len(lines)


def test_readme_prompt_is_the_main_job() -> None:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f'strata generate "{README_PROMPT}" --stats' in readme


@pytest.mark.parametrize("prompt", CODE_PROMPTS)
def test_default_output_does_not_loop(prompt: str) -> None:
    # Default settings; the seed only makes the run repeatable (the default seed is random).
    for seed in ("1", "2"):
        proc = run_strata("generate", "-s", seed, prompt)
        assert proc.returncode == 0, proc.stderr
        assert distinct_line_share(proc.stdout) >= 0.6, proc.stdout


def test_temp_zero_is_exactly_greedy() -> None:
    proc = run_strata("generate", "--temp", "0", "-n", "96", README_PROMPT)
    model = strata.Model()
    want = "".join(model.session(sampling=strata.SamplingPolicy(), config=strata.Config(speculative=False))
                   .generate(README_PROMPT, max_tokens=96))
    assert proc.returncode == 0 and proc.stdout == want + ("" if want.endswith("\n") else "\n")
    # ... which is what loops: the reason the default samples (docs/sampling.md).
    assert distinct_line_share(want) < 0.6
