"""Settings and command-line text a careless user could give (docs/settings.md): integers longer than
Python's 4300-digit int() limit, megabyte values that a warning must not echo in full, and bytes that
are not UTF-8 on the command line or stdin — each one line of diagnostic, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import strata
from strata.config import Config, ConfigWarning
from strata.convert import make_random_strata

VOCAB = 300
TINY = dict(vocab_size=VOCAB, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)
ECHO_LIMIT = 300  # a diagnostic's length when the value it quotes is clipped to ~80 characters


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_random_strata(TINY, seed=7, path=tmp_path_factory.mktemp("probe") / "m.gguf")


@pytest.mark.parametrize("name", ["STRATA_THREADS", "STRATA_CONTEXT", "STRATA_DRAFT_STEPS"])
def test_integers_past_4300_digits(name: str) -> None:
    config, diagnostics = Config.parse_env({name: "9" * 5000})
    assert len(diagnostics) == 1 and diagnostics[0].startswith(f"{name}: 999")
    assert "(5000 characters) is outside" in diagnostics[0] and len(diagnostics[0]) < ECHO_LIMIT
    assert config == Config()
    # Leading zeros do not change the value: 000…01 is 1.
    config, diagnostics = Config.parse_env({name: "0" * 5000 + "16"})
    field = {"STRATA_THREADS": "threads", "STRATA_CONTEXT": "context_length",
             "STRATA_DRAFT_STEPS": "draft_steps"}[name]
    assert diagnostics == [] and getattr(config, field) == 16
    with pytest.raises(strata.ConfigError):
        Config.from_env({name: "-" + "9" * 5000}, strict=True)


@pytest.mark.parametrize(("name", "value"), ids=lambda v: str(v)[:24], argvalues=[
    ("STRATA_BACKEND", "x" * 100_000),
    ("STRATA_SPECULATIVE", "y" * 100_000),
    ("STRATA_THREADS", "z" * 100_000),
    ("STRATA_DRAFT_CHAINED", "w" * 100_000),
    ("STRATA_MOCE_BONUS", "q" * 100_000),  # parsed by the C++ settings parser
    ("STRATA_MOCE_PROTECT", "9" * 100_000),
    ("STRATA_METAL_MTP_WIN", "0" * 100_000 + "7 x"),
    ("STRATA_METAL_SPEC_MIN_P_SCHEDULE", "0.5,0." + "x" * 100_000),
    ("STRATA_EXPERT_CACHE", "9" * 100_000 + "Q"),  # parsed by the C++ expert-store parser
    ("STRATA_" + "N" * 100_000, "1"),  # an unknown name
])
def test_warnings_echo_at_most_80_characters(name: str, value: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_env({name: value})
    texts = [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]
    assert len(texts) == 1, texts
    assert len(texts[0]) < ECHO_LIMIT, texts[0][:400]


def test_server_settings_are_not_unknown() -> None:
    _, diagnostics = Config.parse_env({"STRATA_API_KEY": "k", "STRATA_MAX_BODY": "1M"})
    assert diagnostics == []


def run_cli(*args: str | bytes, stdin: bytes | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "strata.cli", *args], input=stdin, capture_output=True,
                          timeout=120, env={**os.environ, **(env or {})})


def one_error(p: subprocess.CompletedProcess[bytes]) -> str:
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1, (p.returncode, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_cli_huge_integer_setting_is_a_warning(model_path: Path) -> None:
    p = run_cli("generate", "--model", str(model_path), "--max-tokens", "2", "hi",
                env={"STRATA_THREADS": "0" * 3 + "9" * 5000})
    err = p.stderr.decode()
    assert p.returncode == 0 and "Traceback" not in err, err
    assert "STRATA_THREADS" in err and len(err) < 2000


def test_cli_invalid_utf8_argument(model_path: Path) -> None:
    line = one_error(run_cli("generate", "--model", str(model_path), "--max-tokens", "2", b"caf\xe9 \xff"))
    assert "lone surrogate" in line and "not valid Unicode" in line


def test_cli_invalid_utf8_stdin(model_path: Path) -> None:
    model = str(model_path)
    line = one_error(run_cli("generate", "--model", model, "--max-tokens", "2", stdin=b"ok \xff\xfe"))
    assert "not valid U" in line  # UTF-8 (a strict stdin) or Unicode (surrogate-escaped, C locale)
    line = one_error(run_cli("chat", "--model", model, "--max-tokens", "2", stdin=b"hello \xc3\x28\n"))
    assert "not valid U" in line
