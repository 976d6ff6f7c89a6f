"""Recording: what a tensor in a graph carries (``Meta``), the graph's nodes
(``Node``), and the decorators that make an op front-end record.

An op front-end in ``rtxcore/ops`` marked ``@differentiable("exp")`` runs as it is
when no input requires grad, or when recording is off (``no_grad``). Otherwise it
runs with recording off (so its own inner ops record nothing), and its result gets
one ``Node``: the op's backward rule (``rules/``), the tensors that rule needs,
and an edge to each input's node. The graph is owned by its outputs: a tensor's
``Meta`` holds its node, a node holds its inputs' nodes, and nothing global holds
any of them.

(``attach`` and the decorators are the recording path every op takes: they stay
here with ``Meta`` and ``Node``, binding each other as module globals. The
wrappers the decorators generate are written by rtxcore/autograd/wrappers.py,
each given the names it calls as its own globals: no attribute lookups per op.)

Ops that are not marked are composites of marked ones and differentiate through
their decomposition.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any, Callable

from ..tensor import Tensor
from . import wrappers as W
from .grad_mode import _state
from .wrappers import parameters  # noqa: F401  (rtxcore.ops.factory_args's)

_new = object.__new__
_seq = itertools.count()

# op name -> Node subclass carrying its backward rule (filled by rules/)
NODES: dict[str, type] = {}
# op name -> the op's undecorated front-end (selection rules replay it)
RAW: dict[str, Callable[..., Any]] = {}
# every front-end made by @differentiable and @inplace: while a profile runs,
# rtxcore.profiler swaps the undecorated function each one calls (its ``fn``)
FRONTENDS: list[Callable[..., Any]] = []

FREED = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the "
    "graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)


class Meta:
    """Autograd state of one tensor. ``Tensor._ag`` is None for a tensor outside
    any graph, which is what keeps ops on such tensors fast."""

    __slots__ = ("grad_fn", "output_nr", "requires_grad", "grad", "retains_grad",
                 "hooks", "post_hooks", "acc", "view_version", "__weakref__")

    def __init__(self, grad_fn: Node | None = None, output_nr: int = 0,
                 requires_grad: bool = True) -> None:
        self.grad_fn = grad_fn
        self.output_nr = output_nr
        self.requires_grad = requires_grad
        self.grad: Tensor | None = None
        self.retains_grad = False
        self.hooks: list[Any] | None = None  # a leaf's tensor hooks
        self.post_hooks: list[Any] | None = None  # a leaf's hooks after .grad is updated
        self.acc: Any = None  # weakref to a leaf's AccumulateGrad node
        # a view's storage version when its grad_fn was set: if the memory has
        # been written since (through its base or another view), the grad_fn is
        # rebuilt from the base's history on next use
        self.view_version: int | None = None


def requires_grad(t: Any) -> bool:
    m = getattr(t, "_ag", None)
    return m is not None and m.requires_grad


class Node:
    """One recorded op. ``next_functions`` holds, per input, ``(node, output_nr)``
    of that input's producer (or None where the input needs no grad)."""

    __slots__ = ("next_functions", "_saved", "_versions", "_out", "_out_version",
                 "args", "kwargs", "_in", "_seq", "_pre_hooks", "_retain", "extra",
                 "__weakref__")

    op = ""
    save: tuple[int, ...] = ()  # which inputs the rule reads
    save_output = False
    multi = False  # rule takes one gradient per output (autograd.Function)
    # a view op's second rule, tried first outside create_graph: (ctx, grad) ->
    # an engine.Placed (the gradient not yet written into zeros), or None
    placed: Any = None

    @staticmethod
    def rule(ctx: Node, grad: Tensor) -> Any:  # noqa: ARG004
        raise NotImplementedError

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def needs_input_grad(self) -> tuple[bool, ...]:
        return tuple(e is not None for e in self.next_functions)

    @property
    def saved(self) -> tuple[Any, ...]:
        """The inputs the rule saved, checked against in-place changes since."""
        s = self._saved
        if s is None:
            raise RuntimeError(FREED)
        for t, v in zip(s, self._versions):
            if v is not None and t._storage.version != v:
                raise _modified(t, v, self)
        return s

    @property
    def output(self) -> Tensor:
        """The op's result, as the rule sees it. When the backward itself records
        (``create_graph=True``) it comes back attached to this node, so gradients
        of gradients flow through it."""
        o = self._out
        if o is None:
            raise RuntimeError(FREED)
        if o._storage.version != self._out_version:
            raise _modified(o, self._out_version, self, is_output=True)
        if _state.enabled:
            o = alias(o)
            o._ag = Meta(self, 0)
        return o

    @property
    def saved_tensors(self) -> tuple[Tensor, ...]:
        out = tuple(t for t in self.saved if isinstance(t, Tensor))
        return out + ((self._out,) if self._out is not None else ())

    def release(self) -> None:
        """Drop what the rule saved (after a backward without retain_graph)."""
        self._saved = None
        self._out = None
        self.extra = None

    def register_prehook(self, fn: Callable[..., Any]) -> Any:
        """``fn(grad_outputs) -> grad_outputs or None``, run before the rule."""
        return _add_hook(self, -1, fn)


