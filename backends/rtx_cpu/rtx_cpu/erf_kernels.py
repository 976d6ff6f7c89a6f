"""erf on NumPy, vectorised, and the GELU (forward and gradient) built on it.

NumPy has no erf; these are rtx_cpu's kernels for the ``erf``, ``gelu`` and
``gelu_backward`` composites (``kernels.KERNELS`` lists them).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from . import cfused, cpool
from .norm_kernels import split

# -- erf, vectorised (NumPy has none; math.erf element by element costs ~0.1 s per
# million). float64: fdlibm's piecewise rational approximations (s_erf.c, < 1 ulp),
# each evaluated on its own elements only. float32 (and float16, through float32):
# one rational function of x**2 on x clipped to [-4, 4] (Eigen's and XLA's float
# erf; max error 4e-7, about 3 float32 ulps near 1), evaluated in place in blocks
# that stay in cache.

_ERX = 8.45062911510467529297e-01
# erf on |x| < 0.84375: x + x * P(x^2) / Q(x^2)
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
# erf on 0.84375 <= |x| < 1.25: erx + P(s) / Q(s), s = |x| - 1
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
# erfc on 1.25 <= |x| < 1/0.35 and on 1/0.35 <= |x| < 6:
# exp(-x^2 - 0.5625 + R(1/x^2) / S(1/x^2)) / |x|
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)
_HIGH_WORD = np.uint64(0xFFFFFFFF00000000)


def _horner(z: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    """sum(coeffs[i] * z**i), in place in one new array."""
    acc = z * coeffs[-1]
    acc += coeffs[-2]
    for c in coeffs[-3::-1]:
        acc *= z
        acc += c
    return acc


def _erf64(x: np.ndarray) -> np.ndarray:
    """fdlibm's erf on a float64 array (nan stays nan, +-inf gives +-1)."""
    ax = np.abs(x)
    out = np.array(np.sign(x))  # |x| >= 6 (and inf): +-1 in float64; nan: nan (an array, 0-d too)
    m = ax < 0.84375
    if m.any():
        v = x[m]
        z = v * v
        out[m] = v + v * (_horner(z, _PP) / _horner(z, _QQ))
    m = (ax >= 0.84375) & (ax < 1.25)
    if m.any():
        s = ax[m] - 1.0
        out[m] = np.copysign(_ERX + _horner(s, _PA) / _horner(s, _QA), x[m])
    for lo, hi, r, q in ((1.25, 1 / 0.35, _RA, _SA), (1 / 0.35, 6.0, _RB, _SB)):
        m = (ax >= lo) & (ax < hi)
        if m.any():
            a = ax[m]
            s = 1.0 / (a * a)
            # exp(-a^2) as exp(-z^2) * exp((z - a)(z + a)), z = a with its low word
            # cleared so that z^2 is exact (fdlibm's trick)
            z = (a.view(np.uint64) & _HIGH_WORD).view(np.float64)
            e = np.exp(-z * z - 0.5625) * np.exp((z - a) * (z + a) + _horner(s, r) / _horner(s, q))
            out[m] = np.copysign(1.0 - e / a, x[m])
    return out


_A32 = tuple(np.float32(c) for c in (
    -1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
    -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10))
_B32 = tuple(np.float32(c) for c in (
    -1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
    -1.45660718464996e-05))


def _erf32_block(x: np.ndarray, out: np.ndarray, z: np.ndarray, p: np.ndarray,
                 q: np.ndarray) -> None:
    """out = erf(x) for contiguous float32 1-D blocks; z, p, q: scratch of the same size."""
    np.clip(x, -4.0, 4.0, out=out)
    np.multiply(out, out, out=z)
    np.multiply(z, _A32[6], out=p)
    p += _A32[5]
    for c in _A32[4::-1]:
        p *= z
        p += c
    np.multiply(z, _B32[4], out=q)
    q += _B32[3]
    for c in _B32[2::-1]:
        q *= z
        q += c
    p /= q
    np.multiply(p, out, out=out)  # x last: tiny and subnormal x lose nothing


def erf(out: np.ndarray, x: np.ndarray) -> None:
    if x.dtype == np.float64:
        np.copyto(out, _erf64(x))
    else:  # in the GELU's blocks, over threads (below)
        _blockwise(_erf32_step, "fff", out, x)


def _erf32_step(o: np.ndarray, x: np.ndarray, t: list[np.ndarray]) -> None:
    _erf32_block(x, o, *t)


