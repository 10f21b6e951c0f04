"""`strata` GGUF writing: every key and tensor of docs/gguf.md §1, storage types, round trips."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize, quantize

import strata
from strata.cli.__main__ import main as cli_main
from strata.convert import (
    StrataHParams,
    byte_level_tokenizer,
    make_random_strata,
    random_strata_tensors,
    strata_keys,
    strata_tensor_specs,
    write_strata_gguf,
)
from strata_train import ReferenceRunner, StrataConfig, StrataModel
from strata_train.checkpoint import load_checkpoint, save_checkpoint
from strata_train.random_init import randomize_

pytestmark = pytest.mark.usefixtures("one_torch_thread")


FEATURE_SETS = [(), ("hc",), ("gate",), ("window",), ("indexer",), ("shared_expert",), ("mtp",), ("sink",)]


def _fields(reader: GGUFReader) -> dict[str, object]:
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _documented_keys() -> set[str]:
    """The `strata.*` keys of the key table in docs/gguf.md (the contract)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gguf.md").read_text()
    return set(re.findall(r"^\| `(strata\.[a-z_.]+)` \|", doc, flags=re.M))


def _numpy_shape(t: object) -> tuple[int, ...]:
    return tuple(int(x) for x in reversed(t.shape.tolist()))  # type: ignore[attr-defined]


def test_hparams_mirror_the_training_config() -> None:
    names = [f.name for f in dataclasses.fields(StrataConfig)]
    assert [f.name for f in dataclasses.fields(StrataHParams)] == names
    cfg = StrataConfig.tiny()
    assert dataclasses.asdict(StrataHParams.from_any(cfg)) == dataclasses.asdict(cfg)
    assert StrataHParams.from_any(cfg.to_dict()) == StrataHParams.from_any(cfg)
    for bad in (dict(n_heads=3), dict(rope_dim=7), dict(n_experts_used=9), dict(mtp_vocab_ids=[5, 5])):
        with pytest.raises(strata.ConfigError):
            StrataHParams.from_any({**cfg.to_dict(), **bad})


@pytest.mark.parametrize("off", FEATURE_SETS, ids=lambda o: "-".join(o) or "all_on")
def test_layout_matches_the_reference_model(off: tuple[str, ...]) -> None:
    cfg = StrataConfig.tiny().without(*off)
    ours = {n: tuple(t.shape) for n, t in StrataModel(cfg).gguf_tensors().items()}
    specs = strata_tensor_specs(StrataHParams.from_any(cfg))
    assert list(ours) == list(specs)  # same names, same file order
    assert ours == {n: s.shape for n, s in specs.items()}
    names = set(specs)
    assert any(".hc_attn_fn." in n for n in names) == (cfg.hc_count > 1)
    assert any(".indexer." in n for n in names) == cfg.has_indexer
    assert any("_shexp." in n for n in names) == (cfg.shared_ffn > 0)
    assert any(".nextn." in n for n in names) == cfg.mtp
    assert all(".indexer." not in n for n in names if n.startswith(f"blk.{cfg.n_layers}."))


