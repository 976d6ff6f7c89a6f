"""``SGD``: stochastic gradient descent with momentum, dampening, Nesterov
momentum, weight decay and ``maximize``, as ``torch.optim.SGD``."""

from __future__ import annotations

from typing import Any

from ..ops.core import empty, kernel, view_of
from ..tensor import Tensor
from .optimizer import Optimizer, _check_nonneg_options, _grad_term, _hyper

__all__ = ["SGD"]


def _step_(p: Tensor, g: Tensor, lr: float) -> None:
    """``p.add_(g, alpha=-lr)``. For a float gradient of the parameter's shape,
    dtype and device (the usual case), its two kernels called directly: the
    in-place op's general checks (broadcasting, casting, overlap) have nothing
    to do there."""
    if (type(lr) is float and g._dtype is p._dtype and p._dtype.kind == "f"
            and g._shape == p._shape and g._device is p._device
            and g._storage is not p._storage and p.is_contiguous()):
        dev = p._device
        scaled = empty(p._shape, p._dtype, dev)
        (dev.kernels.get("mul") or kernel(dev, "mul"))(scaled._h, view_of(g), -lr)
        target = view_of(p)
        (dev.kernels.get("add") or kernel(dev, "add"))(target, target, scaled._h)
        p._storage.version += 1
    else:
        p.add_(g, alpha=-lr)


def _validate(o: dict[str, Any]) -> None:
    _check_nonneg_options(o, "lr", "momentum", "weight_decay")
    if o["nesterov"] and (o["momentum"] <= 0 or o["dampening"] != 0):
        raise ValueError("Nesterov momentum requires a momentum and zero dampening")


class SGD(Optimizer):
    r"""Stochastic gradient descent (optionally with momentum).

    Per parameter, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p                       if weight_decay != 0
        b = g (first step),  b = momentum * b + (1 - dampening) * g   if momentum != 0
        g = g + momentum * b  (nesterov)  or  g = b
        p = p - lr * g

    The momentum buffer is ``state[p]['momentum_buffer']``; parameters whose
    ``.grad`` is None are skipped.
    """

    _param_shaped_state = ("momentum_buffer",)
    _restored_options = {"nesterov": False, "maximize": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False,
                 foreach: bool | None = None, fused: bool | None = None,
                 differentiable: bool = False) -> None:
        super().__init__(params, self._options(
            "SGD", {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize},
            foreach=foreach, fused=fused, differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, momentum, dampening, wd, nesterov, maximize = _hyper(
            group, "lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")
        state = self.state
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize or wd != 0:
                g = _grad_term(p, g, maximize, wd)
            if momentum != 0:
                st = state[p]
                buf = st.get("momentum_buffer")
                if buf is None:
                    buf = st["momentum_buffer"] = g.detach().clone()
                else:
                    buf.mul_(momentum).add_(g, alpha=1 - dampening)
                g = g.add(buf, alpha=momentum) if nesterov else buf
            _step_(p, g, lr)
