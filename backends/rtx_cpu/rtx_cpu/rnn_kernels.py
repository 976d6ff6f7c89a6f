"""The LSTM cell and its backward with their IEEE-exact steps as C loops.

The array-module kernels (``rtxcore.dispatch.xp``'s ``lstm_cell`` and
``lstm_cell_backward``) make 11 and 20 NumPy calls a time step on (B, H)
blocks -- an LSTM over 28 steps, two layers, makes ~1,100 such calls a training
step, each a few microseconds of call for a few of work. Their values are the
core's decomposition's bits, and every step of it but NumPy's ``exp`` and
``tanh`` is an IEEE operation (``+ - * /`` in the float type, with Python's
``1`` taken as that type's 1), which C computes the same in the same order
(``cfused.FLAGS``: no fused multiply-adds, no fast-math). So here:

- forward: one C pass writes the gates ``gi + gh`` gate-major, negated where a
  sigmoid follows (the decomposition's ``-x``); NumPy's ``exp`` on the three
  sigmoid gates and ``tanh`` on the fourth, as the decomposition calls them; one
  C pass finishes the sigmoids (``1 / (e + 1)``) and computes
  ``c = f * c_prev + i * g``; NumPy's ``tanh(c)`` then ``o * tanh(c)``;
- backward: NumPy's ``tanh(c)``, then one C pass for everything else.

The same bits as the array-module kernels (``tests/test_rnn_fused.py`` checks
the cpu kernels against the decomposition bit for bit; ``tests/test_cpu_rnn_c.py``
these against the array-module ones). float32 and float64 with each (B, H) row
contiguous; anything else, float16 or no compiler: the array-module kernels.
Only pointers and ints cross into C; the source is fixed text.
"""

from __future__ import annotations

import ctypes
import warnings
from typing import Callable

import numpy as np

from . import cfused

# (a saturated gate's exp overflows to inf and its sigmoid is 0, silently, as in
# PyTorch: see kernels.py)
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtx_cpu\.rnn_kernels")

# (no iteration reads what another writes: an output is at most its own
# element's input, tc and dcp in the backward; the loops vectorise without checks)
_HEADER = r"""#include <stdint.h>
#if defined(__clang__)
#define RTX_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define RTX_IVDEP _Pragma("GCC ivdep")
#else
#define RTX_IVDEP
#endif
"""

_TEMPLATE = r"""
/* act: (4, B, H) at element strides (sa0, sa1, 1); a (B, 4H) or (B, H) operand
   at its row stride in elements, each row contiguous */
void lstm_pre_{S}({T} *act, int64_t sa0, int64_t sa1, const {T} *gi, int64_t ldi,
                  const {T} *gh, int64_t ldh, int64_t B, int64_t H) {
    for (int64_t k = 0; k < 4; k++)
        for (int64_t b = 0; b < B; b++) {
            {T} *a = act + k * sa0 + b * sa1;
            const {T} *x = gi + b * ldi + k * H, *y = gh + b * ldh + k * H;
            if (k == 2) {
                RTX_IVDEP
                for (int64_t j = 0; j < H; j++) a[j] = x[j] + y[j];
            } else {
                RTX_IVDEP
                for (int64_t j = 0; j < H; j++) a[j] = -(x[j] + y[j]);
            }
        }
}

void lstm_mid_{S}({T} *act, int64_t sa0, int64_t sa1, {T} *c, int64_t ldc,
                  const {T} *cp, int64_t ldp, int64_t B, int64_t H) {
    for (int64_t b = 0; b < B; b++) {
        {T} *ai = act + b * sa1, *af = ai + sa0, *ag = af + sa0, *ao = ag + sa0;
        {T} *cr = c + b * ldc;
        const {T} *pr = cp + b * ldp;
        RTX_IVDEP
        for (int64_t j = 0; j < H; j++) {
            {T} si = ({T})1 / (ai[j] + ({T})1), sf = ({T})1 / (af[j] + ({T})1);
            ai[j] = si;
            af[j] = sf;
            ao[j] = ({T})1 / (ao[j] + ({T})1);
            cr[j] = sf * pr[j] + si * ag[j];
        }
    }
}

/* tc: tanh(c), read before dcp (the same memory may be both) is written */
void lstm_back_{S}({T} *dg, int64_t ldg, {T} *dcp, int64_t lddcp, const {T} *tc, int64_t ldt,
                   const {T} *dh, int64_t lddh, const {T} *dc, int64_t lddc,
                   const {T} *act, int64_t sa0, int64_t sa1, const {T} *cp, int64_t ldp,
                   int64_t B, int64_t H) {
    for (int64_t b = 0; b < B; b++) {
        const {T} *ai = act + b * sa1, *af = ai + sa0, *ag = af + sa0, *ao = ag + sa0;
        const {T} *t = tc + b * ldt, *h = dh + b * lddh, *p = cp + b * ldp;
        const {T} *d = dc ? dc + b * lddc : 0;
        {T} *g = dg + b * ldg, *q = dcp + b * lddcp;
        RTX_IVDEP
        for (int64_t j = 0; j < H; j++) {
            {T} tj = t[j], si = ai[j], sf = af[j], gg = ag[j], so = ao[j];
            {T} dct = ((({T})1 - tj * tj) * so) * h[j];
            if (d) dct = dct + d[j];
            g[j] = ((({T})1 - si) * si * gg) * dct;
            g[H + j] = ((({T})1 - sf) * sf * p[j]) * dct;
            g[2 * H + j] = ((({T})1 - gg * gg) * si) * dct;
            g[3 * H + j] = ((({T})1 - so) * so * tj) * h[j];
            q[j] = dct * sf;
        }
    }
}
"""

