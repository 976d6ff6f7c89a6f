"""Recording: what a tensor in a graph carries (``Meta``), the graph's nodes
(``Node``), and the decorators that make an op front-end record.

An op front-end in ``rtxcore/ops`` marked ``@differentiable("exp")`` runs as it is
when no input requires grad, or when recording is off (``no_grad``). Otherwise it
runs with recording off (so its own inner ops record nothing), and its result gets
one ``Node``: the op's backward rule (``rules/``), the tensors that rule needs,
and an edge to each input's node. The graph is owned by its outputs: a tensor's
``Meta`` holds its node, a node holds its inputs' nodes, and nothing global holds
any of them.

(One file of about 600 lines on purpose: ``attach`` and the decorators are the
recording path every op takes, and keeping them with ``Meta`` and ``Node`` lets
them bind each other as module globals, with no attribute lookups per op.)

Ops that are not marked are composites of marked ones and differentiate through
their decomposition.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from typing import Any, Callable

from ..tensor import Tensor
from .grad_mode import _state

_new = object.__new__
_NOKW: dict[str, Any] = {}  # never written: the empty **kwargs of a recorded call
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
    acc = m.acc() if m.acc is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        m.acc = weakref.ref(acc)
    return (acc, 0)


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
    """``edge(t)`` for any argument, inlined for the usual non-leaf case."""
    m = getattr(t, "_ag", None)
    if m is None or not m.requires_grad:
        return None
    fn = m.grad_fn
    if fn is None or m.view_version is not None:
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


def _record1(name: str, fn: Callable[..., Any], x: Tensor, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """``record`` for one-input ops: the same steps, without the generic loops."""
    e = _edge1(x)
    if e is None:
        return fn(x, *args, **(kwargs or _NOKW))
    _state.enabled = False
    try:
        out = fn(x, *args, **(kwargs or _NOKW))
    finally:
        _state.enabled = True
    if out._dtype.kind != "f" or out._ag is not None or out is x:
        return out
    attach(name, out, (x,), (e,), args, kwargs)
    return out


def _record2(name: str, fn: Callable[..., Any], x: Any, y: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    ex, ey = _edge1(x), _edge1(y)
    if ex is None and ey is None:
        return fn(x, y, *args, **(kwargs or _NOKW))
    _state.enabled = False
    try:
        out = fn(x, y, *args, **(kwargs or _NOKW))
    finally:
        _state.enabled = True
    if out._dtype.kind != "f" or out._ag is not None or out is x or out is y:
        return out
    attach(name, out, (x, y), (ex, ey), args, kwargs)
    return out


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
        node._in = (_info(inputs[0]),)
    elif n == 2:
        node._in = (_info(inputs[0]), _info(inputs[1]))
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


_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def parameters(fn: Callable[..., Any]) -> tuple[list[str], str | None, list[str], str | None]:
    """``fn``'s parameter names: (positional, *name, keyword-only, **name)."""
    code = fn.__code__
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    pos, kwonly = list(names[:npos]), list(names[npos:npos + nkw])
    i = npos + nkw
    star = names[i] if code.co_flags & _CO_VARARGS else None
    i += star is not None
    dstar = names[i] if code.co_flags & _CO_VARKEYWORDS else None
    return pos, star, kwonly, dstar


def _exact_wrapper(name: str, fn: Callable[..., Any], n_inputs: int) -> Callable[..., Any]:
    """The recording wrapper of a one- or two-input op, generated with ``fn``'s own
    parameter list: a generic ``(*args, **kwargs)`` wrapper would add a quarter
    of a microsecond to every call of every op, recorded or not.

    For ``def sum(x, dim=None, keepdim=False, *, dtype=None)`` it is::

        def sum(x, dim, keepdim, *, dtype):      # defaults copied from fn
            if getattr(x, "_ag", None) is None or not _state.enabled:
                return fn(x, dim, keepdim, dtype=dtype)
            return _record1(name, fn, x, (dim, keepdim), {"dtype": dtype})
    """
    pos, star, kwonly, dstar = parameters(fn)
    if len(pos) < n_inputs:
        raise TypeError(f"@differentiable({name!r}): {fn.__name__} takes fewer than {n_inputs} positional inputs")
    inputs, rest = pos[:n_inputs], pos[n_inputs:]
    params = pos + ([f"*{star}"] if star else (["*"] if kwonly else [])) + kwonly + (
        [f"**{dstar}"] if dstar else [])
    call = pos + ([f"*{star}"] if star else []) + [f"{k}={k}" for k in kwonly] + (
        [f"**{dstar}"] if dstar else [])
    args = "(" + "".join(f"{a}, " for a in rest) + ")"
    if star:
        args = f"{args} + {star}"
    kwargs = ("{" + ", ".join(f"{k!r}: {k}" for k in kwonly) + "}") if kwonly else "None"
    if dstar:
        kwargs = f"({{**{kwargs}, **{dstar}}} or None)" if kwonly else f"({dstar} or None)"
    if n_inputs == 1:
        test = f"getattr({inputs[0]}, '_ag', None) is None"
        rec = f"_record1(name, fn, {inputs[0]}, {args}, {kwargs})"
    else:
        test = f"(getattr({inputs[0]}, '_ag', None) is None and getattr({inputs[1]}, '_ag', None) is None)"
        rec = f"_record2(name, fn, {inputs[0]}, {inputs[1]}, {args}, {kwargs})"
    src = (f"def {fn.__name__}({', '.join(params)}):\n"
           f"    if {test} or not _state.enabled:\n"
           f"        return fn({', '.join(call)})\n"
           f"    return {rec}\n")
    ns: dict[str, Any] = {"fn": fn, "name": name, "_state": _state,
                          "_record1": _record1, "_record2": _record2}
    exec(compile(src, f"<differentiable {name}>", "exec"), ns)  # noqa: S102
    op = ns[fn.__name__]
    op.__defaults__ = fn.__defaults__
    op.__kwdefaults__ = fn.__kwdefaults__
    return op


def differentiable(name: str, inputs: int | str | tuple[int, ...] = 1,
                   output: Callable[[Any], tuple[Any, Any]] | None = None) -> Callable[..., Any]:
    """Mark an op front-end as recording, with the backward rule named ``name``.

    inputs: how many leading positional arguments are differentiable (1 or 2, or
    3), a tuple of their positions, or ``"seq"`` when the first argument is a
    sequence of tensors (``cat``).
    output: for ops returning several things, picks ``(tensor, extra)``: the
    tensor that gets the node, and what the rule may read as ``ctx.extra``.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        RAW[name] = fn
        if inputs in (1, 2) and output is None:
            op = _exact_wrapper(name, fn, inputs)
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


# -- in-place ops -----------------------------------------------------------------------


def inplace(out_of_place: Callable[..., Any], inputs: int = 1) -> Callable[..., Any]:
    """Mark an in-place op (``x.mul_(y)``). When it must record, it is run as its
    out-of-place twin, whose result is written into ``x``; ``x`` then continues
    the graph from that node (its base too, when ``x`` is a view)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
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
