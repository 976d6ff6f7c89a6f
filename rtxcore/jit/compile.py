"""``rtxcore.compile``: trace on the first call, replay the graph on later ones.

A compiled function keeps a small cache of graphs keyed by what a graph takes
for granted about its call:

- each tensor argument's shape, strides, offset, dtype, device and
  ``requires_grad``; other arguments by value (or identity); grad mode; the
  ``training`` flags of the module (and its submodules);
- the tensors it reads from outside are still the module's, with the same
  ``requires_grad`` (``model.fc.weight = Parameter(...)`` is a miss); an
  optimizer it stepped has the same hyperparameters (``lr`` from a scheduler is
  a miss) and the same Python-number state. Step counts are kept in tensors once
  an optimizer is stepped inside a compiled function (as ``capturable=True``
  keeps them), so an ``Adam`` step replays instead of retracing every call.

A miss traces again (at most ``cache_size`` graphs; the oldest is dropped).
Past ``recompile_limit`` traces the function runs eagerly, after one warning
naming what changed between the last two traces. A function that reads a
tensor's value on the host (``.item()``, ``bool(t)``, ``nonzero``) can't be one
graph: it runs eagerly, with one warning per line of user code that did it, or,
with ``fullgraph=True``, raises naming that line.

Outputs that carry autograd history (``rtxcore.compile(model)``, then
``loss.backward()`` outside) are compiled as two graphs, as PyTorch's
AOTAutograd does: the forward, which also returns what the backward reads, and
the backward, traced from the engine's own backward of the first call. A replay
returns outputs attached to one autograd node whose backward runs the backward
graph, so ``loss.backward()`` accumulates into ``.grad`` (and runs hooks) as
eagerly. A step that runs its own backward and returns ``loss`` as it is
replays too: its outputs come back detached (their history was spent inside).

After a replay the parameters, optimizer state and module buffers are what an
eager call would have left (they are written in place by the graph), and each
parameter's ``.grad`` is set to the gradient the graph computed.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict, deque
from typing import Any, Callable

from ..autograd.function import Function
from ..autograd.grad_mode import _state as _grad_state
from ..nn.module import structure_version
from ..tensor import Tensor
from .trace import TraceError, is_tracing

__all__ = ["compile", "CompiledFunction"]

_warned: set[str] = set()
RECOMPILE_LIMIT = 8  # PyTorch's torch._dynamo.config.recompile_limit


def _warn_once(why: str, stacklevel: int = 5) -> None:
    if why not in _warned:
        _warned.add(why)
        warnings.warn(f"rtxcore.compile: {why}", stacklevel=stacklevel)


def _module_of(fn: Any) -> Any:
    from ..nn import Module

    if isinstance(fn, Module):
        return fn
    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, Module) else None


def _arg_key(a: Any) -> Any:
    if isinstance(a, Tensor):
        return ("T", a._shape, a._strides, a._offset, a._dtype.name, str(a._device),
                a.requires_grad)
    try:
        hash(a)
        return ("V", type(a).__name__, a)
    except TypeError:
        return ("I", id(a))


def _opt_snapshot(opt: Any) -> tuple[Any, ...]:
    """An optimizer's hyperparameters and Python-number state, as compared."""
    groups = tuple(tuple(sorted((k, v) for k, v in g.items()
                                if k != "params" and isinstance(v, (int, float, bool, str,
                                                                    tuple, type(None)))))
                   for g in opt.param_groups)
    state = tuple(tuple(sorted((k, v if not isinstance(v, Tensor) else "T")
                               for k, v in st.items()))
                  for st in (opt.state.get(p, {}) for g in opt.param_groups
                             for p in g["params"]))
    return groups, state