_P, _I = ctypes.c_void_p, ctypes.c_int64
_SIGNATURES = {
    "lstm_pre": ([_P, _I, _I, _P, _I, _P, _I, _I, _I], None),
    "lstm_mid": ([_P, _I, _I, _P, _I, _P, _I, _I, _I], None),
    "lstm_back": ([_P, _I, _P, _I, _P, _I, _P, _I, _P, _I, _P, _I, _I, _P, _I, _I, _I], None),
}

# (compiled once: cfused.library keeps the library)
_function = cfused.TypedLoops(
    lambda: _HEADER + "".join(_TEMPLATE.replace("{S}", s).replace("{T}", t)
                              for s, t in cfused.FLOAT_TYPES.values()),
    "the LSTM cell", _SIGNATURES)


def _rows(a: np.ndarray | None, dt: np.dtype) -> int | None:
    """The row stride (elements) of 2-D ``a`` with contiguous rows of ``dt``, else None."""
    if a is None or a.ndim != 2 or a.dtype != dt or a.strides[1] != dt.itemsize \
            or a.strides[0] % dt.itemsize or a.strides[0] < 0:
        return None
    return a.strides[0] // dt.itemsize


def _gates(act: np.ndarray, dt: np.dtype) -> tuple[int, int] | None:
    """act's (gate, row) strides in elements where its rows are contiguous."""
    s = act.strides
    if act.ndim != 3 or act.dtype != dt or s[2] != dt.itemsize or s[0] % dt.itemsize \
            or s[1] % dt.itemsize or s[0] < 0 or s[1] < 0:
        return None
    return s[0] // dt.itemsize, s[1] // dt.itemsize


def lstm_cell_kernel(base: Callable[..., None]) -> Callable[..., None]:
    """rtx_cpu's ``lstm_cell``: the C passes, or ``base`` (the array-module kernel)."""

    def lstm_cell(h: np.ndarray, c: np.ndarray, act: np.ndarray, gi: np.ndarray,
                  gh: np.ndarray, c_prev: np.ndarray) -> None:
        dt = h.dtype
        pre = _function("lstm_pre", dt) if dt in cfused.FLOAT_TYPES else None
        if pre is None:
            return base(h, c, act, gi, gh, c_prev)
        lds = [_rows(a, dt) for a in (h, c, gi, gh, c_prev)]
        st = _gates(act, dt)
        if None in lds or st is None:  # (outputs never alias inputs: the kernels' contract)
            return base(h, c, act, gi, gh, c_prev)
        b, n = c.shape
        lh, lc, li, lg, lp = lds
        pre(cfused._address(act), st[0], st[1], cfused._address(gi), li, cfused._address(gh), lg, b, n)
        np.exp(act[:2], out=act[:2])  # the decomposition's calls: sigmoid(i, f), tanh(g),
        np.tanh(act[2], out=act[2])   # sigmoid(o)
        np.exp(act[3], out=act[3])
        _function("lstm_mid", dt)(cfused._address(act), st[0], st[1], cfused._address(c), lc, cfused._address(c_prev), lp, b, n)
        np.tanh(c, out=h)
        np.multiply(act[3], h, out=h)

    return lstm_cell


def lstm_cell_backward_kernel(base: Callable[..., None]) -> Callable[..., None]:
    """rtx_cpu's ``lstm_cell_backward``: NumPy's tanh(c) and one C pass, or ``base``."""

    def lstm_cell_backward(dgates: np.ndarray, dc_prev: np.ndarray, dh: np.ndarray,
                           dc: np.ndarray | None, act: np.ndarray, c: np.ndarray,
                           c_prev: np.ndarray) -> None:
        dt = dgates.dtype
        back = _function("lstm_back", dt) if dt in cfused.FLOAT_TYPES else None
        if back is None:
            return base(dgates, dc_prev, dh, dc, act, c, c_prev)
        lds = [_rows(a, dt) for a in (dgates, dc_prev, dh, c, c_prev)]
        ldd = 0 if dc is None else _rows(dc, dt)
        st = _gates(act, dt)
        if None in lds or ldd is None or st is None:
            return base(dgates, dc_prev, dh, dc, act, c, c_prev)
        b, n = c.shape
        lg, lq, lh, _, lp = lds
        np.tanh(c, out=dc_prev)  # (scratch until the C pass writes it, as the array kernel)
        back(cfused._address(dgates), lg, cfused._address(dc_prev), lq, cfused._address(dc_prev), lq, cfused._address(dh), lh,
             None if dc is None else cfused._address(dc), ldd, cfused._address(act), st[0], st[1], cfused._address(c_prev), lp,
             b, n)

    return lstm_cell_backward
