"""Hostile GGUF files: each is refused with strata.FormatError naming the file and the problem.

Most cases start from a valid file written by gguf.GGUFWriter and corrupt it byte-wise (offsets
located with gguf.GGUFReader); the rest are hand-built byte streams. Every case checks the message
starts with the path, contains the phrase for that problem, and is a single line.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

import strata
from strata.gguf import GGUFFile

VT = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType


def write_base(path: Path, endianess: gguf.GGUFEndian = gguf.GGUFEndian.LITTLE) -> Path:
    w = gguf.GGUFWriter(path, "strata", endianess=endianess)
    w.add_uint32("strata.block_count", 2)
    w.add_string("general.name", "base")
    w.add_bool("strata.attention.gated", True)
    w.add_token_list(["<s>", "</s>", "hello", "world"])
    w.add_array("strata.ints", [1, 2, 3])
    w.add_uint64("strata.last", 12345)
    w.add_tensor("a", np.zeros((4, 8), dtype=np.float32))
    w.add_tensor("b", np.ones((16,), dtype=np.float16))
    w.add_tensor("q", np.zeros((2, 2 * 34), dtype=np.uint8), raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class Base:
    """The valid base file and where its fields lie."""

    def __init__(self, path: Path) -> None:
        self.bytes = path.read_bytes()
        r = gguf.GGUFReader(path)
        self.kv = {k: f.offset for k, f in r.fields.items() if not k.startswith("GGUF.")}
        self.tensor_info = {t.name: t.field.offset for t in r.tensors}
        self.tensor_data = {t.name: int(t.data_offset) for t in r.tensors}
        self.n_dims = {t.name: len(t.shape) for t in r.tensors}

    def value_at(self, key: str) -> int:
        """Offset of the value of `key` (after its key string and type id)."""
        return self.kv[key] + 8 + len(key.encode()) + 4

    def type_at(self, key: str) -> int:
        return self.kv[key] + 8 + len(key.encode())

    def dims_at(self, name: str) -> int:
        """Offset of the tensor's n_dims field."""
        return self.tensor_info[name] + 8 + len(name.encode())

    def ttype_at(self, name: str) -> int:
        return self.dims_at(name) + 4 + 8 * self.n_dims[name]

    def toffset_at(self, name: str) -> int:
        return self.ttype_at(name) + 4


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    return Base(write_base(tmp_path_factory.mktemp("base") / "base.gguf"))


def patch(data: bytes, at: int, fmt: str, *vals: object) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, *vals)
    return bytes(out)


def header(tensors: int, kvs: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, kvs)


def gstr(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def kv(key: bytes, vtype: int, payload: bytes) -> bytes:
    return gstr(key) + struct.pack("<I", vtype) + payload


def tinfo(name: bytes, ne: list[int], ttype: int, offset: int) -> bytes:
    return gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne) + \
        struct.pack("<IQ", ttype, offset)


def padded(b: bytes, align: int = 32) -> bytes:
    return b + b"\0" * (-len(b) % align)


def big_endian_file(tmp: Path) -> bytes:
    return write_base(tmp / "be.gguf", gguf.GGUFEndian.BIG).read_bytes()


def nested(depth: int) -> bytes:
    payload = struct.pack("<IQ", VT.UINT8, 1) + b"\x01"
    for _ in range(depth):
        payload = struct.pack("<IQ", VT.ARRAY, 1) + payload
    return header(0, 1) + kv(b"deep", VT.ARRAY, payload)


