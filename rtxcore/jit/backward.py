"""A compiled call whose outputs carry autograd history, as PyTorch's
AOTAutograd compiles it: the autograd engine's backward of the first call
traced into a second graph (``_trace_backward``), and the autograd node a
replay returns (``CompiledFunctionBackward``), whose backward runs that graph.
"""

from __future__ import annotations

from typing import Any

from ..autograd import engine
from ..autograd.function import Function
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.tape import FREED, AccumulateGrad
from ..dispatch.types import contiguous_strides
from ..ops.core import as_view, contiguous, ready_device
from ..ops.creation import clone, ones
from ..tensor import Tensor
from .grads import _set_grads
from .run import bind_input, run
from .trace import run_traced
from .traced import _unrecordable


class _Backward:
    """The backward half of a compiled call whose outputs need grad.

    ``diff``: the tensors gradients flow to (("arg", i): argument i; ("leaf", t):
    a leaf read from outside, a parameter); ``flat``: the forward's output
    tensors in order, each ``True`` when it carries history; ``bind``: for each
    input node of the backward graph, where its tensor comes from at a replay
    (("grad", k): the k-th differentiable output's gradient; ("saved", j): the
    forward's j-th saved value; ("arg", i); ("ext", t))."""

    def __init__(self, graph: Any, saved: list[int], diff: list[tuple[str, Any]],
                 flat: list[bool], bind: dict[int, tuple[str, Any]], spec: Any) -> None:
        self.graph = graph
        self.spec = spec  # the outputs' structure (``_flatten``)
        self.saved = saved  # forward value ids the backward reads
        self.diff = diff
        self.flat = flat
        self.bind = bind

    def call(self, entry: Any, args: tuple[Any, ...]) -> Any:
        ins = [args[x] if kind == "arg" else x for kind, x in self.diff]
        flat = _CompiledCall.apply(entry, args, *ins)
        return _unflatten(self.spec, flat if isinstance(flat, tuple) else (flat,))

    def run(self, args: tuple[Any, ...], saved: tuple[Tensor, ...],
            grads: list[Tensor]) -> tuple[Any, ...]:
        g = self.graph
        dev = ready_device(grads[0]._device if grads else saved[0]._device)
        layouts = self.__dict__.get("_layouts")
        if layouts is None:  # each input's (node, where from, shape, strides, dtype)
            layouts = self._layouts = [
                (n.id, *self.bind[n.id], tuple(g.values[n.id]["shape"]),
                 contiguous_strides(tuple(g.values[n.id]["shape"])), g.values[n.id]["dtype"])
                for n in g.inputs]
        inputs = {}
        for nid, kind, x, shape, strides, dt in layouts:
            t = grads[x] if kind == "grad" else saved[x] if kind == "saved" else \
                args[x] if kind == "arg" else x
            if t._offset == 0 and t._shape == shape and t._strides == strides \
                    and t._device is dev and t._dtype.name == dt:
                inputs[nid] = t  # (the common case: the buffer itself)
            elif kind == "saved" and t._offset == 0 and t._device is dev:
                inputs[nid] = as_view(t, shape, strides, 0)  # the forward's buffer, reshaped
            else:
                inputs[nid] = bind_input(nid, _dense(t), g.values[nid], dev)
        return run(g, inputs, dev)


def _dense(t: Tensor) -> Tensor:
    """``t`` itself when its elements are its storage's first ones in order,
    else a contiguous copy (a graph input is a whole buffer)."""
    if t._offset == 0 and t._strides == contiguous_strides(t._shape):
        return t
    c = contiguous(t)
    if c._offset != 0:
        c = clone(c)
    return c


def _flatten(o: Any, out: list[Tensor]) -> Any:
    """``o`` with each tensor replaced by its index in ``out`` (appended)."""
    if isinstance(o, Tensor):
        out.append(o)
        return ("T", len(out) - 1)
    if isinstance(o, (tuple, list)):
        return (type(o), [_flatten(x, out) for x in o])
    if isinstance(o, dict):
        return (dict, [(k, _flatten(v, out)) for k, v in o.items()])
    return ("V", o)


def _unflatten(spec: Any, flat: Any) -> Any:
    kind, x = spec
    if kind == "T":
        return flat[x]
    if kind == "V":
        return x
    if kind is dict:
        return {k: _unflatten(v, flat) for k, v in x}
    return kind(_unflatten(v, flat) for v in x)


