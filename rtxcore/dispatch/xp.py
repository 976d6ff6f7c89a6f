"""Kernels written once against the NumPy API, for any array module ``xp``.

A backend whose arrays speak NumPy's API (NumPy itself, CuPy, ...) and whose
``Backend.view`` hands kernels native strided arrays gets most of its kernel
table from ``kernels(xp)``: rtx_cpu calls it with ``numpy``, rtx_cuda with
``cupy``. Each backend adds what is particular to it (allocation, transfers,
random numbers) and may replace any entry.

Conventions are those of ``rtxcore.dispatch.ops``: the core allocates ``out``,
inputs arrive broadcast and promoted, and a binary op's operand may be a Python
scalar.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np

__all__ = ["kernels"]

Kernel = Callable[..., Any]


def _u(fn: Any) -> Kernel:
    k = lambda out, x: fn(x, out=out)  # noqa: E731
    k.ufunc = fn  # type: ignore[attr-defined]  # a fused runner may call it directly
    return k


def _b(fn: Any) -> Kernel:
    k = lambda out, x, y: fn(x, y, out=out)  # noqa: E731
    k.ufunc = fn  # type: ignore[attr-defined]
    return k


def _rows_merge(a: Any) -> bool:
    """Whether ``a``'s leading dims and its row dim form one axis (a reshape to
    (-1, a.shape[-1]) is a view, not a copy)."""
    dims = [(n, s) for n, s in zip(a.shape[:-1], a.strides[:-1]) if n != 1]
    return all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))


def _is_numpy(xp: Any) -> bool:
    return getattr(xp, "__name__", "") == "numpy"


_SAME_WIDTH_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}
_BRANCHLESS_MIN = 4096  # below this, where's fixed cost wins
_BOOL = np.dtype(bool)


def _neg_zero(v: Any) -> bool:
    return isinstance(v, float) and str(v).startswith("-")


def _extremum(xp: Any, ufunc: Any) -> Kernel:
    """maximum/minimum. NumPy's SIMD loop serves two contiguous arrays only: against
    a scalar (ReLU's ``maximum(x, 0)``, clamp) it runs 3x slower, so a large
    contiguous operand meets the scalar filled into ``out`` instead."""
    if not _is_numpy(xp):
        return _b(ufunc)
    scalar = (int, float, bool, np.generic)

    def kernel(out: Any, x: Any, y: Any) -> None:
        if isinstance(y, scalar):
            a, s = x, y
        elif isinstance(x, scalar):
            a, s = y, x
        else:
            ufunc(x, y, out=out)
            return
        if (out.size >= _BRANCHLESS_MIN and a.flags.c_contiguous and out.flags.c_contiguous
                and not np.may_share_memory(a, out)):
            out.fill(s)
            ufunc(a, out, out=out)
        else:
            ufunc(x, y, out=out)

    return kernel


def _arg_extremum(xp: Any, arg: Any) -> Kernel:
    """argmax/argmin with NumPy's rule: the first NaN wins. A device library's
    reduction compares with < and >, false for every NaN, so with several NaNs
    it may keep any of them: there the first NaN's index is taken separately
    (the first True of isnan) and chosen where a NaN is present -- three
    reductions, no host wait to ask whether one is."""
    if _is_numpy(xp):
        return lambda out, x, axis: arg(x, axis=axis, keepdims=True, out=out)

    def kernel(out: Any, x: Any, axis: int) -> None:
        if x.dtype.kind not in "fc":
            arg(x, axis=axis, keepdims=True, out=out)
            return
        nan = xp.isnan(x)
        first_nan = xp.argmax(nan, axis=axis, keepdims=True)
        xp.copyto(out, xp.where(xp.any(nan, axis=axis, keepdims=True), first_nan,
                                arg(x, axis=axis, keepdims=True)))

    return kernel


def _reduction(xp: Any, ufunc: Any, fallback: Any) -> Kernel:
    f16, f32 = xp.dtype("float16"), xp.float32
    if _is_numpy(xp):
        reduce = ufunc.reduce
        # ufunc.reduce directly: np.sum's Python wrapper costs more than a tiny sum
        def kernel(out: Any, x: Any, axes: tuple[int, ...]) -> None:
            if x.dtype == f16:  # accumulate in float32, as PyTorch does
                reduce(x, axes, f32, out, True)
            elif not axes or axes[0] != 0:
                # only inner axes: a few elements per output are faster folded
                if out.size >= _FOLD_MIN_OUT and _fold_size(x, axes) <= _FOLD_MAX:
                    _fold(ufunc, out, x, axes)
                else:
                    reduce(x, axes, None, out, True)
            else:
                # leading axes first: reducing them is a long elementwise loop over
                # what remains, where reducing leading and inner axes together
                # (a bias's gradient over N, H, W) runs the slow inner loop N times
                lead = 0
                while lead < len(axes) and axes[lead] == lead:
                    lead += 1
                if lead == len(axes):
                    reduce(x, axes, None, out, True)
                else:
                    part = reduce(x, axes[:lead], None, None, True)
                    reduce(part, axes[lead:], None, out, True)
    else:  # the functions, whose keywords every NumPy-like module shares
        accumulates = fallback in (xp.sum, xp.prod)

        def kernel(out: Any, x: Any, axes: tuple[int, ...]) -> None:
            if x.dtype == f16 and accumulates:
                out[...] = fallback(x, axis=axes, dtype=f32, keepdims=True)
            else:
                fallback(x, axis=axes, out=out, keepdims=True)

    return kernel


# A reduction over a few elements per output (pooling windows: 2x2, 3x3) is
# faster as that many elementwise ufunc calls over whole strided slices than as
# ufunc.reduce, whose inner loop then runs over the tiny window.
_FOLD_MAX = 16
_FOLD_MIN_OUT = 1024


def _fold_size(x: Any, axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n if axes else _FOLD_MAX + 1


def _fold(ufunc: Any, out: Any, x: Any, axes: tuple[int, ...]) -> None:
    """out (keepdim-shaped) = ufunc folded over x's ``axes``, slice by slice."""
    dst = out[tuple(0 if d in axes else slice(None) for d in range(x.ndim))]
    first = True
    for combo in itertools.product(*(range(x.shape[a]) for a in axes)):
        pos = dict(zip(axes, combo))
        src = x[tuple(pos.get(d, slice(None)) for d in range(x.ndim))]
        if first:
            dst[...] = src
            first = False
        else:
            ufunc(dst, src, out=dst)


def kernels(xp: Any, scatter_add_at: Callable[[Any, Any, Any], None] | None = None) -> dict[str, Kernel]:
    """The kernel table for array module ``xp``. ``scatter_add_at(out, index_tuple,
    src)`` accumulates with repeats (default ``xp.add.at``)."""
    add_at = scatter_add_at or xp.add.at
    f64, i64 = xp.float64, xp.int64

    def full(out: Any, value: Any) -> None:
        out[...] = value

    def arange(out: Any, start: Any, step: Any) -> None:
        wide = f64 if out.dtype.kind == "f" else i64
        xp.copyto(out, xp.arange(out.shape[0], dtype=wide) * step + start, casting="unsafe")

    def copy(out: Any, x: Any) -> None:
        xp.copyto(out, x)

    def cast(out: Any, x: Any) -> None:
        xp.copyto(out, x, casting="unsafe")

    numpy = _is_numpy(xp)

    def pow_(out: Any, x: Any, y: Any) -> None:
        # (CuPy's integer power already has C's rule for negative exponents, and
        # asking whether any is negative would make the host wait for the device)
        if numpy and out.dtype.kind in "iu" and bool(xp.any(xp.less(y, 0))):
            # integers to negative powers, as in C and PyTorch: 1 ** -n = 1,
            # (-1) ** -n = +-1, anything else truncates to 0
            y = xp.asarray(y)
            safe = xp.power(x, xp.where(y < 0, 0, y))
            neg = xp.where(xp.equal(x, 1), 1,
                           xp.where(xp.equal(x, -1), xp.where(y % 2 == 0, 1, -1), 0))
            xp.copyto(out, xp.where(y < 0, neg, safe), casting="unsafe")
        else:
            xp.power(x, y, out=out)

    def matmul(out: Any, a: Any, b: Any) -> None:
        # (..., n, k) @ (k, m) arrives with b broadcast over the batch (stride 0):
        # array libraries make such an operand contiguous first (CuPy copies the
        # weight once per batch element) or loop over the batch. When a's batch
        # and row dims merge, it is one 2-D product over all rows instead.
        nd = out.ndim
        if (nd >= 3 and b.ndim == nd and a.ndim == nd and a.size and out.size
                and not any(b.strides[:-2]) and _rows_merge(a) and _rows_merge(out)):
            m = out.shape[-1]
            xp.matmul(a.reshape(-1, a.shape[-1]), b[(0,) * (nd - 2)],
                      out=out.reshape(-1, m))
            return
        xp.matmul(a, b, out=out)

    def where(out: Any, c: Any, x: Any, y: Any) -> None:
        # two passes into out, no temporary (out is always a fresh tensor in the core)
        xp.copyto(out, y, casting="unsafe")
        xp.copyto(out, x, casting="unsafe", where=c)

    if _is_numpy(xp):
        generic_where = where

        def where(out: Any, c: Any, x: Any, y: Any) -> None:  # noqa: F811
            # NumPy's where and masked copyto branch per element: on a mask of
            # data (ReLU's backward) 6x slower than selecting the bits without a
            # branch, out = y ^ ((x ^ y) & -c), in integers of out's width. A
            # broadcast mask (causal attention's) is regular, so the branches are
            # predicted, and the bit ops would run over its short inner rows
            bits = _SAME_WIDTH_INT.get(out.dtype.itemsize)
            if (bits is None or out.size < _BRANCHLESS_MIN or c.dtype != _BOOL
                    or 0 in c.strides):
                return generic_where(out, c, x, y)
            it = xp.dtype(bits)
            mask = c.view(xp.int8).astype(it)
            xp.negative(mask, out=mask)
            o = out.view(it)
            x = xp.asarray(x, out.dtype).view(it)
            if isinstance(y, (int, float, bool)) and y == 0 and not _neg_zero(y):
                xp.bitwise_and(x, mask, out=o)
                return
            y = xp.asarray(y, out.dtype).view(it)
            xp.bitwise_xor(x, y, out=o)
            xp.bitwise_and(o, mask, out=o)
            xp.bitwise_xor(o, y, out=o)

    def gather(out: Any, x: Any, dim: int, index: Any) -> None:
        out[...] = xp.take_along_axis(x, index, axis=dim)

    def scatter_add(out: Any, dim: int, index: Any, src: Any) -> None:
        # an open grid over index's shape, with the index itself along dim
        nd = index.ndim
        grid = [xp.arange(n).reshape([n if d == e else 1 for e in range(nd)])
                for d, n in enumerate(index.shape)]
        grid[dim] = index
        if index.shape[dim] == 1:
            # one source per line along dim (cross_entropy's backward, a gather's
            # VJP): the targets are distinct, so a plain indexed add is exact
            out[tuple(grid)] += src
        else:
            add_at(out, tuple(grid), src)

    def index(out: Any, x: Any, indices: tuple[Any, ...]) -> None:
        out[...] = x[indices]

    def index_put(out: Any, indices: tuple[Any, ...], values: Any) -> None:
        out[indices] = values

    def masked_select(out: Any, x: Any, mask: Any) -> None:
        out[...] = x[mask]

    # NumPy's default sort isn't stable; CuPy's always is and accepts no kind
    stable = {"kind": "stable"} if _is_numpy(xp) else {}

    def sort(values: Any, indices: Any, x: Any, axis: int, descending: bool) -> None:
        if descending:
            # stable descending: sort the reversed array, reverse back, and map the
            # positions, so equal elements keep their original order
            n = x.shape[axis]
            idx = xp.flip(xp.argsort(xp.flip(x, axis), axis=axis, **stable), axis)
            idx = (n - 1) - idx
        else:
            idx = xp.argsort(x, axis=axis, **stable)
        indices[...] = idx
        values[...] = xp.take_along_axis(x, idx, axis=axis)

    def softmax(out: Any, x: Any, axis: int) -> None:
        xp.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        xp.exp(out, out=out)
        out /= out.sum(axis=axis, keepdims=True)

    def log_softmax(out: Any, x: Any, axis: int) -> None:
        xp.subtract(x, x.max(axis=axis, keepdims=True), out=out)
        out -= xp.log(xp.exp(out).sum(axis=axis, keepdims=True))

    return {
        # memory (allocation, transfers and random numbers are the backend's own)
        "full": full, "arange": arange, "copy": copy, "cast": cast,
        # unary
        "neg": _u(xp.negative), "abs": _u(xp.absolute), "sign": _u(xp.sign),
        "exp": _u(xp.exp), "log": _u(xp.log), "sqrt": _u(xp.sqrt), "sin": _u(xp.sin),
        "cos": _u(xp.cos), "tanh": _u(xp.tanh), "reciprocal": _u(xp.reciprocal),
        "floor": _u(xp.floor), "logical_not": _u(xp.logical_not),
        # binary
        "add": _b(xp.add), "sub": _b(xp.subtract), "mul": _b(xp.multiply),
        "div": _b(xp.true_divide), "pow": pow_, "maximum": _extremum(xp, xp.maximum),
        "minimum": _extremum(xp, xp.minimum), "logical_and": _b(xp.logical_and),
        "logical_or": _b(xp.logical_or),
        "eq": _b(xp.equal), "ne": _b(xp.not_equal), "lt": _b(xp.less), "le": _b(xp.less_equal),
        "gt": _b(xp.greater), "ge": _b(xp.greater_equal),
        # ternary
        "where": where,
        # reductions
        "sum": _reduction(xp, xp.add, xp.sum), "prod": _reduction(xp, xp.multiply, xp.prod),
        "max": _reduction(xp, xp.maximum, xp.amax), "min": _reduction(xp, xp.minimum, xp.amin),
        "argmax": _arg_extremum(xp, xp.argmax), "argmin": _arg_extremum(xp, xp.argmin),
        "matmul": matmul,
        # indexing
        "gather": gather, "scatter_add": scatter_add, "index": index,
        "masked_select": masked_select,
        # composites the array library does better (accuracy or speed) than the
        # core's decomposition
        "expm1": _u(xp.expm1), "log1p": _u(xp.log1p), "log2": _u(xp.log2), "tan": _u(xp.tan),
        "ceil": _u(xp.ceil), "round": _u(xp.rint), "trunc": _u(xp.trunc),
        "isnan": _u(xp.isnan), "isinf": _u(xp.isinf),
        "floor_divide": _b(xp.floor_divide), "remainder": _b(xp.remainder),
        "logical_xor": _b(xp.logical_xor),
        "cumsum": lambda out, x, axis: xp.cumsum(x, axis=axis, out=out),
        "sort": sort, "index_put": index_put,
        "softmax": softmax, "log_softmax": log_softmax,
        **_rnn_cells(xp),
    }


def _rnn_cells(xp: Any) -> dict[str, Kernel]:
    """The recurrent cells' composites (``lstm_cell``, ``gru_cell`` and their
    backwards). Each is a few calls with ``out=`` on contiguous (B, H) blocks:
    the gates are copied gate-major once (``act`` is (k, B, H) for that reason:
    a call on a column block of a (B, kH) array walks it row by row, ~3x the
    time), the gradients back into (B, kH) rows once. The steps are those of
    the core's decomposition (``rtxcore.nn._rnn_cells``) in its order -- the
    sigmoid as ``1 / (1 + e**-x)`` in four steps as the core's ``sigmoid``, each
    product's operands in the same order -- so on NumPy they give its bits.
    float16 computes in float32 and rounds each output once, as the
    decomposition does (and PyTorch). Outputs never alias inputs."""

    def gate_major(out: Any, a: Any) -> Any:
        """(B, k*H) ``a`` copied into (k, B, H) ``out``."""
        k, b, n = out.shape
        xp.copyto(out, a.reshape(b, k, n).transpose(1, 0, 2))
        return out

    def row_major(out: Any, a: Any) -> None:
        """(k, B, H) ``a`` into (B, k*H) ``out``."""
        k, b, n = a.shape
        xp.copyto(out.reshape(b, k, n), a.transpose(1, 0, 2))

    def sigmoid_(a: Any) -> None:
        xp.negative(a, out=a)
        xp.exp(a, out=a)
        xp.add(a, 1, out=a)
        xp.reciprocal(a, out=a)

    def lstm_cell(h: Any, c: Any, act: Any, gi: Any, gh: Any, c_prev: Any) -> None:
        gate_major(act, xp.add(gi, gh))
        i, f, g, o = act
        xp.tanh(g, out=g)
        sigmoid_(act[:2])
        sigmoid_(o)
        xp.multiply(f, c_prev, out=c)
        xp.multiply(i, g, out=h)
        xp.add(c, h, out=c)
        xp.tanh(c, out=h)
        xp.multiply(o, h, out=h)

    def lstm_cell_backward(dgates: Any, dc_prev: Any, dh: Any, dc: Any, act: Any, c: Any,
                           c_prev: Any) -> None:
        i, f, g, o = act
        tc = dc_prev  # (scratch until the last line)
        xp.tanh(c, out=tc)
        dct = xp.multiply(tc, tc)
        xp.subtract(1, dct, out=dct)
        xp.multiply(dct, o, out=dct)
        xp.multiply(dct, dh, out=dct)
        if dc is not None:
            xp.add(dct, dc, out=dct)
        d = xp.subtract(1, act)               # (1 - s) * s: the sigmoids' derivatives
        xp.multiply(d, act, out=d)
        di, df, dg, do = d
        xp.multiply(g, g, out=dg)             # tanh's: 1 - g * g
        xp.subtract(1, dg, out=dg)
        xp.multiply(di, g, out=di)
        xp.multiply(df, c_prev, out=df)
        xp.multiply(dg, i, out=dg)
        xp.multiply(do, tc, out=do)
        xp.multiply(d[:3], dct, out=d[:3])
        xp.multiply(do, dh, out=do)
        row_major(dgates, d)
        xp.multiply(dct, f, out=dc_prev)

    def gru_cell(h: Any, act: Any, gi: Any, gh: Any, h_prev: Any) -> None:
        n3, b, n = act.shape
        x = gate_major(xp.empty((3, b, n), act.dtype), gi)
        y = gate_major(xp.empty((3, b, n), act.dtype), gh)
        rz, nn = act[:2], act[2]
        xp.add(x[:2], y[:2], out=rz)
        sigmoid_(rz)
        xp.multiply(act[0], y[2], out=nn)
        xp.add(nn, x[2], out=nn)
        xp.tanh(nn, out=nn)
        xp.subtract(h_prev, nn, out=h)
        xp.multiply(h, act[1], out=h)
        xp.add(h, nn, out=h)

    def gru_cell_backward(dgi: Any, dgh: Any, dh_prev: Any, dh: Any, act: Any, gh: Any,
                          h_prev: Any) -> None:
        r, z, nn = act
        n = nn.shape[-1]
        d = xp.empty(act.shape, act.dtype)
        dr, dz, dn = d
        t = xp.subtract(1, z)
        xp.multiply(nn, nn, out=dn)           # dn = dh * ((1 - z) * (1 - n * n))
        xp.subtract(1, dn, out=dn)
        xp.multiply(t, dn, out=dn)
        xp.multiply(dh, dn, out=dn)
        xp.subtract(h_prev, nn, out=dz)       # dz = dh * ((h_prev - n) * z * (1 - z))
        xp.multiply(dz, z, out=dz)
        xp.multiply(dz, t, out=dz)
        xp.multiply(dh, dz, out=dz)
        xp.subtract(1, r, out=dr)             # dr = dn * (gh_n * r * (1 - r))
        xp.multiply(gh[:, 2 * n:], r, out=t)
        xp.multiply(t, dr, out=dr)
        xp.multiply(dn, dr, out=dr)
        row_major(dgi, d)
        xp.multiply(dn, r, out=dn)
        row_major(dgh, d)
        xp.multiply(dh, z, out=dh_prev)

    def in_float32(fn: Kernel, n_out: int) -> Kernel:
        """``fn`` computing float16 in float32, each output rounded once."""
        def run(*args: Any) -> None:
            if args[0].dtype != xp.float16:
                return fn(*args)
            outs = [xp.empty(a.shape, xp.float32) for a in args[:n_out]]
            fn(*outs, *(None if a is None else a.astype(xp.float32) for a in args[n_out:]))
            for o, w in zip(args[:n_out], outs):
                xp.copyto(o, w, casting="same_kind")
            return None

        return run

    return {"lstm_cell": in_float32(lstm_cell, 3),
            "lstm_cell_backward": in_float32(lstm_cell_backward, 2),
            "gru_cell": in_float32(gru_cell, 2),
            "gru_cell_backward": in_float32(gru_cell_backward, 3)}


def span(xp: Any, arr: Any) -> tuple[Any, tuple[int, ...], tuple[int, ...], int]:
    """(buffer, shape, strides, offset) sharing ``arr``'s memory: the buffer is a
    1-D array over the span ``arr`` reaches (strides in elements, non-negative).
    For ``from_dlpack`` on backends whose buffers are ``xp`` arrays."""
    isz = arr.itemsize
    if any(s < 0 for s in arr.strides):
        raise BufferError("from_dlpack: negative strides can't be shared (tensors have "
                          "non-negative strides); pass a copy, e.g. numpy.ascontiguousarray(x)")
    if any(s % isz for s in arr.strides):
        arr = xp.ascontiguousarray(arr)  # (strides not a multiple of the item: a copy)
    shape = tuple(arr.shape)
    if arr.flags.c_contiguous:
        buf = arr.reshape(-1)
        strides = []
        acc = 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n if n > 1 else 1
        return buf, shape, tuple(reversed(strides)), 0
    strides = tuple(s // isz for s in arr.strides)
    n = 1
    for d in shape:
        n *= d
    length = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if n else 0
    buf = xp.lib.stride_tricks.as_strided(arr, (length,), (isz,))
    return buf, shape, strides, 0
