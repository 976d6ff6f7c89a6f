"""Activation layers, as ``torch.nn``: ``ReLU``, ``GELU``, ``Softmax`` and the
rest, thin Modules over ``rtxcore.nn.functional`` with PyTorch's arguments and
reprs; ``PReLU`` with its learned slope."""

from __future__ import annotations

from typing import Any

from ..ops import creation as C
from ..tensor import Tensor
from . import functional as F
from . import init
from ._layer_base import _factory, _FunctionalLayer
from .module import Module
from .parameter import Parameter


class _InplaceActivation(_FunctionalLayer):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class ReLU(_InplaceActivation):
    """``max(0, x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu_() if self.inplace else F.relu(x)


class GELU(_FunctionalLayer):
    """``x * Phi(x)``; ``approximate='tanh'`` for the tanh approximation."""

    _fn = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        super().__init__(approximate=approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    """``x * sigmoid(x)``."""

    _fn = "silu"


class Tanh(Module):
    """``tanh(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


def _softmax_dim(dim: int | None, x: Tensor) -> int:
    # PyTorch's legacy choice when dim is None
    if dim is not None:
        return dim
    return 0 if x.ndim in (0, 1, 3) else 1


class Softmax(_FunctionalLayer):
    """``exp(x) / sum(exp(x))`` along ``dim``."""

    _fn = "softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)

    def forward(self, x: Tensor) -> Tensor:
        return getattr(F, self._fn)(x, _softmax_dim(self.dim, x))


class LogSoftmax(Softmax):
    """``log(softmax(x))`` along ``dim``."""

    _fn = "log_softmax"


class Softmin(_FunctionalLayer):
    """``softmax(-x)`` along ``dim``."""

    _fn = "softmin"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class GLU(_FunctionalLayer):
    """Gated linear unit: ``a * sigmoid(b)`` of ``x``'s halves along ``dim``."""

    _fn = "glu"

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim=dim)


class LeakyReLU(_FunctionalLayer):
    """``max(0, x) + negative_slope * min(0, x)``."""

    _fn = "leaky_relu"

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class ELU(_FunctionalLayer):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""

    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class CELU(ELU):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    _fn = "celu"


class SELU(_InplaceActivation):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""

    _fn = "selu"


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``."""

    _fn = "mish"


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``."""

    _fn = "hardswish"


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6``."""

    _fn = "hardsigmoid"


class Softplus(_FunctionalLayer):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``."""

    _fn = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Hardtanh(_FunctionalLayer):
    """``x`` clamped to [min_val, max_val]."""

    _fn = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        if min_val > max_val:
            raise ValueError("min_val cannot be greater than max_val")
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class ReLU6(Hardtanh):
    """``min(max(0, x), 6)``."""

    _shown = ()

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)


class Threshold(_FunctionalLayer):
    """``x`` where above ``threshold``, else ``value``."""

    _fn = "threshold"

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__(threshold=threshold, value=value, inplace=inplace)


class Hardshrink(_FunctionalLayer):
    """``x`` where ``|x| > lambd``, else 0."""

    _fn = "hardshrink"

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__(lambd=lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """``x`` moved ``lambd`` towards 0, and 0 within ``lambd`` of it."""

    _fn = "softshrink"


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softsign(x)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanhshrink(x)


class LogSigmoid(Module):
    """``log(sigmoid(x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(x)


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)``, with a learned slope: one, or one per
    channel (``num_parameters``), initialised to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(C.empty(num_parameters, **_factory(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
