"""Elementwise primitives: the one-kernel front-ends (``neg``, ``exp``, ``add``, ``mul``,
``pow``, ``eq``, ``logical_and``, ``where``, ...), exact integer division and
rounding (``floor_divide``, ``remainder``, ``ceil``, ``trunc``, ``round``), the
in-place twins of all of these, ``copy_``/``fill_``, and the small dtype helpers
the composites share.

The composites built on them are in rtxcore/ops/elementwise.py (pointwise math)
and rtxcore/ops/comparison.py; ``rtxcore.ops.elementwise`` re-exports this
module's names. A composite here (``floor_divide``, ``ceil``, ...) first asks the
device for a kernel of its own name, as in elementwise.py.
"""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from ..dispatch import ops as OPS
from ..tensor import Tensor
from .core import (FLOAT, SAME, TO_BOOL, as_tensor_on, binary, binary_op, cast, empty, full_on,
                   is_scalar, kernel, scalar_for, unary, unary_op, view_of, write_result)
from .core import bad_operand, own_kernel
from .core import where as _core_where
from ..autograd.tape import differentiable, inplace
from ..autograd.tape import quiet as _quiet

# Each op's facts (result kind, in-place twin, aliases) come from its OpSpec.
_SPECS = {**OPS.PRIMITIVES, **OPS.COMPOSITES}
_KIND = {"same": SAME, "float": FLOAT, "bool": TO_BOOL}


def _k(op: str) -> int:
    """What ``unary``/``binary`` make of integer inputs for ``op``: its OpSpec's result kind."""
    return _KIND[_SPECS[op].result]


# the same, looked up once (the in-place front-ends below read ``KIND["add"]``)
KIND = {op: _KIND[sp.result] for op, sp in _SPECS.items() if sp.result in _KIND}
_BOOL = D.bool_


# -- primitives ----------------------------------------------------------------------


def _primitive(run: Any, op: str, inputs: int, recorded: bool) -> Any:
    run.__module__ = __name__
    return differentiable(op, inputs=inputs, composite=False)(run) if recorded else run


def _unary_primitive(op: str, recorded: bool = True) -> Any:
    """The front-end of unary primitive ``op``: its kernel, with the result dtype
    its OpSpec gives; recorded for autograd unless ``recorded`` is False. (Its
    body is the driver itself, ``unary_op``'s function: no call in between.)"""
    return _primitive(unary_op(op, _k(op)), op, 1, recorded)


def _binary_primitive(op: str, recorded: bool = True) -> Any:
    """The front-end of binary primitive ``op`` (tensors or Python numbers, broadcast
    and promoted), as ``_unary_primitive``."""
    return _primitive(binary_op(op, _k(op)), op, 2, recorded)


# the drivers of the front-ends below that check more, or take keywords too
_add, _sub, _mul, _div = (binary_op(op, _k(op)) for op in ("add", "sub", "mul", "div"))
_neg, _sign, _floor = (unary_op(op, _k(op)) for op in ("neg", "sign", "floor"))


