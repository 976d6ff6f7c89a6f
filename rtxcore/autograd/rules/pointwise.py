"""Backward rules of the elementwise ops: unary math (``exp``, ``log``, ``sin``,
``sigmoid``, ``erf``, ``gelu``, ``clamp``, ...), binary arithmetic (``add``, ``mul``,
``div``, ``pow``, ``maximum``, ``remainder``) and ``where``."""

from __future__ import annotations

import math
from typing import Any

from ...ops import elementwise as E
from ...tensor import Tensor
from ..grad_mode import _state
from ..tape import Node
from .registry import _needs, _zeros, arg, rule

_where = E.where

# -- ReLU's and LeakyReLU's backward as one pass --------------------------------------
# where(out > 0, g, g * slope or 0) is three whole-tensor passes as ops (a bool
# mask, g * slope, the select), memory-bound at a DCGAN's sizes: 3.5 ms of its
# step against PyTorch's one-pass kernel's 1.1. Where the device runs fused
# elementwise programs (``Backend.fuse``) the same steps are one program: the
# same IEEE operations on each element, so the same bits. Not while recording
# (create_graph) or tracing, and from _FUSE_MIN elements (below, rtx_cpu runs
# such a program block by block, no faster than the ops).
_FUSE_MIN = 1 << 15
_RUNNERS: dict[tuple[Any, ...], Any] = {}


def _select_program(n: int, dt: str, leaky: bool) -> dict[str, Any]:
    """Inputs: out, g (and, leaky, the slope as one element of dt)."""
    mask = ["gt", "bool", [["in", 0], ["const", 0.0]]]
    if leaky:
        steps = [mask, ["mul", dt, [["in", 1], ["scalar", 2]]],
                 ["where", dt, [["step", 0], ["in", 1], ["step", 1]]]]
        return {"n": n, "inputs": [dt] * 3, "steps": steps, "outputs": [2]}
    steps = [mask, ["where", dt, [["step", 0], ["in", 1], ["const", 0.0]]]]
    return {"n": n, "inputs": [dt] * 2, "steps": steps, "outputs": [1]}


def _fused_select(out: Tensor, g: Tensor, slope: float | None) -> Tensor | None:
    """relu's (slope None) or leaky_relu's gradient in one fused pass, or None:
    then the ops."""
    from ..._tracing import is_tracing

    dt, dev = out._dtype, out._device
    if _state.enabled or dt.name not in ("float32", "float64") or g._dtype is not dt or \
            g._device is not dev or g._shape != out._shape or out.numel() < _FUSE_MIN or \
            not (out.is_contiguous() and g.is_contiguous()) or is_tracing():
        return None
    from ...ops.alloc import as_tensor_on, as_view
    from ...ops.core import empty, view_of

    n = out.numel()
    key = (dev, dt.name, slope is not None, n)
    fn = _RUNNERS.get(key, False)
    if fn is False:
        if len(_RUNNERS) >= 256:
            _RUNNERS.clear()
        fn = _RUNNERS[key] = dev.backend.fuse(_select_program(n, dt.name, slope is not None),
                                              dev.index)
    if fn is None:
        return None
    res = empty(out._shape, dt, dev)
    ins = [view_of(as_view(t, (n,), (1,), t._offset)) for t in (out, g)]
    if slope is not None:
        ins.append(view_of(as_tensor_on([slope], dev, dt)))
    fn([view_of(as_view(res, (n,), (1,), 0))], ins)
    return res


# -- elementwise -------------------------------------------------------------------------


@rule("neg")
def _neg(ctx: Node, g: Tensor) -> Any:
    return E.neg(g)


@rule("abs", save=(0,))
def _abs(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.sign(ctx.saved[0]))


def _zero_rule(ctx: Node, g: Tensor) -> Any:
    return tuple(_zeros(g) if e is not None else None for e in ctx.next_functions)


for _op in ("sign", "floor", "ceil", "round", "trunc", "floor_divide", "fill"):
    rule(_op)(_zero_rule)


@rule("exp", output=True)
def _exp(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, ctx.output)


@rule("expm1", output=True)
def _expm1(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.add(ctx.output, 1.0))


@rule("log", save=(0,))
def _log(ctx: Node, g: Tensor) -> Any:
    return E.div(g, ctx.saved[0])


@rule("log1p", save=(0,))
def _log1p(ctx: Node, g: Tensor) -> Any:
    return E.div(g, E.add(ctx.saved[0], 1.0))


@rule("log2", save=(0,))
def _log2(ctx: Node, g: Tensor) -> Any:
    return E.div(g, E.mul(ctx.saved[0], math.log(2.0)))


@rule("sqrt", output=True)
def _sqrt(ctx: Node, g: Tensor) -> Any:
    return E.div(g, E.mul(ctx.output, 2.0))


@rule("sin", save=(0,))
def _sin(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.cos(ctx.saved[0]))


@rule("cos", save=(0,))
def _cos(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.neg(E.sin(ctx.saved[0])))


