"""Schedulers whose lr is a function of the epoch: ``LambdaLR``,
``MultiplicativeLR``, ``StepLR``, ``MultiStepLR``, ``ConstantLR``, ``LinearLR``,
``ExponentialLR``, ``PolynomialLR``, ``CosineAnnealingLR`` and
``CosineAnnealingWarmRestarts``.

Each computes its next lr in PyTorch's recursive form (``get_lr``, from the
groups' current lrs) and, but for the two lambda schedulers, in its closed form
(``_get_closed_form_lr``, from the initial lrs and the epoch; ``step(epoch)``
uses it), both written on the base's ``_scaled`` / ``_from_base``.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ..optimizer import Optimizer
from .base import LRScheduler

__all__ = ["ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "ExponentialLR",
           "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "PolynomialLR", "StepLR"]


def _cosine(eta_min: float, base_lr: Any, t: float, period: float) -> Any:
    """Cosine annealing's closed form: ``base_lr`` at t = 0 down to ``eta_min`` at
    t = ``period``."""
    return eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * t / period)) / 2


def _lambdas(optimizer: Optimizer, lr_lambda: Any) -> list[Callable[[int], float]]:
    """``lr_lambda`` once per parameter group (a function, or a list of one per group)."""
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(
            f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}"
        )
    return list(lr_lambda)


class LambdaLR(LRScheduler):
    """lr = initial lr * ``lr_lambda(epoch)``; ``lr_lambda`` is a function or a
    list of them, one per parameter group."""

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        """As the base's, with each lambda saved only when it is a callable object
        (its ``__dict__``), not a function or lambda (as None)."""
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                            for fn in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(LRScheduler):
    """Multiply each group's lr by ``lr_lambda(epoch)`` every epoch; ``lr_lambda``
    is a function or a list of them, one per parameter group."""

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    state_dict = LambdaLR.state_dict
    load_state_dict = LambdaLR.load_state_dict

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self._is_initial:
            return self._current()
        return [group["lr"] * lmbda(self.last_epoch)
                for lmbda, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return self._scaled(self.gamma)

    def _get_closed_form_lr(self) -> list[Any]:
        return self._from_base(self.gamma ** (self.last_epoch // self.step_size))


class MultiStepLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` at each epoch in ``milestones`` (by
    ``gamma**n`` at a milestone listed n times)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self.last_epoch not in self.milestones:
            return self._current()
        return self._scaled(self.gamma ** self.milestones[self.last_epoch])

    def _get_closed_form_lr(self) -> list[Any]:
        milestones = sorted(self.milestones.elements())
        return self._from_base(self.gamma ** bisect_right(milestones, self.last_epoch))


class ConstantLR(LRScheduler):
    """Multiply each group's lr by ``factor`` for the first ``total_iters`` epochs,
    then restore it."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return self._scaled(self.factor)
        if self.last_epoch != self.total_iters:
            return self._current()
        return self._scaled(1.0 / self.factor)

    def _get_closed_form_lr(self) -> list[Any]:
        return self._from_base(self.factor
                               + (self.last_epoch >= self.total_iters) * (1 - self.factor))


class LinearLR(LRScheduler):
    """Scale each group's lr by a factor going linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` epochs, then keep it."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self.last_epoch == 0:
            return self._scaled(self.start_factor)
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        delta = self.end_factor - self.start_factor
        return self._scaled(1.0 + delta / (self.total_iters * self.start_factor
                                           + (self.last_epoch - 1) * delta))

    def _get_closed_form_lr(self) -> list[Any]:
        return self._from_base(self.start_factor + (self.end_factor - self.start_factor)
                               * min(self.total_iters, self.last_epoch) / self.total_iters)


class ExponentialLR(LRScheduler):
    """Multiply each group's lr by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self._is_initial:
            return self._current()
        return self._scaled(self.gamma)

    def _get_closed_form_lr(self) -> list[Any]:
        return self._from_base(self.gamma ** self.last_epoch)


class PolynomialLR(LRScheduler):
    """Decay each group's lr as ``base_lr * (1 - epoch / total_iters) ** power``
    until ``total_iters``."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        return self._scaled(((1.0 - self.last_epoch / self.total_iters)
                             / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power)

    def _get_closed_form_lr(self) -> list[Any]:
        return self._from_base(
            (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power)


class CosineAnnealingLR(LRScheduler):
    r"""Cosine annealing from the initial lr down to ``eta_min`` over ``T_max``
    epochs (then back up, periodically), in PyTorch's recursive form::

        lr_t = eta_min + (lr_{t-1} - eta_min)
                         * (1 + cos(pi t / T_max)) / (1 + cos(pi (t-1) / T_max))

    which follows ``eta_min + (base_lr - eta_min) * (1 + cos(pi t / T_max)) / 2``.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and self.last_epoch > 0:
            return self._get_closed_form_lr()
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"]
                    + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min
                for group in groups]

    def _get_closed_form_lr(self) -> list[Any]:
        return [_cosine(self.eta_min, base_lr, self.last_epoch, self.T_max)
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    r"""Cosine annealing with warm restarts (SGDR): within a period of ``T_i``
    epochs, ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi T_cur / T_i)) / 2``;
    the first period is ``T_0`` long, each next one ``T_mult`` times longer.

    ``step(epoch)`` takes a fractional epoch (e.g. ``epoch + i / iters``) to
    anneal within an epoch.
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        return [_cosine(self.eta_min, base_lr, self.T_cur, self.T_i) for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:  # type: ignore[override]
        """Advance one epoch, or jump to ``epoch`` (which may be fractional)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self._within_step(self.get_lr))
