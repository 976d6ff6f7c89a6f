"""``RMSprop``, as ``torch.optim.RMSprop``."""

from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, _check_nonneg_options, _hyper, _lerp_

__all__ = ["RMSprop"]


def _validate(o: dict[str, Any]) -> None:
    _check_nonneg_options(o, "lr", "eps", "momentum", "weight_decay", "alpha")


class RMSprop(Optimizer):
    r"""RMSprop (Hinton), optionally centered and with momentum.

    Per parameter, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p                   if weight_decay != 0
        v = alpha * v + (1 - alpha) * g * g
        centered: ga = lerp(ga, g, 1 - alpha);  avg = sqrt(v - ga * ga) + eps
        else:     avg = sqrt(v) + eps
        momentum > 0: b = momentum * b + g / avg;  p = p - lr * b
        else:         p = p - lr * g / avg

    State: ``step`` (a Python int), ``square_avg``, and ``momentum_buffer`` /
    ``grad_avg`` when used, on the parameter's device.
    """

    _param_shaped_state = ("square_avg", "momentum_buffer", "grad_avg")
    _restored_options = {"momentum": 0, "centered": False, "maximize": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, *,
                 maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, self._options(
            "RMSprop", {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                        "centered": centered, "weight_decay": weight_decay, "maximize": maximize},
            foreach=foreach, capturable=capturable, differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, alpha, eps, momentum, centered = _hyper(
            group, "lr", "alpha", "eps", "momentum", "centered")
        w = 1 - alpha
        zeroed = ("square_avg", *(("momentum_buffer",) if momentum > 0 else ()),
                  *(("grad_avg",) if centered else ()))
        for p, g, st, step in self._grads(group, zeroed=zeroed):
            square_avg = st["square_avg"]
            square_avg.mul_(alpha).add_(g.mul(w).mul_(g))  # addcmul_(g, g, value=1 - alpha)
            if centered:
                grad_avg = st["grad_avg"]
                _lerp_(grad_avg, g, w)
                avg = square_avg.sub(grad_avg.mul(grad_avg)).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg.add_(eps)
            if momentum > 0:
                buf = st["momentum_buffer"]
                buf.mul_(momentum).add_(g.div(avg))  # addcdiv_(g, avg)
                p.add_(buf, alpha=-lr)
            else:
                p.add_(g.mul(-lr).div_(avg))  # addcdiv_(g, avg, value=-lr)
