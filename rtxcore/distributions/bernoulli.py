"""``Bernoulli``, as ``torch.distributions.Bernoulli``."""

from __future__ import annotations

from numbers import Number
from typing import Any

from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


def _bce_with_logits(logits: Any, target: Any) -> Any:
    """Elementwise ``-(target log sigmoid(logits) + (1 - target) log sigmoid(-logits))``
    in the stable form ``max(x, 0) - x t + log1p(exp(-|x|))``; differentiable in
    both arguments."""
    return logits.clamp(min=0) - logits * target + (-logits.abs()).exp().log1p()


class Bernoulli(Distribution):
    r"""The Bernoulli distribution: 1 with probability ``probs`` (or
    ``sigmoid(logits)``), else 0. Give exactly one of ``probs`` and ``logits``;
    the other is derived on first use.

        log_prob(x) = x log p + (1 - x) log(1 - p)     (from the logits, stably)
        entropy     = -(p log p + (1 - p) log(1 - p))
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            self._param = self.probs
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        batch_shape: Any = () if is_scalar else self._param.shape
        super().__init__(batch_shape, validate_args=validate_args)

    @lazy_property
    def logits(self) -> Any:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Any:
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Any:
        return self._param.shape

    @property
    def mean(self) -> Any:
        return self.probs

    @property
    def mode(self) -> Any:
        rc = _rc()
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return rc.where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self) -> Any:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        rc = _rc()
        shape = tuple(self._extended_shape(sample_shape))
        with rc.no_grad():
            probs = self.probs.detach()
            u = rc.rand(shape, dtype=probs.dtype, device=probs.device)
            return (u < probs.expand(shape)).to(probs.dtype)

    def log_prob(self, value: Any) -> Any:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value)

    def entropy(self) -> Any:
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand: bool = True) -> Any:
        rc = _rc()
        values = rc.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
