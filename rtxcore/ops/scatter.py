"""Writes at indices: ``index_add``, ``index_copy``, ``index_fill``, ``index_put`` (each
also in place), ``masked_scatter``, ``put``/``put_`` and ``take``, put's reading
twin (the input read as 1-D).

Every function here is a composite of recorded ops (``getitem``/``setitem``,
``index_put``, ``scatter_add``), so it runs on every backend and differentiates
through its decomposition.
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..shape import broadcast_many, normalize_dim, prod
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import reduction as R
from . import views as V
from .core import as_tensor_on, bad_operand, cast, mixed_devices, tensor_arg


def _index_add_args(op: str, x: Tensor, dim: int, index: Tensor, source: Tensor) -> tuple[int, Tensor]:
    """Check ``index_add``'s arguments; return the dim and the index expanded to
    ``source``'s shape (what ``scatter_add`` takes)."""
    if not isinstance(index, Tensor):
        raise bad_operand(op, index)
    if not isinstance(source, Tensor):
        raise bad_operand(op, source)
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index but got: {index._dtype.name}")
    if index.ndim > 1:
        raise IndexError(f"{op}(): Index is supposed to be a vector, got a {index.ndim}-D tensor")
    if source._device is not x._device:
        raise mixed_devices(op, x, source)
    d = normalize_dim(dim, x.ndim) if x.ndim else 0
    xs = x._shape if x.ndim else (1,)
    ss = source._shape if source.ndim else (1,)
    ni = index.numel()
    if len(ss) != len(xs):
        raise IndexError(f"{op}(): source ({len(ss)}-D) and self ({len(xs)}-D) must have the same number of dimensions")
    if ss[d] != ni:
        raise RuntimeError(f"{op}(): Number of indices ({ni}) should be equal to source.size(dim): "
                           f"({ss[d]}), for dim: {d}")
    for i, (a, b) in enumerate(zip(ss, xs)):
        if i != d and a != b:
            raise RuntimeError(f"{op}(): source size {tuple(ss)} and self size {tuple(xs)} must match "
                               f"except at dim {d}")
    idx = cast(index, D.int64)
    if idx._device is not x._device:
        idx = idx.to(x._device)
    if ni:
        lo, hi = int(R.amin(idx).item()), int(R.amax(idx).item())
        if lo < 0 or hi >= xs[d]:
            raise IndexError(f"{op}(): index {lo if lo < 0 else hi} is out of range for dimension "
                             f"{d} with size {xs[d]}")
    view = [1] * len(xs)
    view[d] = ni
    return d, V.expand(V.reshape(idx, tuple(view)), ss)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``alpha * source`` slices added at ``index`` along
    ``dim`` (repeated indices accumulate)."""
    d, idx = _index_add_args("index_add", input, dim, index, source)
    src = source if alpha == 1 else E.mul(source, alpha)
    if input.ndim == 0:
        return V.reshape(I.scatter_add(V.reshape(input, (1,)), 0, idx, V.reshape(src, (1,))), ())
    return I.scatter_add(input, d, idx, src)


def index_add_(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    """In-place ``index_add`` (through ``scatter_add_``, which records)."""
    d, idx = _index_add_args("index_add_", input, dim, index, source)
    src = source if alpha == 1 else E.mul(source, alpha)
    if input.ndim == 0:
        I.scatter_add_(V.reshape(input, (1,)), 0, idx, V.reshape(src, (1,)))
        return input
    return I.scatter_add_(input, d, idx, src)


def _put_indices(op: str, x: Tensor, indices: Sequence[Any]) -> tuple[Any, ...]:
    if not isinstance(indices, (list, tuple)):
        raise TypeError(f"{op}(): argument 'indices' must be a tuple of Tensors, not {type(indices).__name__}")
    return tuple(indices)


def index_put(input: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``[indices] = values`` (``+= values`` with
    ``accumulate=True``, where repeated indices all add up)."""
    key = _put_indices("index_put", input, indices)
    if not accumulate:
        return I.index_put_op(input, values, key)
    return _accumulated(input, key, values)


