"""Broken or hostile model files refused at load with one clear error naming the file (never a hang,
a traceback or garbage output): non-finite hyper-parameters, a tokenizer larger than the vocabulary,
bad tokenizer metadata, a metadata key that is not UTF-8, a FIFO as the model path, and chat templates
that would run for minutes or produce gigabytes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import strata
from strata.chat_template import RENDER_SECONDS
from strata.convert import byte_level_tokenizer, make_random_strata
from strata.gguf import GGUFFile
from strata.tokenizer import Tokenizer

VOCAB = 300
TINY = dict(vocab_size=VOCAB, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)


def model_with(tmp_path: Path, name: str, tokenizer: Any = "bytes", **changes: Any) -> Path:
    return make_random_strata({**TINY, **changes}, seed=3, path=tmp_path / f"{name}.gguf",
                              tokenizer=tokenizer)


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "strata.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


# ------------------------------------------------------------------------------- hyper-parameters
@pytest.mark.parametrize(("field", "value", "key"), [
    ("rope_theta", float("inf"), "strata.rope.freq_base = inf"),
    ("rope_theta", float("nan"), "strata.rope.freq_base = nan"),
    ("rope_theta", 0.0, "strata.rope.freq_base = 0"),
    ("rms_eps", float("inf"), "strata.attention.layer_norm_rms_epsilon = inf"),
    ("hc_eps", float("-inf"), "strata.hyper_connection.epsilon = -inf"),
])
def test_non_finite_hparams_refused(tmp_path: Path, field: str, value: float, key: str) -> None:
    path = model_with(tmp_path, "bad-hp", **{field: value})
    with pytest.raises(strata.FormatError, match="must be finite") as e:
        strata.Model(path)
    assert str(e.value).startswith(str(path)) and key in str(e.value)
    assert key in one_error_line(cli("generate", "--model", str(path), "--max-tokens", "1", "hi"))


# ---------------------------------------------------------------------------------------- tokenizer
def test_tokenizer_larger_than_vocabulary_refused_at_load(tmp_path: Path) -> None:
    path = model_with(tmp_path, "big-tok", tokenizer=byte_level_tokenizer(VOCAB + 20))
    with pytest.raises(strata.FormatError) as e:
        strata.Model(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "320 tokens" in msg and "vocabulary has 300" in msg


def test_tokenizer_metadata_errors_name_the_file(tmp_path: Path) -> None:
    def fewer_types(writer: Any) -> None:
        writer.add_tokenizer_model("gpt2")
        writer.add_token_list([f"t{i}" for i in range(VOCAB)])
        writer.add_token_types([1] * 100)
        writer.add_token_merges([])

    path = model_with(tmp_path, "tok-types", tokenizer=fewer_types)
    with pytest.raises(strata.FormatError) as e:
        strata.Model(path)
    assert str(e.value) == f"{path}: {VOCAB} tokens but 100 token types"
    line = one_error_line(cli("generate", "--model", str(path), "--max-tokens", "1", "hi"))
    assert str(path) in line and "token types" in line


def test_non_utf8_metadata_key(tmp_path: Path) -> None:
    def odd_key(writer: Any) -> None:
        byte_level_tokenizer(VOCAB)(writer)
        writer.add_string("general.zzzzprobe", "v")

    path = model_with(tmp_path, "odd-key", tokenizer=odd_key)
    data = path.read_bytes()
    assert data.count(b"zzzzprobe") == 1
    path.write_bytes(data.replace(b"zzzzprobe", b"\xff\xfe\xfd\xfcprobe"))
    with pytest.raises(strata.FormatError, match="is not valid UTF-8") as e:
        GGUFFile(path)
    assert str(e.value).startswith(str(path))
    line = one_error_line(cli("inspect", str(path)))
    assert "metadata key" in line and "not valid UTF-8" in line


# -------------------------------------------------------------------------------------- FIFO path
def test_fifo_model_path_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    t = time.monotonic()
    line = one_error_line(cli("generate", "--model", str(fifo), "--max-tokens", "1", "hi", timeout=60))
    assert "not a regular file (a FIFO)" in line and str(fifo) in line
    line = one_error_line(cli("inspect", str(fifo), timeout=60))
    assert "a FIFO" in line
    assert time.monotonic() - t < 60
    with pytest.raises(strata.IOFailure, match="a FIFO"):
        strata.Model(fifo)


# --------------------------------------------------------------------------------- chat templates
def tokenizer_with(template: str) -> Tokenizer:
    symbols = [chr(c) for c in range(33, 127)]
    return Tokenizer(tokens=symbols, token_types=[1] * len(symbols), merges=[], pre="default",
                     chat_template=template)


MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(("template", "why"), ids=lambda v: str(v)[:40], argvalues=[
    # the probe: 10^10 iterations printing, 32 s and 3.3 GB before an empty message (whichever
    # limit comes first on a loaded machine)
    ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", ""),
    # output that outgrows the limit fast
    ("{% for i in range(100000) %}{{ messages[0]['content'] * 200 }}{% endfor %}", "more than"),
    # the same loops printing nothing: only the deadline can stop them
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "longer than"),
    ("{{ 'x' * 1000000000 }}", "more than"),
    ("{{ messages * 100000000 }}", "more than"),
    ("{{ 2 ** 100000000 }}", "too large"),
    ("{{ 10 ** 4096 ** 4096 }}", "too large"),  # jinja's ** is left-associative
    ("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
     "{{ ns.s }}", "more than"),
])
def test_runaway_chat_template_stops_with_a_reason(template: str, why: str) -> None:
    tok = tokenizer_with(template)
    t = time.monotonic()
    with pytest.raises(strata.InvalidArgument, match="chat template stopped: ") as e:
        tok.apply_chat_template(MESSAGES)
    assert why in str(e.value)
    assert time.monotonic() - t < RENDER_SECONDS + 3


def test_failing_template_says_why() -> None:
    with pytest.raises(strata.InvalidArgument, match=r"chat template failed: \w"):
        tokenizer_with("{{ raise_exception('roles must alternate') }}").apply_chat_template(MESSAGES)
    with pytest.raises(strata.InvalidArgument, match=r"chat template failed: \w"):
        tokenizer_with("{{ messages[5]['x'] }}").apply_chat_template(MESSAGES)


def test_sandbox_still_renders_real_templates() -> None:
    template = ("{% for m in messages %}{{ loop.index }}:{{ m['role'] | upper }}={{ m['content'] }};"
                "{% endfor %}{% for i in range(3) %}{{ i }}{% endfor %}{{ 'ab' * 2 }}{{ 2 ** 10 }}")
    text = tokenizer_with(template).apply_chat_template(MESSAGES * 2)
    assert text == "1:USER=hello;2:USER=hello;012abab1024"


def test_text_with_a_lone_surrogate_is_refused_by_encode() -> None:
    tok = tokenizer_with("")
    with pytest.raises(strata.InvalidArgument, match=r"lone surrogate U\+D800 at character 1"):
        tok.encode("a\ud800b")
    with pytest.raises(strata.InvalidArgument, match="lone surrogate"):
        tok.encode_batch(["fine", "\udcff"])
