"""Pointwise math composed from the primitives (``expm1``, ``log1p``, ``erf``, ``sigmoid``,
``gelu``, ``softplus``, ``clamp``, ``lerp``, ``fmod``, ``addcmul``, ...), and the
elementwise namespace: ``rtxcore.ops.elementwise`` also re-exports the primitives
(rtxcore/ops/arithmetic.py) and the elementwise comparisons
(rtxcore/ops/comparison.py), and lists the Tensor methods of them all.

A composite first asks the device for a kernel of its own name (a backend may
supply ``expm1`` for accuracy or ``sigmoid`` for speed); otherwise the
decomposition below runs, written only in primitives.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from .. import dtype as D
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.tape import differentiable, inplace, quiet
from ..shape import broadcast_many
from ..tensor import Tensor
from .arithmetic import (_SPECS, _all_int, _as_bool, _cast_any, _composite_unary, _float,  # noqa: F401
                         _full_bool, _full_like_scalar, _is_bool, _k, _result, _where, abs, abs_,
                         add, add_, any_nonzero, ceil, ceil_, copy_, copy_back_twins, cos, cos_, div,
                         div_, eq, exp, exp_, fill_, floor, floor_, floor_divide, floor_divide_, ge,
                         gt, le, log, log_, logical_and, logical_and_, logical_not, logical_not_,
                         logical_or, logical_or_, lt, maximum, maximum_, minimum, minimum_, mul,
                         mul_, ne, neg, neg_, pow, pow_, reciprocal, reciprocal_, remainder,
                         remainder_, round, round_, sign, sign_, sin, sin_, sqrt, sqrt_, sub, sub_,
                         tanh, tanh_, trunc, trunc_, write_back_twins, zero_, zeros_scalar_like)
from .comparison import (bitwise_not, eq_operator, isfinite, isinf, isnan, logical_and_bitwise,  # noqa: F401
                         logical_or_bitwise, logical_xor, logical_xor_, logical_xor_bitwise,
                         ne_operator)
from .core import binary, binary_op, cast, empty, own_kernel, tensor_arg, view_of, write_result


# -- composites ----------------------------------------------------------------------
# Each: the backend's own kernel if it has one, else the decomposition.


def _kernel_or_float32(op: str, x: Tensor, fn: Any) -> tuple[Tensor | None, Tensor]:
    """(the result, x) when the backend has its own kernel for ``op``, or when ``x``
    is float16: computed in float32 by ``fn`` and rounded once (float16's exp and
    log are too coarse for the decompositions); else (None, x as a float tensor),
    for the caller to decompose."""
    r = _composite_unary(op, x)
    if r is not None:
        return r, x
    x = _float(x)
    if x._dtype is D.float16:
        return cast(fn(cast(x, D.float32)), D.float16), x
    return None, x


@differentiable("expm1")
def expm1(x: Tensor) -> Tensor:
    r, x = _kernel_or_float32("expm1", x, expm1)
    if r is not None:
        return r
    # Kahan: (u - 1) * x / log(u) keeps full precision where u = e**x rounds to 1;
    # x / log(u) first, so (u - 1) * x can't overflow where the result doesn't
    u = exp(x)
    um1 = sub(u, 1.0)
    accurate = mul(um1, div(x, log(u)))
    return _where(eq(u, 1.0), x, _where(eq(um1, -1.0), -1.0, _where(isinf(u), u, accurate)))


@differentiable("log1p")
def log1p(x: Tensor) -> Tensor:
    r, x = _kernel_or_float32("log1p", x, log1p)
    if r is not None:
        return r
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


_maximum = binary_op("maximum")


@differentiable("relu", composite=False)
def relu(x: Tensor) -> Tensor:
    if x._dtype is D.bool_:
        return quiet(x.clone)
    if x._dtype.kind == "f":
        return _maximum(x, 0.0)  # the float-scalar fast path: one kernel call
    return _maximum(x, zeros_scalar_like(x))


@differentiable("leaky_relu")
def leaky_relu(x: Tensor, negative_slope: float) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``, for a float ``x`` and a
    slope in (0, inf): one recorded node whose gradient reads the output (its
    sign is the input's), so the in-place twin needs no copy of the input. Two
    kernels, no mask: ``max(x, s x)`` for ``s <= 1``, ``min(x, s x)`` above."""
    if not negative_slope > 0.0:  # (the rule reads the sign off the output)
        raise ValueError(f"leaky_relu: this form needs a positive slope, got {negative_slope}")
    xs = mul(x, negative_slope)
    return maximum(x, xs) if negative_slope <= 1.0 else minimum(x, xs)


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


@differentiable("gelu", composite=False)
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
    return quiet(_gelu, x, approximate)


