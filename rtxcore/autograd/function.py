"""``autograd.Function``: user-defined ops with a forward and a backward, as in PyTorch.

    class Exp(rtxcore.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    y = Exp.apply(x)
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from ..tensor import Tensor
from .grad_mode import _state, no_grad
from .tape import FREED, Meta, Node, _modified, alias, edge, init_node


class FunctionCtx(Node):
    """The ``ctx`` of a Function: also the node recorded in the graph (its
    ``backward`` is the rule). Attributes set on it in ``forward`` are there in
    ``backward``."""

    multi = True
    _fn_cls: Any = None

    def save_for_backward(self, *tensors: Any) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save tensors (or None), got {type(t).__name__}; "
                    "store other values as attributes of ctx"
                )
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        s = self._saved
        if s is None:
            raise RuntimeError(FREED)
        out = []
        for t, v, nr in zip(s, self._versions, self._saved_outputs):
            if t is None:
                out.append(None)
                continue
            if t._storage.version != v:
                raise _modified(t, v, self)
            if nr is not None and _state.enabled:
                t = alias(t)  # an output of this Function: back in the graph at this node
                t._ag = Meta(self, nr)
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._non_diff = {id(t) for t in tensors}

    def mark_dirty(self, *tensors: Tensor) -> None:
        self._dirty = {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self._materialize = bool(value)

    @staticmethod
    def rule(ctx: Node, *grads: Any) -> Any:
        c: FunctionCtx = ctx  # type: ignore[assignment]
        # the engine's buffer ends at the last output that got a gradient: one
        # gradient (or None) per output all the same
        grads = grads + (None,) * (len(c._out_info) - len(grads))
        if getattr(c, "_materialize", True):
            grads = tuple(
                g if g is not None else _zeros(info) for g, info in zip(grads, c._out_info)
            )
        res = c._fn_cls.backward(c, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(c.next_functions)
        if len(res) < n:
            raise RuntimeError(
                f"function {c.name()} returned an incorrect number of gradients "
                f"(expected {n}, got {len(res)})"
            )
        res = res[:n] if all(r is None for r in res[n:]) else res
        if len(res) != n:
            raise RuntimeError(
                f"function {c.name()} returned an incorrect number of gradients "
                f"(expected {n}, got {len(res)})"
            )
        for i, (r, e, info) in enumerate(zip(res, c.next_functions, c._in)):
            if r is None or e is None:
                continue
            if not isinstance(r, Tensor):
                raise TypeError(f"function {c.name()} returned a {type(r).__name__} as gradient {i}; expected a Tensor or None")
            if info is not None and r.numel() != 0 and r._shape != info[0]:
                try:
                    from ..shape import broadcast_shapes

                    broadcast_shapes(r._shape, info[0])
                except RuntimeError:
                    raise RuntimeError(
                        f"function {c.name()} returned an invalid gradient at index {i} - got "
                        f"{list(r._shape)} but expected shape compatible with {list(info[0])}"
                    ) from None
        return res

    def release(self) -> None:
        Node.release(self)


def _zeros(info: tuple[Any, ...]) -> Tensor:
    from ..ops.creation import zeros

    shape, dtype, dev = info
    return zeros(shape, dtype=dtype, device=dev)


class _FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> None:
        super().__init__(name, bases, ns)
        # the node type for this Function, named as PyTorch names it
        cls._backward_cls = type(f"{name}Backward", (FunctionCtx,), {"_fn_cls": cls})


class Function(metaclass=_FunctionMeta):
    """Base class for ops with a hand-written backward. Define ``forward(ctx, *args)``
    and ``backward(ctx, *grads)`` as static methods; call ``YourOp.apply(*args)``."""

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise NotImplementedError("You must implement either the backward or vjp method for your custom autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        # (this runs for every custom op of every step: plain loops and a direct
        # flip of the grad mode, no generators or context-manager objects)
        ctx = object.__new__(cls._backward_cls)
        enabled = _state.enabled
        record = False
        edges, ins = [], []
        for a in args:
            if isinstance(a, Tensor):
                e = edge(a) if enabled else None
                record = record or e is not None
                edges.append(e)
                ins.append((a._shape, a._dtype, a._device))
            else:
                edges.append(None)
                ins.append(None)
        ctx.next_functions = tuple(edges) if record else (None,) * len(args)
        ctx._in = tuple(ins)
        ctx._to_save = ()
        ctx._non_diff = set()
        ctx._dirty = set()
        _state.enabled = False
        try:
            result = cls.forward(ctx, *args, **kwargs)
        finally:
            _state.enabled = enabled
        if not record:
            return result
        outs = result if isinstance(result, tuple) else (result,)
        init_node(ctx, ctx.next_functions, ctx._in, None, args, kwargs)
        ctx._saved = None
        ctx._out_info = tuple(
            (o._shape, o._dtype, o._device) if isinstance(o, Tensor) else None for o in outs)
        final = []
        for nr, o in enumerate(outs):
            if isinstance(o, Tensor):
                if id(o) in ctx._dirty:
                    pass  # modified in place: it continues from this node
                elif any(o is a for a in args):
                    o = alias(o)  # an input returned as is: a new tensor for the output
                if id(o) not in ctx._non_diff and o._dtype.kind == "f":
                    o._ag = Meta(ctx, nr)
                    o._base = None
            final.append(o)
        saved, versions, out_nr = [], [], []
        for t in ctx._to_save:
            nr = next((i for i, o in enumerate(final) if o is t), None)
            if t is not None and nr is not None:
                t = alias(t)  # don't let the node hold its own output (a cycle)
            saved.append(t)
            versions.append(t._storage.version if t is not None else 0)
            out_nr.append(nr)
        ctx._saved = saved
        ctx._versions = versions
        ctx._saved_outputs = out_nr
        del ctx._to_save
        return tuple(final) if isinstance(result, tuple) else final[0]


TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a Function's ``backward`` that cannot itself be differentiated. It
    runs without recording; under ``create_graph=True`` its gradients are tied
    to the incoming gradients and the tensors it saved by a node that raises
    when a later backward reaches it, so a double backward through it fails
    loudly instead of silently missing this part of the graph."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with no_grad():
            result = fn(ctx, *grads)
        if not _state.enabled:
            return result
        deps = [g for g in grads if isinstance(g, Tensor) and g.requires_grad]
        if ctx._saved is not None:
            deps += [t for t in ctx.saved_tensors if isinstance(t, Tensor) and t.requires_grad]
        if not deps:
            return result
        outs = result if isinstance(result, tuple) else (result,)
        outs = tuple(_DelayedError.apply(o, *deps) if isinstance(o, Tensor) else o for o in outs)
        return outs if isinstance(result, tuple) else outs[0]

    return wrapper


class _DelayedError(Function):
    """Passes a gradient through; differentiating it again raises (``TWICE``)."""

    @staticmethod
    def forward(ctx: Any, out: Tensor, *deps: Tensor) -> Tensor:
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        raise RuntimeError(TWICE)
