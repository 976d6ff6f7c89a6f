"""Reductions: sum/prod/max/min/argmax/argmin are primitives; the rest
(mean, var, std, norm, logsumexp, softmax, all, any, cumsum) are composites."""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

from .. import dtype as D
from ..shape import normalize_dim, normalize_dims, prod
from ..tensor import Tensor
from . import elementwise as E
from .core import as_view, cast, contiguous, drop_axes, empty, kernel, own_kernel, reduce, view_of
from ..autograd.tape import differentiable, quiet
from .._autocast import autocast_inputs, regions as _autocast_regions

max_result = namedtuple("max", ["values", "indices"])
min_result = namedtuple("min", ["values", "indices"])


def _axes(x: Tensor, dim: Any) -> tuple[int, ...]:
    return normalize_dims(dim, len(x._shape))


_ALL = [tuple(range(n)) for n in range(9)]  # dim=None's axes, by ndim


def _sum_dtype(x: Tensor, dtype: Any) -> D.DType:
    if dtype is not None:
        return D.as_dtype(dtype)
    return D.int64 if x._dtype.kind in "biu" else x._dtype


@differentiable("sum", composite=False)
def sum(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A001
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = quiet(autocast_inputs, "sum", x)
    if dtype is None and x._dtype.kind == "f":  # x.sum(), x.sum(0): the common cases
        n = len(x._shape)
        return reduce("sum", x, _ALL[n] if dim is None and n < 9 else normalize_dims(dim, n), keepdim)
    return reduce("sum", x, _axes(x, dim), keepdim, _sum_dtype(x, dtype))


@differentiable("prod", composite=False)
def prod_(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = quiet(autocast_inputs, "prod", x)
    if dim is not None and not isinstance(dim, int):
        raise TypeError("prod(): dim must be an int (or None)")
    return reduce("prod", x, _axes(x, dim), keepdim, _sum_dtype(x, dtype))


@differentiable("mean")
def mean(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = autocast_inputs("mean", x)
    dt = D.as_dtype(dtype) if dtype is not None else x._dtype
    if dt.kind != "f":
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {x._dtype.name}"
        )
    axes = _axes(x, dim)
    n = prod(x._shape[a] for a in axes)
    acc = _acc_dtype(dt, x._device)
    s = reduce("sum", x, axes, keepdim, acc)
    return cast(E.div(s, n) if n else E.mul(s, math.nan), dt)


def _acc_dtype(dt: D.DType, dev: Any) -> D.DType:
    """float16 accumulates in float32 (as in PyTorch): its range ends at 65504."""
    return D.float32 if dt is D.float16 and dev.supports(D.float32) else dt


def _nonempty(op: str, x: Tensor, axes: tuple[int, ...], whole: bool) -> None:
    """max/min-like reductions have no value over nothing: PyTorch's errors."""
    if not prod(x._shape) == 0:
        return
    if whole:
        err = IndexError if op.startswith("arg") else RuntimeError
        raise err(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0 "
            f"(shape {tuple(x._shape)}). Specify the reduction dim with the 'dim' argument."
        )
    for a in axes:
        if x._shape[a] == 0:
            raise IndexError(
                f"{op}(): Expected reduction dim {a} to have non-zero size (shape {tuple(x._shape)})."
            )


@differentiable("amax", composite=False)
def amax(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    axes = _axes(x, dim)
    _nonempty("amax", x, axes, dim is None)
    return reduce("max", x, axes, keepdim)


@differentiable("amin", composite=False)
def amin(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    axes = _axes(x, dim)
    _nonempty("amin", x, axes, dim is None)
    return reduce("min", x, axes, keepdim)


def _arg(op: str, x: Tensor, dim: Any, keepdim: bool) -> Tensor:
    if dim is None:
        flat = contiguous(x).reshape(-1) if x.ndim != 1 else x
        _nonempty(op, flat, (0,), True)
        res = empty((1,), D.int64, x._device)
        kernel(x._device, op)(res._h, view_of(flat), 0)
        out = as_view(res, (), (), 0)
        return as_view(res, (1,) * x.ndim, (1,) * x.ndim, 0) if keepdim else out
    axis = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        return E.zeros_scalar_like(cast(x, D.int64))
    _nonempty(op, x, (axis,), False)
    kshape = tuple(1 if i == axis else n for i, n in enumerate(x._shape))
    res = empty(kshape, D.int64, x._device)
    kernel(x._device, op)(res._h, view_of(x), axis)
    return res if keepdim else drop_axes(res, (axis,))


def argmax(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return _arg("argmax", x, dim, keepdim)


def argmin(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return _arg("argmin", x, dim, keepdim)


def max(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    """``max(x)`` -> the largest value; ``max(x, dim)`` -> (values, indices);
    ``max(x, other)`` -> elementwise maximum."""
    if isinstance(dim, Tensor):
        return E.maximum(x, dim)
    if dim is None:
        return amax(x)
    return _max_dim(x, dim, keepdim)


@differentiable("max_dim", output=lambda r: r)
def _max_dim(x: Tensor, dim: int, keepdim: bool = False) -> Any:
    return max_result(amax(x, dim, keepdim), argmax(x, dim, keepdim))


@differentiable("min_dim", output=lambda r: r)
def _min_dim(x: Tensor, dim: int, keepdim: bool = False) -> Any:
    return min_result(amin(x, dim, keepdim), argmin(x, dim, keepdim))


def min(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001
    if isinstance(dim, Tensor):
        return E.minimum(x, dim)
    if dim is None:
        return amin(x)
    return _min_dim(x, dim, keepdim)


def var_args(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple[tuple[int, ...], Any, bool]:
    """var's arguments as (axes, correction, keepdim)."""
    if isinstance(dim, bool):  # var(x, False): PyTorch's (input, unbiased) overload
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return _axes(x, dim), correction, keepdim


@differentiable("var")
def var(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    axes, correction, keepdim = var_args(x, dim, unbiased, keepdim, correction=correction)
    x = E._float(x)
    out_dt = x._dtype
    x = cast(x, _acc_dtype(out_dt, x._device))
    n = prod(x._shape[a] for a in axes)
    mu = reduce("sum", x, axes, True)
    mu = E.div(mu, n) if n else mu
    d = E.sub(x, mu)
    ss = reduce("sum", E.mul(d, d), axes, keepdim)
    # PyTorch divides by max(0, n - correction): inf (nan where ss is 0) past the end
    return cast(E.div(ss, float(builtins.max(0, n - correction))), out_dt)


def std(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Any = None) -> Tensor:
    if isinstance(x, Tensor) and x._dtype is D.float16:
        # the root taken in the accumulation dtype, rounded once: a float16
        # variance past 65504 still has a finite std (PyTorch's)
        wide = _acc_dtype(D.float16, x._device)
        if wide is not D.float16:
            v = var(cast(x, wide), dim, unbiased, keepdim, correction=correction)
            return cast(E.sqrt(v), D.float16)
    return E.sqrt(var(x, dim, unbiased, keepdim, correction=correction))


def var_mean(x: Tensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple[Tensor, Tensor]:
    """``(var, mean)``; the arguments as ``var``'s (``unbiased`` or ``correction``;
    ``var_mean(x, False)`` is the biased variance of everything, as PyTorch's)."""
    axes, correction, keepdim = var_args(x, dim, unbiased, keepdim, correction=correction)
    return (var(x, axes, keepdim=keepdim, correction=correction),
            mean(E._float(x), axes, keepdim))


def all(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _truth(x, dim, keepdim, True)


def any(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return _truth(x, dim, keepdim, False)


def _truth(x: Tensor, dim: Any, keepdim: bool, every: bool) -> Tensor:
    """``all`` (``every``) or ``any`` of ``x``'s elements as bools: bool results,
    except uint8 in, uint8 out (PyTorch keeps that legacy)."""
    r = _all_or_any(x, dim, keepdim, every)
    return r if x._dtype is not D.uint8 else cast(r, D.uint8)


def _all_or_any(x: Tensor, dim: Any, keepdim: bool, every: bool) -> Tensor:
    b = cast(x, D.bool_)
    if prod(x._shape) == 0 and dim is None:
        return E._full_bool(empty((), D.bool_, x._device), every)
    axes = _axes(x, dim)
    if builtins.any(x._shape[a] == 0 for a in axes):
        # min and max have no identity: count the falses (all) or the trues (any)
        if every:
            return E.eq(reduce("sum", cast(E.logical_not(b), D.int64), axes, keepdim), 0)
        return E.ne(reduce("sum", cast(b, D.int64), axes, keepdim), 0)
    return reduce("min" if every else "max", b, axes, keepdim)


@differentiable("logsumexp")
def logsumexp(x: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = autocast_inputs("logsumexp", x)
    x = E._float(x)
    axes = _axes(x, dim)
    if builtins.any(x._shape[a] == 0 for a in axes):  # log(0) = -inf, as PyTorch; max has no identity
        return E.log(reduce("sum", E.exp(x), axes, keepdim))
    m = reduce("max", x, axes, True)
    m = E.where(E.isinf(m), 0.0, m)  # all -inf (or +inf) rows: avoid inf - inf
    s = reduce("sum", E.exp(E.sub(x, m)), axes, True)
    out = E.add(E.log(s), m)
    return out if keepdim else drop_axes(out, axes)


def _normalized(op: str, x: Tensor, dim: int, dtype: Any, decomposed: Any) -> Tensor:
    """softmax-like ``op`` of ``x`` over ``dim``: in float32 under autocast, in
    ``dtype`` when given; the backend's own kernel where it has one, else
    ``decomposed(x, axes)``."""
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = autocast_inputs(op, x)
    x = cast(x, D.as_dtype(dtype)) if dtype is not None else E._float(x)
    axes = (normalize_dim(dim, x.ndim),) if x.ndim else ()
    if not prod(x._shape):  # nothing to normalize (and max has no identity)
        return x.clone()
    k = own_kernel(x._device, op, x._dtype)
    if k is not None and axes:
        out = empty(x._shape, x._dtype, x._device)
        k(out._h, view_of(x), axes[0])
        return out
    return decomposed(x, axes)


def _softmax(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    e = E.exp(E.sub(x, reduce("max", x, axes, True)))
    return E.div(e, reduce("sum", e, axes, True))


def _log_softmax(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    shifted = E.sub(x, reduce("max", x, axes, True))
    return E.sub(shifted, E.log(reduce("sum", E.exp(shifted), axes, True)))


@differentiable("softmax")
def softmax(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    return _normalized("softmax", x, dim, dtype, _softmax)


@differentiable("log_softmax")
def log_softmax(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    return _normalized("log_softmax", x, dim, dtype, _log_softmax)


@differentiable("cumsum")
def cumsum(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = autocast_inputs("cumsum", x)
    out_dt = _sum_dtype(x, dtype)
    acc = _acc_dtype(out_dt, x._device)
    if acc is not out_dt:
        return cast(cumsum(cast(x, acc), dim), out_dt)
    x = cast(x, out_dt)
    if x.ndim == 0:
        return x.clone()
    axis = normalize_dim(dim, x.ndim)
    k = own_kernel(x._device, "cumsum", x._dtype)
    if k is not None:
        out = empty(x._shape, x._dtype, x._device)
        k(out._h, view_of(x), axis)
        return out
    # Hillis-Steele scan: log2(n) shifted adds over views, all primitives.
    out = x.clone()
    n, shift = x._shape[axis], 1
    while shift < n:
        prev = out.clone()
        out.narrow(axis, shift, n - shift).add_(prev.narrow(axis, 0, n - shift))
        shift *= 2
    return out


def cumprod(x: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = autocast_inputs("cumprod", x)
    # Hillis-Steele scan, out of place: differentiable through its steps (zeros
    # included), and twice.
    from .joining import cat

    x = x.to(_sum_dtype(x, dtype))
    if x.ndim == 0:
        return x.clone()
    axis = normalize_dim(dim, x.ndim)
    out = x
    n, shift = x._shape[axis], 1
    while shift < n:
        out = cat([out.narrow(axis, 0, shift),
                   E.mul(out.narrow(axis, shift, n - shift), out.narrow(axis, 0, n - shift))], axis)
        shift *= 2
    return out if out is not x else x.clone()


@differentiable("norm")
def norm(x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        x, = autocast_inputs("norm", x)
    x = cast(x, D.as_dtype(dtype)) if dtype is not None else E._float(x)
    if x._dtype is D.float16:  # powers of half overflow from 256: accumulate in float32
        return cast(norm(cast(x, D.float32), p, dim, keepdim), D.float16)
    axes = _axes(x, dim)
    if p in ("fro", 2, 2.0):
        return E.sqrt(reduce("sum", E.mul(x, x), axes, keepdim))
    if p in (math.inf, "inf"):
        return reduce("max", E.abs(x), axes, keepdim)
    if p in (-math.inf, "-inf"):
        return reduce("min", E.abs(x), axes, keepdim)
    if p == 1:
        return reduce("sum", E.abs(x), axes, keepdim)
    if p == 0:
        return reduce("sum", cast(E.ne(x, 0), x._dtype), axes, keepdim)
    if isinstance(p, (int, float)):
        return E.pow(reduce("sum", E.pow(E.abs(x), float(p)), axes, keepdim), 1.0 / p)
    raise ValueError(f"norm: unsupported p={p!r}")


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    return reduce("sum", cast(E.ne(x, 0), D.int64), _axes(x, dim), False)


METHODS = ["sum", "mean", "amax", "amin", "argmax", "argmin", "max", "min", "var", "std",
           "all", "any", "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod",
           "norm", "count_nonzero"]
