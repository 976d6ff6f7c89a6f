"""Special functions with closed-form derivatives: inverse trigonometric and hyperbolic
functions (``atan``, ``asin``, ``acosh``, ...), ``erfc``/``erfinv``,
``atan2``/``hypot``/``logaddexp``, ``sinh``/``cosh``, ``logit`` and ``xlogy``, with
their in-place twins.

Each is a composite of recorded ops, so it runs on every backend. Those whose
decomposition has a poor derivative (``atan``, ``erfinv``, ``hypot``, ...) are an
``autograd.Function`` whose forward is a composite and whose backward is the
closed-form derivative; the rest differentiate through their decomposition.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtype as D
from ..autograd.function import Function
from ..tensor import Tensor
from . import elementwise as E
from .core import bad_operand, cast, tensor_arg


def _work(x: Tensor) -> Tensor:
    """``x`` as a float tensor wide enough for a series: ints to the default float
    dtype, float16 to float32."""
    x = E._float(x)
    return cast(x, D.float32) if x._dtype is D.float16 else x


def _like(r: Tensor, x: Tensor) -> Tensor:
    """``r`` back in the float dtype the op returns for input ``x``."""
    dt = x._dtype if x._dtype.kind == "f" else D.get_default_dtype()
    return r if r._dtype is dt else cast(r, dt)


def _sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    from ..autograd.engine import sum_to

    return sum_to(g, shape)


# -- inverse trigonometric and hyperbolic functions ------------------------------------------


def _atan_raw(x: Tensor) -> Tensor:
    """atan of a float tensor: reflect to |x| <= 1 (atan(x) = pi/2 - atan(1/x)),
    halve the angle twice (atan(t) = 2 atan(t / (1 + sqrt(1 + t^2)))) to
    |t| <= tan(pi/16), then the Maclaurin series."""
    a = E.abs(x)
    big = E.gt(a, 1.0)
    t = E.where(big, E.reciprocal(E.where(big, a, 1.0)), a)
    for _ in range(2):
        t = E.div(t, E.add(E.sqrt(E.add(E.mul(t, t), 1.0)), 1.0))
    t2 = E.mul(t, t)
    nterms = 13 if x._dtype is D.float64 else 7
    acc = 1.0 / (2 * nterms - 1)
    for k in range(nterms - 2, -1, -1):  # Horner: sum (-1)^k t^(2k) / (2k + 1)
        acc = E.add(E.mul(E.neg(t2), acc), 1.0 / (2 * k + 1))
    r = E.mul(E.mul(t, acc), 4.0)
    r = E.where(big, E.sub(math.pi / 2, r), r)
    r = E.where(E.isnan(x), x, r)
    return E.where(E.lt(x, 0.0), E.neg(r), r)


def _atan2_raw(y: Tensor, x: Tensor) -> Tensor:
    """atan2 from atan of min(|x|, |y|) / max(|x|, |y|) in [0, 1], placed in its
    quadrant by the signs (signed zeros too: atan2(0, -0) = pi, as in C)."""
    ax, ay = E.abs(x), E.abs(y)
    hi, lo = E.maximum(ax, ay), E.minimum(ax, ay)
    both_inf = E.logical_and(E.isinf(ax), E.isinf(ay))
    ratio = E.div(lo, E.where(E.eq(hi, 0.0), 1.0, hi))
    r = _atan_raw(E.where(both_inf, 1.0, ratio))
    r = E.where(E.gt(ay, ax), E.sub(math.pi / 2, r), r)
    x_neg = E.logical_or(E.lt(x, 0.0), E.logical_and(E.eq(x, 0.0), E.lt(E.reciprocal(x), 0.0)))
    r = E.where(x_neg, E.sub(math.pi, r), r)
    y_neg = E.logical_or(E.lt(y, 0.0), E.logical_and(E.eq(y, 0.0), E.lt(E.reciprocal(y), 0.0)))
    r = E.where(y_neg, E.neg(r), r)
    return E.where(E.logical_or(E.isnan(x), E.isnan(y)), E.add(x, y), r)


class _Unary(Function):
    """A float unary function with a closed-form derivative ``d(x, y)``."""

    fwd: Any = None
    deriv: Any = None

    @classmethod
    def forward(cls, ctx: Any, x: Tensor) -> Tensor:  # type: ignore[override]
        y = _like(cls.fwd(_work(x)), x)
        ctx.save_for_backward(x, y)
        return y

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Tensor:  # type: ignore[override]
        x, y = ctx.saved_tensors
        return E.mul(g, cls.deriv(x, y))


def _unary(name: str, fwd: Any, deriv: Any) -> Any:
    cls = type(f"_{name.capitalize()}Function", (_Unary,),
               {"fwd": staticmethod(fwd), "deriv": staticmethod(deriv)})

    def fn(input: Tensor) -> Tensor:  # noqa: A002
        x = tensor_arg(name, input)
        if x._dtype is D.bool_:
            x = cast(x, D.get_default_dtype())
        return cls.apply(x)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _asin_raw(x: Tensor) -> Tensor:
    return _atan2_raw(x, E.sqrt(E.mul(E.sub(1.0, x), E.add(x, 1.0))))


def _acos_raw(x: Tensor) -> Tensor:
    return _atan2_raw(E.sqrt(E.mul(E.sub(1.0, x), E.add(x, 1.0))), x)


def _asinh_raw(x: Tensor) -> Tensor:
    a = E.abs(x)
    huge = E.gt(a, 2.0 ** 28)
    s = E.where(huge, 1.0, a)  # a^2 stays finite where it is used
    small = E.log1p(E.add(s, E.div(E.mul(s, s), E.add(E.sqrt(E.add(E.mul(s, s), 1.0)), 1.0))))
    r = E.where(huge, E.add(E.log(a), math.log(2.0)), small)
    return E.where(E.lt(x, 0.0), E.neg(r), r)


def _acosh_raw(x: Tensor) -> Tensor:
    huge = E.gt(x, 2.0 ** 28)
    t = E.sub(E.where(huge, 2.0, x), 1.0)
    small = E.log1p(E.add(t, E.sqrt(E.add(E.mul(t, 2.0), E.mul(t, t)))))
    return E.where(huge, E.add(E.log(x), math.log(2.0)), small)


def _atanh_raw(x: Tensor) -> Tensor:
    return E.mul(E.log1p(E.div(E.mul(x, 2.0), E.sub(1.0, x))), 0.5)


def _erfc_raw(x: Tensor) -> Tensor:
    """1 - erf(x) below ``split``; above, erfc's continued fraction (no
    cancellation: erfc(10) ~ 2e-45 comes out right)."""
    ncf, split = (60, 1.8) if x._dtype is D.float64 else (25, 2.0)
    z = E.maximum(x, E._full_like_scalar(x, split))
    f = z
    for k in range(ncf, 0, -1):
        f = E.add(z, E.div(k / 2.0, f))
    tail = E.div(E.mul(E.exp(E.neg(E.mul(z, z))), 1.0 / math.sqrt(math.pi)), f)
    return E.where(E.lt(x, split), E.sub(1.0, E.erf(x)), tail)


def _erfinv_raw(x: Tensor) -> Tensor:
    """Giles' single-precision approximation ("Approximating the erfinv
    function", GPU Computing Gems, 2011), then Newton steps on erf, in float64
    where the device has it (float32's erf is too coarse near +-1)."""
    if x._dtype is not D.float64 and x._device.supports(D.float64):
        return cast(_erfinv_raw(cast(x, D.float64)), x._dtype)
    w = E.neg(E.log(E.mul(E.sub(1.0, x), E.add(x, 1.0))))
    wa = E.sub(w, 2.5)
    pa = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        pa = E.add(E.mul(pa, wa), c)
    wb = E.sub(E.sqrt(E.where(E.isfinite(w), w, 5.0)), 3.0)
    pb = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        pb = E.add(E.mul(pb, wb), c)
    y = E.mul(E.where(E.lt(w, 5.0), pa, pb), x)
    edge = E.ge(E.abs(x), 1.0)
    ys = E.where(edge, 0.0, y)
    for _ in range(2 if x._dtype is D.float64 else 1):
        ys = E.sub(ys, E.mul(E.sub(E.erf(ys), x), E.mul(E.exp(E.mul(ys, ys)), math.sqrt(math.pi) / 2)))
    r = E.where(E.eq(x, 1.0), math.inf, E.where(E.eq(x, -1.0), -math.inf, ys))
    return E.where(E.gt(E.abs(x), 1.0), math.nan, r)


def _rsqrt1m(x: Tensor) -> Tensor:
    return E.rsqrt(E.mul(E.sub(1.0, x), E.add(x, 1.0)))


atan = arctan = _unary("atan", _atan_raw, lambda x, y: E.reciprocal(E.add(E.mul(x, x), 1.0)))


asin = arcsin = _unary("asin", _asin_raw, lambda x, y: _rsqrt1m(x))


acos = arccos = _unary("acos", _acos_raw, lambda x, y: E.neg(_rsqrt1m(x)))


asinh = arcsinh = _unary("asinh", _asinh_raw, lambda x, y: E.rsqrt(E.add(E.mul(x, x), 1.0)))


acosh = arccosh = _unary("acosh", _acosh_raw,
                         lambda x, y: E.rsqrt(E.mul(E.sub(x, 1.0), E.add(x, 1.0))))


atanh = arctanh = _unary("atanh", _atanh_raw,
                         lambda x, y: E.reciprocal(E.mul(E.sub(1.0, x), E.add(x, 1.0))))


erfc = _unary("erfc", _erfc_raw,
              lambda x, y: E.mul(E.exp(E.neg(E.mul(x, x))), -2.0 / math.sqrt(math.pi)))


erfinv = _unary("erfinv", _erfinv_raw,
                lambda x, y: E.mul(E.exp(E.mul(y, y)), math.sqrt(math.pi) / 2))


class _Binary(Function):
    """A float binary function with closed-form partial derivatives."""

    fwd: Any = None
    grads: Any = None

    @classmethod
    def forward(cls, ctx: Any, a: Tensor, b: Tensor) -> Tensor:  # type: ignore[override]
        out = cls.fwd(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @classmethod
    def backward(cls, ctx: Any, g: Tensor) -> Any:  # type: ignore[override]
        a, b, out = ctx.saved_tensors
        da, db = cls.grads(a, b, out)
        return _sum_to(E.mul(g, da), a._shape), _sum_to(E.mul(g, db), b._shape)


def _float_pair(name: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    """Both operands as tensors of one float dtype on one device."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise bad_operand(name, a)
    dt = D.result_type(a, b)
    if dt.kind != "f":
        dt = D.get_default_dtype()
    ref = a if isinstance(a, Tensor) else b
    a = cast(a, dt) if isinstance(a, Tensor) else E._full_like_scalar(cast(ref, dt), float(a))
    b = cast(b, dt) if isinstance(b, Tensor) else E._full_like_scalar(cast(ref, dt), float(b))
    return a, b


def _binary(name: str, fwd: Any, grads: Any) -> Any:
    cls = type(f"_{name.capitalize()}Function", (_Binary,),
               {"fwd": staticmethod(fwd), "grads": staticmethod(grads)})

    def fn(input: Any, other: Any) -> Tensor:  # noqa: A002
        a, b = _float_pair(name, input, other)
        return cls.apply(a, b)

    fn.__name__ = fn.__qualname__ = name
    return fn


def _atan2_fwd(y: Tensor, x: Tensor) -> Tensor:
    return _like(_atan2_raw(_work(y), _work(x)), y)


def _atan2_grads(y: Tensor, x: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    r2 = E.add(E.mul(x, x), E.mul(y, y))
    return E.div(x, r2), E.neg(E.div(y, r2))


def _hypot_fwd(a: Tensor, b: Tensor) -> Tensor:
    aa, ab = E.abs(a), E.abs(b)
    hi, lo = E.maximum(aa, ab), E.minimum(aa, ab)
    q = E.div(lo, E.where(E.eq(hi, 0.0), 1.0, hi))
    r = E.mul(hi, E.sqrt(E.add(E.mul(q, q), 1.0)))
    return E.where(E.logical_or(E.isinf(aa), E.isinf(ab)), math.inf, r)


def _hypot_grads(a: Tensor, b: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    safe = E.where(E.eq(out, 0.0), 1.0, out)
    return E.div(a, safe), E.div(b, safe)


def _logaddexp_fwd(a: Tensor, b: Tensor) -> Tensor:
    m = E.maximum(a, b)
    same = E.eq(a, b)  # equal infinities: a - b would be nan
    d = E.neg(E.abs(E.sub(a, E.where(same, a, b))))
    return E.where(same, E.add(a, math.log(2.0)), E.add(m, E.log1p(E.exp(d))))


def _logaddexp_grads(a: Tensor, b: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    return E.exp(E.sub(a, out)), E.exp(E.sub(b, out))


atan2 = arctan2 = _binary("atan2", _atan2_fwd, _atan2_grads)


hypot = _binary("hypot", _hypot_fwd, _hypot_grads)


logaddexp = _binary("logaddexp", _logaddexp_fwd, _logaddexp_grads)


def sinh(input: Tensor) -> Tensor:  # noqa: A002
    """(e^x - e^-x) / 2 from expm1, exact near 0."""
    x = E._float(tensor_arg("sinh", input))
    return E.mul(E.sub(E.expm1(x), E.expm1(E.neg(x))), 0.5)


def cosh(input: Tensor) -> Tensor:  # noqa: A002
    x = E._float(tensor_arg("cosh", input))
    return E.mul(E.add(E.exp(x), E.exp(E.neg(x))), 0.5)


def logit(input: Tensor, eps: float | None = None) -> Tensor:  # noqa: A002
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    x = E._float(tensor_arg("logit", input))
    if eps is not None:
        x = E.clamp(x, float(eps), 1.0 - float(eps))
    return E.sub(E.log(x), E.log1p(E.neg(x)))


def xlogy(input: Any, other: Any) -> Tensor:  # noqa: A002
    """x * log(y), 0 where x == 0 (unless y is nan)."""
    a, b = _float_pair("xlogy", input, other)
    r = E.mul(a, E.log(b))
    return E.where(E.logical_and(E.eq(a, 0.0), E.logical_not(E.isnan(b))), 0.0, r)


METHODS = ["atan", "arctan", "asin", "arcsin", "acos", "arccos", "asinh", "arcsinh", "acosh", "arccosh",
           "atanh", "arctanh", "erfc", "erfinv", "atan2", "arctan2", "hypot", "logaddexp", "sinh",
           "cosh", "logit", "xlogy"]
METHODS += E.copy_back_twins(globals(), (
    "atan", "asin", "acos", "asinh", "acosh", "atanh", "erfc", "erfinv", "atan2", "hypot", "sinh",
    "cosh", "logit", "xlogy", "arctan", "arcsin", "arccos", "arctan2"))