# -- gelu and its gradient, fused: erf (or tanh) and a few in-place passes, block by
# block (_EW_BLOCK elements, flat), every step of a block in scratch of the block's
# size, reused, before the next block starts, so that the block stays in cache and
# nothing the size of the tensor is allocated. The blocks are fixed by the size alone
# and a large input spreads contiguous runs of whole blocks over ``fused``'s threads
# (``norm_kernels.split``; NumPy lets go of the GIL inside each ufunc call): every
# element's steps are the same ufunc calls whichever thread runs its block, so the
# result is the same bit for bit on any number of threads.

_SQRT1_2 = float(np.sqrt(0.5))
_INV_SQRT_2PI = float(1.0 / np.sqrt(2.0 * np.pi))
_SQRT_2_PI = float(np.sqrt(2.0 / np.pi))
_EW_BLOCK = 1 << 16  # elements: 256 KB of float32 per block-sized array, 4 or 5 in L2 (one
# thread at 4096 x 1024, CPU time: blocks of 8K / 16K / 32K / 64K / 128K elements, erf
# GELU 4.5 / 3.6 / 3.0 / 2.7 / 2.9 ns an element, its backward 3.0 / 2.4 / 2.2 / 2.0 / 2.0)
_EW_PARALLEL_MIN = 1 << 17  # elements: a smaller input runs on the calling thread alone


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _blockwise(fn: Any, scratch: str, out: np.ndarray, *xs: np.ndarray) -> None:
    """``fn(o, *xs_block, t)`` on flat blocks of ``_EW_BLOCK`` elements (in the
    inputs' compute dtype: float16 works in float32); t: scratch of the block's
    size, one array per letter of ``scratch`` ("f": the compute dtype, "b": bool),
    each thread its own."""
    flat = [np.ascontiguousarray(_wide(x)).reshape(-1) for x in xs]
    cdt = flat[0].dtype
    direct = out.flags.c_contiguous and out.dtype == cdt
    dst = out.reshape(-1) if direct else np.empty(out.size, cdt)
    n, b = dst.size, _EW_BLOCK
    if n <= b:  # one block (the same steps), without the split's few us
        fn(dst, *flat, [np.empty(n, cdt if kind == "f" else np.bool_) for kind in scratch])
    else:
        _blocks(fn, scratch, dst, flat, cdt, n, b)
    if not direct:
        np.copyto(out, dst.reshape(out.shape), casting="unsafe")