class _Entry:
    """One graph, what it assumed beyond the cache key, and what to restore."""

    def __init__(self, traced: Any, module: Any, optimizers: list[tuple[Any, Any]],
                 grads: list[Tensor], backward: "_Backward | None" = None) -> None:
        self.traced = traced
        # the module's parameters and buffers as traced: which objects (checked
        # again only when some module's structure changed since), and which
        # require grad (checked each call)
        self.tensors = _module_tensors(module) if module is not None else []
        self.ids = [(n, id(t)) for n, t in self.tensors]
        self.requires = tuple(t.requires_grad for _, t in self.tensors)
        self.version = structure_version()
        self.optimizers = optimizers
        self.grad_guards: list[Any] = []  # (Meta, what its .grad must be): _grad_guards
        # the .grad each replay sets: (Meta, a graph value id: the graph's next
        # gradient output | None | a tensor from outside, by reference)
        self.grads = grads
        self.backward = backward  # outputs with autograd history: their backward graph

    def valid(self, module: Any) -> str | None:
        if module is not None:
            v = structure_version()
            if v != self.version:
                if [(n, id(t)) for n, t in _module_tensors(module)] != self.ids:
                    return "the module's parameters or buffers were replaced"
                self.version = v
            if tuple(t.requires_grad for _, t in self.tensors) != self.requires:
                return "a parameter's requires_grad was switched"
        for opt, snap in self.optimizers:
            if _opt_snapshot(opt) != snap:
                return f"{type(opt).__name__}'s hyperparameters or step state changed"
        if self.grad_guards and not _grads_as_traced(self.grad_guards):
            return "a .grad the graph reads or assigns is not as it was when traced " \
                   "(set, cleared or replaced since)"
        return None


def _module_tensors(module: Any) -> list[tuple[str, Tensor]]:
    return list(module.named_parameters()) + list(module.named_buffers())


