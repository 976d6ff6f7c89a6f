"""Every primitive (and a few composites) on NumPy: one line per op where NumPy
has the function. Views arrive as ndarrays already broadcast and promoted; each
kernel writes into ``out``."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from . import memory

# PyTorch computes log(0) = -inf and 1/0 = inf silently; so do we. Only warnings
# raised from this module are ignored, and at no per-op cost (np.errstate costs
# about 1 us a call, more than a tiny add).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtx_cpu\.kernels")


# -- memory -------------------------------------------------------------------------


# A buffer is any C-contiguous ndarray; views are ndarrays built over it.


def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.empty(shape, dtype.numpy)
    if a.nbytes >= memory.POOL_MIN_BYTES:  # rare and slow anyway: the check stays cheap
        a = memory.empty(shape, dtype.numpy)
    return a, a


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    return arr, arr  # shares the caller's array: the host is our device


def to_host(x: np.ndarray) -> np.ndarray:
    return x


def full(out: np.ndarray, value: Any) -> None:
    out[...] = value


def arange(out: np.ndarray, start: Any, step: Any) -> None:
    wide = np.float64 if out.dtype.kind == "f" else np.int64
    np.copyto(out, np.arange(out.shape[0], dtype=wide) * step + start, casting="unsafe")


def copy(out: np.ndarray, x: np.ndarray) -> None:
    np.copyto(out, x)


def cast(out: np.ndarray, x: np.ndarray) -> None:
    np.copyto(out, x, casting="unsafe")


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


# -- reductions, matmul, indexing ------------------------------------------------------


def _reduction(ufunc: Any) -> Any:
    # ufunc.reduce directly: np.sum's Python wrapper costs more than a tiny sum
    reduce = ufunc.reduce

    def kernel(out: np.ndarray, x: np.ndarray, axes: tuple[int, ...]) -> None:
        if x.dtype == np.float16:  # accumulate in float32, as PyTorch does
            reduce(x, axes, np.float32, out, True)
        else:
            reduce(x, axes, None, out, True)

    return kernel


def gather(out: np.ndarray, x: np.ndarray, dim: int, index: np.ndarray) -> None:
    out[...] = np.take_along_axis(x, index, axis=dim)


def _grid(index: np.ndarray, dim: int) -> tuple[Any, ...]:
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    return tuple(grid)


def scatter_add(out: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> None:
    np.add.at(out, _grid(index, dim), src)


def index(out: np.ndarray, x: np.ndarray, indices: tuple[np.ndarray, ...]) -> None:
    out[...] = x[indices]


def index_put(out: np.ndarray, indices: tuple[np.ndarray, ...], values: np.ndarray) -> None:
    out[indices] = values


def masked_select(out: np.ndarray, x: np.ndarray, mask: np.ndarray) -> None:
    out[...] = x[mask]


def sort(values: np.ndarray, indices: np.ndarray, x: np.ndarray, axis: int, descending: bool) -> None:
    if descending:
        # stable descending: sort the reversed array, reverse back, and map the
        # positions, so equal elements keep their original order
        n = x.shape[axis]
        idx = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        idx = (n - 1) - idx
    else:
        idx = np.argsort(x, axis=axis, kind="stable")
    indices[...] = idx
    values[...] = np.take_along_axis(x, idx, axis=axis)


def erf(out: np.ndarray, x: np.ndarray) -> None:
    # NumPy has no erf; the C library's, element by element, is exact and still
    # faster than any vectorised series over the whole array
    flat = np.fromiter(map(math.erf, x.astype(np.float64).ravel()), np.float64, count=x.size)
    np.copyto(out, flat.reshape(x.shape), casting="unsafe")


def pow_(out: np.ndarray, x: Any, y: Any) -> None:
    if out.dtype.kind in "iu" and np.any(np.less(y, 0)):
        # integers to negative powers, as in C and PyTorch: 1 ** -n = 1,
        # (-1) ** -n = +-1, anything else truncates to 0
        y = np.asarray(y)
        safe = np.power(x, np.where(y < 0, 0, y))
        neg = np.where(np.equal(x, 1), 1, np.where(np.equal(x, -1), np.where(y % 2 == 0, 1, -1), 0))
        np.copyto(out, np.where(y < 0, neg, safe), casting="unsafe")
    else:
        np.power(x, y, out=out)


def where(out: np.ndarray, c: np.ndarray, x: Any, y: Any) -> None:
    # two passes into out, no temporary (out is always a fresh tensor in the core)
    np.copyto(out, y, casting="unsafe")
    np.copyto(out, x, casting="unsafe", where=c)


def softmax(out: np.ndarray, x: np.ndarray, axis: int) -> None:
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def log_softmax(out: np.ndarray, x: np.ndarray, axis: int) -> None:
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))


def _u(fn: Any) -> Any:
    return lambda out, x: fn(x, out=out)


def _b(fn: Any) -> Any:
    return lambda out, x, y: fn(x, y, out=out)


KERNELS = {
    # memory
    "empty": empty, "from_host": from_host, "to_host": to_host, "full": full,
    "arange": arange, "copy": copy, "cast": cast, "uniform": uniform, "normal": normal,
    # unary
    "neg": _u(np.negative), "abs": _u(np.absolute), "sign": _u(np.sign),
    "exp": _u(np.exp), "log": _u(np.log), "sqrt": _u(np.sqrt), "sin": _u(np.sin),
    "cos": _u(np.cos), "tanh": _u(np.tanh), "reciprocal": _u(np.reciprocal),
    "floor": _u(np.floor), "logical_not": _u(np.logical_not),
    # binary
    "add": _b(np.add), "sub": _b(np.subtract), "mul": _b(np.multiply),
    "div": _b(np.true_divide), "pow": pow_, "maximum": _b(np.maximum),
    "minimum": _b(np.minimum), "logical_and": _b(np.logical_and),
    "logical_or": _b(np.logical_or),
    "eq": _b(np.equal), "ne": _b(np.not_equal), "lt": _b(np.less), "le": _b(np.less_equal),
    "gt": _b(np.greater), "ge": _b(np.greater_equal),
    # ternary
    "where": where,
    # reductions
    "sum": _reduction(np.add), "prod": _reduction(np.multiply),
    "max": _reduction(np.maximum), "min": _reduction(np.minimum),
    "argmax": lambda out, x, axis: np.argmax(x, axis=axis, keepdims=True, out=out),
    "argmin": lambda out, x, axis: np.argmin(x, axis=axis, keepdims=True, out=out),
    "matmul": lambda out, a, b: np.matmul(a, b, out=out),
    # indexing
    "gather": gather, "scatter_add": scatter_add, "index": index,
    "masked_select": masked_select,
    # composites NumPy does better (accuracy or speed) than the core's decomposition
    "expm1": _u(np.expm1), "log1p": _u(np.log1p), "log2": _u(np.log2), "tan": _u(np.tan),
    "ceil": _u(np.ceil), "round": _u(np.rint), "trunc": _u(np.trunc),
    "isnan": _u(np.isnan), "isinf": _u(np.isinf),
    "floor_divide": _b(np.floor_divide), "remainder": _b(np.remainder),
    "logical_xor": _b(np.logical_xor),
    "cumsum": lambda out, x, axis: np.cumsum(x, axis=axis, out=out),
    "sort": sort, "index_put": index_put, "erf": erf,
    "softmax": softmax, "log_softmax": log_softmax,
}
