"""``Adagrad``, as ``torch.optim.Adagrad``."""

from __future__ import annotations

from typing import Any

from ..ops.creation import full_like
from .optimizer import Optimizer, _check_nonneg_options, _hyper

__all__ = ["Adagrad"]


def _validate(o: dict[str, Any]) -> None:
    _check_nonneg_options(o, "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")


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
    _restored_options = {"maximize": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, *, maximize: bool = False,
                 foreach: bool | None = None, fused: bool | None = None,
                 differentiable: bool = False) -> None:
        super().__init__(params, self._options(
            "Adagrad", {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                        "initial_accumulator_value": initial_accumulator_value,
                        "maximize": maximize},
            foreach=foreach, fused=fused, differentiable=differentiable))
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = 0
                st["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, group: dict[str, Any]) -> None:
        lr, lr_decay, eps = _hyper(group, "lr", "lr_decay", "eps")

        def init(st: dict[str, Any], p: Any) -> None:  # (added by add_param_group later)
            st["sum"] = full_like(p, group["initial_accumulator_value"])

        for p, g, st, step in self._grads(group, init):
            clr = lr / (1 + (step - 1) * lr_decay)
            state_sum = st["sum"]
            state_sum.add_(g.mul(g))  # addcmul_(g, g, value=1)
            std = state_sum.sqrt().add_(eps)
            p.add_(g.mul(-clr).div_(std))  # addcdiv_(g, std, value=-clr)
