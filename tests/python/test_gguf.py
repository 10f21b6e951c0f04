"""strata.gguf on valid files written by gguf.GGUFWriter, compared against gguf.GGUFReader."""

from __future__ import annotations

import gc
import struct
import time
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

import strata
from strata.gguf import GGUFFile

VT = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType

SCALARS: list[tuple[str, Any, VT]] = [
    ("t.u8", 250, VT.UINT8),
    ("t.i8", -120, VT.INT8),
    ("t.u16", 65000, VT.UINT16),
    ("t.i16", -32000, VT.INT16),
    ("t.u32", 4_000_000_000, VT.UINT32),
    ("t.i32", -2_000_000_000, VT.INT32),
    ("t.f32", 0.1, VT.FLOAT32),
    ("t.bool", True, VT.BOOL),
    ("t.str", "héllo wörld ✓", VT.STRING),
    ("t.u64", 2**64 - 1, VT.UINT64),
    ("t.i64", -(2**62), VT.INT64),
    ("t.f64", -1e300, VT.FLOAT64),
]

ARRAYS: list[tuple[str, list[Any], VT]] = [
    ("a.u8", [0, 1, 255], VT.UINT8),
    ("a.i8", [-128, 0, 127], VT.INT8),
    ("a.u16", [0, 65535], VT.UINT16),
    ("a.i16", [-32768, 32767], VT.INT16),
    ("a.u32", [0, 2**32 - 1], VT.UINT32),
    ("a.i32", [-(2**31), 2**31 - 1], VT.INT32),
    ("a.f32", [0.5, -1.25, 3e38], VT.FLOAT32),
    ("a.bool", [True, False, True], VT.BOOL),
    ("a.str", ["a", "", "ü", "x" * 300], VT.STRING),
    ("a.u64", [0, 2**64 - 1], VT.UINT64),
    ("a.i64", [-(2**63), 2**63 - 1], VT.INT64),
    ("a.f64", [1e-300, -2.5], VT.FLOAT64),
]


def write_gguf(path: Path, build: Any, alignment: int | None = None,
               endianess: gguf.GGUFEndian = gguf.GGUFEndian.LITTLE) -> Path:
    """Write a GGUF with GGUFWriter; ``build(writer)`` adds keys and tensors."""
    w = gguf.GGUFWriter(path, "strata", endianess=endianess)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def add_all_values(w: gguf.GGUFWriter) -> None:
    for key, val, vt in SCALARS:
        w.add_key_value(key, val, vt)
    for key, vals, vt in ARRAYS:
        w.add_key_value(key, vals, VT.ARRAY, sub_type=vt)
    w.add_array("a.nested", [[1, 2, 3], [4], [5, 6]])
    w.add_array("a.nested_str", [["x", "y"], ["z"]])


def add_tensors(w: gguf.GGUFWriter) -> None:
    rng = np.random.default_rng(0)
    w.add_tensor("f32", rng.standard_normal((3, 8)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((5,)).astype(np.float16))
    w.add_tensor("f64", rng.standard_normal((2, 2, 2)).astype(np.float64))
    w.add_tensor("i8", np.arange(-5, 5, dtype=np.int8).reshape(2, 5))
    w.add_tensor("i16", np.arange(7, dtype=np.int16))
    w.add_tensor("i32", np.arange(6, dtype=np.int32).reshape(1, 2, 3))
    w.add_tensor("i64", np.arange(4, dtype=np.int64).reshape(1, 1, 2, 2))
    # Quantized tensors as raw bytes: 2 rows of 64 Q8_0 values, 1 row of 256 Q4_K values.
    w.add_tensor("q8_0", rng.integers(0, 256, (2, 2 * 34), dtype=np.uint8), raw_dtype=Q.Q8_0)
    w.add_tensor("q4_k", rng.integers(0, 256, (1, 144), dtype=np.uint8), raw_dtype=Q.Q4_K)


def flatten(v: Any) -> list[Any]:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, list):
        return [y for x in v for y in (flatten(x) if isinstance(x, (list, np.ndarray)) else [x])]
    return [v]


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def build(w: gguf.GGUFWriter) -> None:
        add_all_values(w)
        add_tensors(w)

    return write_gguf(tmp_path_factory.mktemp("gguf") / "rich.gguf", build)


def test_every_value_type_round_trips(rich: Path) -> None:
    f = GGUFFile(rich)
    ref = gguf.GGUFReader(rich)
    assert f.version == 3
    # GGUFReader adds pseudo-fields for the header ("GGUF.version", ...); the rest is in file order.
    assert f.keys() == [k for k in ref.fields if not k.startswith("GGUF.")]
    md = f.metadata
    for key, val, vt in SCALARS:
        ours = md[key]
        assert ours == ref.fields[key].contents(), key
        assert f.value_type(key) == vt.name.lower()
        if vt == VT.FLOAT32:
            assert ours == float(np.float32(val))
        else:
            assert ours == val
        assert type(ours) is type(val)
    for key, vals, vt in ARRAYS:
        ours = md[key]
        assert f.value_type(key) == f"array[{vt.name.lower()}]"
        assert f.array_length(key) == len(vals)
        got = ours if vt == VT.STRING else ours.tolist()
        assert got == ref.fields[key].contents(), key
        if vt != VT.FLOAT32:
            assert got == vals
    assert f.value_type("a.nested") == "array[array]"
    nested = md["a.nested"]
    assert [x.tolist() for x in nested] == [[1, 2, 3], [4], [5, 6]]
    assert flatten(nested) == ref.fields["a.nested"].contents()
    assert md["a.nested_str"] == [["x", "y"], ["z"]]
    assert md["general.architecture"] == "strata"


