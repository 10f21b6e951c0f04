"""
block formats, quantizers and CPU dot kernels
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
__all__: list[str] = ['activation_type', 'activation_values', 'block_size', 'dequantize', 'dot', 'gemm', 'has_quantizer', 'quantize', 'read_bandwidth', 'repack', 'row_bytes', 'type_size', 'types']
def activation_type(type: str) -> str:
    ...
def activation_values(x: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], type: str) -> numpy.typing.NDArray[numpy.float32]:
    ...
def block_size(type: str) -> int:
    ...
def dequantize(data: numpy.ndarray, type: str, shape: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> numpy.typing.NDArray[numpy.float32]:
    ...
def dot(row: numpy.ndarray, type: str, x: typing.Annotated[numpy.typing.ArrayLike, numpy.float32]) -> float:
    ...
def gemm(weights: numpy.ndarray, type: str, rows: typing.SupportsInt | typing.SupportsIndex, cols: typing.SupportsInt | typing.SupportsIndex, x: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], threaded: bool = True) -> numpy.typing.NDArray[numpy.float32]:
    ...
def has_quantizer(type: str, method: str) -> bool:
    ...
def quantize(array: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], type: str, method: str = 'ggml') -> numpy.typing.NDArray[numpy.uint8]:
    ...
def read_bandwidth(bytes: typing.SupportsInt | typing.SupportsIndex, threads: typing.SupportsInt | typing.SupportsIndex, reps: typing.SupportsInt | typing.SupportsIndex) -> float:
    """
    Best streaming-read GB/s over reps passes
    """
def repack(weights: numpy.ndarray, type: str, rows: typing.SupportsInt | typing.SupportsIndex, cols: typing.SupportsInt | typing.SupportsIndex) -> tuple:
    """
    (bytes, type name) of a matrix of a type with a repacked form (Q4_0, Q5_0, Q5_1, Q8_0, the K-quants, IQ4_XS, IQ4_NL) in the interleaved 16-row layout (rows a multiple of 16)
    """
def row_bytes(type: str, n: typing.SupportsInt | typing.SupportsIndex) -> int:
    ...
def type_size(type: str) -> int:
    ...
def types() -> list[str]:
    """
    Names of the types with dequantize and dot kernels
    """