class CompiledFunction:
    """What ``rtxcore.compile`` returns: call it like the function or module."""

    def __init__(self, fn: Callable[..., Any], fullgraph: bool = False, cache_size: int = 8,
                 dynamic: Any = None, optimize: bool = True,
                 recompile_limit: int = RECOMPILE_LIMIT) -> None:
        self._fn = fn
        self.optimize = optimize
        self._module = _module_of(fn)
        self.fullgraph = fullgraph
        self.cache_size = cache_size
        self.recompile_limit = recompile_limit
        self._cache: OrderedDict[Any, _Entry | None] = OrderedDict()
        self._lock = threading.Lock()  # the cache, across threads calling at once
        self._last_key: Any = None
        self._gave_up: str | None = None  # why it now runs eagerly, past the limit
        self._mods: list[Any] = []
        self._mods_version = -1
        self.traces = 0  # how many times it traced (a test's and a user's view of misses)
        self.misses: deque[str] = deque(maxlen=32)  # why cached graphs were not used, latest last

    def __getattr__(self, name: str) -> Any:  # a compiled module still reads as the module
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._fn, name)

    def _key(self, args: tuple[Any, ...]) -> Any:
        training: tuple[bool, ...] = ()
        if self._module is not None:
            v = structure_version()
            if v != self._mods_version:  # (a walk of the model only after it changed)
                self._mods, self._mods_version = list(self._module.modules()), v
            training = tuple(m.training for m in self._mods)
        return (tuple(_arg_key(a) for a in args), _grad_state.enabled, training)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if is_tracing():  # called inside another trace: its kernels join that graph
            return self._fn(*args, **kwargs)
        if kwargs:  # keywords become positions (a graph's inputs are positional)
            names = sorted(kwargs)
            fn = self._fn

            def call(*a: Any) -> Any:
                return fn(*a[:len(args)], **dict(zip(names, a[len(args):])))

            return self._run(call, args + tuple(kwargs[n] for n in names), tuple(names))
        return self._run(self._fn, args, ())

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kw: tuple[str, ...]) -> Any:
        key = (self._key(args), kw)
        with self._lock:
            entry = self._cache.get(key, False)
            if entry is not None and entry is not False:
                why = entry.valid(self._module)
                if why is None:
                    self._cache.move_to_end(key)
                else:
                    self.misses.append(why)
                    entry = False
        if entry is None:  # this call depends on data: eager
            return fn(*args)
        if entry is not False:
            return self._replay(entry, args)
        if self._gave_up is not None:
            return fn(*args)
        if self.traces >= self.recompile_limit:
            self._gave_up = self._what_changed(key)
            _warn_once(f"{_name(self._fn)} was traced {self.traces} times (recompile_limit="
                       f"{self.recompile_limit}); it runs eagerly from now on. This call would "
                       f"have traced again: {self._gave_up}. Keep what changes out of "
                       "the compiled function, pass it as a tensor, or raise recompile_limit.",
                       stacklevel=4)
            return fn(*args)
        return self._trace(fn, args, key)

    def _what_changed(self, key: Any) -> str:
        """What differs between ``key`` and the last traced call's key, in words."""
        last = self._last_key
        if last is None:
            return "it was not cached"
        (args, grad, training), kw = key
        (largs, lgrad, ltraining), lkw = last
        if kw != lkw or len(args) != len(largs):
            return "the keyword arguments or the argument count changed"
        for i, (a, b) in enumerate(zip(args, largs)):
            if a == b:
                continue
            if a[0] == "T" and b[0] == "T":
                names = ("shape", "strides", "offset", "dtype", "device", "requires_grad")
                for name, x, y in zip(names, a[1:], b[1:]):
                    if x != y:
                        return f"argument {i}'s {name} changed from {y} to {x}"
            if a[0] == "V" and b[0] == "V":
                return f"argument {i}, a Python {a[1]}, changed from {b[2]!r} to {a[2]!r}"
            return f"argument {i} changed ({b[1] if b[0] != 'I' else 'an object'} to " \
                   f"{a[1] if a[0] != 'I' else 'another object'})"
        if grad != lgrad:
            return "grad mode changed"
        if training != ltraining:
            return "a module's training flag changed"
        return self.misses[-1] if self.misses else "its guards changed"

    def _trace(self, fn: Callable[..., Any], args: tuple[Any, ...], key: Any) -> Any:
        optimizers: list[tuple[Any, Any]] = []
        seq0 = _autograd_seq()
        traced, result, tr = _trace_with_optimizers(fn, args, optimizers)
        if traced is None:  # it ran (eagerly, for real) but is not one graph
            from . import _unrecordable

            why = _unrecordable(tr)
            if self.fullgraph:
                raise TraceError(f"rtxcore.compile(fullgraph=True): {why}")
            _warn_once(f"running eagerly: {why}")
            self._remember(key, None)
            return result
        backward = None
        if _needs_autograd(result):
            backward, why = _trace_backward(traced, tr, result, args, seq0)
            if why is not None:
                if self.fullgraph:
                    raise TraceError(f"rtxcore.compile(fullgraph=True): {why}")
                _warn_once(f"running eagerly: {why}")
                self._remember(key, None)
                return result
        self.traces += 1
        grads = _grad_outputs(tr)
        # the gradients are outputs too (a replay points .grad at them), and so
        # is what the backward graph reads: no pass may drop, rename or reuse them
        g = traced.graph
        saved = backward.saved if backward is not None else []
        in_graph = [(m, v) for m, v in grads if isinstance(v, int)]
        g.outputs = {"seq": [g.outputs, {"seq": [{"view": v} for _, v in in_graph],
                                         "type": "list"},
                             {"seq": [{"view": v} for v in saved], "type": "list"}],
                     "type": "tuple"}
        if self.optimize:
            from .passes import optimize

            traced.graph = optimize(g)
            if backward is not None:
                backward.graph = optimize(backward.graph)
        entry = _Entry(traced, self._module, optimizers, grads, backward)
        entry.grad_guards = _grad_guards(tr)
        self._remember(key, entry)
        self._last_key = key
        return result

    def _remember(self, key: Any, entry: _Entry | None) -> None:
        with self._lock:
            self._cache[key] = entry
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _replay(self, entry: _Entry, args: tuple[Any, ...]) -> Any:
        if entry.backward is not None:
            return entry.backward.call(entry, args)
        out, grads, _ = entry.traced(*args)
        _set_grads(entry, grads)
        return out


def _set_grads(entry: _Entry, outs: list[Tensor]) -> None:
    """Each ``.grad`` the traced call set, set again: to the graph's gradient
    outputs in order, to None, or to the tensor from outside it set."""
    it = iter(outs)
    for m, v in entry.grads:
        m.grad = next(it) if isinstance(v, int) else v


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _autograd_seq() -> int:
    from ..autograd import tape

    return next(tape._seq)


