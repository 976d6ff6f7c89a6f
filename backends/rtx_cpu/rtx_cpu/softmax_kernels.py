"""softmax and log_softmax with their backwards, in blocks of whole rows over threads:
C loops around NumPy's exp and log where a compiler is at hand, else NumPy steps.

rtx_cpu's kernels for the ``softmax``/``log_softmax`` primitives and the
``softmax_backward``/``log_softmax_backward`` composites (``kernels.KERNELS``
lists them). cross_entropy's forward is log_softmax's kernel.
"""

from __future__ import annotations

import ctypes
import warnings
from typing import Any

import numpy as np

from rtxcore.dispatch import xp

from . import cfused
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
_SM_FEW_ROWS = 64  # rows: so few (of a small input) take the whole-array steps too: the
# C steps' fixed ~13 us (three ctypes calls, the addresses) is more than NumPy's few
# per-row costs there ((64, 27) log_softmax: 16.7 us in C, 11.8 whole-array)
_SM_PARALLEL_MIN = 1 << 19  # elements: a smaller input runs on the calling thread alone.
# Handing half to ``fused``'s Python pool costs tens of us (a wake, the GIL) and sends
# the C pool's spinning workers to sleep (the next product wakes them): at 2 threads
# GPT's (16, 4, 64, 64) softmax took 269 us split, 233 on one thread (512K: 312 /
# 463), and the whole step went 0.97x as long with it unsplit.
_SM_BACKWARD_PARALLEL_MIN = 1 << 20  # the backwards' (one pass fewer): 512K elements
# 129 us split, 108 on one thread; 1M 207 / 264
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


