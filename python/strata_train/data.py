"""Data preparation for the demo model: CPython's standard library source -> tokenizer + token files.

    PYTHONPATH=python python -m strata_train.data prepare --out .data/stdlib

Corpus: every ``*.py`` file under the running interpreter's stdlib directory (``--source`` to use
another tree), test suites included (``--no-tests`` leaves them out), without site-packages and the
machine-generated build configuration; files that are not UTF-8 or are blank are skipped. Paths are
sorted, the held-out split follows :mod:`strata_train.heldout`, the tokenizer is trained on the train
split only, and every document ends with ``<|endoftext|>``. Outputs (all deterministic):
``tokenizer.json``, ``train.bin``, ``heldout.bin`` (little-endian uint16, or uint32 for vocabularies
over 65536) and ``manifest.json``. See docs/tokenizer.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from strata_train.heldout import DEFAULT_HELDOUT_RATE, HELDOUT_SALT, heldout_key, is_heldout
from strata_train.tokenizer_train import ENDOFTEXT, SPECIAL_TOKENS, train_bytelevel_bpe

MANIFEST_FORMAT = 1
DEFAULT_VOCAB_SIZE = 8192
# Cap on the training text. The whole 3.11 stdlib with tests is ~31 MB, so the cap only bites on a
# larger stdlib; it keeps the token files small enough to carry to a GPU machine (< 40 MB in all).
DEFAULT_MAX_TRAIN_BYTES = 48 * 1024 * 1024
# Directories never part of the corpus: installed third-party packages and bytecode caches.
EXCLUDED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
TEST_DIRS = frozenset({"test", "tests", "idle_test"})
ENCODE_BATCH_FILES = 32


@dataclass(frozen=True)
class SourceFile:
    relpath: str  # relative to the corpus root, "/" separated
    text: str

    @property
    def nbytes(self) -> int:
        return len(self.text.encode("utf-8"))


@dataclass
class Corpus:
    train: list[SourceFile]
    heldout: list[SourceFile]
    skipped: list[tuple[str, str]]  # (relpath, reason)
    dropped_by_cap: list[str]


def default_source() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _is_generated(rel_parts: Sequence[str]) -> bool:
    # Build-time files that differ per machine: _sysconfigdata_*.py and the config-X.Y-<platform>/ dir.
    name = rel_parts[-1]
    return name.startswith("_sysconfigdata_") or any(p.startswith("config-") for p in rel_parts[:-1])


def iter_python_files(source: Path, *, include_tests: bool) -> Iterator[str]:
    """Corpus-relative paths of the ``*.py`` files under ``source``, sorted, symlinks not followed."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        rel_dir = Path(dirpath).relative_to(source)
        dirnames[:] = [
            d for d in dirnames if d not in EXCLUDED_DIRS and (include_tests or d not in TEST_DIRS)
        ]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            rel = (rel_dir / name).as_posix()
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file() or _is_generated(rel.split("/")):
                continue
            found.append(rel)
    yield from sorted(found)


def collect_corpus(
    source: Path,
    *,
    include_tests: bool = True,
    heldout_rate: float = DEFAULT_HELDOUT_RATE,
    max_train_bytes: int = DEFAULT_MAX_TRAIN_BYTES,
    progress: bool = True,
) -> Corpus:
    """Read the corpus, split it into train/held-out and apply the training-size cap."""
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: corpus source directory not found")
    paths = list(iter_python_files(source, include_tests=include_tests))
    train: list[SourceFile] = []
    heldout: list[SourceFile] = []
    skipped: list[tuple[str, str]] = []
    for rel in tqdm(paths, desc="read sources", unit="file", disable=not progress):
        data = (source / rel).read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append((rel, "not UTF-8"))
            continue
        if not text.strip():
            skipped.append((rel, "blank"))
            continue
        (heldout if is_heldout(rel, heldout_rate) else train).append(SourceFile(rel, text))

    dropped: list[str] = []
    total = sum(f.nbytes for f in train)
    if total > max_train_bytes:
        # Keep a pseudo-random subset (by the held-out key, which is independent of the path order)
        # so the cap does not cut the alphabet short; the kept files stay in path order.
        kept: set[str] = set()
        used = 0
        for f in sorted(train, key=lambda f: heldout_key(f.relpath)):
            if used + f.nbytes <= max_train_bytes:
                kept.add(f.relpath)
                used += f.nbytes
        dropped = [f.relpath for f in train if f.relpath not in kept]
        train = [f for f in train if f.relpath in kept]
    return Corpus(train=train, heldout=heldout, skipped=skipped, dropped_by_cap=dropped)


def _encode_split(
    tok: Tokenizer, files: Sequence[SourceFile], dtype: np.dtype[Any], name: str, progress: bool
) -> tuple[np.ndarray, list[list[Any]]]:
    """Token array of a split (each document followed by <|endoftext|>) and its [path, start, n] index."""
    eot = tok.token_to_id(ENDOFTEXT)
    assert eot is not None
    chunks: list[np.ndarray] = []
    index: list[list[Any]] = []
    pos = 0
    with tqdm(
        total=sum(f.nbytes for f in files),
        desc=f"encode {name}",
        unit="B",
        unit_scale=True,
        disable=not progress,
    ) as bar:
        for start in range(0, len(files), ENCODE_BATCH_FILES):
            batch = files[start : start + ENCODE_BATCH_FILES]
            for f, enc in zip(
                batch, tok.encode_batch([f.text for f in batch], add_special_tokens=False), strict=True
            ):
                ids = np.asarray(enc.ids + [eot], dtype=dtype)
                chunks.append(ids)
                index.append([f.relpath, pos, len(enc.ids)])
                pos += len(ids)
                bar.update(f.nbytes)
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, dtype=dtype)
    return tokens, index


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _corpus_digest(files: Sequence[SourceFile]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.relpath.encode() + b"\0" + f.text.encode("utf-8") + b"\0")
    return h.hexdigest()


