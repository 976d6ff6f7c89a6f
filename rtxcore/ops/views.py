"""View ops: new (shape, strides, offset) over the same storage. Nothing is copied,
on any backend; writes through a view are seen by its base. The one exception,
``reshape``, copies only when no view can show the result (as in PyTorch).
``squeeze_``/``unsqueeze_``/``t_``/``transpose_`` give the tensor itself the
view's layout."""

from __future__ import annotations

from typing import Any, Sequence

from .. import dtype as D
from ..shape import (broadcast_many, expand_strides, infer_shape, ints_arg, normalize_dim, prod,
                     view_strides)
from ..tensor import Tensor
from .core import as_view, contiguous, cstrides, tensor_arg
from ..autograd.tape import differentiable


@differentiable("view")
def view(x: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and hasattr(shape[0], "itemsize"):
        raise NotImplementedError("view(dtype) is not supported; use .to(dtype)")
    shape = infer_shape(ints_arg(shape), prod(x._shape), tuple(x._shape))
    strides = view_strides(x._shape, x._strides, shape)
    if strides is None:
        raise RuntimeError(
            f"view size is not compatible with input tensor's size and stride (shape "
            f"{tuple(x._shape)}, strides {x._strides}) to view it as {shape}: at least one "
            "dimension spans across two contiguous subspaces. Use .reshape(...) instead."
        )
    return as_view(x, shape, strides, x._offset)


@differentiable("reshape")
def reshape(x: Tensor, *shape: Any) -> Tensor:
    shape = infer_shape(ints_arg(shape), prod(x._shape), tuple(x._shape))
    strides = view_strides(x._shape, x._strides, shape)
    if strides is not None:
        return as_view(x, shape, strides, x._offset)
    c = contiguous(x)
    return as_view(c, shape, cstrides(shape), c._offset)


def view_as(x: Tensor, other: Tensor) -> Tensor:
    return view(x, other._shape)


def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    return reshape(x, other._shape)


@differentiable("permute")
def permute(x: Tensor, *dims: Any) -> Tensor:
    dims = ints_arg(dims)
    n = len(x._shape)
    if len(dims) != n:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match "
            f"the length of the desired ordering of dimensions i.e. input.dim() = {n} is "
            f"not equal to len(dims) = {len(dims)}"
        )
    if min(dims, default=0) < 0 or max(dims, default=0) >= n:
        dims = tuple(normalize_dim(d, n) for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError(f"permute(): duplicate dims are not allowed in {dims}")
    shape, strides = x._shape, x._strides
    return as_view(x, tuple([shape[d] for d in dims]), tuple([strides[d] for d in dims]),
                   x._offset)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    n = len(x._shape)
    if n == 0:
        return reshape(x, ())
    d0, d1 = normalize_dim(dim0, n), normalize_dim(dim1, n)
    order = list(range(n))
    order[d0], order[d1] = d1, d0
    return permute(x, order)


swapaxes = swapdims = transpose


def t(x: Tensor) -> Tensor:
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return transpose(x, 0, 1) if x.ndim == 2 else reshape(x, x._shape)


def movedim(x: Tensor, source: Any, destination: Any) -> Tensor:
    n = x.ndim
    src = [normalize_dim(d, n) for d in ((source,) if isinstance(source, int) else source)]
    dst = [normalize_dim(d, n) for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src}) and destination ({dst}) must have the same number of elements")
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(x, order)


moveaxis = movedim


@differentiable("expand")
def expand(x: Tensor, *sizes: Any) -> Tensor:
    target = ints_arg(sizes)
    strides = expand_strides(x._shape, x._strides, target)
    shape = tuple(x._shape[i - len(target) + x.ndim] if s == -1 else s for i, s in enumerate(target))
    return as_view(x, shape, strides, x._offset)


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, other._shape)


def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
    return expand(x, tuple(shape))


@differentiable("squeeze")
def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    n = x.ndim
    if dim is None:
        axes = {i for i, s in enumerate(x._shape) if s == 1}
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = {d for d in (normalize_dim(d, n) for d in dims) if n and x._shape[d] == 1}
    shape = tuple(s for i, s in enumerate(x._shape) if i not in axes)
    strides = tuple(s for i, s in enumerate(x._strides) if i not in axes)
    return as_view(x, shape, strides, x._offset)


