"""rtx_cpu's ``pow`` kernel: a constant exponent that is a small integer or a
half-integer as products, ``sqrt`` and division, as PyTorch computes them, and
no NumPy slow path for negative bases.

NumPy's float ``power`` goes through the vector math library's ``pow`` (SVML on
AVX-512 machines) or libm's; either takes a slow per-element path for a
negative base: ``x ** 3`` on 131K float32 with negatives took about 10 ms,
against 0.05 ms for ``x * x * x``. So, for an exponent that is one number (a
Python scalar, a 0-d operand, a stride-0 broadcast such as a fused group's
scalar input):

- float32, float64 -- ``e`` in 0, 1, 2, 3, 4, -1, -2, 0.5, -0.5, 1.5, -1.5 as
  ``1``, ``x``, ``x*x``, ``(x*x)*x``, ``(x*x)**2``, ``1/x``, ``(1/x)**2`` (no
  overflow of ``x*x`` before the division where the result is finite),
  ``sqrt(x)``, ``1/sqrt(x)``, ``x*sqrt(x)``, ``r*sqrt(r)`` with ``r = 1/x``
  (``x ** -0.5``'s backward), each in the tensor's own dtype. ``x ** 3``,
  ``x ** -1`` and ``x ** -0.5`` give PyTorch's bits, ``x ** 0.5`` and ``x **
  -1`` NumPy's (``sqrt`` and division are correctly rounded), the others are
  within 2 ulps of NumPy's values (NumPy's are within 1 of the exact power).
  Special inputs give ``np.power``'s values: ``(-0.0) ** 3 = -0.0``, ``nan **
  0 = 1``, NaN for a negative finite base to a half-integer power, ``(-0.0) **
  -0.5 = inf`` and ``(-inf) ** 1.5 = inf`` (C's ``pow``, where ``1/sqrt`` and
  ``x*sqrt`` would give -inf and NaN). For 0.5 NumPy itself takes ``sqrt``
  when the exponent is a Python number (``(-0.0) ** 0.5 = -0.0``, ``(-inf) **
  0.5 = nan``, as PyTorch) and C's ``pow`` when it is an array (+0.0 and inf):
  so do we, a 0-d or broadcast exponent tensor being an array.
- any other finite exponent, float32/float64: ``pow(|x|, e)``, NumPy's own fast
  path, with the sign put back for an odd integer ``e`` and NaN where a
  negative finite base meets a non-integer ``e`` -- so values for non-negative
  bases are NumPy's bits, and ``(-x) ** e`` is ``+-(x ** e)`` exactly. Lanes
  whose power is certainly inf or 0 (``|x|`` past a bound), or NaN, are
  written directly: the vector ``pow`` sends each to a scalar path.
- float16 (NumPy's half ``power`` runs libm per element: 20-50 ns each): the
  small exponents and -3, -4 in float32, rounded once to float16: NumPy's
  value for every float16 input but signalling NaNs (tests/test_pow_fast.py
  checks all 65536), ``** 0.5`` as C's ``pow`` (+0.0 and inf for -0.0, -inf).
- integers: ``e`` in 0..4 as products, which wrap exactly as NumPy's
  repeated squaring does (the same value modulo 2**bits).

Anything else (an exponent tensor of several values, a NaN or infinite
exponent, a scalar base) is the shared kernel's ``np.power`` with C's rule for integers to negative
powers.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

__all__ = ["pow_kernel", "FLOAT_EXPONENTS", "HALF_EXPONENTS", "INT_EXPONENTS"]

# (1 / 0 = inf, sqrt(-1) = nan, overflow to inf: silent, as the other kernels)
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtx_cpu\.pow_kernels")

FLOAT_EXPONENTS = frozenset({0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 0.5, -0.5, 1.5, -1.5})
HALF_EXPONENTS = FLOAT_EXPONENTS | {-3.0, -4.0}  # (in float32, exact to NumPy's float16)
INT_EXPONENTS = frozenset({0, 1, 2, 3, 4})
_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)
_NEG_INF_TO = {0.5: np.inf, 1.5: np.inf, -0.5: 0.0}  # where sqrt(-inf) = nan is not pow's


def _constant(y: Any) -> tuple[Any, bool]:
    """The exponent's one value (None when it is not one number), and whether
    it came as an array (a 0-d tensor, a broadcast: NumPy's ``power`` then
    takes C's ``pow`` for 0.5, not ``sqrt``)."""
    t = type(y)
    if t is float or t is int:
        return y, False
    if t is np.ndarray and y.size and (y.ndim == 0 or not any(y.strides)):
        return y[(0,) * y.ndim].item(), True
    return None, True


def _powers(out: np.ndarray, x: np.ndarray, e: float, c_pow: bool = False) -> None:
    """``out = x ** e`` for ``e`` in HALF_EXPONENTS (float ``x``, ``out`` of
    x's dtype; ``out`` may be ``x`` itself). ``x ** 0.5`` is ``sqrt(x)`` (NumPy's
    and PyTorch's value for a float32/float64 tensor and a Python number:
    -0.0 and NaN for -0.0 and -inf), or with ``c_pow`` C's ``pow`` (+0.0 and
    inf: their value for float16, or for an exponent given as a tensor)."""
    mul = np.multiply
    if e == 0:
        out.fill(1)
    elif e == 1:
        if out is not x:
            np.copyto(out, x)
    elif e == 2:
        mul(x, x, out=out)
    elif e == 4:
        mul(x, x, out=out)
        mul(out, out, out=out)
    elif e == 3:
        sq = mul(x, x, out=None if np.may_share_memory(out, x) else out)
        mul(sq, x, out=out)
    elif e < 0 and e == int(e):  # powers of 1 / x
        np.divide(1, x, out=out)
        if e == -2:
            mul(out, out, out=out)
        elif e == -3:
            mul(mul(out, out), out, out=out)
        elif e == -4:
            mul(out, out, out=out)
            mul(out, out, out=out)
    elif e == 0.5 and not c_pow:
        np.sqrt(x, out=out)
    elif e == -1.5:
        np.add(x, 0, out=out)  # (-0.0 -> +0.0: pow(-0.0, -1.5) = inf; -inf gives +0.0)
        np.divide(1, out, out=out)
        mul(out, np.sqrt(out), out=out)
    else:  # 0.5, -0.5, 1.5 as C's pow
        neg_inf = np.equal(x, -np.inf)
        neg_inf = neg_inf if neg_inf.any() else None  # (checked before out may overwrite x)
        if e == 1.5:
            s = np.sqrt(x, out=None if np.may_share_memory(out, x) else out)
            mul(s, x, out=out)  # (-0.0 * sqrt(-0.0) = +0.0, as pow)
        else:
            np.sqrt(x, out=out)
            np.add(out, 0, out=out)  # sqrt(-0.0) = -0.0, pow(-0.0, +-0.5) takes +0.0
            if e == -0.5:
                np.divide(1, out, out=out)
        if neg_inf is not None:
            np.copyto(out, _NEG_INF_TO[e], where=neg_inf)


# binary exponents past which a power is inf (2**129 > max + half an ulp) or 0
# (2**-152 < half the smallest subnormal) whatever pow's rounding: float32, float64
_OVER_UNDER = {4: (129.0, -152.0, 127), 8: (1025.0, -1076.0, 1023)}


def _bounds(e: float, itemsize: int) -> tuple[float, float]:
    """``(lo, hi)`` such that ``a ** e`` is exactly 0 or inf (``e`` finite,
    ``|e| <= 2**16``, ``a >= 0``) for ``a <= lo`` and ``a >= hi``: 0/inf for
    a bound past the dtype's range."""
    over, under, top = _OVER_UNDER[itemsize]
    b = [over / e, under / e]
    lo, hi = (min(b), max(b))
    return (2.0 ** lo if lo > -top else 0.0), (2.0 ** hi if hi < top else math.inf)


def _power_of_abs(out: np.ndarray, e: float) -> None:
    """``out = out ** e`` for ``out >= 0`` (or NaN), NumPy's values. The vector
    ``pow`` sends a lane whose result overflows or underflows, or a NaN, to a
    scalar path (150-300 ns each): such lanes, found by a bound with a factor
    of 2 to spare in the result, get their exact 0 / inf / NaN written
    instead."""
    if abs(e) > 65536.0:  # (the bounds' margin would shrink towards the dtype's rounding)
        np.power(out, e, out=out)
        return
    lo, hi = _bounds(e, out.dtype.itemsize)
    inside = np.greater(out, lo)
    np.logical_and(inside, np.less(out, hi), out=inside)
    if inside.all():
        np.power(out, e, out=out)
        return
    big, small, nan = np.greater_equal(out, hi), np.less_equal(out, lo), np.isnan(out)
    np.copyto(out, 1, where=~inside)
    np.power(out, e, out=out)
    np.copyto(out, math.inf if e > 0 else 0.0, where=big)
    np.copyto(out, 0.0 if e > 0 else math.inf, where=small)
    np.copyto(out, math.nan, where=nan)


_QUIET_NAN = {4: np.int32(0x7FC00000), 8: np.int64(0x7FF8000000000000)}


def _set_nan(out: np.ndarray, mask: np.ndarray) -> None:
    """NaN where ``mask`` (bool, out's shape; consumed): the NaN bits or-ed in
    without a branch per element (a masked copy on a data mask mispredicts
    half the time: 5 ns an element against 0.3)."""
    m = mask.view(np.int8)
    np.negative(m, out=m)  # 0 / -1: all ones
    bits = out.view(_QUIET_NAN[out.itemsize].dtype)
    np.bitwise_or(bits, np.bitwise_and(m, _QUIET_NAN[out.itemsize]), out=bits)


def _mirrored(out: np.ndarray, x: np.ndarray, e: float) -> None:
    """``out = x ** e`` for any other finite ``e`` (float32/float64): NumPy's
    power of ``|x|``, the sign or NaN of a negative base set afterwards."""
    whole = e == int(e)
    if whole and e % 2 == 1:
        keep = x.copy() if np.may_share_memory(out, x) else x
        _power_of_abs(np.absolute(x, out=out), e)
        np.copysign(out, keep, out=out)
        return
    bad = None
    if not whole:  # a negative finite base: nan (-0.0 and -inf are pow(+0 / +inf, e))
        bad = np.less(x, 0)
        bad = np.logical_and(bad, np.not_equal(x, -np.inf), out=bad) if bad.any() else None
    _power_of_abs(np.absolute(x, out=out), e)
    if bad is not None:
        _set_nan(out, bad)


def pow_kernel(generic: Callable[..., None]) -> Callable[..., None]:
    """The cpu ``pow(out, x, y)`` kernel; ``generic`` is the shared NumPy one
    (``rtxcore.dispatch.xp``), run for everything not taken here."""

    def pow_(out: np.ndarray, x: Any, y: Any) -> None:
        if type(x) is np.ndarray and x.dtype == out.dtype and x.shape == out.shape:
            e, array = _constant(y)
            if e is not None and type(e) is not bool:
                if not out.ndim:  # (a ufunc on 0-d arrays gives scalars, not arrays)
                    out, x = out.reshape(1), x.reshape(1)
                kind = out.dtype.kind
                if kind == "f":
                    if out.dtype == _F16:
                        if e in HALF_EXPONENTS:
                            wide = x.astype(_F32)
                            _powers(wide, wide, e, c_pow=True)
                            np.copyto(out, wide, casting="same_kind")
                            return
                    elif e in FLOAT_EXPONENTS:
                        _powers(out, x, e, c_pow=array)
                        return
                    if out.dtype != _F16 and math.isfinite(e):
                        _mirrored(out, x, e)
                        return
                elif kind in "iu" and type(e) is int and e in INT_EXPONENTS:
                    _powers(out, x, e)
                    return
        generic(out, x, y)

    return pow_
