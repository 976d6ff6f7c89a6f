"""Normalisation layers: ``LayerNorm``, ``GroupNorm``, ``BatchNorm1d`` /
``BatchNorm2d`` and ``InstanceNorm1d`` / ``InstanceNorm2d``, with PyTorch's
arguments, parameters, running-statistics buffers and reprs."""

from __future__ import annotations

import warnings
from typing import Any

from .. import dtype as D
from ..ops import creation as C
from ..tensor import Tensor
from . import functional as F
from ._layer_base import _factory, _shape_error
from .module import Module
from .parameter import Parameter


def _affine(layer: Module, shape: Any, affine: bool, bias: bool, device: Any, dtype: Any) -> None:
    """``layer.weight`` (ones) and ``layer.bias`` (zeros); None without ``affine``,
    and the bias None without ``bias``."""
    fk = _factory(device, dtype)
    layer.register_parameter("weight", Parameter(C.ones(shape, **fk)) if affine else None)
    layer.register_parameter("bias", Parameter(C.zeros(shape, **fk)) if affine and bias else None)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dimensions of each sample."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        if not isinstance(x, Tensor) or tuple(x.shape[x.ndim - n:]) != self.normalized_shape or x.ndim < n:
            raise _shape_error(self, f"ending in {self.normalized_shape}", x)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalise groups of channels of each sample; affine per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine(self, num_channels, affine, bias, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor) or x.ndim < 2 or x.shape[1] != self.num_channels:
            raise _shape_error(self, f"(N, {self.num_channels}, *)", x)
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _BatchNorm(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine(self, num_features, affine, True, device, dtype)
        fk = _factory(device, dtype)
        track = track_running_stats
        self.register_buffer("running_mean", C.zeros(num_features, **fk) if track else None)
        self.register_buffer("running_var", C.ones(num_features, **fk) if track else None)
        self.register_buffer("num_batches_tracked",
                             C.zeros((), dtype=D.int64, device=device) if track else None)

    def _check(self, x: Any) -> None:
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        self._check(x)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            from ..autograd.grad_mode import no_grad

            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / int(self.num_batches_tracked.item())
        use_batch = self.training or not self.track_running_stats
        return F.batch_norm(
            x,
            self.running_mean if not self.training or self.track_running_stats else None,
            self.running_var if not self.training or self.track_running_stats else None,
            self.weight, self.bias, use_batch, momentum, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Normalise each channel of (N, C) or (N, C, L) input over the batch."""

    def _check(self, x: Any) -> None:
        if not isinstance(x, Tensor) or x.ndim not in (2, 3) or x.shape[1] != self.num_features:
            raise _shape_error(self, f"(N, {self.num_features}) or (N, {self.num_features}, L)", x)


class BatchNorm2d(_BatchNorm):
    """Normalise each channel of (N, C, H, W) input over the batch and positions."""

    def _check(self, x: Any) -> None:
        if not isinstance(x, Tensor) or x.ndim != 4 or x.shape[1] != self.num_features:
            raise _shape_error(self, f"(N, {self.num_features}, H, W)", x)


class _InstanceNorm(_BatchNorm):
    """Per-sample, per-channel normalisation; the parameters and buffers of
    ``BatchNorm`` (affine and running stats off by default)."""

    _spatial = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        if not bias:
            self.register_parameter("bias", None)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")

    def forward(self, x: Tensor) -> Tensor:
        n = self._spatial
        if not isinstance(x, Tensor) or x.ndim not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got "
                             f"{x.ndim if isinstance(x, Tensor) else type(x).__name__}D input)")
        feature_dim = x.ndim - n - 1
        if x.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{x.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can "
                          "silence this warning by not passing in num_features, which is not used "
                          "because affine=False", stacklevel=2)
        unbatched = x.ndim == n + 1
        if unbatched:
            x = x.unsqueeze(0)
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial = 2


class RMSNorm(Module):
    """Scale the trailing ``normalized_shape`` dims of each sample by their root mean
    square (no centring, no bias); ``eps`` None is the dtype's machine epsilon."""

    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                                 else tuple(normalized_shape))
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine(self, self.normalized_shape, elementwise_affine, False, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
