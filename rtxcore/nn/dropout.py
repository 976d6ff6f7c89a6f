"""Dropout layers: ``Dropout`` (elements) and ``Dropout1d`` / ``Dropout2d``
(whole channels), active in training mode only."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


class Dropout(Module):
    """Zero elements with probability ``p`` (and scale the rest by 1/(1-p))."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zero whole channels of (N, C, L) or (C, L) input with probability ``p``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout1d(x, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) input with probability ``p``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout2d(x, self.p, self.training, self.inplace)