def test_random_model_file_has_every_key_and_tensor(tmp_path: Path) -> None:
    cfg = StrataConfig.tiny()
    hp = StrataHParams.from_any(cfg)
    path = make_random_strata(cfg, seed=3, path=tmp_path / "r.gguf")
    reader = GGUFReader(str(path))
    fields = _fields(reader)
    assert fields["general.architecture"] == "strata"
    expected_keys = strata_keys(hp)
    assert {k for k, _, _ in expected_keys} == _documented_keys()
    for key, value, _ in expected_keys:
        assert fields[key] == pytest.approx(value), key
    assert fields["strata.block_count"] == cfg.n_layers + 1
    assert fields["strata.nextn.vocab_size"] == len(cfg.mtp_vocab_list())
    assert fields["tokenizer.ggml.model"] == "gpt2"
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == cfg.vocab_size
    specs = strata_tensor_specs(hp)
    tensors = {t.name: t for t in reader.tensors}
    assert list(tensors) == list(specs)
    values = random_strata_tensors(cfg, seed=3)
    for name, spec in specs.items():
        t = tensors[name]
        assert _numpy_shape(t) == spec.shape, name
        want = {"i32": GGMLQuantizationType.I32, "f32": GGMLQuantizationType.F32,
                "weight": GGMLQuantizationType.F32}[spec.kind]
        assert t.tensor_type == want, name
        np.testing.assert_array_equal(np.asarray(t.data).reshape(spec.shape), values[name])
    vocab_ids = np.asarray(tensors[f"blk.{cfg.n_layers}.nextn.vocab_ids"].data)
    assert vocab_ids.tolist() == cfg.mtp_vocab_list()


@pytest.mark.parametrize("wtype", ["F16", "BF16", "Q8_0", "Q5_0", "Q4_0"])
def test_weight_types_and_fallback(tmp_path: Path, wtype: str) -> None:
    cfg = StrataConfig.tiny(expert_ffn=48)  # ffn_down_exps rows of 48: no 32-block divides them
    path = make_random_strata(cfg, seed=1, path=tmp_path / "q.gguf", weight_type=wtype)
    qtype = GGMLQuantizationType[wtype]
    specs = strata_tensor_specs(StrataHParams.from_any(cfg))
    values = random_strata_tensors(cfg, seed=1)
    for t in GGUFReader(str(path)).tensors:
        spec = specs[t.name]
        if spec.kind != "weight":
            assert t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.I32), t.name
            continue
        blocked = wtype not in ("F16", "BF16")
        expect = GGMLQuantizationType.F16 if blocked and spec.shape[-1] % 32 else qtype
        assert t.tensor_type == expect, t.name
        got = dequantize(t.data, t.tensor_type).reshape(spec.shape)
        want = dequantize(quantize(values[t.name], expect), expect).reshape(spec.shape)
        np.testing.assert_array_equal(got, want)
    down = [t.tensor_type for t in GGUFReader(str(path)).tensors if t.name.endswith("ffn_down_exps.weight")]
    fallback = GGMLQuantizationType.F16 if wtype not in ("F16", "BF16") else qtype
    assert down and all(d == fallback for d in down)


def test_expert_type_overrides_experts_only(tmp_path: Path) -> None:
    path = make_random_strata(StrataConfig.tiny(), path=tmp_path / "e.gguf", weight_type="F16",
                              expert_type="Q4_0")
    for t in GGUFReader(str(path)).tensors:
        if t.name.endswith("_exps.weight"):
            assert t.tensor_type == GGMLQuantizationType.Q4_0
        elif t.name.endswith("attn_q.weight"):
            assert t.tensor_type == GGMLQuantizationType.F16


