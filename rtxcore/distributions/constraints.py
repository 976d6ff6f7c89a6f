"""Constraints on distribution parameters and values, as
``torch.distributions.constraints``: ``check(value)`` is a bool tensor, True
where ``value`` satisfies the constraint (reduced over event dims for
``independent``)."""

from __future__ import annotations

from typing import Any

__all__ = ["Constraint", "boolean", "dependent", "dependent_property", "independent",
           "integer_interval", "interval", "is_dependent", "positive", "real", "simplex",
           "unit_interval"]


class Constraint:
    """A region a value must lie in; subclasses define ``check``."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a support that depends on other parameters."""

    def check(self, value: Any) -> Any:
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint: Any) -> bool:
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """``@constraints.dependent_property``: a support computed from the instance."""

    def __init__(self, fn: Any = None, *, is_discrete: bool = False, event_dim: int = 0) -> None:
        property.__init__(self, fn)
        self.is_discrete = is_discrete
        self.event_dim = event_dim

    def __call__(self, fn: Any) -> _DependentProperty:
        return _DependentProperty(fn, is_discrete=self.is_discrete, event_dim=self.event_dim)


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value: Any) -> Any:
        return (value == 0) | (value == 1)


class _Real(Constraint):
    def check(self, value: Any) -> Any:
        return value == value  # False only for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound: float) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return self.lower_bound < value

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound: float, upper_bound: float) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound: int, upper_bound: int) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    """Non-negative, summing to 1 (within 1e-6) along the last dim."""

    event_dim = 1

    def check(self, value: Any) -> Any:
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _IndependentConstraint(Constraint):
    """``base`` on each element, reduced (all) over the last
    ``reinterpreted_batch_ndims`` dims."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int) -> None:
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    def check(self, value: Any) -> Any:
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
real = _Real()
positive = _GreaterThan(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
interval = _Interval
integer_interval = _IntegerInterval
