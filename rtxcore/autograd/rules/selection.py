"""Backward rules of views, copies and the ops that select or place elements:
``view``/``reshape``/``permute``/``expand``, ``clone``/``to``/``copy_``, slicing and
indexing (``narrow``, ``select``, ``diagonal``, ``getitem``, ``masked_select``),
``index_put``, ``gather``, ``scatter``/``scatter_add``, ``masked_fill`` and ``cat``."""

from __future__ import annotations

from typing import Any

from ...ops import creation as C
from ...ops import elementwise as E
from ...ops import indexing as I
from ...ops import views as V
from ...shape import ints_arg, normalize_dim, prod
from ...tensor import Tensor
from ..engine import Placed
from ..grad_mode import _state
from ..tape import RAW, Node
from .registry import _needs, _no_grad, _zeros, arg, in_shape, rule


def _reshape_back(ctx: Node, g: Tensor) -> Any:
    return V.reshape(g, in_shape(ctx))


for _op in ("view", "reshape", "squeeze", "unsqueeze"):
    rule(_op)(_reshape_back)


@rule("permute")
def _permute(ctx: Node, g: Tensor) -> Any:
    n = len(in_shape(ctx))
    dims = [normalize_dim(d, n) for d in ints_arg(ctx.args)]
    inverse = [0] * n
    for i, d in enumerate(dims):
        inverse[d] = i
    return V.permute(g, inverse)


def _identity(ctx: Node, g: Tensor) -> Any:
    return g


for _op in ("expand", "clone", "contiguous"):  # expand: the engine sums g back down
    rule(_op)(_identity)


@rule("to")
def _to(ctx: Node, g: Tensor) -> Any:
    dev = ctx._in[0][2]  # back to where the input was (the engine fixes the dtype)
    return C.to(g, device=dev) if dev is not g._device else g


def positions(op: str, shape: tuple[int, ...], dev: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any] | None) -> Tensor:
    """Replay selection op ``op`` on the flat indices of an input of ``shape``:
    which input element each output element came from."""
    def run() -> Tensor:
        idx = V.reshape(C.arange(prod(shape), device=dev), shape)
        return RAW[op](idx, *args, **(kwargs or {}))

    return _no_grad(run)


