"""``LRScheduler``, the base of the learning-rate schedulers, and what they share:
reading and setting the groups' ``lr``, per-group arguments, the optimizer
check, and the step's bookkeeping (the epoch count, the warnings PyTorch gives,
the lrs a step sets).

A scheduler's ``get_lr()`` gives the next lr of each group in PyTorch's
recursive form (from the groups' current lrs); ``_get_closed_form_lr()``, where
a scheduler has one, gives it from the initial lrs and the epoch alone (used by
``step(epoch)``). ``_current``, ``_scaled`` and ``_from_base`` are those two
forms' common shapes.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from functools import wraps
from typing import Any

from ...tensor import Tensor
from ..optimizer import Optimizer

__all__ = ["EPOCH_DEPRECATION_WARNING", "LRScheduler"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available."
)


def _group_values(optimizer: Optimizer, key: str) -> list[Any]:
    """``group[key]`` for each group (tensor values copied, never aliased)."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key]
            for g in optimizer.param_groups]


def _set_group_value(group: dict[str, Any], key: str, value: Any) -> None:
    if isinstance(group[key], Tensor):
        group[key].fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value


def _format_param(name: str, optimizer: Optimizer, param: Any) -> list[Any]:
    """``param`` once per parameter group: a list or tuple of one value per group,
    or a single value repeated (tensor values copied)."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(param)} values, param_groups has {len(optimizer.param_groups)}."
            )
    else:
        param = [param] * len(optimizer.param_groups)
    return [p.clone() if isinstance(p, Tensor) else p for p in param]


def _check_optimizer(optimizer: Any) -> None:
    """TypeError unless ``optimizer`` is an ``Optimizer``."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    """Base class of the schedulers: subclasses implement ``get_lr()``, the next
    lr of each group (``last_epoch`` has already advanced when it is called).

    Args:
        optimizer: the optimizer whose groups' ``lr`` this scheduler sets.
        last_epoch: index of the last epoch; -1 (the default) starts afresh.
            Only pass another value when resuming: every group then needs an
            ``initial_lr``.
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0 (load the optimizer's state "
                        "first, or start with last_epoch=-1)"
                    )
        self.base_lrs: list[Any] = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_step_calls(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[Any]:
        """The learning rates the last ``step()`` set, one per group."""
        return self._last_lr

    def get_lr(self) -> list[Any]:
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    "before `lr_scheduler.step()`.", UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                    "You should call them in the opposite order: `optimizer.step()` before "
                    "`lr_scheduler.step()`. Failure to do this will result in skipping the "
                    "first value of the learning rate schedule.", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            compute = self.get_lr
        else:
            self.last_epoch = epoch
            compute = getattr(self, "_get_closed_form_lr", None) or self.get_lr
        self._set_lrs(self._within_step(compute))

    def _within_step(self, compute: Callable[[], list[Any]]) -> list[Any]:
        """``compute()`` (``get_lr`` or the closed form) as a step calls it: without
        the warning ``get_lr`` gives when called from outside."""
        self._get_lr_called_within_step = True
        try:
            return compute()
        finally:
            self._get_lr_called_within_step = False

    def _set_lrs(self, values: list[Any]) -> None:
        """Set each group's ``lr`` (a tensor lr in place) and note them as the last."""
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr: list[Any] = _group_values(self.optimizer, "lr")

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=3)

    # -- the shapes of the schedules' two forms ---------------------------------------

    def _current(self) -> list[Any]:
        """The groups' lrs as they are (a step that changes nothing)."""
        return _group_values(self.optimizer, "lr")

    def _scaled(self, factor: Any) -> list[Any]:
        """Each group's current lr times ``factor`` (the recursive form)."""
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _from_base(self, factor: Any) -> list[Any]:
        """Each group's initial lr times ``factor`` (the closed form)."""
        return [base_lr * factor for base_lr in self.base_lrs]


_LRScheduler = LRScheduler


def _track_step_calls(opt: Optimizer) -> None:
    """Wrap ``opt.step`` (once) so the schedulers can tell whether it ran before
    their first ``step()`` (they warn when it did not)."""
    if hasattr(opt.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = weakref.ref(opt)
    func = opt.step.__func__  # type: ignore[attr-defined]

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        o = opt_ref()
        o._opt_called = True  # type: ignore[union-attr]
        return func(o, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
    opt.step = wrapper  # type: ignore[method-assign]