@pytest.mark.parametrize("off", [(), ("hc", "mtp")], ids=["all_on", "n1_no_mtp"])
def test_reference_reads_back_what_it_wrote(tmp_path: Path, off: tuple[str, ...]) -> None:
    model = randomize_(StrataModel(StrataConfig.tiny().without(*off)), seed=11)
    path = write_strata_gguf(model, model.cfg, tmp_path / "m.gguf", tokenizer=byte_level_tokenizer(512))
    tokens = list(range(5, 40, 3))
    want = ReferenceRunner(model).prefill(tokens)
    back = ReferenceRunner.from_gguf(path)
    assert back.cfg == model.cfg
    got = back.prefill(tokens)
    assert torch.equal(got.logits, want.logits)
    if want.mtp_logits is not None:
        assert got.mtp_logits is not None and torch.equal(got.mtp_logits, want.mtp_logits)


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    cfg = StrataConfig.tiny()
    tensors = random_strata_tensors(cfg)
    out = tmp_path / "x.gguf"
    with pytest.raises(strata.FormatError, match="missing"):
        write_strata_gguf({k: v for k, v in tensors.items() if k != "blk.1.attn_q.weight"}, cfg, out)
    with pytest.raises(strata.FormatError, match="blk.0.attn_k.weight: shape"):
        write_strata_gguf({**tensors, "blk.0.attn_k.weight": np.zeros((3, 3), np.float32)}, cfg, out)
    bad = tensors["output_norm.weight"].copy()
    bad[0] = np.nan
    with pytest.raises(strata.FormatError, match="NaN"):
        write_strata_gguf({**tensors, "output_norm.weight": bad}, cfg, out)
    with pytest.raises(strata.InvalidArgument, match="unknown weight type"):
        write_strata_gguf(tensors, cfg, out, weight_type="Q3_X")
    ids = f"blk.{cfg.n_layers}.nextn.vocab_ids"
    with pytest.raises(strata.FormatError, match="vocab_ids"):
        write_strata_gguf({**tensors, ids: tensors[ids][::-1].copy()}, cfg, out)
    with pytest.raises(strata.InvalidArgument, match="vocab_size >= 258"):
        byte_level_tokenizer(100)


def test_cli_converts_a_training_checkpoint(tmp_path: Path) -> None:
    model = randomize_(StrataModel(StrataConfig.tiny()), seed=2)
    ckpt = tmp_path / "ckpt.pt"
    save_checkpoint(model, ckpt, step=7)
    again, payload = load_checkpoint(ckpt)
    assert payload["step"] == 7
    pairs = zip(again.state_dict().values(), model.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
    out = tmp_path / "ckpt.gguf"
    assert cli_main(["convert", str(ckpt), str(out), "--type", "F32", "--tokenizer", "bytes"]) == 0
    tokens = [1, 2, 3, 200, 100]
    torch.testing.assert_close(ReferenceRunner.from_gguf(out).prefill(tokens).logits,
                               ReferenceRunner(model).prefill(tokens).logits, rtol=0, atol=0)
    fields = _fields(GGUFReader(str(out)))
    assert fields["general.name"] == "ckpt" and fields["tokenizer.ggml.eos_token_id"] == 257
    # not a checkpoint: one clear line, exit 1
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    assert cli_main(["convert", str(junk), str(out)]) == 1


def test_converter_and_cli_never_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import strata, strata.convert, strata.cli.__main__\n"
        "from strata.convert import make_random_strata\n"
        f"cfg = {StrataConfig.tiny(hc_count=2).to_dict()!r}\n"
        f"make_random_strata(cfg, path={str(tmp_path / 'n.gguf')!r}, weight_type='Q8_0')\n"
    )
    # conftest.py's PYTHONPATH reaches the strata under test.
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "n.gguf").stat().st_size > 0


@pytest.mark.parametrize("wtype", ["BF16", "Q4_0"])
def test_runner_reads_quantized_files_dequantized(tmp_path: Path, wtype: str) -> None:
    cfg = StrataConfig.tiny()
    path = make_random_strata(cfg, seed=4, path=tmp_path / "q.gguf", weight_type=wtype)
    run = ReferenceRunner.from_gguf(path)
    stored = {t.name: t for t in GGUFReader(str(path)).tensors}
    for name, value in run.model.gguf_tensors().items():
        t = stored[name]
        want = np.asarray(t.data) if name.endswith("vocab_ids") else dequantize(t.data, t.tensor_type)
        np.testing.assert_array_equal(value.numpy().reshape(-1), np.asarray(want).reshape(-1), err_msg=name)
    f32 = ReferenceRunner.from_gguf(make_random_strata(cfg, seed=4, path=tmp_path / "f.gguf"))
    tokens = [7, 8, 9, 10, 300]
    diff = (run.prefill(tokens).logits - f32.prefill(tokens).logits).abs().max()
    assert 0 < float(diff) < 2.0  # the same model, up to the weights' rounding
