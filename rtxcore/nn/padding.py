"""Padding layers: zero, constant, reflection, replication and circular padding
of 1-D and 2-D inputs (``ZeroPad2d``, ``ReflectionPad1d``, ...), over ``F.pad``."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


class _PadNd(Module):
    _dims = 0
    _mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        n = 2 * self._dims
        self.padding = (padding,) * n if isinstance(padding, int) else tuple(padding)
        if len(self.padding) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a {n}-tuple, "
                             f"got {padding!r}")

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, x: Tensor) -> Tensor:
        return F.pad(x, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with ``value``."""

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dimensions with ``value``."""

    _dims = 2


class _ZeroPad:
    """A constant pad of 0, shown as its padding alone (mixed in before a
    ``ConstantPadNd``, so a ``ZeroPad1d`` is a ``ConstantPad1d``)."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)  # type: ignore[call-arg]

    extra_repr = _PadNd.extra_repr


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pad the last dimension with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pad the last two dimensions with zeros."""


class ReflectionPad1d(_PadNd):
    """Pad the last dimension with its reflection at each edge."""

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dimensions with their reflection at each edge."""

    _dims, _mode = 2, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dimension with copies of its edge values."""

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last two dimensions with copies of their edge values."""

    _dims, _mode = 2, "replicate"


class CircularPad1d(_PadNd):
    """Pad the last dimension with its values wrapped around."""

    _dims, _mode = 1, "circular"


class CircularPad2d(_PadNd):
    """Pad the last two dimensions with their values wrapped around."""

    _dims, _mode = 2, "circular"