# -- outputs with autograd history: a forward graph and a backward graph -------------


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

    def call(self, entry: _Entry, args: tuple[Any, ...]) -> Any:
        ins = [args[x] if kind == "arg" else x for kind, x in self.diff]
        flat = _CompiledCall.apply(entry, args, *ins)
        return _unflatten(self.spec, flat if isinstance(flat, tuple) else (flat,))

    def run(self, args: tuple[Any, ...], saved: tuple[Tensor, ...],
            grads: list[Tensor]) -> tuple[Any, ...]:
        from ..dispatch.types import contiguous_strides
        from ..ops.core import as_view, ready_device
        from .run import bind_input, run

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
    from ..dispatch.types import contiguous_strides
    from ..ops.core import contiguous

    if t._offset == 0 and t._strides == contiguous_strides(t._shape):
        return t
    c = contiguous(t)
    if c._offset != 0:
        from ..ops.core import clone

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
    from ..autograd import engine
    from ..autograd.tape import FREED, AccumulateGrad
    from ..ops.creation import ones
    from .trace import run_traced

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
    from . import _unrecordable

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
    def forward(ctx: Any, entry: _Entry, args: tuple[Any, ...], *ins: Tensor) -> Any:
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


def _trace_with_optimizers(fn: Callable[..., Any], args: tuple[Any, ...],
                           optimizers: list[tuple[Any, Any]]) -> Any:
    """Trace ``fn``, noting each optimizer stepped (and its state as the step began).
    Returns (TracedFunction or None when the call can't be one graph, result, tracer)."""
    from . import TracedFunction, _module_names, _unrecordable
    from .trace import run_traced

    seen: set[int] = set()

    def stepped(opt: Any) -> None:
        if id(opt) not in seen:
            seen.add(id(opt))
            optimizers.append((opt, _opt_snapshot(opt)))

    for a in args:
        if isinstance(a, Tensor) and not a._device._ready:
            a._device._resolve()
    graph, result, tr = run_traced(fn, args, {}, _module_names(fn), step_hook=stepped)
    if _unrecordable(tr):
        return None, result, tr
    args_t = [a if isinstance(a, Tensor) else None for a in args]
    return TracedFunction(graph, tr.externals, args_t), result, tr


def _needs_autograd(o: Any) -> bool:
    if isinstance(o, Tensor):
        return o.requires_grad
    if isinstance(o, (tuple, list)):
        return any(_needs_autograd(x) for x in o)
    if isinstance(o, dict):
        return any(_needs_autograd(x) for x in o.values())
    return False


def _grad_outputs(tr: Any) -> list[tuple[Any, Any]]:
    """Each ``.grad`` the traced call assigned (by ``p.grad = ...``,
    ``zero_grad()`` or the autograd engine), as (the tensor's autograd ``Meta``,
    the graph value holding the gradient; or None when the call left it None; or
    the tensor itself when it is from outside the graph). A ``.grad`` the call
    only wrote into (accumulated into in place) is the same tensor after a
    replay: the graph writes its buffer."""
    from ..ops.core import view_of

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


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: Any = None,
            backend: Any = "inductor", mode: Any = None, options: Any = None,
            disable: bool = False, cache_size: int = 8) -> Any:
    """``torch.compile``'s signature: returns a compiled function or module (or,
    without ``model``, a decorator). ``backend``, ``mode`` and ``dynamic`` are
    accepted and ignored (one compiler here); ``disable=True``
    returns ``model`` itself; ``options={"optimize": False}`` replays graphs as
    traced, without ``rtxcore.jit.passes.optimize``; ``options={"recompile_limit":
    n}`` (default 8, as PyTorch's) is how many graphs a compiled function may
    trace before it runs eagerly."""
    def wrap(fn: Any) -> Any:
        if disable:
            return fn
        if not callable(fn):
            raise TypeError(f"rtxcore.compile: expected a function or module, got "
                            f"{type(fn).__name__}")
        opts = dict(options or {})
        unknown = set(opts) - {"optimize", "recompile_limit"}
        if unknown:
            raise ValueError(f"rtxcore.compile: unknown options {sorted(unknown)}; rtxcore's are "
                             "'optimize' (bool) and 'recompile_limit' (int)")
        limit = opts.get("recompile_limit", RECOMPILE_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"rtxcore.compile: options['recompile_limit'] must be a positive "
                             f"int, got {limit!r}")
        return CompiledFunction(fn, fullgraph=fullgraph, cache_size=cache_size, dynamic=dynamic,
                                optimize=bool(opts.get("optimize", True)),
                                recompile_limit=limit)

    return wrap if model is None else wrap(model)
