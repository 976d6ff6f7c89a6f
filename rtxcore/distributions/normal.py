"""``Normal``, as ``torch.distributions.Normal``."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Normal"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


class Normal(Distribution):
    r"""The normal (Gaussian) distribution with mean ``loc`` and standard
    deviation ``scale`` (tensors or numbers, broadcast together)::

        log_prob(x) = -(x - loc)**2 / (2 scale**2) - log(scale) - log(sqrt(2 pi))
        entropy     = 1/2 + log(2 pi) / 2 + log(scale)

    ``rsample`` is ``loc + eps * scale`` with ``eps ~ N(0, 1)`` from rtxcore's
    default generator, differentiable with respect to ``loc`` and ``scale``.
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        if isinstance(loc, Number) and isinstance(scale, Number):
            batch_shape: Any = ()
        else:
            batch_shape = self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def stddev(self) -> Any:
        return self.scale

    @property
    def variance(self) -> Any:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Any:
        rc = _rc()
        shape = self._extended_shape(sample_shape)
        eps = rc.randn(tuple(shape), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        log_scale = self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value: Any) -> Any:
        rc = _rc()
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + rc.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def entropy(self) -> Any:
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()