def _run_rows(out: np.ndarray, ins: list[np.ndarray], step: Any, scratch: int,
              addresses: bool = False, parallel_min: int | None = None) -> None:
    """``step(o, ins_block, s, t, extra)`` over blocks of whole rows of the (M, N)
    arrays, the rows split over threads; s: (k,) scratch, t: ``scratch`` (k, N)
    scratch arrays, each thread its own. extra: the NumPy steps' ``_small_buffers``,
    or (``addresses``, the C steps) the block's addresses (o, *ins, s, *t), found
    once a call (an array's address costs ~0.3-1 us; a block's is its array's plus
    a row offset): on a small input the C steps' fixed cost is mostly such work."""
    m, n = out.shape
    rows = max(1, _SM_BLOCK // max(n, 1))
    if addresses:
        arrays = (out, *ins)
        base = [cfused._address(a) for a in arrays]
        steps = [a.strides[0] for a in arrays]

    def run(lo: int, hi: int) -> None:
        k = min(rows, hi - lo)
        s = np.empty(k, out.dtype)
        t = [np.empty((k, n), out.dtype) for _ in range(scratch)]
        if addresses:
            own = [cfused._address(s), *(cfused._address(u) for u in t)]
        else:
            bufs = _small_buffers(n)
        if lo == 0 and hi == m and k == m:  # one block: the whole arrays
            step(out, ins, s, t, base + own if addresses else bufs)
            return
        for i in range(lo, hi, rows):
            j = min(i + rows, hi)
            b = j - i
            extra = [a + i * st for a, st in zip(base, steps)] + own if addresses else bufs
            step(out[i:j], [a[i:j] for a in ins], s[:b], [u[:b] for u in t], extra)

    split(m, m * n, run, _SM_PARALLEL_MIN if parallel_min is None else parallel_min)


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


# -- the same steps with the per-row work in C: where a C compiler is at hand, a
# block's row maxima and x - max, its row sums and the last step are C loops, and
# exp (and log_softmax's log of the sums) stay NumPy's calls on the whole block.
# The sums are NumPy's own pairwise summation (``np.add.reduce`` along a
# contiguous row: 8 partial sums up to 128 elements, halves above, added to the
# reduction's identity 0) and every other step is one IEEE operation in the same
# order, so the bits are the NumPy steps'. What changes is the per-row cost: on
# attention's rows of 32-64 elements NumPy's reductions and (k, 1) broadcasts
# spend most of their time per row (GPT's (16, 4, 64, 64) softmax: 480 us).

_C_TEMPLATE = r"""
#define PAIRWISE(NAME, T, TERM)                                                    \
static T NAME(const T *a, const T *b, int64_t n) {                                 \
    (void)b;                                                                       \
    if (n < 8) {                                                                   \
        T res = 0;                                                                 \
        for (int64_t i = 0; i < n; i++) res += TERM(i);                            \
        return res;                                                                \
    }                                                                              \
    if (n <= 128) {                                                                \
        T r[8];                                                                    \
        int64_t i;                                                                 \
        for (int k = 0; k < 8; k++) r[k] = TERM(k);                                \
        for (i = 8; i < n - (n % 8); i += 8)                                       \
            for (int k = 0; k < 8; k++) r[k] += TERM(i + k);                       \
        T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])); \
        for (; i < n; i++) res += TERM(i);                                         \
        return res;                                                                \
    }                                                                              \
    int64_t n2 = n / 2;                                                            \
    n2 -= n2 % 8;                                                                  \
    return NAME(a, b, n2) + NAME(a + n2, b + n2, n - n2);                          \
}
#define A_TERM(i) a[i]
#define AB_TERM(i) (a[i] * b[i])
PAIRWISE(pw_{S}, {T}, A_TERM)
PAIRWISE(pwp_{S}, {T}, AB_TERM)

typedef {T} vf_{S} __attribute__((vector_size(64)));
typedef {I} vi_{S} __attribute__((vector_size(64)));
#define VL_{S} ((int64_t)(64 / sizeof({T})))

/* rows lo..hi: s[i] = the row's maximum (nan where it has one), o = x - s[i] */
void sm_shift_{S}({T} *o, {T} *s, const {T} *x, int64_t n, int64_t ldo, int64_t ldx,
                  int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        const {T} *xr = x + i * ldx;
        {T} *orow = o + i * ldo;
        {T} m = xr[0];
        int nan = m != m;
        int64_t j = 1;
        if (n >= 2 * VL_{S}) {  /* a vector of running maxima, one of nan flags */
            vf_{S} acc, v;
            memcpy(&acc, xr, sizeof acc);
            vi_{S} bad = acc != acc;
            for (j = VL_{S}; j + VL_{S} <= n; j += VL_{S}) {
                memcpy(&v, xr + j, sizeof v);
                vi_{S} up = v > acc;
                acc = (vf_{S})(((vi_{S})v & up) | ((vi_{S})acc & ~up));
                bad |= v != v;
            }
            for (int l = 0; l < VL_{S}; l++) {
                m = acc[l] > m ? acc[l] : m;
                nan |= bad[l] != 0;
            }
        }
        for (; j < n; j++) {
            {T} v = xr[j];
            m = v > m ? v : m;
            nan |= v != v;
        }
        if (nan)  /* the maximum is nan: the row's first */
            for (j = 0; j < n; j++)
                if (xr[j] != xr[j]) { m = xr[j]; break; }
        s[i] = m;
        for (int64_t j = 0; j < n; j++) orow[j] = xr[j] - m;
    }
}

/* rows lo..hi: s[i] = 0 + the pairwise sum of a's row */
void sm_sums_{S}({T} *s, const {T} *a, int64_t n, int64_t lda, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) s[i] = ({T})0 + pw_{S}(a + i * lda, 0, n);
}

/* rows lo..hi: o = o / s[i] (div) or o - s[i] */
void sm_finish_{S}({T} *o, const {T} *s, int64_t n, int64_t ldo, int64_t lo, int64_t hi,
                   int64_t div) {
    for (int64_t i = lo; i < hi; i++) {
        {T} *orow = o + i * ldo;
        {T} v = s[i];
        if (div)
            for (int64_t j = 0; j < n; j++) orow[j] = orow[j] / v;
        else
            for (int64_t j = 0; j < n; j++) orow[j] = orow[j] - v;
    }
}

/* softmax's backward, rows lo..hi: o = (g - sum(g * y)) * y */
void smb_{S}({T} *o, const {T} *g, const {T} *y, int64_t n, int64_t ldo, int64_t ldg,
             int64_t ldy, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        const {T} *gr = g + i * ldg, *yr = y + i * ldy;
        {T} *orow = o + i * ldo;
        {T} s = ({T})0 + pwp_{S}(gr, yr, n);
        for (int64_t j = 0; j < n; j++) orow[j] = (gr[j] - s) * yr[j];
    }
}

/* log_softmax's backward, rows lo..hi, o holding exp(y): o = g - o * s[i] */
void lsmb_{S}({T} *o, const {T} *g, const {T} *s, int64_t n, int64_t ldo, int64_t ldg,
              int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        const {T} *gr = g + i * ldg;
        {T} *orow = o + i * ldo;
        {T} v = s[i];
        for (int64_t j = 0; j < n; j++) orow[j] = gr[j] - orow[j] * v;
    }
}
"""

_C_SOURCE = "#include <stdint.h>\n#include <string.h>\n" + "".join(
    _C_TEMPLATE.replace("{S}", sfx).replace("{T}", t).replace("{I}", f"int{t == 'double' and 64 or 32}_t")
    for sfx, t in cfused.FLOAT_TYPES.values())
_P, _I = ctypes.c_void_p, ctypes.c_int64
_C_SIGNATURES = {
    "sm_shift": ([_P] * 3 + [_I] * 5, None),
    "sm_sums": ([_P] * 2 + [_I] * 4, None),
    "sm_finish": ([_P] * 2 + [_I] * 5, None),
    "smb": ([_P] * 3 + [_I] * 6, None),
    "lsmb": ([_P] * 3 + [_I] * 5, None),
}
# (the C loop ``name`` for a dtype, float32 / float64, or None: no compiler)
_c = cfused.TypedLoops(_C_SOURCE, "softmax's row loops", _C_SIGNATURES)
reset = _c.reset  # (forget the loops: the next call looks for a compiler again)


def _ld(a: np.ndarray) -> int:
    """A (k, N) row view's row stride in elements."""
    return a.strides[0] // a.itemsize


def _forward_c(o: np.ndarray, x: np.ndarray, e: np.ndarray, s: np.ndarray, log: bool,
               po: int, px: int, pe: int, ps: int) -> None:
    """One block of softmax (e is o) or log_softmax (e scratch): o = x - max, e =
    exp(o), s = the rows' sums of e, then o / s, or o - log(s) (p*: addresses)."""
    k, n = o.shape
    dt = o.dtype
    _c("sm_shift", dt)(po, ps, px, n, _ld(o), _ld(x), 0, k)
    np.exp(o, out=e)
    _c("sm_sums", dt)(ps, pe, n, _ld(e), 0, k)
    if log:
        np.log(s, out=s)
    _c("sm_finish", dt)(po, ps, n, _ld(o), 0, k, 0 if log else 1)


def _softmax_step_c(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray, t: list[np.ndarray],
                    p: list[int]) -> None:
    po, px, ps = p
    _forward_c(o, ins[0], o, s, False, po, px, po, ps)


def _log_softmax_step_c(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray,
                        t: list[np.ndarray], p: list[int]) -> None:
    po, px, ps, pe = p
    _forward_c(o, ins[0], t[0], s, True, po, px, pe, ps)


def _softmax_backward_step_c(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray,
                             t: list[np.ndarray], p: list[int]) -> None:
    g, y = ins
    k, n = o.shape
    po, pg, py, _ = p
    _c("smb", o.dtype)(po, pg, py, n, _ld(o), _ld(g), _ld(y), 0, k)


def _log_softmax_backward_step_c(o: np.ndarray, ins: list[np.ndarray], s: np.ndarray,
                                 t: list[np.ndarray], p: list[int]) -> None:
    g, y = ins
    k, n = o.shape
    dt = o.dtype
    po, pg, _, ps = p
    _c("sm_sums", dt)(ps, pg, n, _ld(g), 0, k)
    np.exp(y, out=o)
    _c("lsmb", dt)(po, pg, ps, n, _ld(o), _ld(g), 0, k)


def _rows_c(out: np.ndarray, axis: int, *xs: np.ndarray) -> list[np.ndarray] | None:
    """The (M, N) row views for the C steps (any size: one block where small), or
    None: no compiler, or not rows of float32/float64 along the last axis."""
    size = out.size
    if size == 0 or (size <= _SM_SMALL and out.ndim and size <= _SM_FEW_ROWS * out.shape[-1]):
        return None  # (few rows)
    v = _blocked(out, axis, *xs)
    if v is None or not all(a.flags.aligned for a in v) or \
            _c("sm_shift", out.dtype) is None:  # (aligned elements, a compiler)
        return None
    return v


def softmax(out: np.ndarray, x: np.ndarray, axis: int) -> None:
    v = _rows_c(out, axis, x)
    if v is not None:
        _run_rows(v[0], v[1:], _softmax_step_c, 0, addresses=True)
        return
    v = _blocked(out, axis, x) if out.size > _SM_SMALL else None
    if v is None:
        _XP["softmax"](out, x, axis)
        return
    _run_rows(v[0], v[1:], _softmax_step, 0)


def log_softmax(out: np.ndarray, x: np.ndarray, axis: int) -> None:
    v = _rows_c(out, axis, x)
    if v is not None:
        _run_rows(v[0], v[1:], _log_softmax_step_c, 1, addresses=True)
        return
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
    v = _rows_c(out, axis, g, y)
    if v is not None:
        _run_rows(v[0], v[1:], _softmax_backward_step_c, 0, addresses=True,
                  parallel_min=_SM_BACKWARD_PARALLEL_MIN)
        return
    v = _blocked(out, axis, g, y) if out.size > _SM_SMALL else None
    if v is not None:
        _run_rows(v[0], v[1:], _softmax_backward_step, 0,
                  parallel_min=_SM_BACKWARD_PARALLEL_MIN)
        return
    s = _row_sums(np.multiply(g, y), axis)
    np.subtract(g, s, out=out)
    out *= y


def log_softmax_backward(out: np.ndarray, g: np.ndarray, y: np.ndarray, axis: int) -> None:
    v = _rows_c(out, axis, g, y)
    if v is not None:
        _run_rows(v[0], v[1:], _log_softmax_backward_step_c, 0, addresses=True,
                  parallel_min=_SM_BACKWARD_PARALLEL_MIN)
        return
    v = _blocked(out, axis, g, y) if out.size > _SM_SMALL else None
    if v is not None:
        _run_rows(v[0], v[1:], _log_softmax_backward_step, 0,
                  parallel_min=_SM_BACKWARD_PARALLEL_MIN)
        return
    s = _row_sums(g, axis)
    np.exp(y, out=out)
    out *= s
    np.subtract(g, out, out=out)
