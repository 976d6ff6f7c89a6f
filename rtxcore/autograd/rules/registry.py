"""Registering backward rules, and the helpers the rules share.

A rule gets ``ctx`` (the op's node: ``ctx.saved`` inputs, ``ctx.output``,
``ctx.args``/``ctx.kwargs`` as the op was called, ``ctx.needs_input_grad``) and the
gradient of the op's result, and returns one gradient per input (None where none
flows). The engine then sums each gradient down to its input's shape (undoing
broadcasting, in ``engine.sum_to``) and casts it to the input's dtype, so rules
are written for the broadcast shape.
"""

from __future__ import annotations

from typing import Any, Callable

from ...ops import creation as C
from ...ops import views as V
from ...tensor import Tensor
from ..grad_mode import _state
from ..tape import NODES, Node


def rule(op: str, save: tuple[int, ...] = (), output: bool = False,
         name: str | None = None,
         placed: Callable[..., Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx, grad) -> grads`` as the backward of op ``op``; its nodes
    are named ``name`` (default: ``ExpBackward`` for ``exp``). ``placed``: for a
    view op, ``(ctx, grad) -> engine.Placed or None``, which the engine tries
    first outside ``create_graph`` (see ``Node.placed``)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        cls_name = name or "".join(p.capitalize() for p in op.strip("_").split("_")) + "Backward"
        NODES[op] = type(cls_name, (Node,), {
            "__slots__": (), "op": op, "save": save, "save_output": output,
            "rule": staticmethod(fn), "__module__": fn.__module__,
            "placed": None if placed is None else staticmethod(placed),
        })
        return fn

    return deco


def arg(ctx: Node, i: int, name: str, default: Any = None) -> Any:
    """The op's argument after its differentiable inputs: positional ``i`` or keyword ``name``."""
    a = ctx.args
    if len(a) > i:
        return a[i]
    kw = ctx.kwargs
    return kw.get(name, default) if kw else default


def _needs(ctx: Node) -> tuple[bool, ...]:
    """Which inputs want a gradient (``ctx.needs_input_grad``, without the property)."""
    return tuple([e is not None for e in ctx.next_functions])


def in_shape(ctx: Node, i: int = 0) -> tuple[int, ...]:
    return ctx._in[i][0]


def _no_grad(fn: Callable[[], Any]) -> Any:
    prev = _state.enabled
    _state.enabled = False
    try:
        return fn()
    finally:
        _state.enabled = prev


def _zeros(g: Tensor, shape: tuple[int, ...] | None = None) -> Tensor:
    return C.zeros(shape if shape is not None else g._shape, dtype=g._dtype, device=g._device)


def _keep(g: Tensor, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> Tensor:
    """``g`` of a reduction's result, with the reduced dims back as size 1."""
    if keepdim or not axes:
        return g
    return V.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))
