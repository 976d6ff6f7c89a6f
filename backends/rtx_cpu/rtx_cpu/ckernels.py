"""Fixed C loops for kernels that NumPy can only run as many passes over memory.

``layer_norm`` and ``batch_norm`` (and their backwards) and the tiled
``max_pool2d`` (and its backward) are a few lines each as a loop over rows,
channels or tiles, and many NumPy calls each: the pooling's NumPy form gathers the tiles into rows, scans them
``kh * kw`` times and scatters back; layer_norm's makes six passes over a block
of rows. Here each is one C function, compiled once per process by ``cfused``'s
compiler with its flags (no fast-math, no contraction: every float operation as
written, in the given order), called through ctypes, which lets go of the GIL,
so that a large input's rows or planes run on the backend's threads in
parallel. Where there is no compiler, the compile failed, ``RTX_CPU_CC=0`` or
an operand is of another dtype or layout, the NumPy forms run instead.

What the loops compute, and why it is the same on any number of threads:

- ``layer_norm``: a row's mean and variance are sums in double (eight
  interleaved partial sums in a fixed order, then added in order): a row's
  statistics depend on that row alone. The output is then
  ``((x - mean) * rstd) * weight + bias`` in x's float type, the NumPy form's
  steps in its order (the statistics differ from NumPy's float sums in the
  last bits: they are more accurate).
- ``layer_norm_backward``: per row, the sums of ``g * weight`` and of
  ``g * weight * (x - mean)`` in double, then ``dx = ((q - xc * c) - a) * rstd``
  as the NumPy form. The parameters' column sums are kept per block of rows
  (blocks fixed by the shape, in double) and added in block order at the end.
- ``batch_norm``: a channel's mean and variance are sums over its N runs of S
  elements in float lanes, added into a double about every 256 elements in an
  order fixed by the shape; the output ``(x - mean) * (rstd * weight) + bias``
  as the core's composite writes it. Channels are independent, so a thread
  takes whole channels: the same bits on any number of threads.
- ``batch_norm_backward``: per channel the sums of ``g`` and of ``g * (x -
  mean)`` as above, then ``dx = ((g - mean(g)) - xhat * mean(g * xhat)) *
  (rstd * weight)``.
- ``max_pool2d_tiled``: per tile, the first maximum in row-major order (the
  first NaN where there is one), PyTorch's choice; the backward writes zeros
  and each gradient at its index, checking every index against its plane.

Only ints, pointers and a double (eps) cross into C; the source is fixed text.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from . import cfused, fused

_TYPES = cfused.FLOAT_TYPES

_TEMPLATE = r"""
/* 8 lanes of {T} and of double as GCC vectors (layer_norm's backward): each
   lane's operations as a scalar loop over the lanes writes them, in a register;
   GCC leaves that loop scalar where its lanes are converted to double */
typedef {T} v8_{S} __attribute__((vector_size(8 * sizeof({T}))));
typedef double v8d_{S} __attribute__((vector_size(64)));

