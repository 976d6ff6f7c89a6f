"""Activations: the pointwise non-linearities (``relu`` ... ``glu``) and the
softmax family (``softmax``, ``softmin``, ``log_softmax``).

Each is a composition of public tensor ops, so it differentiates through their
backward rules (``leaky_relu`` with a positive slope is one recorded op with a
rule of its own, read off the output); the ``inplace=True`` forms write the
result into the input.
"""

from __future__ import annotations

import warnings
from typing import Any

from ...amp.autocast_mode import autocast_inputs, regions as _autocast_regions
from ...ops import elementwise as E
from ...ops import reduction as R
from ...autograd.grad_mode import is_grad_enabled
from ...tensor import Tensor
from ._args import _check_tensor, _shape

__all__ = [
    "relu", "relu_", "relu6", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh", "softplus",
    "logsigmoid", "hardtanh", "softmax", "softmin", "log_softmax", "mish", "hardswish",
    "hardsigmoid", "softsign", "tanhshrink", "prelu", "selu", "celu", "hardshrink", "softshrink",
    "threshold", "glu", "leaky_relu_", "elu_", "hardtanh_", "threshold_", "celu_", "selu_",
]


def _activate(input: Tensor, fn: Any, inplace: bool) -> Tensor:
    """``fn(input)``; with ``inplace``, that result written into ``input``.

    When ``input``'s history is recorded, ``fn`` reads a copy of it: the backward
    rules inside ``fn`` keep their inputs, and writing the result into ``input``
    would otherwise leave them a tensor at a newer version (PyTorch's in-place
    activations keep the original, or differentiate from the result)."""
    if not inplace:
        return fn(input)
    if input.requires_grad and is_grad_enabled() and not input.is_leaf:
        return input.copy_(fn(input.clone()))
    return input.copy_(fn(input))  # (a leaf that requires grad: copy_ says why not)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_core(x: Tensor, alpha: float, inv: float = 1.0) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x * inv) - 1)`` (no inf on the untaken branch)."""
    neg = E.minimum(x, E.zeros_scalar_like(x))
    return E.where(x > 0, x, E.expm1(neg * inv if inv != 1.0 else neg) * alpha)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return input.relu_() if inplace else E.relu(input)


def relu_(input: Tensor) -> Tensor:
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return input.clamp_(min_val, max_val) if inplace else E.clamp(input, min_val, max_val)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    s = negative_slope
    if isinstance(input, Tensor) and input.dtype.is_floating_point and \
            isinstance(s, (int, float)) and 0.0 < s < float("inf"):
        # one node, its gradient read off the output (in place too: no copy)
        return E.leaky_relu_(input, float(s)) if inplace else E.leaky_relu(input, float(s))
    return _activate(input, lambda x: E.where(x > 0, x, x * s), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return _activate(input, lambda x: _elu_core(x, alpha), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return E.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    return _activate(input, E.silu, inplace)


def sigmoid(input: Tensor) -> Tensor:
    return E.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return E.tanh(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return E.softplus(input, beta, threshold)


def _softplus_neg(x: Tensor) -> Tensor:
    """softplus(-x) = log(1 + e**-x), stable for every x, without inf anywhere
    (so no nan in its gradient) and with the right gradient at 0."""
    neg = x < 0
    nabs = E.where(neg, x, -x)  # -|x|, with 0 on the x >= 0 side
    return E.log1p(E.exp(nabs)) - E.where(neg, x, E.zeros_scalar_like(x))


def logsigmoid(input: Tensor) -> Tensor:
    return -_softplus_neg(input)


def _softmax_args(name: str, input: Tensor, dim: int | None) -> tuple[Tensor, int]:
    """The softmax family's input (float32 under autocast) and dim: without one,
    PyTorch's implicit choice and its deprecation warning (for the caller's caller)."""
    if _autocast_regions[0]:  # autocast: computed in float32
        input, = autocast_inputs(name, input)
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                      "to include dim=X as an argument.", stacklevel=3)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return input, dim


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    input, dim = _softmax_args("softmax", input, dim)
    return R.softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    input, dim = _softmax_args("softmin", input, dim)
    return R.softmax(-input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    input, dim = _softmax_args("log_softmax", input, dim)
    return R.log_softmax(input, dim, dtype)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _activate(input, lambda x: x * E.tanh(softplus(x)), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return _activate(input, lambda x: E.clamp(x + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return _activate(input, lambda x: x * (E.clamp(x + 3.0, 0.0, 6.0) / 6.0), inplace)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - E.tanh(input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``max(0, x) + weight * min(0, x)``; ``weight`` has one element or one per
    channel (dim 1, or dim 0 of a 1-D input)."""
    _check_tensor("prelu", "input", input)
    _check_tensor("prelu", "weight", weight)
    k = weight.numel()
    a = weight
    if k != 1:
        cdim = 1 if input.ndim >= 2 else 0
        if input.ndim == 0 or input._shape[cdim] != k:
            raise RuntimeError(
                f"prelu: mismatch of parameter numbers and input channel size. Found parameter "
                f"numbers = {k} and channel size = {input._shape[cdim] if input.ndim else 1} "
                f"(input shape {_shape(input)})")
        a = weight.reshape((k,) + (1,) * (input.ndim - cdim - 1))
    elif weight.ndim:
        a = weight.reshape(())
    return E.where(input > 0, input, input * a)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with SELU's fixed constants."""
    return _activate(input, lambda x: _elu_core(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("celu: alpha must not be 0 (it divides the input)")
    return _activate(input, lambda x: _elu_core(x, alpha, 1.0 / alpha), inplace)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    return E.where(input.abs() > lambd, input, E.zeros_scalar_like(input))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be "
                           f"{lambd}.")
    z = E.zeros_scalar_like(input)
    return E.where(input > lambd, input - lambd, E.where(input < -lambd, input + lambd, z))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    return _activate(input, lambda x: E.where(x > threshold, x, E.zeros_scalar_like(x) + value), inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """First half of ``dim`` times the sigmoid of the second half."""
    _check_tensor("glu", "input", input)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input._shape[dim]
    if size % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim % input.ndim} "
                           f"is size {size}")
    a, b = input.split(size // 2, dim)
    return a * E.sigmoid(b)


# -- the in-place forms PyTorch names with a trailing underscore ----------------------------

def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return globals()["threshold"](input, threshold, value, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)
