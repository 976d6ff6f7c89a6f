"""Losses: regression (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``),
classification (``nll_loss``, ``cross_entropy``, ``binary_cross_entropy`` and its
``_with_logits`` form) and ``kl_div``, with PyTorch's reductions and legacy
``size_average`` / ``reduce`` arguments.

``cross_entropy`` over class indices is one Function with the fused backward
``(softmax(x) - onehot(target)) * weight * grad``; ``binary_cross_entropy`` one
with PyTorch's gradient, finite at inputs of exactly 0 and 1. Both backwards are
public ops again under ``create_graph``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import dtype as D
from ...amp.autocast_mode import autocast_inputs, regions as _autocast_regions
from ...autograd.function import Function
from ...autograd.grad_mode import _state, no_grad
from ...ops import elementwise as E
from ...ops import reduction as R
from ...ops.checks import check_range, deferred, queue_check
from ...ops.core import empty, own_kernel, view_of
from ...ops.core import reduce as reduce_
from ...ops.core import kernel as _kernel
from ...ops.creation import full
from ...tensor import Tensor
from ._args import _check_tensor, _shape
from .activations import _softplus_neg

__all__ = [
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
]


_REDUCTIONS = ("mean", "sum", "none")


def _reduction(size_average: Any, reduce: Any, reduction: str, stacklevel: int = 3) -> str:
    """The reduction string, from the legacy ``size_average``/``reduce`` pair when given
    (its deprecation warning ``stacklevel`` frames up: the loss's caller)."""
    if size_average is not None or reduce is not None:
        sa = True if size_average is None else bool(size_average)
        rd = True if reduce is None else bool(reduce)
        reduction = "mean" if sa and rd else ("sum" if rd else "none")
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", stacklevel=stacklevel)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction "
                         f"(expected one of 'mean', 'sum', 'none')")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_target_size(input: Tensor, target: Tensor, stacklevel: int = 3) -> None:
    if target._shape != input._shape:
        warnings.warn(
            f"Using a target size ({_shape(target)}) that is different to the input size "
            f"({_shape(input)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.", stacklevel=stacklevel)


def _index_bounds(t: Tensor) -> tuple[int, int]:
    """The smallest and largest of a non-empty integer tensor, read to the host
    once (where ``amin().item()`` and ``amax().item()`` would sync twice)."""
    arr = _kernel(t._device, "to_host")(view_of(t))
    return int(arr.min()), int(arr.max())


def _weighted_loss(fn: str, loss: Tensor, input: Tensor, weight: Tensor | None,
                   reduction: str, mean_by_weight: bool) -> Tensor:
    if weight is None:
        return _reduce(loss, reduction)
    if weight._shape != input._shape:
        raise ValueError(f"{fn}: weights and input must have the same size (weight "
                         f"{_shape(weight)}, input {_shape(input)})")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def _difference_loss(fn: str, of: Callable[[Tensor], Tensor], input: Tensor, target: Tensor,
                     weight: Tensor | None, size_average: Any, reduce: Any,
                     reduction: str) -> Tensor:
    """``of(input - target)``, weighted and reduced (mse_loss, l1_loss); warnings
    point at the loss's caller."""
    reduction = _reduction(size_average, reduce, reduction, stacklevel=4)
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    _warn_target_size(input, target, stacklevel=4)
    return _weighted_loss(fn, of(input - target), input, weight, reduction, True)


def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    return _difference_loss("mse_loss", lambda d: d * d, input, target, weight, size_average,
                            reduce, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    return _difference_loss("l1_loss", lambda d: d.abs(), input, target, weight, size_average,
                            reduce, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: L1)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target = autocast_inputs("loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta (got {beta}).")
    _warn_target_size(input, target)
    d = input - target
    ad = d.abs()
    if beta == 0.0:
        return _reduce(ad, reduction)
    loss = E.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    reduction = _reduction(None, None, reduction)
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta (got {delta}).")
    _warn_target_size(input, target)
    d = input - target
    ad = d.abs()
    loss = E.where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)
    return _weighted_loss("huber_loss", loss, input, weight, reduction, False)


def _check_target_batch(input: Tensor, target: Tensor) -> None:
    """(N, C, d1, ...) input against (N, d1, ...) class-index target."""
    if target.ndim >= 1 and input._shape[0] != target._shape[0]:
        raise ValueError(f"Expected input batch_size ({input._shape[0]}) to match target "
                         f"batch_size ({target._shape[0]}) (input shape {_shape(input)}, "
                         f"target shape {_shape(target)}).")
    expected = input._shape[:1] + input._shape[2:]
    if target._shape != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target._shape)} "
                           f"(input shape {_shape(input)})")


