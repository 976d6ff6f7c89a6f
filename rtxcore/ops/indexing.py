"""Indexing: ``x[key]`` and ``x[key] = value``, ``gather``/``scatter``/``scatter_add``,
``index_select``, ``masked_fill``/``masked_select`` and ``nonzero``.

``x[key]`` is basic indexing (ints, slices, None, ...) done as a view, followed,
when the key holds int tensors, lists or bool masks, by the ``index`` primitive
on the advanced dims. Ints are basic (a ``select``), as in PyTorch: advanced
dims land where the index tensors stood when those are adjacent, else first.

The joining (rtxcore/ops/joining.py), sorting (rtxcore/ops/sorting.py) and
triangle (rtxcore/ops/triangular.py) ops are re-exported here, and bound as
tensor methods with this module's.
"""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from ..shape import broadcast_many, normalize_dim, prod
from ..tensor import Tensor
from . import elementwise as E
from . import views as V
from ..autograd.grad_mode import _state
from ..autograd.tape import differentiable, inplace, requires_grad, run_inplace
from .checks import check_range, wrap_negative
from .core import own_kernel
from .core import (as_view, bad_operand, cast, check_overlap, contiguous, cstrides, empty,
                   expand_to, kernel, mixed_devices, scalar_for, view_of, write_result, zeros_on)
from .joining import cat, concat, concatenate, hstack, stack, vstack  # noqa: F401
from .sorting import argsort, sort, topk  # noqa: F401
from .triangular import tril, triu  # noqa: F401

# -- __getitem__ / __setitem__ -----------------------------------------------------


def _is_index_seq(k: Any) -> bool:
    """A list, tuple or NumPy array of indices (NumPy scalars are plain ints)."""
    if isinstance(k, (list, tuple)):
        return True
    return type(k).__module__ == "numpy" and getattr(k, "ndim", 0) > 0


def _scalar_index(k: Any) -> Any:
    """A 0-d integer tensor or array indexes like an int (a view), as in PyTorch."""
    if isinstance(k, Tensor) and not k._shape and k._dtype.kind in "iu":
        return int(k.item())
    if type(k).__module__ == "numpy" and getattr(k, "ndim", None) == 0 and k.dtype.kind in "iu":
        return int(k)
    return k


def _as_index_tensor(k: Any, dev: Any) -> Tensor:
    from .creation import tensor as _tensor

    if isinstance(k, Tensor):
        t = k
    else:
        t = _tensor(k, device=dev)
        if t.numel() == 0 and t._dtype.kind == "f":
            t = cast(t, D.int64)
    if t._dtype.kind == "f":
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors, got {t._dtype.name}")
    return _index_on(t, dev)


def _index_on(t: Tensor, dev: Any) -> Tensor:
    """Indices may live on cpu or on the indexed tensor's device (PyTorch's rule)."""
    if t._device is dev:
        return t
    if t._device.type == "cpu":
        return t.to(dev)
    raise RuntimeError(
        f"indices should be either on cpu or on the same device as the indexed tensor "
        f"({dev}), but found indices on {t._device}"
    )


def _expand_key(x: Tensor, key: Any) -> list[Any]:
    if not isinstance(key, tuple):
        key = (key,)
    key = [_scalar_index(k) for k in key]
    consumed = 0
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, bool):
            continue
        if isinstance(k, Tensor) and k._dtype is D.bool_:
            consumed += max(k.ndim, 1) if k.ndim else 0
        elif _is_index_seq(k) and _is_bool_seq(k):
            import numpy as np

            consumed += np.ndim(k)  # a nested bool list / array masks that many dims
        else:
            consumed += 1
    ell = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ell) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise IndexError(
            f"too many indices for tensor of dimension {x.ndim} (got {consumed} indices "
            f"for a tensor of shape {tuple(x._shape)})"
        )
    fill = [slice(None)] * (x.ndim - consumed)
    if ell:
        i = ell[0]
        key = key[:i] + fill + key[i + 1:]
    else:
        key = key + fill
    return key


