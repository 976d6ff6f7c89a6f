"""Scans and differences along a dim: running ``cummax``/``cummin`` with the index
where each was taken, the ``n``-th forward difference ``diff``, and trapezoidal
integration (``trapezoid``, ``trapz``). (``cumsum``/``cumprod`` are reductions,
in rtxcore/ops/reduction.py.)"""

from __future__ import annotations

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
from .core import cast, tensor_arg
from .creation import arange

cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])


def _cumext(name: str, x: Tensor, dim: int, larger: bool) -> Any:
    """Running max (min) with its index: a log-step scan over (value, index)
    pairs where the later element wins ties and nan wins over everything (the
    last nan seen), PyTorch's sequential rule."""
    x = tensor_arg(name, x)
    if x.ndim == 0:
        idx = cast(E.zeros_scalar_like(cast(x.detach(), D.int64)), D.int64)
        return x.clone(), idx
    d = normalize_dim(dim, x.ndim)
    n = x._shape[d]
    with no_grad():
        v = x.detach()
        shape = [1] * x.ndim
        shape[d] = n
        i = V.expand(V.reshape(arange(n, device=x._device), tuple(shape)), x._shape).contiguous()
        s = 1
        while s < n:
            lv, li = V.narrow(v, d, 0, n - s), V.narrow(i, d, 0, n - s)
            rv, ri = V.narrow(v, d, s, n - s), V.narrow(i, d, s, n - s)
            better = E.ge(rv, lv) if larger else E.le(rv, lv)
            if v._dtype.kind == "f":
                better = E.logical_or(E.isnan(rv), E.logical_and(better, E.logical_not(E.isnan(lv))))
            v = I.cat([V.narrow(v, d, 0, s), E.where(better, rv, lv)], d)
            i = I.cat([V.narrow(i, d, 0, s), E.where(better, ri, li)], d)
            s *= 2
    return I.gather(x, d, i), i


def cummax(input: Tensor, dim: int) -> Any:  # noqa: A002
    """Running maximum along ``dim`` and the index where it was taken."""
    return cummax_result(*_cumext("cummax", input, dim, True))


def cummin(input: Tensor, dim: int) -> Any:  # noqa: A002
    return cummin_result(*_cumext("cummin", input, dim, False))


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,  # noqa: A002
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``!=`` for bool)."""
    x = tensor_arg("diff", input)
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = normalize_dim(dim, x.ndim)
    if prepend is not None or append is not None:
        parts = [p for p in (prepend, x, append) if p is not None]
        x = I.cat([V.expand(p, x._shape[:d] + (1,) + x._shape[d + 1:]) if p.ndim == 0 else p
                   for p in parts], d)
    for _ in range(n):
        m = x._shape[d]
        if m == 0:
            break
        hi, lo = V.narrow(x, d, 1, m - 1), V.narrow(x, d, 0, m - 1)
        x = E.logical_xor(hi, lo) if x._dtype is D.bool_ else E.sub(hi, lo)
    return x


def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``, with sample points ``x`` (a tensor)
    or a constant spacing ``dx`` (default 1)."""
    y = tensor_arg("trapezoid", y)
    d = normalize_dim(dim, max(y.ndim, 1))
    n = y._shape[d]
    if n == 0:
        return R.sum(y, d)
    avg = E.mul(E.add(V.narrow(y, d, 1, n - 1), V.narrow(y, d, 0, n - 1)), 0.5)
    if isinstance(x, Tensor):
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[d] = n
            x = V.reshape(x, tuple(shape))
        m = x._shape[d] if x.ndim == y.ndim else x._shape[-1]
        spacing = E.sub(V.narrow(x, d, 1, m - 1), V.narrow(x, d, 0, m - 1))
        return R.sum(E.mul(avg, spacing), d)
    step = x if x is not None else (1 if dx is None else dx)
    return E.mul(R.sum(avg, d), step)


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """``trapezoid`` (PyTorch's older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


METHODS = ["cummax", "cummin", "diff"]
