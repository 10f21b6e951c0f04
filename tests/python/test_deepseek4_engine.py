"""strata's C++ engine on `deepseek4` files (DeepSeek-V4 as llama.cpp writes them): logits equal to
transformers' ``DeepseekV4ForCausalLM`` on the tiny random checkpoints of test_deepseek4.py for every
layer schedule (sliding window + CSA + HCA; two leading hash-routed layers; YaRN on the compressed
layers' RoPE), over a prefill of 200 tokens (so an HCA window of 128 closes) and 40 single-token
decode steps, for prompts fed in chunks of any size, after a rollback across compressor windows,
and for a Q8_0 file; the expert store (streamed, any resident fraction) and MOCE, sessions and
`strata generate` work on these files; hostile files are clear errors. deepseek4's cells are always F32.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter

import strata
from strata import _strata
from strata.cli.__main__ import main as cli_main
from strata.convert import convert_hf_dir

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekV4ForCausalLM"):
    pytest.skip("transformers without DeepseekV4ForCausalLM (needs >= 5.23)", allow_module_level=True)

from engine_args import engine  # noqa: E402
from test_deepseek4 import (  # noqa: E402  (the same tiny models and the indexer tie guard)
    VARIANTS,
    V,
    _hf_logits,
    _indexer_margins,
    _rel_diff,
    _save,
    hf_ds4,
)

PREFILL, DECODE = 200, 40
TOL = 1e-4  # achieved: ~2e-6 (F32 weights, F32 cells)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tokens(n: int, seed: int = 7) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, V, size=n)]


def _engine(path: Path, **kw: Any) -> Any:
    return _strata.Engine(str(path), n_threads=1, max_ctx=512, **kw)


@pytest.fixture(scope="module", params=list(VARIANTS))
def case(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[int], Any]:
    where = tmp_path_factory.mktemp(f"ds4-{request.param}")
    model = hf_ds4(seed=3, **VARIANTS[request.param])
    out = convert_hf_dir(_save(model, where / "hf"), where / "m.gguf", weight_type="F32", tokenizer="bytes")
    tokens = _tokens(PREFILL + DECODE)
    assert _indexer_margins(model, tokens) > 5e-5  # no near tie in the indexer's top-k
    return out, tokens, _hf_logits(model, tokens)


def test_prefill_then_decode_equals_transformers(case: tuple[Path, list[int], Any]) -> None:
    path, tokens, want = case
    eng = _engine(path)
    assert eng.hparams["arch"] == "deepseek4"
    got = [np.asarray(eng.eval(tokens[:PREFILL], logits="all"))]
    got += [np.asarray(eng.eval([t], logits="last"))[None] for t in tokens[PREFILL:]]
    assert _rel_diff(np.concatenate(got), want) <= TOL


@pytest.mark.parametrize("sizes", [(1, 7, 33, 64, 2, 100), (127, 1, 128)])
def test_any_chunking_equals_transformers(case: tuple[Path, list[int], Any], sizes: tuple[int, ...]) -> None:
    path, tokens, want = case
    eng = _engine(path, max_rows=128)
    got, at, i = [], 0, 0
    while at < len(tokens):
        n = min(sizes[i % len(sizes)], len(tokens) - at)
        got.append(np.asarray(eng.eval(tokens[at : at + n], logits="all")))
        at, i = at + n, i + 1
    assert _rel_diff(np.concatenate(got), want) <= TOL


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    where = tmp_path_factory.mktemp("ds4-first")
    model = hf_ds4(seed=3)
    return model, convert_hf_dir(
        _save(model, where / "hf"), where / "m.gguf", weight_type="F32", tokenizer="bytes"
    )


def test_rollback_across_compressor_windows_is_exact(first: tuple[Any, Path]) -> None:
    """Decode 10 tokens from 120 (closing CSA windows at 123 and 127 and the first HCA window at
    127), roll back 7 to 123, decode other tokens: the logits equal a fresh run's bit for bit, and
    transformers' on the final sequence."""
    model, path = first
    prompt, first_try, second_try = _tokens(120, 1), _tokens(10, 2), _tokens(12, 3)
    eng = _engine(path)
    eng.eval(prompt, logits="none")
    for t in first_try:
        eng.eval([t], logits="last")
    eng.rollback(123)
    got = np.stack([np.asarray(eng.eval([t], logits="last")) for t in second_try])
    fresh = _engine(path)
    fresh.eval(prompt, logits="none")
    for t in first_try[:3]:
        fresh.eval([t], logits="last")
    again = np.stack([np.asarray(fresh.eval([t], logits="last")) for t in second_try])
    np.testing.assert_array_equal(got, again)
    seq = prompt + first_try[:3] + second_try
    assert _rel_diff(got, _hf_logits(model, seq)[123:]) <= TOL


def test_q8_0_file_agrees_loosely(first: tuple[Any, Path], tmp_path: Path) -> None:
    """Q8_0 weights (rows of 48 stay F16) against transformers' F32: ~2-4 % relative while every visible
    compressed entry is attended (positions < 15); from then on the lightning indexer's picks may
    differ from F32's (near-equal ReLU scores), so only finiteness is checked there."""
    model, _ = first
    out = convert_hf_dir(
        _save(model, tmp_path / "hf"), tmp_path / "q.gguf", weight_type="Q8_0", tokenizer="bytes"
    )
    tokens = _tokens(60, 5)
    got = np.asarray(_engine(out).eval(tokens, logits="all"))
    assert np.isfinite(got).all()
    assert _rel_diff(got[:15], _hf_logits(model, tokens)[:15]) <= 6e-2


