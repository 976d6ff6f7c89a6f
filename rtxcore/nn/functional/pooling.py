"""Pooling: ``max_pool1d`` / ``max_pool2d``, ``avg_pool1d`` / ``avg_pool2d`` and the
adaptive pools ``adaptive_avg_pool1d`` / ``adaptive_avg_pool2d`` /
``adaptive_max_pool2d``, with PyTorch's output sizes, padding and ``ceil_mode``.

The pools reduce the sliding windows of ``windows._Windows``; ``max_pool2d`` over
non-overlapping tiles is one node (``_MaxPoolTiled``) whose backward puts each
gradient at its index. The 1-D pools are the 2-D ones on a height-1 view.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import dtype as D
from ...autograd.function import Function
from ...autograd.grad_mode import _state
from ...ops import elementwise as E
from ...ops.core import empty, own_kernel, view_of
from ...ops.creation import arange, tensor
from ...ops.indexing import stack
from ...ops.linalg import matmul
from ...tensor import Tensor
from ._args import _as_3d, _as_4d, _check_tensor, _pair, _shape, _single
from .padding import pad
from .windows import _Windows

__all__ = [
    "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
    "adaptive_avg_pool2d", "adaptive_max_pool2d",
]


def _float_min(dt: D.DType) -> Any:
    if dt.kind == "f":
        return -math.inf
    if dt is D.bool_:
        return False
    return int(np.iinfo(dt.numpy).min)


def _out_size(size: int, k: int, s: int, p_lo: int, p_hi: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (``pooling_output_shape``)."""
    eff = d * (k - 1) + 1
    num = size + p_lo + p_hi - eff + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p_lo:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _no_stride(stride: Any) -> bool:
    """A pool's stride left out (None or empty): the kernel size, as PyTorch."""
    return stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)


def _pool_args(fn: str, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any) -> tuple[tuple[int, int], ...]:
    k = _pair(kernel_size, "kernel_size", fn)
    s = k if _no_stride(stride) else _pair(stride, "stride", fn)
    p = _pair(padding, "padding", fn)
    d = _pair(dilation, "dilation", fn)
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise RuntimeError(f"{fn}: kernel_size, stride and dilation must be positive, got "
                           f"kernel_size={k}, stride={s}, dilation={d}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"{fn}: pad should be at most half of effective kernel size, but "
                               f"got pad={pp}, kernel_size={kk} and dilation={dd}")
    return k, s, p, d