def _trace_backward(traced: Any, tr: Any, result: Any, args: tuple[Any, ...],
                    seq0: int) -> tuple[_Backward | None, str | None]:
    """Trace the autograd engine's backward of ``result`` (the first call's, with
    its history) into a graph; returns (the backward half, None), (None, None)
    when that history was already spent inside the function (it ran its own
    backward: the outputs replay detached), or (None, why it can't compile)."""
    flat: list[Tensor] = []
    spec = _flatten(result, flat)
    outs = [t for t in flat if t.requires_grad]
    # the tensors gradients flow to: leaves (parameters, leaf arguments) and the
    # arguments with history of their own; any other history from before the call
    # (a closure over a non-leaf) can't be an input of the compiled node
    arg_edges = {}
    for i, a in enumerate(args):
        if isinstance(a, Tensor) and a.requires_grad:
            m = a._ag
            if m.grad_fn is not None:
                arg_edges[(id(m.grad_fn), m.output_nr)] = i
    diff: list[tuple[str, Any]] = []
    seen_nodes: set[int] = set()
    seen_leaves: set[int] = set()
    stack = [t._ag.grad_fn for t in outs if t._ag.grad_fn is not None]
    arg_of_leaf = {id(a): i for i, a in enumerate(args) if isinstance(a, Tensor)}
    for t in outs:  # an output that is itself a leaf (returned as is)
        if t._ag.grad_fn is None and id(t) not in seen_leaves:
            seen_leaves.add(id(t))
            diff.append(("arg", arg_of_leaf[id(t)]) if id(t) in arg_of_leaf else ("leaf", t))
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        for e in node.next_functions:
            if e is None:
                continue
            nxt, nr = e
            if isinstance(nxt, AccumulateGrad):
                v = nxt.variable
                if id(v) not in seen_leaves:
                    seen_leaves.add(id(v))
                    diff.append(("arg", arg_of_leaf[id(v)]) if id(v) in arg_of_leaf
                                else ("leaf", v))
            elif nxt._seq < seq0:  # history from before the call
                i = arg_edges.get((id(nxt), nr))
                if i is None:
                    return None, ("its outputs depend on a tensor with autograd history "
                                  "that is not an argument (a closure over a non-leaf "
                                  "tensor); pass that tensor as an argument")
                if ("arg", i) not in diff:
                    diff.append(("arg", i))
            else:
                stack.append(nxt)
    if not diff:
        return None, None
    ins = [args[x] if kind == "arg" else x for kind, x in diff]
    seeds = [ones(t._shape, dtype=t._dtype, device=t._device) for t in outs]

    def backward(*gs: Tensor) -> Any:
        return tuple(engine.grad(outs, ins, gs, retain_graph=True, allow_unused=True))

    try:
        graph, _, btr = run_traced(backward, tuple(seeds), {}, {})
    except RuntimeError as exc:
        msg = str(exc)
        if msg == FREED or "modified by an inplace operation" in msg:
            return None, None  # spent inside: the outputs replay detached
        return None, f"its backward can't be traced ({type(exc).__name__}: {exc})"
    why = _unrecordable(btr)
    if why:
        return None, f"its backward {why.removeprefix('the traced function ')}"
    # where each backward input comes from at a replay
    fwd_inputs = {n.id: n.attrs for n in traced.graph.inputs}
    saved: list[int] = []
    bind: dict[int, tuple[str, Any]] = {}
    for n in graph.inputs:
        if n.attrs["kind"] == "arg":
            bind[n.id] = ("grad", n.attrs["index"])
            continue
        buf = btr.input_bufs[n.id]
        st = tr.bufs.get(id(buf))
        if st is None:  # not the forward's: read by reference, as eagerly
            bind[n.id] = ("ext", btr.externals[n.id])
        elif st["version"] in fwd_inputs:  # read, not written, by the forward
            attrs = fwd_inputs[st["version"]]
            bind[n.id] = ("arg", attrs["index"]) if attrs["kind"] == "arg" else \
                ("ext", btr.externals[n.id])
        else:  # made or written by the forward: one of its outputs
            if st["version"] not in saved:
                saved.append(st["version"])
            bind[n.id] = ("saved", saved.index(st["version"]))
    flags = [t.requires_grad for t in flat]
    return _Backward(graph, saved, diff, flags, bind, spec), None


class _CompiledCall(Function):
    """The autograd node of a replay whose outputs carry history (named, as
    PyTorch names it, ``CompiledFunctionBackward``): its forward runs the
    forward graph, its backward the backward graph."""

    @staticmethod
    def forward(ctx: Any, entry: Any, args: tuple[Any, ...], *ins: Tensor) -> Any:
        out, grads, saved = entry.traced(*args)
        _set_grads(entry, grads)
        flat: list[Tensor] = []
        _flatten(out, flat)
        ctx.entry, ctx.call_args = entry, args
        ctx.save_for_backward(*saved)
        ctx.mark_non_differentiable(*(t for t, d in zip(flat, entry.backward.flat) if not d))
        return tuple(flat)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if _grad_state.enabled:
            raise RuntimeError("rtxcore.compile: a compiled function's backward can't be "
                               "differentiated again (create_graph=True); run that "
                               "function eagerly for higher-order gradients")
        bw = ctx.entry.backward
        gs = [g for g, d in zip(grads, bw.flat) if d]
        return (None, None, *bw.run(ctx.call_args, ctx.saved_tensors, gs))


_CompiledCall._backward_cls.__name__ = _CompiledCall._backward_cls.__qualname__ = \
    "CompiledFunctionBackward"


def _needs_autograd(o: Any) -> bool:
    if isinstance(o, Tensor):
        return o.requires_grad
    if isinstance(o, (tuple, list)):
        return any(_needs_autograd(x) for x in o)
    if isinstance(o, dict):
        return any(_needs_autograd(x) for x in o.values())
    return False
