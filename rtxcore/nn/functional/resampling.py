"""Resampling: ``interpolate`` (nearest, nearest-exact, linear, bilinear and area
modes, with PyTorch's source-index and weight formulas) and ``pixel_shuffle`` /
``pixel_unshuffle`` (channels to r x r blocks of pixels and back).

``interpolate`` gathers rows and columns at PyTorch's source indices (and mixes
two of them with PyTorch's weights for the linear modes); area mode is the
adaptive average pool.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import dtype as D
from ...ops.creation import tensor
from ...tensor import Tensor
from ._args import _check_tensor, _shape
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d

__all__ = ["interpolate", "pixel_shuffle", "pixel_unshuffle"]


def _shuffle_factor(fn: str, input: Tensor, factor: Any, what: str) -> int:
    """The pixel shuffles' checks: a Tensor of at least 3 dims, a positive factor."""
    _check_tensor(fn, "input", input)
    r = int(factor)
    if input.ndim < 3:
        raise RuntimeError(f"{fn} expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"{fn} expects a positive {what}, but got {r}")
    return r


def _regroup(input: Tensor, lead: list[int], split: tuple[int, ...], order: tuple[int, ...],
             merged: tuple[int, ...]) -> Tensor:
    """The last three dims of ``input`` split into ``split``, permuted by ``order``
    and merged into ``merged`` (the leading dims ``lead`` kept)."""
    k = len(lead)
    x = input.reshape(*lead, *split)
    perm = tuple(range(k)) + tuple(k + i for i in order)
    return x.permute(*perm).reshape(*lead, *merged)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r): each group of ``r**2`` channels
    becomes an ``r x r`` block of pixels."""
    r = _shuffle_factor("pixel_shuffle", input, upscale_factor, "upscale_factor")
    *lead, c, h, w = input._shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible "
                           f"by the square of upscale_factor, but input.size(-3)={c} is not "
                           f"divisible by {r * r}")
    oc = c // (r * r)
    return _regroup(input, lead, (oc, r, r, h, w), (0, 3, 1, 4, 2), (oc, h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W), the inverse of ``pixel_shuffle``."""
    r = _shuffle_factor("pixel_unshuffle", input, downscale_factor, "downscale_factor")
    *lead, c, h, w = input._shape
    if h % r or w % r:
        which, size = ("height", h) if h % r else ("width", w)
        raise RuntimeError(f"pixel_unshuffle expects {which} to be divisible by downscale_factor, "
                           f"but input.size({-2 if which == 'height' else -1})={size} is not "
                           f"divisible by {r}")
    return _regroup(input, lead, (c, h // r, r, w // r, r), (0, 2, 4, 1, 3),
                    (c * r * r, h // r, w // r))


def _nearest_index(in_size: int, out_size: int, scale: float | None, exact: bool) -> np.ndarray:
    """PyTorch's ``nearest_idx`` / ``nearest_neighbor_exact_compute_source_index``
    (float32 arithmetic, as its kernels)."""
    o = np.arange(out_size, dtype=np.float32)
    if not exact:
        if out_size == in_size:
            return np.arange(out_size, dtype=np.int64)
        if out_size == 2 * in_size:
            return np.arange(out_size, dtype=np.int64) >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else \
        np.float32(in_size) / np.float32(out_size)
    src = np.floor((o + np.float32(0.5)) * s if exact else o * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear_index(in_size: int, out_size: int, scale: float | None, align_corners: bool,
                  dt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's linear-interpolation sources and weights along one dim, in the
    input's precision (``area_pixel_compute_source_index`` + ``guard_index_and_lambda``):
    (i0, i1, w0, w1)."""
    one = dt.type(1)
    if align_corners:
        s = dt.type(in_size - 1) / dt.type(out_size - 1) if out_size > 1 else dt.type(0)
    elif scale is not None and scale > 0:
        s = dt.type(1.0 / scale)
    else:
        s = dt.type(in_size) / dt.type(out_size)
    o = np.arange(out_size, dtype=dt)
    if align_corners:
        src = s * o
    else:
        src = np.maximum(s * (o + dt.type(0.5)) - dt.type(0.5), dt.type(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(dt), dt.type(0), one).astype(dt)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, (one - lam).astype(dt), lam


def _gather_dim(x: Tensor, dim: int, idx: np.ndarray) -> Tensor:
    """``x`` at indices ``idx`` along ``dim``; a broadcast view and a reshape when
    ``idx`` repeats each index an integer number of times (nearest upscaling)."""
    size = x._shape[dim]
    out = idx.shape[0]
    if out == size and np.array_equal(idx, np.arange(size)):
        return x
    if out % size == 0 and np.array_equal(idx, np.arange(out) // (out // size)):
        k = out // size
        shape = tuple(x._shape)
        wide = x.unsqueeze(dim + 1).expand(*shape[:dim + 1], k, *shape[dim + 1:])
        return wide.reshape(*shape[:dim], out, *shape[dim + 1:])
    return x.index_select(dim, tensor(idx, dtype=D.int64, device=x._device))


def _lerp_dim(x: Tensor, dim: int, index: tuple[np.ndarray, ...]) -> Tensor:
    i0, i1, w0, w1 = index
    tail = (1,) * (x.ndim - dim - 1)
    dev, dt = x._device, x._dtype
    a = _gather_dim(x, dim, i0) * tensor(w0.reshape((-1,) + tail), dtype=dt, device=dev)
    b = _gather_dim(x, dim, i1) * tensor(w1.reshape((-1,) + tail), dtype=dt, device=dev)
    return a + b


def _check_spatial_dims(input: Tensor, dim: int, value: Any, name: str, given: str, fmt: str,
                        letter: str) -> None:
    """An explicit size or scale factor per spatial dim: ``dim`` of them (PyTorch's message)."""
    if len(value) != dim:
        raise ValueError(
            f"Input and {name} must have the same number of spatial dimensions, but got input "
            f"with spatial dimensions of {list(input._shape[2:])} and {given} {value}. Please "
            f"provide input tensor in (N, C, d1, d2, ...,dK) format and {fmt} in ({letter}1, "
            f"{letter}2, ...,{letter}K) format.")


_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "area")


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of an (N, C, L) or (N, C, H, W) input to ``size`` or
    by ``scale_factor``, with PyTorch's source-index and weight formulas.

    Modes: ``'nearest'`` and ``'nearest-exact'`` (3-D and 4-D), ``'linear'`` (3-D),
    ``'bilinear'`` (4-D; ``align_corners`` as PyTorch, default False), ``'area'``
    (adaptive average pooling).
    """
    _check_tensor("interpolate", "input", input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    scales: list[float] | None
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            _check_spatial_dims(input, dim, size, "output", "output size of", "output size", "o")
            if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in size):
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                f"or Tuple[int, int, int], but got size with types "
                                f"{[type(v) for v in size]}")
            out_size = [int(v) for v in size]
        else:
            out_size = [int(size)] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            _check_spatial_dims(input, dim, scale_factor, "scale_factor", "scale_factor of shape",
                                "scale_factor", "s")
            scales = [float(v) for v in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out_size = [int(math.floor(input._shape[2 + i] * scales[i])) for i in range(dim)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor or mode == "area":
        scales = None
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if input.ndim not in (3, 4):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the "
            f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
            f"(got {mode}); rtxcore supports 3D and 4D")
    if mode not in _INTERP_MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; use one of "
                                  f"{', '.join(_INTERP_MODES)}")
    if mode == "bilinear" and input.ndim != 4:
        raise NotImplementedError(f"Got {input.ndim}D input, but bilinear mode needs 4D input")
    if mode == "linear" and input.ndim != 3:
        raise NotImplementedError(f"Got {input.ndim}D input, but linear mode needs 3D input")
    if mode in ("linear", "bilinear", "area") and input._dtype.kind != "f":
        raise RuntimeError(f"interpolate: mode {mode!r} needs a floating point input, got "
                           f"{input._dtype.name}")
    if any(o <= 0 for o in out_size):
        raise RuntimeError(f"interpolate: output size {tuple(out_size)} must be positive (input "
                           f"shape {_shape(input)})")
    if mode == "area":
        if input.ndim == 3:
            return adaptive_avg_pool1d(input, out_size[0])
        return adaptive_avg_pool2d(input, tuple(out_size))
    out = input
    for i in range(dim):
        in_size = input._shape[2 + i]
        scale = None if scales is None else scales[i]
        if mode in ("nearest", "nearest-exact"):
            out = _gather_dim(out, 2 + i, _nearest_index(in_size, out_size[i], scale,
                                                         mode == "nearest-exact"))
        else:
            npdt = np.dtype(np.float64 if input._dtype is D.float64 else np.float32)
            out = _lerp_dim(out, 2 + i, _linear_index(in_size, out_size[i], scale,
                                                      bool(align_corners), npdt))
    return out if out is not input else input.clone()