# (id, corruption of the base file (or None: hand-built), phrase the message must contain)
Case = tuple[str, Callable[[Base, Path], bytes], str]
CASES: list[Case] = [
    ("empty", lambda b, t: b"", "empty file, not a GGUF file"),
    ("short_magic", lambda b, t: b.bytes[:3], "file truncated: GGUF magic needs 4 bytes but only 3 remain"),
    ("bad_magic", lambda b, t: b"GGML" + b.bytes[4:], "not a GGUF file (magic bytes 47 47 4d 4c"),
    ("zip_file", lambda b, t: b"PK\x03\x04" + b"\0" * 60, "not a GGUF file"),
    ("version_1", lambda b, t: patch(b.bytes, 4, "<I", 1), "GGUF version 1 is not supported"),
    ("version_4", lambda b, t: patch(b.bytes, 4, "<I", 4),
     "unsupported GGUF version 4 (strata reads versions 2 and 3)"),
    ("version_0", lambda b, t: patch(b.bytes, 4, "<I", 0), "unsupported GGUF version 0"),
    ("big_endian_version", lambda b, t: patch(b.bytes, 4, ">I", 3),
     "big-endian GGUF (version field 00 00 00 03)"),
    ("big_endian_writer", lambda b, t: big_endian_file(t), "big-endian GGUF"),
    ("cut_in_version", lambda b, t: b.bytes[:6],
     "file truncated: GGUF version needs 4 bytes but only 2 remain"),
    ("cut_in_tensor_count", lambda b, t: b.bytes[:12],
     "file truncated: tensor count needs 8 bytes but only 4 remain"),
    ("cut_in_kv_count", lambda b, t: b.bytes[:20],
     "file truncated: metadata key-value count needs 8 bytes but only 4 remain"),
    ("huge_kv_count", lambda b, t: patch(b.bytes, 16, "<Q", 2**63),
     "metadata key-value count 9223372036854775808 exceeds the limit of 1048576"),
    ("kv_count_too_big_for_file", lambda b, t: patch(b.bytes, 16, "<Q", 500_000),
     "metadata key-value count 500000 cannot fit in the"),
    ("huge_tensor_count", lambda b, t: patch(b.bytes, 8, "<Q", 2**40),
     "tensor count 1099511627776 exceeds the limit of 1048576"),
    ("tensor_count_too_big_for_file", lambda b, t: patch(b.bytes, 8, "<Q", 1000),
     "tensor count 1000 cannot fit in the"),
    ("tensor_count_past_metadata", lambda b, t: patch(b.bytes, 8, "<Q", 20),
     "tensor count 20 cannot fit in the 453 bytes left after the metadata"),
    ("huge_key_length", lambda b, t: patch(b.bytes, b.kv["general.name"], "<Q", 2**62),
     "key of metadata entry 2: string length 4611686018427387904 exceeds the"),
    ("empty_key", lambda b, t: header(0, 1) + kv(b"", VT.UINT8, b"\x01"),
     "metadata entry 0 has an empty key"),
    ("unknown_value_type", lambda b, t: patch(b.bytes, b.type_at("strata.block_count"), "<I", 13),
     "key 'strata.block_count': unknown value type id 13"),
    ("value_type_all_ones", lambda b, t: patch(b.bytes, b.type_at("general.name"), "<I", 0xFFFFFFFF),
     "key 'general.name': unknown value type id 4294967295"),
    ("huge_string_value", lambda b, t: patch(b.bytes, b.value_at("general.name"), "<Q", 10**12),
     "key 'general.name': string length 1000000000000 exceeds the"),
    ("bool_value_2", lambda b, t: patch(b.bytes, b.value_at("strata.attention.gated"), "<B", 2),
     "key 'strata.attention.gated': bool value 2 is not 0 or 1"),
    ("array_bad_element_type", lambda b, t: patch(b.bytes, b.value_at("strata.ints"), "<I", 99),
     "key 'strata.ints': unknown value type id 99"),
    ("huge_int_array", lambda b, t: patch(b.bytes, b.value_at("strata.ints") + 4, "<Q", 2**61),
     "key 'strata.ints': array length 2305843009213693952 of int32 cannot fit"),
    ("huge_string_array", lambda b, t: patch(b.bytes, b.value_at("tokenizer.ggml.tokens") + 4, "<Q", 10**9),
     "key 'tokenizer.ggml.tokens': array length 1000000000 of string cannot fit"),
    ("token_length_corrupt", lambda b, t: patch(b.bytes, b.value_at("tokenizer.ggml.tokens") + 12 + 11,
     "<Q", 2**33),
     "key 'tokenizer.ggml.tokens': string length 8589934592 exceeds the"),
    ("duplicate_key", lambda b, t: header(0, 2) + kv(b"k", VT.UINT8, b"\x01") + kv(b"k", VT.UINT8, b"\x02"),
     "duplicate key 'k'"),
    ("duplicate_key_in_writer_file", lambda b, t: b.bytes.replace(b"strata.last", b"strata.ints", 1),
     "duplicate key 'strata.ints'"),
    ("arrays_nested_too_deep", lambda b, t: nested(8), "key 'deep': arrays nested deeper than 8 levels"),
    ("key_with_newline", lambda b, t: header(0, 1) + kv(b"bad\nkey", 77, b""),
     "key 'bad\\x0akey': unknown value type id 77"),
    ("cut_in_last_value", lambda b, t: b.bytes[: b.value_at("strata.last") + 3],
     "file truncated: uint64 of key 'strata.last' needs 8 bytes but only 3 remain"),
    ("cut_in_tensor_dims", lambda b, t: b.bytes[: b.dims_at("q") + 4 + 3],
     "file truncated: dimensions of tensor 'q' needs 8 bytes but only 3 remain"),
    ("cut_in_tensor_data", lambda b, t: b.bytes[: b.tensor_data["q"] + 100],
     "tensor 'q': data (136 bytes at data offset 160) extends past the end of the file"),
    ("huge_tensor_name", lambda b, t: patch(b.bytes, b.tensor_info["a"], "<Q", 2**50),
     "name of tensor info 0: string length 1125899906842624 exceeds the"),
    ("empty_tensor_name", lambda b, t: padded(header(1, 0) + tinfo(b"", [4], 0, 0)) + b"\0" * 16,
     "tensor 0 has an empty name"),
    ("n_dims_5", lambda b, t: patch(b.bytes, b.dims_at("b"), "<I", 5),
     "tensor 'b': n_dims 5 exceeds the maximum of 4"),
    ("n_dims_huge", lambda b, t: patch(b.bytes, b.dims_at("b"), "<I", 0xFFFFFFFF),
     "tensor 'b': n_dims 4294967295 exceeds the maximum of 4"),
    ("dim_zero", lambda b, t: patch(b.bytes, b.dims_at("a") + 4, "<q", 0),
     "tensor 'a': dimension 0 is 0, must be positive"),
    ("dim_negative", lambda b, t: patch(b.bytes, b.dims_at("a") + 12, "<q", -1),
     "tensor 'a': dimension 1 is -1, must be positive"),
    ("element_count_overflow", lambda b, t: patch(b.bytes, b.dims_at("a") + 4, "<qq", 2**40, 2**40),
     "tensor 'a': element count overflows 64 bits"),
    ("byte_size_overflow", lambda b, t: patch(b.bytes, b.dims_at("a") + 4, "<qq", 2**62, 1),
     "tensor 'a': size in bytes overflows 64 bits"),
    ("unknown_ggml_type_4", lambda b, t: patch(b.bytes, b.ttype_at("a"), "<I", 4),
     "tensor 'a': unknown ggml type id 4"),
    ("unknown_ggml_type_huge", lambda b, t: patch(b.bytes, b.ttype_at("a"), "<I", 1000),
     "tensor 'a': unknown ggml type id 1000"),
    ("block_size_mismatch", lambda b, t: patch(b.bytes, b.dims_at("q") + 4, "<q", 48),
     "tensor 'q': ne[0] = 48 is not a multiple of the Q8_0 block size 32"),
    ("misaligned_offset", lambda b, t: patch(b.bytes, b.toffset_at("b"), "<Q", 8),
     "tensor 'b': data offset 8 is not a multiple of the alignment 32"),
    ("offset_past_end", lambda b, t: patch(b.bytes, b.toffset_at("b"), "<Q", 2**20),
     "tensor 'b': data (32 bytes at data offset 1048576) extends past the end of the file"),
    ("offset_overflow", lambda b, t: patch(b.bytes, b.toffset_at("b"), "<Q", 2**64 - 32),
     "tensor 'b': data (32 bytes at data offset 18446744073709551584) extends past the end of the file"),
    ("overlapping_tensors", lambda b, t: patch(b.bytes, b.toffset_at("b"), "<Q", 96),
     "tensors 'a' ["),
    ("duplicate_tensor_name", lambda b, t: patch(b.bytes, b.tensor_info["b"] + 8, "<c", b"a"),
     "duplicate tensor name 'a'"),
    ("alignment_not_power_of_two",
     lambda b, t: padded(header(0, 1) + kv(b"general.alignment", VT.UINT32, struct.pack("<I", 48))),
     "general.alignment 48 is not a power of two"),
    ("alignment_zero", lambda b, t: header(0, 1) + kv(b"general.alignment", VT.UINT32, struct.pack("<I", 0)),
     "general.alignment 0 is not a power of two"),
    ("alignment_huge",
     lambda b, t: header(0, 1) + kv(b"general.alignment", VT.UINT64, struct.pack("<Q", 2**40)),
     "general.alignment 1099511627776 exceeds the maximum of 16777216"),
    ("alignment_string", lambda b, t: header(0, 1) + kv(b"general.alignment", VT.STRING, gstr(b"32")),
     "general.alignment has type string, expected uint32"),
]


