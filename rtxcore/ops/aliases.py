"""PyTorch's other names for ops rtxcore has, and the few ops that are one line
over them: ``absolute`` is ``abs``, ``x.multiply_(y)`` is ``x.mul_(y)``,
``exp2(x)`` is ``2 ** x``, ``std_mean`` is ``(std, mean)``, and so on. Each is
recorded by autograd through the op it is written with.

``FUNCTIONS`` are bound on the ``rtxcore`` namespace, ``METHODS`` on ``Tensor``
(and ``real`` as the property ``x.real``).
``real``, ``conj``, ``resolve_conj`` and ``resolve_neg`` return the tensor itself,
as PyTorch's do for real dtypes (there are no complex tensors here).
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor


def absolute(input: Tensor) -> Tensor:  # noqa: A002
    return input.abs()


def absolute_(input: Tensor) -> Tensor:  # noqa: A002
    return input.abs_()


def negative(input: Tensor) -> Tensor:  # noqa: A002
    return input.neg()


def negative_(input: Tensor) -> Tensor:  # noqa: A002
    return input.neg_()


def positive(input: Tensor) -> Tensor:  # noqa: A002
    if input._dtype.kind == "b":
        raise TypeError("The `+` operator, on a bool tensor is not supported.")
    return input


def multiply_(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    return input.mul_(other)


def subtract_(input: Tensor, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    return input.sub_(other, alpha=alpha)


def divide_(input: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    return input.div_(other, rounding_mode=rounding_mode)


def true_divide_(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    return input.div_(other)


def sgn(input: Tensor) -> Tensor:  # noqa: A002
    """``sign`` (for real tensors, PyTorch's ``sgn`` is ``sign``)."""
    return input.sign()


def exp2(input: Tensor) -> Tensor:  # noqa: A002
    """``2 ** input``, in the input's float dtype (integers give the default float)."""
    from .arithmetic import pow

    return pow(2.0, input if input._dtype.is_floating_point else input.float())


def deg2rad(input: Tensor) -> Tensor:  # noqa: A002
    return input * (math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:  # noqa: A002
    return input * (180.0 / math.pi)


def std_mean(input: Tensor, dim: Any = None, unbiased: Any = None,  # noqa: A002
             keepdim: bool = False, *, correction: Any = None) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` over ``dim``, as ``var_mean`` gives ``(var, mean)`` (the
    same arguments)."""
    from .reduction import var_mean

    var, mean = var_mean(input, dim, unbiased, keepdim, correction=correction)
    return var.sqrt(), mean


def angle(input: Tensor) -> Tensor:  # noqa: A002
    """The argument of a real number: 0 for x >= 0, pi for x < 0, nan for nan (in
    the default float for integers), as PyTorch's for real tensors."""
    from .. import dtype as D
    from .comparison import lt
    from .core import where
    from .elementwise import isnan

    x = input if input._dtype.is_floating_point else input.to(D.get_default_dtype())
    return where(isnan(x), x, where(lt(x, 0), math.pi, 0.0))


def get_device(input: Tensor) -> int:  # noqa: A002
    """The device index, or -1 for cpu tensors (as PyTorch's)."""
    d = input._device
    return -1 if d.type == "cpu" else (d.index or 0)


def real(input: Tensor) -> Tensor:  # noqa: A002
    """``rtxcore.real(x)``; ``x.real`` is the property of the same answer."""
    return input


def conj(input: Tensor) -> Tensor:  # noqa: A002
    return input


def resolve_conj(input: Tensor) -> Tensor:  # noqa: A002
    return input


def resolve_neg(input: Tensor) -> Tensor:  # noqa: A002
    return input


def isreal(input: Tensor) -> Tensor:  # noqa: A002
    """All true: every rtxcore tensor is real."""
    from .. import dtype as D
    from .creation import ones

    return ones(input.shape, dtype=D.bool_, device=input.device)


def isposinf(input: Tensor) -> Tensor:  # noqa: A002
    return input.isinf() & (input > 0)


def isneginf(input: Tensor) -> Tensor:  # noqa: A002
    return input.isinf() & (input < 0)


def bitwise_not(input: Tensor) -> Tensor:  # noqa: A002
    from .comparison import bitwise_not as fn

    return fn(input)


FUNCTIONS = ["absolute", "angle", "negative", "positive", "sgn", "exp2", "deg2rad", "rad2deg", "std_mean",
             "real", "conj", "resolve_conj", "resolve_neg", "isreal", "isposinf", "isneginf"]
METHODS = ["absolute", "absolute_", "angle", "negative", "negative_", "positive", "multiply_", "subtract_",
           "divide_", "true_divide_", "sgn", "exp2", "deg2rad", "rad2deg", "get_device", "conj", "resolve_conj", "resolve_neg", "isreal", "isposinf", "isneginf", "bitwise_not"]