def index_put_(input: Tensor, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Tensor:  # noqa: A002
    """In place: ``input[indices] = values`` (``+=`` with ``accumulate=True``)."""
    key = _put_indices("index_put_", input, indices)
    if not accumulate:
        I.setitem(input, key, values)
        return input
    return E.copy_(input, _accumulated(input, key, values))


def _accumulated(x: Tensor, key: tuple[Any, ...], values: Any) -> Tensor:
    """``x`` with ``values`` added at ``key`` (index tensors for the leading dims):
    the indexed dims are linearised and the rest kept, then ``index_add``."""
    idx: list[Tensor] = []
    for k in key:
        t = I._as_index_tensor(k, x._device)
        if t._dtype is D.bool_:
            idx.extend(I.nonzero(t, as_tuple=True))
        else:
            idx.append(cast(t, D.int64))
    nlead = len(idx)
    if nlead > x.ndim:
        raise IndexError(f"index_put_: too many indices for tensor of dimension {x.ndim}")
    try:
        ishape = broadcast_many(*(t._shape for t in idx))
    except RuntimeError:
        raise IndexError("index_put_: shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(tuple(t._shape)) for t in idx)) from None
    lead, rest = x._shape[:nlead], x._shape[nlead:]
    lin = None
    for j, t in enumerate(idx):
        size = lead[j]
        if t.numel():
            lo, hi = int(R.amin(t).item()), int(R.amax(t).item())
            if hi >= size or lo < -size:
                bad = hi if hi >= size else lo
                raise IndexError(f"index {bad} is out of bounds for dimension {j} with size {size}")
            if lo < 0:
                t = E.where(E.lt(t, 0), E.add(t, size), t)
        term = E.mul(V.expand(t, ishape), prod(lead[j + 1:]))
        lin = term if lin is None else E.add(lin, term)
    m = prod(ishape)
    v = values if isinstance(values, Tensor) else as_tensor_on(values, x._device, x._dtype)
    if v._device is not x._device:
        raise mixed_devices("index_put_", x, v)
    if v._dtype is not x._dtype:
        v = v.to(x._dtype)
    try:
        v = V.expand(v, ishape + rest)
    except RuntimeError:
        raise RuntimeError(f"index_put_: shape mismatch: value tensor of shape {tuple(v._shape)} cannot be "
                           f"broadcast to indexing result of shape {tuple(ishape + rest)}") from None
    flat = V.reshape(x, (prod(lead),) + rest)
    added = index_add(flat, 0, V.reshape(lin, (m,)), V.reshape(v, (m,) + rest))
    return V.reshape(added, x._shape)


def _dim_key(x: Tensor, d: int, index: Tensor) -> tuple[Any, ...]:
    return (slice(None),) * d + (index,)


def _check_index_args(name: str, x: Tensor, dim: int, index: Tensor) -> int:
    if not isinstance(index, Tensor) or index._dtype.kind not in "iu":
        raise IndexError(f"{name}(): Expected a long tensor for index, but got "
                         f"{getattr(getattr(index, 'dtype', None), 'name', type(index).__name__)}")
    if index.ndim > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector")
    return normalize_dim(dim, max(x.ndim, 1))


def index_copy_(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """In place: the slices of ``input`` along ``dim`` at ``index`` become
    ``source``'s slices."""
    x = tensor_arg("index_copy_", input)
    d = _check_index_args("index_copy_", x, dim, index)
    if x.ndim == 0:
        return E.copy_(x, V.reshape(source, ()))
    idx = V.reshape(cast(index, D.int64), (-1,))
    if source.ndim != x.ndim or source._shape[d] != idx._shape[0]:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes and "
                           f"the index must have as many entries as source has along dim {d}")
    I.setitem(x, _dim_key(x, d, idx), source)
    return x


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    return index_copy_(tensor_arg("index_copy", input).clone(), dim, index, source)


def index_fill_(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:  # noqa: A002
    """In place: the slices of ``input`` along ``dim`` at ``index`` are set to
    ``value`` (a number or a 0-d tensor)."""
    x = tensor_arg("index_fill_", input)
    d = _check_index_args("index_fill_", x, dim, index)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor "
                           f"with {value.ndim} dimension(s).")
    if x.ndim == 0:
        return E.fill_(x, value) if not isinstance(value, Tensor) else E.copy_(x, value)
    idx = V.reshape(cast(index, D.int64), (-1,))
    I.setitem(x, _dim_key(x, d, idx), value)
    return x


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:  # noqa: A002
    return index_fill_(tensor_arg("index_fill", input).clone(), dim, index, value)


def masked_scatter_(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """In place: where ``mask`` (broadcast to input) is True, the next elements
    of ``source`` in row-major order."""
    x = tensor_arg("masked_scatter_", input)
    if not isinstance(mask, Tensor) or mask._dtype is not D.bool_:
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{getattr(getattr(mask, 'dtype', None), 'name', type(mask).__name__)}")
    if source._dtype is not x._dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got "
                           f"{x._dtype.name} and {source._dtype.name}")
    m = V.expand(mask, x._shape)
    with no_grad():
        n = int(R.sum(cast(m, D.int64)).item())
    if source.numel() < n:
        raise RuntimeError("masked_scatter: Number of elements of source < number of ones in mask")
    I.setitem(x, m, V.narrow(V.reshape(source, (-1,)), 0, 0, n))
    return x


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    x = tensor_arg("masked_scatter", input)
    shape = broadcast_many(x._shape, mask._shape)
    return masked_scatter_(V.expand(x, shape).clone(), mask, source)


def take(input: Tensor, index: Tensor) -> Tensor:  # noqa: A002
    """``input`` read as 1-D at ``index`` (negative indices count from the end);
    the result has ``index``'s shape."""
    x = tensor_arg("take", input)
    idx = _flat_index("take", x, index)
    return V.reshape(I.index_select(V.reshape(x, (-1,)), 0, V.reshape(idx, (-1,))), index._shape)


def _flat_index(name: str, x: Tensor, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index._dtype not in (D.int64, D.int32, D.int16, D.int8, D.uint8):
        raise RuntimeError(f"{name}(): Expected a long tensor for index")
    n = x.numel()
    with no_grad():
        idx = cast(index, D.int64)
        if idx.numel():
            lo, hi = int(R.amin(idx).item()), int(R.amax(idx).item())
            bad = hi if hi >= n else lo if lo < -n else None
            if bad is not None:
                raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
        return E.where(E.lt(idx, 0), E.add(idx, n), idx)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """A copy of ``input`` with ``source`` written (or added) at the flat
    ``index`` positions."""
    x = tensor_arg("put", input)
    idx = V.reshape(_flat_index("put", x, index), (-1,))
    src = V.reshape(source, (-1,))
    if src._shape[0] != idx._shape[0]:
        raise RuntimeError(f"put(): Expected source and index to have the same number of elements, "
                           f"but got source.numel() = {src._shape[0]}, index.numel() = {idx._shape[0]}")
    flat = V.reshape(x, (-1,))
    return V.reshape(index_put(flat, (idx,), cast(src, x._dtype), accumulate), x._shape)


def put_(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:  # noqa: A002
    """In place: ``input`` read as 1-D gets ``source`` at ``index``."""
    return E.copy_(input, put(input, index, source, accumulate))


METHODS = ["index_add", "index_add_", "index_put", "index_put_", "index_copy_", "index_copy", "index_fill_",
           "index_fill", "masked_scatter_", "masked_scatter", "take", "put", "put_"]