def test_enough_distinct_cases() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)
    assert len({c[2] for c in CASES}) >= 30


@pytest.mark.parametrize(("name", "make", "phrase"), CASES, ids=[c[0] for c in CASES])
def test_malformed_file_is_refused(base: Base, tmp_path: Path, name: str,
                                   make: Callable[[Base, Path], bytes], phrase: str) -> None:
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(make(base, tmp_path))
    with pytest.raises(strata.FormatError) as info:
        GGUFFile(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    assert phrase in msg, msg
    assert "\n" not in msg
    # The same bytes from memory give the same message under the given name.
    with pytest.raises(strata.FormatError, match=r"^mem\.gguf: "):
        GGUFFile.from_bytes(path.read_bytes(), "mem.gguf")


def test_overlap_message_names_both_tensors(base: Base, tmp_path: Path) -> None:
    path = tmp_path / "overlap.gguf"
    path.write_bytes(patch(base.bytes, base.toffset_at("b"), "<Q", 96))
    with pytest.raises(strata.FormatError, match=r"tensors 'a' \[\d+, \d+\) and 'b' \[\d+, \d+\) overlap"):
        GGUFFile(path)


def test_base_file_is_valid(base: Base) -> None:
    f = GGUFFile.from_bytes(base.bytes, "base.gguf")
    assert [t.name for t in f.tensors] == ["a", "b", "q"]


def test_random_mutations_parse_or_raise_format_error(base: Base) -> None:
    """A light in-Python fuzz (the C++ driver does the heavy one): never anything but FormatError."""
    rng = random.Random(1234)
    outcomes = {"ok": 0, "error": 0}
    for i in range(400):
        data = bytearray(base.bytes)
        kind = i % 4
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del data[rng.randrange(len(data)):]
        elif kind == 2:
            at = rng.randrange(len(data) - 8)
            data[at:at + 8] = struct.pack("<Q", rng.choice([0, 1, 2**32, 2**63, 2**64 - 1, len(data)]))
        else:
            at = rng.randrange(len(data))
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        try:
            f = GGUFFile.from_bytes(bytes(data), "fuzz.gguf")
            _ = f.metadata
            for t in f.tensors:
                assert f.tensor_bytes(t.name).nbytes == t.nbytes
            outcomes["ok"] += 1
        except strata.FormatError as e:
            assert str(e).startswith("fuzz.gguf: ") and "\n" not in str(e)
            outcomes["error"] += 1
    assert outcomes["error"] > 100