def _gelu(x: Tensor, approximate: str) -> Tensor:
    """gelu from primitives (a backend without its kernel)."""
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


def frac(input: Tensor) -> Tensor:  # noqa: A002
    """``x - trunc(x)``: the fractional part, with x's sign."""
    x = tensor_arg("frac", input)
    if x._dtype.kind != "f":
        raise RuntimeError(f"frac: expected a floating point tensor, got {x._dtype.name}")
    return sub(x, trunc(x))


def fmod(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """C's fmod: the remainder of truncated division (the sign of ``input``),
    from ``remainder`` (the sign of ``other``): for floats of the magnitudes,
    for integers moved back by ``other``."""
    tensor_arg("fmod", input)
    if D.result_type(input, other).kind != "f":
        r = remainder(input, other)
        fix = logical_and(ne(r, 0), ne(lt(r, 0), lt(input, 0)))
        return where(fix, sub(r, other), r)
    # floats: |input| mod |other| is exact (moving r back by other is not: it
    # rounds, 0.5 - 65504 in float16), then input's sign; a zero input keeps its
    # own sign (fmod(-0.0, y) is -0.0, fmod(0.5, -0.5) is +0.0)
    den = abs(other) if isinstance(other, Tensor) else builtins.abs(other)
    r = remainder(abs(input), den)
    r = where(lt(input, 0), neg(r), r)
    zero = eq(input, 0)
    if isinstance(den, Tensor):
        keep = logical_and(zero, gt(den, 0))  # (a NaN or zero divisor: NaN stays)
    else:
        keep = zero if den > 0 else None
    return r if keep is None else where(keep, input, r)


def clamp_min(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    return clamp(tensor_arg("clamp_min", input), min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    return clamp(tensor_arg("clamp_max", input), max=max)


def clamp_min_(input: Tensor, min: Any) -> Tensor:  # noqa: A002
    return clamp_(input, min=min)


def clamp_max_(input: Tensor, max: Any) -> Tensor:  # noqa: A002
    return clamp_(input, max=max)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    return add(input, mul(tensor1, tensor2), alpha=value)


def addcmul_(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    _check_inplace_shape("addcmul_", input, tensor1, tensor2)
    return add_(input, mul(tensor1, tensor2), alpha=value)


def _check_inplace_shape(op: str, x: Tensor, *others: Any) -> None:
    try:
        shape = broadcast_many(x._shape, *(t._shape for t in others if isinstance(t, Tensor)))
    except RuntimeError as exc:
        raise RuntimeError(f"{op}: {exc}") from None
    if shape != x._shape:
        raise RuntimeError(f"{op}: output with shape {list(x._shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")


def _check_addcdiv(t1: Any, t2: Any) -> None:
    if all(isinstance(t, Tensor) and t._dtype.kind in "iub" for t in (t1, t2)):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
            "will perform a true division of tensor1 and tensor2. Use (input + value * tensor1 / "
            "tensor2) for float inputs."
        )


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 / tensor2``."""
    _check_addcdiv(tensor1, tensor2)
    return add(input, div(tensor1, tensor2), alpha=value)


def addcdiv_(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    _check_addcdiv(tensor1, tensor2)
    _check_inplace_shape("addcdiv_", input, tensor1, tensor2)
    return add_(input, div(tensor1, tensor2), alpha=value)


# -- in place ----------------------------------------------------------------------


@inplace(clamp, inputs=2)
def clamp_(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    return write_result(x, clamp(x, min, max), "clamp")


clip_ = clamp_


@inplace(lerp, inputs=2)
def lerp_(x: Tensor, end: Tensor, weight: Any) -> Tensor:
    return write_result(x, lerp(x, end, weight), "lerp")


# the other in-place twins: compute, then write back. Those of the OpSpecs here,
# and of the ops built here without a kernel of their own.
write_back_twins(globals(), ("rsqrt", "relu", "nan_to_num", "square", "leaky_relu"))
_COPY_BACK = copy_back_twins(globals(), ("frac", "fmod"))


# -- where ----------------------------------------------------------------------------


def where(condition: Tensor, input: Any = None, other: Any = None) -> Any:  # noqa: A002
    if input is None and other is None:  # where(condition): nonzero's coordinates (indexing's)
        return condition.nonzero(as_tuple=True)
    return _where(condition, input, other)


def where_method(x: Tensor, condition: Tensor, other: Any) -> Tensor:
    """``x.where(condition, other)``: x where condition, else other."""
    return _where(condition, x, other)


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
    "frac", "fmod", "clamp_min", "clamp_max", "clamp_min_", "clamp_max_", *_COPY_BACK,
    "addcmul", "addcmul_", "addcdiv", "addcdiv_",
]
