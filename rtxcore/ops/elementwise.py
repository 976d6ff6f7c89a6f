"""Elementwise ops: the primitive front-ends, then composites built from them.

A composite first asks the device for a kernel of its own name (a backend may
supply ``expm1`` for accuracy or ``sigmoid`` for speed); otherwise the
decomposition below runs, written only in primitives.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtype as D
from ..dispatch import ops as OPS
from ..tensor import Tensor
from .core import (FLOAT, SAME, TO_BOOL, bad_operand, binary, cast, empty, is_scalar,
                   kernel, scalar_for, unary, view_of, write_result)
from .core import own_kernel
from .core import where as _core_where
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.tape import differentiable, inplace

# Each op's facts (result kind, in-place twin, aliases) come from its OpSpec.
_SPECS = {**OPS.PRIMITIVES, **OPS.COMPOSITES}
_KIND = {"same": SAME, "float": FLOAT, "bool": TO_BOOL}


def _k(op: str) -> int:
    """What ``unary``/``binary`` make of integer inputs for ``op``: its OpSpec's result kind."""
    return _KIND[_SPECS[op].result]


# -- primitives ----------------------------------------------------------------------


@differentiable("neg")
def neg(x: Tensor) -> Tensor:
    if x._dtype is D.bool_:
        raise RuntimeError("negation, the `-` operator, on a bool tensor is not supported; use ~ or logical_not()")
    return unary("neg", x, _k("neg"))


@differentiable("abs")
def abs(x: Tensor) -> Tensor:  # noqa: A001
    return unary("abs", x, _k("abs"))


@differentiable("sign")
def sign(x: Tensor) -> Tensor:
    if isinstance(x, Tensor) and x._dtype is D.bool_:
        return x.clone()  # PyTorch: the sign of a bool is itself
    return unary("sign", x, _k("sign"))


@differentiable("exp")
def exp(x: Tensor) -> Tensor:
    return unary("exp", x, _k("exp"))


@differentiable("log")
def log(x: Tensor) -> Tensor:
    return unary("log", x, _k("log"))


@differentiable("sqrt")
def sqrt(x: Tensor) -> Tensor:
    return unary("sqrt", x, _k("sqrt"))


@differentiable("sin")
def sin(x: Tensor) -> Tensor:
    return unary("sin", x, _k("sin"))


@differentiable("cos")
def cos(x: Tensor) -> Tensor:
    return unary("cos", x, _k("cos"))


@differentiable("tanh")
def tanh(x: Tensor) -> Tensor:
    return unary("tanh", x, _k("tanh"))


@differentiable("reciprocal")
def reciprocal(x: Tensor) -> Tensor:
    return unary("reciprocal", x, _k("reciprocal"))


