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

from ..autograd.grad_mode import _state as _grad_state
from ..nn.module import structure_version
from ..tensor import Tensor
from .backward import _Backward, _needs_autograd, _trace_backward
from .grads import _grad_guards, _grad_outputs, _grads_as_traced, _set_grads
from .trace import TraceError, is_tracing, run_traced
from .traced import TracedFunction, _module_names, _unrecordable

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
            return self._eager(key, _unrecordable(tr), result)
        backward = None
        if _needs_autograd(result):
            backward, why = _trace_backward(traced, tr, result, args, seq0)
            if why is not None:
                return self._eager(key, why, result)
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

    def _eager(self, key: Any, why: str, result: Any) -> Any:
        """A call that can't be one graph (``why``): its eager ``result``, and
        eager calls from now on for ``key`` (with ``fullgraph``, a TraceError)."""
        if self.fullgraph:
            raise TraceError(f"rtxcore.compile(fullgraph=True): {why}")
        _warn_once(f"running eagerly: {why}", stacklevel=6)  # (the caller of __call__)
        self._remember(key, None)
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


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _autograd_seq() -> int:
    from ..autograd import tape

    return next(tape._seq)


def _trace_with_optimizers(fn: Callable[..., Any], args: tuple[Any, ...],
                           optimizers: list[tuple[Any, Any]]) -> Any:
    """Trace ``fn``, noting each optimizer stepped (and its state as the step began).
    Returns (TracedFunction or None when the call can't be one graph, result, tracer)."""
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
