"""Sessions (SPEC §2.9): save / load / reset from Python and the CLI (python/strata/session_file.py).

Exactness: a session saved mid-way and loaded into a new session continues with the very tokens the
uninterrupted session produces, greedy and sampled, with speculation on. Robustness: truncated,
corrupted, foreign and wrong-model files raise FormatError naming the file, and the session they were
loaded into generates exactly what an untouched control does.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import re
import struct
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

import strata
from strata import session_file
from strata.cli.__main__ import main
from strata.convert import (
    agreeing_strata_tensors,
    byte_level_tokenizer,
    make_random_strata,
    write_strata_gguf,
)

VOCAB = 300
TINY = dict(vocab_size=VOCAB, d=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, gated=True,
            sink_count=2, sliding_window=4, indexer_heads=2, indexer_dim=8, indexer_top_k=3,
            rope_theta=10000.0, rope_dim=8,
            n_experts=8, n_experts_used=2, expert_ffn=32, shared_ffn=32, hc_count=4, hc_sinkhorn_iters=3,
            hc_eps=1e-6, rms_eps=1e-6, mtp=True, mtp_vocab_ids=None, context_length=256)
CHAT_TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}[assistant]{% endif %}")


def agreeing_model(path: Path, scale: float = 0.05, seed: int = 5) -> Path:
    """Small block outputs and an MTP that nearly copies the main head: drafts are often accepted, so
    speculative rounds accept, partially accept and roll back."""
    t = agreeing_strata_tensors(TINY, scale, seed=seed)
    base = byte_level_tokenizer(VOCAB)

    def tok(writer) -> None:  # noqa: ANN001 - a gguf writer
        base(writer)
        writer.add_chat_template(CHAT_TEMPLATE)

    return write_strata_gguf(t, TINY, path, tokenizer=tok)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sessions")
    return {
        "agree": agreeing_model(root / "agree.gguf"),
        "random": make_random_strata(TINY, seed=1, path=root / "random.gguf"),
        "other": make_random_strata(TINY, seed=2, path=root / "other.gguf"),  # same shape, other weights
    }


@pytest.fixture(scope="module")
def model(paths: dict[str, Path]) -> strata.Model:
    return strata.Model(paths["agree"])


def policy(temperature: float, seed: int = 11) -> strata.SamplingPolicy:
    return strata.SamplingPolicy(temperature=temperature, top_p=0.95, repetition_penalty=1.1, seed=seed)


def run(session: strata.Session, prompt: str, n: int) -> str:
    return "".join(session.generate(prompt, max_tokens=n))


# ---------------------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("temperature", [0.0, 0.9])
@pytest.mark.parametrize("speculative", [True, False])
def test_loaded_session_continues_with_identical_tokens(model: strata.Model, tmp_path: Path,
                                                        temperature: float, speculative: bool) -> None:
    cfg = strata.Config(speculative=speculative)
    control = model.session(config=cfg, sampling=policy(temperature))
    run(control, "hello world", 24)
    run(control, " and", 40)

    first = model.session(config=cfg, sampling=policy(temperature))
    run(first, "hello world", 24)
    f = tmp_path / "s.strata"
    first.save(f)
    # a new session with other settings and another seed: load adopts the saved ones
    second = model.session(config=strata.Config(speculative=not speculative, draft_steps=5),
                           sampling=policy(0.3, seed=99))
    second.load(f)
    assert second.tokens == first.tokens
    assert second.speculative == speculative and second.sampling == policy(temperature)
    assert second.seed == first.seed and second.stats == first.stats
    run(second, " and", 40)
    assert second.tokens == control.tokens
    if speculative:
        assert sum(second.stats.accepted) > 0  # rounds really accepted drafts after the load


def test_save_in_the_middle_of_a_generation(model: strata.Model, tmp_path: Path) -> None:
    """Saved between two pieces of an unfinished generation: the loaded session continues as the
    original does when it abandons that generation and continues with a new call."""
    s = model.session(sampling=policy(0.8))
    it = s.generate("abc", max_tokens=60)
    for _ in range(15):
        next(it)
    s.save(tmp_path / "mid")
    loaded = model.session()
    loaded.load(tmp_path / "mid")
    assert loaded.tokens == s.tokens
    run(s, "", 30)
    run(loaded, "", 30)
    assert loaded.tokens == s.tokens
    with pytest.raises(strata.InvalidArgument, match="superseded"):
        next(it)


def test_chat_after_load_reuses_cells(model: strata.Model, tmp_path: Path) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    control = model.session(sampling=policy(0.7))
    reply = "".join(control.chat(msgs, max_tokens=20))
    msgs2 = [*msgs, {"role": "assistant", "content": reply}, {"role": "user", "content": "more"}]
    s = model.session(sampling=policy(0.7))
    "".join(s.chat(msgs, max_tokens=20))
    s.save(tmp_path / "c", extra={"chat_messages": msgs})
    loaded = model.session()
    assert loaded.load(tmp_path / "c") == {"chat_messages": msgs}
    a = "".join(control.chat(msgs2, max_tokens=20))
    b = "".join(loaded.chat(msgs2, max_tokens=20))
    assert a == b and loaded.tokens == control.tokens
    # the re-prefill left the final streams of every row in the engine, so the loaded session may keep
    # cells the control had to re-evaluate (docs/sessions.md); the tokens are the same either way
    assert loaded.stats.cached_tokens >= control.stats.cached_tokens


def test_empty_and_prompt_only_sessions_round_trip(model: strata.Model, tmp_path: Path) -> None:
    s = model.session(sampling=policy(0.5))
    s.save(tmp_path / "empty")
    run(s, "xyz", 0)  # evaluates the prompt only: n_past == len(tokens)
    s.save(tmp_path / "prompt")
    control = model.session(sampling=policy(0.5))
    run(control, "xyz", 0)
    run(control, "", 12)
    loaded = model.session()
    loaded.load(tmp_path / "empty")
    assert loaded.tokens == ()
    loaded.load(tmp_path / "prompt")
    run(loaded, "", 12)
    assert loaded.tokens == control.tokens


# -------------------------------------------------------------------------------------------- reset
def test_reset_equals_a_fresh_session(model: strata.Model, tmp_path: Path) -> None:
    fresh = model.session(sampling=policy(0.9))
    run(fresh, "the cat", 30)
    s = model.session(sampling=policy(0.9))
    run(s, "a completely different prompt", 40)
    s.reset()
    assert s.tokens == () and s._engine.n_past == 0
    assert not any(s._engine.mtp_cell_valid(c) for c in range(50))  # the drafter's view is gone
    run(s, "the cat", 30)
    assert s.tokens == fresh.tokens
    # a loaded session resets to its saved seed
    s.save(tmp_path / "r")
    other = model.session(sampling=policy(0.9, seed=5))
    other.load(tmp_path / "r")
    other.reset()
    run(other, "the cat", 30)
    assert other.tokens == fresh.tokens


@pytest.mark.parametrize("how", ["finished", "abandoned", "streaming"])
def test_a_dropped_session_is_freed_at_once(model: strata.Model, how: str) -> None:
    """A session and its engine go as soon as the caller drops them, not at the cyclic collector's next
    pass (a big model's engine holds gigabytes; a loop of sessions ran out of memory before)."""
    gc.disable()
    try:
        s = model.session(sampling=policy(0.9))
        it = s.generate("the cat", max_tokens=12)
        if how == "finished":
            "".join(it)
        else:
            next(it)
        if how != "streaming":  # streaming: the caller still holds the generator, then drops both
            del it
        ref = weakref.ref(s)
        del s
        if how == "streaming":
            assert ref() is not None  # the live generator keeps its session
            del it
        assert ref() is None
    finally:
        gc.enable()


# ------------------------------------------------------------------------------------ refused files
@pytest.fixture()
def saved(model: strata.Model, tmp_path: Path) -> tuple[Path, bytes]:
    s = model.session(sampling=policy(0.9, seed=3))
    run(s, "ab", 6)
    path = tmp_path / "small.strata"
    s.save(path)
    return path, path.read_bytes()


def victim(model: strata.Model) -> tuple[strata.Session, list[int]]:
    """A session mid-conversation, and what it generates next when nothing disturbs it."""
    control = model.session(sampling=policy(0.9, seed=21))
    run(control, "zz", 10)
    run(control, "", 10)
    s = model.session(sampling=policy(0.9, seed=21))
    run(s, "zz", 10)
    return s, list(control.tokens)


def refused(s: strata.Session, path: Path, data: bytes, match: str) -> None:
    path.write_bytes(data)
    before = s.tokens
    with pytest.raises(strata.FormatError, match=match) as info:
        s.load(path)
    assert str(info.value).startswith(str(path))
    assert s.tokens == before


def test_truncated_files_are_refused(model: strata.Model, saved: tuple[Path, bytes], tmp_path: Path) -> None:
    _, data = saved
    s, expected = victim(model)
    lengths = sorted({0, 1, 7, 8, 9, 63, 64, 65, len(data) - 33, len(data) - 32, len(data) - 1,
                      *np.linspace(0, len(data) - 1, 40).astype(int).tolist()})
    for n in lengths:
        refused(s, tmp_path / "t.strata", data[:n], "truncated|bad magic")
    run(s, "", 10)
    assert list(s.tokens) == expected


def test_flipped_bytes_are_refused(model: strata.Model, saved: tuple[Path, bytes], tmp_path: Path) -> None:
    _, data = saved
    s, expected = victim(model)
    for i in np.linspace(0, len(data) - 1, 50).astype(int).tolist():
        for bit in (0x01, 0x80):
            bad = bytearray(data)
            bad[i] ^= bit
            refused(s, tmp_path / "f.strata", bytes(bad), "checksum|magic|version|flags|truncated|trailing|"
                    "implausible|different model")
    refused(s, tmp_path / "f.strata", data + b"\0", "trailing")
    run(s, "", 10)
    assert list(s.tokens) == expected


def rechecksummed(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()


def test_magic_version_and_model_are_checked(model: strata.Model, paths: dict[str, Path],
                                              saved: tuple[Path, bytes], tmp_path: Path) -> None:
    _, data = saved
    s, expected = victim(model)
    p = tmp_path / "x.strata"
    refused(s, p, b"GGUF" + data[4:], "not a strata session file")
    refused(s, p, rechecksummed(data[:8] + struct.pack("<I", 2) + data[12:-32]), "version 2 .*newer")
    # the same session saved for another model of the same shape and tokenizer
    other = strata.Model(paths["other"])
    o = other.session()
    run(o, "ab", 4)
    o.save(p)
    refused(s, p, p.read_bytes(), "different model")
    # well-formed but inconsistent content (checksum valid)
    meta_len, n_tok = struct.unpack_from("<QQ", data, 48)
    meta = re.sub(rb'"n_past": \d+', b'"n_past": 99', data[64 : 64 + meta_len])
    body = data[:48] + struct.pack("<QQ", len(meta), n_tok) + meta + data[64 + meta_len : -32]
    refused(s, p, rechecksummed(body), "n_past")
    toks = data[64 + meta_len : -32]
    body = data[:64 + meta_len] + struct.pack("<i", VOCAB + 5) + toks[4:]
    refused(s, p, rechecksummed(body), "vocabulary")
    run(s, "", 10)
    assert list(s.tokens) == expected


def test_fingerprint_sees_weights_not_only_the_header(paths: dict[str, Path]) -> None:
    a = session_file.model_fingerprint(paths["random"])
    assert a == session_file.model_fingerprint(paths["random"])
    assert a != session_file.model_fingerprint(paths["other"])


# ------------------------------------------------------------------------------------- atomic write
@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_a_failed_write_leaves_the_old_file(model: strata.Model, saved: tuple[Path, bytes],
                                            monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    path, data = saved
    s = model.session()
    run(s, "something else entirely", 8)

    def boom(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    if failing == "write":
        class Broken:  # the temporary file refuses the data (a full disk)
            def __init__(self, fd: int) -> None:
                self.fd = fd

            def __enter__(self) -> Broken:
                return self

            def __exit__(self, *_exc: object) -> None:
                os.close(self.fd)

            def write(self, _data: bytes) -> int:
                raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fdopen", lambda fd, _mode: Broken(fd))
    else:
        monkeypatch.setattr(os, failing, boom)
    with pytest.raises(strata.IOFailure, match="No space left"):
        s.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == data
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left behind


# ---------------------------------------------------------------------------------------------- CLI
def cli(args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        stdin: str | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_generate_save_and_load(model: strata.Model, paths: dict[str, Path], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    m = str(paths["agree"])
    a, b = tmp_path / "a", tmp_path / "b"
    flags = ["--model", m, "--temperature", "0.8", "--seed", "4", "--max-tokens", "12"]
    assert cli(["generate", "hello", *flags, "--save", str(a)], monkeypatch, capsys)[0] == 0
    rc, out, _ = cli(["generate", "--model", m, "--max-tokens", "12", "--load", str(a), "--save", str(b)],
                     monkeypatch, capsys)
    assert rc == 0
    # The command line's policy: the recommended one with the flags given on top.
    control = model.session(sampling=strata.SamplingPolicy.recommended(seed=4).replace(temperature=0.8))
    run(control, "hello", 12)
    run(control, "", 12)
    loaded = model.session()
    loaded.load(b)
    assert loaded.tokens == control.tokens
    a.write_bytes(a.read_bytes()[:-1])
    rc, _, err = cli(["generate", "--model", m, "--load", str(a)], monkeypatch, capsys)
    assert rc == 1 and err.startswith(f"error: {a}: truncated")


def test_cli_chat_save_and_load(paths: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    m = str(paths["agree"])
    f = tmp_path / "chat.strata"
    rc, _, err = cli(["chat", "--model", m, "--max-tokens", "8"], monkeypatch, capsys,
                     stdin=f"hi\n/save {f}\n/load {tmp_path / 'missing'}\n")
    assert rc == 0 and f"(saved to {f})" in err and "error:" in err
    rc, _, err = cli(["chat", "--model", m, "--max-tokens", "8"], monkeypatch, capsys,
                     stdin=f"/load {f}\nmore\n")
    assert rc == 0 and f"(loaded {f}: 2 messages)" in err
    loaded = strata.Model(paths["agree"]).session()
    assert loaded.load(f)["chat_messages"][0] == {"role": "user", "content": "hi"}
