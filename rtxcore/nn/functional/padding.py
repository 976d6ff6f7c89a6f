"""Padding: ``pad`` in its constant, reflect, replicate and circular modes (and
cropping, with negative amounts).

Constant padding is one small Function whose backward is a slice; the other
modes are one ``index_select`` per padded dim, at indices computed on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import dtype as D
from ...autograd.function import Function
from ...ops.creation import full, tensor
from ...tensor import Tensor
from ._args import _check_tensor

__all__ = ["pad"]


class _ConstantPad(Function):
    """A bigger tensor of ``value`` with ``x`` inside at ``key``; backward: the slice."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, shape: tuple[int, ...], key: tuple[slice, ...],
                value: Any) -> Tensor:
        out = full(shape, value, dtype=x._dtype, device=x._device)
        out[key] = x
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        return g[ctx.args[2]], None, None, None


def _pad_index(size: int, lo: int, hi: int, mode: str) -> np.ndarray:
    i = np.arange(-lo, size + hi)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    if mode == "circular":
        return np.mod(i, size)
    # reflect: mirror without repeating the edge
    period = 2 * (size - 1)
    j = np.mod(i, period) if period else np.zeros_like(i)
    return np.where(j >= size, period - j, j)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dims.

    ``pad = (left, right, top, bottom, ...)`` starts from the last dim.
    Modes: ``'constant'`` (``value``, default 0), ``'reflect'``, ``'replicate'``,
    ``'circular'``.
    """
    _check_tensor("pad", "input", input)
    pad = tuple(int(v) for v in pad)
    if len(pad) % 2:
        raise RuntimeError(f"pad: padding length must be divisible by 2, got {len(pad)} ({pad})")
    nd = len(pad) // 2
    if nd > input.ndim:
        raise RuntimeError(f"pad: padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{input.ndim}")
    ndim = input.ndim
    amounts = {ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(nd)}
    if mode == "constant":
        x = input
        # crop first (negative amounts): views
        for d, (lo, hi) in amounts.items():
            if lo < 0 or hi < 0:
                size = x._shape[d]
                start, stop = max(0, -lo), size - max(0, -hi)
                if stop < start:
                    raise RuntimeError(f"pad: the input size {size} at dimension {d} is too small "
                                       f"for the negative padding {(lo, hi)}")
                x = x.narrow(d, start, stop - start)
        shape = list(x._shape)
        key = [slice(None)] * ndim
        for d, (lo, hi) in amounts.items():
            lo, hi = max(0, lo), max(0, hi)
            key[d] = slice(lo, lo + shape[d])
            shape[d] += lo + hi
        if tuple(shape) == tuple(x._shape):
            return x.clone() if x is input else x
        fill = 0 if value is None else value
        return _ConstantPad.apply(x, tuple(shape), tuple(key), fill)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use 'constant', "
                                  "'reflect', 'replicate' or 'circular'")
    if value is not None and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    out = input
    for d, (lo, hi) in amounts.items():
        size = out._shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"pad: padding size should be less than the corresponding input "
                               f"dimension, but got padding {(lo, hi)} at dimension {d} of input "
                               f"{list(input._shape)}")
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError(f"pad: padding value causes wrapping around more than once "
                               f"(padding {(lo, hi)} at dimension {d} of size {size})")
        if (lo, hi) == (0, 0):
            continue
        if lo < 0 or hi < 0:
            raise RuntimeError(f"pad: negative padding is only supported in 'constant' mode "
                               f"(got {(lo, hi)} with mode {mode!r})")
        idx = tensor(_pad_index(size, lo, hi, mode), dtype=D.int64, device=input._device)
        out = out.index_select(d, idx)
    return out if out is not input else input.clone()