@rule("tan", output=True)
def _tan(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.mul(g, E.add(E.mul(out, out), 1.0))


@rule("tanh", output=True)
def _tanh(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.mul(g, E.sub(1.0, E.mul(out, out)))


@rule("sigmoid", output=True)
def _sigmoid(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.mul(g, E.mul(out, E.sub(1.0, out)))


@rule("reciprocal", output=True)
def _reciprocal(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.neg(E.mul(g, E.mul(out, out)))


@rule("relu", output=True)
def _relu(ctx: Node, g: Tensor) -> Any:
    # 0 at 0, as PyTorch
    fused = _fused_select(ctx.output, g, None)
    return fused if fused is not None else _where(E.gt(ctx.output, 0), g, 0.0)


@rule("leaky_relu", output=True)
def _leaky_relu(ctx: Node, g: Tensor) -> Any:
    # the slope is positive (the front-end's condition): the output's sign is the
    # input's; at 0 the slope, as PyTorch
    s = arg(ctx, 0, "negative_slope")
    fused = _fused_select(ctx.output, g, float(s))
    return fused if fused is not None else _where(E.gt(ctx.output, 0), g, E.mul(g, s))


@rule("erf", save=(0,))
def _erf(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    return E.mul(g, E.mul(E.exp(E.neg(E.mul(x, x))), 2.0 / math.sqrt(math.pi)))


@rule("gelu", save=(0,), output=True)
def _gelu(ctx: Node, g: Tensor) -> Any:
    return E.gelu_backward(g, ctx.saved[0], arg(ctx, 0, "approximate", "none"), ctx.output)


@rule("clamp", save=(0,))
def _clamp(ctx: Node, g: Tensor) -> Any:
    # 1 inside [min, max], bounds included (as PyTorch), 0 outside
    x = ctx.saved[0]
    lo, hi = arg(ctx, 0, "min"), arg(ctx, 1, "max")
    inside = None
    if lo is not None:
        inside = E.ge(x, lo)
    if hi is not None:
        inside = E.le(x, hi) if inside is None else E.logical_and(inside, E.le(x, hi))
    return _where(inside, g, 0.0)


# -- binary ----------------------------------------------------------------------------


@rule("add")
def _add(ctx: Node, g: Tensor) -> Any:
    alpha = arg(ctx, 0, "alpha", 1)
    return g, (g if alpha == 1 else E.mul(g, alpha))


@rule("sub")
def _sub(ctx: Node, g: Tensor) -> Any:
    alpha = arg(ctx, 0, "alpha", 1)
    return g, (E.neg(g) if alpha == 1 else E.mul(g, -alpha))


@rule("mul", save=(0, 1))
def _mul(ctx: Node, g: Tensor) -> Any:
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    return (E.mul(g, y) if nx else None), (E.mul(g, x) if ny else None)


@rule("div", save=(0, 1))
def _div(ctx: Node, g: Tensor) -> Any:
    if arg(ctx, 0, "rounding_mode") is not None:
        return _zero_rule(ctx, g)
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    gx = E.div(g, y) if nx else None
    gy = E.neg(E.div(E.mul(g, x), E.mul(y, y))) if ny else None
    return gx, gy


@rule("pow", save=(0, 1), output=True)
def _pow(ctx: Node, g: Tensor) -> Any:
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    gx = gy = None
    if nx:
        # y * x**(y-1), with 0 where y == 0 (0**-1 must not give inf * 0)
        d = E.mul(y, E.pow(x, E.sub(y, 1.0) if isinstance(y, Tensor) else y - 1.0))
        if isinstance(y, Tensor):
            d = _where(E.eq(y, 0), 0.0, d)
        elif y == 0:
            d = _zeros(g)  # not d * 0: d is already nan at x == 0
        gx = E.mul(g, d)
    if ny:
        out = ctx.output
        logx = E.log(x) if isinstance(x, Tensor) else (math.log(x) if x > 0 else math.nan)
        d = E.mul(out, logx)
        if isinstance(x, Tensor):  # 0**y for y >= 0: gradient 0, not nan
            d = _where(E.logical_and(E.eq(x, 0), E.ge(y, 0)), 0.0, d)
        elif x == 0:
            d = _where(E.ge(y, 0), 0.0, d)
        gy = E.mul(g, d)
    return gx, gy


def _minmax_rule(ctx: Node, g: Tensor) -> Any:
    # the larger (smaller) input gets the gradient; ties split it in half (as PyTorch)
    x, y = ctx.saved
    win = E.gt(x, y) if ctx.op == "maximum" else E.lt(x, y)
    w = _where(E.eq(x, y), 0.5, _where(win, 1.0, 0.0))
    nx, ny = _needs(ctx)
    return (E.mul(g, w) if nx else None), (E.mul(g, E.sub(1.0, w)) if ny else None)


rule("maximum", save=(0, 1))(_minmax_rule)
rule("minimum", save=(0, 1))(_minmax_rule)


@rule("remainder", save=(0, 1))
def _remainder(ctx: Node, g: Tensor) -> Any:
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    return (g if nx else None), (E.neg(E.mul(g, E.floor_divide(x, y))) if ny else None)


@rule("where", save=(0,))
def _where_rule(ctx: Node, g: Tensor) -> Any:
    cond = ctx.saved[0]
    _, nx, ny = _needs(ctx)
    return None, (_where(cond, g, 0.0) if nx else None), (_where(cond, 0.0, g) if ny else None)