def _pool_geometry(fn: str, x: Tensor, input: Tensor, k: Any, s: Any, p: Any, d: Any,
                   ceil_mode: bool) -> tuple[int, int, tuple[int, int, int, int]]:
    _, c, h, w = x._shape
    oh = _out_size(h, k[0], s[0], p[0], p[0], d[0], ceil_mode)
    ow = _out_size(w, k[1], s[1], p[1], p[1], d[1], ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{fn}: given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{oh}x{ow}). Output size is too small (input shape {_shape(input)})")
    # ceil_mode: extra bottom/right padding so that the last window exists
    eb = max(0, (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1 - (h + 2 * p[0]))
    er = max(0, (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - (w + 2 * p[1]))
    return oh, ow, (p[0], p[0] + eb, p[1], p[1] + er)


_tile_tables: dict[tuple[Any, ...], Tensor] = {}


def _tile_table(kind: str, geom: tuple[int, int, int, int, int], dev: Any) -> Tensor:
    """Constant int64 tables of the tiled max pool (cached per geometry and device):
    ``corner`` (OH, OW), the flat index into H*W of each tile's first element;
    ``pos`` (OH, kh, OW, kw), the flat index of every element of the tiles."""
    key = (kind, geom, dev)
    t = _tile_tables.get(key)
    if t is None:
        oh, ow, kh, kw, w = geom
        if kind == "corner":
            a = np.add.outer(np.arange(oh) * (kh * w), np.arange(ow) * kw)
        else:
            a = np.arange(oh * kh).reshape(oh, kh, 1, 1) * w + np.arange(ow * kw).reshape(ow, kw)
        t = tensor(a.astype(np.int64), device=dev)
        if len(_tile_tables) >= 64:
            _tile_tables.clear()
        _tile_tables[key] = t
    return t


class _MaxPoolTiled(Function):
    """max_pool2d with stride == kernel, no padding or dilation (the common case)
    as one node, returning the values and PyTorch's indices (flat into H*W).

    The tiles do not overlap, so the forward is a reshape to (N, C, OH, kh, OW,
    kw), one copy that makes each tile a row and one max over the rows (or the
    backend's ``max_pool2d_tiled``); the backward puts each gradient at its
    index (ties to the first maximum, as PyTorch): the backend's
    ``max_pool2d_tiled_backward``, else one multiply by a one-hot mask in the
    input's layout, which is also what a double backward differentiates."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, kernel: tuple[int, int], out_hw: tuple[int, int]) -> Any:
        (kh, kw), (oh, ow) = kernel, out_hw
        n, c, h, w = x._shape
        dev = x._device
        kern = own_kernel(dev, "max_pool2d_tiled", x._dtype)
        if kern is not None:
            values = empty((n, c, oh, ow), x._dtype, dev)
            indices = empty((n, c, oh, ow), D.int64, dev)
            kern(values._h, indices._h, view_of(x), kh, kw)
        else:
            xs = x if (oh * kh, ow * kw) == (h, w) else x[:, :, :oh * kh, :ow * kw]
            rows = xs.reshape(n, c, oh, kh, ow, kw).permute(0, 1, 2, 4, 3, 5).reshape(
                n, c, oh, ow, kh * kw)
            values, idx = rows.max(dim=-1)
            # tile offset p = i*kw + j -> i*w + j: p plus (w - kw) per full row of the tile
            indices = idx + _tile_table("corner", (oh, ow, kh, kw, w), dev)
            for i in range(1, kh):
                indices = indices + (idx >= i * kw).to(D.int64) * (w - kw)
        ctx.mark_non_differentiable(indices)
        ctx.indices = indices
        return values, indices

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gi: Any) -> Any:
        n, c, h, w = ctx._in[0][0]
        (kh, kw), (oh, ow) = ctx.args[1], ctx.args[2]
        indices = ctx.indices
        dev = g._device
        if not _state.enabled:
            kern = own_kernel(dev, "max_pool2d_tiled_backward", g._dtype)
            if kern is not None:
                dx = empty((n, c, h, w), g._dtype, dev)
                kern(dx._h, view_of(g), view_of(indices))
                return dx, None, None
        # (N, C, OH, kh, OW, kw): True where the flat position is the tile's index
        pos = _tile_table("pos", (oh, ow, kh, kw, w), dev)
        mask = E.eq(indices.reshape(n, c, oh, 1, ow, 1), pos)
        dx = (g.reshape(n, c, oh, 1, ow, 1) * mask).reshape(n, c, oh * kh, ow * kw)
        if (oh * kh, ow * kw) != (h, w):
            dx = pad(dx, (0, w - ow * kw, 0, h - oh * kh))
        return dx, None, None


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max over sliding windows (padding counts as -inf). With ``return_indices``,
    also the flat index (into H*W) of each maximum. The gradient goes to the
    first maximum of each window, as PyTorch's."""
    fn = "max_pool2d"
    x, unbatched = _as_4d(fn, input)
    k, s, p, d = _pool_args(fn, kernel_size, stride, padding, dilation)
    oh, ow, pads = _pool_geometry(fn, x, input, k, s, p, d, ceil_mode)
    if s == k and d == (1, 1) and not any(pads):
        values, indices = _MaxPoolTiled.apply(x, k, (oh, ow))
        if not return_indices:
            return values.squeeze(0) if unbatched else values
        return (values.squeeze(0), indices.squeeze(0)) if unbatched else (values, indices)
    n, c, _, w = x._shape
    win = _Windows.apply(x, k, s, pads, d, _float_min(x._dtype), False)
    values, idx = win.reshape(n, c, oh, ow, k[0] * k[1]).max(dim=-1)
    if not return_indices:
        return values.squeeze(0) if unbatched else values
    r = E.floor_divide(idx, k[1])
    q = E.remainder(idx, k[1])
    dev = x._device
    rows = (arange(oh, device=dev) * s[0] - pads[0]).reshape(oh, 1) + r * d[0]
    cols = arange(ow, device=dev) * s[1] - pads[2] + q * d[1]
    indices = rows * w + cols
    if unbatched:
        return values.squeeze(0), indices.squeeze(0)
    return values, indices


def _avg_divisor(size: int, k: int, s: int, p: int, out: int,
                 count_include_pad: bool) -> np.ndarray:
    """Per output position along one dim: how many elements its window averages (PyTorch's rule)."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)  # padding counts, the ceil_mode overhang doesn't
    if count_include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows (zero padding; ``count_include_pad`` as PyTorch)."""
    fn = "avg_pool2d"
    x, unbatched = _as_4d(fn, input)
    k, s, p, d = _pool_args(fn, kernel_size, stride, padding, 1)
    oh, ow, pads = _pool_geometry(fn, x, input, k, s, p, d, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool2d: divisor must be not zero")
    win = _Windows.apply(x, k, s, pads, d, 0, False)
    extra = (pads[1] - pads[0], pads[3] - pads[2])
    if divisor_override is not None:
        out = win.sum(dim=(-2, -1)) / float(divisor_override)
    elif extra == (0, 0) and (count_include_pad or p == (0, 0)):
        out = win.mean(dim=(-2, -1))
    else:
        h, w = x._shape[2:]
        dv = np.outer(_avg_divisor(h, k[0], s[0], p[0], oh, count_include_pad),
                      _avg_divisor(w, k[1], s[1], p[1], ow, count_include_pad))
        out = win.sum(dim=(-2, -1)) / tensor(dv, dtype=x._dtype, device=x._device)
    return out.squeeze(0) if unbatched else out


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """The adaptive pools' bins along one dim: [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _adaptive_matrix(size: int, out: int) -> np.ndarray:
    m = np.zeros((out, size))
    for i, (a, b) in enumerate(_bins(size, out)):
        m[i, a:b] = 1.0 / (b - a)
    return m


def _adaptive_size(fn: str, output_size: Any, h: int, w: int) -> tuple[int, int]:
    """(OH, OW) from an int or a pair (None keeps that input size); positive."""
    if isinstance(output_size, (int, np.integer)):
        output_size = (output_size, output_size)
    oh = h if output_size[0] is None else int(output_size[0])
    ow = w if output_size[1] is None else int(output_size[1])
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{fn}: output_size must be positive, got {(oh, ow)}")
    return oh, ow


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a fixed output size: bins [floor(i*H/OH), ceil((i+1)*H/OH)),
    as two small averaging matmuls (the bins of rows and of columns are separable)."""
    fn = "adaptive_avg_pool2d"
    x, unbatched = _as_4d(fn, input)
    h, w = x._shape[2:]
    oh, ow = _adaptive_size(fn, output_size, h, w)
    if (oh, ow) == (1, 1):
        out = x.mean(dim=(-2, -1), keepdim=True)
    elif h % oh == 0 and w % ow == 0:
        out = avg_pool2d(x, (h // oh, w // ow))
    else:
        dev, dt = x._device, x._dtype
        ah = tensor(_adaptive_matrix(h, oh), dtype=dt, device=dev)
        aw = tensor(_adaptive_matrix(w, ow).T, dtype=dt, device=dev)
        out = matmul(matmul(ah, x), aw)
    return out.squeeze(0) if unbatched else out


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of an (N, C, L) or (C, L) input to ``output_size`` positions."""
    _check_tensor("adaptive_avg_pool1d", "input", input)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d: expected a 2-D (C, L) or 3-D (N, C, L) input, "
                           f"got shape {_shape(input)}")
    o = _single(output_size, "output_size", "adaptive_avg_pool1d")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to a fixed output size over bins [floor(i*H/OH), ceil((i+1)*H/OH)):
    ``max_pool2d`` when the bins tile evenly, else one max per bin. With
    ``return_indices``, also each maximum's flat index into H*W."""
    fn = "adaptive_max_pool2d"
    _check_tensor(fn, "input", input)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{fn}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                           f"{_shape(input)}")
    h, w = input._shape[-2:]
    oh, ow = _adaptive_size(fn, output_size, h, w)
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(input, (h // oh, w // ow), return_indices=return_indices)
    values, indices = [], []
    for a, b in _bins(h, oh):
        for c0, c1 in _bins(w, ow):
            blk = input[..., a:b, c0:c1].flatten(-2)
            if return_indices:
                v, i = blk.max(dim=-1)
                wb = c1 - c0
                indices.append((E.floor_divide(i, wb) + a) * w + E.remainder(i, wb) + c0)
            else:
                v = blk.amax(dim=-1)
            values.append(v)
    lead = tuple(input._shape[:-2])
    out = stack(values, -1).reshape(*lead, oh, ow)
    if return_indices:
        return out, stack(indices, -1).reshape(*lead, oh, ow)
    return out


def _pool1d_args(fn: str, kernel_size: Any, stride: Any, padding: Any) -> tuple[int, int, int]:
    k = _single(kernel_size, "kernel_size", fn)
    s = k if _no_stride(stride) else _single(stride, "stride", fn)
    return k, s, _single(padding, "padding", fn)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max over sliding windows of an (N, C, L) or (C, L) input (``max_pool2d``
    of the height-1 view)."""
    fn = "max_pool1d"
    x, unbatched = _as_3d(fn, input)
    k, s, p = _pool1d_args(fn, kernel_size, stride, padding)
    d = _single(dilation, "dilation", fn)
    res = max_pool2d(x.unsqueeze(2), (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        v, i = res[0].squeeze(2), res[1].squeeze(2)
        return (v.squeeze(0), i.squeeze(0)) if unbatched else (v, i)
    out = res.squeeze(2)
    return out.squeeze(0) if unbatched else out


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Mean over sliding windows of an (N, C, L) or (C, L) input (``avg_pool2d``
    of the height-1 view)."""
    fn = "avg_pool1d"
    x, unbatched = _as_3d(fn, input)
    k, s, p = _pool1d_args(fn, kernel_size, stride, padding)
    out = avg_pool2d(x.unsqueeze(2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out
