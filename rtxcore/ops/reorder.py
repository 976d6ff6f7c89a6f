"""Reordering elements along dims (copies): ``flip``, ``fliplr``, ``flipud``,
``rot90`` and ``roll``."""

from __future__ import annotations

from typing import Any, Sequence

from ..shape import normalize_dim
from ..tensor import Tensor
from . import views as V
from .core import tensor_arg
from .indexing import index_select
from .joining import cat


def flip(x: Tensor, dims: Any) -> Tensor:
    """Reverse the order along ``dims`` (a copy: strides are never negative)."""
    from .creation import arange

    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = x
    for d in sorted({normalize_dim(d, x.ndim) for d in dims}):
        n = out._shape[d]
        rev = arange(n - 1, -1, -1, device=x._device) if n else arange(0, device=x._device)
        out = index_select(out, d, rev)
    return out if out is not x else x.clone()


def roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    if dims is None:
        return V.reshape(roll(V.flatten(x), shifts, 0), x._shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts ({len(shifts)}) and dims ({len(dims)}) must have the same length")
    out = x
    for s, d in zip(shifts, dims):
        d = normalize_dim(d, x.ndim)
        n = out._shape[d]
        s = s % n if n else 0
        if s:
            out = cat([V.narrow(out, d, n - s, s), V.narrow(out, d, 0, n - s)], d)
    return out if out is not x else x.clone()


def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    x = tensor_arg("fliplr", input)
    if x.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(x, [1])


def flipud(input: Tensor) -> Tensor:  # noqa: A002
    x = tensor_arg("flipud", input)
    if x.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(x, [0])


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:  # noqa: A002
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first
    towards the second."""
    x = tensor_arg("rot90", input)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    d0, d1 = normalize_dim(dims[0], x.ndim), normalize_dim(dims[1], x.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return V.transpose(flip(x, [d1]), d0, d1)
    if k == 2:
        return flip(x, [d0, d1])
    if k == 3:
        return flip(V.transpose(x, d0, d1), [d1])
    return x.clone()


METHODS = ["flip", "roll", "fliplr", "flipud", "rot90"]
