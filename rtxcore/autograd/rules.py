"""One backward rule per recorded op, written with rtxcore ops.

A rule gets ``ctx`` (the op's node: ``ctx.saved`` inputs, ``ctx.output``,
``ctx.args``/``ctx.kwargs`` as the op was called, ``ctx.needs_input_grad``) and the
gradient of the op's result, and returns one gradient per input (None where none
flows). The engine then sums each gradient down to its input's shape (undoing
broadcasting, in ``engine.sum_to``) and casts it to the input's dtype, so rules
are written for the broadcast shape.

Because rules call the same recorded ops as user code, a backward run with
``create_graph=True`` records too: every rule differentiates again.

Ops without a rule here (``softplus``, ``std``, ``einsum``, ``stack``,
``roll``, ...) are composites of ops that have one.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..ops import creation as C
from ..ops import elementwise as E
from ..ops import indexing as I
from ..ops import linalg as L
from ..ops import reduction as R
from ..ops import views as V
from ..ops.core import as_view, make
from ..ops.reorder import flip
from ..shape import ints_arg, normalize_dim, normalize_dims, prod
from ..tensor import Tensor
from .grad_mode import _state
from .tape import FREED, NODES, RAW, Meta, Node, _new, edge, init_node

_where = E.where


def rule(op: str, save: tuple[int, ...] = (), output: bool = False,
         name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(ctx, grad) -> grads`` as the backward of op ``op``; its nodes
    are named ``name`` (default: ``ExpBackward`` for ``exp``)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        cls_name = name or "".join(p.capitalize() for p in op.strip("_").split("_")) + "Backward"
        NODES[op] = type(cls_name, (Node,), {
            "__slots__": (), "op": op, "save": save, "save_output": output,
            "rule": staticmethod(fn), "__module__": __name__,
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


# -- elementwise -------------------------------------------------------------------------


@rule("neg")
def _neg(ctx: Node, g: Tensor) -> Any:
    return E.neg(g)


@rule("abs", save=(0,))
def _abs(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.sign(ctx.saved[0]))


def _zero_rule(ctx: Node, g: Tensor) -> Any:
    return tuple(_zeros(g) if e is not None else None for e in ctx.next_functions)


for _op in ("sign", "floor", "ceil", "round", "trunc", "floor_divide", "fill"):
    rule(_op)(_zero_rule)


@rule("exp", output=True)
def _exp(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, ctx.output)


@rule("expm1", output=True)
def _expm1(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.add(ctx.output, 1.0))


@rule("log", save=(0,))
def _log(ctx: Node, g: Tensor) -> Any:
    return E.div(g, ctx.saved[0])


@rule("log1p", save=(0,))
def _log1p(ctx: Node, g: Tensor) -> Any:
    return E.div(g, E.add(ctx.saved[0], 1.0))


@rule("log2", save=(0,))
def _log2(ctx: Node, g: Tensor) -> Any:
    return E.div(g, E.mul(ctx.saved[0], math.log(2.0)))


@rule("sqrt", output=True)
def _sqrt(ctx: Node, g: Tensor) -> Any:
    return E.div(g, E.mul(ctx.output, 2.0))


@rule("sin", save=(0,))
def _sin(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.cos(ctx.saved[0]))


@rule("cos", save=(0,))
def _cos(ctx: Node, g: Tensor) -> Any:
    return E.mul(g, E.neg(E.sin(ctx.saved[0])))


@rule("tan", output=True)
def _tan(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.mul(g, E.add(E.mul(out, out), 1.0))


@rule("tanh", output=True)
def _tanh(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.mul(g, E.sub(1.0, E.mul(out, out)))


@rule("sigmoid", output=True)
def _sigmoid(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.mul(g, E.mul(out, E.sub(1.0, out)))


@rule("reciprocal", output=True)
def _reciprocal(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    return E.neg(E.mul(g, E.mul(out, out)))


@rule("relu", output=True)
def _relu(ctx: Node, g: Tensor) -> Any:
    # 0 at 0, as PyTorch
    return _where(E.gt(ctx.output, 0), g, 0.0)


@rule("erf", save=(0,))
def _erf(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    return E.mul(g, E.mul(E.exp(E.neg(E.mul(x, x))), 2.0 / math.sqrt(math.pi)))


@rule("gelu", save=(0,), output=True)
def _gelu(ctx: Node, g: Tensor) -> Any:
    return E.gelu_backward(g, ctx.saved[0], arg(ctx, 0, "approximate", "none"), ctx.output)


@rule("clamp", save=(0,))
def _clamp(ctx: Node, g: Tensor) -> Any:
    # 1 inside [min, max], bounds included (as PyTorch), 0 outside
    x = ctx.saved[0]
    lo, hi = arg(ctx, 0, "min"), arg(ctx, 1, "max")
    inside = None
    if lo is not None:
        inside = E.ge(x, lo)
    if hi is not None:
        inside = E.le(x, hi) if inside is None else E.logical_and(inside, E.le(x, hi))
    return _where(inside, g, 0.0)


# -- binary ----------------------------------------------------------------------------


@rule("add")
def _add(ctx: Node, g: Tensor) -> Any:
    alpha = arg(ctx, 0, "alpha", 1)
    return g, (g if alpha == 1 else E.mul(g, alpha))


@rule("sub")
def _sub(ctx: Node, g: Tensor) -> Any:
    alpha = arg(ctx, 0, "alpha", 1)
    return g, (E.neg(g) if alpha == 1 else E.mul(g, -alpha))


@rule("mul", save=(0, 1))
def _mul(ctx: Node, g: Tensor) -> Any:
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    return (E.mul(g, y) if nx else None), (E.mul(g, x) if ny else None)


@rule("div", save=(0, 1))
def _div(ctx: Node, g: Tensor) -> Any:
    if arg(ctx, 0, "rounding_mode") is not None:
        return _zero_rule(ctx, g)
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    gx = E.div(g, y) if nx else None
    gy = E.neg(E.div(E.mul(g, x), E.mul(y, y))) if ny else None
    return gx, gy


@rule("pow", save=(0, 1), output=True)
def _pow(ctx: Node, g: Tensor) -> Any:
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    gx = gy = None
    if nx:
        # y * x**(y-1), with 0 where y == 0 (0**-1 must not give inf * 0)
        d = E.mul(y, E.pow(x, E.sub(y, 1.0) if isinstance(y, Tensor) else y - 1.0))
        if isinstance(y, Tensor):
            d = _where(E.eq(y, 0), 0.0, d)
        elif y == 0:
            d = _zeros(g)  # not d * 0: d is already nan at x == 0
        gx = E.mul(g, d)
    if ny:
        out = ctx.output
        logx = E.log(x) if isinstance(x, Tensor) else (math.log(x) if x > 0 else math.nan)
        d = E.mul(out, logx)
        if isinstance(x, Tensor):  # 0**y for y >= 0: gradient 0, not nan
            d = _where(E.logical_and(E.eq(x, 0), E.ge(y, 0)), 0.0, d)
        elif x == 0:
            d = _where(E.ge(y, 0), 0.0, d)
        gy = E.mul(g, d)
    return gx, gy


def _minmax_rule(ctx: Node, g: Tensor) -> Any:
    # the larger (smaller) input gets the gradient; ties split it in half (as PyTorch)
    x, y = ctx.saved
    win = E.gt(x, y) if ctx.op == "maximum" else E.lt(x, y)
    w = _where(E.eq(x, y), 0.5, _where(win, 1.0, 0.0))
    nx, ny = _needs(ctx)
    return (E.mul(g, w) if nx else None), (E.mul(g, E.sub(1.0, w)) if ny else None)


rule("maximum", save=(0, 1))(_minmax_rule)
rule("minimum", save=(0, 1))(_minmax_rule)


@rule("remainder", save=(0, 1))
def _remainder(ctx: Node, g: Tensor) -> Any:
    x, y = ctx.saved
    nx, ny = _needs(ctx)
    return (g if nx else None), (E.neg(E.mul(g, E.floor_divide(x, y))) if ny else None)


@rule("where", save=(0,))
def _where_rule(ctx: Node, g: Tensor) -> Any:
    cond = ctx.saved[0]
    _, nx, ny = _needs(ctx)
    return None, (_where(cond, g, 0.0) if nx else None), (_where(cond, 0.0, g) if ny else None)


# -- reductions -----------------------------------------------------------------------


def _axes_of(ctx: Node, dim: Any) -> tuple[int, ...]:
    return normalize_dims(dim, len(in_shape(ctx)))


def _spread(g: Tensor, shape: tuple[int, ...], axes: tuple[int, ...], keepdim: bool) -> Tensor:
    """A reduction's gradient ``g`` broadcast back over the reduced ``axes``."""
    if _state.enabled:  # create_graph: with recorded ops
        return V.expand(_keep(g, shape, axes, keepdim), shape)
    # otherwise one stride-0 view (the common loss.sum() / .mean() step)
    gs = g._strides
    strides, j = [], 0
    for i in range(len(shape)):
        if i in axes:
            strides.append(0)
            j += keepdim
        else:
            strides.append(gs[j])
            j += 1
    return as_view(g, shape, tuple(strides), g._offset)