def _index_targets(fn: str, input: Tensor, target: Tensor,
                   weight: Tensor | None) -> tuple[Tensor, Tensor, bool, int]:
    """Check (input, class-index target, weight); return them batched (an unbatched
    (C,) input gains N = 1) as (input, int64 target, unbatched, C)."""
    if target._dtype.kind not in "iu":
        raise RuntimeError(f"{fn}: expected target of class indices with dtype int64, but got "
                           f"{target._dtype.name} (for class probabilities, pass a float target "
                           f"of the input's shape {_shape(input)})")
    if input.ndim == 0:
        raise ValueError(f"{fn}: input must have at least 1 dim (C,) or 2 (N, C, ...), got a 0-d tensor")
    unbatched = input.ndim == 1
    if unbatched:
        if target.ndim != 0:
            raise ValueError(f"{fn}: for an unbatched input of shape {_shape(input)} the target must "
                             f"be 0-d, got shape {_shape(target)}")
        input, target = input.unsqueeze(0), target.reshape(1)
    else:
        _check_target_batch(input, target)
    c = input._shape[1]
    if weight is not None and (weight.ndim != 1 or weight._shape[0] != c):
        raise RuntimeError(f"{fn}: weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(weight._shape)}")
    if target._dtype is not D.int64:
        target = target.to(D.int64)
    return input, target, unbatched, c


def _select_targets(fn: str, logp: Tensor, target: Tensor, weight: Tensor | None,
                    ignore_index: int, c: int) -> tuple[Tensor, Tensor | None, Tensor]:
    """(idx, wt, picked): ``logp`` (N, C, ...) at the target classes, (N, 1, ...), times
    ``wt``, the targets' weights (0 where ignored); ``wt`` is None when no target is
    ignored and there is no weight (the common case: one gather, no mask)."""
    idx = target.unsqueeze(1)
    if weight is None and not 0 <= ignore_index < c and not deferred(target._device):
        try:
            return idx, None, logp.gather(1, idx)  # gather checks the range too
        except IndexError:
            pass  # ignored targets, or out of range: sorted out below
    valid = target != ignore_index
    safe = E.where(valid, target, 0)
    check_range(safe, 0, c, lambda bad: IndexError(
        f"{fn}: Target {bad} is out of bounds (input has {c} classes; "
        f"ignore_index={ignore_index})."))
    idx = safe.unsqueeze(1)
    if weight is not None:
        wt = E.where(valid, weight[safe], 0.0).to(logp._dtype)
    else:
        wt = valid.to(logp._dtype)
    wt = wt.unsqueeze(1)
    return idx, wt, logp.gather(1, idx) * wt


def _reduce_picked(picked: Tensor, wt: Tensor | None, reduction: str) -> Tensor:
    """The loss from ``picked`` (weighted log-probabilities of the targets): a weighted
    mean divides by the total weight of the non-ignored targets, as PyTorch."""
    if reduction == "none":
        return -picked.squeeze(1)
    s = picked.sum()
    if reduction == "sum":
        return -s
    return s / -(float(picked.numel()) if wt is None else wt.sum())


def _nll(fn: str, logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
         reduction: str) -> Tensor:
    logp, target, unbatched, c = _index_targets(fn, logp, target, weight)
    _, wt, picked = _select_targets(fn, logp, target, weight, ignore_index, c)
    out = _reduce_picked(picked, wt, reduction)
    return out.squeeze(0) if unbatched and reduction == "none" else out


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices, ``input`` holding log-probabilities
    (N, C) / (N, C, d1, ...) / (C,); a weighted mean divides by the weights of the
    non-ignored targets."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, weight = autocast_inputs("loss", input, weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("nll_loss", "input", input)
    _check_tensor("nll_loss", "target", target)
    return _nll("nll_loss", input, target, weight, ignore_index, reduction)


