"""Assorted PyTorch functions built from existing ops: sampling (``multinomial``),
comparisons (``isclose``, ``allclose``, ``equal``), ``repeat_interleave``,
``unique``, ``diag``/``diag_embed``, ``meshgrid``/``cartesian_prod``, ``cdist``,
``index_add``/``index_put`` and ``addcmul``/``addcdiv``.

Every function here is a composite of recorded ops (``getitem``, ``index_put``,
``scatter_add``, elementwise and reduction ops), so it runs on every backend and
differentiates through its decomposition: no backward rule of its own.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..random import Generator
from ..shape import broadcast_many, normalize_dim, prod
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import reduction as R
from . import views as V
from .core import bad_operand, cast, mixed_devices

# -- sampling ---------------------------------------------------------------------------


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Generator | None = None) -> Tensor:
    """Indices drawn from the categories of each row of ``input`` (1-D or 2-D
    non-negative weights), with probabilities proportional to the weights.

    With replacement: inverse-CDF sampling of uniforms. Without: the
    exponential-race trick (the ``num_samples`` largest ``log(u) / w``), which
    draws an ordered sample without replacement with the same law as
    sequential draws; zero weights come last."""
    from .creation import _empty, _wide_float, arange, uniform_
    from .core import ready_device

    if not isinstance(input, Tensor):
        raise bad_operand("multinomial", input)
    if input._dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input._dtype.name}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim}-D input")
    n = input._shape[-1]
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (num_samples={num_samples})")
    if not replacement and num_samples > n:
        raise RuntimeError(
            f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            f"(num_samples={num_samples}, categories={n})"
        )
    if n == 0:
        raise RuntimeError("multinomial: invalid multinomial distribution (no categories)")
    dev = ready_device(input._device)
    wide = _wide_float(dev)
    with no_grad():
        w = cast(input.detach(), wide)
        w2 = V.reshape(w, (-1, n))
        rows = w2._shape[0]
        bad = E.logical_or(E.logical_not(E.isfinite(w2)), E.lt(w2, 0.0))
        if bool(R.any(bad).item()):
            raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
        total = R.sum(w2, -1, True)
        if rows and bool(R.any(E.le(total, 0.0)).item()):
            raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
        if replacement:
            u = uniform_(_empty((rows, num_samples), wide, dev), generator=generator)
            cdf = R.cumsum(w2, -1)
            thresh = E.mul(u, total)
            # the first category whose cumulative weight exceeds u * total
            below = E.le(V.unsqueeze(cdf, 1), V.unsqueeze(thresh, 2))
            idx = R.sum(below, -1)
            # rounding can push u * total past the last cumulative weight: take
            # the last category that has weight then
            pos = cast(E.gt(w2, 0.0), D.int64)
            last = E.sub(n - 1, R.argmax(I.flip(pos, -1), -1, True))
            idx = E.minimum(idx, last)
        else:
            u = uniform_(_empty((rows, n), wide, dev), generator=generator)
            positive = E.gt(w2, 0.0)
            keys = E.div(E.log1p(E.neg(u)), E.where(positive, w2, 1.0))  # u in [0, 1): finite
            keys = E.where(positive, keys, -math.inf)
            # ties (zero weights) resolve by position: a stable sort
            order = I.sort(keys, -1, descending=True, stable=True).indices
            idx = V.narrow(order, -1, 0, num_samples)
        idx = cast(idx, D.int64)
        if rows == 0:
            idx = cast(arange(0, device=dev), D.int64).reshape(0, num_samples)
    return V.reshape(idx, (num_samples,)) if input.ndim == 1 else idx.contiguous()


# -- comparisons ---------------------------------------------------------------------------


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (bool), with equal
    infinities close and NaNs close to each other only when ``equal_nan``."""
    for v in (input, other):
        if not isinstance(v, Tensor):
            raise bad_operand("isclose", v)
    if input._dtype is not other._dtype:
        raise RuntimeError(f"isclose: {input._dtype.name} did not match {other._dtype.name}")
    if input._device is not other._device:
        raise mixed_devices("isclose", input, other)
    if rtol < 0:
        raise RuntimeError(f"isclose: rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"isclose: atol must be greater than or equal to zero, but got {atol}")
    with no_grad():
        a, b = input.detach(), other.detach()
        same = E.eq(a, b)
        if a._dtype is D.bool_:
            return same
        if a._dtype.kind != "f":
            a, b = E._float(a), E._float(b)
        diff = E.abs(E.sub(a, b))
        close = E.le(diff, E.add(E.mul(E.abs(b), float(rtol)), float(atol)))
        finite = E.logical_and(E.isfinite(a), E.isfinite(b))
        out = E.logical_or(same, E.logical_and(close, finite))
        if equal_nan:
            out = E.logical_or(out, E.logical_and(E.isnan(a), E.isnan(b)))
    return out


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element of ``input`` is close to ``other`` (``isclose``)."""
    return bool(R.all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """True when both tensors have the same shape and the same values."""
    for v in (input, other):
        if not isinstance(v, Tensor):
            raise bad_operand("equal", v)
    if input._device is not other._device:
        raise mixed_devices("equal", input, other)
    if input._shape != other._shape:
        return False
    with no_grad():
        return bool(R.all(E.eq(input.detach(), other.detach())).item())


# -- repeat_interleave ---------------------------------------------------------------------


def repeat_interleave(input: Tensor, repeats: Any = None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Tensor:
    """Each element (or slice along ``dim``) repeated ``repeats`` times in a row;
    ``repeat_interleave(r)`` alone gives ``0`` r[0] times, ``1`` r[1] times, ...

    Done as ``index_select`` with a computed index, so it differentiates."""
    from .creation import arange

    if repeats is None:  # repeat_interleave(repeats_tensor)
        r = input
        if not isinstance(r, Tensor) or r.ndim > 1 or r._dtype.kind not in "iu":
            raise RuntimeError("repeat_interleave: repeats must be a 0-d or 1-d integer tensor")
        r = V.reshape(r, (-1,))
        return _repeat_index(r, output_size)
    if not isinstance(input, Tensor):
        raise bad_operand("repeat_interleave", input)
    if dim is None:
        x, d = V.reshape(input, (-1,)), 0
    else:
        x, d = input, normalize_dim(dim, input.ndim)
    n = x._shape[d] if x.ndim else 1
    if x.ndim == 0:
        x = V.reshape(x, (1,))
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim <= 1 and n != 1:
        repeats = int(repeats.item())
    if isinstance(repeats, Tensor):
        if repeats._dtype.kind not in "iu":
            raise RuntimeError(f"repeat_interleave: repeats must be an integer tensor, got {repeats._dtype.name}")
        if repeats.ndim > 1:
            raise RuntimeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor")
        r = V.reshape(repeats, (-1,))
        if r._shape[0] != n:
            raise RuntimeError(
                f"repeat_interleave: repeats must have the same size as input along dim, but got "
                f"repeats.size(0) = {r._shape[0]} and input.size({d}) = {n}"
            )
        if r._device is not x._device:
            r = r.to(x._device)
        idx = _repeat_index(r, output_size)
    else:
        reps = int(repeats)
        if reps < 0:
            raise RuntimeError(f"repeat_interleave: Repeats must be non-negative, got {reps}")
        idx = E.floor_divide(arange(n * reps, device=x._device), reps) if reps else \
            arange(0, device=x._device)
        if output_size is not None and output_size != n * reps:
            raise RuntimeError(f"repeat_interleave: output_size {output_size} does not match the "
                               f"total number of repeats {n * reps}")
    return I.index_select(x, d, idx)


def _repeat_index(r: Tensor, output_size: int | None) -> Tensor:
    """``[0]*r[0] + [1]*r[1] + ...``: ones scattered at the group starts, summed up."""
    from .creation import ones, zeros

    r = cast(r, D.int64)
    with no_grad():
        if r.numel() and int(R.amin(r).item()) < 0:
            raise RuntimeError("repeat_interleave: repeats can not be negative")
        cum = R.cumsum(r, 0)
        total = int(cum[-1].item()) if r.numel() else 0
        if output_size is not None and output_size != total:
            raise RuntimeError(f"repeat_interleave: output_size {output_size} does not match the "
                               f"sum of repeats {total}")
        marks = zeros(total + 1, dtype=D.int64, device=r._device)
        if r.numel() > 1:
            starts = cum[:-1]
            marks = I.scatter_add(marks, 0, starts, ones(starts._shape, dtype=D.int64, device=r._device))
        return R.cumsum(marks[:total], 0)


# -- unique -------------------------------------------------------------------------------


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct elements (or slices along ``dim``) of ``input``, in ascending
    order (also when ``sorted=False``, which PyTorch allows), optionally with the
    inverse indices and the counts."""
    return _unique("unique", input, True, return_inverse, return_counts, dim)


def unique_consecutive(input: Tensor, return_inverse: bool = False,  # noqa: A002
                       return_counts: bool = False, dim: int | None = None) -> Any:
    """Like ``unique`` but only collapses runs of equal neighbours (no sorting)."""
    return _unique("unique_consecutive", input, False, return_inverse, return_counts, dim)


def _unique(name: str, input: Tensor, sort: bool, return_inverse: bool,  # noqa: A002
            return_counts: bool, dim: int | None) -> Any:
    from .creation import arange, ones, zeros

    if not isinstance(input, Tensor):
        raise bad_operand(name, input)
    dev = input._device
    with no_grad():
        x = input.detach()
        if dim is None:
            rows = V.reshape(x, (-1, 1))
            d = None
        else:
            d = normalize_dim(dim, x.ndim)
            moved = V.movedim(x, d, 0)
            rows = V.reshape(moved, (moved._shape[0], -1)) if moved.ndim else V.reshape(moved, (1, 1))
        n, m = rows._shape
        if sort and n:
            # lexicographic order of the rows: stable sorts from the last column on
            perm = arange(n, device=dev)
            for c in range(m - 1, -1, -1):
                col = I.index_select(rows[:, c], 0, perm)
                perm = I.index_select(perm, 0, I.sort(col, 0, stable=True).indices)
            srows = I.index_select(rows, 0, perm)
        else:
            perm = arange(n, device=dev)
            srows = rows
        if n:
            first = E._full_bool(srows[:1, 0], True)
            if n > 1:
                diff = R.any(E.ne(srows[1:], srows[:-1]), 1) if m else E._full_bool(srows[1:, 0], False)
                change = I.cat([first, diff], 0)
            else:
                change = first
        else:
            change = zeros(0, dtype=D.bool_, device=dev)
        starts = I.masked_select(arange(n, device=dev), change)
        group = E.sub(R.cumsum(cast(change, D.int64), 0), 1)
        values = I.index_select(srows, 0, starts)
        if d is None:
            values = V.reshape(values, (-1,))
        else:
            rest = V.movedim(x, d, 0)._shape[1:]
            values = V.movedim(V.reshape(values, (values._shape[0],) + rest), 0, d)
        out: list[Tensor] = [values]
        if return_inverse:
            inv = I.scatter(zeros(n, dtype=D.int64, device=dev), 0, perm, group)
            out.append(V.reshape(inv, input._shape) if d is None else inv)
        if return_counts:
            k = starts._shape[0]
            counts = I.scatter_add(zeros(k, dtype=D.int64, device=dev), 0, group,
                                   ones(n, dtype=D.int64, device=dev))
            out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


# -- diagonals, grids, distances -------------------------------------------------------------


def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """1-D ``input``: a square matrix with it on diagonal ``diagonal``; 2-D: that
    diagonal as a new 1-D tensor."""
    if not isinstance(input, Tensor):
        raise bad_operand("diag", input)
    if input.ndim == 1:
        return _embed(input, diagonal, -2, -1)
    if input.ndim == 2:
        return V.diagonal(input, diagonal, 0, 1).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: A002
    """Matrices (over dims ``dim1``, ``dim2`` of the result) with the last dim of
    ``input`` on their diagonal ``offset``."""
    if not isinstance(input, Tensor):
        raise bad_operand("diag_embed", input)
    return _embed(input, offset, dim1, dim2)


def _embed(x: Tensor, offset: int, dim1: int, dim2: int) -> Tensor:
    from .creation import arange, zeros

    if x.ndim == 0:
        x = V.reshape(x, (1,))
    nd = x.ndim + 1
    d1, d2 = normalize_dim(dim1, nd), normalize_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    k = x._shape[-1]
    size = k + abs(offset)
    z = zeros(x._shape[:-1] + (size, size), dtype=x._dtype, device=x._device)
    rows = arange(k, device=x._device)
    cols = rows
    if offset > 0:
        cols = E.add(rows, offset)
    elif offset < 0:
        rows = E.add(rows, -offset)
    out = I.index_put_op(z, x, (Ellipsis, rows, cols))
    return V.movedim(out, (nd - 2, nd - 1), (d1, d2))


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids (broadcast views) from 1-D tensors; ``indexing='ij'`` is
    matrix order, ``'xy'`` Cartesian (the first two dims swapped)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("meshgrid: in an upcoming release, it will be required to pass the indexing "
                      "argument; using indexing='ij'.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be one of 'xy' or 'ij', but received: {indexing}")
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise bad_operand("meshgrid", t)
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
        if t._device is not tensors[0]._device:
            raise mixed_devices("meshgrid", tensors[0], t)
    flat = [V.reshape(t, (-1,)) for t in tensors]
    order = list(range(len(flat)))
    if indexing == "xy" and len(flat) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(flat[i]._shape[0] for i in order)
    out = []
    for i, t in enumerate(flat):
        pos = order.index(i)
        view = [1] * len(flat)
        view[pos] = t._shape[0]
        out.append(V.expand(V.reshape(t, tuple(view)), shape))
    return tuple(out)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of the elements of 1-D tensors, one per row."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return I.stack([V.reshape(g, (-1,)) for g in grids], 1)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between each row of ``x1`` (..., P, M) and each row of
    ``x2`` (..., R, M): a (..., P, R) tensor. Computed on the differences (exact
    at zero distance, with a zero gradient there as in PyTorch)."""
    from ..linalg import vector_norm

    for v in (x1, x2):
        if not isinstance(v, Tensor):
            raise bad_operand("cdist", v)
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1._shape[-1] != x2._shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. "
                           f"X1: {x1._shape[-1]} X2: {x2._shape[-1]}")
    if x1._dtype.kind != "f" or x2._dtype.kind != "f":
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1._dtype.name}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1._device is not x2._device:
        raise mixed_devices("cdist", x1, x2)
    broadcast_many(x1._shape[:-2], x2._shape[:-2])
    diff = E.sub(V.unsqueeze(x1, -2), V.unsqueeze(x2, -3))
    return vector_norm(diff, p, -1)


# -- index_add / index_put ------------------------------------------------------------------


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
    from .creation import as_tensor_on

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


# -- addcmul / addcdiv ----------------------------------------------------------------------


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    return E.add(input, E.mul(tensor1, tensor2), alpha=value)


def addcmul_(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    _check_inplace_shape("addcmul_", input, tensor1, tensor2)
    return E.add_(input, E.mul(tensor1, tensor2), alpha=value)


def _check_inplace_shape(op: str, x: Tensor, *others: Any) -> None:
    try:
        shape = broadcast_many(x._shape, *(t._shape for t in others if isinstance(t, Tensor)))
    except RuntimeError as exc:
        raise RuntimeError(f"{op}: {exc}") from None
    if shape != x._shape:
        raise RuntimeError(f"{op}: output with shape {list(x._shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")


def _check_addcdiv(t1: Any, t2: Any) -> None:
    if all(isinstance(t, Tensor) and t._dtype.kind in "iub" for t in (t1, t2)):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
            "will perform a true division of tensor1 and tensor2. Use (input + value * tensor1 / "
            "tensor2) for float inputs."
        )


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    """``input + value * tensor1 / tensor2``."""
    _check_addcdiv(tensor1, tensor2)
    return E.add(input, E.div(tensor1, tensor2), alpha=value)


def addcdiv_(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Any = 1) -> Tensor:  # noqa: A002
    _check_addcdiv(tensor1, tensor2)
    _check_inplace_shape("addcdiv_", input, tensor1, tensor2)
    return E.add_(input, E.div(tensor1, tensor2), alpha=value)


METHODS = ["multinomial", "isclose", "allclose", "equal", "repeat_interleave", "unique",
           "unique_consecutive", "diag", "diag_embed", "index_add", "index_add_", "index_put",
           "index_put_", "addcmul", "addcmul_", "addcdiv", "addcdiv_"]
