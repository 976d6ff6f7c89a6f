"""More of PyTorch's functions, built from existing ops: inverse trigonometric and
hyperbolic functions, ``erfc``/``erfinv``, ``fmod``/``hypot``/``logaddexp``,
integer bitwise ops, order statistics (``median``, ``kthvalue``, ``mode``,
``quantile``), scans (``cummax``/``cummin``), ``bincount``/``histc``/
``searchsorted``, matrix helpers (``trace``, ``cross``, ``kron``, ``addmm``...),
shape helpers (``atleast_2d``, ``rot90``, ``block_diag``...), random sampling
(``normal``, ``bernoulli``, ``Tensor.exponential_``...) and in-place variants
(``index_copy_``, ``masked_scatter_``, ``t_``...).

Everything is a composite of recorded ops, so it runs on every backend. Most
functions differentiate through their decomposition; the few whose decomposition
has a poor derivative (``atan``, ``erfinv``, ``hypot``, ...) are an
``autograd.Function`` whose forward is a composite and whose backward is the
closed-form derivative.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, Sequence

from .. import dtype as D
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..random import Generator
from ..shape import broadcast_many, normalize_dim
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import linalg as L
from . import reduction as R
from . import views as V
from .core import bad_operand, cast

cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])
median_result = namedtuple("median", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])


def _tensor(name: str, x: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise bad_operand(name, x)
    return x


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
        x = _tensor(name, input)
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
    x = E._float(_tensor("sinh", input))
    return E.mul(E.sub(E.expm1(x), E.expm1(E.neg(x))), 0.5)


def cosh(input: Tensor) -> Tensor:  # noqa: A002
    x = E._float(_tensor("cosh", input))
    return E.mul(E.add(E.exp(x), E.exp(E.neg(x))), 0.5)


def frac(input: Tensor) -> Tensor:  # noqa: A002
    """``x - trunc(x)``: the fractional part, with x's sign."""
    x = _tensor("frac", input)
    if x._dtype.kind != "f":
        raise RuntimeError(f"frac: expected a floating point tensor, got {x._dtype.name}")
    return E.sub(x, E.trunc(x))


