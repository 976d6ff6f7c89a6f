"""``Adam`` and ``AdamW``, as ``torch.optim.Adam`` and ``torch.optim.AdamW``."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import _multi
from .optimizer import Optimizer, _check_nonneg_options, _grad_term, _hyper, _lerp_

__all__ = ["Adam", "AdamW"]


def _validate(o: dict[str, Any]) -> None:
    _check_nonneg_options(o, "lr", "eps")
    betas = o["betas"]
    try:
        b0, b1 = betas
    except (TypeError, ValueError):
        raise ValueError(f"betas must be a pair of floats, got {betas!r}") from None
    if not 0.0 <= b0 < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {b0}")
    if not 0.0 <= b1 < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {b1}")
    _check_nonneg_options(o, "weight_decay")


class Adam(Optimizer):
    r"""Adam (Kingma & Ba), with ``amsgrad``, ``maximize`` and, when
    ``decoupled_weight_decay=True``, AdamW's decoupled weight decay.

    Per parameter at step t, with g its gradient (negated when ``maximize``)::

        g = g + weight_decay * p           (coupled; or p *= 1 - lr * weight_decay)
        m = beta1 * m + (1 - beta1) * g    (as m.lerp_(g, 1 - beta1))
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)              (amsgrad: v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State: ``step`` (a Python int), ``exp_avg``, ``exp_avg_sq`` and with amsgrad
    ``max_exp_avg_sq``, on the parameter's device. Parameters whose ``.grad`` is
    None are skipped (their step count does not advance).
    """

    _param_shaped_state = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    _restored_options = {"amsgrad": False, "maximize": False, "decoupled_weight_decay": False}
    _validate = staticmethod(_validate)

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 maximize: bool = False,
                 foreach: bool | None = None, fused: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 decoupled_weight_decay: bool = False) -> None:
        super().__init__(params, self._options(
            "Adam", {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                     "amsgrad": amsgrad, "maximize": maximize,
                     "decoupled_weight_decay": decoupled_weight_decay},
            foreach=foreach, fused=fused, capturable=capturable, differentiable=differentiable))

    def _update(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps, wd, amsgrad, maximize = _hyper(
            group, "lr", "betas", "eps", "weight_decay", "amsgrad", "maximize")
        decoupled = group.get("decoupled_weight_decay", False)
        w1, w2 = 1 - beta1, 1 - beta2
        moments = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
        items = list(self._grads(group, raw=True, zeroed=moments if amsgrad else moments[:2]))
        if _multi.eligible(group, items) and _multi.state_like_params(items, moments):
            self._update_flat(group, items, lr, beta1, beta2, eps, wd, amsgrad, decoupled)
            return
        for p, g, st, step in items:
            g = _grad_term(p, g, maximize, 0 if decoupled else wd)
            if decoupled and wd != 0:
                p.mul_(1 - lr * wd)
            exp_avg, exp_avg_sq = st["exp_avg"], st["exp_avg_sq"]
            _lerp_(exp_avg, g, w1)
            exp_avg_sq.mul_(beta2).add_(g.mul(w2).mul_(g))  # addcmul_(g, g, value=w2)
            if isinstance(step, Tensor):  # capturable: the corrections as tensor ops
                bias_correction1 = 1 - beta1 ** step
                bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
                step_size = bias_correction1.reciprocal().mul_(-lr)
            else:
                bias_correction1 = 1 - beta1 ** step
                bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
                step_size = -lr / bias_correction1
            if amsgrad:
                vmax = st["max_exp_avg_sq"]
                vmax.maximum_(exp_avg_sq)
                denom = vmax.sqrt()
            else:
                denom = exp_avg_sq.sqrt()
            denom.div_(bias_correction2_sqrt).add_(eps)
            p.add_(exp_avg.mul(step_size).div_(denom))  # addcdiv_(m, denom, value=-step_size)

    def _update_flat(self, group: dict[str, Any], items: list[tuple[Any, ...]], lr: float,
                     beta1: float, beta2: float, eps: float, wd: float, amsgrad: bool,
                     decoupled: bool) -> None:
        """The loop above over the whole group at once (``_multi``): the same ops
        on flat buffers, so the same numbers."""
        params = [p for p, _, _, _ in items]
        states = [st for _, _, st, _ in items]
        shapes = [p._shape for p in params]
        step = items[0][3]
        cache = self.__dict__.setdefault("_flat_cache", {})
        key = id(group)
        g = _multi.flatten([g for _, g, _, _ in items])
        if group["maximize"]:
            g.neg_()
        if not decoupled and wd != 0:
            g = g.add(_multi.flatten(params), alpha=wd)
        exp_avg = _multi.flat_state(cache, key, states, "exp_avg", shapes)
        exp_avg_sq = _multi.flat_state(cache, key, states, "exp_avg_sq", shapes)
        w1, w2 = 1 - beta1, 1 - beta2
        bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
        step_size = -lr / (1 - beta1 ** step)
        decay = 1 - lr * wd if decoupled and wd != 0 else None
        if not amsgrad:
            update = _fused_moments(cache, key, g, exp_avg, exp_avg_sq, beta2, w1, w2,
                                    bias_correction2_sqrt, eps, step_size)
            if update is not None:
                _multi.add_pieces_(params, update, decay)
                return
        _lerp_(exp_avg, g, w1)
        exp_avg_sq.mul_(beta2).add_(g.mul(w2).mul_(g))
        if amsgrad:
            vmax = _multi.flat_state(cache, key, states, "max_exp_avg_sq", shapes)
            vmax.maximum_(exp_avg_sq)
            denom = vmax.sqrt()
        else:
            denom = exp_avg_sq.sqrt()
        denom.div_(bias_correction2_sqrt).add_(eps)
        update = exp_avg.mul(step_size).div_(denom)
        _multi.add_pieces_(params, update, decay)


def _moments_program(n: int, dt: str, w1: float) -> dict[str, Any]:
    """The flat step's moment updates and its update, as one fused elementwise
    program: the ops below ``_fused_moments``' call in ``_update_flat``, step by
    step, with the same operands in the same order (so the same roundings).
    Inputs: g, m, v, then the scalars w1 (or w1 - 1), beta2, w2, the bias
    correction's sqrt, eps and the step size, each one element of the step's
    dtype, as the kernels would convert the Python numbers. Outputs: m, v (in
    place) and the update."""
    st = lambda op, *xs: [op, dt, [list(x) for x in xs]]  # noqa: E731
    g, m, v = ("in", 0), ("in", 1), ("in", 2)
    c = [("scalar", i) for i in range(3, 9)]
    if w1 < 0.5:  # _lerp_: m + (g - m) * w1
        lerp = [st("sub", g, m), st("mul", ("step", 0), c[0]), st("add", m, ("step", 1))]
    else:  # its other side: (g - m) * (w1 - 1) + g
        lerp = [st("sub", g, m), st("mul", ("step", 0), c[0]), st("add", ("step", 1), g)]
    steps = lerp + [
        st("mul", v, c[1]),                   # 3: v * beta2
        st("mul", g, c[2]),                   # 4: g * w2
        st("mul", ("step", 4), g),            # 5: (g * w2) * g
        st("add", ("step", 3), ("step", 5)),  # 6: the new v
        st("sqrt", ("step", 6)),              # 7
        st("div", ("step", 7), c[3]),         # 8: / sqrt(1 - beta2**t)
        st("add", ("step", 8), c[4]),         # 9: + eps
        st("mul", ("step", 2), c[5]),         # 10: m * step size
        st("div", ("step", 10), ("step", 9)),  # 11: the update
    ]
    return {"n": n, "inputs": [dt] * 9, "steps": steps, "outputs": [2, 6, 11]}


def _fused_moments(cache: dict[Any, Any], key: Any, g: Tensor, m: Tensor, v: Tensor,
                   beta2: float, w1: float, w2: float, bc2_sqrt: float, eps: float,
                   step_size: float) -> Tensor | None:
    """``_update_flat``'s moments and update in one pass where the device runs
    fused programs (``Backend.fuse``: rtx_cpu as one C loop from 32K elements,
    else block by block): m and v updated in place, the update returned. None
    (the ops one by one) where it has no runner, or inside a trace (whose
    fusion pass builds such groups itself from the ops)."""
    from .._tracing import is_tracing
    from ..jit.fused import fused_runner
    from ..ops.alloc import as_tensor_on, as_view
    from ..ops.core import empty, view_of

    dev, dt, n = g._device, g._dtype, g._shape[0]
    # float32/float64 (a float16 step rounds every op to half, which a runner
    # computing in float need not), the state in the gradient's dtype and place
    # (after model.half() the per-parameter loop promotes instead)
    if is_tracing() or dt.name not in ("float32", "float64") or m._dtype is not dt or \
            v._dtype is not dt or m._device is not dev or v._device is not dev:
        return None
    rkey = (key, "moments", dev, n, dt.name, w1 < 0.5)
    fn = cache.get(rkey, False)
    if fn is False:
        fn = cache[rkey] = fused_runner(_moments_program(n, dt.name, w1), dev)
    if fn is None:
        return None
    scalars = as_tensor_on([w1 if w1 < 0.5 else w1 - 1, beta2, w2, bc2_sqrt, eps, step_size],
                           dev, dt)
    update = empty((n,), dt, dev)
    fn([view_of(m), view_of(v), view_of(update)],
       [view_of(g), view_of(m), view_of(v),
        *(view_of(as_view(scalars, (1,), (1,), i)) for i in range(6))])
    m._storage.version += 1
    v._storage.version += 1
    return update


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter): each step first
    scales the parameter by ``1 - lr * weight_decay``, then takes the Adam step
    without weight decay. ``weight_decay`` defaults to 1e-2."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