def prepare(
    out: Path,
    *,
    source: Path | None = None,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    include_tests: bool = True,
    heldout_rate: float = DEFAULT_HELDOUT_RATE,
    max_train_bytes: int = DEFAULT_MAX_TRAIN_BYTES,
    min_frequency: int = 2,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the whole recipe into ``out``; returns the manifest (also written to manifest.json)."""
    source = (source or default_source()).resolve()
    t0 = time.perf_counter()
    corpus = collect_corpus(
        source,
        include_tests=include_tests,
        heldout_rate=heldout_rate,
        max_train_bytes=max_train_bytes,
        progress=progress,
    )
    if not corpus.train:
        raise ValueError(f"{source}: no training files found")
    t_read = time.perf_counter()

    texts = (f.text for f in tqdm(corpus.train, desc="train tokenizer", unit="file", disable=not progress))
    tok = train_bytelevel_bpe(
        texts,
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        length=len(corpus.train),
        show_progress=progress and sys.stderr.isatty(),
    )
    t_train = time.perf_counter()

    dtype = np.dtype("<u2") if tok.get_vocab_size() <= 1 << 16 else np.dtype("<u4")
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    # Stdlib text that spells a special token (e.g. "<|endoftext|>" in a docstring) stays plain text,
    # so the separator in the token files is always a real document boundary.
    tok.encode_special_tokens = True
    splits: dict[str, dict[str, Any]] = {}
    for name, files in (("train", corpus.train), ("heldout", corpus.heldout)):
        tokens, index = _encode_split(tok, files, dtype, name, progress)
        tokens.tofile(out / f"{name}.bin")
        splits[name] = {
            "file": f"{name}.bin",
            "files": len(files),
            "bytes": sum(f.nbytes for f in files),
            "tokens": int(tokens.size),
            "corpus_sha256": _corpus_digest(files),
            "documents": index,
        }
    t_encode = time.perf_counter()

    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "recipe": "strata_train.data prepare",
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "source": str(source),
        "include_tests": include_tests,
        "heldout_rule": {
            "salt": HELDOUT_SALT,
            "rate": heldout_rate,
            "rule": "sha256(salt + ':' + relpath)[:8] / 2**64 < rate",
        },
        "max_train_bytes": max_train_bytes,
        "tokenizer": {
            "file": "tokenizer.json",
            "vocab_size": tok.get_vocab_size(),
            "requested_vocab_size": vocab_size,
            "min_frequency": min_frequency,
            "pre": "qwen2",
            "special_tokens": {t: tok.token_to_id(t) for t in SPECIAL_TOKENS},
        },
        "dtype": dtype.str,  # "<u2" / "<u4"
        "document_separator": ENDOFTEXT,
        "skipped": [list(s) for s in corpus.skipped],
        "dropped_by_cap": corpus.dropped_by_cap,
        "splits": splits,
        "heldout_files": [f.relpath for f in corpus.heldout],
        "sha256": {n: _sha256_file(out / n) for n in ("tokenizer.json", "train.bin", "heldout.bin")},
    }
    (out / "manifest.json").write_text(
        json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    if progress:
        sizes = {
            n: (out / n).stat().st_size
            for n in ("tokenizer.json", "train.bin", "heldout.bin", "manifest.json")
        }
        print(
            f"{len(corpus.train)} train files ({splits['train']['bytes'] / 1e6:.1f} MB -> "
            f"{splits['train']['tokens']:,} tokens), {len(corpus.heldout)} held-out "
            f"({splits['heldout']['tokens']:,} tokens), {len(corpus.skipped)} skipped, "
            f"{len(corpus.dropped_by_cap)} dropped by the cap\n"
            f"time: read {t_read - t0:.1f}s, tokenizer {t_train - t_read:.1f}s, "
            f"encode {t_encode - t_train:.1f}s\n"
            f"outputs in {out}: " + ", ".join(f"{n} {s / 1e6:.2f} MB" for n, s in sizes.items()),
            file=sys.stderr,
        )
    return manifest


def load_manifest(out: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{out / 'manifest.json'}: unknown manifest format {manifest.get('format')!r}")
    return manifest


def load_split(out: Path, split: str) -> np.ndarray:
    """The token ids of a prepared split ("train" or "heldout"), memory-mapped read-only."""
    manifest = load_manifest(out)
    if split not in manifest["splits"]:
        raise ValueError(f"unknown split {split!r}; have {sorted(manifest['splits'])}")
    path = out / manifest["splits"][split]["file"]
    return np.memmap(path, dtype=np.dtype(manifest["dtype"]), mode="r")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m strata_train.data", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="collect the corpus, train the tokenizer, write the token files")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--source", type=Path, default=None, help="corpus root (default: this Python's stdlib)")
    p.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    p.add_argument("--min-frequency", type=int, default=2)
    p.add_argument("--heldout-rate", type=float, default=DEFAULT_HELDOUT_RATE)
    p.add_argument("--max-train-bytes", type=int, default=DEFAULT_MAX_TRAIN_BYTES)
    p.add_argument("--no-tests", dest="include_tests", action="store_false", help="leave test suites out")
    p.add_argument("--quiet", action="store_true", help="no progress bars or summary")
    args = parser.parse_args(argv)
    try:
        prepare(
            args.out,
            source=args.source,
            vocab_size=args.vocab_size,
            include_tests=args.include_tests,
            heldout_rate=args.heldout_rate,
            max_train_bytes=args.max_train_bytes,
            min_frequency=args.min_frequency,
            progress=not args.quiet,
        )
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