void ln_fwd_{S}({T} *out, {T} *mean, {T} *rstd, const {T} *x, const {T} *w, const {T} *b,
                int64_t n, double eps, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; i++) {
        const {T} *xr = x + i * n;
        {T} *o = out + i * n;
        int64_t j;
        double s = 0, q = 0;
        /* chunks of CHUNK elements summed in LANES {T} lanes, each chunk's total
           added into a double: one order, fixed by n */
        for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
            int64_t c1 = c0 + CHUNK < n ? c0 + CHUNK : n, cl = c1 - (c1 - c0) % LANES;
            {T} acc[LANES] = {0};
            for (j = c0; j < cl; j += LANES)
                for (int l = 0; l < LANES; l++) acc[l] += xr[j + l];
            double part = 0;
            for (int l = 0; l < LANES; l++) part += (double)acc[l];
            for (; j < c1; j++) part += (double)xr[j];
            s += part;
        }
        {T} mu = ({T})(s / (double)n);
        for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
            int64_t c1 = c0 + CHUNK < n ? c0 + CHUNK : n, cl = c1 - (c1 - c0) % LANES;
            {T} acc[LANES] = {0};
            for (j = c0; j < cl; j += LANES)
                for (int l = 0; l < LANES; l++) {
                    {T} d = xr[j + l] - mu;
                    acc[l] += d * d;
                }
            double part = 0;
            for (int l = 0; l < LANES; l++) part += (double)acc[l];
            for (; j < c1; j++) {
                {T} d = xr[j] - mu;
                part += (double)(d * d);
            }
            q += part;
        }
        {T} r = ({T})(1.0 / sqrt(q / (double)n + eps));
        mean[i] = mu;
        rstd[i] = r;
        if (w && b)
            for (j = 0; j < n; j++) o[j] = ((xr[j] - mu) * r) * w[j] + b[j];
        else if (w)
            for (j = 0; j < n; j++) o[j] = ((xr[j] - mu) * r) * w[j];
        else if (b)
            for (j = 0; j < n; j++) o[j] = ((xr[j] - mu) * r) + b[j];
        else
            for (j = 0; j < n; j++) o[j] = (xr[j] - mu) * r;
    }
}

/* blocks k0..k1 of `rows` rows; pw, pb: (blocks, n) doubles, or NULL */
void ln_bwd_{S}({T} *dx, double *pw, double *pb, const {T} *g, const {T} *x,
                const {T} *mean, const {T} *rstd, const {T} *w, int64_t m, int64_t n,
                int64_t rows, int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) {
        int64_t i1 = (k + 1) * rows < m ? (k + 1) * rows : m;
        double *pwk = pw ? pw + k * n : 0, *pbk = pb ? pb + k * n : 0;
        if (pw) for (int64_t j = 0; j < n; j++) { pwk[j] = 0; pbk[j] = 0; }
        for (int64_t i = k * rows; i < i1; i++) {
            const {T} *gr = g + i * n, *xr = x + i * n;
            {T} *o = dx + i * n;
            {T} mu = mean[i], r = rstd[i];
            /* eight lanes of double sums (lane l: the elements j = l mod 8), written
               as GCC vectors: the same operations as the scalar lanes, in one
               register each */
            v8d_{S} sa = {0}, sc = {0};
            int64_t n8 = n - n % 8, j;
            for (j = 0; j < n8; j += 8) {
                v8_{S} gv, xv;
                memcpy(&gv, gr + j, sizeof gv);
                memcpy(&xv, xr + j, sizeof xv);
                if (w) {
                    v8_{S} wv;
                    memcpy(&wv, w + j, sizeof wv);
                    gv = gv * wv;
                }
                v8d_{S} q = __builtin_convertvector(gv, v8d_{S});
                sa += q;
                sc += q * __builtin_convertvector(xv - mu, v8d_{S});
            }
            double a = 0, c = 0;
            for (int l = 0; l < 8; l++) { a += sa[l]; c += sc[l]; }
            for (; j < n; j++) {
                {T} q = w ? gr[j] * w[j] : gr[j];
                a += (double)q;
                c += (double)q * (double)(xr[j] - mu);
            }
            {T} af = ({T})(a / (double)n);
            {T} cf = ({T})(c / (double)n * (double)r * (double)r);
            /* dx, and the parameters' column sums in the same pass over the row */
            if (pw && w)
                for (j = 0; j < n; j++) {
                    {T} gj = gr[j], xc = xr[j] - mu;
                    o[j] = ((gj * w[j] - xc * cf) - af) * r;
                    pwk[j] += (double)gj * (double)(xc * r);
                    pbk[j] += (double)gj;
                }
            else if (pw)
                for (j = 0; j < n; j++) {
                    {T} gj = gr[j], xc = xr[j] - mu;
                    o[j] = ((gj - xc * cf) - af) * r;
                    pwk[j] += (double)gj * (double)(xc * r);
                    pbk[j] += (double)gj;
                }
            else if (w)
                for (j = 0; j < n; j++)
                    o[j] = ((gr[j] * w[j] - (xr[j] - mu) * cf) - af) * r;
            else
                for (j = 0; j < n; j++)
                    o[j] = ((gr[j] - (xr[j] - mu) * cf) - af) * r;
        }
    }
}

