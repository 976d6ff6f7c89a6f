"""Argument checks shared by the ``rtxcore.nn.functional`` families: a Tensor
where one is required, an int or pair of ints, the groups of a convolution, and
the batched view of an unbatched (C, L) / (C, H, W) input."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...tensor import Tensor


def _check_tensor(fn: str, name: str, v: Any) -> None:
    if not isinstance(v, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be a Tensor, not {type(v).__name__}")


def _pair(v: Any, name: str, fn: str) -> tuple[int, int]:
    if isinstance(v, bool):
        raise TypeError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    try:
        t = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}") from None
    if len(t) == 1:
        return t[0], t[0]
    if len(t) != 2:
        raise ValueError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}")
    return t


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t._shape)


def _single(v: Any, name: str, fn: str) -> int:
    """An int, or a 1-sequence of one (PyTorch's ``_single``)."""
    if isinstance(v, bool):
        raise TypeError(f"{fn}(): {name} must be an int or a tuple of one int, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    try:
        t = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{fn}(): {name} must be an int or a tuple of one int, got {v!r}") from None
    if len(t) != 1:
        raise ValueError(f"{fn}(): {name} must be an int or a tuple of one int, got {v!r}")
    return t[0]


def _check_groups(fn: str, groups: Any) -> int:
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"{fn}: non-positive groups is not supported, got groups={groups!r}")
    return int(groups)


def _as_3d(fn: str, input: Tensor) -> tuple[Tensor, bool]:
    _check_tensor(fn, "input", input)
    if input.ndim == 3:
        return input, False
    if input.ndim == 2:  # unbatched (C, L)
        return input.unsqueeze(0), True
    raise RuntimeError(f"{fn}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape "
                       f"{_shape(input)}")


def _as_4d(fn: str, input: Tensor) -> tuple[Tensor, bool]:
    _check_tensor(fn, "input", input)
    if input.ndim == 4:
        return input, False
    if input.ndim == 3:  # unbatched (C, H, W)
        return input.unsqueeze(0), True
    raise RuntimeError(f"{fn}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                       f"{_shape(input)}")
