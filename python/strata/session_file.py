"""The session file format (SPEC §2.9): versioned, checksummed, tied to one model, written atomically.

Layout (little-endian; docs/sessions.md has the full description and the reasons):

====== ======= ==========================================================================
offset size    field
====== ======= ==========================================================================
0      8       magic ``b"STRATASS"``
8      4       u32 format version (``FORMAT_VERSION``)
12     4       u32 flags (0; a reader refuses unknown flags)
16     32      model fingerprint (:func:`model_fingerprint`)
48     8       u64 length M of the metadata
56     8       u64 number N of tokens
64     M       metadata: UTF-8 JSON object (n_past, seed, RNG state, sampling, config, stats, extra)
64+M   4·N     tokens, int32
end-32 32      sha256 of every byte before it
====== ======= ==========================================================================

:func:`read_session_file` checks everything (a regular file; the header's sizes against the file's
length and against fixed maxima before reading the rest, so a huge or endless file costs 64 bytes of
reading; the checksum before parsing; the fingerprint; the metadata's nesting depth; every field's
type and range) and returns a plain :class:`SessionState`; it never touches a session, so a refused
file changes nothing. :func:`write_session_file` writes atomically and removes temporary files left
by saves that were killed (each save holds a lock on its temporary file while it lives).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import struct
import tempfile
from dataclasses import dataclass, field
from typing import Any

from strata.errors import FormatError, IOFailure

__all__ = ["FORMAT_VERSION", "MAGIC", "SessionState", "model_fingerprint", "read_session_file",
           "write_session_file"]

MAGIC = b"STRATASS"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sII32sQQ")
_DIGEST = 32
_MAX_META = 64 << 20  # metadata is a few KB; anything near this is not a session file
_MAX_TOKENS = 1 << 22  # 4 Mi tokens: beyond the largest context strata runs (STRATA_CONTEXT ≤ 1 Mi)
_MAX_DEPTH = 32  # JSON nesting of the metadata (it needs 3; json would recurse itself to death at ~1000)
_SAMPLES_PER_TENSOR = 4
_SAMPLE_BYTES = 256
_U64 = 1 << 64


@dataclass
class SessionState:
    """What a session file holds, parsed and validated (model-independent checks only)."""

    tokens: list[int]
    n_past: int
    seed: int
    rng_state: tuple[int, int, int, int]
    sampling: dict[str, Any]
    config: dict[str, Any]
    stats: dict[str, Any]
    model_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ fingerprint
_fingerprints: dict[tuple[str, int, int], bytes] = {}


def model_fingerprint(path: str | os.PathLike[str]) -> bytes:
    """sha256 of the GGUF's header, metadata and tensor-info region plus samples of every tensor's data.

    The region before the tensor data names the architecture, every hyper-parameter, the tokenizer and
    each tensor's name, type, shape and offset; the samples (4 × 256 bytes spread over each tensor)
    tell apart files that share all of that but not their weights (two random or fine-tuned models of
    one shape). Reading is a few KB per tensor, so it costs little even for very large files; the
    result is cached per (path, size, mtime).
    """
    from strata.gguf import GGUFFile

    real = os.path.realpath(os.fspath(path))
    try:
        st = os.stat(real)
    except OSError as exc:
        raise IOFailure(f"{real}: cannot stat the model file: {exc.strerror or exc}") from None
    key = (real, st.st_size, st.st_mtime_ns)
    cached = _fingerprints.get(key)
    if cached is not None:
        return cached
    g = GGUFFile(real)
    h = hashlib.sha256()
    try:
        with open(real, "rb") as f:
            h.update(f.read(g.data_offset))
            for t in g.tensors:
                n = t.nbytes
                for i in range(_SAMPLES_PER_TENSOR):
                    f.seek(t.offset + (n - min(n, _SAMPLE_BYTES)) * i // max(1, _SAMPLES_PER_TENSOR - 1))
                    h.update(f.read(min(n, _SAMPLE_BYTES)))
    except OSError as exc:
        raise IOFailure(f"{real}: cannot read the model file: {exc.strerror or exc}") from None
    digest = h.digest()
    _fingerprints[key] = digest
    return digest


# ------------------------------------------------------------------------------------------ write
def encode_session(fingerprint: bytes, state: SessionState) -> bytes:
    meta = {
        "model_name": state.model_name,
        "n_past": state.n_past,
        "seed": state.seed,
        "rng_state": list(state.rng_state),
        "sampling": state.sampling,
        "config": state.config,
        "stats": state.stats,
        "extra": state.extra,
    }
    try:
        meta_bytes = json.dumps(meta, sort_keys=True, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise FormatError(f"session state is not serialisable as JSON: {exc}") from None
    tokens = struct.pack(f"<{len(state.tokens)}i", *state.tokens)
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, fingerprint, len(meta_bytes), len(state.tokens))
    body = header + meta_bytes + tokens
    return body + hashlib.sha256(body).digest()


def write_session_file(path: str | os.PathLike[str], fingerprint: bytes, state: SessionState) -> None:
    """Write atomically: a temporary file in the same directory, fsync, rename over ``path``, fsync the
    directory. On any failure the temporary file is removed and an existing ``path`` is left as it was.

    The temporary file is locked (``flock``) while this save lives, so temporary files of ``path``
    that nobody holds are left over from a killed save; they are removed first."""
    data = encode_session(fingerprint, state)
    target = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(target)
    prefix = "." + os.path.basename(target) + "."
    _remove_stale_temps(directory, prefix)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed, after the rename
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, target)
            tmp = None
        _fsync_dir(directory)
    except OSError as exc:
        raise IOFailure(f"{target}: cannot write the session file: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _remove_stale_temps(directory: str, prefix: str) -> None:
    """Remove ``<prefix>*.tmp`` files that no live save holds a lock on (left by a killed save)."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        full = os.path.join(directory, name)
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: a save is writing it now
            os.unlink(full)
        except OSError:
            pass
        finally:
            os.close(fd)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # a platform that cannot open directories: the rename itself is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------- read