@rule("sum")
def _sum(ctx: Node, g: Tensor) -> Any:
    shape = in_shape(ctx)
    axes = _axes_of(ctx, arg(ctx, 0, "dim"))
    return _spread(g, shape, axes, arg(ctx, 1, "keepdim", False))


@rule("mean")
def _mean(ctx: Node, g: Tensor) -> Any:
    shape = in_shape(ctx)
    axes = _axes_of(ctx, arg(ctx, 0, "dim"))
    n = prod(shape[a] for a in axes)
    return _spread(E.div(g, n) if n else g, shape, axes, arg(ctx, 1, "keepdim", False))


@rule("prod", save=(0,))
def _prod(ctx: Node, g: Tensor) -> Any:
    # the product of all the other elements, as exclusive cumulative products from
    # both sides: no division, so zeros are handled
    x = ctx.saved[0]
    shape = in_shape(ctx)
    dim = arg(ctx, 0, "dim")
    keepdim = arg(ctx, 1, "keepdim", False)
    if x._dtype is not g._dtype:
        x = C.to(x, g._dtype)
    if dim is None or not shape:
        flat = V.reshape(x, (-1,))
        others = V.reshape(_others_product(flat, 0), shape)
        return E.mul(V.reshape(g, (1,) * len(shape)) if shape else g, others)
    d = normalize_dim(dim, len(shape))
    return E.mul(_keep(g, shape, (d,), keepdim), _others_product(x, d))