abs, exp, log, sqrt, sin, cos, tanh, reciprocal = (  # noqa: A001
    _unary_primitive(op) for op in ("abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "reciprocal"))
logical_not = _unary_primitive("logical_not", recorded=False)
mul, maximum, minimum = (_binary_primitive(op) for op in ("mul", "maximum", "minimum"))
# comparisons and the logical ops: bool results, nothing to differentiate
eq, ne, lt, le, gt, ge, logical_and, logical_or = (
    _binary_primitive(op, recorded=False)
    for op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"))


# (composite=False: these front-ends call kernels only, recording nothing inside;
# their rarer paths that call recording ops run them under _quiet)


@differentiable("neg", composite=False)
def neg(x: Tensor) -> Tensor:
    if x._dtype is _BOOL:
        raise RuntimeError("negation, the `-` operator, on a bool tensor is not supported; use ~ or logical_not()")
    return _neg(x)


@differentiable("sign", composite=False)
def sign(x: Tensor) -> Tensor:
    if isinstance(x, Tensor) and x._dtype is D.bool_:
        return _quiet(x.clone)  # PyTorch: the sign of a bool is itself
    return _sign(x)


@differentiable("floor", composite=False)
def floor(x: Tensor) -> Tensor:
    if x._dtype.kind != "f":
        return _quiet(x.clone)
    return _floor(x)


def _scaled(x: Any, y: Any, alpha: Any) -> Any:
    """``alpha * y`` for add/sub's ``alpha=``; a float alpha needs float operands."""
    if isinstance(alpha, float) and all(
        (isinstance(v, Tensor) and v._dtype.kind != "f") or isinstance(v, int) for v in (x, y)
    ):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return _mul(y, alpha) if isinstance(y, Tensor) else y * alpha  # (a Python number)


@differentiable("add", inputs=2, composite=False)
def add(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    return _add(x, y)


@differentiable("sub", inputs=2, composite=False)
def sub(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    if (isinstance(x, Tensor) and x._dtype is _BOOL) or (isinstance(y, Tensor) and y._dtype is _BOOL):
        raise RuntimeError("subtraction, the `-` operator, with a bool tensor is not supported; use logical_xor()")
    return _sub(x, y)


@differentiable("div", inputs=2, composite=False)
def div(x: Any, y: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return _div(x, y)
    return _quiet(_div_rounded, x, y, rounding_mode)


def _div_rounded(x: Any, y: Any, rounding_mode: Any) -> Tensor:
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
        return trunc(_div(x, y))
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


@differentiable("where", inputs=3)
def _where(condition: Tensor, x: Any, y: Any) -> Tensor:
    return _core_where(condition, x, y)


# -- rounding and integer division ------------------------------------------------
# Each: the backend's own kernel if it has one, else the decomposition.


def _composite_unary(op: str, x: Tensor) -> Tensor | None:
    if not isinstance(x, Tensor):
        raise bad_operand(op, x)
    if own_kernel(x._device, op, x._dtype):
        return unary(op, x, _k(op))
    return None


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


def _check_int_divisor(x: Any, y: Any) -> None:
    """Integer division by zero raises, as in PyTorch (it has no inf to give)."""
    if _all_int(x, y):
        zero = (y == 0) if not isinstance(y, Tensor) else bool(any_nonzero(eq(y, 0)))
        if zero:
            raise RuntimeError("ZeroDivisionError: integer division or modulo by zero")


def any_nonzero(t: Tensor) -> bool:
    return bool(t.any().item()) if t.numel() else False  # (rtxcore.any, the tensor's method)


def _division_kernel(op: str, x: Any, y: Any) -> tuple[Tensor | None, Any]:
    """(the result of the backend's own kernel for ``op``, or None to decompose; the
    device), after refusing an integer division by zero."""
    dev = (x if isinstance(x, Tensor) else y)._device
    _check_int_divisor(x, y)
    if own_kernel(dev, op, lambda: D.result_type(x, y)):
        return binary(op, x, y), dev
    return None, dev


@differentiable("floor_divide", inputs=2)
def floor_divide(x: Any, y: Any) -> Tensor:
    r, dev = _division_kernel("floor_divide", x, y)
    if r is not None:
        return r
    if _all_int(x, y):
        return _int_floor_divide(x, y, dev)
    return floor(div(x, y))


def _int_floor_divide(x: Any, y: Any, dev: Any) -> Tensor:
    """Exact integer floor division from primitives: a floating-point estimate of
    the quotient, refined with exact integer remainders until it is right."""
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
    r, _ = _division_kernel("remainder", x, y)
    if r is not None:
        return r
    # Python's (and PyTorch's) sign convention: the result has the divisor's sign.
    return sub(x, mul(floor_divide(x, y), y))


# -- in place ----------------------------------------------------------------------
# Primitive binary ops write straight into the target; others compute and copy back.


@inplace(add, inputs=1)
def add_(x: Tensor, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    return binary("add", x, y, KIND["add"], out=x)


@inplace(sub, inputs=1)
def sub_(x: Tensor, y: Any, *, alpha: Any = 1) -> Tensor:
    if alpha != 1:
        y = _scaled(x, y, alpha)
    return binary("sub", x, y, KIND["sub"], out=x)


@inplace(mul, inputs=1)
def mul_(x: Tensor, y: Any) -> Tensor:
    return binary("mul", x, y, KIND["mul"], out=x)


@inplace(div, inputs=1)
def div_(x: Tensor, y: Any, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        return binary("div", x, y, KIND["div"], out=x)
    return write_result(x, div(x, y, rounding_mode=rounding_mode), "div")


@inplace(pow, inputs=1)
def pow_(x: Tensor, y: Any) -> Tensor:
    return write_result(x, pow(x, y), "pow")


@inplace(maximum, inputs=1)
def maximum_(x: Tensor, y: Any) -> Tensor:
    return binary("maximum", x, y, KIND["maximum"], out=x)


@inplace(minimum, inputs=1)
def minimum_(x: Tensor, y: Any) -> Tensor:
    return binary("minimum", x, y, KIND["minimum"], out=x)


@inplace(floor_divide, inputs=1)
def floor_divide_(x: Tensor, y: Any) -> Tensor:
    return write_result(x, floor_divide(x, y), "floor_divide")


@inplace(remainder, inputs=1)
def remainder_(x: Tensor, y: Any) -> Tensor:
    return write_result(x, remainder(x, y), "remainder")


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


def write_back_twins(namespace: dict[str, Any], extra: tuple[str, ...] = ()) -> None:
    """Give the ops of ``namespace`` their in-place twins that compute, then write
    back (recorded as the out-of-place op): those their OpSpec names that the
    namespace lacks (the binary primitives above write straight through their
    kernel instead), and those of ``extra``, ops built without a kernel of their own."""
    names = [spec.name for spec in _SPECS.values()
             if spec.inplace and spec.name in namespace and spec.inplace not in namespace]
    for n in [*names, *extra]:
        namespace[n + "_"] = _make_inplace(namespace[n], n)


def copy_back_twins(namespace: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    """Give the functions ``names`` of ``namespace`` in-place twins that copy their
    result back with ``copy_`` (any dtype, recorded as a copy); returns the
    twins' names."""
    for n in names:
        def _inplace(input: Tensor, *args: Any, _f: Any = namespace[n], **kwargs: Any) -> Tensor:  # noqa: A002
            return copy_(input, _f(input, *args, **kwargs))

        _inplace.__name__ = _inplace.__qualname__ = n + "_"
        _inplace.__doc__ = f"In-place version of :func:`{n}`."
        namespace[n + "_"] = _inplace
    return [n + "_" for n in names]


@differentiable("copy", inputs=2)
def _copied(x: Tensor, src: Any) -> Tensor:
    """``x.copy_(src)``'s result, out of place (what autograd records)."""
    return copy_.raw(x.clone(), src)


@inplace(_copied, inputs=1)
def copy_(x: Tensor, src: Any) -> Tensor:
    """Copy ``src`` into ``x`` (broadcast, cast, and across devices)."""
    if not isinstance(src, Tensor):
        src = as_tensor_on(src, x._device, x._dtype)
    if src._device is not x._device:
        src = src.to(x._device)
    return write_result(x, src, "copy", allow_any_cast=True)


# -- helpers ------------------------------------------------------------------------


def zeros_scalar_like(x: Tensor) -> Tensor:
    """A 0-d zero of x's dtype on x's device (keeps maximum's dtype exact)."""
    return full_on((), 0, x._dtype, x._device)


def _full_like_scalar(x: Tensor, value: float) -> Tensor:
    return full_on((), value, x._dtype, x._device)


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


write_back_twins(globals())  # neg_, exp_, logical_and_, ceil_, trunc_, ...
