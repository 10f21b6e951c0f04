"""Session files a user or an attacker could hand to ``Session.load`` (docs/sessions.md, "Limits"):
endless or huge files (``/dev/zero``, a 10 GB sparse file) refused from their header with bounded
memory, a FIFO refused without hanging, metadata nested 200k deep refused without a RecursionError,
forged settings refused naming the file, and temporary files of killed saves cleaned by the next save."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

import strata
from strata import session_file
from strata.convert import make_random_strata

VOCAB = 300
TINY = dict(vocab_size=VOCAB, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=False, mtp_vocab_ids=None, context_length=256)
HEADER = struct.Struct("<8sII32sQQ")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> strata.Model:
    return strata.Model(make_random_strata(TINY, seed=2, path=tmp_path_factory.mktemp("probe") / "m.gguf"))


def session_bytes(fingerprint: bytes, meta: bytes, tokens: list[int]) -> bytes:
    body = HEADER.pack(b"STRATASS", 1, 0, fingerprint, len(meta), len(tokens)) + meta
    body += struct.pack(f"<{len(tokens)}i", *tokens)
    return body + hashlib.sha256(body).digest()


def bounded_load(model: strata.Model, path: Path | str) -> str:
    """Load ``path``; the FormatError's message, checked to come fast and with little memory."""
    session = model.session()
    tracemalloc.start()
    t = time.monotonic()
    try:
        with pytest.raises(strata.FormatError) as e:
            session.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - t < 5.0
    assert peak < 4 << 20, f"loading {path} allocated {peak} bytes"
    return str(e.value)


def test_dev_zero_is_refused(model: strata.Model) -> None:
    msg = bounded_load(model, "/dev/zero")
    assert msg == ("/dev/zero: not a regular file (a character device); a session file is a regular file "
                   "written by Session.save")


def test_ten_gigabyte_sparse_files_are_refused_from_the_header(model: strata.Model, tmp_path: Path) -> None:
    zeros = tmp_path / "zeros.session"
    with open(zeros, "wb") as f:
        f.truncate(10 << 30)
    assert "bad magic" in bounded_load(model, zeros)
    # A header that describes the 10 GB exactly: refused by its implausible token count before reading.
    claims = tmp_path / "claims.session"
    n_tokens = ((10 << 30) - HEADER.size - 32) // 4
    with open(claims, "wb") as f:
        f.write(HEADER.pack(b"STRATASS", 1, 0, bytes(32), 0, n_tokens))
        f.truncate(HEADER.size + 4 * n_tokens + 32)
    assert f"{n_tokens} tokens is implausible" in bounded_load(model, claims)
    # And one whose metadata length is the lie.
    meta = tmp_path / "meta.session"
    with open(meta, "wb") as f:
        f.write(HEADER.pack(b"STRATASS", 1, 0, bytes(32), 10 << 30, 0))
        f.truncate(HEADER.size + (10 << 30) + 32)
    assert "metadata length" in bounded_load(model, meta)


def test_fifo_is_refused_without_hanging(model: strata.Model, tmp_path: Path) -> None:
    fifo = tmp_path / "s.session"
    os.mkfifo(fifo)
    code = (f"import strata\nm = strata.Model({model.path!r})\n"
            f"try:\n    m.session().load({str(fifo)!r})\nexcept strata.FormatError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (f"{fifo}: not a regular file (a FIFO); a session file is a regular file "
                                "written by Session.save")


def test_deeply_nested_metadata_is_refused(model: strata.Model, tmp_path: Path) -> None:
    fp = session_file.model_fingerprint(model.path)
    path = tmp_path / "nested.session"
    path.write_bytes(session_bytes(fp, b"[" * 200_000 + b"]" * 200_000, []))
    msg = bounded_load(model, path)
    assert msg.startswith(f"{path}: metadata is nested too deeply")
    # Nested within json's own limits but deeper than any session: refused all the same.
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    ok = {"model_name": "", "n_past": 0, "seed": 1, "rng_state": [1, 2, 3, 4], "sampling": {}, "config": {},
          "stats": {}, "extra": {"a": deep}}
    path.write_bytes(session_bytes(fp, json.dumps(ok).encode(), []))
    with pytest.raises(strata.FormatError, match="nested too deeply"):
        model.session().load(path)


@pytest.mark.parametrize(("config", "why"), [
    # this model has no MTP layer
    ({"speculative": True}, "the saved settings cannot be used with this model"),
    ({"draft_steps": 99}, "the saved settings are invalid"),
    ({"backend": "quantum"}, "the saved settings are invalid"),
    ({"expert_cache": "lots"}, "the saved settings are invalid"),
])
def test_forged_settings_name_the_file(model: strata.Model, tmp_path: Path, config: dict, why: str) -> None:
    session = model.session()
    good = tmp_path / "good.session"
    session.save(good)
    state = session_file.read_session_file(good, session_file.model_fingerprint(model.path))
    forged = tmp_path / "forged.session"
    session_file.write_session_file(forged, session_file.model_fingerprint(model.path),
                                    dataclasses.replace(state, config={**state.config, **config}))
    with pytest.raises(strata.FormatError) as e:
        session.load(forged)
    assert str(e.value).startswith(f"{forged}: {why}")


def test_stale_temporary_files_are_removed_by_the_next_save(model: strata.Model, tmp_path: Path) -> None:
    target = tmp_path / "chat.session"
    session = model.session()
    # What a save killed between writing and renaming leaves behind (nobody holds its lock).
    stale = [tmp_path / f".chat.session.{i}abc.tmp" for i in range(3)]
    for s in stale:
        s.write_bytes(b"half a session")
    # A save in progress elsewhere holds its lock: that file must survive.
    live = tmp_path / ".chat.session.live.tmp"
    live.write_bytes(b"being written")
    other = tmp_path / ".other.session.x.tmp"  # another file's temporary: not ours to judge
    other.write_bytes(b"x")
    with open(live, "rb") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        session.save(target)
    assert not any(s.exists() for s in stale)
    assert live.exists() and other.exists()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([".chat.session.live.tmp", ".other.session.x.tmp", "chat.session"])
    model.session().load(target)


def test_a_killed_save_leaves_a_temp_that_the_next_save_removes(model: strata.Model, tmp_path: Path) -> None:
    target = tmp_path / "k.session"
    code = ("import os, signal, strata\nfrom strata import session_file\n"
            "real = os.replace\n"
            "def die(*a):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
            "session_file.os.replace = die\n"
            f"strata.Model({model.path!r}).session().save({str(target)!r})\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert p.returncode == -9
    left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(".k.session.")
    model.session().save(target)
    assert [p.name for p in tmp_path.iterdir()] == ["k.session"]
