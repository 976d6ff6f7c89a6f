"""Normalization: ``layer_norm`` (one Function with the closed-form backward, or the
backend's kernels), ``batch_norm``, ``group_norm``, ``instance_norm`` and
``normalize`` (division by the p-norm)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...amp.autocast_mode import autocast_inputs, regions as _autocast_regions
from ...autograd.function import Function
from ...autograd.grad_mode import _state, no_grad
from ...ops import elementwise as E
from ...ops import reduction as R
from ...ops.core import empty, own_kernel, view_of
from ...tensor import Tensor
from ._args import _check_tensor, _shape

__all__ = ["layer_norm", "batch_norm", "group_norm", "instance_norm", "normalize"]


def _moments(x: Tensor, dims: Any) -> tuple[Tensor, Tensor, Tensor]:
    """(mean, x - mean, biased variance) of ``x`` over ``dims``, kept as size-1 dims."""
    mean = x.mean(dim=dims, keepdim=True)
    xc = x - mean
    return mean, xc, (xc * xc).mean(dim=dims, keepdim=True)


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None,
            shape: tuple[int, ...] | None = None) -> Tensor:
    """``y * weight + bias`` (either may be None), the parameters viewed as ``shape``."""
    if weight is not None:
        y = y * (weight if shape is None else weight.reshape(shape))
    if bias is not None:
        y = y + (bias if shape is None else bias.reshape(shape))
    return y


def _check_channels(fn: str, input: Tensor, **params: Tensor | None) -> int:
    """The channel count (dim 1), which every given parameter must have as its size."""
    c = input._shape[1]
    for name, t in params.items():
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{fn}: {name} should contain {c} elements (the channels of "
                               f"input of shape {_shape(input)}), not {t.numel()}")
    return c


def _trailing(fn: str, input: Tensor, normalized_shape: Any, **params: Any) -> int:
    """How many trailing dims ``normalized_shape`` names, checked against the input
    and the affine parameters (None or of that shape), with PyTorch's messages."""
    _check_tensor(fn, "input", input)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(
        int(v) for v in normalized_shape)
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input._shape[input.ndim - k:]) != ns:
        raise RuntimeError(
            f"{fn}: given normalized_shape={list(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size {list(input._shape)}")
    for name, t in params.items():
        if t is not None and _shape(t) != ns:
            raise RuntimeError(f"{fn}: expected {name} of shape {list(ns)}, got "
                               f"{list(t._shape)}")
    return k


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dims (biased variance)."""
    if _autocast_regions[0]:  # autocast: computed in float32
        input, weight, bias = autocast_inputs("layer_norm", input, weight, bias)
    k = _trailing("layer_norm", input, normalized_shape, weight=weight, bias=bias)
    if input._dtype.kind == "f" and all(t is None or t._dtype is input._dtype
                                        for t in (weight, bias)):
        return _LayerNorm.apply(input, weight, bias, k, float(eps))
    _, xc, var = _moments(input, tuple(range(-k, 0)))
    return _affine(xc / (var + eps).sqrt(), weight, bias)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``input / sqrt(mean(input**2) + eps) * weight`` over the last
    ``len(normalized_shape)`` dims; ``eps`` None is the dtype's machine epsilon (as
    PyTorch's)."""
    if _autocast_regions[0]:  # autocast: computed in float32
        input, weight = autocast_inputs("rms_norm", input, weight)
    k = _trailing("rms_norm", input, normalized_shape, weight=weight)
    if not input._dtype.is_floating_point:
        raise TypeError(f"rms_norm: expected a floating-point input, got {input._dtype.name}")
    if eps is None:
        eps = float(np.finfo(input._dtype.numpy).eps)
    y = input * (input.square().mean(tuple(range(-k, 0)), keepdim=True) + eps).rsqrt()
    return y if weight is None else y * weight


def _flat(t: Tensor | None, n: int) -> Tensor | None:
    """``t`` as (n,) (None stays None)."""
    return t if t is None or t._shape == (n,) else t.reshape(n)