def _basic(x: Tensor, key: Any) -> tuple[Tensor, list[tuple[int, Any]]]:
    """Apply the basic part of ``key`` as a view; return it and the advanced
    indices as (dim in the view, raw index) pairs."""
    key = _expand_key(x, key)
    shape: list[int] = []
    strides: list[int] = []
    offset = x._offset
    adv: list[tuple[int, Any]] = []
    d = 0  # dim of x being consumed
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        if isinstance(k, bool):  # x[True] adds a dim of 1, x[False] one of 0 (as NumPy)
            shape.append(1 if k else 0)
            strides.append(0)
            continue
        if isinstance(k, int) or (hasattr(k, "__index__") and not _is_index_seq(k) and not isinstance(k, Tensor)):
            i = int(k.__index__() if not isinstance(k, int) else k)
            size = x._shape[d]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {size}")
            offset += (i % size) * x._strides[d]
            d += 1
            continue
        if isinstance(k, slice):
            size = x._shape[d]
            if k.step is not None and int(k.step) <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, step = k.indices(size)
            n = max(0, -(-(stop - start) // step))
            if n:
                offset += start * x._strides[d]
            shape.append(n)
            strides.append(x._strides[d] * step)
            d += 1
            continue
        if isinstance(k, Tensor) and k._dtype is D.bool_ or (_is_index_seq(k) and _is_bool_seq(k)):
            mask = k if isinstance(k, Tensor) else _as_index_tensor(k, x._device)
            nd = mask.ndim
            if nd == 0:
                raise IndexError("indexing with a 0-d bool tensor is not supported")
            if tuple(mask._shape) != tuple(x._shape[d:d + nd]):
                raise IndexError(
                    f"the shape of the mask {tuple(mask._shape)} does not match the shape "
                    f"{tuple(x._shape[d:d + nd])} of the indexed tensor at dimension {d}"
                )
            for j, coord in enumerate(nonzero(_index_on(mask, x._device), as_tuple=True)):
                adv.append((len(shape), coord))
                shape.append(x._shape[d + j])
                strides.append(x._strides[d + j])
            d += nd
            continue
        if isinstance(k, Tensor) or _is_index_seq(k):
            adv.append((len(shape), k))
            shape.append(x._shape[d])
            strides.append(x._strides[d])
            d += 1
            continue
        raise IndexError(
            f"only integers, slices (`:`), ellipsis (`...`), None and long or bool "
            f"tensors are valid indices (got {type(k).__name__})"
        )
    return as_view(x, tuple(shape), tuple(strides), offset), adv


def _is_bool_seq(k: Any) -> bool:
    if type(k).__module__ == "numpy":
        return k.dtype == bool
    flat = k
    while isinstance(flat, (list, tuple)) and flat:
        flat = flat[0]
    return isinstance(flat, bool)


def _prepare_advanced(v: Tensor, adv: list[tuple[int, Any]]) -> tuple[Tensor, list[Tensor], list[int]]:
    """Normalise the index tensors (int64, on v's device, in range, non-negative,
    broadcast) and permute ``v`` so the advanced dims come first."""
    dims = [p for p, _ in adv]
    idx = [_as_index_tensor(k, v._device) for _, k in adv]
    try:
        shape = broadcast_many(*(t._shape for t in idx))
    except RuntimeError:
        raise IndexError(
            "shape mismatch: indexing tensors could not be broadcast together with shapes "
            + ", ".join(str(tuple(t._shape)) for t in idx)
        ) from None
    out = []
    for d, t in zip(dims, idx):
        t = cast(t, D.int64)
        size = v._shape[d]
        if t.numel():
            bounds = check_range(t, -size, size, lambda bad, d=d, size=size: IndexError(
                f"index {bad} is out of bounds for dimension {d} with size {size}"))
            if bounds is None or bounds[0] < 0:  # (None: not read, on the device)
                t = wrap_negative(t, size)
        out.append(t.expand(shape) if t._shape != shape else t)
    rest = [d for d in range(v.ndim) if d not in dims]
    vp = V.permute(v, dims + rest)
    return vp, out, dims


@differentiable("getitem")
def getitem(x: Tensor, key: Any) -> Tensor:
    if type(key) is int and x._shape:  # fast path: x[i]
        size = x._shape[0]
        if not -size <= key < size:
            raise IndexError(f"index {key} is out of bounds for dimension 0 with size {size}")
        return as_view(x, x._shape[1:], x._strides[1:], x._offset + (key % size) * x._strides[0])
    if type(key) is slice and x._shape and (key.step is None or key.step > 0):
        # fast path: x[a:b:c]
        size = x._shape[0]
        start, stop, step = key.indices(size)
        n = max(0, -(-(stop - start) // step))
        stride0 = x._strides[0]
        return as_view(x, (n,) + x._shape[1:], (stride0 * step,) + x._strides[1:],
                       x._offset + (start * stride0 if n else 0))
    v, adv = _basic(x, key)
    if not adv:
        return v
    vp, idx, dims = _prepare_advanced(v, adv)
    k = len(idx)
    ishape = idx[0]._shape
    out = empty(ishape + vp._shape[k:], x._dtype, x._device)
    kernel(x._device, "index")(out._h, view_of(vp), tuple(expand_to(t, ishape) for t in idx))
    if dims == list(range(dims[0], dims[0] + k)) and dims[0] > 0:
        # adjacent advanced dims: their result dims go where they stood
        n = len(ishape)
        order = list(range(n, n + dims[0])) + list(range(n)) + list(range(n + dims[0], out.ndim))
        out = V.permute(out, order)
    return out


def _strip_leading_ones(value: Any, ndim: int) -> Any:
    """PyTorch lets ``x[i] = v`` take a ``v`` with extra leading size-1 dims."""
    while isinstance(value, Tensor) and value.ndim > ndim and value._shape[0] == 1:
        value = V.squeeze(value, 0)
    return value


def setitem(x: Tensor, key: Any, value: Any) -> None:
    """``x[key] = value``. With autograd it records as ``index_put`` (x's old value
    outside ``key``, ``value`` inside), on x's owner when x is a view."""
    if _state.enabled and (requires_grad(x) or requires_grad(value) or requires_grad(x._base)):
        run_inplace("index_put_", x, lambda: index_put_op(x, value, key),
                    lambda: _setitem(x, key, value))
        return
    _setitem(x, key, value)


@differentiable("index_put", inputs=2)
def index_put_op(x: Tensor, value: Any, key: Any) -> Tensor:
    """A copy of ``x`` with ``[key] = value``: ``x[key] = value`` out of place."""
    out = x.clone()
    _setitem(out, key, value)
    return out


def _setitem(x: Tensor, key: Any, value: Any) -> None:
    v, adv = _basic(x, key)
    if not adv:
        E.copy_(v, _strip_leading_ones(value, v.ndim))
        return
    vp, idx, dims = _prepare_advanced(v, adv)
    k = len(idx)
    ishape = idx[0]._shape
    target_shape = ishape + vp._shape[k:]
    from .creation import as_tensor_on

    val = value if isinstance(value, Tensor) else as_tensor_on(value, x._device, x._dtype)
    if val._device is not x._device:
        raise mixed_devices("index_put_", x, val)
    val = _strip_leading_ones(cast(val, x._dtype), len(target_shape))
    adjacent = dims == list(range(dims[0], dims[0] + k)) and dims[0] > 0
    # the value broadcasts to the result of getitem, whose layout has the index
    # dims where the index tensors stood when those are adjacent
    result_shape = (vp._shape[k:k + dims[0]] + ishape + vp._shape[k + dims[0]:]) if adjacent else target_shape
    try:
        full = V.expand(val, result_shape)
    except RuntimeError:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {tuple(val._shape)} cannot be broadcast "
            f"to indexing result of shape {tuple(result_shape)}"
        ) from None
    if adjacent:  # move the index dims first, as in vp
        n = len(ishape)
        full = V.permute(full, list(range(dims[0], dims[0] + n)) + list(range(dims[0])) + list(range(dims[0] + n, full.ndim)))
    vals = expand_to(full, target_shape)
    _index_put(vp, tuple(idx), vals, ishape)
    x._storage.version += 1


def _index_put(out: Tensor, idx: tuple[Tensor, ...], vals: Any, ishape: tuple[int, ...]) -> None:
    """out[idx] = vals, where vals is a native view already broadcast to the result."""
    dev = out._device
    k = own_kernel(dev, "index_put", out._dtype)
    views = tuple(expand_to(t, ishape) for t in idx)
    if k is not None:
        k(view_of(out), views, vals)
        return
    # Decomposition on primitives: linearise the indexed dims, keep only the last
    # write to each position (as the kernels do: a stable sort groups repeated
    # indices in order), scatter-add the kept values into a zero buffer, and take
    # them where anything was written.
    nlead = len(idx)
    lead, rest = out._shape[:nlead], out._shape[nlead:]
    m, r = prod(ishape), prod(rest)
    if m == 0 or r == 0:
        return
    lin = None
    for j, t in enumerate(idx):
        term = E.mul(t, prod(lead[j + 1:]))
        lin = term if lin is None else E.add(lin, term)
    lin1 = V.reshape(lin, (m, 1))
    sv, si = sort(V.reshape(lin, (m,)))
    last = empty((m,), D.int64, dev)
    kernel(dev, "full")(last._h, 1)
    if m > 1:
        kernel(dev, "cast")(view_of(last[:-1]), view_of(E.ne(sv[:-1], sv[1:])))
    keep = zeros_on((m, 1), D.int64, dev)
    kernel(dev, "scatter_add")(keep._h, 0, view_of(V.reshape(si, (m, 1))), view_of(V.reshape(last, (m, 1))))
    vt = empty(ishape + rest, out._dtype, dev)
    kernel(dev, "copy")(vt._h, vals)
    vt = E.where(E.gt(keep, 0), V.reshape(vt, (m, r)), zeros_on((1, 1), out._dtype, dev))
    acc = zeros_on((prod(lead), r), out._dtype, dev)
    kernel(dev, "scatter_add")(acc._h, 0, view_of(lin1.expand(m, r)), view_of(vt))
    hit = zeros_on((prod(lead), 1), D.int64, dev)
    kernel(dev, "scatter_add")(hit._h, 0, view_of(lin1), keep._h)
    cur = V.reshape(contiguous(out), (prod(lead), r))
    new = E.where(E.gt(hit, 0), acc, cur)
    kernel(dev, "copy")(view_of(out), view_of(V.reshape(new, out._shape)))


# -- gather / scatter --------------------------------------------------------------


def _check_index(op: str, x: Tensor, dim: int, index: Tensor) -> int:
    if not isinstance(index, Tensor):
        raise bad_operand(op, index)
    if index._dtype is not D.int64:
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {index._dtype.name}")
    if index._device is not x._device:
        raise mixed_devices(op, x, index)
    d = normalize_dim(dim, x.ndim)
    if index.ndim != x.ndim:
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as input tensor ({index.ndim} vs {x.ndim})")
    for i, (a, b) in enumerate(zip(index._shape, x._shape)):
        if i != d and a > b:
            raise RuntimeError(
                f"{op}(): Size does not match at dimension {i} expected index {tuple(index._shape)} "
                f"to be no larger than self {tuple(x._shape)} apart from dimension {d}"
            )
    if index.numel():
        every = tuple(range(index.ndim))
        if 0 in index._strides:  # an expanded index: check each distinct element once
            index = as_view(index, tuple(1 if st == 0 else n for n, st in
                                         zip(index._shape, index._strides)),
                            index._strides, index._offset)
        size = x._shape[d]
        check_range(index, 0, size, lambda bad: IndexError(
            f"{op}(): index {bad} is out of bounds for dimension {d} with size {size}"))
    return d


def _check_src(op: str, src: Any, index: Tensor) -> None:
    if not isinstance(src, Tensor):
        raise bad_operand(op, src)
    if src.ndim != index.ndim or any(i > s for i, s in zip(index._shape, src._shape)):
        raise RuntimeError(
            f"{op}(): Expected index {tuple(index._shape)} to be no larger than src "
            f"{tuple(src._shape)} in every dimension (and of the same number of dimensions)"
        )


def _narrow_to(x: Tensor, shape: tuple[int, ...], skip: int) -> Tensor:
    """View of x cut to ``shape`` in every dim but ``skip``."""
    s = tuple(n if i == skip else shape[i] for i, n in enumerate(x._shape))
    return as_view(x, s, x._strides, x._offset)


@differentiable("gather")
def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    d = _check_index("gather", x, dim, index)
    out = empty(index._shape, x._dtype, x._device)
    kernel(x._device, "gather")(out._h, view_of(_narrow_to(x, index._shape, d)), d, view_of(index))
    return out


def take_along_dim(x: Tensor, indices: Tensor, dim: int) -> Tensor:
    return gather(x, dim, indices)


@differentiable("scatter_add", inputs=(0, 3))
def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return scatter_add_(x.clone(), dim, index, src)


@inplace(scatter_add, inputs=3)
def scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    d = _check_index("scatter_add", x, dim, index)
    if src._device is not x._device:
        raise mixed_devices("scatter_add", x, src)
    _check_src("scatter_add", src, index)
    check_overlap("scatter_add_", x, index, src)
    src = _narrow_to(cast(src, x._dtype), index._shape, -1)
    kernel(x._device, "scatter_add")(view_of(x), d, view_of(index), view_of(src))
    x._storage.version += 1
    return x


@differentiable("scatter", inputs=(0, 3))
def scatter(x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Tensor:
    return scatter_(x.clone(), dim, index, src, value=value, reduce=reduce)


@inplace(scatter, inputs=3)
def scatter_(x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
             reduce: str | None = None) -> Tensor:
    if src is None:
        src = value
    if reduce == "add":
        if not isinstance(src, Tensor):
            from .creation import full

            src = full(index._shape, src, dtype=x._dtype, device=x._device)
        return scatter_add_(x, dim, index, src)
    if reduce is not None:
        raise NotImplementedError(f"scatter(reduce={reduce!r}) is not supported; use reduce='add' or scatter_add")
    d = _check_index("scatter", x, dim, index)
    if index.numel() == 0:
        return x
    # x[i0, ..., index[i], ..., ik] = src[i] via index_put with coordinate grids
    from .creation import arange

    ishape = index._shape
    idx = []
    for i in range(x.ndim):
        if i == d:
            idx.append(index)
        else:
            shape = [1] * x.ndim
            shape[i] = ishape[i]
            idx.append(V.reshape(arange(ishape[i], device=x._device), shape).expand(ishape))
    if isinstance(src, Tensor):
        if src._device is not x._device:
            raise mixed_devices("scatter", x, src)
        _check_src("scatter", src, index)
        vals = expand_to(cast(_narrow_to(src, ishape, -1), x._dtype), ishape)
    else:
        t = empty((), x._dtype, x._device)
        kernel(x._device, "full")(t._h, scalar_for(src, x._dtype))
        vals = expand_to(t, ishape)
    _index_put(x, tuple(idx), vals, ishape)
    x._storage.version += 1
    return x


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index.ndim > 1 or index._dtype.kind not in "iu":
        raise IndexError("index_select(): index must be a 1-D (or 0-D) integer tensor")
    d = normalize_dim(dim, x.ndim)
    key = [slice(None)] * d + [V.reshape(index, (-1,))]
    out = getitem(x, tuple(key))
    return out if index.ndim else V.squeeze(out, d)


@differentiable("masked_fill")
def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    if not isinstance(mask, Tensor) or mask._dtype is not D.bool_:
        raise RuntimeError("masked_fill only supports boolean masks, but got mask with dtype "
                           + (mask._dtype.name if isinstance(mask, Tensor) else type(mask).__name__))
    if mask._device is not x._device:
        raise mixed_devices("masked_fill", x, mask)
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s).")
        value = value.item()
    try:
        V.expand(mask, x._shape)
    except RuntimeError:
        raise RuntimeError(f"masked_fill: the mask of shape {tuple(mask._shape)} can't be broadcast to the tensor's shape {tuple(x._shape)}") from None
    out = empty(x._shape, x._dtype, x._device)
    kernel(x._device, "where")(out._h, expand_to(mask, x._shape), scalar_for(value, x._dtype, strict=True), view_of(x))
    return out


@inplace(masked_fill, inputs=0)
def masked_fill_(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    return write_result(x, masked_fill(x, mask, value), "masked_fill")


@differentiable("masked_select")
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    if not isinstance(mask, Tensor) or mask._dtype is not D.bool_:
        raise RuntimeError("masked_select: expected a bool mask")
    if mask._device is not x._device:
        raise mixed_devices("masked_select", x, mask)
    shape = broadcast_many(x._shape, mask._shape)
    mview = V.expand(mask, shape)
    count = int(mview.sum().item())
    out = empty((count,), x._dtype, x._device)
    kernel(x._device, "masked_select")(out._h, expand_to(x, shape), view_of(mview))
    return out


def nonzero(x: Tensor, *, as_tuple: bool = False) -> Any:
    from .creation import arange

    mask = x if x._dtype is D.bool_ else E.ne(x, 0)
    shape = mask._shape
    n = prod(shape)
    flat = V.reshape(contiguous(mask), (n,))
    lin = masked_select(arange(n, device=x._device), flat)
    coords = []
    for size, stride in zip(shape, cstrides(shape)):
        c = E.floor_divide(lin, stride) if stride != 1 else lin
        coords.append(E.remainder(c, size) if size > 1 else E.mul(c, 0))
    if as_tuple:
        return tuple(coords) if shape else (E.mul(lin, 0),)
    if not coords:
        return empty((lin.numel(), 0), D.int64, x._device)
    return stack(coords, 1)


def argwhere(x: Tensor) -> Tensor:
    return nonzero(x)


METHODS = ["tril", "triu", "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_select",
           "masked_fill", "masked_fill_", "masked_select", "nonzero", "argwhere", "sort",
           "argsort", "topk", "take_along_dim"]
