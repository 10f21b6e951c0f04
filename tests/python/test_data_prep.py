"""strata_train.data: the demo model's corpus, held-out split, tokenizer and token files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from strata.tokenizer import CHATML_TEMPLATE, tokenizer_metadata
from strata.tokenizer import Tokenizer as StrataTokenizer
from strata_train.data import collect_corpus, load_manifest, load_split, main, prepare
from strata_train.heldout import heldout_key, is_heldout

RATE = 0.25  # high, so the small fake tree has several held-out files

MODULE = '''"""Module {i}: helpers for case {i}."""

import os


def func_{i}(x, y={i}):
    """Return a value; unicode in docs: café 日本 🎉."""
    if x > {i}:
        return [x * k for k in range(y)]
    return {{"key_{i}": x, "tab": "\\t", "crlf": "a\\r\\nb"}}


class Thing{i}(object):
    def method(self):
        return func_{i}(self, {i}) or os.sep
'''


def make_fake_stdlib(root: Path) -> None:
    """A small tree shaped like CPython's Lib/, with every kind of file the collector must handle."""
    for i in range(24):
        (root / f"mod{i:02d}.py").write_text(MODULE.format(i=i), encoding="utf-8")
    for pkg in ("email", "json", "xml/dom"):
        (root / pkg).mkdir(parents=True, exist_ok=True)
        (root / pkg / "__init__.py").write_text("", encoding="utf-8")  # blank: skipped
        (root / pkg / "core.py").write_text(MODULE.format(i=len(pkg)) + f"# {pkg}\n", encoding="utf-8")
    (root / "test").mkdir()
    (root / "test" / "test_mod.py").write_text("import unittest\n\nclass T(unittest.TestCase): pass\n")
    (root / "test" / "bad_coding.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")  # not UTF-8
    (root / "tokens.py").write_text('SEP = "<|endoftext|>"  # spelled in text\nCHAT = "<|im_start|>"\n')
    (root / "site-packages" / "thirdparty").mkdir(parents=True)
    (root / "site-packages" / "thirdparty" / "x.py").write_text("THIRD_PARTY = 1\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "cached.py").write_text("CACHED = 1\n")
    (root / "config-3.11-x86_64-linux-gnu").mkdir()
    (root / "config-3.11-x86_64-linux-gnu" / "python-config.py").write_text("GENERATED = 1\n")
    (root / "_sysconfigdata__linux_x86_64-linux-gnu.py").write_text("build_time_vars = {}\n")
    (root / "notes.txt").write_text("not python\n")


@pytest.fixture(scope="module")
def fake_stdlib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("Lib")
    make_fake_stdlib(root)
    return root


@pytest.fixture(scope="module")
def prepared(fake_stdlib: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("out")
    prepare(out, source=fake_stdlib, vocab_size=400, heldout_rate=RATE, progress=False)
    return out


def test_outputs_and_manifest(prepared: Path, fake_stdlib: Path) -> None:
    m = load_manifest(prepared)
    for name in ("tokenizer.json", "train.bin", "heldout.bin", "manifest.json"):
        assert (prepared / name).is_file()
    assert m["dtype"] == "<u2"
    assert m["tokenizer"]["vocab_size"] == 400
    assert m["tokenizer"]["special_tokens"] == {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2}
    assert m["source"] == str(fake_stdlib.resolve())
    assert m["python"]["version"]
    skipped = dict(m["skipped"])
    assert skipped["test/bad_coding.py"] == "not UTF-8"
    assert skipped["email/__init__.py"] == "blank"
    docs = {d[0] for split in m["splits"].values() for d in split["documents"]}
    assert "test/test_mod.py" in docs  # test suites are part of the corpus by default
    assert not any(p.startswith(("site-packages", "__pycache__", "config-", "_sysconfigdata")) for p in docs)
    assert len(docs) == 24 + 3 + 2  # modules, package cores, test_mod.py and tokens.py
    for split in ("train", "heldout"):
        tokens = load_split(prepared, split)
        assert tokens.size == m["splits"][split]["tokens"]
        assert tokens.size == (prepared / f"{split}.bin").stat().st_size // 2


def test_heldout_rule_and_disjoint_splits(prepared: Path) -> None:
    m = load_manifest(prepared)
    train = [d[0] for d in m["splits"]["train"]["documents"]]
    held = [d[0] for d in m["splits"]["heldout"]["documents"]]
    assert held == m["heldout_files"]
    assert 0 < len(held) < len(train)
    assert not set(held) & set(train)
    assert all(is_heldout(p, RATE) for p in held)
    assert not any(is_heldout(p, RATE) for p in train)
    assert train == sorted(train) and held == sorted(held)
    # The rule depends on the path alone.
    assert heldout_key("abc.py") == heldout_key("abc.py") != heldout_key("abd.py")
    assert all(0.0 <= heldout_key(f"f{i}.py") < 1.0 for i in range(100))
    with pytest.raises(ValueError, match="rate"):
        is_heldout("x.py", 1.5)


def test_token_files_decode_back_to_the_sources(prepared: Path, fake_stdlib: Path) -> None:
    m = load_manifest(prepared)
    tok = Tokenizer.from_file(str(prepared / "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    for split in ("train", "heldout"):
        tokens = load_split(prepared, split)
        bounds = np.flatnonzero(tokens == eot)
        docs = m["splits"][split]["documents"]
        assert len(bounds) == len(docs)  # exactly one separator per document, none from the text
        assert tokens[-1] == eot
        start = 0
        for (path, doc_start, n), end in zip(docs, bounds, strict=True):
            assert (doc_start, n) == (start, end - start)
            ids = tokens[start:end].tolist()
            assert tok.decode(ids, skip_special_tokens=False) == (fake_stdlib / path).read_text(
                encoding="utf-8"
            )
            start = end + 1


def test_deterministic(prepared: Path, fake_stdlib: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    prepare(again, source=fake_stdlib, vocab_size=400, heldout_rate=RATE, progress=False)
    first, second = load_manifest(prepared), load_manifest(again)
    assert first["sha256"] == second["sha256"]
    assert (prepared / "manifest.json").read_bytes() == (again / "manifest.json").read_bytes()


def test_gguf_tokenizer_reproduces_the_token_files(prepared: Path, fake_stdlib: Path) -> None:
    hf = Tokenizer.from_file(str(prepared / "tokenizer.json"))
    tok = StrataTokenizer.from_gguf_metadata(tokenizer_metadata(hf, chat_template=CHATML_TEMPLATE))
    assert tok.pre == "qwen2"
    m = load_manifest(prepared)
    train = load_split(prepared, "train")
    for path, start, n in m["splits"]["train"]["documents"]:
        text = (fake_stdlib / path).read_text(encoding="utf-8")
        assert tok.encode(text, parse_special=False) == train[start : start + n].tolist()


def test_no_tests_and_cap(fake_stdlib: Path) -> None:
    corpus = collect_corpus(fake_stdlib, include_tests=False, heldout_rate=RATE, progress=False)
    assert not any(f.relpath.startswith("test/") for f in corpus.train + corpus.heldout)
    full = collect_corpus(fake_stdlib, heldout_rate=RATE, progress=False)
    total = sum(f.nbytes for f in full.train)
    capped = collect_corpus(fake_stdlib, heldout_rate=RATE, max_train_bytes=total // 2, progress=False)
    kept = sum(f.nbytes for f in capped.train)
    assert 0 < kept <= total // 2
    assert capped.dropped_by_cap and not set(capped.dropped_by_cap) & {f.relpath for f in capped.train}
    assert [f.relpath for f in capped.train] == sorted(f.relpath for f in capped.train)
    assert [f.relpath for f in capped.heldout] == [
        f.relpath for f in full.heldout
    ]  # cap never touches held-out


def test_cli(fake_stdlib: Path, tmp_path: Path) -> None:
    env = dict(os.environ)  # conftest's PYTHONPATH reaches strata and strata_train
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "strata_train.data",
        "prepare",
        "--source",
        str(fake_stdlib),
        "--out",
        str(out),
    ]
    done = subprocess.run([*cmd, "--vocab-size", "300", "--quiet"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "manifest.json").read_text())["tokenizer"]["vocab_size"] == 300
    assert main(["prepare", "--source", str(tmp_path / "missing"), "--out", str(out), "--quiet"]) == 2
    assert (
        main(["prepare", "--source", str(fake_stdlib), "--out", str(out), "--vocab-size", "10", "--quiet"])
        == 2
    )