def test_scalar_getters(rich: Path) -> None:
    f = GGUFFile(rich)
    assert "t.u8" in f and "nope" not in f
    assert f.get("nope", 5) == 5
    assert f.get("t.i8") == -120
    with pytest.raises(KeyError):
        f.value("nope")
    assert f.array_length("t.u8") is None
    assert f.value("a.str", max_items=2) == ["a", ""]
    assert f.value("a.u8", max_items=0).tolist() == []


def test_tensors_match_gguf_reader(rich: Path) -> None:
    f = GGUFFile(rich)
    ref = gguf.GGUFReader(rich)
    assert [t.name for t in f.tensors] == [t.name for t in ref.tensors]
    for ours, theirs in zip(f.tensors, ref.tensors, strict=True):
        assert ours.type == theirs.tensor_type.name
        assert ours.type_id == int(theirs.tensor_type)
        assert ours.shape == tuple(int(d) for d in theirs.shape)
        assert ours.n_elements == int(theirs.n_elements)
        assert ours.offset == int(theirs.data_offset)
        assert ours.nbytes == int(theirs.n_bytes)
        assert ours.offset % f.alignment == 0
        data = f.tensor_bytes(ours.name)
        assert data.dtype == np.uint8 and data.shape == (ours.nbytes,)
        assert data.tobytes() == np.asarray(theirs.data).tobytes(), ours.name
    f32 = f.tensor("f32")
    assert f32.shape == (8, 3) and f32.numpy_shape == (3, 8)
    assert f.tensor("q8_0").shape == (64, 2) and f.tensor("q8_0").nbytes == 2 * 2 * 34


def test_tensor_bytes_are_read_only_and_keep_the_file_alive(rich: Path) -> None:
    f = GGUFFile(rich)
    expected = np.asarray(gguf.GGUFReader(rich).tensors[0].data).tobytes()
    view = f.tensor_bytes("f32")
    with pytest.raises(ValueError):
        view[0] = 1
    del f
    gc.collect()
    assert view.tobytes() == expected
    with pytest.raises(KeyError):
        GGUFFile(rich).tensor_bytes("nope")


def test_empty_tensor_list(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "empty.gguf", lambda w: w.add_uint32("x.n", 1))
    f = GGUFFile(path)
    assert f.tensors == []
    assert f.metadata == {"general.architecture": "strata", "x.n": 1}
    assert f.data_offset % 32 == 0


@pytest.mark.parametrize("alignment", [1, 64, 4096])
def test_other_alignments(tmp_path: Path, alignment: int) -> None:
    path = write_gguf(tmp_path / "a.gguf", add_tensors, alignment=alignment)
    f = GGUFFile(path)
    ref = gguf.GGUFReader(path)
    assert f.alignment == alignment
    assert f.metadata["general.alignment"] == alignment
    for ours, theirs in zip(f.tensors, ref.tensors, strict=True):
        assert ours.offset % alignment == 0
        assert ours.offset == int(theirs.data_offset)
        assert f.tensor_bytes(ours.name).tobytes() == np.asarray(theirs.data).tobytes()


def test_version_2_is_read(rich: Path, tmp_path: Path) -> None:
    data = bytearray(rich.read_bytes())
    struct.pack_into("<I", data, 4, 2)
    (tmp_path / "v2.gguf").write_bytes(bytes(data))
    assert GGUFFile(tmp_path / "v2.gguf").version == 2


def test_from_bytes_matches_file(rich: Path) -> None:
    a = GGUFFile(rich)
    b = GGUFFile.from_bytes(rich.read_bytes(), "copy.gguf")
    assert b.path == "copy.gguf"
    assert a.keys() == b.keys()
    assert [t.name for t in a.tensors] == [t.name for t in b.tensors]
    assert a.tensor_bytes("q4_k").tobytes() == b.tensor_bytes("q4_k").tobytes()


def test_invalid_utf8_string_is_replaced(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "u.gguf", lambda w: w.add_string("x.s", "ab"))
    data = bytearray(path.read_bytes())
    at = data.index(b"ab", data.index(b"x.s") + 3)
    data[at] = 0xFF
    (tmp_path / "u2.gguf").write_bytes(bytes(data))
    assert GGUFFile(tmp_path / "u2.gguf").value("x.s") == "\ufffdb"


def test_io_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    with pytest.raises(strata.IOFailure, match=f"^{missing}: cannot open"):
        GGUFFile(missing)
    with pytest.raises(strata.IOFailure, match="not a regular file"):
        GGUFFile(tmp_path)


def test_big_vocab_opens_fast(tmp_path: Path) -> None:
    tokens = [f"tok{i}" for i in range(250_000)]
    path = write_gguf(tmp_path / "vocab.gguf", lambda w: w.add_token_list(tokens))
    t0 = time.perf_counter()
    f = GGUFFile(path)
    t1 = time.perf_counter()
    head = f.value("tokenizer.ggml.tokens", max_items=3)
    full = f.metadata["tokenizer.ggml.tokens"]
    t2 = time.perf_counter()
    assert head == ["tok0", "tok1", "tok2"]
    assert full == tokens
    print(f"250k tokens: open {1e3 * (t1 - t0):.1f} ms, full conversion {1e3 * (t2 - t1):.1f} ms")
    # A loose guard against accidental quadratic work (the measured open takes milliseconds).
    assert t1 - t0 < 1.0
