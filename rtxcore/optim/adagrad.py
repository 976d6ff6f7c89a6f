"""``Adagrad``, as ``torch.optim.Adagrad``."""

from __future__ import annotations

from typing import Any

from ..ops.creation import full_like
from .optimizer import Optimizer, _check_nonneg, _scalar, implementation_options

__all__ = ["Adagrad"]


def _validate(o: dict[str, Any]) -> None:
    _check_nonneg(o["lr"], "learning rate")
    _check_nonneg(o["lr_decay"], "lr_decay value")
    _check_nonneg(o["weight_decay"], "weight_decay value")
    _check_nonneg(o["initial_accumulator_value"], "initial_accumulator_value value")
    _check_nonneg(o["eps"], "epsilon value")


class Adagrad(Optimizer):
    r"""Adagrad (Duchi et al.): each coordinate's step is scaled by the root of
    the sum of its squared gradients.

    Per parameter at step t, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p                   if weight_decay != 0
        clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g * g
        p = p - clr * g / (sqrt(sum) + eps)

    State (made for every parameter when the optimizer is built, as PyTorch
    does): ``step`` (a Python int) and ``sum``, which starts at
    ``initial_accumulator_value``, on the parameter's device.
    """

    _param_shaped_state = ("sum",)

    def __init__(self, params: Any, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, *, maximize: bool = False,
                 foreach: bool | None = None, fused: bool | None = None,
                 differentiable: bool = False) -> None:
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "maximize": maximize}
        _validate(defaults)
        defaults.update(implementation_options("Adagrad", foreach=foreach, fused=fused,
                                               differentiable=differentiable))
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = 0
                st["sum"] = full_like(p, group["initial_accumulator_value"])

    _validate = staticmethod(_validate)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def _update(self, group: dict[str, Any]) -> None:
        lr = _scalar(group["lr"])
        lr_decay = group["lr_decay"]
        eps = group["eps"]

        def init(st: dict[str, Any], p: Any) -> None:  # (added by add_param_group later)
            st["sum"] = full_like(p, group["initial_accumulator_value"])

        for p, g, st, step in self._grads(group, init):
            clr = lr / (1 + (step - 1) * lr_decay)
            state_sum = st["sum"]
            state_sum.add_(g.mul(g))  # addcmul_(g, g, value=1)
            std = state_sum.sqrt().add_(eps)
            p.add_(g.mul(-clr).div_(std))  # addcdiv_(g, std, value=-clr)
