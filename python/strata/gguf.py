"""Read GGUF model files through strata's validated C++ reader.

``GGUFFile(path)`` maps the file and checks all of it when it opens: header, every metadata value,
tensor infos, alignment, and that each tensor's data lies aligned, inside the file and apart from
the others. A malformed file raises :class:`strata.FormatError` whose message starts with the path
and names the problem (``"<path>: <what> (at byte offset N)"``); a file that cannot be opened raises
:class:`strata.IOFailure`. What is validated: ``docs/gguf-reader.md``.

Writing GGUF is left to the ``gguf`` package (``gguf.GGUFWriter``).

Value conversion: integers, floats, bools and strings become the Python equivalents (strings are
UTF-8, invalid bytes replaced by U+FFFD); arrays of numbers or bools become 1-D numpy arrays;
arrays of strings or of arrays become lists.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from strata import _strata
from strata.errors import FormatError

__all__ = ["GGUFFile", "TensorInfo"]


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file.

    ``shape`` is in GGUF order: ``shape[0]`` is ``ne[0]``, the innermost (contiguous) dimension;
    ``numpy_shape`` is the reverse, the row-major shape numpy and PyTorch use.
    """

    name: str
    type: str
    """ggml type name, e.g. ``"F32"``, ``"Q8_0"``, ``"Q4_K"``."""
    type_id: int
    shape: tuple[int, ...]
    offset: int
    """Absolute byte offset of the data in the file."""
    nbytes: int

    @property
    def n_elements(self) -> int:
        """Number of elements (the product of the shape; 1 for a 0-d tensor)."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def numpy_shape(self) -> tuple[int, ...]:
        """The shape in row-major (numpy/PyTorch) order: ``shape`` reversed."""
        return tuple(reversed(self.shape))


class GGUFFile:
    """A validated, memory-mapped GGUF file (versions 2 and 3, little-endian).

    The mapping stays alive as long as this object or any array returned by
    :meth:`tensor_bytes` does.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._init(_strata.GGUFFile.open(os.fspath(path)))

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<memory>") -> GGUFFile:
        """Validate a GGUF held in memory (copied); ``name`` stands in for the path in errors."""
        self = cls.__new__(cls)
        self._init(_strata.GGUFFile.from_bytes(bytes(data), name))
        return self

    def _init(self, native: Any) -> None:
        self._native = native
        self._tensors = [
            TensorInfo(name, tname, tid, tuple(int(d) for d in ne), offset, nbytes)
            for name, tname, tid, ne, offset, nbytes in native.tensors()
        ]
        self._by_name = {t.name: t for t in self._tensors}
        self._check_names()

    def _check_names(self) -> None:
        """Keys and tensor names reach Python as UTF-8 with invalid bytes replaced (U+FFFD); such a
        name could not be looked up again (nor told apart from another), so the file is refused."""
        for i, key in enumerate(self._native.keys()):
            if "\ufffd" in key and not self._native.has(key):
                raise FormatError(f"{self.path}: metadata key #{i} ({key!r}) is not valid UTF-8")
        for i, t in enumerate(self._tensors):
            if "\ufffd" in t.name:
                try:
                    self._native.tensor_data(t.name)
                except Exception:  # noqa: BLE001 - any failure to find it again means the name is bad
                    raise FormatError(f"{self.path}: the name of tensor #{i} ({t.name!r}) is not valid UTF-8"
                                      ) from None

    # ---- header
    @property
    def path(self) -> str:
        """The path given to the constructor (or the name given to :meth:`from_bytes`)."""
        return str(self._native.path)

    @property
    def version(self) -> int:
        """GGUF format version (2 or 3)."""
        return int(self._native.version)

    @property
    def alignment(self) -> int:
        """Tensor data alignment in bytes (``general.alignment``, default 32)."""
        return int(self._native.alignment)

    @property
    def data_offset(self) -> int:
        """Absolute byte offset where the tensor data section starts."""
        return int(self._native.data_offset)

    @property
    def file_size(self) -> int:
        """Size of the file in bytes."""
        return int(self._native.file_size)

    # ---- metadata
    @cached_property
    def metadata(self) -> dict[str, Any]:
        """Every key-value pair, in file order, converted as described in the module docstring.

        Converted once, on first access; use :meth:`value` with ``max_items`` to peek at a large
        array without converting all of it.
        """
        return dict(self._native.metadata())

    def keys(self) -> list[str]:
        """Metadata keys in file order (cheap: no value is converted)."""
        return list(self._native.keys())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self._native.has(key))

    def value(self, key: str, max_items: int | None = None) -> Any:
        """The value of ``key``; for arrays, only the first ``max_items`` elements when given.

        Raises ``KeyError`` when the key is absent.
        """
        if key not in self:
            raise KeyError(key)
        return self._native.value(key, -1 if max_items is None else max(0, int(max_items)))

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when it is absent."""
        return self.value(key) if key in self else default

    def value_type(self, key: str) -> str:
        """The GGUF type of ``key``: ``"uint32"``, ``"string"``, ``"array[string]"``, ...

        Raises ``KeyError`` when the key is absent.
        """
        if key not in self:
            raise KeyError(key)
        return str(self._native.value_type(key))

    def array_length(self, key: str) -> int | None:
        """The number of elements of an array value; ``None`` for a scalar. ``KeyError`` if absent."""
        if key not in self:
            raise KeyError(key)
        n = self._native.array_length(key)
        return None if n is None else int(n)

    # ---- tensors
    @property
    def tensors(self) -> list[TensorInfo]:
        """Tensor infos in file order."""
        return list(self._tensors)

    def tensor(self, name: str) -> TensorInfo:
        """The tensor called ``name``; ``KeyError`` when there is none."""
        return self._by_name[name]

    def tensor_bytes(self, name: str) -> np.ndarray:
        """The raw bytes of tensor ``name`` as a read-only ``uint8`` numpy view into the file.

        No copy is made; the view keeps the file mapped. ``KeyError`` when there is no such tensor.
        """
        if name not in self._by_name:
            raise KeyError(name)
        return self._native.tensor_data(name)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return (f"GGUFFile({self.path!r}, version={self.version}, tensors={len(self._tensors)}, "
                f"keys={len(self.keys())})")
