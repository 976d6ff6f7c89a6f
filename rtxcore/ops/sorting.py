"""Sorting: ``sort`` (the backend's kernel, else a stable bitonic network on
primitives), ``argsort`` and ``topk``."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from .. import dtype as D
from ..autograd.tape import differentiable
from ..shape import normalize_dim, prod
from ..tensor import Tensor
from . import elementwise as E
from . import views as V
from .core import cast, contiguous, empty, own_kernel, view_of

sort_result = namedtuple("sort", ["values", "indices"])
topk_result = namedtuple("topk", ["values", "indices"])


@differentiable("sort", output=lambda r: r)
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
    if x.ndim == 0:
        return sort_result(x.clone(), E.zeros_scalar_like(cast(x, D.int64)))
    d = normalize_dim(dim, x.ndim)
    k = own_kernel(x._device, "sort", x._dtype)
    if k is not None:
        values = empty(x._shape, x._dtype, x._device)
        indices = empty(x._shape, D.int64, x._device)
        k(values._h, indices._h, view_of(x), d, bool(descending))
        return sort_result(values, indices)
    return sort_result(*_bitonic_sort(x, d, descending))


def _bitonic_sort(x: Tensor, d: int, descending: bool) -> tuple[Tensor, Tensor]:
    """Stable sort from primitives: a bitonic network over (value, index) keys,
    log2(n)^2 compare-exchange stages, each a few elementwise ops on views."""
    from .creation import arange, full

    xm = contiguous(V.movedim(x, d, -1))
    lead, n = xm._shape[:-1], xm._shape[-1]
    rows = prod(lead)
    p = 1
    while p < n:
        p *= 2
    # padding sorts after every element: -inf descending, NaN (the largest) ascending
    big = float("-inf") if descending else float("nan")
    if x._dtype.kind != "f":
        import numpy as np

        info = np.iinfo(x._dtype.numpy) if x._dtype.kind in "iu" else None
        big = (int(info.min) if descending else int(info.max)) if info else (not descending and 1)
    vals = full((rows, p), big, dtype=x._dtype, device=x._device)
    vals[:, :n] = V.reshape(xm, (rows, n))
    idx = V.reshape(arange(p, device=x._device), (1, p)).expand(rows, p).clone()
    k = 2
    while k <= p:
        j = k // 2
        while j >= 1:
            nb = p // (2 * j)
            blocks = arange(nb, device=x._device)
            asc = E.eq(E.remainder(E.floor_divide(E.mul(blocks, 2 * j), k), 2), 0)
            asc = V.reshape(asc, (1, nb, 1))
            v4, i4 = V.view(vals, (rows, nb, 2, j)), V.view(idx, (rows, nb, 2, j))
            lo, hi = v4[:, :, 0, :], v4[:, :, 1, :]
            lo_i, hi_i = i4[:, :, 0, :], i4[:, :, 1, :]
            # ascending blocks put the element that comes first in the sorted order
            # at ``lo``, descending blocks at ``hi``
            swap = E.where(asc, _before(hi, lo, hi_i, lo_i, descending),
                           _before(lo, hi, lo_i, hi_i, descending))
            new_lo, new_hi = E.where(swap, hi, lo), E.where(swap, lo, hi)
            new_lo_i, new_hi_i = E.where(swap, hi_i, lo_i), E.where(swap, lo_i, hi_i)
            E.copy_(lo, new_lo)
            E.copy_(hi, new_hi)
            E.copy_(lo_i, new_lo_i)
            E.copy_(hi_i, new_hi_i)
            j //= 2
        k *= 2
    values = V.reshape(vals[:, :n], lead + (n,))
    indices = V.reshape(idx[:, :n], lead + (n,))
    return V.movedim(values, -1, d), V.movedim(indices, -1, d)


def _before(a: Tensor, b: Tensor, ai: Tensor, bi: Tensor, descending: bool) -> Tensor:
    """Whether (a, ai) comes before (b, bi) in the sorted order: by value (NaN the
    largest, as in PyTorch), ties by original position (so the sort is stable)."""
    first = E.gt(a, b) if descending else E.lt(a, b)
    same = E.eq(a, b)
    if a._dtype.kind == "f":
        na, nb = E.isnan(a), E.isnan(b)
        nan_first = E.logical_and(na, E.logical_not(nb)) if descending else \
            E.logical_and(nb, E.logical_not(na))
        first = E.logical_or(first, nan_first)
        same = E.logical_or(same, E.logical_and(na, nb))
    return E.logical_or(first, E.logical_and(same, E.lt(ai, bi)))


def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return sort(x, dim, descending, stable).indices


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
    d = normalize_dim(dim, x.ndim) if x.ndim else 0
    size = x._shape[d] if x.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError(f"topk: k ({k}) is out of range for dimension {d} of size {size}")
    values, indices = sort(x, d, descending=largest)
    if x.ndim == 0:
        return topk_result(values, indices)
    return topk_result(V.narrow(values, d, 0, k), V.narrow(indices, d, 0, k))