def _shaped(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    return t if t._shape == shape else t.reshape(shape)


class _LayerNorm(Function):
    """layer_norm over the last ``k`` dims as one node: the forward is the backend's
    ``layer_norm`` kernel where it has one (else mean, variance, scale), the
    backward the closed form ``rstd * (gw - mean(gw) - xhat * mean(gw * xhat))``
    instead of the backward of each step: the backend's ``layer_norm_backward``
    where it has one, else that formula in the core's ops. Under ``create_graph``
    always the core's ops, with the statistics recomputed as recorded ops, so the
    gradient differentiates again."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, weight: Tensor | None, bias: Tensor | None, k: int,
                eps: float) -> Tensor:
        shape = input._shape
        n = math.prod(shape[len(shape) - k:])
        # (a small layer_norm is mostly this front-end: no reshape where it is one already)
        x2 = input if len(shape) == 2 and k == 1 else input.reshape(-1, n)
        w = _flat(weight, n)
        b = _flat(bias, n)
        dev, dt = input._device, input._dtype
        kern = own_kernel(dev, "layer_norm", dt)
        if kern is not None and n:
            x2 = x2.contiguous()
            m = x2._shape[0]
            out, mean, rstd = empty((m, n), dt, dev), empty((m, 1), dt, dev), empty((m, 1), dt, dev)
            kern(out._h, mean._h, rstd._h, view_of(x2), None if w is None else view_of(w),
                 None if b is None else view_of(b), eps)
        else:
            mean, xc, var = _moments(x2, 1)
            rstd = E.rsqrt(var + eps)
            out = _affine(xc * rstd, w, b)
        ctx.save_for_backward(input, weight, mean, rstd)
        return out if out._shape == shape else out.reshape(shape)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        input, weight, mean, rstd = ctx.saved_tensors
        k, eps = ctx.args[3], ctx.args[4]
        shape = input._shape
        n = math.prod(shape[len(shape) - k:])
        flat = len(shape) == 2 and k == 1
        x2 = input if flat else input.reshape(-1, n)
        g2 = g if flat and g._shape == shape else g.reshape(-1, n)
        needs = ctx.needs_input_grad
        want_w = weight is not None and needs[1]
        want_b = ctx._in[2] is not None and needs[2]
        if not _state.enabled and g2.numel() and g._dtype is input._dtype:
            # (create_graph: the composite below)
            kern = own_kernel(input._device, "layer_norm_backward", input._dtype)
            if kern is not None:
                x2 = x2.contiguous()
                m = x2._shape[0]
                out = empty((m + 2 if want_w or want_b else m, n), input._dtype, input._device)
                w = _flat(weight, n)
                kern(out._h, view_of(g2), view_of(x2), view_of(mean), view_of(rstd),
                     None if w is None else view_of(w))
                # (the parameters' rows copied out: a view would keep all of out alive)
                dw = _shaped(out[m].clone(), ctx._in[1][0]) if want_w else None
                db = _shaped(out[m + 1].clone(), ctx._in[2][0]) if want_b else None
                dx = out if m == out._shape[0] else out[:m]
                return _shaped(dx, shape), dw, db, None, None
        if _state.enabled:  # create_graph: the statistics as recorded ops of the input
            mean, xc, var = _moments(x2, 1)
            rstd = E.rsqrt(var + eps)
            xhat = xc * rstd
        else:
            xhat = (x2 - mean) * rstd
        gw = g2 if weight is None else g2 * weight.reshape(n)
        dx = (gw - gw.mean(1, keepdim=True) - xhat * (gw * xhat).mean(1, keepdim=True)) * rstd
        dw = (g2 * xhat).sum(0).reshape(ctx._in[1][0]) if want_w else None
        db = g2.sum(0).reshape(ctx._in[2][0]) if want_b else None
        return dx.reshape(shape), dw, db, None, None


def _channels(t: Tensor) -> Tensor:
    """``t`` (N, C, ...) as a contiguous (N, C, S) tensor (a view where it is contiguous)."""
    n, c = t._shape[:2]
    return t.contiguous().reshape(n, c, t.numel() // max(n * c, 1))


def _param(t: Tensor | None) -> Any:
    """A (C,) parameter's contiguous native view, or None."""
    return None if t is None else view_of(t.contiguous())


class NativeBatchNorm(Function):
    """Training-mode batch_norm as one node: the batch statistics per channel (dim
    1), then ``y = (x - mean) * (w * rstd) + b``; the backward the closed form
    ``w rstd (g - mean(g) - xhat mean(g xhat))`` with ``dw = sum(g xhat)`` and
    ``db = sum(g)`` (sums over every dim but 1) instead of the backward of each
    step. Returns ``(y, mean, var)``, the statistics (biased variance) detached,
    for the running averages. Under ``create_graph`` the backward recomputes the
    statistics as recorded ops of the input, so it differentiates again."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, weight: Tensor | None, bias: Tensor | None,
                eps: float) -> Any:
        dev, dt = input._device, input._dtype
        kern = own_kernel(dev, "batch_norm", dt)
        if kern is not None and input.numel():
            # the backend's kernel: input as (N, C, S), one pass per channel
            x3 = _channels(input)
            n, c, _ = x3._shape
            bshape = (1, c) + (1,) * (input.ndim - 2)
            out = empty(x3._shape, dt, dev)
            mean, var, rstd = (empty((c,), dt, dev) for _ in range(3))
            kern(out._h, mean._h, var._h, rstd._h, view_of(x3), _param(weight), _param(bias),
                 eps)
            y = out.reshape(input._shape)
            mean, var, rstd = mean.reshape(bshape), var.reshape(bshape), rstd.reshape(bshape)
        else:
            dims = (0,) + tuple(range(2, input.ndim))
            mean, xc, var = _moments(input, dims)
            rstd = E.rsqrt(var + eps)
            bshape = mean._shape
            scale = rstd if weight is None else rstd * weight.reshape(bshape)
            y = xc * scale
            if bias is not None:
                y = y.add_(bias.reshape(bshape))
        ctx.save_for_backward(input, weight, mean, rstd)
        ctx.mark_non_differentiable(mean, var)
        ctx.set_materialize_grads(False)  # (no zeros made for the statistics' gradients)
        return y, mean, var

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gm: Any = None, _gv: Any = None) -> Any:
        if g is None:
            return None, None, None, None
        input, weight, mean, rstd = ctx.saved_tensors
        eps = ctx.args[3]
        needs = ctx.needs_input_grad
        dims = (0,) + tuple(range(2, input.ndim))
        c = input._shape[1]
        kern = None
        if not _state.enabled and g.numel() and g._dtype is input._dtype:
            # (create_graph: the composite below)
            kern = own_kernel(input._device, "batch_norm_backward", input._dtype)
        if kern is not None:
            x3 = _channels(input)
            g3 = _channels(g)
            dx = empty(x3._shape, x3._dtype, x3._device)
            sums = empty((2, c), x3._dtype, x3._device)
            kern(dx._h, sums._h, view_of(g3), view_of(x3), view_of(mean.reshape(c)),
                 view_of(rstd.reshape(c)), _param(weight))
            dw = sums[0].reshape(weight._shape) if weight is not None and needs[1] else None
            db = sums[1].reshape(ctx._in[2][0]) if ctx._in[2] is not None and needs[2] else None
            return (dx.reshape(input._shape) if needs[0] else None), dw, db, None
        if _state.enabled:  # create_graph: the statistics as recorded ops of the input
            mean, xc, var = _moments(input, dims)
            rstd = E.rsqrt(var + eps)
            xhat = xc * rstd
        else:
            xhat = (input - mean) * rstd
        bshape = mean._shape
        gsum = g.sum(dims, keepdim=True)
        gxsum = (g * xhat).sum(dims, keepdim=True)
        dx = None
        if needs[0]:
            count = input.numel() // max(c, 1)
            scale = rstd if weight is None else rstd * weight.reshape(bshape)
            dx = (g - gsum * (1.0 / count) - xhat * (gxsum * (1.0 / count))) * scale
        dw = gxsum.reshape(weight._shape) if weight is not None and needs[1] else None
        db = gsum.reshape(ctx._in[2][0]) if ctx._in[2] is not None and needs[2] else None
        return dx, dw, db, None


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dim 1) over every other dim.

    Training: the batch's mean and biased variance; the running stats (when
    given) move toward the batch mean and the *unbiased* variance by
    ``momentum``, in place. Evaluation: the running stats.
    """
    _check_tensor("batch_norm", "input", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C, ...) with at least 2 dims, "
                         f"got shape {_shape(input)}")
    c = _check_channels("batch_norm", input, running_mean=running_mean, running_var=running_var,
                        weight=weight, bias=bias)
    bshape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {_shape(input)}")
        if input._dtype.kind == "f" and all(t is None or t._dtype is input._dtype
                                            for t in (weight, bias)):
            y, mean, var = NativeBatchNorm.apply(input, weight, bias, float(eps))
        else:
            mean, xc, var = _moments(input, (0,) + tuple(range(2, input.ndim)))
            std = (var + eps).sqrt()
            scale = weight.reshape(bshape) / std if weight is not None else std.reciprocal()
            y = xc * scale
            if bias is not None:
                y = y + bias.reshape(bshape)
        if running_mean is not None or running_var is not None:
            if momentum is None:
                raise ValueError("batch_norm: momentum=None (a cumulative average) needs the "
                                 "batch count: pass the factor as momentum (BatchNorm modules do)")
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1.0 - momentum).add_(mean.reshape(c) * momentum)
                if running_var is not None:
                    running_var.mul_(1.0 - momentum).add_(
                        var.reshape(c) * (momentum * count / (count - 1)))
        return y
    if running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                           "evaluation mode (training=False)")
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * scale.reshape(bshape) + shift.reshape(bshape)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    res = input / R.norm(input, p, dim, keepdim=True).clamp(min=eps)
    if out is not None:
        out.copy_(res)
        return out
    return res


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each group of ``C / num_groups`` channels of each sample over the
    group's channels and spatial positions (biased variance), then the
    per-channel affine ``weight``, ``bias``."""
    _check_tensor("group_norm", "input", input)
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input._shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(input._shape)} and num_groups="
                           f"{num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"group_norm: expected {name} to be a vector of size equal to the "
                               f"number of channels in input ({c}), but got {name} of shape "
                               f"{_shape(t)}")
    _, xc, var = _moments(input.reshape(n, num_groups, -1), -1)
    y = (xc / (var + eps).sqrt()).reshape(input._shape)
    return _affine(y, weight, bias, (c,) + (1,) * (input.ndim - 2))


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its spatial positions (biased
    variance), then the per-channel affine. With ``use_input_stats`` the running
    stats (when given) move toward the batch average of the per-instance mean
    and *unbiased* variance by ``momentum``, in place; without it, the running
    stats normalise."""
    _check_tensor("instance_norm", "input", input)
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected input of shape (N, C, ...) with at least one "
                         f"spatial dim, got shape {_shape(input)}")
    c = _check_channels("instance_norm", input, running_mean=running_mean,
                        running_var=running_var, weight=weight, bias=bias)
    cshape = (c,) + (1,) * (input.ndim - 2)
    if use_input_stats:
        count = input.numel() // max(1, input._shape[0] * c)
        if count <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"{list(input._shape)}")
        mean, xc, var = _moments(input, tuple(range(2, input.ndim)))
        y = xc / (var + eps).sqrt()
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    bm = mean.reshape(-1, c).mean(0)
                    running_mean.mul_(1.0 - momentum).add_(
                        bm.reshape(running_mean._shape) * momentum)
                if running_var is not None:
                    bv = var.reshape(-1, c).mean(0) * (count / (count - 1))
                    running_var.mul_(1.0 - momentum).add_(
                        bv.reshape(running_var._shape) * momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("instance_norm: Expected running_mean and running_var to be defined "
                               "when use_input_stats is false")
        y = (input - running_mean.reshape(cshape)) / (running_var.reshape(cshape) + eps).sqrt()
    return _affine(y, weight, bias, cshape)
