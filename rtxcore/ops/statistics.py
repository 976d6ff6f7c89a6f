"""Order statistics and nan-aware reductions: ``median``/``nanmedian``, ``kthvalue``,
``mode``, ``quantile``/``nanquantile``, ``nansum`` and ``nanmean``.

Each sorts (stably, nan last) and picks, so values come with the index they had;
gradients flow to the picked elements through ``gather``.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..shape import normalize_dim
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import reduction as R
from . import views as V
from .core import as_tensor_on, cast, tensor_arg
from .creation import arange, full
from .scans import _cumext

median_result = namedtuple("median", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])


def _sorted_along(x: Tensor, d: int) -> Any:
    with no_grad():
        return I.sort(x.detach(), d, stable=True)


def _pick(x: Tensor, d: int, order: Tensor, pos: Tensor, keepdim: bool) -> tuple[Tensor, Tensor]:
    """Values and original indices at sorted position ``pos`` (keepdim shape)."""
    idx = I.gather(order, d, pos)
    vals = I.gather(x, d, idx)
    if not keepdim:
        vals, idx = V.squeeze(vals, d), V.squeeze(idx, d)
    return vals, idx


def _nan_count(x: Tensor, d: int) -> Tensor:
    if x._dtype.kind != "f":
        return R.sum(cast(E._full_bool(x, False), D.int64), d, keepdim=True)
    return R.sum(cast(E.isnan(x.detach()), D.int64), d, keepdim=True)


def _median(name: str, x: Tensor, dim: Any, keepdim: bool, skip_nan: bool) -> Any:
    x = tensor_arg(name, x)
    if dim is None:
        flat = V.reshape(x, (-1,))
        if flat.numel() == 0:
            raise IndexError(f"{name}() input tensor cannot be empty")
        vals, _ = _median(name, flat, 0, False, skip_nan)
        return vals
    d = normalize_dim(dim, max(x.ndim, 1))
    if x.ndim == 0:
        return x.clone(), cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64)
    n = x._shape[d]
    if n == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    srt = _sorted_along(x, d)  # nan sorts last
    with no_grad():
        nans = _nan_count(x, d)
        good = E.sub(n, nans)
        if skip_nan:  # lower median of the non-nan values; all-nan rows give nan
            pos = E.floor_divide(E.maximum(E.sub(good, 1), 0), 2)
        else:  # a row with nan answers its first nan
            half = E._full_like_scalar(good, (n - 1) // 2)
            pos = E.where(E.gt(nans, 0), good, half)
    return _pick(x, d, srt.indices, cast(pos, D.int64), keepdim)


def median(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The lower median (of the flattened input, or along ``dim`` with its
    index); nan when the values hold nan, as in PyTorch."""
    r = _median("median", input, dim, keepdim, False)
    return r if dim is None else median_result(*r)


