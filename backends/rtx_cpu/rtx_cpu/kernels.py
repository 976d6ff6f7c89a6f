"""rtx_cpu's kernel table, with its memory, random-number and scatter_add kernels on NumPy.

Most kernels are the NumPy-API table shared with other array-module backends
(``rtxcore.dispatch.xp``); here are what is particular to the CPU: allocation
from the buffer pool, zero-copy transfers, random numbers and a faster
scatter_add; erf and gelu (``erf_kernels``), layer_norm and batch_norm (``norm_kernels``),
convolution (``conv_kernels``) and pooling (``window_kernels``) have modules of
their own. Views arrive as ndarrays already broadcast and promoted; each kernel
writes into ``out``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from rtxcore.dispatch import xp

from . import blas, memory, parallel, rnn_kernels
from .conv_kernels import KERNELS as _CONV_KERNELS
from .erf_kernels import erf, gelu, gelu_backward
from .norm_kernels import batch_norm, batch_norm_backward, layer_norm, layer_norm_backward
from .pow_kernels import pow_kernel
from .softmax_kernels import log_softmax, log_softmax_backward, softmax, softmax_backward
from .window_kernels import max_pool2d_tiled, max_pool2d_tiled_backward

# PyTorch computes log(0) = -inf and 1/0 = inf silently; so do we. Only warnings
# raised from the kernels' modules are ignored, and at no per-op cost (np.errstate
# costs about 1 us a call, more than a tiny add).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtxcore\.dispatch\.xp")
warnings.filterwarnings("ignore", category=RuntimeWarning,
                        module=r"rtx_cpu\.(kernels|fused|erf_kernels|norm_kernels|parallel|blas)")


# -- memory: a buffer is any C-contiguous ndarray; views are ndarrays over it

def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.empty(shape, dtype.numpy)
    if a.nbytes >= memory.POOL_MIN_BYTES:  # rare and slow anyway: the check stays cheap
        a = memory.empty(shape, dtype.numpy)
    return a, a


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    return arr, arr  # shares the caller's array: the host is our device


def to_host(x: np.ndarray) -> np.ndarray:
    return x


def _rng(seed: int, offset: int) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(key=seed, counter=offset))


def _draw_dtype(out: np.ndarray) -> Any:
    return np.float64 if out.dtype == np.float64 else np.float32


def uniform(out: np.ndarray, low: float, high: float, seed: int, offset: int) -> None:
    if out.dtype == np.float16:
        # 11 random bits, exact in float16: a float32 draw near 1 rounds up to 1.0
        # in float16, outside [0, 1) (PyTorch draws half the same way)
        bits = _rng(seed, offset).integers(0, 1 << 11, out.shape)
        u = bits.astype(np.float32) * np.float32(2.0 ** -11)
        np.copyto(out, u * np.float32(high - low) + np.float32(low), casting="unsafe")
        return
    u = _rng(seed, offset).random(out.shape, dtype=_draw_dtype(out))
    np.copyto(out, u * (high - low) + low, casting="unsafe")


def normal(out: np.ndarray, mean: float, std: float, seed: int, offset: int) -> None:
    z = _rng(seed, offset).standard_normal(out.shape, dtype=_draw_dtype(out))
    np.copyto(out, z * std + mean, casting="unsafe")


# -- scatter_add: np.add.at is an element-by-element loop (~20 ns an element). For
# floats, rows gathered along ``dim`` (the backward of embedding and index_select:
# the index is constant off ``dim``) with few targets are one one-hot matmul; any
# other float scatter is one np.bincount over flat target positions (summed in
# float64). Integers and bool keep np.add.at (exact, wraps as the dtype does).
# float16 never sums in float16 (which stops at 2048 when adding ones): every
# path accumulates in float32 or wider and rounds each element once, the
# contract's rule and PyTorch's scatter_add.

_ONEHOT_ROWS = 256  # a matmul costs `targets` multiply-adds an element: few targets only
_ONEHOT_MAX = 1 << 22  # elements of the (targets x sources) one-hot matrix
_SMALL_SCATTER = 512


def _scatter_add_wide(out: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> None:
    """scatter_add for float16 where add.at would sum in float16: the sums are
    taken in float64 over the touched positions only, added to out's values and
    rounded once."""
    if index.size == 0:
        return
    grid = [np.arange(n).reshape([n if d == e else 1 for e in range(index.ndim)])
            for d, n in enumerate(index.shape)]
    grid[dim] = index
    flat = np.ravel_multi_index(tuple(np.broadcast_arrays(*grid)), out.shape).reshape(-1)
    at, slot = np.unique(flat, return_inverse=True)
    sums = np.bincount(slot.reshape(-1), weights=np.asarray(src, np.float64).reshape(-1),
                       minlength=at.size)
    pos = np.unravel_index(at, out.shape)
    out[pos] = out[pos].astype(np.float64) + sums


# -- gather / scatter_add / index as NumPy's advanced indexing: an open grid of
# aranges over index's shape with the index itself along dim, the aranges kept per
# (shape, dim) (making them, or take_along_axis' Python, cost more than a small
# call's indexing: cross_entropy's (64, 27) gather 4.2 us so, 1.4 with the grid kept)

_GRIDS: dict[tuple[tuple[int, ...], int], tuple[Any, ...]] = {}


_GRID_MAX = 1 << 16  # elements of a kept grid's aranges (a larger one is made each call)


def _grid(index: np.ndarray, dim: int) -> tuple[Any, ...]:
    """(arange along each dim but ``dim``, shaped to broadcast; index along dim)."""
    key = (index.shape, dim)
    g = _GRIDS.get(key)
    if g is None:
        nd = index.ndim
        parts = []
        for d, n in enumerate(index.shape):
            a = None
            if d != dim:
                a = np.arange(n).reshape([n if d == e else 1 for e in range(nd)])
                a.flags.writeable = False
            parts.append(a)
        g = tuple(parts)
        if sum(index.shape) - index.shape[dim] <= _GRID_MAX:
            if len(_GRIDS) >= 256:
                _GRIDS.clear()
            _GRIDS[key] = g
    return g[:dim] + (index,) + g[dim + 1:]


def gather(out: np.ndarray, x: np.ndarray, dim: int, index: np.ndarray) -> None:
    out[...] = x[_grid(index, dim)]


def index(out: np.ndarray, x: np.ndarray, indices: tuple[np.ndarray, ...]) -> None:
    if len(indices) == 1:  # (an embedding's rows: take's one call, no Python of indexing)
        np.take(x, indices[0], 0, out)
    else:
        out[...] = x[indices]


def _scatter_add_small(out: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> None:
    """The array-module kernel's (``rtxcore.dispatch.xp``) on a kept grid."""
    at = _grid(index, dim)
    if index.shape[dim] == 1:
        # one source per line along dim (cross_entropy's backward, a gather's
        # VJP): the targets are distinct, so a plain indexed add is exact
        out[at] += src
    else:
        np.add.at(out, at, src)


