"""Matrices and grids built from pieces: ``diag``/``diag_embed`` (vectors on a
diagonal), ``fill_diagonal_``, ``block_diag``, and ``meshgrid``/``cartesian_prod``
(coordinate grids from 1-D tensors)."""

from __future__ import annotations

import warnings
from typing import Any

from .. import dtype as D
from ..shape import normalize_dim
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import views as V
from .core import as_tensor_on, bad_operand, cast, mixed_devices, tensor_arg
from .creation import arange, zeros


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


def fill_diagonal_(input: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:  # noqa: A002
    """In place: the main diagonal (all indices equal) set to ``fill_value``;
    for a tall matrix with ``wrap=True`` it restarts every ``cols + 1`` rows,
    as NumPy's ``fill_diagonal`` does."""
    x = tensor_arg("fill_diagonal_", input)
    if x.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if x.ndim > 2 and len(set(x._shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if x.ndim == 2:
        rows, cols = x._shape
        if wrap and rows > cols + 1:
            flat = list(range(0, rows * cols, cols + 1))
            coords = [[p // cols for p in flat], [p % cols for p in flat]]
        else:
            coords = [list(range(min(rows, cols)))] * 2
    else:
        coords = [list(range(x._shape[0]))] * x.ndim
    key = tuple(as_tensor_on(c, x._device, D.int64) for c in coords)
    I.setitem(x, key, fill_value)
    return x


def block_diag(*tensors: Tensor) -> Tensor:
    """The tensors (0-D, 1-D or 2-D) as the blocks of a block-diagonal matrix."""
    mats = []
    for t in tensors:
        t = tensor_arg("block_diag", t)
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {len(mats)} has {t.ndim} dimensions")
        mats.append(V.reshape(t, (1, 1)) if t.ndim == 0 else V.reshape(t, (1, -1)) if t.ndim == 1 else t)
    if not mats:
        return zeros(1, 0)
    dt = D.result_type(*mats)
    dev = mats[0]._device
    width = sum(m._shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m._shape
        parts = [zeros(r, left, dtype=dt, device=dev), cast(m, dt),
                 zeros(r, width - left - c, dtype=dt, device=dev)]
        rows.append(I.cat(parts, 1))
        left += c
    return I.cat(rows, 0)


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


METHODS = ["diag", "diag_embed", "fill_diagonal_"]