def _rewrite(src: Path, dst: Path, keys: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
    """A copy of a GGUF file with some keys and tensors replaced."""
    reader = GGUFReader(str(src))
    w = GGUFWriter(str(dst), "deepseek4")
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key in keys:
            w.add_array(key, keys[key])
            continue
        w.add_key_value(
            key, field.contents(), field.types[0], sub_type=field.types[-1] if len(field.types) > 1 else None
        )
    for t in reader.tensors:
        data = tensors.get(t.name, np.asarray(t.data))
        w.add_tensor(t.name, data, raw_shape=list(reversed(t.shape.tolist())), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def test_hostile_files_are_clear_errors(first: tuple[Any, Path], tmp_path: Path) -> None:
    _, path = first
    short = _rewrite(path, tmp_path / "r.gguf", {"deepseek4.attention.compress_ratios": [0, 4, 128]}, {})
    with pytest.raises(_strata.FormatError, match="compress_ratios has 3 entries, expected one per block"):
        _engine(short)
    bad_ratio = _rewrite(
        path, tmp_path / "b.gguf", {"deepseek4.attention.compress_ratios": [0, 4, 64, 4]}, {}
    )
    with pytest.raises(_strata.FormatError, match="compress_ratios entry 2 = 64"):
        _engine(bad_ratio)
    [table] = [
        np.array(t.data) for t in GGUFReader(str(path)).tensors if t.name == "blk.0.ffn_gate_tid2eid.weight"
    ]
    table.reshape(-1)[5] = 8  # expert_count is 8
    hostile = _rewrite(path, tmp_path / "t.gguf", {}, {"blk.0.ffn_gate_tid2eid.weight": table})
    with pytest.raises(_strata.FormatError, match="ffn_gate_tid2eid.weight: token 2 names expert 8"):
        _engine(hostile)


def test_metal_backend_refuses_deepseek4(first: tuple[Any, Path]) -> None:
    with pytest.raises(_strata.InvalidArgument, match="deepseek4 is not supported"):
        _strata.Engine(str(first[1]), backend="metal-emu")


@pytest.mark.parametrize(("cache", "direct_io"), [("10%", "on"), ("50%", "off")])
def test_streamed_experts_give_the_mmap_logits(first: tuple[Any, Path], cache: str, direct_io: str) -> None:
    """The expert store streams the routed layers' experts (any resident fraction, direct I/O or
    not) without changing a logit; MOCE then trades routing for hits."""
    _, path = first
    tokens = _tokens(150, 4)

    def run(**settings: Any) -> tuple[np.ndarray, Any]:
        eng = engine(path, n_threads=2, max_ctx=256, **settings)
        rows = [np.asarray(eng.eval(tokens[:130], logits="all"))]
        rows += [np.asarray(eng.eval([t], logits="last"))[None] for t in tokens[130:]]
        return np.concatenate(rows), eng

    mmap, _ = run()
    stream = dict(expert_mode="stream", expert_cache=cache, expert_io_threads=2, expert_direct_io=direct_io)
    got, eng = run(**stream)
    np.testing.assert_array_equal(got, mmap)
    plain = eng.expert_totals()
    assert plain["misses"] > 0 and eng.expert_stats()["mode"] == "stream"
    moce, eng = run(**stream, moce_bonus=1.5, moce_rank1=2.0, moce_protect=2)
    assert np.isfinite(moce).all() and eng.expert_totals()["hits"] >= plain["hits"]


def test_sessions_and_generate_run_deepseek4(first: tuple[Any, Path], tmp_path: Path) -> None:
    _, path = first
    model = strata.Model(str(path))
    s = model.session(
        strata.Config(speculative=False), sampling=strata.SamplingPolicy(temperature=0.8, seed=1)
    )
    "".join(s.generate("hello world", max_tokens=12))
    s.save(tmp_path / "s.strata")
    want = "".join(s.generate("", max_tokens=12))
    again = model.session(strata.Config(speculative=False))
    again.load(tmp_path / "s.strata")
    assert "".join(again.generate("", max_tokens=12)) == want
    assert cli_main(["generate", "-m", str(path), "hello", "--max-tokens", "6"]) == 0


@pytest.mark.llama
def test_llama_cpp_logits_equal_strata_on_the_same_file(case: tuple[Path, list[int], Any]) -> None:
    """The same F32 file in llama.cpp (llama-cpp-python 0.3.36, F32 K/V) and in strata."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path, tokens, _ = case
    llm = llama_cpp.Llama(
        model_path=str(path), n_ctx=512, logits_all=True, verbose=False, n_threads=1, type_k=0, type_v=0
    )
    llm.eval(tokens[:PREFILL])
    for t in tokens[PREFILL:]:
        llm.eval([t])
    ref = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    eng = _engine(path)
    got = [np.asarray(eng.eval(tokens[:PREFILL], logits="all"))]
    got += [np.asarray(eng.eval([t], logits="last"))[None] for t in tokens[PREFILL:]]
    assert _rel_diff(np.concatenate(got), ref) <= TOL


def test_kv_type_is_refused_for_deepseek4(first: tuple[Any, Path]) -> None:
    for kv in ("f16", "int8"):
        with pytest.raises(strata.ConfigError, match=f"kv_type {kv}: deepseek4 keeps its compressed"):
            _engine(first[1], settings=strata.Config(kv_type=kv).native())  # type: ignore[arg-type]
    assert _engine(first[1], settings=strata.Config(kv_type="f32").native()).hparams["kv_type"] == "f32"