def scatter_add(out: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> None:
    if out.dtype.kind != "f" or index.size < _SMALL_SCATTER:  # add.at: exact, cheap when small
        if out.dtype == np.float16:
            _scatter_add_wide(out, dim, index, src)
        else:
            _scatter_add_small(out, dim, index, src)
        return
    nd = index.ndim
    v, n = out.shape[dim], index.shape[dim]
    rows = all(index.strides[d] == 0 or index.shape[d] == 1 for d in range(nd) if d != dim)
    if rows and v <= _ONEHOT_ROWS and v * n <= _ONEHOT_MAX and index.size > n:
        wide = np.float32 if out.dtype == np.float16 else out.dtype  # BLAS, float32 sums
        onehot = np.zeros((v, n), wide)
        if dim == 0 and index.shape[1:] == out.shape[1:] and src.shape == index.shape:
            # the common case (embedding's backward) without the moveaxis views
            onehot[index[(slice(None),) + (0,) * (nd - 1)], np.arange(n)] = 1
            part = np.matmul(onehot, src.reshape(n, -1).astype(wide, copy=False))
            np.add(out, part.reshape(out.shape), out=out, casting="unsafe")
            return
        idx = np.moveaxis(index, dim, 0)[(slice(None),) + (0,) * (nd - 1)]
        onehot[idx, np.arange(n)] = 1
        s = np.moveaxis(src, dim, 0).astype(wide, copy=False)
        part = np.matmul(onehot, s.reshape(n, -1)).reshape((v,) + s.shape[1:])
        tgt = np.moveaxis(out[tuple(slice(0, k) for k in index.shape[:dim]) + (slice(None),)
                              + tuple(slice(0, k) for k in index.shape[dim + 1:])], dim, 0)
        np.add(tgt, part, out=tgt, casting="unsafe")
        return
    if out.size > 8 * index.size + (1 << 16):  # few sources into a big target: bincount's
        if out.dtype == np.float16:            # out-sized float64 array would dominate
            _scatter_add_wide(out, dim, index, src)
        else:
            _scatter_add_small(out, dim, index, src)
        return
    # flat position in out (C order over index's shape, whose dims are <= out's)
    cstride = np.cumprod((out.shape[1:] + (1,))[::-1])[::-1]
    flat = np.zeros(index.shape, np.int64)
    for d in range(nd):
        if d == dim:
            flat += index * int(cstride[d])
        else:
            shape = [1] * nd
            shape[d] = index.shape[d]
            flat += np.arange(index.shape[d], dtype=np.int64).reshape(shape) * int(cstride[d])
    sums = np.bincount(flat.reshape(-1), weights=np.asarray(src, np.float64).reshape(-1),
                       minlength=out.size)
    if out.flags.c_contiguous:
        np.add(out.reshape(-1), sums, out=out.reshape(-1), casting="unsafe")
    else:
        np.add(out, sums.reshape(out.shape), out=out, casting="unsafe")


KERNELS = xp.kernels(np)
KERNELS.update({
    "empty": empty, "from_host": from_host, "to_host": to_host,
    "uniform": uniform, "normal": normal, "erf": erf, "scatter_add": scatter_add,
    "gather": gather, "index": index,
    "pow": pow_kernel(KERNELS["pow"]),  # small and negative-base exponents (pow_kernels)
    "gelu": gelu, "gelu_backward": gelu_backward, "layer_norm": layer_norm,
    "layer_norm_backward": layer_norm_backward, "batch_norm": batch_norm,
    "batch_norm_backward": batch_norm_backward,
    "softmax": softmax, "log_softmax": log_softmax, "softmax_backward": softmax_backward,
    "log_softmax_backward": log_softmax_backward,
    "max_pool2d_tiled": max_pool2d_tiled, "max_pool2d_tiled_backward": max_pool2d_tiled_backward,
    **_CONV_KERNELS,
})

# Large elementwise ops and reductions split over the backend's threads (``parallel``:
# the same bits on any number of threads; a small call is the one NumPy call it was).
# Kernels of about a nanosecond an element or more split at a smaller size.
_MATH = ("exp", "log", "sqrt", "sin", "cos", "tanh", "expm1", "log1p", "log2", "tan")
KERNELS.update({op: parallel.unary(KERNELS[op], parallel.PART_MIN_MATH if op in _MATH
                                   else parallel.PART_MIN)
                for op in ("neg", "abs", "sign", "reciprocal", "floor", "ceil", "round", "trunc",
                           "logical_not", "isnan", "isinf", *_MATH)})
KERNELS.update({op: parallel.binary(KERNELS[op])
                for op in ("add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge",
                           "logical_and", "logical_or", "logical_xor", "floor_divide",
                           "remainder")})
KERNELS.update({op: parallel.wrap(KERNELS[op], 3 if op == "where" else 2)
                for op in ("maximum", "minimum", "where")})
KERNELS.update(copy=parallel.copy_kernel(None), cast=parallel.copy_kernel("unsafe"))
# NumPy's BLAS on one thread, large products split over the backend's (``blas``)
blas.own()
KERNELS["matmul"] = blas.matmul_kernel(KERNELS["matmul"])
# the LSTM cell's IEEE-exact steps as C passes (``rnn_kernels``: the same bits)
KERNELS["lstm_cell"] = rnn_kernels.lstm_cell_kernel(KERNELS["lstm_cell"])
KERNELS["lstm_cell_backward"] = rnn_kernels.lstm_cell_backward_kernel(
    KERNELS["lstm_cell_backward"])
KERNELS.update({op: parallel.reduction(uf, KERNELS[op]) for op, uf in (
    ("sum", np.add), ("prod", np.multiply), ("max", np.maximum), ("min", np.minimum))})