@differentiable("floor")
def floor(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return x.clone()
    return unary("floor", x, _k("floor"))


def logical_not(x: Tensor) -> Tensor:
    return unary("logical_not", x, _k("logical_not"))


def _scaled(x: Any, y: Any, alpha: Any) -> Any:
    """``alpha * y`` for add/sub's ``alpha=``; a float alpha needs float operands."""
    if isinstance(alpha, float) and all(
        (isinstance(v, Tensor) and v._dtype.kind != "f") or isinstance(v, int) for v in (x, y)
    ):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return mul(y, alpha) if isinstance(y, Tensor) else y * alpha  # (a Python number)


@differentiable("add", inputs=2)
def add(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    return binary("add", x, y, _k("add"))


@differentiable("sub", inputs=2)
def sub(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    if _is_bool(x) or _is_bool(y):
        raise RuntimeError("subtraction, the `-` operator, with a bool tensor is not supported; use logical_xor()")
    return binary("sub", x, y, _k("sub"))


@differentiable("mul", inputs=2)
def mul(x: Any, y: Any) -> Tensor:
    return binary("mul", x, y, _k("mul"))


@differentiable("div", inputs=2)
def div(x: Any, y: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return binary("div", x, y, _k("div"))
    if rounding_mode == "floor":
        return floor_divide(x, y)
    if rounding_mode == "trunc":
        if _all_int(x, y):
            q = floor_divide(x, y)
            r = remainder(x, y)
            # floor and trunc differ where the signs differ and the division is inexact
            def negative(v: Any) -> Any:
                return lt(v, 0) if isinstance(v, Tensor) else v < 0

            fix = logical_and(ne(r, 0), ne(negative(x), negative(y)))
            return _where(fix, add(q, 1), q)
        return trunc(binary("div", x, y, _k("div")))
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")


@differentiable("pow", inputs=2)
def pow(x: Any, y: Any) -> Tensor:  # noqa: A001
    if _is_bool(x) and isinstance(y, bool):  # PyTorch: x ** True is x, x ** False is all True
        return x.clone() if y else _full_bool(x, True)
    if all(_is_bool(v) or isinstance(v, bool) for v in (x, y)):
        raise RuntimeError("\"pow\" not implemented for 'Bool'")  # (as in PyTorch)
    if isinstance(x, Tensor) and x._dtype.kind != "f" and is_scalar(y) and not isinstance(y, float) and y < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if (isinstance(x, Tensor) and is_scalar(y) and y == 2 and not isinstance(y, bool)
            and (x._dtype.kind == "f" or (x._dtype.kind in "iu" and not isinstance(y, float)))):
        return binary("mul", x, x)  # int ** 2.0 must still promote to float
    return binary("pow", x, y, _k("pow"))


@differentiable("maximum", inputs=2)
def maximum(x: Tensor, y: Tensor) -> Tensor:
    return binary("maximum", x, y, _k("maximum"))


@differentiable("minimum", inputs=2)
def minimum(x: Tensor, y: Tensor) -> Tensor:
    return binary("minimum", x, y, _k("minimum"))


def eq(x: Any, y: Any) -> Tensor:
    return binary("eq", x, y, _k("eq"))


def ne(x: Any, y: Any) -> Tensor:
    return binary("ne", x, y, _k("ne"))


def lt(x: Any, y: Any) -> Tensor:
    return binary("lt", x, y, _k("lt"))


def le(x: Any, y: Any) -> Tensor:
    return binary("le", x, y, _k("le"))


def gt(x: Any, y: Any) -> Tensor:
    return binary("gt", x, y, _k("gt"))


def ge(x: Any, y: Any) -> Tensor:
    return binary("ge", x, y, _k("ge"))


def logical_and(x: Any, y: Any) -> Tensor:
    return binary("logical_and", x, y, _k("logical_and"))


def logical_or(x: Any, y: Any) -> Tensor:
    return binary("logical_or", x, y, _k("logical_or"))


@differentiable("where", inputs=3)
def _where(condition: Tensor, x: Any, y: Any) -> Tensor:
    return _core_where(condition, x, y)


def where(condition: Tensor, input: Any = None, other: Any = None) -> Any:  # noqa: A002
    if input is None and other is None:
        from .indexing import nonzero

        return nonzero(condition, as_tuple=True)
    return _where(condition, input, other)


# -- composites ----------------------------------------------------------------------
# Each: the backend's own kernel if it has one, else the decomposition.


def _composite_unary(op: str, x: Tensor) -> Tensor | None:
    if not isinstance(x, Tensor):
        raise bad_operand(op, x)
    if own_kernel(x._device, op, x._dtype):
        return unary(op, x, _k(op))
    return None


@differentiable("expm1")
def expm1(x: Tensor) -> Tensor:
    r = _composite_unary("expm1", x)
    if r is not None:
        return r
    x = _float(x)
    if x._dtype is D.float16:  # in float32, rounded once: float16's exp is too coarse
        return cast(expm1(cast(x, D.float32)), D.float16)
    # Kahan: (u - 1) * x / log(u) keeps full precision where u = e**x rounds to 1;
    # x / log(u) first, so (u - 1) * x can't overflow where the result doesn't
    u = exp(x)
    um1 = sub(u, 1.0)
    accurate = mul(um1, div(x, log(u)))
    return _where(eq(u, 1.0), x, _where(eq(um1, -1.0), -1.0, _where(isinf(u), u, accurate)))


@differentiable("log1p")
def log1p(x: Tensor) -> Tensor:
    r = _composite_unary("log1p", x)
    if r is not None:
        return r
    x = _float(x)
    if x._dtype is D.float16:  # in float32, rounded once
        return cast(log1p(cast(x, D.float32)), D.float16)
    # Goldberg: log(u) * x / (u - 1) with u = 1 + x cancels u's rounding error;
    # x / (u - 1) first, so log(u) * x can't overflow
    u = add(x, 1.0)
    accurate = mul(log(u), div(x, sub(u, 1.0)))
    return _where(eq(u, 1.0), x, _where(eq(u, math.inf), u, accurate))  # log1p(-inf) is nan


@differentiable("log2")
def log2(x: Tensor) -> Tensor:
    r = _composite_unary("log2", x)
    return r if r is not None else mul(log(x), 1.0 / math.log(2.0))


def log10(x: Tensor) -> Tensor:
    return mul(log(x), 1.0 / math.log(10.0))


def rsqrt(x: Tensor) -> Tensor:
    return reciprocal(sqrt(x))


def square(x: Tensor) -> Tensor:
    return mul(x, x)


@differentiable("tan")
def tan(x: Tensor) -> Tensor:
    r = _composite_unary("tan", x)
    return r if r is not None else div(sin(x), cos(x))


@differentiable("sigmoid")
def sigmoid(x: Tensor) -> Tensor:
    r = _composite_unary("sigmoid", x)
    if r is not None:
        return r
    # 1 / (1 + e**-x): e**-x overflowing to inf gives exactly 0, never nan.
    return reciprocal(add(exp(neg(_float(x))), 1.0))


@differentiable("relu")
def relu(x: Tensor) -> Tensor:
    if x._dtype is D.bool_:
        return x.clone()
    if x._dtype.kind == "f":
        return binary("maximum", x, 0.0)  # the float-scalar fast path: one kernel call
    return binary("maximum", x, zeros_scalar_like(x))


def zeros_scalar_like(x: Tensor) -> Tensor:
    """A 0-d zero of x's dtype on x's device (keeps maximum's dtype exact)."""
    t = empty((), x._dtype, x._device)
    kernel(x._device, "full")(t._h, scalar_for(0, x._dtype))
    return t


@differentiable("erf")
def erf(x: Tensor) -> Tensor:
    r = _composite_unary("erf", x)
    if r is not None:
        return r
    x = _float(x)
    wide = D.float64 if x._device.supports(D.float64) else D.float32
    if x._dtype is not wide and x._dtype.itemsize < wide.itemsize:
        return cast(erf(cast(x, wide)), x._dtype)  # the series cancels: work wider
    # Two expansions, each where it converges fast, term counts set for the dtype
    # (max error measured against math.erf: 1.5e-15 float64, 2e-8 float32):
    # the Maclaurin series for |x| < split; for |x| >= split, erfc's continued
    # fraction, evaluated bottom-up.
    nser, ncf, split = (30, 45, 1.8) if x._dtype is D.float64 else (20, 20, 2.0)
    x2 = mul(x, x)
    term, acc = x, x
    for n in range(1, nser):
        term = mul(term, div(neg(x2), float(n)))
        acc = add(acc, div(term, float(2 * n + 1)))
    series = mul(acc, 2.0 / math.sqrt(math.pi))
    z = maximum(abs(x), _full_like_scalar(x, split))  # the fraction only where it converges
    f = z
    for k in range(ncf, 0, -1):
        f = add(z, div(k / 2.0, f))
    erfc = div(mul(exp(neg(mul(z, z))), 1.0 / math.sqrt(math.pi)), f)
    tail = mul(sub(1.0, erfc), sign(x))
    return _where(lt(abs(x), split), series, tail)


def _full_like_scalar(x: Tensor, value: float) -> Tensor:
    t = empty((), x._dtype, x._device)
    kernel(x._device, "full")(t._h, scalar_for(value, x._dtype))
    return t


@differentiable("gelu")
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x), or the tanh approximation; recorded as one node (its rule is
    ``gelu_backward``), one kernel where the backend has ``gelu``."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    x = _float(x)
    k = own_kernel(x._device, "gelu", x._dtype)
    if k is not None:
        out = empty(x._shape, x._dtype, x._device)
        k(out._h, view_of(x), approximate)
        return out
    if approximate == "tanh":
        inner = mul(add(x, mul(mul(mul(x, x), x), 0.044715)), math.sqrt(2.0 / math.pi))
        return mul(mul(x, 0.5), add(tanh(inner), 1.0))
    return mul(mul(x, 0.5), add(erf(mul(x, 1.0 / math.sqrt(2.0))), 1.0))


def gelu_backward(g: Tensor, x: Tensor, approximate: str = "none",
                  y: Tensor | None = None) -> Tensor:
    """``g * gelu'(x)``, given ``y = gelu(x)`` (it saves the backend's kernel the
    erf or tanh): one kernel where the backend has ``gelu_backward`` and nothing
    records; otherwise recorded ops of ``x`` alone (so it differentiates again)."""
    x = _float(x)
    if (not _grad_state.enabled and y is not None and g._dtype is x._dtype
            and y._dtype is x._dtype and g._shape == x._shape == y._shape):
        k = own_kernel(x._device, "gelu_backward", x._dtype)
        if k is not None:
            out = empty(x._shape, x._dtype, x._device)
            k(out._h, view_of(g), view_of(x), view_of(y), approximate)
            return out
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        x2 = mul(x, x)
        t = tanh(mul(add(x, mul(mul(x2, x), 0.044715)), c))
        dinner = mul(add(mul(x2, 3 * 0.044715), 1.0), c)
        d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), dinner))
        return mul(g, d)
    cdf = mul(add(erf(mul(x, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
    pdf = mul(exp(mul(mul(x, x), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
    return mul(g, add(cdf, mul(x, pdf)))


def silu(x: Tensor) -> Tensor:
    return mul(x, sigmoid(x))


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    x = _float(x)
    bx = mul(x, beta) if beta != 1 else x
    linear = gt(bx, threshold)
    # exp only where its result is used: exp(bx) = inf past ~88 would make the
    # backward 0 * inf = nan there, though the output there is x
    soft = log1p(exp(_where(linear, 0.0, bx)))
    if beta != 1:
        soft = div(soft, beta)
    return _where(linear, x, soft)


@differentiable("ceil")
def ceil(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return x.clone()
    r = _composite_unary("ceil", x)
    return r if r is not None else neg(floor(neg(x)))


@differentiable("trunc")
def trunc(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return x.clone()
    r = _composite_unary("trunc", x)
    return r if r is not None else _where(lt(x, 0), ceil(x), floor(x))


@differentiable("round")
def round(x: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001
    if x._dtype.kind != "f":
        return x.clone()
    if decimals:
        scale = 10.0 ** decimals
        return div(round(mul(x, scale)), scale)
    r = _composite_unary("round", x)
    if r is not None:
        return r
    # half to even: floor(x + 0.5), minus one where that landed on an odd number
    # from an exact tie.
    f = floor(add(x, 0.5))
    tie = eq(sub(f, x), 0.5)
    odd = ne(sub(f, mul(floor(mul(f, 0.5)), 2.0)), 0)
    r = _where(logical_and(tie, odd), sub(f, 1.0), f)
    r = _where(eq(r, 0), mul(x, 0.0), r)  # a zero keeps x's sign (round(-0.4) is -0.0)
    # from 2**mantissa_bits on every float is an integer (and x + 0.5 would round)
    big = {2: 2.0**10, 4: 2.0**23, 8: 2.0**52}[x._dtype.itemsize]
    return _where(ge(abs(x), big), x, r)


@differentiable("clamp")
def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    out = x
    if min is not None:
        out = binary("maximum", out, min)
    if max is not None:
        out = binary("minimum", out, max)
    if out is x:
        out = x.clone()
    return out


clip = clamp


def lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    # PyTorch's two-sided form: exact at both ends (weight 0 gives start, 1 gives end)
    diff = sub(end, start)
    if not isinstance(weight, Tensor):
        return add(start, mul(diff, weight)) if weight < 0.5 else sub(end, mul(diff, 1.0 - weight))
    return _where(lt(abs(weight), 0.5), add(start, mul(weight, diff)),
                  sub(end, mul(diff, sub(1.0, weight))))


def _check_int_divisor(x: Any, y: Any) -> None:
    """Integer division by zero raises, as in PyTorch (it has no inf to give)."""
    if _all_int(x, y):
        zero = (y == 0) if not isinstance(y, Tensor) else bool(any_nonzero(eq(y, 0)))
        if zero:
            raise RuntimeError("ZeroDivisionError: integer division or modulo by zero")


def any_nonzero(t: Tensor) -> bool:
    from .reduction import any as _any

    return bool(_any(t).item()) if t.numel() else False


@differentiable("floor_divide", inputs=2)
def floor_divide(x: Any, y: Any) -> Tensor:
    dev = (x if isinstance(x, Tensor) else y)._device
    _check_int_divisor(x, y)
    if own_kernel(dev, "floor_divide", lambda: D.result_type(x, y)):
        return binary("floor_divide", x, y)
    if _all_int(x, y):
        return _int_floor_divide(x, y, dev)
    return floor(div(x, y))


def _int_floor_divide(x: Any, y: Any, dev: Any) -> Tensor:
    """Exact integer floor division from primitives: a floating-point estimate of
    the quotient, refined with exact integer remainders until it is right."""
    from .creation import as_tensor_on

    dt = _result(x, y)
    # a scalar first becomes the result dtype (uint8 // -3 divides by 253), as in binary()
    xt, yt = (cast(v, dt) if isinstance(v, Tensor) else as_tensor_on(scalar_for(v, dt), dev, dt)
              for v in (x, y))
    wide = D.float64 if dev.supports(D.float64) else D.float32
    yw = cast(yt, wide)

    def estimate(num: Tensor) -> Tensor:
        return cast(floor(div(cast(num, wide), yw)), dt)

    q = estimate(xt)
    # each pass shrinks the quotient's error by the float's precision (24 or 53 bits)
    bits = dt.itemsize * 8
    passes = 0 if bits <= (53 if wide is D.float64 else 24) else (1 if wide is D.float64 else 2)
    for _ in range(passes):
        q = add(q, estimate(sub(xt, mul(q, yt))))
    # last, exact: move q by one where the remainder left [0, y) (or (y, 0] for y < 0)
    r = sub(xt, mul(q, yt))
    pos = gt(yt, 0)
    too_big = _where(pos, ge(r, yt), le(r, yt))
    too_small = _where(pos, lt(r, 0), gt(r, 0))
    q = add(q, cast(too_big, dt))
    return sub(q, cast(too_small, dt))


@differentiable("remainder", inputs=2)
def remainder(x: Any, y: Any) -> Tensor:
    dev = (x if isinstance(x, Tensor) else y)._device
    _check_int_divisor(x, y)
    if own_kernel(dev, "remainder", lambda: D.result_type(x, y)):
        return binary("remainder", x, y)
    # Python's (and PyTorch's) sign convention: the result has the divisor's sign.
    return sub(x, mul(floor_divide(x, y), y))


def logical_xor(x: Any, y: Any) -> Tensor:
    dev = (x if isinstance(x, Tensor) else y)._device
    if own_kernel(dev, "logical_xor", lambda: D.result_type(x, y)):
        return binary("logical_xor", x, y, _k("logical_xor"))
    return ne(_as_bool(x), _as_bool(y))


def isnan(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return _full_bool(x, False)
    r = _composite_unary("isnan", x)
    return r if r is not None else ne(x, x)


def isinf(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return _full_bool(x, False)
    r = _composite_unary("isinf", x)
    return r if r is not None else eq(abs(x), math.inf)


def isfinite(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return _full_bool(x, True)
    # x - x is 0 for finite x and nan for inf and nan
    return eq(sub(x, x), 0.0)


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    if x._dtype.kind != "f":
        return x.clone()
    import numpy as np

    info = np.finfo(x._dtype.numpy)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    out = _where(isnan(x), nan, x)
    out = _where(eq(out, math.inf), hi, out)
    return _where(eq(out, -math.inf), lo, out)


def bitwise_not(x: Tensor) -> Tensor:
    if x._dtype is D.bool_:
        return logical_not(x)
    raise NotImplementedError("~ is supported on bool tensors only (bitwise ops on integers are not implemented)")


def logical_and_bitwise(x: Any, y: Any) -> Tensor:
    _check_bool_operands("&", x, y)
    return logical_and(x, y)


def logical_or_bitwise(x: Any, y: Any) -> Tensor:
    _check_bool_operands("|", x, y)
    return logical_or(x, y)


def logical_xor_bitwise(x: Any, y: Any) -> Tensor:
    _check_bool_operands("^", x, y)
    return logical_xor(x, y)


def _check_bool_operands(sym: str, x: Any, y: Any) -> None:
    for v in (x, y):
        if (isinstance(v, Tensor) and v._dtype is not D.bool_) or (not isinstance(v, Tensor) and not isinstance(v, bool)):
            raise NotImplementedError(f"{sym} is supported on bool tensors only (bitwise ops on integers are not implemented)")


# -- in place ----------------------------------------------------------------------
# Primitive binary ops write straight into the target; others compute and copy back.


@inplace(add, inputs=1)
def add_(x: Tensor, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    return binary("add", x, y, _k("add"), out=x)


@inplace(sub, inputs=1)
def sub_(x: Tensor, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    return binary("sub", x, y, _k("sub"), out=x)


@inplace(mul, inputs=1)
def mul_(x: Tensor, y: Any) -> Tensor:
    return binary("mul", x, y, _k("mul"), out=x)


@inplace(div, inputs=1)
def div_(x: Tensor, y: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return binary("div", x, y, _k("div"), out=x)
    return write_result(x, div(x, y, rounding_mode=rounding_mode), "div")


@inplace(pow, inputs=1)
def pow_(x: Tensor, y: Any) -> Tensor:
    return write_result(x, pow(x, y), "pow")


@inplace(maximum, inputs=1)
def maximum_(x: Tensor, y: Any) -> Tensor:
    return binary("maximum", x, y, _k("maximum"), out=x)


@inplace(minimum, inputs=1)
def minimum_(x: Tensor, y: Any) -> Tensor:
    return binary("minimum", x, y, _k("minimum"), out=x)


@inplace(floor_divide, inputs=1)
def floor_divide_(x: Tensor, y: Any) -> Tensor:
    return write_result(x, floor_divide(x, y), "floor_divide")


@inplace(remainder, inputs=1)
def remainder_(x: Tensor, y: Any) -> Tensor:
    return write_result(x, remainder(x, y), "remainder")


@inplace(clamp, inputs=2)
def clamp_(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    return write_result(x, clamp(x, min, max), "clamp")


clip_ = clamp_


@inplace(lerp, inputs=2)
def lerp_(x: Tensor, end: Tensor, weight: Any) -> Tensor:
    return write_result(x, lerp(x, end, weight), "lerp")


def zero_(x: Tensor) -> Tensor:
    return fill_(x, 0)


@differentiable("fill")
def _filled(x: Tensor, value: Any) -> Tensor:
    """``x.fill_(value)``'s result, out of place (what autograd records)."""
    return fill_.raw(x.clone(), value)


@inplace(_filled, inputs=0)
def fill_(x: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        if value.numel() != 1 or value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions")
        value = value.item()
    kernel(x._device, "full")(view_of(x), scalar_for(value, x._dtype, strict=True))
    x._storage.version += 1
    return x


def _make_inplace(fn: Any, name: str) -> Any:
    def op_(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return write_result(x, fn(x, *args, **kwargs), name)

    op_.__name__ = name + "_"
    op_.__doc__ = f"In-place version of :func:`{name}`."
    return inplace(fn, inputs=1)(op_)


# the other in-place twins: compute, then write back. Those of the OpSpecs (the
# binary primitives above write straight through their kernel), and of the ops
# built here without a kernel of their own.
_WRITE_BACK_INPLACE = [
    *(spec.name for spec in _SPECS.values() if spec.inplace and spec.inplace not in globals()),
    "rsqrt", "relu", "nan_to_num", "square",
]
for _n in _WRITE_BACK_INPLACE:
    globals()[_n + "_"] = _make_inplace(globals()[_n], _n)


@differentiable("copy", inputs=2)
def _copied(x: Tensor, src: Any) -> Tensor:
    """``x.copy_(src)``'s result, out of place (what autograd records)."""
    return copy_.raw(x.clone(), src)


@inplace(_copied, inputs=1)
def copy_(x: Tensor, src: Any) -> Tensor:
    """Copy ``src`` into ``x`` (broadcast, cast, and across devices)."""
    from .creation import as_tensor_on

    if not isinstance(src, Tensor):
        src = as_tensor_on(src, x._device, x._dtype)
    if src._device is not x._device:
        src = src.to(x._device)
    return write_result(x, src, "copy", allow_any_cast=True)


# -- helpers ------------------------------------------------------------------------


def eq_operator(x: Tensor, y: Any) -> Any:
    """``x == y``: elementwise, but ``x == None`` (or another non-number) is False."""
    if y is None or not (isinstance(y, Tensor) or is_scalar(y) or hasattr(y, "__array__")):
        return False
    return eq(x, y)


def ne_operator(x: Tensor, y: Any) -> Any:
    if y is None or not (isinstance(y, Tensor) or is_scalar(y) or hasattr(y, "__array__")):
        return True
    return ne(x, y)


def where_method(x: Tensor, condition: Tensor, other: Any) -> Tensor:
    """``x.where(condition, other)``: x where condition, else other."""
    return _where(condition, x, other)


def _is_bool(v: Any) -> bool:
    return isinstance(v, Tensor) and v._dtype is D.bool_


def _all_int(x: Any, y: Any) -> bool:
    return all(
        (v._dtype.kind in "iub") if isinstance(v, Tensor) else not isinstance(v, float)
        for v in (x, y)
    )


def _result(x: Any, y: Any) -> D.DType:
    return D.result_type(x, y)


def _float(x: Tensor) -> Tensor:
    return x if x._dtype.kind == "f" else cast(x, D.get_default_dtype())


def _cast_any(v: Any, dt: D.DType) -> Any:
    return cast(v, dt) if isinstance(v, Tensor) else float(v)


def _as_bool(v: Any) -> Any:
    return cast(v, D.bool_) if isinstance(v, Tensor) else bool(v)


def _full_bool(x: Tensor, value: bool) -> Tensor:
    out = empty(x._shape, D.bool_, x._device)
    kernel(x._device, "full")(out._h, value)
    return out


# the aliases the OpSpecs name (true_divide for div, less for lt, ...)
for _spec in _SPECS.values():
    for _alias in _spec.aliases:
        if _spec.name in globals() and _alias not in globals():
            globals()[_alias] = globals()[_spec.name]

# the elementwise ops with an OpSpec, whose front-end (and tensor method) is here
_OWN = [n for n, sp in _SPECS.items() if sp.family in ("unary", "binary", "compare") and n in globals()]
METHODS = [
    *_OWN,
    *(a for n in _OWN for a in _SPECS[n].aliases if a in globals()),
    *(_SPECS[n].inplace for n in _OWN if _SPECS[n].inplace),
    "log10", "rsqrt", "relu", "square", "isfinite", "nan_to_num", "clamp", "clip", "lerp",
    "clamp_", "clip_", "lerp_", "zero_", "fill_", "copy_",
    *(n + "_" for n in ("rsqrt", "relu", "nan_to_num", "square")),
]
