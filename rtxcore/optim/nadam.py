"""``NAdam``, as ``torch.optim.NAdam``."""

from __future__ import annotations

from typing import Any

from .adam import _validate as _validate_adam
from .optimizer import Optimizer, _check_nonneg_options, _hyper, _lerp_, _scalar

__all__ = ["NAdam"]


def _validate(o: dict[str, Any]) -> None:
    _validate_adam(o)
    _check_nonneg_options(o, "momentum_decay")


class NAdam(Optimizer):
    r"""NAdam (Dozat): Adam with Nesterov momentum and a momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``.

    Per parameter at step t, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p           (coupled; or p *= 1 - lr * weight_decay
                                            when decoupled_weight_decay)
        mu_product = mu_product * mu_t
        m = beta1 * m + (1 - beta1) * g    (as m.lerp_(g, 1 - beta1))
        v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom
        p = p - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    State: ``step`` (a Python int), ``mu_product`` (a Python float; a tensor
    loaded from a PyTorch checkpoint is read as a number), ``exp_avg`` and
    ``exp_avg_sq``, on the parameter's device.
    """

    _param_shaped_state = ("exp_avg", "exp_avg_sq")
    _restored_options = {"maximize": False, "decoupled_weight_decay": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, self._options(
            "NAdam", {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                      "momentum_decay": momentum_decay,
                      "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize},
            foreach=foreach, capturable=capturable, differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps, wd, momentum_decay, decoupled = _hyper(
            group, "lr", "betas", "eps", "weight_decay", "momentum_decay",
            "decoupled_weight_decay")

        def init(st: dict[str, Any], p: Any) -> None:
            st["mu_product"] = 1.0

        for p, g, st, step in self._grads(group, init, coupled_weight_decay=not decoupled,
                                          zeroed=("exp_avg", "exp_avg_sq")):
            if decoupled and wd != 0:
                p.mul_(1 - lr * wd)
            bias_correction2 = 1 - beta2 ** step
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product = st["mu_product"] = _scalar(st["mu_product"]) * mu
            exp_avg, exp_avg_sq = st["exp_avg"], st["exp_avg_sq"]
            _lerp_(exp_avg, g, 1 - beta1)
            exp_avg_sq.mul_(beta2).add_(g.mul(1 - beta2).mul_(g))  # addcmul_(g, g, 1 - beta2)
            denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)
            mu_product_next = mu_product * mu_next
            # two addcdiv_ steps, as PyTorch takes them
            p.add_(g.mul(-lr * (1.0 - mu) / (1.0 - mu_product)).div_(denom))
            p.add_(exp_avg.mul(-lr * mu_next / (1.0 - mu_product_next)).div_(denom))
