"""What a compiled replay reads and sets of ``.grad`` attributes: the gradients
a traced call assigned (set again after each replay) and the ``.grad`` values
it assumed as it began (checked before each replay)."""

from __future__ import annotations

from typing import Any

from ..ops.core import view_of
from ..tensor import Tensor


def _set_grads(entry: Any, outs: list[Tensor]) -> None:
    """Each ``.grad`` the traced call set, set again: to the graph's gradient
    outputs in order, to None, or to the tensor from outside it set."""
    it = iter(outs)
    for m, v in entry.grads:
        m.grad = next(it) if isinstance(v, int) else v


def _grad_outputs(tr: Any) -> list[tuple[Any, Any]]:
    """Each ``.grad`` the traced call assigned (by ``p.grad = ...``,
    ``zero_grad()`` or the autograd engine), as (the tensor's autograd ``Meta``,
    the graph value holding the gradient; or None when the call left it None; or
    the tensor itself when it is from outside the graph). A ``.grad`` the call
    only wrote into (accumulated into in place) is the same tensor after a
    replay: the graph writes its buffer."""
    out: list[tuple[Any, Any]] = []
    for m, _ in tr.grad_sets.values():
        g = m.grad
        if g is None:
            out.append((m, None))
            continue
        h = view_of(g)
        if id(h) in tr.views and id(tr.views[id(h)][1]) in tr.bufs:
            out.append((m, tr._region(h)[1]))
        else:
            out.append((m, g))
    return out


def _grad_guards(tr: Any) -> list[Any]:
    """What a graph assumed of ``.grad`` attributes as the call began, checked
    before each replay: a gradient the call read (accumulated into, zeroed in
    place) is that same tensor, by reference (``(m, tensor)``); one the
    autograd engine assigned because it was None is None again (``(m, None)``):
    a backward into a ``.grad`` left set by the last call adds where the traced
    one assigned. (A ``.grad`` the call itself assigns, ``p.grad = ...`` or
    ``zero_grad()``, may be anything before.)"""
    guards: list[Any] = []
    for key, (m, before) in tr.grad_before.items():
        if before is None:
            if key in tr.grad_by_engine:
                guards.append((m, None))
        elif id(before._storage.buffer) in tr.bufs:  # read by the graph: by reference
            guards.append((m, before))
    return guards


def _grads_as_traced(guards: list[Any]) -> bool:
    return all(m.grad is want for m, want in guards)