def _add_hook(node: Node, nr: int, fn: Callable[..., Any]) -> "RemovableHandle":
    if node._pre_hooks is None:
        node._pre_hooks = []
    entry = (nr, fn)
    node._pre_hooks.append(entry)
    return RemovableHandle(node._pre_hooks, entry)


class RemovableHandle:
    """What ``register_hook`` returns: ``handle.remove()`` takes the hook away."""

    __slots__ = ("_list", "_entry")

    def __init__(self, hooks: list[Any], entry: Any) -> None:
        self._list = hooks
        self._entry = entry

    def remove(self) -> None:
        try:
            self._list.remove(self._entry)
        except ValueError:
            pass

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


class AccumulateGrad(Node):
    """The sink for a leaf tensor: adds the gradient that reaches it to ``.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable
        init_node(self, (), ())


def _accumulator(t: Tensor, m: Meta) -> AccumulateGrad:
    """Leaf ``t``'s AccumulateGrad (``m`` is its Meta): the live one, else a new one
    (held by the graph's edges; the leaf keeps a weak reference)."""
    ref = m.acc
    if ref is not None:
        acc = ref()
        if acc is not None:
            return acc
    acc = _new(AccumulateGrad)  # AccumulateGrad(t), without the type's call
    acc.variable = t
    init_node(acc, (), ())
    m.acc = weakref.ref(acc)
    return acc


def init_node(node: Node, next_functions: tuple[Any, ...], infos: tuple[Any, ...],
              extra: Any = None, args: tuple[Any, ...] = (), kwargs: Any = None) -> Node:
    """Fill a node made outside ``attach`` (AccumulateGrad, CopySlices, Function
    contexts): nothing saved yet, no hooks."""
    node.next_functions = next_functions
    node._in = infos
    node._saved = ()
    node._versions = ()
    node._out = None
    node.args = args
    node.kwargs = kwargs
    node._seq = next(_seq)
    node._pre_hooks = None
    node._retain = None
    node.extra = extra
    return node


def _type_name(t: Tensor) -> str:
    return f"[{t._device.type}.{t._dtype.name} {list(t._shape)}]"


def _modified(t: Tensor, expected: int, node: Node, is_output: bool = False) -> RuntimeError:
    m = t._ag
    if is_output:
        where = f", which is output 0 of {node.name()},"
    elif m is not None and m.grad_fn is not None:
        where = f", which is output {m.output_nr} of {m.grad_fn.name()},"
    else:
        where = ""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: {_type_name(t)}{where} is at version {t._storage.version}; "
        f"expected version {expected} instead (saved by {node.name()}). Hint: make a "
        "clone() before modifying it in place, or do the op out of place."
    )


