"""Triangles of matrices: ``tril``/``triu`` (and in place), and the coordinates of a
triangle, ``tril_indices``/``triu_indices``."""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from ..tensor import Tensor
from . import elementwise as E
from . import views as V
from .core import cast, ready_device, zeros_on


def _tri_mask(x: Tensor, diagonal: int, upper: bool) -> Tensor:
    from .creation import arange

    if x.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    r, c = x._shape[-2:]
    rows = V.unsqueeze(arange(r, device=x._device), 1)
    cols = V.unsqueeze(arange(c, device=x._device), 0)
    diff = E.sub(cols, rows)  # j - i
    return E.ge(diff, diagonal) if upper else E.le(diff, diagonal)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    return E.where(_tri_mask(x, diagonal, False), x, zeros_on((), x._dtype, x._device))


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    return E.where(_tri_mask(x, diagonal, True), x, zeros_on((), x._dtype, x._device))


def tril_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    return E.copy_(input, tril(input, diagonal))


def triu_(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    return E.copy_(input, triu(input, diagonal))


def _tri_indices(name: str, row: int, col: int, offset: int, dtype: Any, device: Any, upper: bool) -> Tensor:
    from .creation import arange

    if row < 0 or col < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got row={row}, col={col}")
    dev = ready_device(device)
    dt = D.int64 if dtype is None else D.as_dtype(dtype)
    r = V.unsqueeze(arange(row, device=dev), 1)
    c = V.unsqueeze(arange(col, device=dev), 0)
    keep = E.ge(E.sub(c, r), offset) if upper else E.le(E.sub(c, r), offset)
    idx = keep.nonzero()  # (N, 2), row-major: PyTorch's order (indexing's nonzero)
    return cast(V.t(idx), dt).contiguous()


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The (2, N) coordinates of the upper triangle of a row x col matrix."""
    return _tri_indices("triu_indices", row, col, offset, dtype, device, True)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The (2, N) coordinates of the lower triangle of a row x col matrix."""
    return _tri_indices("tril_indices", row, col, offset, dtype, device, False)


METHODS = ["tril_", "triu_"]
