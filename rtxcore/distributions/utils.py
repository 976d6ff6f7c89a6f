"""Helpers of the distributions, as ``torch.distributions.utils``."""

from __future__ import annotations

from numbers import Number
from typing import Any

import numpy as np

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


def broadcast_all(*values: Any) -> tuple[Any, ...]:
    """Tensors of one broadcast shape from tensors and numbers: numbers become
    tensors of the first tensor's dtype and device (or of the default dtype when
    all are numbers); every result is a broadcast view."""
    rc = _rc()
    if not all(isinstance(v, (rc.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or Tensor.")
    like = next((v for v in values if isinstance(v, rc.Tensor)), None)
    if like is None:
        dtype, device = rc.get_default_dtype(), None
    else:
        dtype, device = like.dtype, like.device
    tensors = [v if isinstance(v, rc.Tensor) else rc.tensor(float(v), dtype=dtype, device=device)
               for v in values]
    shape = rc.broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t if tuple(t.shape) == tuple(shape) else t.expand(shape) for t in tensors)


def finfo(dtype: Any) -> Any:
    """NumPy's floating-point limits of an rtxcore dtype."""
    return np.finfo(dtype.numpy)


def clamp_probs(probs: Any) -> Any:
    """``probs`` clamped to ``[eps, 1 - eps]`` (its dtype's eps), so their logs are finite."""
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Any, is_binary: bool = False) -> Any:
    """Probabilities from logits: a sigmoid when ``is_binary``, else a softmax
    over the last dim."""
    rc = _rc()
    if is_binary:
        return rc.sigmoid(logits)
    return rc.softmax(logits, -1)


def probs_to_logits(probs: Any, is_binary: bool = False) -> Any:
    """Logits from probabilities (clamped away from 0 and 1): ``log p - log1p(-p)``
    when ``is_binary``, else ``log p``."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:  # noqa: N801  (PyTorch's name)
    """A property computed on first access and then stored on the instance (so
    a parameter given to the constructor shadows it)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value