def _others_product(x: Tensor, d: int) -> Tensor:
    n = x._shape[d]
    if n == 0:
        return x
    ones = C.ones_like(V.narrow(x, d, 0, 1))
    left = I.cat([ones, R.cumprod(V.narrow(x, d, 0, n - 1), d)], d) if n > 1 else ones
    rx = flip(x, d)
    right = flip(I.cat([ones, R.cumprod(V.narrow(rx, d, 0, n - 1), d)], d), d) if n > 1 else ones
    return E.mul(left, right)


def _amax_rule(ctx: Node, g: Tensor) -> Any:
    # ties share the gradient evenly (as PyTorch's amax/amin and max()/min())
    x = ctx.saved[0]
    shape = in_shape(ctx)
    axes = _axes_of(ctx, arg(ctx, 0, "dim"))
    keepdim = arg(ctx, 1, "keepdim", False)
    out = _keep(ctx.output, shape, axes, keepdim)
    mask = C.to(E.eq(x, out), g._dtype)
    count = R.sum(mask, axes, keepdim=True)
    return E.mul(E.div(_keep(g, shape, axes, keepdim), count), mask)


rule("amax", save=(0,), output=True)(_amax_rule)
rule("amin", save=(0,), output=True)(_amax_rule)


def _value_at_index(ctx: Node, g: Tensor) -> Any:
    # max(x, dim) / min(x, dim): the gradient goes to the index returned
    shape = in_shape(ctx)
    d = normalize_dim(arg(ctx, 0, "dim"), len(shape)) if shape else 0
    keepdim = arg(ctx, 1, "keepdim", False)
    idx = ctx.extra
    if idx is None:
        raise RuntimeError(FREED)
    if not shape:
        return g
    if not keepdim:
        g, idx = V.unsqueeze(g, d), V.unsqueeze(idx, d)
    return I.scatter_add(_zeros(g, shape), d, idx, g)


rule("max_dim", name="MaxBackward")(_value_at_index)
rule("min_dim", name="MinBackward")(_value_at_index)


@rule("sort")
def _sort(ctx: Node, g: Tensor) -> Any:
    shape = in_shape(ctx)
    idx = ctx.extra
    if idx is None:
        raise RuntimeError(FREED)
    if not shape:
        return g
    d = normalize_dim(arg(ctx, 0, "dim", -1), len(shape))
    return I.scatter_add(_zeros(g, shape), d, idx, g)