def alias(t: Tensor) -> Tensor:
    """A new tensor object on ``t``'s memory with no autograd state."""
    a = _new(Tensor)
    a._storage = t._storage
    a._shape = t._shape
    a._strides = t._strides
    a._offset = t._offset
    a._dtype = t._dtype
    a._device = t._device
    a._h = t._h
    a._ag = None
    a._base = None
    return a


def edge(t: Tensor) -> tuple[Node, int] | None:
    """Where a gradient for ``t`` goes: its producer, or its AccumulateGrad."""
    m = t._ag
    if m is None or not m.requires_grad:
        return None
    fn = m.grad_fn
    if fn is not None:
        if m.view_version is not None and m.view_version != t._storage.version:
            return _refresh_view(t)
        return (fn, m.output_nr)
    return (_accumulator(t, m), 0)


# -- recording ----------------------------------------------------------------------


def record(name: str, inputs: tuple[Any, ...], args: tuple[Any, ...],
           kwargs: dict[str, Any], run: Callable[[], Any],
           output: Callable[[Any], tuple[Any, Any]] | None = None) -> Any:
    """Run an op whose inputs may need grad, and record it."""
    edges = tuple([edge(t) if isinstance(t, Tensor) else None for t in inputs])
    if not any(edges):
        return run()
    _state.enabled = False
    try:
        result = run()
    finally:
        _state.enabled = True
    if output is None:
        out, extra = result, None
    else:
        out, extra = output(result)
    if out._dtype.kind != "f" or out._ag is not None:
        return result  # not differentiable (ints, bools), or an input passed through
    for t in inputs:
        if out is t:
            return result
    node = attach(name, out, inputs, edges, args, kwargs)
    node.extra = extra
    return result


def _edge1(t: Any) -> Any:
    """``edge(t)`` for any argument, inlined for the usual cases (a non-leaf that
    is not a view, a leaf)."""
    m = getattr(t, "_ag", None)
    if m is None or not m.requires_grad:
        return None
    fn = m.grad_fn
    if fn is None:
        return (_accumulator(t, m), 0)
    if m.view_version is not None:
        return edge(t)
    return (fn, m.output_nr)


def _refresh_view(t: Tensor) -> tuple[Node, int]:
    """A view whose memory was written in place since its grad_fn was set: its
    history now is a view of its base's (PyTorch rebuilds it the same way)."""
    base = t._base
    if base is None or not requires_grad(base) or base._ag.grad_fn is None:
        t._ag.view_version = t._storage.version
        return (t._ag.grad_fn, t._ag.output_nr)
    from .rules import view_of_base

    view_of_base(base, t)
    return (t._ag.grad_fn, 0)


def _info(t: Any) -> tuple[Any, ...] | None:
    return (t._shape, t._dtype, t._device) if isinstance(t, Tensor) else None


