"""deepseek4's MTP block through the expert store. llama.cpp writes the MTP layer into a separate file
(``mtp-<name>.gguf``); its routed experts are the store's last layer, read from that second file like
the main layers' experts from the model file: bounded by the resident set, counted, read with direct
I/O, and kept out of the page cache by the mapping advice (that probe is in test_store_page_cache.py,
which CI runs in a process of its own). Streaming changes where the bytes come from, never the numbers:
draft logits and speculative greedy text equal mmap mode bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import strata
from strata import _strata
from strata.convert import byte_level_tokenizer, convert_hf_dir
from strata.convert.deepseek4 import convert_deepseek4
from strata.errors import FormatError
from strata.gguf import GGUFFile

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekV4ForCausalLM"):
    pytest.skip("transformers without DeepseekV4ForCausalLM (needs >= 5.23)", allow_module_level=True)

from test_deepseek4 import MTP_SCHEDULE, V, _save, _with_mtp, hf_ds4  # noqa: E402

TOKENS = [int(t) for t in np.random.default_rng(7).integers(0, V, size=32)]
N_LAYER = len(MTP_SCHEDULE)
# (cache, direct I/O): 10 % of 5 layers × 8 experts is 4 slots, fewer than one layer's top-2 of a
# 20-token prompt asks for, so experts are evicted and re-read all the time.
STREAM = [("10%", "on"), ("10%", "off"), ("50%", "on"), ("50%", "off")]


def build_model_and_mtp_file(where: Path, weight_type: str = "F32") -> tuple[Path, Path]:
    """A tiny converted deepseek4 and its MTP file, mtp-m.gguf beside m.gguf."""
    saved = _save(hf_ds4(seed=6, layer_types=MTP_SCHEDULE), where / "hf")
    _with_mtp(saved, like_layer=1)
    main = convert_hf_dir(saved, where / "m.gguf", weight_type=weight_type, tokenizer="bytes")
    mtp = convert_deepseek4(saved, where / "mtp-m.gguf", weight_type=weight_type,
                            tokenizer=byte_level_tokenizer(V), mtp=True)
    return Path(main), Path(mtp)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_model_and_mtp_file(tmp_path_factory.mktemp("ds4-mtp-store"))


@pytest.fixture(scope="module")
def q8_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_model_and_mtp_file(tmp_path_factory.mktemp("ds4-mtp-store-q8"), "Q8_0")


def _engine(files: tuple[Path, Path], **config: Any) -> Any:
    main, mtp = files
    return _strata.Engine(str(main), n_threads=1, max_ctx=64, mtp_model=str(mtp),
                          settings=strata.Config(**config).native())


def _drafts(eng: Any) -> tuple[np.ndarray, np.ndarray]:
    t = int(eng.eval(TOKENS[:20]).argmax())
    return eng.mtp_draft(t, n_steps=4)


@pytest.mark.parametrize(("cache", "direct"), STREAM)
def test_mtp_experts_stream_through_the_store(files: tuple[Path, Path], cache: str, direct: str) -> None:
    ref_logits, ref_ids = _drafts(_engine(files))
    mm = _engine(files)
    assert mm.expert_stats()["layers"] == N_LAYER + 1  # mmap mode counts the MTP layer's uses too

    eng = _engine(files, expert_mode="stream", expert_cache=cache, expert_direct_io=direct)
    st = eng.expert_stats()
    assert st["mode"] == "stream" and st["layers"] == N_LAYER + 1
    assert st["direct_io"] == (direct == "on")
    t = int(eng.eval(TOKENS[:20]).argmax())
    eng.clear_expert_cache()
    eng.reset_expert_stats()
    logits, ids = eng.mtp_draft(t, n_steps=4)
    # Only the MTP layer ran since the reset: its experts were read from the MTP file.
    drafted = eng.expert_stats()["total"]
    assert drafted["misses"] > 0 and drafted["bytes_read"] > 0
    np.testing.assert_array_equal(logits, ref_logits)
    np.testing.assert_array_equal(ids, ref_ids)


@pytest.mark.parametrize("repack", ["on", "off"])
def test_repacked_mtp_experts_stream_like_mmap(q8_files: tuple[Path, Path], repack: str) -> None:
    """Q8_0 experts: mmap mode repacks the MTP layer's experts at load, stream mode as each slice
    arrives from the MTP file; the drafts agree bit for bit either way."""
    ref_logits, ref_ids = _drafts(_engine(q8_files, repack=repack))
    eng = _engine(q8_files, repack=repack, expert_mode="stream", expert_cache="10%")
    logits, ids = _drafts(eng)
    assert eng.expert_stats()["total"]["bytes_read"] > 0
    np.testing.assert_array_equal(logits, ref_logits)
    np.testing.assert_array_equal(ids, ref_ids)


@pytest.mark.parametrize(("cache", "direct"), STREAM)
def test_speculative_greedy_text_equals_mmap(files: tuple[Path, Path], cache: str, direct: str) -> None:
    m = strata.Model(files[0])  # finds mtp-m.gguf beside m.gguf
    assert m.has_mtp

    def run(**config: Any) -> strata.Session:
        s = m.session(config=strata.Config(speculative=True, draft_steps=2, **config),
                      sampling=strata.SamplingPolicy())
        "".join(s.generate(TOKENS[:6], max_tokens=24))
        return s

    mmap = run()
    stream = run(expert_mode="stream", expert_cache=cache, expert_direct_io=direct)
    assert stream.tokens == mmap.tokens
    assert stream.stats.speculative and stream.stats.rounds > 0 and stream.stats.expert_bytes_read > 0


def test_a_truncated_mtp_file_is_a_clear_error(files: tuple[Path, Path], tmp_path: Path) -> None:
    main, mtp = files
    bad = tmp_path / "mtp-bad.gguf"
    data = mtp.read_bytes()
    last = max(t.offset + t.nbytes for t in GGUFFile(str(mtp)).tensors if "_exps." in t.name)
    bad.write_bytes(data[: last - 4096])  # the last expert tensor runs past the end
    with pytest.raises(FormatError, match="mtp-bad.gguf"):
        _strata.Engine(str(main), n_threads=1, max_ctx=16, mtp_model=str(bad),
                       settings=strata.Config(expert_mode="stream").native())