/* A channel's sums over its `rows` runs of s elements, `stride` apart: of p, or
   of (p - mu)^2, or of p * (q - mu). Whole LANES-wide pieces of each run go into LANES {T} lanes,
   which are added into a double every CHUNK elements or so and at the end; a
   run's last s % LANES elements go straight into a double. One order, fixed by
   the shape. */
#define CHANNEL_SUM(NAME, T, TERM)                                                      \
static double NAME(const T *p, const T *q, T mu, int64_t rows, int64_t stride,          \
                   int64_t s) {                                                         \
    double total = 0, tail = 0;                                                         \
    T acc[LANES] = {0};                                                                 \
    int64_t k = 0, sv = s - s % LANES;                                                  \
    for (int64_t i = 0; i < rows; i++) {                                                \
        const T *pr = p + i * stride, *qr = q + i * stride;                             \
        (void)qr;                                                                       \
        for (int64_t c0 = 0; c0 < sv; c0 += CHUNK) {                                    \
            int64_t c1 = c0 + CHUNK < sv ? c0 + CHUNK : sv;                             \
            for (int64_t j = c0; j < c1; j += LANES)                                    \
                for (int l = 0; l < LANES; l++) acc[l] += TERM(j + l);                  \
            if ((k += c1 - c0) >= CHUNK) {                                              \
                double part = 0;                                                        \
                for (int l = 0; l < LANES; l++) { part += (double)acc[l]; acc[l] = 0; } \
                total += part;                                                          \
                k = 0;                                                                  \
            }                                                                           \
        }                                                                               \
        for (int64_t j = sv; j < s; j++) tail += (double)(TERM(j));                     \
    }                                                                                   \
    double part = 0;                                                                    \
    for (int l = 0; l < LANES; l++) part += (double)acc[l];                             \
    return total + part + tail;                                                         \
}

#define P_TERM(j) pr[j]
#define SQ_TERM(j) ((pr[j] - mu) * (pr[j] - mu))
#define PQ_TERM(j) (pr[j] * (qr[j] - mu))
CHANNEL_SUM(csum_{S}, {T}, P_TERM)
CHANNEL_SUM(csq_{S}, {T}, SQ_TERM)
CHANNEL_SUM(cdev_{S}, {T}, PQ_TERM)

/* channels lo..hi of x (n, c, s): each channel's mean and biased variance over
   its n * s elements (sums as above), rstd,
   and out = (x - mean) * (rstd * w) + b */
void bn_fwd_{S}({T} *out, {T} *mean, {T} *var, {T} *rstd, const {T} *x, const {T} *w,
                const {T} *b, int64_t n, int64_t c, int64_t s, double eps, int64_t lo,
                int64_t hi) {
    double count = (double)n * (double)s;
    for (int64_t ch = lo; ch < hi; ch++) {
        const {T} *xc = x + ch * s;
        {T} mu = ({T})(csum_{S}(xc, xc, 0, n, c * s, s) / count);
        double v = csq_{S}(xc, xc, mu, n, c * s, s) / count;
        {T} r = ({T})(1.0 / sqrt(v + eps));
        {T} sc = w ? r * w[ch] : r;
        mean[ch] = mu;
        var[ch] = ({T})v;
        rstd[ch] = r;
        for (int64_t i = 0; i < n; i++) {
            const {T} *xr = x + (i * c + ch) * s;
            {T} *o = out + (i * c + ch) * s;
            if (b) {
                {T} sh = b[ch];
                for (int64_t j = 0; j < s; j++) o[j] = (xr[j] - mu) * sc + sh;
            } else {
                for (int64_t j = 0; j < s; j++) o[j] = (xr[j] - mu) * sc;
            }
        }
    }
}

