"""A bounded expert store is really bounded: in stream mode with direct I/O the routed experts' bytes do
not enter the page cache through the model file's mapping (experts/mapping_advice.h), nor, for
deepseek4, through the mapping of its separate MTP file (the store's second file).

Measured two ways after a short generation: the page-cache residency of the expert byte ranges (mincore
on a mapping of the file) and the file-backed memory of this process's mappings of the file
(/proc/self/smaps Rss). A control run in mmap mode shows the same probes see the experts when they are
read through the mapping.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from pathlib import Path

import pytest

import strata
from strata.bench import wide_model
from strata.gguf import GGUFFile

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="mincore, smaps and fadvise: Linux")

PAGE = mmap.PAGESIZE
BOUNDARY = 256 * 1024  # bytes at each end of an expert tensor that may share read-ahead with a neighbour
PROMPT = "import os\n\ndef read_config(path):\n    "


def _expert_ranges(path: Path) -> list[tuple[int, int]]:
    return [(t.offset, t.offset + t.nbytes) for t in GGUFFile(str(path)).tensors if "_exps." in t.name]


def _cached_bytes(path: Path, ranges: list[tuple[int, int]], margin: int = 0) -> int:
    """Bytes of whole pages inside `ranges` (each shrunk by `margin` bytes at both ends) that are in the
    page cache (mincore)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        total = 0
        vec = None
        try:
            for begin, end in ranges:
                b, e = -(-(begin + margin) // PAGE) * PAGE, (end - margin) // PAGE * PAGE
                if e <= b:
                    continue
                vec = (ctypes.c_ubyte * ((e - b) // PAGE))()
                if libc.mincore(base + b, e - b, vec) != 0:
                    raise OSError(ctypes.get_errno(), "mincore")
                total += sum(v & 1 for v in vec) * PAGE
        finally:
            del vec  # release the exported buffer before the mapping closes
    return total


def _mapped_rss(path: Path) -> int:
    """Rss (bytes) of this process's mappings of `path` (/proc/self/smaps)."""
    rss, inside = 0, False
    target = os.path.realpath(path)
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and ":" in head[3]:  # a mapping's header line
            inside = len(head) >= 6 and head[5] == target
        elif inside and head and head[0] == "Rss:":
            rss += int(head[1]) * 1024
    return rss


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bounded") / "wide4.gguf"
    wide_model.widen_model(wide_model.default_demo_path(), path, expert_mult=4, shared_mult=1)
    return path


def _generate(path: Path, **config: str) -> tuple[strata.GenerationStats, int]:
    """Generates with `config`; returns the stats and the Rss of the file's mappings (session alive)."""
    s = strata.Model(str(path)).session(config=strata.Config(threads=1, **config),
                                        sampling=strata.SamplingPolicy(temperature=0.0))
    "".join(s.generate(PROMPT, max_tokens=24))
    return s.stats, _mapped_rss(path)


def test_stream_mode_keeps_experts_out_of_the_page_cache(model_file: Path) -> None:
    ranges = _expert_ranges(model_file)
    expert_bytes = sum(e - b for b, e in ranges)
    file_size = model_file.stat().st_size
    _evict(model_file)
    if _cached_bytes(model_file, ranges) > expert_bytes // 100:
        pytest.skip("the file's pages could not be dropped from the page cache (another mapping holds them)")
    stats, rss = _generate(model_file, expert_mode="stream", expert_cache="25%", expert_direct_io="on")
    assert stats.expert_mode == "stream" and stats.expert_bytes_read > 0
    # Pages at an expert tensor's two ends can come in with its non-expert neighbours: seen with the
    # load-time repack on (its reads of the neighbouring matrices), up to 53 pages at one end; what
    # matters is that no expert page away from those ends enters, and the ends stay small.
    cached = _cached_bytes(model_file, ranges)
    interior = _cached_bytes(model_file, ranges, margin=BOUNDARY)
    assert interior == 0, f"{interior} expert bytes away from tensor ends entered the page cache"
    slack = 2 * BOUNDARY * len(ranges)
    assert cached <= slack, f"{cached} expert bytes entered the page cache (of {expert_bytes})"
    assert rss <= file_size - expert_bytes + slack, f"the mapping holds {rss} bytes"

    # Control: mmap mode reads the experts through the mapping, and both probes see it.
    _, rss = _generate(model_file, expert_mode="mmap")
    assert _cached_bytes(model_file, ranges) > expert_bytes // 10
    assert rss > file_size - expert_bytes + slack


def test_opening_a_model_reads_no_expert_weights(model_file: Path) -> None:
    """strata.Model(path) validates the file without an engine (_strata.inspect_model): no load-time
    repack, so it no longer reads every expert byte. What it does read is the header and the tensors it
    validates, with the kernel's read-around of the Python header reader (read_ahead_kb) around them."""
    ranges = _expert_ranges(model_file)
    expert_bytes = sum(e - b for b, e in ranges)
    _evict(model_file)
    if _cached_bytes(model_file, ranges) > expert_bytes // 100:
        pytest.skip("the file's pages could not be dropped from the page cache (another mapping holds them)")
    model = strata.Model(str(model_file))
    assert model.has_mtp and model.hparams["expert_count"] > 0
    probe = _cached_bytes(model_file, ranges)
    assert probe < expert_bytes // 4, f"opening the model cached {probe} of {expert_bytes} expert bytes"
    # Control: an engine in mmap mode repacks the experts at load, reading all of them.
    _evict(model_file)
    engine = strata._strata.Engine(str(model_file), n_threads=1, max_ctx=8,
                                   settings=strata.Config(expert_mode="mmap", repack="on").native())
    assert _cached_bytes(model_file, ranges) > expert_bytes // 2
    del engine


def test_deepseek4_mtp_file_experts_stay_out_of_the_page_cache(tmp_path: Path) -> None:
    """deepseek4's MTP layer is in a second file (llama.cpp's mtp-<name>.gguf): the store reads its
    experts from that file with direct I/O and advises that file's mapping too."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "DeepseekV4ForCausalLM"):
        pytest.skip("transformers without DeepseekV4ForCausalLM (needs >= 5.23)")
    from test_deepseek4_mtp_store import TOKENS, build_model_and_mtp_file

    main, mtp = build_model_and_mtp_file(tmp_path)
    ranges = _expert_ranges(mtp)
    assert len(ranges) == 3  # the MTP block's gate, up and down
    _evict(mtp)
    if _cached_bytes(mtp, ranges) > 0:
        pytest.skip("the MTP file's pages stay in the page cache (another mapping holds them)")
    m = strata.Model(str(main))  # finds the MTP file beside it

    def run(**config: str) -> None:
        s = m.session(config=strata.Config(speculative=True, draft_steps=2, threads=1, **config),
                      sampling=strata.SamplingPolicy(temperature=0.0))
        "".join(s.generate(TOKENS[:6], max_tokens=16))
        assert s.stats.rounds > 0

    run(expert_mode="stream", expert_cache="50%", expert_direct_io="on")
    # Whole pages inside the three expert tensors (64 KiB each): a page shared with a neighbour may be read.
    assert _cached_bytes(mtp, ranges) == 0
    # Control: mmap mode reads the MTP experts through the mapping, and the probe sees it.
    run()
    assert _cached_bytes(mtp, ranges) > 0