def _scatter_back(g: Tensor, pos: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A zero tensor of ``shape`` with ``g`` added at flat positions ``pos``
    (repeated positions accumulate)."""
    flat = I.scatter_add(_zeros(g, (prod(shape),)), 0, V.reshape(pos, (-1,)), V.reshape(g, (-1,)))
    return V.reshape(flat, shape)


def _basic_key(key: Any) -> bool:
    """Whether an indexing key picks a view (ints, slices, None, ...) only."""
    parts = key if type(key) is tuple else (key,)
    return all(k is None or k is Ellipsis or type(k) in (int, slice) for k in parts)


def _select(ctx: Node, g: Tensor) -> Any:
    # every op that picks elements (slices, diagonals, windows, indexing, masks):
    # send each output element's gradient back to the element it came from
    shape = in_shape(ctx)
    op = ctx.op
    if not _state.enabled and (op in ("narrow", "select", "diagonal")
                               or (op == "getitem" and _basic_key(arg(ctx, 0, "key")))):
        # a view picks each element once: copy g into the same view of zeros (one
        # pass; the general replay below is an arange, the op and a scatter)
        out = _zeros(g, shape)
        v = RAW[op](out, *ctx.args, **(ctx.kwargs or {}))
        if v._storage is out._storage:
            E.copy_(v, g)
            return out
    pos = positions(op, shape, g._device, ctx.args, ctx.kwargs)
    return _scatter_back(g, pos, shape)


def _select_placed(ctx: Node, g: Tensor) -> Any:
    # (the engine, outside create_graph) a view that picks each element once: g
    # placed at that view, written out when the engine sums it (engine.Placed)
    op = ctx.op
    if op == "getitem" and not _basic_key(arg(ctx, 0, "key")):
        return None
    return Placed(g, op, ctx.args, ctx.kwargs, in_shape(ctx))


for _op, _name in (("narrow", "NarrowBackward"), ("select", "SelectBackward"),
                   ("diagonal", "DiagonalBackward"), ("unfold", "UnfoldBackward"),
                   ("getitem", "IndexBackward"), ("masked_select", "MaskedSelectBackward")):
    rule(_op, name=_name,
         placed=_select_placed if _op in ("narrow", "select", "diagonal", "getitem") else None)(_select)


@rule("index_put")
def _index_put(ctx: Node, g: Tensor) -> Any:
    # out = x with out[key] = value: x's gradient is g with the written places
    # zeroed; value's is g at those places (the engine sums it to value's shape)
    key = arg(ctx, 0, "key")
    nx, nv = _needs(ctx)
    gx = gv = None
    if nx:
        keep = _no_grad(lambda: _written_mask(g, key))
        gx = E.mul(g, keep)
    if nv:
        gv = I.getitem(g, key)
    return gx, gv


def _written_mask(g: Tensor, key: Any) -> Tensor:
    """Ones like ``g``, with 0 at ``key``."""
    m = C.ones(g._shape, dtype=g._dtype, device=g._device)
    I.setitem(m, key, 0.0)
    return m


@rule("gather")
def _gather(ctx: Node, g: Tensor) -> Any:
    dim, index = arg(ctx, 0, "dim"), arg(ctx, 1, "index")
    return I.scatter_add(_zeros(g, in_shape(ctx)), dim, index, g)


@rule("scatter_add")
def _scatter_add(ctx: Node, g: Tensor) -> Any:
    _, dim, index, _src = ctx.args[:4]
    nx, ns = _needs(ctx)
    gs = _fit(I.gather(g, dim, index), in_shape(ctx, 1)) if ns else None
    return (g if nx else None), gs


@rule("scatter")
def _scatter(ctx: Node, g: Tensor) -> Any:
    if (ctx.kwargs or {}).get("reduce") == "add":
        return _scatter_add(ctx, g)
    _, dim, index = ctx.args[:3]
    nx, ns = _needs(ctx)
    gx = I.scatter(g, dim, index, 0.0) if nx else None
    gs = _fit(I.gather(g, dim, index), in_shape(ctx, 1)) if ns else None
    return gx, gs


def _fit(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``g`` (index-shaped) zero-padded up to ``shape`` (src may be larger than index)."""
    if g._shape == shape:
        return g
    z = _zeros(g, shape)
    return I.index_put_op(z, g, tuple(slice(0, n) for n in g._shape))


@rule("masked_fill")
def _masked_fill(ctx: Node, g: Tensor) -> Any:
    return I.masked_fill(g, arg(ctx, 0, "mask"), 0.0)


@rule("cat")
def _cat(ctx: Node, g: Tensor) -> Any:
    infos = ctx._in
    shapes = [info[0] for info in infos]
    dim = arg(ctx, 0, "dim", 0)
    ref = next(s for s in shapes if not (len(s) == 1 and s[0] == 0)) if any(
        not (len(s) == 1 and s[0] == 0) for s in shapes) else shapes[0]
    d = normalize_dim(dim, len(ref))
    out, start = [], 0
    for s, e in zip(shapes, ctx.next_functions):
        if len(s) == 1 and s[0] == 0 and len(ref) != 1:
            out.append(None)  # skipped by cat (legacy empty 1-D)
            continue
        n = s[d]
        out.append(V.narrow(g, d, start, n) if e is not None else None)
        start += n
    return tuple(out)


@rule("copy")
def _copy(ctx: Node, g: Tensor) -> Any:
    # x.copy_(src): the old x gets nothing; src gets g on its own device
    nx, ns = _needs(ctx)
    gs = None
    if ns:
        src_dev = ctx._in[1][2]
        gs = C.to(g, device=src_dev) if src_dev is not g._device else g
    return (_zeros(g) if nx else None), gs