/* channels lo..hi: sums[ch] = sum(g * xhat), sums[c + ch] = sum(g) over the
   channel, and dx = ((g - sum(g) / count) - xhat * (sum(g * xhat) / count)) *
   (rstd * w), xhat = (x - mean) * rstd */
void bn_bwd_{S}({T} *dx, {T} *sums, const {T} *g, const {T} *x, const {T} *mean,
                const {T} *rstd, const {T} *w, int64_t n, int64_t c, int64_t s, int64_t lo,
                int64_t hi) {
    double count = (double)n * (double)s;
    for (int64_t ch = lo; ch < hi; ch++) {
        {T} mu = mean[ch], r = rstd[ch];
        double a = csum_{S}(g + ch * s, g + ch * s, 0, n, c * s, s);
        double gc = cdev_{S}(g + ch * s, x + ch * s, mu, n, c * s, s);
        {T} gx = ({T})(gc * (double)r);
        sums[ch] = gx;
        sums[c + ch] = ({T})a;
        {T} af = ({T})(a / count), cf = ({T})((double)gx / count);
        {T} sc = w ? r * w[ch] : r;
        for (int64_t i = 0; i < n; i++) {
            int64_t at = (i * c + ch) * s;
            const {T} *gr = g + at, *xr = x + at;
            {T} *o = dx + at;
            for (int64_t j = 0; j < s; j++) o[j] = ((gr[j] - af) - ((xr[j] - mu) * r) * cf) * sc;
        }
    }
}

/* planes lo..hi of x (planes, h, w); values/indices (planes, h / kh, w / kw) */
void pool_fwd_{S}({T} *val, int64_t *idx, const {T} *x, int64_t h, int64_t w, int64_t kh,
                  int64_t kw, int64_t lo, int64_t hi) {
    int64_t oh = h / kh, ow = w / kw;
    for (int64_t p = lo; p < hi; p++) {
        const {T} *xp = x + p * h * w;
        {T} *vp = val + p * oh * ow;
        int64_t *ip = idx + p * oh * ow;
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                int64_t at = i * kh * w + j * kw;
                {T} best = xp[at];
                for (int64_t a = 0; a < kh && best == best; a++)
                    for (int64_t c = 0; c < kw; c++) {
                        int64_t here = (i * kh + a) * w + j * kw + c;
                        {T} v = xp[here];
                        if (v != v) { best = v; at = here; break; }
                        if (v > best) { best = v; at = here; }
                    }
                vp[i * ow + j] = best;
                ip[i * ow + j] = at;
            }
    }
}

/* planes lo..hi: out (planes, hw) zeros, each g (planes, ohw) at its index;
   returns how many indices lay outside their plane (those are not written) */