@rule("var", save=(0,))
def _var(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    shape = in_shape(ctx)
    axes, correction, keepdim = R.var_args(x, *ctx.args, **(ctx.kwargs or {}))
    n = prod(shape[a] for a in axes)
    if x._dtype is not g._dtype:
        x = C.to(x, g._dtype)
    centered = E.sub(x, R.mean(x, axes, keepdim=True))
    scale = 2.0 / max(0, n - correction) if n - correction > 0 else math.inf
    return E.mul(_keep(g, shape, axes, keepdim), E.mul(centered, scale))


@rule("norm", save=(0,), output=True)
def _norm(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    shape = in_shape(ctx)
    p = arg(ctx, 0, "p", "fro")
    axes = _axes_of(ctx, arg(ctx, 1, "dim"))
    keepdim = arg(ctx, 2, "keepdim", False)
    if x._dtype is not g._dtype:
        x = C.to(x, g._dtype)
    g = _keep(g, shape, axes, keepdim)
    out = _keep(ctx.output, shape, axes, keepdim)
    if p == 0:
        return _zeros(g, shape)
    if p == 1:
        return E.mul(g, E.sign(x))
    if p in ("fro", 2, 2.0):
        return E.mul(g, _where(E.eq(out, 0), 0.0, E.div(x, out)))  # 0 at the origin
    if p in (math.inf, "inf", -math.inf, "-inf"):
        ax = E.abs(x)
        mask = C.to(E.eq(ax, out), g._dtype)
        return E.mul(E.div(g, R.sum(mask, axes, keepdim=True)), E.mul(mask, E.sign(x)))
    p = float(p)
    # x |x|**(p-2) / norm**(p-1)
    d = E.div(E.mul(E.sign(x), E.pow(E.abs(x), p - 1.0)), E.pow(out, p - 1.0))
    return E.mul(g, _where(E.eq(out, 0), 0.0, d))


@rule("logsumexp", save=(0,), output=True)
def _logsumexp(ctx: Node, g: Tensor) -> Any:
    x = ctx.saved[0]
    shape = in_shape(ctx)
    axes = _axes_of(ctx, arg(ctx, 0, "dim"))
    keepdim = arg(ctx, 1, "keepdim", False)
    out = _keep(ctx.output, shape, axes, keepdim)
    return E.mul(_keep(g, shape, axes, keepdim), E.exp(E.sub(x, out)))


def _softmax_dim(ctx: Node) -> tuple[int, ...]:
    shape = in_shape(ctx)
    return (normalize_dim(arg(ctx, 0, "dim"), len(shape)),) if shape else ()


@rule("softmax", output=True)
def _softmax(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    axes = _softmax_dim(ctx)
    if not out.numel():
        return g
    return E.mul(out, E.sub(g, R.sum(E.mul(g, out), axes, keepdim=True)))


@rule("log_softmax", output=True)
def _log_softmax(ctx: Node, g: Tensor) -> Any:
    out = ctx.output
    axes = _softmax_dim(ctx)
    if not out.numel():
        return g
    return E.sub(g, E.mul(E.exp(out), R.sum(g, axes, keepdim=True)))


@rule("cumsum")
def _cumsum(ctx: Node, g: Tensor) -> Any:
    shape = in_shape(ctx)
    if not shape:
        return g
    d = normalize_dim(arg(ctx, 0, "dim"), len(shape))
    return flip(R.cumsum(flip(g, d), d), d)


# -- views and copies ----------------------------------------------------------------------


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


for _op, _name in (("narrow", "NarrowBackward"), ("select", "SelectBackward"),
                   ("diagonal", "DiagonalBackward"), ("unfold", "UnfoldBackward"),
                   ("getitem", "IndexBackward"), ("masked_select", "MaskedSelectBackward")):
    rule(_op, name=_name)(_select)


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


# -- linear algebra -----------------------------------------------------------------------


@rule("matmul", save=(0, 1))
def _matmul(ctx: Node, g: Tensor) -> Any:
    a, b = ctx.saved
    na, nb = a.ndim, b.ndim
    need_a, need_b = _needs(ctx)
    if a._dtype is not g._dtype:
        a = C.to(a, g._dtype)
    if b._dtype is not g._dtype:
        b = C.to(b, g._dtype)
    ga = gb = None
    if na == 1 and nb == 1:
        return (E.mul(g, b) if need_a else None), (E.mul(g, a) if need_b else None)
    if na == 1:  # (k) @ (..., k, m) -> (..., m)
        g2 = V.unsqueeze(g, -2)
        if need_a:
            ga = V.squeeze(L.matmul(g2, b.mT), -2)
        if need_b:
            gb = L.matmul(V.unsqueeze(a, -1), g2)
        return ga, gb
    if nb == 1:  # (..., n, k) @ (k) -> (..., n)
        g2 = V.unsqueeze(g, -1)
        if need_a:
            ga = L.matmul(g2, V.unsqueeze(b, -2))
        if need_b:
            gb = V.squeeze(L.matmul(a.mT, g2), -1)
        return ga, gb
    if need_a:
        ga = L.matmul(g, b.mT)
    if need_b:
        gb = L.matmul(a.mT, g)
    return ga, gb


@rule("linear", save=(0, 1))
def _linear(ctx: Node, g: Tensor) -> Any:
    x, w = ctx.saved[0], ctx.saved[1]
    need_x, need_w, need_b = (*_needs(ctx), False)[:3]  # bias may not have been passed
    if w._dtype is not g._dtype:
        w = C.to(w, g._dtype)
    gx = L.matmul(g, w) if need_x else None
    gw = gb = None
    if need_w or need_b:
        out = g._shape[-1] if g._shape else 1
        g2 = V.reshape(g, (-1, out)) if g.ndim != 2 else g
        if need_w:
            if x.ndim == 1:
                gw = L.outer(g, C.to(x, g._dtype))
            else:
                x2 = V.reshape(x, (-1, x._shape[-1])) if x.ndim != 2 else x
                gw = L.matmul(g2.mT, C.to(x2, g._dtype))
        if need_b:
            gb = R.sum(g2, 0)
    return gx, gw, gb


# -- in place through a view ----------------------------------------------------------------


class CopySlices(Node):
    """The owner of memory that a view of it changed in place (``x[0].mul_(2)``,
    ``x[i] = v``): its gradient goes to its old value outside the changed region,
    and through the in-place op's rule inside it."""

    __slots__ = ()
    op = "copy_slices"

    @staticmethod
    def rule(ctx: Node, g: Tensor) -> Any:
        if ctx.extra is None:
            raise RuntimeError(FREED)
        pos, fn = ctx.extra
        from .engine import _apply

        flat = V.reshape(g, (-1,))
        gview = V.reshape(I.getitem(flat, V.reshape(pos, (-1,))), pos._shape)
        fgrads = _apply(fn, [gview])
        keep = _no_grad(lambda: _outside(pos, flat))
        res = E.mul(flat, keep)
        if fgrads and fgrads[0] is not None:
            res = I.scatter_add(res, 0, V.reshape(pos, (-1,)), V.reshape(fgrads[0], (-1,)))
        return (V.reshape(res, g._shape),) + tuple(fgrads[1:])

    def release(self) -> None:
        if self.extra is not None:
            self.extra[1].release()
        Node.release(self)


class AsStridedBackward(Node):
    """A view whose memory was changed in place: its elements are positions of its
    owner, whose node (a CopySlices) now holds the history."""

    __slots__ = ()
    op = "as_strided"

    @staticmethod
    def rule(ctx: Node, g: Tensor) -> Any:
        return _scatter_back(g, ctx.extra, in_shape(ctx))

    def release(self) -> None:
        pass  # positions are small and needed by every later backward through it


def _outside(pos: Tensor, like: Tensor) -> Tensor:
    m = C.ones(like._shape, dtype=like._dtype, device=like._device)
    I.setitem(m, V.reshape(pos, (-1,)), 0.0)
    return m


def copy_slices(base: Tensor, view: Tensor, fn: Node) -> None:
    """``view`` (of ``base``) was just overwritten by ``fn``'s result: rewire
    ``base`` through a CopySlices and ``view`` through a view of it."""
    if not base.is_contiguous():
        raise RuntimeError(
            "in-place change of a view whose base is not contiguous is not supported with "
            "autograd; clone() the base first"
        )
    pos = _no_grad(lambda: _view_positions(base, view))
    cs = init_node(_new(CopySlices), (edge(base),) + tuple(fn.next_functions[1:]),
                   ((base._shape, base._dtype, base._device),) + tuple(fn._in[1:]), (pos, fn))
    base._ag = Meta(cs, 0)
    _as_view_of(base, view, pos, (cs, 0))


def _as_view_of(base: Tensor, view: Tensor, pos: Tensor, base_edge: Any) -> None:
    v = init_node(_new(AsStridedBackward), (base_edge,),
                  ((base._shape, base._dtype, base._device),), pos)
    m = Meta(v, 0)
    m.view_version = view._storage.version
    view._ag = m


def view_of_base(base: Tensor, view: Tensor) -> None:
    """Give ``view`` a fresh history: a view of ``base``'s current one."""
    if not base.is_contiguous():
        raise RuntimeError(
            "a view whose base (not contiguous) was changed in place can't be used with "
            "autograd; clone() the base first"
        )
    pos = _no_grad(lambda: _view_positions(base, view))
    _as_view_of(base, view, pos, edge(base))


def _view_positions(base: Tensor, view: Tensor) -> Tensor:
    idx = C.arange(base.numel(), device=base._device)
    return C.clone(make(idx._storage, view._shape, view._strides, view._offset - base._offset,
                        idx._dtype, idx._device))
