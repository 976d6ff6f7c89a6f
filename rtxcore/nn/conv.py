"""Convolution layers: ``Conv1d``, ``Conv2d``, ``ConvTranspose1d`` and
``ConvTranspose2d``, with PyTorch's arguments, checks, parameter shapes and
initialisation (so a PyTorch state dict loads). ``Conv2d`` runs as im2col by
strided views plus one matmul, so every backend runs it on its primitives."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from ._layer_base import _ntuple, _reset_weight_and_bias, _shape_error, _weight_and_bias
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _check_conv_args(in_channels: int, out_channels: int, groups: int, padding: Any,
                     stride: tuple[int, ...], padding_mode: str) -> None:
    """PyTorch's ``_ConvNd`` argument checks (ValueError, with its messages)."""
    if groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups != 0:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups != 0:
        raise ValueError("out_channels must be divisible by groups")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             "{'valid', 'same'}")
        if padding == "same" and any(s != 1 for s in stride):
            raise ValueError("padding='same' is not supported for strided convolutions")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                         f"padding_mode='{padding_mode}'")


def _reversed_padding(padding: Any, kernel: tuple[int, ...],
                      dilation: tuple[int, ...]) -> tuple[int, ...]:
    """``F.pad`` amounts (last dim first) for a non-zeros ``padding_mode``."""
    out: list[int] = []
    for i in reversed(range(len(kernel))):
        if padding == "valid":
            lo = hi = 0
        elif padding == "same":
            total = dilation[i] * (kernel[i] - 1)
            lo = total // 2
            hi = total - lo
        else:
            lo = hi = padding[i]
        out += [lo, hi]
    return tuple(out)


class _ConvNd(Module):
    """What convolutions and transposed convolutions share: arguments, checks,
    parameters and repr. ``_fn`` names the function of ``F`` that runs it."""

    _dims = 0
    _fn = ""
    _quoted_padding = False  # Conv2d's repr has always quoted a string padding

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any,
                 padding: Any, dilation: Any, transposed: bool, output_padding: Any, groups: int,
                 bias: bool, padding_mode: str, device: Any, dtype: Any) -> None:
        super().__init__()
        n = self._dims
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        _check_conv_args(in_channels, out_channels, groups, padding, self.stride, padding_mode)
        shape = ((in_channels, out_channels // groups) if transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        _weight_and_bias(self, shape, out_channels, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform(a=sqrt(5)) for the weight, U(-1/sqrt(fan_in), ..) for the bias
        _reset_weight_and_bias(self.weight, self.bias)

    def _check(self, x: Any) -> None:
        n = self._dims
        if not isinstance(x, Tensor) or x.ndim not in (n + 1, n + 2) or \
                x.shape[-n - 1] != self.in_channels:
            spatial = ", ".join("LHW"[-n:] if n > 1 else "L")
            raise _shape_error(self, f"(N, {self.in_channels}, {spatial}) or "
                                     f"({self.in_channels}, {spatial})", x)

    def _padded(self, x: Tensor) -> tuple[Tensor, Any]:
        """The input and the padding to pass on, after any non-zeros ``padding_mode`` pad."""
        if self.padding_mode == "zeros":
            return x, self.padding
        pads = _reversed_padding(self.padding, self.kernel_size, self.dilation)
        return F.pad(x, pads, mode=self.padding_mode), 0

    def extra_repr(self) -> str:
        n = self._dims
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * n:
            quoted = self._quoted_padding and isinstance(self.padding, str)
            s += f", padding={self.padding!r}" if quoted else f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """A convolution (not transposed): PyTorch's ``ConvNd`` constructor and forward."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False,
                         0, groups, bias, padding_mode, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        x, padding = self._padded(x)
        return getattr(F, self._fn)(x, self.weight, self.bias, self.stride, padding,
                                    self.dilation, self.groups)


class Conv1d(_Conv):
    """1-D convolution over (N, C, L) or (C, L) input; weight (out, in/groups, k)."""

    _dims, _fn = 1, "conv1d"


class Conv2d(_Conv):
    """2-D convolution over (N, C, H, W) or (C, H, W) input; weight
    (out, in/groups, kH, kW)."""

    _dims, _fn = 2, "conv2d"
    _quoted_padding = True


class _ConvTransposeNd(_ConvNd):
    """A transposed convolution: PyTorch's ``ConvTransposeNd`` constructor, forward
    and ``output_size`` rule."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of ints, "
                             f"got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, x: Tensor, output_size: Any) -> tuple[int, ...]:
        """``output_padding``, or the one that gives ``output_size`` (PyTorch's rule)."""
        n = self._dims
        if output_size is None:
            return self.output_padding
        size = [int(v) for v in output_size]
        lead = 2 if x.ndim == n + 2 else 1
        if len(size) == lead + n:
            size = size[lead:]
        if len(size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {x.ndim}D input, output_size must have {n} "
                             f"or {lead + n} elements (got {len(size)})")
        mins = [(x.shape[lead + d] - 1) * self.stride[d] - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        maxs = [mins[d] + self.stride[d] - 1 for d in range(n)]
        for d in range(n):
            if not mins[d] <= size[d] <= maxs[d]:
                raise ValueError(f"requested an output size of {size}, but valid sizes range from "
                                 f"{mins} to {maxs} (for an input of {list(x.shape[lead:])})")
        return tuple(size[d] - mins[d] for d in range(n))

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        self._check(x)
        op = self._output_padding(x, output_size)
        return getattr(F, self._fn)(x, self.weight, self.bias, self.stride, self.padding, op,
                                    self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C, L) or (C, L) input; weight
    (in, out/groups, k)."""

    _dims, _fn = 1, "conv_transpose1d"


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W) input; weight
    (in, out/groups, kH, kW)."""

    _dims, _fn = 2, "conv_transpose2d"
