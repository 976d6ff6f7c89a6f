"""Comparison, logical and bitwise ops beyond the primitive kernels: ``logical_xor``,
float classification (``isnan``, ``isinf``, ``isfinite``), the bool operators
(``&``, ``|``, ``^``, ``~``, ``==``, ``!=``), integer ``bitwise_and``/``or``/``xor``,
``heaviside``, and whole-tensor comparisons (``isclose``, ``allclose``, ``equal``).

Built from the primitives of rtxcore/ops/arithmetic.py; ``rtxcore.ops.elementwise``
re-exports the elementwise ones.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from .arithmetic import (_as_bool, _composite_unary, _float, _full_bool, _full_like_scalar, _k, abs,
                         add, copy_back_twins, eq, floor_divide, gt, le, logical_and,
                         logical_not, logical_or, lt, mul, ne, remainder, sub, write_back_twins)
from .arithmetic import _where as where
from .core import bad_operand, binary, cast, is_scalar, mixed_devices, own_kernel, tensor_arg


# -- logical and float classification ---------------------------------------------


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


# -- the bool operators ----------------------------------------------------------------


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


def eq_operator(x: Tensor, y: Any) -> Any:
    """``x == y``: elementwise, but ``x == None`` (or another non-number) is False."""
    if y is None or not (isinstance(y, Tensor) or is_scalar(y) or hasattr(y, "__array__")):
        return False
    return eq(x, y)


def ne_operator(x: Tensor, y: Any) -> Any:
    if y is None or not (isinstance(y, Tensor) or is_scalar(y) or hasattr(y, "__array__")):
        return True
    return ne(x, y)


# -- integer bitwise ops -----------------------------------------------------------------


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
        return bool_op(_as_bool(a), _as_bool(b))
    ref = a if isinstance(a, Tensor) else b
    a = cast(a, dt) if isinstance(a, Tensor) else _full_like_scalar(cast(ref, dt), int(a))
    b = cast(b, dt) if isinstance(b, Tensor) else _full_like_scalar(cast(ref, dt), int(b))
    nbits = dt.itemsize * 8
    out = None
    for k in range(nbits):
        top = k == nbits - 1 and dt.is_signed
        ba, bb = (cast(lt(v, 0), dt) if top else remainder(floor_divide(v, 1 << k), 2)
                  for v in (a, b))
        bit = bit_op(ba, bb)
        weight = -(1 << k) if top else (1 << k)
        term = mul(bit, weight)
        out = term if out is None else add(out, term)
    return cast(out, dt)


def bitwise_and(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _bitwise("bitwise_and", input, other, logical_and, mul)


def bitwise_or(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _bitwise("bitwise_or", input, other, logical_or,
                    lambda p, q: sub(add(p, q), mul(p, q)))


def bitwise_xor(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _bitwise("bitwise_xor", input, other, logical_xor,
                    lambda p, q: remainder(add(p, q), 2))


def heaviside(input: Tensor, values: Tensor) -> Tensor:  # noqa: A002
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0."""
    x, v = tensor_arg("heaviside", input), tensor_arg("heaviside", values)
    if x._dtype is not v._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    with no_grad():
        return where(eq(x, 0), v, cast(gt(x, 0), x._dtype))


# -- whole tensors ------------------------------------------------------------------------


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (bool), with equal
    infinities close and NaNs close to each other only when ``equal_nan``."""
    for v in (input, other):
        if not isinstance(v, Tensor):
            raise bad_operand("isclose", v)
    if input._dtype is not other._dtype:
        raise RuntimeError(f"isclose: {input._dtype.name} did not match {other._dtype.name}")
    if input._device is not other._device:
        raise mixed_devices("isclose", input, other)
    if rtol < 0:
        raise RuntimeError(f"isclose: rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"isclose: atol must be greater than or equal to zero, but got {atol}")
    with no_grad():
        a, b = input.detach(), other.detach()
        same = eq(a, b)
        if a._dtype is D.bool_:
            return same
        if a._dtype.kind != "f":
            a, b = _float(a), _float(b)
        diff = abs(sub(a, b))
        close = le(diff, add(mul(abs(b), float(rtol)), float(atol)))
        finite = logical_and(isfinite(a), isfinite(b))
        out = logical_or(same, logical_and(close, finite))
        if equal_nan:
            out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element of ``input`` is close to ``other`` (``isclose``)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """True when both tensors have the same shape and the same values."""
    for v in (input, other):
        if not isinstance(v, Tensor):
            raise bad_operand("equal", v)
    if input._device is not other._device:
        raise mixed_devices("equal", input, other)
    if input._shape != other._shape:
        return False
    with no_grad():
        return bool(eq(input.detach(), other.detach()).all().item())


write_back_twins(globals())  # logical_xor_
METHODS = ["heaviside", "bitwise_and", "bitwise_or", "bitwise_xor", "isclose", "allclose", "equal",
           *copy_back_twins(globals(), ("bitwise_and", "bitwise_or", "bitwise_xor"))]
