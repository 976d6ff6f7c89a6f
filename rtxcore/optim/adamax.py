"""``Adamax``, as ``torch.optim.Adamax``."""

from __future__ import annotations

from typing import Any

from .adam import _validate
from .optimizer import Optimizer, _hyper, _lerp_

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
    _restored_options = {"maximize": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, self._options(
            "Adamax", {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                       "maximize": maximize},
            foreach=foreach, capturable=capturable, differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps = _hyper(group, "lr", "betas", "eps")
        for p, g, st, step in self._grads(group, zeroed=("exp_avg", "exp_inf")):
            exp_avg, exp_inf = st["exp_avg"], st["exp_inf"]
            _lerp_(exp_avg, g, 1 - beta1)
            exp_inf.mul_(beta2).maximum_(g.abs().add_(eps))
            clr = lr / (1 - beta1 ** step)
            p.add_(exp_avg.mul(-clr).div_(exp_inf))  # addcdiv_(exp_avg, exp_inf, value=-clr)