class _CrossEntropy(Function):
    """log_softmax + the negative log likelihood of class indices, with the fused
    backward ``(softmax(x) - onehot(target)) * weight * grad``: a few ops instead
    of the backward of each step. Input (N, C, ...), target (N, ...) int64."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, target: Tensor, weight: Tensor | None,
                ignore_index: int, reduction: str, c: int) -> Tensor:
        k = own_kernel(input._device, "log_softmax", input._dtype)
        if k is not None and input._dtype.kind == "f" and input.numel():
            logp = empty(input._shape, input._dtype, input._device)
            k(logp._h, view_of(input), 1)
        else:
            logp = R.log_softmax(input, 1)
        bounds = (_index_bounds(target) if weight is None and not 0 <= ignore_index < c
                  and target.numel() and target._device is logp._device
                  and not deferred(target._device) else (-1, c))
        if 0 <= bounds[0] and bounds[1] < c:
            # no weights, every target a class (none ignored): the gather kernel
            idx, wt = target.unsqueeze(1), None
            picked = empty(idx._shape, logp._dtype, logp._device)
            _kernel(logp._device, "gather")(picked._h, view_of(logp), 1, view_of(idx))
        else:  # ignored targets, weights, or out of range (its error)
            idx, wt, picked = _select_targets("cross_entropy", logp, target, weight, ignore_index,
                                              c)
        if reduction == "none":
            out = -picked.squeeze(1)
            denom = None
        else:
            s = picked.sum()
            if reduction == "mean" and wt is None:
                denom = float(picked.numel())
                out = s.div_(-denom)  # s is fresh: divided in place
            else:
                denom = wt.sum() if reduction == "mean" else None
                out = -s if denom is None else s / -denom
        ctx.save_for_backward(input, logp)
        ctx.bw = (idx, wt, denom)
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        input, logp = ctx.saved_tensors
        idx, wt, denom = ctx.bw
        if ctx.args[4] == "none":
            g = g.unsqueeze(1)
        elif denom is not None:
            g = g / denom
        if wt is not None:
            g = g * wt
        minus = full(idx._shape, -1.0, dtype=logp._dtype, device=logp._device)
        if _state.enabled:
            # create_graph: softmax of the (recorded) input, so this differentiates again
            d = R.softmax(input, 1).scatter_add(1, idx, minus)
            return d * g, None, None, None, None, None
        # forward's gather checked the targets: the kernel in place into the fresh exp
        d = logp.exp()
        _kernel(d._device, "scatter_add")(view_of(d), 1, view_of(idx), view_of(minus))
        return d.mul_(g), None, None, None, None, None


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim (1, or 0 for an unbatched (C,) input), then
    the negative log likelihood of ``target``: class indices (int64, (N,) or
    (N, d1, ...)) or class probabilities (float, the input's shape)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have at least 1 dim (C,) or 2 (N, C, ...), "
                         "got a 0-d tensor")
    if target._shape == input._shape:  # class probabilities
        if target._dtype.kind != "f":
            raise RuntimeError(f"cross_entropy: expected floating point type for target with class "
                               f"probabilities, got {target._dtype.name}")
        cdim = 0 if input.ndim == 1 else 1
        c = input._shape[cdim]
        return _ce_probs(R.log_softmax(input, cdim), target, weight, reduction, label_smoothing,
                         cdim, c, (c,) + (1,) * (input.ndim - cdim - 1))
    x, t, unbatched, c = _index_targets("cross_entropy", input, target, weight)
    if label_smoothing == 0.0:
        out = _CrossEntropy.apply(x, t, weight, ignore_index, reduction, c)
        return out.squeeze(0) if unbatched and reduction == "none" else out
    # label smoothing, as PyTorch: (1 - eps) * nll + eps / C * (the loss against uniform targets)
    logp = R.log_softmax(x, 1)
    _, wt, picked = _select_targets("cross_entropy", logp, t, weight, ignore_index, c)
    nll = _reduce_picked(picked, wt, reduction)
    if weight is not None:
        smooth = -(logp * weight.reshape((c,) + (1,) * (x.ndim - 2))).sum(1)
    else:
        smooth = -logp.sum(1)
    ignored = t == ignore_index
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == "mean":
        if weight is not None:
            tw = E.where(ignored, 0.0, weight[E.where(ignored, 0, t)])
            ret = smooth.sum() / tw.sum()
        else:
            ret = smooth.sum() / ignored.logical_not().sum()
    elif reduction == "sum":
        ret = smooth.sum()
    else:
        ret = smooth
    out = nll * (1.0 - label_smoothing) + ret * (label_smoothing / c)
    return out.squeeze(0) if unbatched and reduction == "none" else out


def _ce_probs(logp: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
              label_smoothing: float, cdim: int, c: int, wshape: tuple[int, ...]) -> Tensor:
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / c
    prod = logp * target
    if weight is not None:
        if weight.ndim != 1 or weight._shape[0] != c:
            raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all {c} "
                               f"classes or no classes but got weight tensor of shape: "
                               f"{list(weight._shape)}")
        prod = prod * weight.reshape(wshape)
    if reduction == "none":
        return -prod.sum(cdim)
    if reduction == "sum":
        return -prod.sum()
    n = logp.numel() // c if c else 0
    return -prod.sum() / n if n else prod.sum() * math.nan


_BCE_EPS = float(np.float32(1e-12))  # PyTorch's EPSILON in the BCE backward, a float


class _BCE(Function):
    """Elementwise binary cross entropy with PyTorch's gradient, which stays finite
    at inputs of exactly 0 and 1: d/dx = (x - t) / max(x (1 - x), 1e-12)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, t: Tensor) -> Tensor:
        ctx.save_for_backward(x, t)
        log_x = x.log().clamp(min=-100.0)
        log_1mx = E.log1p(-x).clamp(min=-100.0)
        return -(log_1mx + t * (log_x - log_1mx))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        x, t = ctx.saved_tensors
        nx, nt = ctx.needs_input_grad
        gx = gt = None
        if nx:
            gx = g * (x - t) / (x * (1.0 - x)).clamp(min=_BCE_EPS)
        if nt:
            gt = g * (E.log1p(-x).clamp(min=-100.0) - x.log().clamp(min=-100.0))
        return gx, gt