@differentiable("unsqueeze")
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    n = x.ndim
    d = normalize_dim(dim, n + 1)
    shape = x._shape[:d] + (1,) + x._shape[d:]
    inner = x._strides[d] * x._shape[d] if d < n else 1
    return as_view(x, shape, x._strides[:d] + (inner,) + x._strides[d:], x._offset)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    n = x.ndim
    if n == 0:
        return reshape(x, (1,))
    s, e = normalize_dim(start_dim, n), normalize_dim(end_dim, n)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = x._shape[:s] + (prod(x._shape[s:e + 1]),) + x._shape[e + 1:]
    return reshape(x, shape)


def ravel(x: Tensor) -> Tensor:
    return reshape(x, (-1,))


def unflatten(x: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    d = normalize_dim(dim, x.ndim)
    sizes = infer_shape(tuple(sizes), x._shape[d], (x._shape[d],))
    return view(x, x._shape[:d] + tuple(sizes) + x._shape[d + 1:])


@differentiable("narrow")
def narrow(x: Tensor, dim: int, start: Any, length: int) -> Tensor:
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    start = int(start)
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(
            f"narrow(): start {start} + length {length} exceeds dimension {d} of size {size}"
        )
    shape = x._shape[:d] + (length,) + x._shape[d + 1:]
    return as_view(x, shape, x._strides, x._offset + start * x._strides[d])


def split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(f"split expects split_size be positive, but got split_size={step}")
        sizes = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's "
                f"size at dimension {d}), but got split_sizes={sizes}"
            )
    out, start = [], 0
    for n in sizes:
        out.append(narrow(x, d, start, n))
        start += n
    return tuple(out)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0")
    size = x._shape[normalize_dim(dim, x.ndim)]
    step = max(1, -(-size // chunks))
    return split(x, step, dim)


def tensor_split(x: Tensor, sections: int, dim: int = 0) -> tuple[Tensor, ...]:
    size = x._shape[normalize_dim(dim, x.ndim)]
    q, r = divmod(size, sections)
    return split(x, [q + 1] * r + [q] * (sections - r), dim)


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    d = normalize_dim(dim, x.ndim)
    return tuple(select(x, d, i) for i in range(x._shape[d]))


@differentiable("select")
def select(x: Tensor, dim: int, index: int) -> Tensor:
    """``x`` at ``index`` along ``dim``, that dim removed (a view)."""
    d = normalize_dim(dim, x.ndim)
    size = x._shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {tuple(x._shape)} at dimension {d}")
    shape = x._shape[:d] + x._shape[d + 1:]
    strides = x._strides[:d] + x._strides[d + 1:]
    return as_view(x, shape, strides, x._offset + (index % size) * x._strides[d])


@differentiable("diagonal")
def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    n = x.ndim
    if n < 2:
        raise RuntimeError(f"diagonal dimensions requires at least 2 dims, got {n}")
    d1, d2 = normalize_dim(dim1, n), normalize_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    s1, s2 = x._shape[d1], x._shape[d2]
    off = x._offset
    if offset >= 0:
        length = max(0, min(s1, s2 - offset))
        off += offset * x._strides[d2] if length else 0
    else:
        length = max(0, min(s1 + offset, s2))
        off += -offset * x._strides[d1] if length else 0
    keep = [i for i in range(n) if i not in (d1, d2)]
    shape = tuple(x._shape[i] for i in keep) + (length,)
    strides = tuple(x._strides[i] for i in keep) + (x._strides[d1] + x._strides[d2],)
    return as_view(x, shape, strides, off)


@differentiable("unfold")
def unfold(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Sliding windows along ``dimension`` as a view (``Tensor.unfold``)."""
    d = normalize_dim(dimension, x.ndim)
    n = x._shape[d]
    if size > n or step <= 0:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}; step must be > 0 (got {step})")
    count = (n - size) // step + 1
    shape = x._shape[:d] + (count,) + x._shape[d + 1:] + (size,)
    strides = x._strides[:d] + (x._strides[d] * step,) + x._strides[d + 1:] + (x._strides[d],)
    return as_view(x, shape, strides, x._offset)


def repeat(x: Tensor, *sizes: Any) -> Tensor:
    """Tile ``x`` (``Tensor.repeat``): an expand of interleaved size-1 dims, then
    one copy by ``reshape``."""
    reps = ints_arg(sizes)
    if len(reps) < x.ndim:
        raise RuntimeError(
            f"Number of dimensions of repeat dims ({len(reps)}) can not be smaller than "
            f"number of dimensions of tensor ({x.ndim})"
        )
    lead = len(reps) - x.ndim
    shape = (1,) * lead + x._shape
    y = reshape(x, shape)
    inter: list[int] = []
    target: list[int] = []
    for r, n in zip(reps, shape):
        inter += [1, n]
        target += [r, n]
    y = expand(reshape(y, tuple(inter)), tuple(target))
    return reshape(y, tuple(r * n for r, n in zip(reps, shape)))


def tile(x: Tensor, dims: Sequence[int]) -> Tensor:
    dims = tuple(dims)
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


@differentiable("contiguous")
def contiguous_method(x: Tensor, memory_format: Any = D.contiguous_format) -> Tensor:
    if memory_format is D.contiguous_format:
        return contiguous(x)
    if memory_format is D.preserve_format:
        raise RuntimeError("contiguous(): preserve memory format is unsupported by the contiguous operator")
    from .._tensor_api import in_format

    return in_format("contiguous", x, memory_format)


def T_property(x: Tensor) -> Tensor:
    """``x.T``: the dims reversed."""
    if x._ag is None:  # outside any graph: the view directly
        return as_view(x, x._shape[::-1], x._strides[::-1], x._offset)
    return permute(x, tuple(range(x.ndim - 1, -1, -1)))


# -- broadcasting and at-least-n-d views ----------------------------------------------


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape (views)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        tensor_arg("broadcast_tensors", t)
    shape = broadcast_many(*(t._shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def _atleast(name: str, nd: int, tensors: tuple[Any, ...]) -> Any:
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = []
    for t in tensors:
        t = tensor_arg(name, t)
        if t.ndim < nd:
            if t.ndim == 0:
                t = reshape(t, (1,) * nd)
            elif nd == 2 or t.ndim == 2:  # (n) -> (1, n); (m, n) -> (m, n, 1)
                t = unsqueeze(t, 0) if t.ndim == 1 else unsqueeze(t, -1)
                if t.ndim < nd:
                    t = unsqueeze(t, -1)
            else:
                t = reshape(t, (1, t._shape[0], 1))
        out.append(t)
    return out[0] if one else tuple(out)


def atleast_1d(*tensors: Any) -> Any:
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """(n) -> (1, n, 1), (m, n) -> (m, n, 1), as NumPy and PyTorch do."""
    return _atleast("atleast_3d", 3, tensors)


# -- in place: a new layout for the tensor itself ---------------------------------------


def _relayout_(name: str, x: Tensor, view: Any) -> Tensor:
    """Give ``x`` the layout of ``view(x)`` in place (``t_``, ``unsqueeze_``, ...).
    As in PyTorch, refused on a leaf that requires grad; in a graph, ``x`` then
    continues from the view's node."""
    from ..autograd.grad_mode import is_grad_enabled

    x = tensor_arg(name, x)
    m = x._ag
    if m is not None and m.requires_grad and m.grad_fn is None and is_grad_enabled():
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    v = view(x)
    x._shape, x._strides, x._offset = v._shape, v._strides, v._offset
    x._h = None
    if v._ag is not None and m is not None:
        x._ag = v._ag
    return x


def squeeze_(input: Tensor, dim: Any = None) -> Tensor:  # noqa: A002
    return _relayout_("squeeze_", input, lambda x: squeeze(x, dim))


def unsqueeze_(input: Tensor, dim: int) -> Tensor:  # noqa: A002
    return _relayout_("unsqueeze_", input, lambda x: unsqueeze(x, dim))


def t_(input: Tensor) -> Tensor:  # noqa: A002
    return _relayout_("t_", input, t)


def transpose_(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    return _relayout_("transpose_", input, lambda x: transpose(x, dim0, dim1))


METHODS = ["view", "reshape", "view_as", "reshape_as", "permute", "transpose",
           "swapaxes", "swapdims", "t", "movedim", "moveaxis", "expand", "expand_as",
           "broadcast_to", "squeeze", "unsqueeze", "flatten", "ravel", "unflatten",
           "narrow", "split", "chunk", "tensor_split", "unbind", "select", "diagonal", "unfold",
           "repeat", "tile", "squeeze_", "unsqueeze_", "t_", "transpose_"]