def nanmedian(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """``median`` ignoring nan."""
    r = _median("nanmedian", input, dim, keepdim, True)
    return r if dim is None else nanmedian_result(*r)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """The ``k``-th smallest value along ``dim`` (``k`` from 1) and its index."""
    x = tensor_arg("kthvalue", input)
    d = normalize_dim(dim, max(x.ndim, 1))
    n = x._shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if x.ndim == 0:
        return kthvalue_result(x.clone(), cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64))
    srt = _sorted_along(x, d)
    shape = list(x._shape)
    shape[d] = 1
    pos = full(tuple(shape), k - 1, dtype=D.int64, device=x._device)
    return kthvalue_result(*_pick(x, d, srt.indices, pos, keepdim))


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """The most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence."""
    x = tensor_arg("mode", input)
    if x.ndim == 0:
        return mode_result(x.clone(), cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64))
    d = normalize_dim(dim, x.ndim)
    n = x._shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    with no_grad():
        srt = _sorted_along(x, d)
        s = srt.values
        shape = [1] * x.ndim
        shape[d] = n
        pos = V.expand(V.reshape(arange(n, device=x._device), tuple(shape)), x._shape)
        if n > 1:
            change = E.ne(V.narrow(s, d, 1, n - 1), V.narrow(s, d, 0, n - 1))
            start = I.cat([E._full_bool(V.narrow(s, d, 0, 1), True), change], d)
        else:
            start = E._full_bool(s, True)
        run_start = _cumext("mode", E.where(start, pos, 0), d, True)[0]
        length = E.sub(pos, run_start)
        # the end of the longest run; argmax picks the first, so the smallest value
        ends = I.cat([V.narrow(start, d, 1, n - 1), E._full_bool(V.narrow(s, d, 0, 1), True)], d) \
            if n > 1 else E._full_bool(s, True)
        score = E.where(ends, length, -1)
        best = R.argmax(score, d, keepdim=True)
        # the last occurrence in the original order: the largest original index in that run
        value = I.gather(s, d, best)
        hit = E.eq(x.detach(), value)
        if x._dtype.kind == "f":
            hit = E.logical_or(hit, E.logical_and(E.isnan(x.detach()), E.isnan(value)))
        idx = R.amax(E.where(hit, pos, -1), d, keepdim=True)
    vals = I.gather(x, d, idx)
    if not keepdim:
        vals, idx = V.squeeze(vals, d), V.squeeze(idx, d)
    return mode_result(vals, idx)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name: str, x: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str,
              skip_nan: bool) -> Tensor:
    x = tensor_arg(name, x)
    if x._dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, midpoint "
                         f"or nearest. Got {interpolation}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not 0 <= float(q) <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
        qt = as_tensor_on([float(q)], x._device, x._dtype)
    else:
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q._dtype is not x._dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        qt = V.reshape(q.detach(), (-1,))
        if qt.numel() and (bool(R.any(E.lt(qt, 0.0)).item()) or bool(R.any(E.gt(qt, 1.0)).item())):
            raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    if dim is None:
        src, d = V.reshape(x, (-1,)), 0
    else:
        d = normalize_dim(dim, max(x.ndim, 1))
        src = x if x.ndim else V.reshape(x, (1,))
    n = src._shape[d]
    if n == 0:
        raise IndexError(f"{name}() input tensor must be non-empty")
    moved = V.movedim(src, d, -1)  # (..., n)
    srt = _sorted_along(moved, -1)
    nq = qt._shape[0]
    lead = moved._shape[:-1]
    with no_grad():
        nans = _nan_count(moved, -1)  # (..., 1)
        count = E.sub(n, nans) if skip_nan else E.add(E.mul(nans, 0), n)
        last = cast(E.sub(count, 1), x._dtype)  # (..., 1)
        pos = E.mul(V.reshape(qt, (1,) * len(lead) + (nq,)), last)  # (..., nq)
        if interpolation == "nearest":
            pos = E.round(pos)
        lo = E.floor(pos)
        hi = E.ceil(pos)
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        frac_ = E.sub(pos, lo) if interpolation == "linear" else \
            E._full_like_scalar(pos, 0.5 if interpolation == "midpoint" else 0.0)
        lo_i = cast(E.clamp(lo, 0.0, max(n - 1, 0)), D.int64)
        hi_i = cast(E.clamp(hi, 0.0, max(n - 1, 0)), D.int64)
        if interpolation in ("lower", "higher", "nearest"):
            frac_ = E.mul(frac_, 0.0)
    vlo = I.gather(moved, -1, I.gather(srt.indices, -1, lo_i))
    vhi = I.gather(moved, -1, I.gather(srt.indices, -1, hi_i))
    out = E.add(vlo, E.mul(E.sub(vhi, vlo), frac_))
    with no_grad():
        bad = E.gt(nans, 0) if not skip_nan else E.eq(count, 0)
        bad = V.expand(bad, out._shape)
    out = E.where(bad, math.nan, out)
    out = V.movedim(out, -1, 0)  # (nq, ...)
    if keepdim:
        if dim is None:
            out = V.reshape(out, (nq,) + (1,) * x.ndim)
        else:
            out = V.unsqueeze(out, d + 1) if x.ndim else out
    if scalar_q:
        out = V.squeeze(out, 0)
    return out


def quantile(input: Tensor, q: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles (``q`` a float or 1-D tensor in [0, 1]) of the
    flattened input or along ``dim``; nan where the values hold nan."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q: Any, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear") -> Tensor:
    """``quantile`` ignoring nan (nan only where every value is nan)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``sum`` with nan counted as zero."""
    x = tensor_arg("nansum", input)
    if x._dtype.kind == "f":
        x = E.where(E.isnan(x), 0.0, x)
    return R.sum(x, dim, keepdim, dtype=dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``mean`` of the non-nan values."""
    x = tensor_arg("nanmean", input)
    if x._dtype.kind != "f" and dtype is None:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {x._dtype.name}")
    if dtype is not None:
        x = cast(x, D.as_dtype(dtype))
    keep = E.logical_not(E.isnan(x))
    return E.div(nansum(x, dim, keepdim), R.sum(cast(keep, x._dtype), dim, keepdim))


METHODS = ["median", "nanmedian", "kthvalue", "mode", "quantile", "nanquantile", "nansum", "nanmean"]
