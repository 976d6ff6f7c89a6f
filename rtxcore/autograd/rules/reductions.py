"""Backward rules of the reductions and scans: ``sum``, ``mean``, ``prod``,
``amax``/``amin``, ``max``/``min`` along a dim, ``sort``, ``var``, ``norm``,
``logsumexp``, ``softmax``/``log_softmax`` and ``cumsum``."""

from __future__ import annotations

import math
from typing import Any

from ...ops import creation as C
from ...ops import elementwise as E
from ...ops import indexing as I
from ...ops import reduction as R
from ...ops import views as V
from ...ops.core import as_view, empty, own_kernel, view_of
from ...ops.reorder import flip
from ...shape import normalize_dim, normalize_dims, prod
from ...tensor import Tensor
from ..grad_mode import _state
from ..tape import FREED, Node
from .registry import _keep, _zeros, arg, in_shape, rule

_where = E.where


def _axes_of(ctx: Node, dim: Any) -> tuple[int, ...]:
    return normalize_dims(dim, len(in_shape(ctx)))


def _reduced(ctx: Node) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """A reduction's input shape, the axes its ``dim`` reduced and its ``keepdim``."""
    return in_shape(ctx), _axes_of(ctx, arg(ctx, 0, "dim")), arg(ctx, 1, "keepdim", False)


