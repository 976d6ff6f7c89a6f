"""Counting and searching: ``unique``/``unique_consecutive`` (with inverse indices and
counts), ``bincount``, ``histc``, ``searchsorted``/``bucketize``, and
``repeat_interleave`` (repeating by counts).

All are composites of recorded ops (sorts, scatter-adds, comparisons), so they
run on every backend; ``repeat_interleave`` differentiates (an ``index_select``).
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..shape import normalize_dim
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import reduction as R
from . import views as V
from .core import as_tensor_on, bad_operand, cast, tensor_arg
from .creation import arange, ones, zeros


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


def repeat_interleave(input: Tensor, repeats: Any = None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Tensor:
    """Each element (or slice along ``dim``) repeated ``repeats`` times in a row;
    ``repeat_interleave(r)`` alone gives ``0`` r[0] times, ``1`` r[1] times, ...

    Done as ``index_select`` with a computed index, so it differentiates."""
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


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value 0..max occurs in a 1-D non-negative integer tensor
    (the sum of ``weights`` at those places when given)."""
    x = tensor_arg("bincount", input)
    if x.ndim != 1 or x._dtype.kind not in "iu":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("bincount: minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights._shape[0] != x._shape[0]):
        raise RuntimeError("bincount: weights should be 1-d and have the same length as input")
    with no_grad():
        if x.numel() and int(R.amin(x).item()) < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        size = max(int(R.amax(x).item()) + 1 if x.numel() else 0, int(minlength))
        idx = cast(x, D.int64)
    if weights is None:
        return I.scatter_add(zeros(size, dtype=D.int64, device=x._device), 0, idx,
                             ones(x._shape, dtype=D.int64, device=x._device))
    wdt = weights._dtype if weights._dtype.kind == "f" else D.float64
    if not x._device.supports(wdt):
        wdt = D.float32
    w = cast(weights, wdt)
    return I.scatter_add(zeros(size, dtype=wdt, device=x._device), 0, idx, w)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """Where each value of ``input`` would go in the sorted last dim of
    ``sorted_sequence`` to keep it sorted (the first such place, or the last
    with ``right=True`` / ``side='right'``): a count of the smaller entries,
    by comparing every value with every entry (memory values x entries)."""
    seq = tensor_arg("searchsorted", sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side "
                               "of left while right was True")
        right = side == "right"
    if sorter is not None:
        seq = I.gather(seq, -1, sorter)
    scalar = not isinstance(input, Tensor)
    vals = as_tensor_on(input, seq._device, D.result_type(seq, input)) if scalar else input
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension")
    if seq.ndim > 1 and (vals.ndim != seq.ndim or vals._shape[:-1] != seq._shape[:-1]):
        raise RuntimeError(
            f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
            f"of boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(seq._shape)} and input value tensor {list(vals._shape)}")
    with no_grad():
        s, v = seq.detach(), vals.detach()
        cmp = E.le if right else E.lt
        below = cmp(V.unsqueeze(s, -2), V.unsqueeze(v, -1))  # (..., m, n)
        out = R.sum(cast(below, D.int64), -1)
    return cast(out, D.int32) if out_int32 else out


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Tensor:
    """The bucket of each value given 1-D ascending ``boundaries``."""
    b = tensor_arg("bucketize", boundaries)
    if b.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({b.ndim})")
    return searchsorted(b, input, out_int32=out_int32, right=right)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``bins`` equal bins over [min, max] (the data's range when
    min == max); values outside are ignored, max lands in the last bin."""
    x = tensor_arg("histc", input)
    if x._dtype.kind != "f":
        raise RuntimeError(f"histc: not implemented for '{x._dtype.name}' (floating point input only)")
    if bins <= 0:
        raise RuntimeError("torch.histc(): bins must be > 0")
    with no_grad():
        v = V.reshape(x.detach(), (-1,))
        lo, hi = float(min), float(max)
        if lo == hi and v.numel():
            lo, hi = float(R.amin(v).item()), float(R.amax(v).item())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if lo > hi:
            raise RuntimeError("torch.histc(): max must be larger than min")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
        inside = E.logical_and(E.ge(v, lo), E.le(v, hi))
        b = cast(E.floor(E.mul(E.sub(v, lo), bins / (hi - lo))), D.int64)
        b = E.clamp(b, 0, bins - 1)
        ones_ = cast(inside, x._dtype)
        return I.scatter_add(zeros(bins, dtype=x._dtype, device=x._device), 0, b, ones_)


METHODS = ["unique", "unique_consecutive", "repeat_interleave", "bincount", "histc"]