def fmod(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """C's fmod: the remainder of truncated division (the sign of ``input``),
    from ``remainder`` (the sign of ``other``): for floats of the magnitudes,
    for integers moved back by ``other``."""
    _tensor("fmod", input)
    if D.result_type(input, other).kind != "f":
        r = E.remainder(input, other)
        fix = E.logical_and(E.ne(r, 0), E.ne(E.lt(r, 0), E.lt(input, 0)))
        return E.where(fix, E.sub(r, other), r)
    # floats: |input| mod |other| is exact (moving r back by other is not: it
    # rounds, 0.5 - 65504 in float16), then input's sign; a zero input keeps its
    # own sign (fmod(-0.0, y) is -0.0, fmod(0.5, -0.5) is +0.0)
    den = E.abs(other) if isinstance(other, Tensor) else abs(other)
    r = E.remainder(E.abs(input), den)
    r = E.where(E.lt(input, 0), E.neg(r), r)
    zero = E.eq(input, 0)
    if isinstance(den, Tensor):
        keep = E.logical_and(zero, E.gt(den, 0))  # (a NaN or zero divisor: NaN stays)
    else:
        keep = zero if den > 0 else None
    return r if keep is None else E.where(keep, input, r)


def logit(input: Tensor, eps: float | None = None) -> Tensor:  # noqa: A002
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    x = E._float(_tensor("logit", input))
    if eps is not None:
        x = E.clamp(x, float(eps), 1.0 - float(eps))
    return E.sub(E.log(x), E.log1p(E.neg(x)))


def xlogy(input: Any, other: Any) -> Tensor:  # noqa: A002
    """x * log(y), 0 where x == 0 (unless y is nan)."""
    a, b = _float_pair("xlogy", input, other)
    r = E.mul(a, E.log(b))
    return E.where(E.logical_and(E.eq(a, 0.0), E.logical_not(E.isnan(b))), 0.0, r)


def clamp_min(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    return E.clamp(_tensor("clamp_min", input), min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    return E.clamp(_tensor("clamp_max", input), max=max)


def clamp_min_(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    return E.clamp_(input, min=min)


def clamp_max_(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    return E.clamp_(input, max=max)


def heaviside(input: Tensor, values: Tensor) -> Tensor:  # noqa: A002
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0."""
    x, v = _tensor("heaviside", input), _tensor("heaviside", values)
    if x._dtype is not v._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    with no_grad():
        return E.where(E.eq(x, 0), v, cast(E.gt(x, 0), x._dtype))


# -- bitwise ops --------------------------------------------------------------------------------


def _bitwise(name: str, a: Any, b: Any, bool_op: Any, bit_op: Any) -> Tensor:
    """bool operands: the logical op. Integer operands: bit by bit, each bit
    taken with floor division and remainder (two's complement, as arithmetic
    shifts give it), since the backends have no integer bit kernels."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise bad_operand(name, a)
    dt = D.result_type(a, b)
    if dt.kind == "f":
        raise RuntimeError(f"{name}: not implemented for '{dt.name}' (bool and integer dtypes only)")
    if dt is D.bool_:
        return bool_op(E._as_bool(a), E._as_bool(b))
    ref = a if isinstance(a, Tensor) else b
    a = cast(a, dt) if isinstance(a, Tensor) else E._full_like_scalar(cast(ref, dt), int(a))
    b = cast(b, dt) if isinstance(b, Tensor) else E._full_like_scalar(cast(ref, dt), int(b))
    nbits = dt.itemsize * 8
    out = None
    for k in range(nbits):
        top = k == nbits - 1 and dt.is_signed
        ba, bb = (cast(E.lt(v, 0), dt) if top else E.remainder(E.floor_divide(v, 1 << k), 2)
                  for v in (a, b))
        bit = bit_op(ba, bb)
        weight = -(1 << k) if top else (1 << k)
        term = E.mul(bit, weight)
        out = term if out is None else E.add(out, term)
    return cast(out, dt)


def bitwise_and(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _bitwise("bitwise_and", input, other, E.logical_and, E.mul)


def bitwise_or(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _bitwise("bitwise_or", input, other, E.logical_or,
                    lambda p, q: E.sub(E.add(p, q), E.mul(p, q)))


def bitwise_xor(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _bitwise("bitwise_xor", input, other, E.logical_xor,
                    lambda p, q: E.remainder(E.add(p, q), 2))


# -- scans and order statistics -----------------------------------------------------------------


def _cumext(name: str, x: Tensor, dim: int, larger: bool) -> Any:
    """Running max (min) with its index: a log-step scan over (value, index)
    pairs where the later element wins ties and nan wins over everything (the
    last nan seen), PyTorch's sequential rule."""
    from .creation import arange

    x = _tensor(name, x)
    if x.ndim == 0:
        idx = cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64)
        return x.clone(), idx
    d = normalize_dim(dim, x.ndim)
    n = x._shape[d]
    with no_grad():
        v = x.detach()
        shape = [1] * x.ndim
        shape[d] = n
        i = V.expand(V.reshape(arange(n, device=x._device), tuple(shape)), x._shape).contiguous()
        s = 1
        while s < n:
            lv, li = V.narrow(v, d, 0, n - s), V.narrow(i, d, 0, n - s)
            rv, ri = V.narrow(v, d, s, n - s), V.narrow(i, d, s, n - s)
            better = E.ge(rv, lv) if larger else E.le(rv, lv)
            if v._dtype.kind == "f":
                better = E.logical_or(E.isnan(rv), E.logical_and(better, E.logical_not(E.isnan(lv))))
            v = I.cat([V.narrow(v, d, 0, s), E.where(better, rv, lv)], d)
            i = I.cat([V.narrow(i, d, 0, s), E.where(better, ri, li)], d)
            s *= 2
    return I.gather(x, d, i), i


def cummax(input: Tensor, dim: int) -> Any:  # noqa: A002
    """Running maximum along ``dim`` and the index where it was taken."""
    return cummax_result(*_cumext("cummax", input, dim, True))


def cummin(input: Tensor, dim: int) -> Any:  # noqa: A002
    return cummin_result(*_cumext("cummin", input, dim, False))


def _sorted_along(x: Tensor, d: int) -> Any:
    with no_grad():
        return I.sort(x.detach(), d, stable=True)


def _pick(x: Tensor, d: int, order: Tensor, pos: Tensor, keepdim: bool) -> tuple[Tensor, Tensor]:
    """Values and original indices at sorted position ``pos`` (keepdim shape)."""
    idx = I.gather(order, d, pos)
    vals = I.gather(x, d, idx)
    if not keepdim:
        vals, idx = V.squeeze(vals, d), V.squeeze(idx, d)
    return vals, idx


def _nan_count(x: Tensor, d: int) -> Tensor:
    if x._dtype.kind != "f":
        return R.sum(cast(E._full_bool(x, False), D.int64), d, keepdim=True)
    return R.sum(cast(E.isnan(x.detach()), D.int64), d, keepdim=True)


def _median(name: str, x: Tensor, dim: Any, keepdim: bool, skip_nan: bool) -> Any:
    x = _tensor(name, x)
    if dim is None:
        flat = V.reshape(x, (-1,))
        if flat.numel() == 0:
            raise IndexError(f"{name}() input tensor cannot be empty")
        vals, _ = _median(name, flat, 0, False, skip_nan)
        return vals
    d = normalize_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        return x.clone(), cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64)
    n = x._shape[d]
    if n == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    srt = _sorted_along(x, d)  # nan sorts last
    with no_grad():
        nans = _nan_count(x, d)
        good = E.sub(n, nans)
        if skip_nan:  # lower median of the non-nan values; all-nan rows give nan
            pos = E.floor_divide(E.maximum(E.sub(good, 1), 0), 2)
        else:  # a row with nan answers its first nan
            half = E._full_like_scalar(good, (n - 1) // 2)
            pos = E.where(E.gt(nans, 0), good, half)
    return _pick(x, d, srt.indices, cast(pos, D.int64), keepdim)


def median(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The lower median (of the flattened input, or along ``dim`` with its
    index); nan when the values hold nan, as in PyTorch."""
    r = _median("median", input, dim, keepdim, False)
    return r if dim is None else median_result(*r)


def nanmedian(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """``median`` ignoring nan."""
    r = _median("nanmedian", input, dim, keepdim, True)
    return r if dim is None else nanmedian_result(*r)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """The ``k``-th smallest value along ``dim`` (``k`` from 1) and its index."""
    x = _tensor("kthvalue", input)
    d = normalize_dim(dim, max(x.ndim, 1))
    n = x._shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if x.ndim == 0:
        return kthvalue_result(x.clone(), cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64))
    srt = _sorted_along(x, d)
    shape = list(x._shape)
    shape[d] = 1
    from .creation import full

    pos = full(tuple(shape), k - 1, dtype=D.int64, device=x._device)
    return kthvalue_result(*_pick(x, d, srt.indices, pos, keepdim))


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """The most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence."""
    from .creation import arange

    x = _tensor("mode", input)
    if x.ndim == 0:
        return mode_result(x.clone(), cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64))
    d = normalize_dim(dim, x.ndim)
    n = x._shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    with no_grad():
        srt = _sorted_along(x, d)
        s = srt.values
        shape = [1] * x.ndim
        shape[d] = n
        pos = V.expand(V.reshape(arange(n, device=x._device), tuple(shape)), x._shape)
        if n > 1:
            change = E.ne(V.narrow(s, d, 1, n - 1), V.narrow(s, d, 0, n - 1))
            start = I.cat([E._full_bool(V.narrow(s, d, 0, 1), True), change], d)
        else:
            start = E._full_bool(s, True)
        run_start = _cumext("mode", E.where(start, pos, 0), d, True)[0]
        length = E.sub(pos, run_start)
        # the end of the longest run; argmax picks the first, so the smallest value
        ends = I.cat([V.narrow(start, d, 1, n - 1), E._full_bool(V.narrow(s, d, 0, 1), True)], d) \
            if n > 1 else E._full_bool(s, True)
        score = E.where(ends, length, -1)
        best = R.argmax(score, d, keepdim=True)
        # the last occurrence in the original order: the largest original index in that run
        value = I.gather(s, d, best)
        hit = E.eq(x.detach(), value)
        if x._dtype.kind == "f":
            hit = E.logical_or(hit, E.logical_and(E.isnan(x.detach()), E.isnan(value)))
        idx = R.amax(E.where(hit, pos, -1), d, keepdim=True)
    vals = I.gather(x, d, idx)
    if not keepdim:
        vals, idx = V.squeeze(vals, d), V.squeeze(idx, d)
    return mode_result(vals, idx)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name: str, x: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str,
              skip_nan: bool) -> Tensor:
    from .creation import as_tensor_on

    x = _tensor(name, x)
    if x._dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, midpoint "
                         f"or nearest. Got {interpolation}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not 0 <= float(q) <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
        qt = as_tensor_on([float(q)], x._device, x._dtype)
    else:
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q._dtype is not x._dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        qt = V.reshape(q.detach(), (-1,))
        if qt.numel() and (bool(R.any(E.lt(qt, 0.0)).item()) or bool(R.any(E.gt(qt, 1.0)).item())):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    if dim is None:
        src, d = V.reshape(x, (-1,)), 0
    else:
        d = normalize_dim(dim, max(x.ndim, 1))
        src = x if x.ndim else V.reshape(x, (1,))
    n = src._shape[d]
    if n == 0:
        raise IndexError(f"{name}() input tensor must be non-empty")
    moved = V.movedim(src, d, -1)  # (..., n)
    srt = _sorted_along(moved, -1)
    nq = qt._shape[0]
    lead = moved._shape[:-1]
    with no_grad():
        nans = _nan_count(moved, -1)  # (..., 1)
        count = E.sub(n, nans) if skip_nan else E.add(E.mul(nans, 0), n)
        last = cast(E.sub(count, 1), x._dtype)  # (..., 1)
        pos = E.mul(V.reshape(qt, (1,) * len(lead) + (nq,)), last)  # (..., nq)
        if interpolation == "nearest":
            pos = E.round(pos)
        lo = E.floor(pos)
        hi = E.ceil(pos)
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        frac_ = E.sub(pos, lo) if interpolation == "linear" else \
            E._full_like_scalar(pos, 0.5 if interpolation == "midpoint" else 0.0)
        lo_i = cast(E.clamp(lo, 0.0, max(n - 1, 0)), D.int64)
        hi_i = cast(E.clamp(hi, 0.0, max(n - 1, 0)), D.int64)
        if interpolation in ("lower", "higher", "nearest"):
            frac_ = E.mul(frac_, 0.0)
    vlo = I.gather(moved, -1, I.gather(srt.indices, -1, lo_i))
    vhi = I.gather(moved, -1, I.gather(srt.indices, -1, hi_i))
    out = E.add(vlo, E.mul(E.sub(vhi, vlo), frac_))
    with no_grad():
        bad = E.gt(nans, 0) if not skip_nan else E.eq(count, 0)
        bad = V.expand(bad, out._shape)
    out = E.where(bad, math.nan, out)
    out = V.movedim(out, -1, 0)  # (nq, ...)
    if keepdim:
        if dim is None:
            out = V.reshape(out, (nq,) + (1,) * x.ndim)
        else:
            out = V.unsqueeze(out, d + 1) if x.ndim else out
    if scalar_q:
        out = V.squeeze(out, 0)
    return out


def quantile(input: Tensor, q: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles (``q`` a float or 1-D tensor in [0, 1]) of the
    flattened input or along ``dim``; nan where the values hold nan."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear") -> Tensor:
    """``quantile`` ignoring nan (nan only where every value is nan)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``sum`` with nan counted as zero."""
    x = _tensor("nansum", input)
    if x._dtype.kind == "f":
        x = E.where(E.isnan(x), 0.0, x)
    return R.sum(x, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``mean`` of the non-nan values."""
    x = _tensor("nanmean", input)
    if x._dtype.kind != "f" and dtype is None:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {x._dtype.name}")
    if dtype is not None:
        x = cast(x, D.as_dtype(dtype))
    keep = E.logical_not(E.isnan(x))
    return E.div(nansum(x, dim, keepdim), R.sum(cast(keep, x._dtype), dim, keepdim))


# -- counting and searching ---------------------------------------------------------------------


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value 0..max occurs in a 1-D non-negative integer tensor
    (the sum of ``weights`` at those places when given)."""
    from .creation import ones, zeros

    x = _tensor("bincount", input)
    if x.ndim != 1 or x._dtype.kind not in "iu":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("bincount: minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights._shape[0] != x._shape[0]):
        raise RuntimeError("bincount: weights should be 1-d and have the same length as input")
    with no_grad():
        if x.numel() and int(R.amin(x).item()) < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        size = max(int(R.amax(x).item()) + 1 if x.numel() else 0, int(minlength))
        idx = cast(x, D.int64)
    if weights is None:
        return I.scatter_add(zeros(size, dtype=D.int64, device=x._device), 0, idx,
                             ones(x._shape, dtype=D.int64, device=x._device))
    wdt = weights._dtype if weights._dtype.kind == "f" else D.float64
    if not x._device.supports(wdt):
        wdt = D.float32
    w = cast(weights, wdt)
    return I.scatter_add(zeros(size, dtype=wdt, device=x._device), 0, idx, w)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """Where each value of ``input`` would go in the sorted last dim of
    ``sorted_sequence`` to keep it sorted (the first such place, or the last
    with ``right=True`` / ``side='right'``): a count of the smaller entries,
    by comparing every value with every entry (memory values x entries)."""
    from .creation import as_tensor_on

    seq = _tensor("searchsorted", sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side "
                               "of left while right was True")
        right = side == "right"
    if sorter is not None:
        seq = I.gather(seq, -1, sorter)
    scalar = not isinstance(input, Tensor)
    vals = as_tensor_on(input, seq._device, D.result_type(seq, input)) if scalar else input
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension")
    if seq.ndim > 1 and (vals.ndim != seq.ndim or vals._shape[:-1] != seq._shape[:-1]):
        raise RuntimeError(
            f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
            f"of boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(seq._shape)} and input value tensor {list(vals._shape)}")
    with no_grad():
        s, v = seq.detach(), vals.detach()
        cmp = E.le if right else E.lt
        below = cmp(V.unsqueeze(s, -2), V.unsqueeze(v, -1))  # (..., m, n)
        out = R.sum(cast(below, D.int64), -1)
    return cast(out, D.int32) if out_int32 else out


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Tensor:
    """The bucket of each value given 1-D ascending ``boundaries``."""
    b = _tensor("bucketize", boundaries)
    if b.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``bins`` equal bins over [min, max] (the data's range when
    min == max); values outside are ignored, max lands in the last bin."""
    from .creation import zeros

    x = _tensor("histc", input)
    if x._dtype.kind != "f":
        raise RuntimeError(f"histc: not implemented for '{x._dtype.name}' (floating point input only)")
    if bins <= 0:
        raise RuntimeError("torch.histc(): bins must be > 0")
    with no_grad():
        v = V.reshape(x.detach(), (-1,))
        lo, hi = float(min), float(max)
        if lo == hi and v.numel():
            lo, hi = float(R.amin(v).item()), float(R.amax(v).item())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if lo > hi:
            raise RuntimeError("torch.histc(): max must be larger than min")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
        inside = E.logical_and(E.ge(v, lo), E.le(v, hi))
        b = cast(E.floor(E.mul(E.sub(v, lo), bins / (hi - lo))), D.int64)
        b = E.clamp(b, 0, bins - 1)
        ones_ = cast(inside, x._dtype)
        return I.scatter_add(zeros(bins, dtype=x._dtype, device=x._device), 0, b, ones_)


def _tri_indices(name: str, row: int, col: int, offset: int, dtype: Any, device: Any, upper: bool) -> Tensor:
    from .creation import arange
    from .core import ready_device

    if row < 0 or col < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got row={row}, col={col}")
    dev = ready_device(device)
    dt = D.int64 if dtype is None else D.as_dtype(dtype)
    r = V.unsqueeze(arange(row, device=dev), 1)
    c = V.unsqueeze(arange(col, device=dev), 0)
    keep = E.ge(E.sub(c, r), offset) if upper else E.le(E.sub(c, r), offset)
    idx = I.nonzero(keep)  # (N, 2), row-major: PyTorch's order
    return cast(V.t(idx), dt).contiguous() if idx._shape[0] else cast(V.t(idx), dt).contiguous()


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The (2, N) coordinates of the upper triangle of a row x col matrix."""
    return _tri_indices("triu_indices", row, col, offset, dtype, device, True)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The (2, N) coordinates of the lower triangle of a row x col matrix."""
    return _tri_indices("tril_indices", row, col, offset, dtype, device, False)


# -- shapes ---------------------------------------------------------------------------------------


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape (views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        _tensor("broadcast_tensors", t)
    shape = broadcast_many(*(t._shape for t in tensors))
    return tuple(V.expand(t, shape) for t in tensors)


def _atleast(name: str, nd: int, tensors: tuple[Any, ...]) -> Any:
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = []
    for t in tensors:
        t = _tensor(name, t)
        if t.ndim < nd:
            if t.ndim == 0:
                t = V.reshape(t, (1,) * nd)
            elif nd == 2 or t.ndim == 2:  # (n) -> (1, n); (m, n) -> (m, n, 1)
                t = V.unsqueeze(t, 0) if t.ndim == 1 else V.unsqueeze(t, -1)
                if t.ndim < nd:
                    t = V.unsqueeze(t, -1)
            else:
                t = V.reshape(t, (1, t._shape[0], 1))
        out.append(t)
    return out[0] if one else tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """(n) -> (1, n, 1), (m, n) -> (m, n, 1), as NumPy and PyTorch do."""
    return _atleast("atleast_3d", 3, tensors)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    return I.cat(list(atleast_3d(*tensors)) if len(tensors) != 1 else [atleast_3d(tensors[0])], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    cols = [V.reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors]
    return I.cat(cols, 1)


def block_diag(*tensors: Tensor) -> Tensor:
    """The tensors (0-D, 1-D or 2-D) as the blocks of a block-diagonal matrix."""
    from .creation import zeros

    mats = []
    for t in tensors:
        t = _tensor("block_diag", t)
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {len(mats)} has {t.ndim} dimensions")
        mats.append(V.reshape(t, (1, 1)) if t.ndim == 0 else V.reshape(t, (1, -1)) if t.ndim == 1 else t)
    if not mats:
        return zeros(1, 0)
    dt = D.result_type(*mats)
    dev = mats[0]._device
    width = sum(m._shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m._shape
        parts = [zeros(r, left, dtype=dt, device=dev), cast(m, dt),
                 zeros(r, width - left - c, dtype=dt, device=dev)]
        rows.append(I.cat(parts, 1))
        left += c
    return I.cat(rows, 0)


def take(input: Tensor, index: Tensor) -> Tensor:  # noqa: A002
    """``input`` read as 1-D at ``index`` (negative indices count from the end);
    the result has ``index``'s shape."""
    x = _tensor("take", input)
    idx = _flat_index("take", x, index)
    return V.reshape(I.index_select(V.reshape(x, (-1,)), 0, V.reshape(idx, (-1,))), index._shape)


def _flat_index(name: str, x: Tensor, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index._dtype not in (D.int64, D.int32, D.int16, D.int8, D.uint8):
        raise RuntimeError(f"{name}(): Expected a long tensor for index")
    n = x.numel()
    with no_grad():
        idx = cast(index, D.int64)
        if idx.numel():
            lo, hi = int(R.amin(idx).item()), int(R.amax(idx).item())
            bad = hi if hi >= n else lo if lo < -n else None
            if bad is not None:
                raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
        return E.where(E.lt(idx, 0), E.add(idx, n), idx)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``source`` written (or added) at the flat
    ``index`` positions."""
    x = _tensor("put", input)
    idx = V.reshape(_flat_index("put", x, index), (-1,))
    src = V.reshape(source, (-1,))
    if src._shape[0] != idx._shape[0]:
        raise RuntimeError(f"put(): Expected source and index to have the same number of elements, "
                           f"but got source.numel() = {src._shape[0]}, index.numel() = {idx._shape[0]}")
    from .misc import index_put

    flat = V.reshape(x, (-1,))
    return V.reshape(index_put(flat, (idx,), cast(src, x._dtype), accumulate), x._shape)


def put_(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """In place: ``input`` read as 1-D gets ``source`` at ``index``."""
    return E.copy_(input, put(input, index, source, accumulate))


def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    x = _tensor("fliplr", input)
    if x.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return I.flip(x, [1])


def flipud(input: Tensor) -> Tensor:  # noqa: A002
    x = _tensor("flipud", input)
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return I.flip(x, [0])


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:  # noqa: A002
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first
    towards the second."""
    x = _tensor("rot90", input)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = normalize_dim(dims[0], x.ndim), normalize_dim(dims[1], x.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return V.transpose(I.flip(x, [d1]), d0, d1)
    if k == 2:
        return I.flip(x, [d0, d1])
    if k == 3:
        return I.flip(V.transpose(x, d0, d1), [d1])
    return x.clone()


# -- matrices ---------------------------------------------------------------------------------------


def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of the main diagonal of a matrix."""
    x = _tensor("trace", input)
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return R.sum(V.diagonal(x, 0, 0, 1))


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    """The 3-D cross product along ``dim`` (by default the first dim of size 3,
    as PyTorch still does; ``linalg.cross`` defaults to -1)."""
    a, b = _tensor("cross", input), _tensor("cross", other)
    if a.ndim != b.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got {a.ndim} and {b.ndim}")
    a, b = broadcast_tensors(a, b)
    if dim is None:
        dims = [i for i, n in enumerate(a._shape) if n == 3]
        if not dims:
            raise RuntimeError("no dimension of size 3 in input")
        d = dims[0]
    else:
        d = normalize_dim(dim, a.ndim)
    if a._shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {d} must have length 3. "
                           f"Got {a._shape[d]} and {b._shape[d]}")
    a0, a1, a2 = V.unbind(a, d)
    b0, b1, b2 = V.unbind(b, d)
    return I.stack([E.sub(E.mul(a1, b2), E.mul(a2, b1)), E.sub(E.mul(a2, b0), E.mul(a0, b2)),
                    E.sub(E.mul(a0, b1), E.mul(a1, b0))], d)


def kron(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The Kronecker product: every element of ``input`` times all of ``other``."""
    a, b = _tensor("kron", input), _tensor("kron", other)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a._shape)
    sb = (1,) * (nd - b.ndim) + tuple(b._shape)
    ea = V.reshape(a, tuple(x for n in sa for x in (n, 1)))
    eb = V.reshape(b, tuple(x for n in sb for x in (1, n)))
    return V.reshape(E.mul(ea, eb), tuple(p * q for p, q in zip(sa, sb)))


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:  # noqa: A002
    """The p-norm of ``input - other``."""
    d = E.sub(_tensor("dist", input), _tensor("dist", other))
    return R.norm(V.reshape(d, (-1,)), p)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,  # noqa: A002
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``!=`` for bool)."""
    x = _tensor("diff", input)
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = normalize_dim(dim, x.ndim)
    if prepend is not None or append is not None:
        parts = [p for p in (prepend, x, append) if p is not None]
        x = I.cat([V.expand(p, x._shape[:d] + (1,) + x._shape[d + 1:]) if p.ndim == 0 else p
                   for p in parts], d)
    for _ in range(n):
        m = x._shape[d]
        if m == 0:
            break
        hi, lo = V.narrow(x, d, 1, m - 1), V.narrow(x, d, 0, m - 1)
        x = E.logical_xor(hi, lo) if x._dtype is D.bool_ else E.sub(hi, lo)
    return x


def _scaled_sum(name: str, inp: Tensor, prod: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta * input + alpha * prod``; beta == 0 ignores input (nan included)."""
    try:
        shape = broadcast_many(inp._shape, prod._shape)
    except RuntimeError:
        shape = None
    if shape != prod._shape:
        raise RuntimeError(f"{name}: the input of shape {tuple(inp._shape)} can't be broadcast to the "
                           f"result shape {tuple(prod._shape)}")
    if alpha != 1:
        prod = E.mul(prod, alpha)
    if beta == 0:
        return prod
    return E.add(inp if beta == 1 else E.mul(inp, beta), prod)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``."""
    return _scaled_sum("addmm", _tensor("addmm", input), L.mm(mat1, mat2), beta, alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    return _scaled_sum("addmv", _tensor("addmv", input), L.mv(mat, vec), beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2)``, batch by batch."""
    return _scaled_sum("baddbmm", _tensor("baddbmm", input), L.bmm(batch1, batch2), beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    return _scaled_sum("addbmm", _tensor("addbmm", input), R.sum(L.bmm(batch1, batch2), 0), beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    return _scaled_sum("addr", _tensor("addr", input), L.outer(vec1, vec2), beta, alpha)


def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``, with sample points ``x`` (a tensor)
    or a constant spacing ``dx`` (default 1)."""
    y = _tensor("trapezoid", y)
    d = normalize_dim(dim, max(y.ndim, 1))
    n = y._shape[d]
    if n == 0:
        return R.sum(y, d)
    avg = E.mul(E.add(V.narrow(y, d, 1, n - 1), V.narrow(y, d, 0, n - 1)), 0.5)
    if isinstance(x, Tensor):
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[d] = n
            x = V.reshape(x, tuple(shape))
        m = x._shape[d] if x.ndim == y.ndim else x._shape[-1]
        spacing = E.sub(V.narrow(x, d, 1, m - 1), V.narrow(x, d, 0, m - 1))
        return R.sum(E.mul(avg, spacing), d)
    step = x if x is not None else (1 if dx is None else dx)
    return E.mul(R.sum(avg, d), step)


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """``trapezoid`` (PyTorch's older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


# -- random sampling ------------------------------------------------------------------------------


def _uniform_like(x: Tensor, generator: Generator | None) -> Tensor:
    """Uniform [0, 1) draws of x's shape, in the widest float the device has."""
    from .creation import _empty, _wide_float, uniform_

    return uniform_(_empty(x._shape, _wide_float(x._device), x._device), generator=generator)


def _fill_with(x: Tensor, values: Tensor) -> Tensor:
    """Write drawn values into ``x`` (autograd sees a write of a constant)."""
    return E.copy_(x, cast(values, x._dtype))


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Generator | None = None,
           dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Normal draws with the given ``mean`` and ``std`` (tensors, broadcast, or
    floats with ``size``). Like PyTorch's, the draws carry no gradient."""
    from .creation import _empty, normal_
    from .core import ready_device

    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not tm and not ts:
        if size is None:
            raise TypeError("normal(): with float mean and std, size is required")
        shape = tuple(size) if isinstance(size, (list, tuple)) else (int(size),)
        dev = ready_device(device)
        dt = D.get_default_dtype() if dtype is None else D.as_dtype(dtype)
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        out = normal_(_empty(shape, dt, dev), float(mean), float(std), generator=generator)
        return out.requires_grad_() if requires_grad else out
    with no_grad():
        m = mean.detach() if tm else mean
        s = std.detach() if ts else std
        if ts:
            if bool(R.any(E.lt(s, 0)).item()):
                raise RuntimeError("normal expects all elements of std >= 0.0")
        elif s < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {s}")
        ref = m if tm else s
        if ref._dtype.kind != "f":
            raise RuntimeError(f"normal: expected a floating point mean/std, got {ref._dtype.name}")
        shape = broadcast_many(*(t._shape for t in (m, s) if isinstance(t, Tensor)))
        z = normal_(_empty(shape, ref._dtype, ref._device), 0.0, 1.0, generator=generator)
        return E.add(E.mul(z, s), m)


def bernoulli(input: Tensor, p: Any = None, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """0/1 draws (``input``'s dtype), 1 with probability ``input`` (or ``p``)."""
    x = _tensor("bernoulli", input)
    with no_grad():
        prob = x.detach() if p is None else p
        if isinstance(prob, Tensor):
            if prob.numel() and (bool(R.any(E.lt(prob, 0)).item()) or bool(R.any(E.gt(prob, 1)).item())):
                raise RuntimeError("bernoulli: expected all probabilities in [0, 1]")
        elif not 0 <= prob <= 1:
            raise RuntimeError(f"bernoulli_: expected p in [0, 1], but got p={prob}")
        u = _uniform_like(x, generator)
        return cast(E.lt(u, prob), x._dtype if x._dtype.kind == "f" else D.get_default_dtype())


def bernoulli_(input: Tensor, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """In place: 1 with probability ``p`` (a float or a tensor), else 0."""
    with no_grad():
        draws = bernoulli(input.detach(), p, generator=generator)
    return _fill_with(input, draws)


def random_(input: Tensor, from_: int = 0, to: int | None = None, *,  # noqa: A002
            generator: Generator | None = None, **kwargs: Any) -> Tensor:
    """In place: integers uniform in [from, to - 1]; ``random_(to)`` is
    [0, to - 1]; without ``to``, [0, 2**mantissa] for floats and [0, max] for
    integer dtypes, as in PyTorch."""
    import numpy as np

    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_() got unexpected keyword arguments {sorted(kwargs)}")
    x = _tensor("random_", input)
    if to is None and from_ != 0 and "from" not in kwargs:
        lo, hi = 0, int(from_)
    elif to is None:
        lo = 0
        if x._dtype.kind == "f":
            hi = 2 ** (np.finfo(x._dtype.numpy).nmant + 1) + 1
        elif x._dtype is D.bool_:
            hi = 2
        else:
            hi = int(np.iinfo(x._dtype.numpy).max) + 1
    else:
        lo, hi = int(from_), int(to)
    if lo >= hi:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
    with no_grad():
        u = _uniform_like(x, generator)
        v = E.add(E.floor(E.mul(u, float(hi - lo))), float(lo))
        v = E.minimum(v, E._full_like_scalar(v, float(hi - 1)))
    return _fill_with(x, v)


def _transform_(name: str, x: Tensor, generator: Generator | None, f: Any) -> Tensor:
    x = _tensor(name, x)
    if x._dtype.kind != "f":
        raise RuntimeError(f"{name} expects a floating point tensor, got {x._dtype.name}")
    with no_grad():
        v = f(_uniform_like(x, generator))
    return _fill_with(x, v)


def exponential_(input: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """In place: exponential draws with rate ``lambd`` (inverse CDF)."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _transform_("exponential_", input, generator,
                       lambda u: E.div(E.neg(E.log1p(E.neg(u))), float(lambd)))


def cauchy_(input: Tensor, median: float = 0.0, sigma: float = 1.0, *,  # noqa: A002
            generator: Generator | None = None) -> Tensor:
    """In place: Cauchy draws, ``median + sigma * tan(pi * (u - 1/2))``."""
    return _transform_("cauchy_", input, generator,
                       lambda u: E.add(E.mul(E.tan(E.mul(E.sub(u, 0.5), math.pi)), float(sigma)),
                                       float(median)))


def log_normal_(input: Tensor, mean: float = 1.0, std: float = 2.0, *,  # noqa: A002
                generator: Generator | None = None) -> Tensor:
    """In place: ``exp`` of normal draws with ``mean`` and ``std``."""
    from .creation import _empty, _wide_float, normal_

    x = _tensor("log_normal_", input)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    if x._dtype.kind != "f":
        raise RuntimeError(f"log_normal_ expects a floating point tensor, got {x._dtype.name}")
    with no_grad():
        z = normal_(_empty(x._shape, _wide_float(x._device), x._device), float(mean), float(std),
                    generator=generator)
        v = E.exp(z)
    return _fill_with(x, v)


def geometric_(input: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """In place: the number of Bernoulli(p) trials up to the first success (>= 1)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    x = _tensor("geometric_", input)
    with no_grad():
        u = _uniform_like(x, generator)
        v = E.maximum(E.ceil(E.div(E.log1p(E.neg(u)), math.log1p(-p))), E._full_like_scalar(u, 1.0))
    return _fill_with(x, v)


# -- in-place variants and tensor odds and ends ------------------------------------------------------


def _dim_key(x: Tensor, d: int, index: Tensor) -> tuple[Any, ...]:
    return (slice(None),) * d + (index,)


def _check_index_args(name: str, x: Tensor, dim: int, index: Tensor) -> int:
    if not isinstance(index, Tensor) or index._dtype.kind not in "iu":
        raise IndexError(f"{name}(): Expected a long tensor for index, but got "
                         f"{getattr(getattr(index, 'dtype', None), 'name', type(index).__name__)}")
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    return normalize_dim(dim, max(x.ndim, 1))


def index_copy_(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """In place: the slices of ``input`` along ``dim`` at ``index`` become
    ``source``'s slices."""
    x = _tensor("index_copy_", input)
    d = _check_index_args("index_copy_", x, dim, index)
    if x.ndim == 0:
        return E.copy_(x, V.reshape(source, ()))
    idx = V.reshape(cast(index, D.int64), (-1,))
    if source.ndim != x.ndim or source._shape[d] != idx._shape[0]:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes and "
                           f"the index must have as many entries as source has along dim {d}")
    I.setitem(x, _dim_key(x, d, idx), source)
    return x


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    return index_copy_(_tensor("index_copy", input).clone(), dim, index, source)


def index_fill_(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:  # noqa: A002
    """In place: the slices of ``input`` along ``dim`` at ``index`` are set to
    ``value`` (a number or a 0-d tensor)."""
    x = _tensor("index_fill_", input)
    d = _check_index_args("index_fill_", x, dim, index)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor "
                           f"with {value.ndim} dimension(s).")
    if x.ndim == 0:
        return E.fill_(x, value) if not isinstance(value, Tensor) else E.copy_(x, value)
    idx = V.reshape(cast(index, D.int64), (-1,))
    I.setitem(x, _dim_key(x, d, idx), value)
    return x


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:  # noqa: A002
    return index_fill_(_tensor("index_fill", input).clone(), dim, index, value)


def masked_scatter_(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """In place: where ``mask`` (broadcast to input) is True, the next elements
    of ``source`` in row-major order."""
    x = _tensor("masked_scatter_", input)
    if not isinstance(mask, Tensor) or mask._dtype is not D.bool_:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{getattr(getattr(mask, 'dtype', None), 'name', type(mask).__name__)}")
    if source._dtype is not x._dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got "
                           f"{x._dtype.name} and {source._dtype.name}")
    m = V.expand(mask, x._shape)
    with no_grad():
        n = int(R.sum(cast(m, D.int64)).item())
    if source.numel() < n:
        raise RuntimeError("masked_scatter: Number of elements of source < number of ones in mask")
    I.setitem(x, m, V.narrow(V.reshape(source, (-1,)), 0, 0, n))
    return x


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    x = _tensor("masked_scatter", input)
    shape = broadcast_many(x._shape, mask._shape)
    return masked_scatter_(V.expand(x, shape).clone(), mask, source)


def fill_diagonal_(input: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:  # noqa: A002
    """In place: the main diagonal (all indices equal) set to ``fill_value``;
    for a tall matrix with ``wrap=True`` it restarts every ``cols + 1`` rows,
    as NumPy's ``fill_diagonal`` does."""
    from .creation import as_tensor_on

    x = _tensor("fill_diagonal_", input)
    if x.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if x.ndim > 2 and len(set(x._shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if x.ndim == 2:
        rows, cols = x._shape
        if wrap and rows > cols + 1:
            flat = list(range(0, rows * cols, cols + 1))
            coords = [[p // cols for p in flat], [p % cols for p in flat]]
        else:
            coords = [list(range(min(rows, cols)))] * 2
    else:
        coords = [list(range(x._shape[0]))] * x.ndim
    key = tuple(as_tensor_on(c, x._device, D.int64) for c in coords)
    I.setitem(x, key, fill_value)
    return x


def tril_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    return E.copy_(input, I.tril(input, diagonal))


def triu_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    return E.copy_(input, I.triu(input, diagonal))


def _relayout_(name: str, x: Tensor, view: Any) -> Tensor:
    """Give ``x`` the layout of ``view(x)`` in place (``t_``, ``unsqueeze_``, ...).
    As in PyTorch, refused on a leaf that requires grad; in a graph, ``x`` then
    continues from the view's node."""
    from ..autograd.grad_mode import is_grad_enabled

    x = _tensor(name, x)
    m = x._ag
    if m is not None and m.requires_grad and m.grad_fn is None and is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    v = view(x)
    x._shape, x._strides, x._offset = v._shape, v._strides, v._offset
    x._h = None
    if v._ag is not None and m is not None:
        x._ag = v._ag
    return x


def squeeze_(input: Tensor, dim: Any = None) -> Tensor:  # noqa: A002
    return _relayout_("squeeze_", input, lambda x: V.squeeze(x, dim))


def unsqueeze_(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    return _relayout_("unsqueeze_", input, lambda x: V.unsqueeze(x, dim))


def t_(input: Tensor) -> Tensor:  # noqa: A002
    return _relayout_("t_", input, V.t)


def transpose_(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    return _relayout_("transpose_", input, lambda x: V.transpose(x, dim0, dim1))


def ndimension(input: Tensor) -> int:  # noqa: A002
    """The number of dims (PyTorch's older name for ``dim()``)."""
    return input.ndim


def is_cuda(input: Tensor) -> bool:  # noqa: A002
    return input._device.type == "cuda"


def pin_memory(input: Tensor, device: Any = None) -> Tensor:  # noqa: A002
    """The tensor itself: rtxcore's cpu tensors live in ordinary host memory and
    every backend copies from it directly, so there is no page-locked copy to
    make. Only cpu tensors can be pinned, as in PyTorch."""
    if input._device.type != "cpu":
        raise RuntimeError(f"cannot pin '{input.type()}' only dense CPU tensors can be pinned")
    return input


def is_pinned(input: Tensor, device: Any = None) -> bool:  # noqa: A002
    """False: no tensor lives in page-locked memory (see ``pin_memory``)."""
    return False


def share_memory_(input: Tensor) -> Tensor:  # noqa: A002
    """The tensor itself: rtxcore runs in one process, so there is nothing to
    move to shared memory (``multiprocessing`` children get pickled copies)."""
    return input


def is_shared(input: Tensor) -> bool:  # noqa: A002
    return False


# function names bound as Tensor methods (rtxcore/tensor.py)
METHODS = [
    "atan", "arctan", "asin", "arcsin", "acos", "arccos", "asinh", "arcsinh", "acosh", "arccosh",
    "atanh", "arctanh", "erfc", "erfinv", "atan2", "arctan2", "hypot", "logaddexp", "sinh", "cosh",
    "frac", "fmod", "logit", "xlogy", "clamp_min", "clamp_max", "clamp_min_", "clamp_max_",
    "heaviside", "bitwise_and", "bitwise_or", "bitwise_xor", "cummax", "cummin", "median",
    "nanmedian", "kthvalue", "mode", "quantile", "nanquantile", "nansum", "nanmean", "bincount",
    "histc", "take", "put", "put_", "fliplr", "flipud", "rot90", "trace", "cross", "kron", "dist",
    "diff", "addmm", "addmv", "baddbmm", "addbmm", "addr", "bernoulli", "bernoulli_", "random_",
    "exponential_", "cauchy_", "log_normal_", "geometric_", "index_copy_", "index_copy",
    "index_fill_", "index_fill", "masked_scatter_", "masked_scatter", "fill_diagonal_", "tril_",
    "triu_", "squeeze_", "unsqueeze_", "t_", "transpose_", "ndimension", "pin_memory", "is_pinned",
    "share_memory_", "is_shared",
]
# in-place methods for the elementwise functions above
for _n in ("atan", "asin", "acos", "asinh", "acosh", "atanh", "erfc", "erfinv", "atan2", "hypot",
           "sinh", "cosh", "frac", "fmod", "logit", "xlogy", "bitwise_and", "bitwise_or",
           "bitwise_xor", "arctan", "arcsin", "arccos", "arctan2"):
    def _inplace(input: Tensor, *args: Any, _f: Any = globals()[_n], **kwargs: Any) -> Tensor:  # noqa: A002
        return E.copy_(input, _f(input, *args, **kwargs))

    _inplace.__name__ = _inplace.__qualname__ = _n + "_"
    _inplace.__doc__ = f"In-place version of :func:`{_n}`."
    globals()[_n + "_"] = _inplace
    METHODS.append(_n + "_")
del _n

# top-level functions (rtxcore/__init__.py)
FUNCTIONS = [n for n in METHODS if not n.endswith("_") and n not in (
    "ndimension", "pin_memory", "is_pinned", "is_shared", "put")] + [
    "put", "searchsorted", "bucketize", "triu_indices", "tril_indices", "broadcast_tensors",
    "atleast_1d", "atleast_2d", "atleast_3d", "dstack", "column_stack", "block_diag", "normal",
    "trapezoid", "trapz", "index_copy", "index_fill", "masked_scatter", "clamp_min_", "clamp_max_",
]


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcast),
    each norm clamped to at least ``eps``, as PyTorch computes it."""
    a, b = broadcast_tensors(_tensor("cosine_similarity", x1), _tensor("cosine_similarity", x2))
    a, b = E._float(a), E._float(b)
    na = E.clamp(R.norm(a, 2, dim, True), min=float(eps))
    nb = E.clamp(R.norm(b, 2, dim, True), min=float(eps))
    return R.sum(E.mul(E.div(a, na), E.div(b, nb)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of ``x1 - x2 + eps`` along the last dim."""
    d = E.add(E.sub(_tensor("pairwise_distance", x1), _tensor("pairwise_distance", x2)), float(eps))
    return R.norm(d, p, -1 if d.ndim else None, keepdim)


FUNCTIONS += ["cosine_similarity", "pairwise_distance"]
