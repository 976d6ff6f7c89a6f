"""Pooling layers: ``MaxPool1d`` / ``MaxPool2d``, ``AvgPool1d`` / ``AvgPool2d``
and the adaptive ``AdaptiveAvgPool1d`` / ``AdaptiveAvgPool2d`` /
``AdaptiveMaxPool2d``, with PyTorch's arguments and reprs."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from ._layer_base import _check_image, _FunctionalLayer
from .module import Module


def _single(v: Any) -> tuple[int, ...]:
    return (v,) if isinstance(v, int) else tuple(v)


class _PoolNd(Module):
    _fn = ""  # the function's name in F

    def __init__(self, kernel_size: Any, stride: Any, padding: Any) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def _check(self, x: Any) -> None:
        pass


class _MaxPoolNd(_PoolNd):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding)
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, x: Tensor) -> Any:
        self._check(x)
        return getattr(F, self._fn)(x, self.kernel_size, self.stride, self.padding, self.dilation,
                                    ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """The maximum of each window of (N, C, L) or (C, L) input."""

    _fn = "max_pool1d"


class MaxPool2d(_MaxPoolNd):
    """The maximum of each window of (N, C, H, W) or (C, H, W) input."""

    _fn = "max_pool2d"
    _check = _check_image


class _AvgPoolNd(_PoolNd):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        return getattr(F, self._fn)(x, self.kernel_size, self.stride, self.padding,
                                    self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """The mean of each window of (N, C, L) or (C, L) input; sizes kept as 1-tuples."""

    _fn = "avg_pool1d"

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(_single(kernel_size),
                         _single(stride if stride is not None else kernel_size),
                         _single(padding), ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """The mean of each window of (N, C, H, W) or (C, H, W) input."""

    _fn = "avg_pool2d"
    _check = _check_image


class AdaptiveAvgPool1d(_FunctionalLayer):
    """The mean over ``output_size`` evenly spread windows of (N, C, L) or (C, L) input."""

    _fn = "adaptive_avg_pool1d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size=output_size)


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """The mean over ``output_size`` evenly spread windows of (N, C, H, W) or (C, H, W) input."""

    _fn = "adaptive_avg_pool2d"

    def forward(self, x: Tensor) -> Tensor:
        _check_image(self, x)
        return super().forward(x)


class AdaptiveMaxPool2d(_FunctionalLayer):
    """The maximum over ``output_size`` evenly spread windows of (N, C, H, W) or (C, H, W) input."""

    _fn = "adaptive_max_pool2d"
    _shown = ("output_size",)

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__(output_size=output_size, return_indices=return_indices)
