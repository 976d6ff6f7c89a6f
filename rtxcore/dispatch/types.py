"""The small value types a kernel sees: DType, View, row-major strides, the out-of-memory error.

Backends import these (through ``rtxcore.dispatch``) and nothing else of the
core; the device descriptor they subclass is ``rtxcore.dispatch.backend.Backend``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DType", "OutOfMemoryError", "View", "contiguous_strides"]


class DType:
    """An element type. Compared by identity: there is one object per dtype."""

    __slots__ = ("name", "itemsize", "kind", "numpy", "is_floating_point", "is_signed")

    name: str
    itemsize: int
    kind: str  # "b" bool, "u" unsigned int, "i" signed int, "f" float
    numpy: np.dtype
    is_floating_point: bool
    is_signed: bool

    def __init__(self, name: str, kind: str, np_dtype: Any) -> None:
        self.name = name
        self.kind = kind
        self.numpy = np.dtype(np_dtype)
        self.itemsize = self.numpy.itemsize
        self.is_floating_point = kind == "f"
        self.is_signed = kind in "if"

    def __repr__(self) -> str:
        return f"rtxcore.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # pickles as the module-level singleton

    @property
    def is_complex(self) -> bool:
        return False


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides, in elements, for ``shape``."""
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n if n > 1 else 1
    return tuple(reversed(strides))


class OutOfMemoryError(RuntimeError):
    """An allocation on a device failed (``rtxcore.OutOfMemoryError``; a
    RuntimeError, as PyTorch's ``torch.OutOfMemoryError``). The message names
    the bytes, dtype, shape and device. Backends raise it (or a subclass) from
    ``empty``/``from_host``; the core turns a plain ``MemoryError`` into it."""


class View:
    """A strided window on a backend buffer: what a kernel receives by default.

    ``shape`` and ``strides`` are tuples (strides in elements, never negative,
    0 for broadcast dims), ``offset`` counts elements from the buffer's start.
    A backend may replace this with a native object (rtx_cpu hands out NumPy
    arrays) by overriding :meth:`Backend.view`.
    """

    __slots__ = ("buffer", "shape", "strides", "offset", "dtype")

    def __init__(self, buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
                 dtype: DType) -> None:
        self.buffer = buffer
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.dtype = dtype

    def __repr__(self) -> str:
        return (
            f"View(shape={self.shape}, strides={self.strides}, "
            f"offset={self.offset}, dtype={self.dtype.name})"
        )

    def is_contiguous(self) -> bool:
        shape, strides = self.shape, self.strides
        return all(
            n == 1 or s == c
            for n, s, c in zip(shape, strides, contiguous_strides(shape))
        )