int64_t pool_bwd_{S}({T} *out, const {T} *g, const int64_t *idx, int64_t hw, int64_t ohw,
                     int64_t lo, int64_t hi) {
    int64_t bad = 0;
    for (int64_t p = lo; p < hi; p++) {
        {T} *op = out + p * hw;
        memset(op, 0, (size_t)hw * sizeof({T}));
        for (int64_t t = 0; t < ohw; t++) {
            int64_t at = idx[p * ohw + t];
            if (at < 0 || at >= hw) { bad++; continue; }
            op[at] = g[p * ohw + t];
        }
    }
    return bad;
}
"""

SOURCE = "#include <stdint.h>\n#include <string.h>\n#include <math.h>\n" \
    "#define LANES 16\n#define CHUNK 256\n" + "".join(
    _TEMPLATE.replace("{S}", s).replace("{T}", t) for s, t in _TYPES.values())

_P, _I, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
_SIGNATURES = {
    "ln_fwd": ([_P] * 6 + [_I, _D, _I, _I], None),
    "ln_bwd": ([_P] * 8 + [_I] * 5, None),
    "bn_fwd": ([_P] * 7 + [_I] * 3 + [_D, _I, _I], None),
    "bn_bwd": ([_P] * 7 + [_I] * 5, None),
    "pool_fwd": ([_P] * 3 + [_I] * 6, None),
    "pool_bwd": ([_P] * 3 + [_I] * 4, _I),
}
_LOOPS = cfused.TypedLoops(SOURCE, "layer_norm, batch_norm and max_pool2d", _SIGNATURES)


def function(name: str, dtype: np.dtype) -> Any:
    """The C function ``name`` for ``dtype`` (float32 / float64), or None."""
    return _LOOPS(name, dtype)


def reset() -> None:
    """Forget the loaded functions (the next call looks for a compiler again)."""
    _LOOPS.reset()


PARALLEL_MIN = 1 << 18  # elements: a smaller input runs on the calling thread alone
LN_BLOCK = 1 << 19  # elements of a backward block (its rows: the parameters' partial sums)


def _fits(dt: np.dtype, *arrays: np.ndarray | None) -> bool:
    return all(a is None or (a.dtype == dt and a.flags.c_contiguous) for a in arrays)


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else cfused._address(a)


def _split(units: int, size: int, run: Callable[[int, int], Any]) -> list[Any]:
    """``run(lo, hi)`` over ``range(units)``, a contiguous run a thread for inputs
    of ``PARALLEL_MIN`` elements or more; the results in order."""
    return fused.split(units, run, size >= PARALLEL_MIN)


def layer_norm(out: np.ndarray, mean: np.ndarray, rstd: np.ndarray, x: np.ndarray,
               weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> bool:
    """layer_norm as ``norm_kernels.layer_norm`` takes it, in C; False (nothing
    written) where the operands do not fit the loop."""
    dt = x.dtype
    fn = function("ln_fwd", dt) if dt in _TYPES else None
    if fn is None or not out.flags.writeable or \
            not _fits(dt, out, mean, rstd, x, weight, bias):
        return False
    m, n = x.shape
    if n == 0:
        return False
    args = (_ptr(out), _ptr(mean), _ptr(rstd), _ptr(x), _ptr(weight), _ptr(bias), n,
            float(eps))
    if m * n < PARALLEL_MIN:
        fn(*args, 0, m)
    else:
        _split(m, m * n, lambda lo, hi: fn(*args, lo, hi))
    return True


def layer_norm_backward(out: np.ndarray, g: np.ndarray, x: np.ndarray, mean: np.ndarray,
                        rstd: np.ndarray, weight: np.ndarray | None) -> bool:
    """layer_norm_backward as ``norm_kernels.layer_norm_backward`` takes it, in C;
    False (nothing written) where the operands do not fit the loop."""
    dt = x.dtype
    fn = function("ln_bwd", dt) if dt in _TYPES else None
    if fn is None or not out.flags.writeable or \
            not _fits(dt, out, g, x, mean, rstd, weight):
        return False
    m, n = x.shape
    if n == 0 or m == 0:
        return False
    params = out.shape[0] > m
    rows = max(1, LN_BLOCK // n)  # blocks fixed by the shape, never by the threads
    nb = -(-m // rows)
    pw = np.empty((nb, n)) if params else None
    pb = np.empty((nb, n)) if params else None
    args = (_ptr(out), _ptr(pw), _ptr(pb), _ptr(g), _ptr(x), _ptr(mean), _ptr(rstd),
            _ptr(weight), m, n, rows)
    _split(nb, m * n, lambda lo, hi: fn(*args, lo, hi))
    if params:  # the blocks' sums, in block order
        np.copyto(out[m], np.add.reduce(pw, axis=0), casting="unsafe")
        np.copyto(out[m + 1], np.add.reduce(pb, axis=0), casting="unsafe")
    return True


def batch_norm(out: np.ndarray, mean: np.ndarray, var: np.ndarray, rstd: np.ndarray,
               x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None,
               eps: float) -> bool:
    """batch_norm as ``norm_kernels.batch_norm`` takes it, in C, the channels
    spread over the threads (each channel's sums its own: the same bits on any
    number); False (nothing written) where the operands do not fit the loop."""
    dt = x.dtype
    fn = function("bn_fwd", dt) if dt in _TYPES else None
    if fn is None or not out.flags.writeable or \
            not _fits(dt, out, mean, var, rstd, x, weight, bias) or x.ndim != 3 or x.size == 0 or \
            out.shape != x.shape or any(a is not None and a.shape != (x.shape[1],)
                                        for a in (mean, var, rstd, weight, bias)):
        return False
    n, c, s = x.shape
    args = (_ptr(out), _ptr(mean), _ptr(var), _ptr(rstd), _ptr(x), _ptr(weight), _ptr(bias),
            n, c, s, float(eps))
    _split(c, x.size, lambda lo, hi: fn(*args, lo, hi))
    return True


def batch_norm_backward(dx: np.ndarray, sums: np.ndarray, g: np.ndarray, x: np.ndarray,
                        mean: np.ndarray, rstd: np.ndarray, weight: np.ndarray | None) -> bool:
    """batch_norm_backward as ``norm_kernels.batch_norm_backward`` takes it, in C,
    the channels spread over the threads; False (nothing written) where the
    operands do not fit the loop."""
    dt = x.dtype
    fn = function("bn_bwd", dt) if dt in _TYPES else None
    if fn is None or not (sums.flags.writeable and dx.flags.writeable) or \
            not _fits(dt, dx, sums, g, x, mean, rstd, weight) or x.ndim != 3 or x.size == 0 or \
            not dx.shape == g.shape == x.shape or sums.shape != (2, x.shape[1]) or \
            any(a is not None and a.shape != (x.shape[1],) for a in (mean, rstd, weight)):
        return False
    n, c, s = x.shape
    args = (_ptr(dx), _ptr(sums), _ptr(g), _ptr(x), _ptr(mean), _ptr(rstd), _ptr(weight),
            n, c, s)
    _split(c, x.size, lambda lo, hi: fn(*args, lo, hi))
    return True


def max_pool2d_tiled(values: np.ndarray, indices: np.ndarray, x: np.ndarray, kh: int,
                     kw: int) -> bool:
    """max_pool2d_tiled as ``window_kernels`` takes it, in C; False (nothing
    written) where the operands do not fit the loop."""
    dt = x.dtype
    fn = function("pool_fwd", dt) if dt in _TYPES else None
    if fn is None or not (values.flags.writeable and indices.flags.writeable) or \
            not _fits(dt, values, x) or not _fits(np.dtype(np.int64), indices):
        return False
    n, c, h, w = x.shape
    if kh < 1 or kw < 1 or values.shape != (n, c, h // kh, w // kw) or \
            indices.shape != values.shape:
        return False
    planes = n * c
    args = (_ptr(values), _ptr(indices), _ptr(x), h, w, kh, kw)
    _split(planes, x.size, lambda lo, hi: fn(*args, lo, hi))
    return True


def max_pool2d_tiled_backward(out: np.ndarray, g: np.ndarray, indices: np.ndarray) -> bool:
    """max_pool2d_tiled_backward as ``window_kernels`` takes it, in C; False
    (nothing written) where the operands do not fit the loop. An index outside
    its plane raises IndexError."""
    dt = out.dtype
    fn = function("pool_bwd", dt) if dt in _TYPES else None
    if fn is None or not out.flags.writeable or not _fits(dt, out, g) or \
            not _fits(np.dtype(np.int64), indices) or g.shape != indices.shape or \
            g.shape[:2] != out.shape[:2]:
        return False
    n, c, h, w = out.shape
    ohw = g.shape[2] * g.shape[3]
    args = (_ptr(out), _ptr(g), _ptr(indices), h * w, ohw)
    bad = sum(_split(n * c, out.size, lambda lo, hi: fn(*args, lo, hi)))
    if bad:
        raise IndexError(f"max_pool2d backward: {bad} indices lie outside their "
                         f"{h}x{w} plane")
    return True
