"""``Adadelta``, as ``torch.optim.Adadelta``."""

from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, _check_nonneg_options, _hyper

__all__ = ["Adadelta"]


def _validate(o: dict[str, Any]) -> None:
    _check_nonneg_options(o, "lr")
    if not 0.0 <= o["rho"] <= 1.0:
        raise ValueError(f"Invalid rho value: {o['rho']}")
    _check_nonneg_options(o, "eps", "weight_decay")


class Adadelta(Optimizer):
    r"""Adadelta (Zeiler): steps scaled by the ratio of running RMS of past
    updates and of gradients.

    Per parameter, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p                   if weight_decay != 0
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta

    State: ``step`` (a Python int), ``square_avg`` (v) and ``acc_delta`` (u), on
    the parameter's device.
    """

    _param_shaped_state = ("square_avg", "acc_delta")
    _restored_options = {"maximize": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, self._options(
            "Adadelta", {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                         "maximize": maximize},
            foreach=foreach, capturable=capturable, differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, rho, eps = _hyper(group, "lr", "rho", "eps")
        w = 1 - rho
        for p, g, st, step in self._grads(group, zeroed=("square_avg", "acc_delta")):
            square_avg, acc_delta = st["square_avg"], st["acc_delta"]
            square_avg.mul_(rho).add_(g.mul(w).mul_(g))  # addcmul_(g, g, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_()
            delta.div_(std).mul_(g)
            # addcmul_(delta, delta, value=1 - rho)
            acc_delta.mul_(rho).add_(delta.mul(w).mul_(delta))
            p.add_(delta, alpha=-lr)
