"""Joining tensors along a dim: ``cat`` (``concat``, ``concatenate``), ``stack``,
``hstack``, ``vstack``, ``dstack`` and ``column_stack``."""

from __future__ import annotations

from typing import Sequence

from .. import dtype as D
from ..autograd.tape import differentiable
from ..shape import normalize_dim
from ..tensor import Tensor
from . import views as V
from .core import bad_operand, empty, kernel, mixed_devices, view_of


@differentiable("cat", inputs="seq")
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise bad_operand("cat", t)
    # legacy: 1-D empty tensors are skipped
    parts = [t for t in tensors if not (t.ndim == 1 and t._shape[0] == 0)] or tensors[:1]
    ref = parts[0]
    if ref.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    d = normalize_dim(dim, ref.ndim)
    dev = ref._device
    for i, t in enumerate(parts):
        if t._device is not dev:
            raise mixed_devices("cat", ref, t)
        if t.ndim != ref.ndim or any(a != b for j, (a, b) in enumerate(zip(t._shape, ref._shape)) if j != d):
            raise RuntimeError(
                f"cat(): sizes of tensors must match except in dimension {d}: got shapes "
                f"{tuple(ref._shape)} and {tuple(t._shape)} (tensor {i})"
            )
    dt = D.result_type(*parts) if len(parts) > 1 else ref._dtype
    total = sum(t._shape[d] for t in parts)
    out = empty(ref._shape[:d] + (total,) + ref._shape[d + 1:], dt, dev)
    start = 0
    for t in parts:
        n = t._shape[d]
        if n:
            dst = V.narrow(out, d, start, n)
            kernel(dev, "copy" if t._dtype is dt else "cast")(view_of(dst), view_of(t))
        start += n
    return out


concat = concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._shape
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise bad_operand("stack", t)
        if t._shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {tuple(shape)} at entry 0 "
                f"and {tuple(t._shape)} at entry {i}"
            )
    d = normalize_dim(dim, len(shape) + 1)
    return cat([V.unsqueeze(t, d) for t in tensors], d)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    return cat([t if t.ndim > 1 else V.unsqueeze(t, 0) for t in tensors], 0)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    return cat(list(V.atleast_3d(*tensors)) if len(tensors) != 1 else [V.atleast_3d(tensors[0])], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    cols = [V.reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors]
    return cat(cols, 1)
