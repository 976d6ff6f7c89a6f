"""Dropout: ``dropout`` (each element) and the channel dropouts ``dropout1d`` /
``dropout2d`` (whole channels), masks drawn from the default generator."""

from __future__ import annotations

import warnings

from ...autograd.grad_mode import no_grad
from ...ops.creation import rand, rand_like
from ...tensor import Tensor
from ._args import _check_tensor

__all__ = ["dropout", "dropout1d", "dropout2d"]


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _drop(input: Tensor, p: float, inplace: bool, mshape: tuple[int, ...] | None) -> Tensor:
    """``input`` times a mask of 0 (probability ``p``) and ``1 / (1 - p)``: one draw
    per element, or per element of ``mshape``, broadcast over the rest."""
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    q = 1.0 - p
    with no_grad():
        u = rand_like(input) if mshape is None else rand(mshape, dtype=input._dtype,
                                                         device=input._device)
        mask = (u < q).to(input._dtype).mul_(1.0 / q)
    return input.mul_(mask) if inplace else input * mask


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` (from the default generator) and
    scale the rest by ``1 / (1 - p)``; the input itself when not training."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    return _drop(input, p, inplace, None)


def _feature_dropout(input: Tensor, p: float, inplace: bool) -> Tensor:
    """Zero whole channels: one draw per (N, C) entry, broadcast over the rest."""
    return _drop(input, p, inplace, tuple(input._shape[:2]) + (1,) * (input.ndim - 2))


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input with probability ``p``
    and scale the rest by ``1 / (1 - p)``."""
    _check_p(p)
    _check_tensor("dropout1d", "input", input)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
            "a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if not training or p == 0.0:
        return input
    if input.ndim == 2:
        out = _feature_dropout(input.unsqueeze(0), p, inplace)
        return input if inplace else out.squeeze(0)
    return _feature_dropout(input, p, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels (dim 1) with probability ``p`` and scale the rest by
    ``1 / (1 - p)``. As PyTorch, a 3-D input is taken as (N, C, L)."""
    _check_p(p)
    _check_tensor("dropout2d", "input", input)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, and an "
            "optional batch dimension (i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
            "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
            "dim. This behavior will change in a future release to interpret the input as one "
            "without a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise "
            "dropout behavior, please switch to using dropout1d instead.", stacklevel=2)
    if not training or p == 0.0:
        return input
    return _feature_dropout(input, p, inplace)
