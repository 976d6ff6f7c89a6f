"""``Distribution``: the base of the probability distributions, as
``torch.distributions.Distribution``."""

from __future__ import annotations

import warnings
from typing import Any

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


class Distribution:
    """A family of probability distributions over values of shape
    ``batch_shape + event_shape``.

    Subclasses set ``arg_constraints`` (the constraint of each parameter) and
    ``support``, and implement ``sample``/``rsample``, ``log_prob``,
    ``entropy``, ``mean`` and ``variance``. When ``validate_args`` is on (the
    default, as in PyTorch; ``Distribution.set_default_validate_args(False)``
    turns it off), the constructor checks every parameter against its
    constraint and ``log_prob`` checks its value against ``support``; both
    raise ValueError naming the parameter and the constraint.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions built without
        ``validate_args``."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args expects a bool, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (),
                 validate_args: bool | None = None) -> None:
        rc = _rc()
        self._batch_shape = rc.Size(tuple(batch_shape))
        self._event_shape = rc.Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{type(self).__name__} does not define `arg_constraints`. Please "
                              "set `arg_constraints = {}` or initialize the distribution with "
                              "`validate_args=False` to turn off validation.", stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None),
                                                             lazy_property):
                    continue  # a parameter derived from the one given: checked through it
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}"
                    )

    @property
    def batch_shape(self) -> Any:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Any:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        raise NotImplementedError

    @property
    def support(self) -> Any:
        raise NotImplementedError

    @property
    def mean(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def mode(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self) -> Any:
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Any:
        """A sample (or a ``sample_shape`` batch of them), without gradient."""
        rc = _rc()
        with rc.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Any:
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample")

    def sample_n(self, n: int) -> Any:
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning,
                      stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement enumerate_support")

    def entropy(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Any:
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Any = ()) -> Any:
        """``sample_shape + batch_shape + event_shape``."""
        rc = _rc()
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return rc.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Any) -> None:
        """ValueError unless ``value`` is a tensor broadcastable to this
        distribution's shape and inside its support."""
        rc = _rc()
        if not isinstance(value, rc.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError("The right-most size of value must match event_shape: "
                             f"{tuple(value.shape)} vs {tuple(self._event_shape)}.")
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError("Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual_shape} vs {expected_shape}.")
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}"
            )

    def __repr__(self) -> str:
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names
        )
        return f"{type(self).__name__}({args})"