def _blocks(fn: Any, scratch: str, dst: np.ndarray, flat: list[np.ndarray], cdt: np.dtype,
            n: int, b: int) -> None:
    """``_blockwise``'s blocks, contiguous runs of them over the threads."""

    def run(k0: int, k1: int) -> None:
        size = min(b, n - k0 * b)
        t = [np.empty(size, cdt if kind == "f" else np.bool_) for kind in scratch]
        for k in range(k0, k1):
            i = k * b
            j = min(i + b, n)
            fn(dst[i:j], *(f[i:j] for f in flat), [u[:j - i] for u in t])

    split(-(-n // b), n, run, _EW_PARALLEL_MIN)


def _gelu_erf(y: np.ndarray, x: np.ndarray, t: list[np.ndarray]) -> None:
    z, p, q = t
    np.multiply(x, _SQRT1_2, out=z)
    if x.dtype == np.float64:
        np.copyto(y, _erf64(z))
    else:
        _erf32_block(z, y, z, p, q)  # (z is read only by the first step)
    y += 1.0
    y *= x
    y *= 0.5


def _gelu_tanh(y: np.ndarray, x: np.ndarray, t: list[np.ndarray]) -> None:
    np.multiply(x, x, out=y)
    y *= 0.044715
    y += 1.0
    y *= x
    y *= _SQRT_2_PI
    np.tanh(y, out=y)
    y += 1.0
    y *= x
    y *= 0.5


# The gradients read Phi(x) (or tanh's term) off y = gelu(x) instead of computing
# erf again: Phi(x) = y / x, where x is not tiny (there Phi(x) = 0.5 to float
# precision).
_TINY_X = 1e-30


def _cdf_from_y(cdf: np.ndarray, y: np.ndarray, x: np.ndarray, a: np.ndarray,
                small: np.ndarray) -> None:
    """cdf = y / x, 0.5 where |x| is tiny; a, small: scratch."""
    np.divide(y, x, out=cdf)  # (0 / 0 warnings are silenced for this module)
    np.abs(x, out=a)
    np.less(a, _TINY_X, out=small)
    if small.any():
        cdf[small] = 0.5


def _gelu_erf_grad(d: np.ndarray, g: np.ndarray, x: np.ndarray, y: np.ndarray,
                   t: list[np.ndarray]) -> None:
    cdf, a, small = t
    np.multiply(x, x, out=d)  # Phi(x) + x * pdf(x)
    d *= -0.5
    np.exp(d, out=d)
    d *= x
    d *= _INV_SQRT_2PI
    _cdf_from_y(cdf, y, x, a, small)
    d += cdf
    d *= g


def _gelu_tanh_grad(d: np.ndarray, g: np.ndarray, x: np.ndarray, y: np.ndarray,
                    t: list[np.ndarray]) -> None:
    half, a, small = t
    _cdf_from_y(half, y, x, a, small)  # 0.5 (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3))
    np.multiply(x, x, out=d)  # 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
    d *= 3 * 0.044715
    d += 1.0
    d *= _SQRT_2_PI
    d *= x
    d *= 2.0
    d *= half
    np.subtract(1.0, half, out=a)
    d *= a  # 0.5 (1 - t^2) = 2 * half * (1 - half)
    d += half
    d *= g


# -- the float32 blocks' IEEE-exact steps as C loops ----------------------------------
# Every step above but NumPy's exp and tanh is an IEEE operation on float32 (the
# Python float constants are rounded to float32 first, as NumPy 2 does with a
# Python scalar and a float32 array), so one C loop doing the same operations per
# element in the same order (no contraction into fused multiply-adds, no
# fast-math: ``cfused.FLAGS``) gives the same bits, in one pass where NumPy makes
# eight to twenty. The erf GELU is all such steps; its gradient and the tanh
# GELU keep NumPy's exp and tanh between two C passes; the tanh gradient is all
# C. ``tests/test_cpu_gelu_c.py`` checks the bits against the NumPy forms.


def _f32(v: float) -> str:
    """A C float literal of ``v`` rounded to float32, exactly."""
    return f"((float){float(np.float32(v)).hex()})"


def _c_source() -> str:
    a = [_f32(c) for c in _A32]
    b = [_f32(c) for c in _B32]
    p = f"{a[6]}"
    for c in a[5::-1]:
        p = f"({p} * z + {c})" if p != a[6] else f"(z * {a[6]} + {c})"
    q = f"(z * {b[4]} + {b[3]})"
    for c in b[2::-1]:
        q = f"({q} * z + {c})"
    tiny = _f32(_TINY_X)
    cdf = f"(fabsf(x[i]) < {tiny} ? 0.5f : y[i] / x[i])"
    return f"""#include <math.h>
#include <stdint.h>
void gelu_erf(float *out, const float *x, int64_t n) {{
    for (int64_t i = 0; i < n; i++) {{
        float v = x[i] * {_f32(_SQRT1_2)};
        float c = v < -4.0f ? -4.0f : (v > 4.0f ? 4.0f : v);  /* (NaN stays) */
        float z = c * c;
        float e = ({p} / {q}) * c;
        out[i] = ((e + 1.0f) * x[i]) * 0.5f;
    }}
}}
void gelu_erf_grad_pre(float *d, const float *x, int64_t n) {{
    for (int64_t i = 0; i < n; i++) d[i] = (x[i] * x[i]) * -0.5f;
}}
void gelu_erf_grad_post(float *d, const float *g, const float *x, const float *y, int64_t n) {{
    for (int64_t i = 0; i < n; i++)
        d[i] = (((d[i] * x[i]) * {_f32(_INV_SQRT_2PI)}) + {cdf}) * g[i];
}}
void gelu_tanh_pre(float *y, const float *x, int64_t n) {{
    for (int64_t i = 0; i < n; i++)
        y[i] = ((((x[i] * x[i]) * {_f32(0.044715)}) + 1.0f) * x[i]) * {_f32(_SQRT_2_PI)};
}}
void gelu_tanh_post(float *y, const float *x, int64_t n) {{
    for (int64_t i = 0; i < n; i++) y[i] = ((y[i] + 1.0f) * x[i]) * 0.5f;
}}
void gelu_tanh_grad(float *d, const float *g, const float *x, const float *y, int64_t n) {{
    for (int64_t i = 0; i < n; i++) {{
        float h = {cdf};
        float v = ((((((x[i] * x[i]) * {_f32(3 * 0.044715)}) + 1.0f) * {_f32(_SQRT_2_PI)})
                    * x[i]) * 2.0f) * h;
        d[i] = ((v * (1.0f - h)) + h) * g[i];
    }}
}}
"""


_c_lock = threading.Lock()
_c_funcs: dict[str, Any] | None = None


def _c(name: str) -> Any:
    """The C loop ``name`` (float32), or None: no compiler, the NumPy forms run."""
    global _c_funcs
    if _c_funcs is None:
        with _c_lock:
            if _c_funcs is None:
                lib = None if cfused._compiler() is None else \
                    cfused.library(_c_source(), "the GELU")
                funcs: dict[str, Any] = {}
                if lib is not None:
                    P, I = ctypes.c_void_p, ctypes.c_int64
                    for fn, args in (("gelu_erf", 2), ("gelu_erf_grad_pre", 2),
                                     ("gelu_erf_grad_post", 4), ("gelu_tanh_pre", 2),
                                     ("gelu_tanh_post", 2), ("gelu_tanh_grad", 4)):
                        f = getattr(lib, fn)
                        f.argtypes, f.restype = [P] * args + [I], None
                        funcs[fn] = f
                _c_funcs = funcs
    return _c_funcs.get(name)


# elements: an all-C loop over fewer runs on the calling thread; more, in blocks
# of _C_BLOCK over the C threads (``cpool``: the erf GELU over 512K float32, 290
# us on one thread, in blocks on fused.pool's 2 threads 240, on the C pool's ~150)
_C_SPLIT_MIN = 1 << 16
_C_BLOCK = 1 << 14


def _all_c(name: str, out: np.ndarray, *xs: np.ndarray) -> None:
    """The C loop ``name`` over out and xs (flat, contiguous float32: float16
    through float32, as ``_blockwise``), over the C threads when large."""
    flat = [np.ascontiguousarray(_wide(x)).reshape(-1) for x in xs]
    direct = out.flags.c_contiguous and out.dtype == np.float32
    dst = out.reshape(-1) if direct else np.empty(out.size, np.float32)
    n = dst.size
    fn = _c(name)
    ptrs = [cfused._address(dst)] + [cfused._address(f) for f in flat]
    if n < _C_SPLIT_MIN or not cpool.spans(_c_address(name), n, _C_BLOCK, 4, *ptrs):
        fn(*ptrs, n)
    if not direct:
        np.copyto(out, dst.reshape(out.shape), casting="unsafe")


_addresses: dict[str, int] = {}


def _c_address(name: str) -> int:
    a = _addresses.get(name)
    if a is None:
        a = _addresses[name] = ctypes.cast(_c(name), ctypes.c_void_p).value
    return a


def _gelu_tanh_c(y: np.ndarray, x: np.ndarray, t: list[np.ndarray]) -> None:
    py, px = cfused._address(y), cfused._address(x)
    _c("gelu_tanh_pre")(py, px, y.size)
    np.tanh(y, out=y)
    _c("gelu_tanh_post")(py, px, y.size)


def _gelu_erf_grad_c(d: np.ndarray, g: np.ndarray, x: np.ndarray, y: np.ndarray,
                     t: list[np.ndarray]) -> None:
    pd, px = cfused._address(d), cfused._address(x)
    _c("gelu_erf_grad_pre")(pd, px, d.size)
    np.exp(d, out=d)
    _c("gelu_erf_grad_post")(pd, cfused._address(g), px, cfused._address(y), d.size)


def _in_c(*xs: np.ndarray) -> bool:
    """Whether the C loops take these operands (float32, or float16 computed in float32)."""
    return all(x.dtype in (np.float32, np.float16) for x in xs) and _c("gelu_erf") is not None


def gelu(out: np.ndarray, x: np.ndarray, approximate: str) -> None:
    c = _in_c(out, x)
    if approximate == "tanh":
        _blockwise(_gelu_tanh_c if c else _gelu_tanh, "", out, x)
    elif c:
        _all_c("gelu_erf", out, x)
    else:
        _blockwise(_gelu_erf, "fff", out, x)


def gelu_backward(out: np.ndarray, g: np.ndarray, x: np.ndarray, y: np.ndarray,
                  approximate: str) -> None:
    if _in_c(out, g, x, y):
        if approximate == "tanh":
            _all_c("gelu_tanh_grad", out, g, x, y)
        else:
            _blockwise(_gelu_erf_grad_c, "", out, g, x, y)
    else:
        _blockwise(_gelu_tanh_grad if approximate == "tanh" else _gelu_erf_grad, "ffb",
                   out, g, x, y)
