"""``rtxcore.compile``: trace on the first call, replay the graph on later ones.

A compiled function keeps a small cache of graphs keyed by what a graph takes
for granted about its call:

- each tensor argument's shape, strides, offset, dtype, device and
  ``requires_grad``; other arguments by value (or identity); grad mode; the
  ``training`` flags of the module (and its submodules);
- the tensors it reads from outside are still the module's (``model.fc.weight =
  Parameter(...)`` is a miss); an optimizer it stepped has the same
  hyperparameters (``lr`` from a scheduler is a miss) and the same Python-number
  state (an ``Adam`` step count changes every step: such an optimizer retraces
  each call; ``capturable=True`` keeps the count in a tensor, in the graph).

A miss traces again (at most ``cache_size`` graphs; the oldest is dropped).
A function that reads a tensor's value on the host (``.item()``, ``bool(t)``,
``nonzero``) can't be one graph: it runs eagerly, with one warning per line of
user code that did it, or, with ``fullgraph=True``, raises naming that line.

After a replay the parameters, optimizer state and module buffers are what an
eager call would have left (they are written in place by the graph), and each
parameter's ``.grad`` is set to the gradient the graph computed.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any, Callable

from ..autograd.grad_mode import _state as _grad_state
from ..tensor import Tensor
from .trace import TraceError

__all__ = ["compile", "CompiledFunction"]

_warned: set[str] = set()


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

    def __init__(self, traced: Any, params: list[tuple[str, int]],
                 optimizers: list[tuple[Any, Any]], grads: list[Tensor]) -> None:
        self.traced = traced
        self.params = params
        self.optimizers = optimizers
        self.grads = grads  # the parameters whose .grad the graph's second output sets

    def valid(self, module: Any) -> str | None:
        if module is not None and self.params != _param_ids(module):
            return "the module's parameters changed"
        for opt, snap in self.optimizers:
            if _opt_snapshot(opt) != snap:
                return f"{type(opt).__name__}'s hyperparameters or step state changed"
        return None


def _param_ids(module: Any) -> list[tuple[str, int]]:
    return [(n, id(t)) for n, t in list(module.named_parameters()) +
            list(module.named_buffers())]


class CompiledFunction:
    """What ``rtxcore.compile`` returns: call it like the function or module."""

    def __init__(self, fn: Callable[..., Any], fullgraph: bool = False, cache_size: int = 8,
                 dynamic: Any = None, optimize: bool = True) -> None:
        self._fn = fn
        self.optimize = optimize
        self._module = _module_of(fn)
        self.fullgraph = fullgraph
        self.cache_size = cache_size
        self._cache: OrderedDict[Any, _Entry | None] = OrderedDict()
        self.traces = 0  # how many times it traced (a test's and a user's view of misses)
        self.misses: list[str] = []

    def __getattr__(self, name: str) -> Any:  # a compiled module still reads as the module
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._fn, name)

    def _key(self, args: tuple[Any, ...]) -> Any:
        training = tuple(m.training for m in self._module.modules()) \
            if self._module is not None else ()
        return (tuple(_arg_key(a) for a in args), _grad_state.enabled, training)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:  # keywords become positions (a graph's inputs are positional)
            names = sorted(kwargs)
            fn = self._fn

            def call(*a: Any) -> Any:
                return fn(*a[:len(args)], **dict(zip(names, a[len(args):])))

            return self._run(call, args + tuple(kwargs[n] for n in names), tuple(names))
        return self._run(self._fn, args, ())

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kw: tuple[str, ...]) -> Any:
        key = (self._key(args), kw)
        entry = self._cache.get(key, False)
        if entry is None:  # this call depends on data: eager
            return fn(*args)
        if entry is not False:
            why = entry.valid(self._module)
            if why is None:
                self._cache.move_to_end(key)
                return self._replay(entry, args)
            self.misses.append(why)
        return self._trace(fn, args, key)

    def _trace(self, fn: Callable[..., Any], args: tuple[Any, ...], key: Any) -> Any:
        optimizers: list[tuple[Any, Any]] = []
        traced, result, tr = _trace_with_optimizers(fn, args, optimizers)
        if traced is None:  # it ran (eagerly, for real) but is not one graph
            from . import _unrecordable

            why = _unrecordable(tr)
            if self.fullgraph:
                raise TraceError(f"rtxcore.compile(fullgraph=True): {why}")
            if why not in _warned:
                _warned.add(why)
                warnings.warn(f"rtxcore.compile: running eagerly: {why}", stacklevel=4)
            self._remember(key, None)
            return result
        if _needs_autograd(result):
            # a replay makes plain tensors: outputs that carry autograd history
            # (a module's forward under grad mode, for a backward outside) run
            # eagerly; compile the whole training step to replay it
            why = ("its outputs require grad (a backward outside the compiled function "
                   "needs their history): it runs eagerly; compile the whole training "
                   "step, or call it under torch.no_grad()")
            if why not in _warned:
                _warned.add(why)
                warnings.warn(f"rtxcore.compile: {why}", stacklevel=4)
            self._remember(key, None)
            return result
        self.traces += 1
        grads = _grad_outputs(tr, optimizers, self._module)
        # the gradients are outputs too (a replay points .grad at them): no pass
        # may drop, rename away or reuse them
        g = traced.graph
        g.outputs = {"seq": [g.outputs, {"seq": [{"view": v} for _, v in grads],
                                         "type": "list"}], "type": "tuple"}
        if self.optimize:
            from .passes import optimize

            traced.graph = optimize(g)
        params = _param_ids(self._module) if self._module is not None else []
        self._remember(key, _Entry(traced, params, optimizers, [p for p, _ in grads]))
        return result

    def _remember(self, key: Any, entry: _Entry | None) -> None:
        self._cache[key] = entry
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _replay(self, entry: _Entry, args: tuple[Any, ...]) -> Any:
        out, grads = entry.traced(*args)
        for p, g in zip(entry.grads, grads):
            p.grad = g
        return out


def _trace_with_optimizers(fn: Callable[..., Any], args: tuple[Any, ...],
                           optimizers: list[tuple[Any, Any]]) -> Any:
    """Trace ``fn``, noting each optimizer stepped (and its state as the step began).
    Returns (TracedFunction or None when the call can't be one graph, result, tracer)."""
    from ..optim.optimizer import Optimizer
    from . import TracedFunction, _module_names, _unrecordable
    from .trace import run_traced

    seen: set[int] = set()
    swaps = []

    def watch(orig: Any) -> Any:
        def step(self: Any, *a: Any, **k: Any) -> Any:
            if id(self) not in seen:
                seen.add(id(self))
                optimizers.append((self, _opt_snapshot(self)))
            return orig(self, *a, **k)

        return step

    for cls in [Optimizer, *_subclasses(Optimizer)]:
        if "step" in vars(cls):
            swaps.append((cls, vars(cls)["step"]))
            cls.step = watch(vars(cls)["step"])  # type: ignore[method-assign]
    try:
        for a in args:
            if isinstance(a, Tensor) and not a._device._ready:
                a._device._resolve()
        graph, result, tr = run_traced(fn, args, {}, _module_names(fn))
    finally:
        for cls, orig in swaps:
            cls.step = orig  # type: ignore[method-assign]
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


def _subclasses(cls: type) -> list[type]:
    out = []
    for c in cls.__subclasses__():
        out.append(c)
        out.extend(_subclasses(c))
    return out


def _grad_outputs(tr: Any, optimizers: list[tuple[Any, Any]],
                  module: Any) -> list[tuple[Tensor, int]]:
    """Each parameter whose ``.grad`` the traced call set: the graph value it is."""
    params: dict[int, Tensor] = {}
    if module is not None:
        for p in module.parameters():
            params[id(p)] = p
    for opt, _ in optimizers:
        for g in opt.param_groups:
            for p in g["params"]:
                params[id(p)] = p
    out = []
    for p in params.values():
        g = p.grad
        if g is None:
            continue
        from ..ops.core import view_of

        h = view_of(g)
        if id(h) in tr.views and id(tr.views[id(h)][1]) in tr.bufs:
            out.append((p, tr._region(h)[1]))
    return out


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: Any = None,
            backend: Any = "inductor", mode: Any = None, options: Any = None,
            disable: bool = False, cache_size: int = 8) -> Any:
    """``torch.compile``'s signature: returns a compiled function or module (or,
    without ``model``, a decorator). ``backend``, ``mode``, ``options`` and
    ``dynamic`` are accepted and ignored (one compiler here); ``disable=True``
    returns ``model`` itself; ``options={"optimize": False}`` replays graphs as
    traced, without ``rtxcore.jit.passes.optimize``."""
    def wrap(fn: Any) -> Any:
        if disable:
            return fn
        if not callable(fn):
            raise TypeError(f"rtxcore.compile: expected a function or module, got "
                            f"{type(fn).__name__}")
        opts = dict(options or {})
        return CompiledFunction(fn, fullgraph=fullgraph, cache_size=cache_size, dynamic=dynamic,
                                optimize=bool(opts.get("optimize", True)))

    return wrap if model is None else wrap(model)
