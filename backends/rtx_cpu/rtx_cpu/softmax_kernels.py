"""softmax and log_softmax with their backwards on NumPy, in blocks of whole rows over threads.

rtx_cpu's kernels for the ``softmax``/``log_softmax`` primitives and the
``softmax_backward``/``log_softmax_backward`` composites (``kernels.KERNELS``
lists them). cross_entropy's forward is log_softmax's kernel.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from rtxcore.dispatch import xp

from .norm_kernels import split

# -- the blocks: along the last axis of float32/float64 rows whose elements are
# contiguous, every step of a block of whole rows (about _SM_BLOCK elements) runs
# before the next block starts, in scratch of the block's size, so that the block
# stays in L2 between steps and nothing the size of the tensor is allocated (the
# whole-array steps fault in a fresh 16 MB temporary each at 4096 x 1024). The
# steps and their order are the whole-array formulas' (the array-module table's
# kernels and the core's backward rules), and each row's are its own: its max and
# its sums are NumPy's pairwise sums along the row, whatever rows are beside it. So
# a row's result is the same in any block and on any thread, and a large input
# spreads contiguous runs of rows over ``fused``'s threads (``norm_kernels.split``),
# bit for bit the one-thread result.
#
# A (k, N) ufunc with a (k, 1) operand runs at about half the speed of a same-shape
# one; with NumPy's buffers smaller than a row it runs near that speed for rows of
# _SM_UNBUFFERED_MIN or more (as layer_norm's, ``norm_kernels``). Nothing is cast,
# so no result changes with the buffers.
#
# Other layouts (another axis, strided rows) and float16 (whose steps round to
# half each, as the whole-array kernels do) keep the whole-array steps.

_SM_BLOCK = 1 << 18  # elements: 1 MB of float32 per block-sized array (a core's L2)
# The steps are compute-bound (exp: about 0.5 ns an element, the rest 0.6), so fewer,
# larger blocks win by their ~12 calls' overhead more than smaller ones by cache: one
# thread at 4096 x 1024 (CPU time, 2 shared cores) in blocks of 64K / 128K / 256K /
# 512K / 4M elements: softmax 1.61 / 1.48 / 1.40 / 1.32 / 1.36 ns an element, the
# whole-array steps 1.65.
_SM_SMALL = 1 << 15  # elements: a smaller input takes the whole-array steps (the same
# values: they are one block) without the blocks' few us of Python
_SM_PARALLEL_MIN = 1 << 17  # elements: a smaller input runs on the calling thread alone
_SM_UNBUFFERED_MIN = 512  # columns
_SM_BUFSIZE = 16  # elements (the smallest NumPy 1 accepts)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

_XP = xp.kernels(np)
# (log(0) = -inf, exp's overflow and inf - inf = nan silently, as PyTorch: see kernels.py)
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtx_cpu\.softmax_kernels")


def _rows(a: np.ndarray) -> np.ndarray | None:
    """``a`` as (M, N) rows along its last axis without a copy, each row's
    elements contiguous; None where it has no such view."""
    if a.ndim == 0 or a.strides[-1] != a.itemsize:
        return None
    if a.ndim == 2:
        return a
    n = a.shape[-1]
    if a.ndim == 1:
        return a.reshape(1, n)
    try:
        return a.reshape(-1, n, copy=False)
    except (ValueError, TypeError):  # (a copy needed; NumPy 1: no ``copy``)
        return a.reshape(-1, n) if a.flags.c_contiguous else None


def _blocked(out: np.ndarray, axis: int, *xs: np.ndarray) -> list[np.ndarray] | None:
    """out and xs as (M, N) row views for the blocked kernels, or None where they
    take the whole-array steps (see above)."""
    if out.dtype not in _FLOATS or axis != out.ndim - 1 or not out.flags.c_contiguous:
        return None
    views = [_rows(out)]
    for a in xs:
        if a.dtype != out.dtype or a.shape != out.shape:
            return None
        views.append(_rows(a))
    return None if any(v is None for v in views) else views


class _small_buffers:
    """NumPy's ufunc buffers smaller than a row for (k, N) op (k, 1) steps, for
    rows of ``_SM_UNBUFFERED_MIN`` or more (thread-local, as NumPy's setting)."""

    def __init__(self, n: int) -> None:
        self.on = n >= _SM_UNBUFFERED_MIN

    def __enter__(self) -> None:
        self.old = np.setbufsize(_SM_BUFSIZE) if self.on else None

    def __exit__(self, *exc: Any) -> None:
        if self.old is not None:
            np.setbufsize(self.old)


def _run_rows(out: np.ndarray, ins: list[np.ndarray], step: Any, scratch: int) -> None:
    """``step(o, ins_block, s, t)`` over blocks of whole rows of the (M, N)
    arrays, the rows split over threads; s: (k,) scratch, t: ``scratch`` (k, N)
    scratch arrays, each thread its own."""
    m, n = out.shape
    rows = max(1, _SM_BLOCK // max(n, 1))

    def run(lo: int, hi: int) -> None:
        k = min(rows, hi - lo)
        s = np.empty(k, out.dtype)
        t = [np.empty((k, n), out.dtype) for _ in range(scratch)]
        bufs = _small_buffers(n)
        for i in range(lo, hi, rows):
            j = min(i + rows, hi)
            b = j - i
            step(out[i:j], [a[i:j] for a in ins], s[:b], [u[:b] for u in t], bufs)

    split(m, m * n, run, _SM_PARALLEL_MIN)


# -- forward: the array-module table's steps (``rtxcore.dispatch.xp``), per block

def _softmax_step(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray, t: list[np.ndarray],
                  bufs: _small_buffers) -> None:
    x, = ins
    np.maximum.reduce(x, axis=1, out=s)
    with bufs:
        np.subtract(x, s[:, None], out=o)
    np.exp(o, out=o)
    np.add.reduce(o, axis=1, out=s)
    with bufs:
        np.divide(o, s[:, None], out=o)


def _log_softmax_step(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray,
                      t: list[np.ndarray], bufs: _small_buffers) -> None:
    x, = ins
    e, = t
    np.maximum.reduce(x, axis=1, out=s)
    with bufs:
        np.subtract(x, s[:, None], out=o)
    np.exp(o, out=e)
    np.add.reduce(e, axis=1, out=s)
    np.log(s, out=s)
    with bufs:
        np.subtract(o, s[:, None], out=o)


def softmax(out: np.ndarray, x: np.ndarray, axis: int) -> None:
    v = _blocked(out, axis, x) if out.size > _SM_SMALL else None
    if v is None:
        _XP["softmax"](out, x, axis)
        return
    _run_rows(v[0], v[1:], _softmax_step, 0)


def log_softmax(out: np.ndarray, x: np.ndarray, axis: int) -> None:
    v = _blocked(out, axis, x) if out.size > _SM_SMALL else None
    if v is None:
        _XP["log_softmax"](out, x, axis)
        return
    _run_rows(v[0], v[1:], _log_softmax_step, 1)


# -- backward: the core's rules' steps (``autograd/rules/reductions.py``), per block,
# with out's block as the scratch: softmax's y * (g - sum(g * y)), log_softmax's
# g - exp(y) * sum(g) (sums along each row)

def _softmax_backward_step(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray,
                           t: list[np.ndarray], bufs: _small_buffers) -> None:
    g, y = ins
    np.multiply(g, y, out=o)
    np.add.reduce(o, axis=1, out=s)
    with bufs:
        np.subtract(g, s[:, None], out=o)
    np.multiply(o, y, out=o)


def _log_softmax_backward_step(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray,
                               t: list[np.ndarray], bufs: _small_buffers) -> None:
    g, y = ins
    np.add.reduce(g, axis=1, out=s)
    np.exp(y, out=o)
    with bufs:
        np.multiply(o, s[:, None], out=o)
    np.subtract(g, o, out=o)


def _row_sums(a: np.ndarray, axis: int) -> np.ndarray:
    """a's sums along ``axis`` (kept), float16 accumulated in float32 and rounded
    once (the core's sum)."""
    if a.dtype == np.float16:
        return np.add.reduce(a, axis=axis, dtype=np.float32, keepdims=True).astype(a.dtype)
    return np.add.reduce(a, axis=axis, keepdims=True)


def softmax_backward(out: np.ndarray, g: np.ndarray, y: np.ndarray, axis: int) -> None:
    v = _blocked(out, axis, g, y) if out.size > _SM_SMALL else None
    if v is not None:
        _run_rows(v[0], v[1:], _softmax_backward_step, 0)
        return
    s = _row_sums(np.multiply(g, y), axis)
    np.subtract(g, s, out=out)
    out *= y


def log_softmax_backward(out: np.ndarray, g: np.ndarray, y: np.ndarray, axis: int) -> None:
    v = _blocked(out, axis, g, y) if out.size > _SM_SMALL else None
    if v is not None:
        _run_rows(v[0], v[1:], _log_softmax_backward_step, 0)
        return
    s = _row_sums(g, axis)
    np.exp(y, out=out)
    out *= s
    np.subtract(g, out, out=out)
