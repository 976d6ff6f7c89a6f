"""Schedulers stepped every batch that move the lr (and the momentum) through
cycles: ``CyclicLR`` (triangular cycles between two bounds) and ``OneCycleLR``
(the 1cycle policy: one rise and one annealing), with the momentum cycling
inversely when ``cycle_momentum`` (``momentum``, or Adam's ``betas[0]``)."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from functools import partial
from typing import Any

from ..optimizer import Optimizer
from .base import LRScheduler, _check_optimizer, _format_param, _set_group_value

__all__ = ["CyclicLR", "OneCycleLR"]


def _check_momentum_support(optimizer: Optimizer) -> bool:
    """For ``cycle_momentum``: whether the optimizer's momentum is ``betas[0]``
    (Adam-like) rather than ``momentum``; ValueError when it has neither."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(
            "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
        )
    return "betas" in optimizer.defaults


def _set_momentum(group: dict[str, Any], momentum: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _start_momentum(optimizer: Optimizer, base_momentums: list[Any], max_momentums: list[Any],
                    use_beta1: bool, last_epoch: int) -> None:
    """A fresh cycle (``last_epoch == -1``) starts each group's momentum at its
    maximum, and notes both bounds in the group."""
    if last_epoch == -1:
        for m, b, group in zip(max_momentums, base_momentums, optimizer.param_groups):
            _set_momentum(group, m, use_beta1)
            group["max_momentum"] = m
            group["base_momentum"] = b


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith): each group's lr goes from ``base_lr`` up to
    ``max_lr`` in ``step_size_up`` steps and back in ``step_size_down``, the
    amplitude scaled per ``mode`` ("triangular", "triangular2", "exp_range") or
    by ``scale_fn``; with ``cycle_momentum`` the momentum (or Adam's beta1)
    cycles inversely between ``max_momentum`` and ``base_momentum``. Step it
    after every batch."""

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float],
                 max_lr: float | list[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular", gamma: float = 1.0,
                 scale_fn: Callable[[float], float] | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float = 0.8,
                 max_momentum: float = 0.9, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _check_momentum_support(optimizer)
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            _start_momentum(optimizer, self.base_momentums, self.max_momentums, self.use_beta1,
                            last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref: Callable[[float], float] = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        """The amplitude scale at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x: float) -> float:
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x: float) -> float:
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma: float, x: float) -> float:
        return gamma ** x

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * self.scale_fn(at)
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, b, m in zip(self.optimizer.param_groups, self.base_momentums,
                                   self.max_momentums):
                _set_momentum(group, m - (m - b) * scale_factor * self.scale_fn(at),
                              self.use_beta1)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """As the base's, without the scale function; a custom one is saved only when
        it is a callable object (its ``__dict__``), not a function or lambda."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom")
        super().load_state_dict(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)  # type: ignore[union-attr]
        self._init_scale_fn()


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith): lr rises from ``max_lr / div_factor`` to
    ``max_lr`` over the first ``pct_start`` of ``total_steps`` (or ``epochs *
    steps_per_epoch``), then anneals (``anneal_strategy`` "cos" or "linear") down
    to ``initial_lr / final_div_factor``; ``three_phase`` goes back to the
    initial lr first, symmetrically. With ``cycle_momentum`` the momentum (or
    Adam's beta1) moves inversely between ``max_momentum`` and
    ``base_momentum``. Step it after every batch."""

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")

        def phase(end_step: float, start_lr: str, end_lr: str, start_m: str,
                  end_m: str) -> dict[str, Any]:
            return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
                    "start_momentum": start_m, "end_momentum": end_m}

        if three_phase:
            self._schedule_phases = [
                phase(float(pct_start * self.total_steps) - 1, "initial_lr", "max_lr",
                      "max_momentum", "base_momentum"),
                phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                      "base_momentum", "max_momentum"),
                phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                      "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                phase(float(pct_start * self.total_steps) - 1, "initial_lr", "max_lr",
                      "max_momentum", "base_momentum"),
                phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum",
                      "max_momentum"),
            ]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy

        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for m, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _check_momentum_support(optimizer)
            max_ms = _format_param("max_momentum", optimizer, max_momentum)
            base_ms = _format_param("base_momentum", optimizer, base_momentum)
            _start_momentum(optimizer, base_ms, max_ms, self.use_beta1, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return self._annealing_cos(start, end, pct)
        return self._annealing_linear(start, end, pct)

    @staticmethod
    def _annealing_cos(start: float, end: float, pct: float) -> float:
        """Cosine from ``start`` (pct=0) to ``end`` (pct=1)."""
        cos_out = math.cos(math.pi * pct) + 1
        return end + (start - end) / 2.0 * cos_out

    @staticmethod
    def _annealing_linear(start: float, end: float, pct: float) -> float:
        """Linear from ``start`` (pct=0) to ``end`` (pct=1)."""
        return (end - start) * pct + start

    def get_lr(self) -> list[Any]:
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, ph in enumerate(self._schedule_phases):
                end_step = ph["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal_func(group[ph["start_lr"]], group[ph["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal_func(group[ph["start_momentum"]],
                                                     group[ph["end_momentum"]], pct)
                    break
                start_step = ph["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, momentum, self.use_beta1)
        return lrs