def read_session_file(
    path: str | os.PathLike[str], fingerprint: bytes, model_label: str = ""
) -> SessionState:
    """Read and validate a session file made for the model with ``fingerprint``.

    Raises ``FormatError`` ("<path>: <problem>") for anything wrong with the file and ``IOFailure``
    when it cannot be read.
    """
    name = os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it is refused just below.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise IOFailure(f"{name}: cannot read the session file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FormatError(f"{name}: not a regular file ({_file_kind(st.st_mode)}); a session file is "
                                  "a regular file written by Session.save")
            os.set_blocking(fd, True)
            data = f.read(_HEADER.size)
            _check_header(data, st.st_size, FormatError, name)  # sizes known: the rest is bounded
            data += f.read(st.st_size - len(data) + 1)  # one byte more tells a file that grew
        except OSError as exc:
            raise IOFailure(f"{name}: cannot read the session file: {exc.strerror or exc}") from None
    return decode_session(data, fingerprint, name, model_label)


def _file_kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character "
                       "device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _check_header(data: bytes, size: int, error: type[Exception], name: str) -> tuple[int, int, int, bytes]:
    """(version, meta_len, n_tokens, fingerprint) of a header whose sizes agree with a file of ``size``
    bytes and stay under the fixed maxima; ``error("<name>: ...")`` otherwise."""
    def bad(what: str) -> Exception:
        return error(f"{name}: {what}")

    if data[: len(MAGIC)] != MAGIC[: len(data)]:
        raise bad("not a strata session file (bad magic; expected 'STRATASS')")
    if size < _HEADER.size + _DIGEST or len(data) < _HEADER.size:
        raise bad(f"truncated session file ({size} bytes; header and checksum alone take "
                  f"{_HEADER.size + _DIGEST})")
    _, version, flags, file_fp, meta_len, n_tokens = _HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        newer = " (written by a newer strata)" if version > FORMAT_VERSION else ""
        raise bad(f"session format version {version} is not supported{newer}; this strata reads version "
                  f"{FORMAT_VERSION}")
    if flags != 0:
        raise bad(f"unknown header flags 0x{flags:08x}")
    if meta_len > _MAX_META:
        raise bad(f"metadata length {meta_len} is implausible (corrupted header?)")
    if n_tokens > _MAX_TOKENS:
        raise bad(f"{n_tokens} tokens is implausible (at most {_MAX_TOKENS}; corrupted header?)")
    expected = _HEADER.size + meta_len + 4 * n_tokens + _DIGEST
    if size != expected:
        what = "truncated" if size < expected else "has trailing bytes"
        raise bad(f"{what}: the header describes {expected} bytes ({meta_len} of metadata, {n_tokens} "
                  f"tokens) but the file has {size}")
    return version, meta_len, n_tokens, file_fp


def decode_session(
    data: bytes, fingerprint: bytes, name: str = "<memory>", model_label: str = ""
) -> SessionState:
    def bad(what: str) -> FormatError:
        return FormatError(f"{name}: {what}")

    _, meta_len, n_tokens, file_fp = _check_header(data, len(data), FormatError, name)
    body = data[:-_DIGEST]
    if hashlib.sha256(body).digest() != data[-_DIGEST:]:
        raise bad("checksum mismatch: the file is corrupted")
    if file_fp != fingerprint:
        label = f" ({model_label})" if model_label else ""
        raise bad(f"made for a different model (fingerprint {file_fp.hex()[:16]}…); this session's model"
                  f"{label} has fingerprint {fingerprint.hex()[:16]}…")
    try:
        meta = json.loads(body[_HEADER.size : _HEADER.size + meta_len].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"metadata is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad(f"metadata is nested too deeply (more than {_MAX_DEPTH} levels)") from None
    if not isinstance(meta, dict):
        raise bad("metadata is not a JSON object")
    if _depth(meta) > _MAX_DEPTH:
        raise bad(f"metadata is nested too deeply (more than {_MAX_DEPTH} levels)")
    tokens = list(struct.unpack_from(f"<{n_tokens}i", body, _HEADER.size + meta_len))
    return _state_from(meta, tokens, bad)


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= _MAX_DEPTH:
                stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


def _state_from(meta: dict[str, Any], tokens: list[int], bad: Any) -> SessionState:
    def get(key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in meta:
            raise bad(f"metadata lacks '{key}'")
        v = meta[key]
        if (isinstance(v, bool) and kind is int) or not isinstance(v, kind):
            raise bad(f"metadata '{key}' has the wrong type ({type(v).__name__})")
        return v

    n_past = get("n_past", int)
    if not 0 <= n_past <= len(tokens):
        raise bad(f"n_past = {n_past} is outside [0, {len(tokens)}] (the number of tokens)")
    if any(t < 0 for t in tokens):
        raise bad("a token id is negative")
    seed = get("seed", int)
    if not 0 <= seed < _U64:
        raise bad(f"seed {seed} is outside [0, 2^64)")
    rng = get("rng_state", list)
    if len(rng) != 4 or any(isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < _U64 for w in rng):
        raise bad("rng_state must be 4 integers in [0, 2^64)")
    return SessionState(
        tokens=tokens, n_past=n_past, seed=seed, rng_state=(rng[0], rng[1], rng[2], rng[3]),
        sampling=get("sampling", dict), config=get("config", dict), stats=get("stats", dict),
        model_name=str(meta.get("model_name", "")), extra=get("extra", dict),
    )
