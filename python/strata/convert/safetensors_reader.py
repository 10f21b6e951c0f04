"""Read Hugging Face safetensors checkpoints with numpy alone (no torch), BF16 included.

Format: 8-byte little-endian header size, a JSON header {name: {dtype, shape, data_offsets}}, then
the raw little-endian tensor bytes. Tensors are memory-mapped and converted on access.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from strata.errors import FormatError

_DTYPES: dict[str, np.dtype] = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "F64": np.dtype("<f8"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


class SafetensorsFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        size = self.path.stat().st_size
        with self.path.open("rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise FormatError(f"{self.path}: too short for a safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, 100_000_000):
                raise FormatError(f"{self.path}: header size {n} does not fit the file")
            try:
                header = json.loads(f.read(n))
            except ValueError as exc:
                raise FormatError(f"{self.path}: header is not JSON ({exc})") from None
        header.pop("__metadata__", None)
        self._header: dict[str, dict] = header
        self._data_start = 8 + n
        self._size = size
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r")

    def keys(self) -> list[str]:
        return list(self._header)

    def get(self, name: str) -> np.ndarray:
        """The tensor as float32 (floating types) or its integer type."""
        info = self._header[name]
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise FormatError(f"{self.path}: {name} has unsupported dtype {info['dtype']}")
        start, end = (self._data_start + int(o) for o in info["data_offsets"])
        shape = tuple(int(s) for s in info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end > self._size or end - start != count * dtype.itemsize:
            raise FormatError(f"{self.path}: {name} data offsets do not match its shape")
        raw = self._map[start:end].view(dtype).reshape(shape)
        if info["dtype"] == "BF16":
            return (raw.astype(np.uint32) << 16).view(np.float32)
        if dtype.kind == "f":
            return raw.astype(np.float32)
        return np.array(raw)


class CheckpointDir:
    """Every tensor of every *.safetensors file of a Hugging Face model directory, read on demand."""

    def __init__(self, model_dir: str | Path) -> None:
        files = sorted(Path(model_dir).glob("*.safetensors"))
        if not files:
            raise FormatError(f"{model_dir}: no *.safetensors files")
        self._where: dict[str, SafetensorsFile] = {}
        for path in files:
            st = SafetensorsFile(path)
            for name in st.keys():
                if name in self._where:
                    raise FormatError(f"{model_dir}: tensor {name} appears in two files")
                self._where[name] = st

    def keys(self) -> list[str]:
        return list(self._where)

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def get(self, name: str) -> np.ndarray:
        if name not in self._where:
            raise FormatError(f"checkpoint has no tensor {name}")
        return self._where[name].get(name)