def _check_probabilities(input: Tensor) -> None:
    """Every element of ``input`` in [0, 1] (NaN is not), else RuntimeError naming
    the range found; on an ``async_errors`` device at the next read back (a flag
    queued with the op, as index checks are), not by waiting for the device now."""
    def error(lo: float, hi: float) -> RuntimeError:
        return RuntimeError(f"binary_cross_entropy: all elements of input should be between 0 "
                            f"and 1 (got values in [{lo}, {hi}]); for logits use "
                            "binary_cross_entropy_with_logits")

    if not deferred(input._device):
        lo, hi = float(input.amin().item()), float(input.amax().item())
        if not (lo >= 0.0 and hi <= 1.0):
            raise error(lo, hi)
        return
    with no_grad():
        outside = E.logical_not(E.logical_and(E.ge(input, 0.0), E.le(input, 1.0)))
        flag = reduce_("max", outside, tuple(range(outside.ndim)), False)

    def make_error(read: Any) -> Exception:
        arr = read(input.detach())
        lo, hi = float(np.min(arr)), float(np.max(arr))
        if lo >= 0.0 and hi <= 1.0:  # (written over since the op ran)
            return RuntimeError("binary_cross_entropy: all elements of input should be between 0 "
                                "and 1; some were not when it ran (the input has changed since); "
                                "for logits use binary_cross_entropy_with_logits")
        return error(lo, hi)

    queue_check(input._device, flag, make_error)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Tensor:
    """-w (t log x + (1 - t) log(1 - x)), each log clamped at -100, as PyTorch."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("binary_cross_entropy", "input", input)
    _check_tensor("binary_cross_entropy", "target", target)
    if target._shape != input._shape:
        raise ValueError(f"binary_cross_entropy: using a target size ({_shape(target)}) that is "
                         f"different to the input size ({_shape(input)}) is deprecated. Please "
                         "ensure they have the same size.")
    if input.numel():
        _check_probabilities(input)
    loss = _BCE.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: Any = None, reduce: Any = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """BCE of sigmoid(input), computed stably from the logits:
    (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight, pos_weight = autocast_inputs("loss", input, target, weight, pos_weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("binary_cross_entropy_with_logits", "input", input)
    _check_tensor("binary_cross_entropy_with_logits", "target", target)
    if target._shape != input._shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target size ({_shape(target)}) must be "
                         f"the same as input size ({_shape(input)})")
    sp = _softplus_neg(input)
    if pos_weight is not None:
        sp = sp * ((pos_weight - 1.0) * target + 1.0)
    loss = (1.0 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Pointwise KL divergence ``target * (log target - input)`` (``input`` in log space)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target = autocast_inputs("loss", input, target)
    if reduction == "batchmean":
        red = "sum"
    else:
        red = _reduction(size_average, reduce, reduction)
        if red == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                          "support size.'batchmean' divides only by the batch size, and aligns with "
                          "the KL div math definition.'mean' will be changed to behave the same as "
                          "'batchmean' in the next major release.", stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        pos = target > 0
        safe = E.where(pos, target, 1.0)
        loss = E.where(pos, target * (safe.log() - input), 0.0)
    if reduction == "batchmean":
        n = input._shape[0] if input.ndim else 1
        return loss.sum() / n
    return _reduce(loss, red)
