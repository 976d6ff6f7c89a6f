"""Shapes and layout math. Every view op is computed here, as new
(shape, strides, offset) over the same storage; nothing here touches data."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from .dispatch.types import contiguous_strides

__all__ = ["Shape", "Size", "contiguous_strides", "broadcast_shapes"]


class Shape(tuple):
    """A tensor's shape: a tuple of ints (``torch.Size``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"rtxcore.Shape({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


Size = Shape


def ints_arg(args: tuple[Any, ...], what: str = "size") -> tuple[int, ...]:
    """``f(2, 3)`` or ``f((2, 3))`` -> (2, 3): how PyTorch takes shapes and dims."""
    if len(args) == 1 and not isinstance(args[0], int) and hasattr(args[0], "__iter__"):
        args = tuple(args[0])
    out = []
    for s in args:
        try:
            out.append(int(s.__index__()))
        except (AttributeError, TypeError):
            raise TypeError(f"{what} must be a sequence of ints, got {s!r} in {args!r}") from None
    return tuple(out)


def prod(xs: Iterable[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def normalize_dim(dim: int, ndim: int, what: str = "dimension") -> int:
    """Wrap a negative dim; IndexError naming the valid range otherwise."""
    if not isinstance(dim, int):
        raise TypeError(f"{what} must be an int, got {type(dim).__name__}")
    n = ndim if ndim > 0 else 1
    if dim < -n or dim >= n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim % n if ndim > 0 else 0


_ALL_AXES = [tuple(range(n)) for n in range(9)]


def normalize_dims(dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted distinct non-negative axes; None means all."""
    if type(dim) is int and -ndim <= dim < ndim:
        return (dim % ndim,)
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):  # () and [] mean all
        return _ALL_AXES[ndim] if ndim < 9 else tuple(range(ndim))
    if isinstance(dim, int):
        return (normalize_dim(dim, ndim),) if ndim else ()
    axes = sorted({normalize_dim(d, ndim) for d in dim}) if ndim else []
    if len(axes) != len(tuple(dim)) and ndim:
        raise RuntimeError(f"dim {tuple(dim)} appears multiple times in the list of dims")
    return tuple(axes)


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if a == b:
        return a
    na, nb = len(a), len(b)
    n = max(na, nb)
    out = []
    for i in range(n):
        x = a[i - n + na] if i - n + na >= 0 else 1
        y = b[i - n + nb] if i - n + nb >= 0 else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise RuntimeError(
                f"shapes {tuple(a)} and {tuple(b)} cannot be broadcast together: "
                f"size {x} and size {y} differ at dimension {i - n} and neither is 1"
            )
    return tuple(out)


def broadcast_many(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    out: tuple[int, ...] = ()
    for s in shapes:
        out = broadcast_shapes(out, s)
    return out


def expand_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], target: tuple[int, ...]
) -> tuple[int, ...]:
    """Strides that view (shape, strides) as ``target``: stride 0 where broadcast."""
    n, m = len(target), len(shape)
    if m > n:
        raise RuntimeError(
            f"expand: the target shape {tuple(target)} has fewer dimensions than "
            f"the tensor's shape {tuple(shape)}"
        )
    out = [0] * n
    for i in range(n):
        j = i - n + m
        if j < 0:
            if target[i] < 0:
                raise RuntimeError(f"expand: -1 is not allowed in a new leading dimension ({tuple(target)})")
            continue
        t = target[i]
        if t == -1 or t == shape[j]:
            out[i] = strides[j]
        elif shape[j] == 1:
            out[i] = 0
        else:
            raise RuntimeError(
                f"expand: the size {shape[j]} of tensor shape {tuple(shape)} must match "
                f"the target size {t} at dimension {i} of {tuple(target)} (or be 1)"
            )
    return tuple(out)


def infer_shape(shape: Sequence[int], numel: int, old: tuple[int, ...]) -> tuple[int, ...]:
    """Resolve one -1 in a reshape target; RuntimeError naming both shapes."""
    shape = tuple(shape)
    known, neg = 1, -1
    for i, s in enumerate(shape):
        if s.__class__ is not int and not isinstance(s, int) or s < -1:
            raise RuntimeError(f"invalid shape dimension {s!r} in {shape}")
        if s == -1:
            if neg >= 0:
                raise RuntimeError(
                    f"only one dimension can be inferred (-1): cannot reshape {old} to {shape}")
            neg = i
        else:
            known *= s
    if neg >= 0:
        if known == 0 or numel % known:
            raise RuntimeError(
                f"shape {shape} is invalid for input of size {numel} (tensor of shape {old})"
            )
        return shape[:neg] + (numel // known,) + shape[neg + 1:]
    if known != numel:
        raise RuntimeError(
            f"cannot reshape tensor of shape {old} ({numel} elements) to {shape} "
            f"({known} elements)"
        )
    return shape


def view_strides(
    old_shape: tuple[int, ...], old_strides: tuple[int, ...], new_shape: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Strides that show the same elements in ``new_shape`` without a copy, or None.

    Groups of old dims that are contiguous with each other may be split or merged
    freely (PyTorch's computeStride).
    """
    if not old_shape:
        return contiguous_strides(new_shape)
    # contiguous (the common case): the new shape's own contiguous strides
    expected = 1
    for d in range(len(old_shape) - 1, -1, -1):
        n = old_shape[d]
        if n == 0:
            return contiguous_strides(new_shape)
        if n != 1 and old_strides[d] != expected:
            break
        expected *= n
    else:
        return contiguous_strides(new_shape)
    if 0 in old_shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1
            and old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != expected:
            return n == 0 or _has_zero(shape)
        expected *= n
    return True


def _has_zero(shape: tuple[int, ...]) -> bool:
    return 0 in shape
