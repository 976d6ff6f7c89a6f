"""``Categorical``, as ``torch.distributions.Categorical``."""

from __future__ import annotations

from typing import Any

from . import constraints
from .distribution import Distribution
from .utils import finfo, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


class Categorical(Distribution):
    r"""The categorical distribution over ``0 .. K-1``, K the size of the last dim
    of ``probs`` (non-negative, normalised here to sum to 1) or of ``logits``
    (unnormalised log-probabilities, normalised here with ``logsumexp``). Give
    exactly one; the other is derived on first use. The leading dims are the
    batch shape.

        log_prob(k) = logits[..., k]
        entropy     = -sum_k p_k logits_k

    ``sample`` draws with ``rtxcore.multinomial`` from the default generator.
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(
        constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = tuple(self._param.shape[:-1]) if self._param.dim() > 1 else ()
        super().__init__(batch_shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Any:
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Any:
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Any:
        return self._param.shape

    @property
    def mean(self) -> Any:
        rc = _rc()
        return rc.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype,
                       device=self.probs.device)

    @property
    def mode(self) -> Any:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Any:
        return self.mean

    def sample(self, sample_shape: Any = ()) -> Any:
        rc = _rc()
        shape = self._extended_shape(sample_shape)
        n = 1
        for s in (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape):
            n *= s
        with rc.no_grad():
            probs_2d = self.probs.detach().reshape(-1, self._num_events)
            if n == 0:
                return rc.zeros(tuple(shape), dtype=rc.int64, device=probs_2d.device)
            samples_2d = rc.multinomial(probs_2d, n, True).T
            return samples_2d.reshape(tuple(shape))

    def log_prob(self, value: Any) -> Any:
        rc = _rc()
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        shape = rc.broadcast_shapes(value.shape, self.logits.shape)
        value = value.expand(shape)[..., :1]
        log_pmf = self.logits.expand(shape)
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Any:
        min_real = float(finfo(self.logits.dtype).min)
        logits = self.logits.clamp(min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand: bool = True) -> Any:
        rc = _rc()
        values = rc.arange(self._num_events, dtype=rc.int64, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