def _spread(g: Tensor, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> Tensor:
    """A reduction's gradient ``g`` broadcast back over the reduced ``axes``."""
    if _state.enabled:  # create_graph: with recorded ops
        return V.expand(_keep(g, shape, axes, keepdim), shape)
    # otherwise one stride-0 view (the common loss.sum() / .mean() step)
    gs = g._strides
    strides, j = [], 0
    for i in range(len(shape)):
        if i in axes:
            strides.append(0)
            j += keepdim
        else:
            strides.append(gs[j])
            j += 1
    return as_view(g, shape, tuple(strides), g._offset)


@rule("sum")
def _sum(ctx: Node, g: Tensor) -> Any:
    shape, axes, keepdim = _reduced(ctx)
    return _spread(g, shape, axes, keepdim)


@rule("mean")
def _mean(ctx: Node, g: Tensor) -> Any:
    shape, axes, keepdim = _reduced(ctx)
    n = prod(shape[a] for a in axes)
    return _spread(E.div(g, n) if n else g, shape, axes, keepdim)


@rule("prod", save=(0,))
def _prod(ctx: Node, g: Tensor) -> Any:
    # the product of all the other elements, as exclusive cumulative products from
    # both sides: no division, so zeros are handled
    x = ctx.saved[0]
    shape = in_shape(ctx)
    dim = arg(ctx, 0, "dim")
    keepdim = arg(ctx, 1, "keepdim", False)
    if x._dtype is not g._dtype:
        x = C.to(x, g._dtype)
    if dim is None or not shape:
        flat = V.reshape(x, (-1,))
        others = V.reshape(_others_product(flat, 0), shape)
        return E.mul(V.reshape(g, (1,) * len(shape)) if shape else g, others)
    d = normalize_dim(dim, len(shape))
    return E.mul(_keep(g, shape, (d,), keepdim), _others_product(x, d))


def _others_product(x: Tensor, d: int) -> Tensor:
    n = x._shape[d]
    if n == 0:
        return x
    ones = C.ones_like(V.narrow(x, d, 0, 1))
    left = I.cat([ones, R.cumprod(V.narrow(x, d, 0, n - 1), d)], d) if n > 1 else ones
    rx = flip(x, d)
    right = flip(I.cat([ones, R.cumprod(V.narrow(rx, d, 0, n - 1), d)], d), d) if n > 1 else ones
    return E.mul(left, right)


def _amax_rule(ctx: Node, g: Tensor) -> Any:
    # ties share the gradient evenly (as PyTorch's amax/amin and max()/min())
    x = ctx.saved[0]
    shape, axes, keepdim = _reduced(ctx)
    out = _keep(ctx.output, shape, axes, keepdim)
    mask = C.to(E.eq(x, out), g._dtype)
    count = R.sum(mask, axes, keepdim=True)
    return E.mul(E.div(_keep(g, shape, axes, keepdim), count), mask)


rule("amax", save=(0,), output=True)(_amax_rule)
rule("amin", save=(0,), output=True)(_amax_rule)


def _back_to_indices(ctx: Node, g: Tensor, dim_default: Any, keepdim: bool) -> Any:
    """``g`` sent back to the input elements an op picked along its dim, whose
    indices the op left in ``ctx.extra`` (``max(x, dim)``'s, ``sort``'s)."""
    shape = in_shape(ctx)
    idx = ctx.extra
    if idx is None:
        raise RuntimeError(FREED)
    if not shape:
        return g
    d = normalize_dim(arg(ctx, 0, "dim", dim_default), len(shape))
    if not keepdim:
        g, idx = V.unsqueeze(g, d), V.unsqueeze(idx, d)
    return I.scatter_add(_zeros(g, shape), d, idx, g)


def _value_at_index(ctx: Node, g: Tensor) -> Any:
    # max(x, dim) / min(x, dim): the gradient goes to the index returned
    return _back_to_indices(ctx, g, None, arg(ctx, 1, "keepdim", False))


rule("max_dim", name="MaxBackward")(_value_at_index)
rule("min_dim", name="MinBackward")(_value_at_index)


@rule("sort")
def _sort(ctx: Node, g: Tensor) -> Any:
    return _back_to_indices(ctx, g, -1, True)  # sort keeps every dim


@rule("var", save=(0,))
def _var(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    shape = in_shape(ctx)
    axes, correction, keepdim = R.var_args(x, *ctx.args, **(ctx.kwargs or {}))
    n = prod(shape[a] for a in axes)
    if x._dtype is not g._dtype:
        x = C.to(x, g._dtype)
    centered = E.sub(x, R.mean(x, axes, keepdim=True))
    scale = 2.0 / max(0, n - correction) if n - correction > 0 else math.inf
    return E.mul(_keep(g, shape, axes, keepdim), E.mul(centered, scale))


@rule("norm", save=(0,), output=True)
def _norm(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    shape = in_shape(ctx)
    p = arg(ctx, 0, "p", "fro")
    axes = _axes_of(ctx, arg(ctx, 1, "dim"))
    keepdim = arg(ctx, 2, "keepdim", False)
    if x._dtype is not g._dtype:
        x = C.to(x, g._dtype)
    g = _keep(g, shape, axes, keepdim)
    out = _keep(ctx.output, shape, axes, keepdim)
    if p == 0:
        return _zeros(g, shape)
    if p == 1:
        return E.mul(g, E.sign(x))
    if p in ("fro", 2, 2.0):
        return E.mul(g, _where(E.eq(out, 0), 0.0, E.div(x, out)))  # 0 at the origin
    if p in (math.inf, "inf", -math.inf, "-inf"):
        ax = E.abs(x)
        mask = C.to(E.eq(ax, out), g._dtype)
        return E.mul(E.div(g, R.sum(mask, axes, keepdim=True)), E.mul(mask, E.sign(x)))
    p = float(p)
    # x |x|**(p-2) / norm**(p-1)
    d = E.div(E.mul(E.sign(x), E.pow(E.abs(x), p - 1.0)), E.pow(out, p - 1.0))
    return E.mul(g, _where(E.eq(out, 0), 0.0, d))


@rule("logsumexp", save=(0,), output=True)
def _logsumexp(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    shape, axes, keepdim = _reduced(ctx)
    out = _keep(ctx.output, shape, axes, keepdim)
    return E.mul(_keep(g, shape, axes, keepdim), E.exp(E.sub(x, out)))


def _normalized(op: str, grad: Any) -> Any:
    """The rule of a softmax-like op over its ``dim``: ``grad(out, g, axes)``, or
    ``g`` itself when there is nothing to normalize; the backend's ``op``
    kernel (the same formula) where it has one and nothing records."""

    def rule_(ctx: Node, g: Tensor) -> Any:
        out = ctx.output
        shape = in_shape(ctx)
        axes = (normalize_dim(arg(ctx, 0, "dim"), len(shape)),) if shape else ()
        if not out.numel():
            return g
        if axes and not _state.enabled and g._dtype is out._dtype and g._shape == out._shape:
            k = own_kernel(out._device, op, out._dtype)  # (create_graph: the formula)
            if k is not None:
                d = empty(out._shape, out._dtype, out._device)
                k(d._h, view_of(g), view_of(out), axes[0])
                return d
        return grad(out, g, axes)

    return rule_


rule("softmax", output=True)(_normalized(
    "softmax_backward",
    lambda out, g, axes: E.mul(out, E.sub(g, R.sum(E.mul(g, out), axes, keepdim=True)))))
rule("log_softmax", output=True)(_normalized(
    "log_softmax_backward",
    lambda out, g, axes: E.sub(g, E.mul(E.exp(out), R.sum(g, axes, keepdim=True)))))


@rule("cumsum")
def _cumsum(ctx: Node, g: Tensor) -> Any:
    shape = in_shape(ctx)
    if not shape:
        return g
    d = normalize_dim(arg(ctx, 0, "dim"), len(shape))
    return flip(R.cumsum(flip(g, d), d), d)
