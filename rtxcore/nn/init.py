"""Weight initialisation, in place and without recording, as ``torch.nn.init``.

Random draws come from rtxcore's generators on the tensor's device;
``orthogonal_`` takes the QR of its Gaussian draw on the host (NumPy), which is
fine for a one-off initialisation.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from ..autograd.grad_mode import no_grad
from ..ops import elementwise as E
from ..ops.creation import empty, eye as _eye, rand, tensor as _tensor
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity: str, param: Any = None) -> float:
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for n in tensor.shape[2:]:
        receptive *= n
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def _erfinv(x: Tensor) -> Tensor:
    """erf⁻¹ on the device: Giles' single-precision approximation, then two Newton
    steps on ``erf`` (to full precision)."""
    w = -E.log((1.0 - x) * (1.0 + x))
    small = w < 5.0
    a = w - 2.5
    p_small = a * 0.0 + 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p_small = c + p_small * a
    b = E.sqrt(E.maximum(w, E.zeros_scalar_like(w) + 5.0)) - 3.0
    p_big = b * 0.0 - 0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p_big = c + p_big * b
    y = E.where(small, p_small, p_big) * x
    for _ in range(2):
        y = y - (E.erf(y) - x) / (E.exp(-y * y) * (2.0 / math.sqrt(math.pi)))
    return y


def _norm_cdf(v: float) -> float:
    return (1.0 + math.erf(v / math.sqrt(2.0))) / 2.0


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Any = None) -> Tensor:
    """N(mean, std**2) truncated to [a, b], by PyTorch's inverse-CDF method: a
    uniform draw between the CDF values of a and b, through erf⁻¹."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        lo, hi = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        eps = float(np.finfo(tensor._dtype.numpy).eps)
        z = _erfinv(E.clamp(tensor, -1.0 + eps, 1.0 - eps)) * (std * math.sqrt(2.0)) + mean
        return tensor.copy_(E.clamp(z, a, b))


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the diagonal of a 2-D tensor)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(_eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta for a 3/4/5-D convolution weight: each of the first
    ``min(out/groups, in)`` channels of each group passes its input channel
    through unchanged (a 1 at the kernel centre)."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per = sizes[0] // groups
    delta = np.zeros(sizes)
    centre = tuple(n // 2 for n in sizes[2:])
    for g in range(groups):
        for d in range(min(per, sizes[1])):
            delta[(g * per + d, d) + centre] = 1
    with no_grad():
        return tensor.copy_(_tensor(delta, dtype=tensor.dtype, device=tensor.device))


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix (the tensor viewed as (size(0), -1)), times
    ``gain``: the Q of a Gaussian matrix's QR, its columns' signs fixed by R's
    diagonal so that the result is uniformly distributed (PyTorch's algorithm)."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flat = empty(rows, cols, dtype=tensor.dtype, device=tensor.device)
        flat.normal_(0, 1, generator=generator)
        a = flat.numpy().astype(np.float64)
        if rows < cols:
            a = a.T
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        tensor.copy_(_tensor(q.reshape(tuple(tensor.shape)), dtype=tensor.dtype,
                             device=tensor.device))
        return tensor.mul_(gain)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """N(0, std**2) with ``ceil(sparsity * rows)`` random entries of each column
    zeroed (a 2-D tensor)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        if num_zeros:
            # a random permutation of the rows per column: the order of uniform draws
            order = np.argsort(rand(rows, cols, generator=generator).numpy(), axis=0)
            keep = np.ones((rows, cols))
            np.put_along_axis(keep, order[:num_zeros], 0.0, axis=0)
            tensor.mul_(_tensor(keep, dtype=tensor.dtype, device=tensor.device))
    return tensor


def _make_deprecate(meth: Callable[..., Tensor]) -> Callable[..., Tensor]:
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
                      FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)

    deprecated_init.__name__ = old_name
    deprecated_init.__doc__ = f"Deprecated spelling of ``{new_name}``."
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