def attach(name: str, out: Tensor, inputs: tuple[Any, ...], edges: tuple[Any, ...],
           args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Node:
    """Make ``out`` the output of a new node of op ``name`` (the hot path of recording)."""
    cls = NODES[name]
    node = _new(cls)
    node.next_functions = edges
    n = len(inputs)
    if n == 1:
        x = inputs[0]
        node._in = ((x._shape, x._dtype, x._device) if isinstance(x, Tensor) else None,)
    elif n == 2:
        x, y = inputs
        node._in = ((x._shape, x._dtype, x._device) if isinstance(x, Tensor) else None,
                    (y._shape, y._dtype, y._device) if isinstance(y, Tensor) else None)
    else:
        node._in = tuple([_info(t) for t in inputs])
    save = cls.save
    if save:
        if save == (0, 1) and n == 2:
            x, y = inputs
            node._saved = [x, y]
            node._versions = [x._storage.version if isinstance(x, Tensor) else None,
                              y._storage.version if isinstance(y, Tensor) else None]
        else:
            saved = [None] * n
            versions: list[int | None] = [None] * n
            for i in save:
                t = inputs[i]
                saved[i] = t
                if isinstance(t, Tensor):
                    versions[i] = t._storage.version
            node._saved = saved
            node._versions = versions
    else:
        node._saved = ()
        node._versions = ()
    if cls.save_output:
        node._out = alias(out)
        node._out_version = out._storage.version
    else:
        node._out = None
    node.args = args
    node.kwargs = kwargs
    node._seq = next(_seq)
    node._pre_hooks = None
    node._retain = None
    node.extra = None
    base = out._base
    if base is not None and out._storage is not inputs[0]._storage:
        out._base = base = None  # a fresh result that went through an internal view
    m = _new(Meta)  # Meta(node, 0), without the call
    m.grad_fn = node
    m.output_nr = 0
    m.requires_grad = True
    m.grad = None
    m.retains_grad = False
    m.hooks = None
    m.acc = None
    m.view_version = None if base is None else out._storage.version
    out._ag = m
    return node


def _exact_wrapper(name: str, fn: Callable[..., Any], n_inputs: int, out_branch: str | None = None,
                   ns: dict[str, Any] | None = None, composite: bool = True) -> Callable[..., Any]:
    """The recording wrapper of a one- or two-input op, generated with ``fn``'s own
    parameters and the recording inlined (rtxcore/autograd/wrappers.py); its
    names bound here, as the module globals of its own namespace."""
    return W.recording_wrapper(name, fn, n_inputs, {"fn": fn, "name": name, "_state": _state,
                                                    "_edge1": _edge1, "attach": attach, **(ns or {})},
                               out_branch, composite)


def differentiable(name: str, inputs: int | str | tuple[int, ...] = 1,
                   output: Callable[[Any], tuple[Any, Any]] | None = None,
                   composite: bool = True) -> Callable[..., Any]:
    """Mark an op front-end as recording, with the backward rule named ``name``.

    inputs: how many leading positional arguments are differentiable (1 or 2, or
    3), a tuple of their positions, or ``"seq"`` when the first argument is a
    sequence of tensors (``cat``).
    output: for ops returning several things, picks ``(tensor, extra)``: the
    tensor that gets the node, and what the rule may read as ``ctx.extra``.
    composite: the front-end may call recording ops, which must record nothing
    (recording is switched off around it). False for one that calls kernels only
    (a primitive's driver, rtxcore/ops/core.py): two thread-local writes fewer
    per recorded op. (One or two inputs, no ``output``.)
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        RAW[name] = fn
        if inputs in (1, 2) and output is None:
            op = _exact_wrapper(name, fn, inputs, composite=composite)
            op._rtx_name, op._rtx_inputs = name, inputs  # (out.py makes its out= twin)
            op._rtx_composite = composite
        elif inputs == "seq":
            def op(tensors: Any, *args: Any, **kwargs: Any) -> Any:
                if not _state.enabled or not isinstance(tensors, (list, tuple)) or \
                        all(getattr(t, "_ag", None) is None for t in tensors):
                    return fn(tensors, *args, **kwargs)
                ts = tuple(tensors)
                return record(name, ts, args, kwargs, lambda: fn(ts, *args, **kwargs))
        elif isinstance(inputs, tuple):
            # inputs at these positions; the rule sees every argument in ctx.args
            where = inputs

            def op(*args: Any, **kwargs: Any) -> Any:
                head = tuple(args[i] if i < len(args) else None for i in where)
                if not _state.enabled or all(getattr(t, "_ag", None) is None for t in head):
                    return fn(*args, **kwargs)
                return record(name, head, args, kwargs, lambda: fn(*args, **kwargs), output)
        else:
            n = int(inputs)

            def op(*args: Any, **kwargs: Any) -> Any:
                head = args[:n]
                if not _state.enabled or all(getattr(t, "_ag", None) is None for t in head):
                    return fn(*args, **kwargs)
                return record(name, head, args[n:], kwargs, lambda: fn(*args, **kwargs), output)

        functools.update_wrapper(op, fn)
        op.raw = fn  # type: ignore[attr-defined]
        FRONTENDS.append(op)
        return op

    return deco


def quiet(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with recording off: a path of a front-end marked
    ``composite=False`` that calls recording ops (they must record nothing)."""
    prev = _state.enabled
    _state.enabled = False
    try:
        return fn(*args)
    finally:
        _state.enabled = prev


# -- in-place ops -----------------------------------------------------------------------


def inplace(out_of_place: Callable[..., Any], inputs: int = 1) -> Callable[..., Any]:
    """Mark an in-place op (``x.mul_(y)``). When it must record, it is run as its
    out-of-place twin, whose result is written into ``x``; ``x`` then continues
    the graph from that node (its base too, when ``x`` is a view)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        op = _exact_inplace(fn, out_of_place, inputs)
        if op is None:
            def op(x: Tensor, *args: Any, **kwargs: Any) -> Any:
                if not _state.enabled or (
                    getattr(x, "_ag", None) is None
                    and getattr(getattr(x, "_base", None), "_ag", None) is None
                    and all(getattr(a, "_ag", None) is None for a in args[:inputs])
                ):
                    return fn(x, *args, **kwargs)
                return run_inplace(fn.__name__, x, lambda: out_of_place(x, *args, **kwargs),
                                   lambda: fn(x, *args, **kwargs))

        functools.update_wrapper(op, fn)
        op.raw = fn  # type: ignore[attr-defined]
        FRONTENDS.append(op)
        return op

    return deco


def _exact_inplace(fn: Callable[..., Any], out_of_place: Callable[..., Any],
                   inputs: int) -> Callable[..., Any] | None:
    """``inplace``'s wrapper generated with ``fn``'s parameters (rtxcore/autograd/wrappers.py)."""
    return W.inplace_wrapper(fn, inputs, {"fn": fn, "oop": out_of_place, "name": fn.__name__,
                                          "_state": _state, "run_inplace": run_inplace})


def check_inplace(x: Tensor) -> None:
    m = x._ag
    if m is not None and m.requires_grad and m.grad_fn is None:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation "
            f"({_type_name(x)}); do it under rtxcore.no_grad(), or on a clone()"
        )
    b = x._base
    if b is not None and b._ag is not None and b._ag.requires_grad and b._ag.grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place "
            f"operation ({_type_name(x)} is a view of {_type_name(b)}); do it under "
            "rtxcore.no_grad(), or on a clone()"
        )


def run_inplace(opname: str, x: Tensor, compute: Callable[[], Tensor],
                raw: Callable[[], Any]) -> Tensor:
    check_inplace(x)
    r = compute()
    rm = r._ag if isinstance(r, Tensor) else None
    if rm is None:
        raw()  # nothing to record (e.g. no operand needs grad after all)
        return x
    node = rm.grad_fn
    _protect_saved(node, x)
    from ..ops.core import write_result

    _state.enabled = False
    try:
        write_result(x, alias(r), opname.rstrip("_"), allow_any_cast=False)
    finally:
        _state.enabled = True
    rebase(x, node)
    return x


def _protect_saved(node: Node, x: Tensor) -> None:
    """The node saved tensors that ``x``'s write would overwrite (``x.mul_(y)``
    reads the old ``x`` for ``y``'s grad): keep copies of them instead."""
    saved = node._saved
    if not saved:
        return
    for i, t in enumerate(saved):
        if isinstance(t, Tensor) and t._storage is x._storage:
            from ..ops.creation import clone

            _state.enabled = False
            try:
                c = clone(t)
            finally:
                _state.enabled = True
            c._ag = t._ag  # same place in the graph, its own memory
            saved[i] = c
            node._versions[i] = c._storage.version


def rebase(x: Tensor, node: Node) -> None:
    """Make ``x`` (just written in place) the output of ``node``."""
    base = x._base
    if base is None:
        x._ag = Meta(node, 0)
        return
    from .rules import copy_slices

    copy_slices(base, x, node)
