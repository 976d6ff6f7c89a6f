"""``Adamax``, as ``torch.optim.Adamax``."""

from __future__ import annotations

from typing import Any

from ..ops.creation import zeros_like
from .adam import _validate
from .optimizer import Optimizer, _lerp_, _scalar, implementation_options

__all__ = ["Adamax"]


class Adamax(Optimizer):
    r"""Adamax (Kingma & Ba): Adam with the infinity norm in place of the second
    moment.

    Per parameter at step t, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p                   if weight_decay != 0
        m = beta1 * m + (1 - beta1) * g            (as m.lerp_(g, 1 - beta1))
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    State: ``step`` (a Python int), ``exp_avg`` (m) and ``exp_inf`` (u), on the
    parameter's device.
    """

    _param_shaped_state = ("exp_avg", "exp_inf")

    def __init__(self, params: Any, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "maximize": maximize}
        _validate(defaults)
        defaults["betas"] = tuple(_scalar(b) for b in betas)
        defaults.update(implementation_options("Adamax", foreach=foreach, capturable=capturable,
                                               differentiable=differentiable))
        super().__init__(params, defaults)

    _validate = staticmethod(_validate)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def _update(self, group: dict[str, Any]) -> None:
        lr = _scalar(group["lr"])
        beta1, beta2 = group["betas"]
        eps = group["eps"]

        def init(st: dict[str, Any], p: Any) -> None:
            st["exp_avg"] = zeros_like(p)
            st["exp_inf"] = zeros_like(p)

        for p, g, st, step in self._grads(group, init):
            exp_avg, exp_inf = st["exp_avg"], st["exp_inf"]
            _lerp_(exp_avg, g, 1 - beta1)
            exp_inf.mul_(beta2).maximum_(g.abs().add_(eps))
            clr = lr / (1 - beta1 ** step)
            p.add_(exp_avg.mul(-clr).div_(exp_inf))  # addcdiv_(exp_avg, exp_inf, value=-clr)
