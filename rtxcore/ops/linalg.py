"""Matrix products: ``matmul`` and its relatives (``mm``, ``bmm``, ``mv``, ``dot``,
``outer``, ``linear``), the scaled sums ``addmm``/``addmv``/``baddbmm``/``addbmm``/
``addr``, and ``trace``, ``cross``, ``kron``.

One primitive (batched ``matmul``); the core turns PyTorch's 1-D / 2-D / batched
cases into it with views: vectors become matrices by ``unsqueeze``, batch dims
broadcast by stride-0 ``expand``. ``einsum`` is in rtxcore/ops/einsum.py."""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from ..shape import broadcast_many, broadcast_shapes, normalize_dim
from ..tensor import Tensor
from . import elementwise as E
from . import reduction as R
from . import views as V
from ..autograd.tape import differentiable
from .._autocast import autocast_inputs, regions as _autocast_regions
from .core import (as_view, bad_operand, buffer, cast, check_dtype, computed, expand_to, fresh,
                   kernel, mixed_devices, tensor_arg, view_of)
from .joining import stack


def _fmt(shape: tuple[int, ...]) -> str:
    return "x".join(str(s) for s in shape) if shape else "()"


@differentiable("matmul", inputs=2)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    if _autocast_regions[0]:  # an autocast region is open: products may run in float16
        a, b = autocast_inputs("matmul", a, b)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise bad_operand("matmul", b if isinstance(a, Tensor) else a)
    if a._device is not b._device:
        raise mixed_devices("matmul", a, b)
    na, nb = len(a._shape), len(b._shape)
    dev = a._device
    if na == 2 and nb == 2 and a._dtype is b._dtype:
        # fast path: a plain matrix product
        (n, k), (k2, m) = a._shape, b._shape
        if k == k2:
            return computed(dev, "matmul", dev.kernels.get("matmul") or kernel(dev, "matmul"),
                            (n, m), a._dtype, view_of(a), view_of(b))
    elif na == 1 and nb == 1 and a._dtype is b._dtype and a._shape == b._shape:
        # fast path: a dot product, as a (1, k) @ (k, 1) matmul on views
        (k,) = a._shape
        view = dev.view
        dt = a._dtype
        if dt not in dev._dtypes:
            check_dtype(dt, dev)
        buf, h = buffer((1, 1), dt, dev)
        (dev.kernels.get("matmul") or kernel(dev, "matmul"))(
            h,
            view(a._storage.buffer, (1, k), (0, a._strides[0]), a._offset, dt),
            view(b._storage.buffer, (k, 1), (b._strides[0], 0), b._offset, dt),
        )
        return fresh(buf, None, (), dt, dev)  # (the result's 0-d tensor on that buffer)
    if na == 0 or nb == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D"
        )
    dt = D.result_type(a, b)
    a, b = cast(a, dt), cast(b, dt)
    a2 = V.unsqueeze(a, 0) if na == 1 else a
    b2 = V.unsqueeze(b, 1) if nb == 1 else b
    n, k = a2._shape[-2:]
    k2, m = b2._shape[-2:]
    if k != k2:
        raise RuntimeError(
            f"matmul: shapes {tuple(a._shape)} and {tuple(b._shape)} cannot be multiplied "
            f"({_fmt(a2._shape[-2:])} and {_fmt(b2._shape[-2:])}): inner dimensions {k} and {k2} differ"
        )
    try:
        batch = broadcast_shapes(a2._shape[:-2], b2._shape[:-2])
    except RuntimeError:
        raise RuntimeError(
            f"matmul: shapes {tuple(a._shape)} and {tuple(b._shape)} cannot be multiplied: "
            f"batch dimensions {tuple(a2._shape[:-2])} and {tuple(b2._shape[:-2])} don't broadcast"
        ) from None
    out = computed(dev, "matmul", kernel(dev, "matmul"), batch + (n, m), dt,
                   expand_to(a2, batch + (n, k)), expand_to(b2, batch + (k, m)))
    # drop the dims that 1-D operands gained
    if na == 1 and nb == 1:
        return as_view(out, (), (), 0)
    if na == 1:
        return V.squeeze(out, -2)
    if nb == 1:
        return V.squeeze(out, -1)
    return out


@differentiable("linear", inputs=3)
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` (weight (out, in)), recorded as one node whose
    backward gives ``weight`` a contiguous (out, in) gradient directly."""
    out = matmul(x, weight.T)
    return out if bias is None else out.add_(bias) if out._dtype is bias._dtype else out + bias


def mm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D (shapes {tuple(a._shape)} and {tuple(b._shape)})")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"bmm: expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a._shape[0] != b._shape[0]:
        raise RuntimeError(f"bmm: batch sizes differ: shapes {tuple(a._shape)} and {tuple(b._shape)}")
    return matmul(a, b)


def mv(a: Tensor, v: Tensor) -> Tensor:
    if a.ndim != 2 or v.ndim != 1:
        raise RuntimeError(f"mv: expected a 2-D matrix and a 1-D vector, got shapes {tuple(a._shape)} and {tuple(v._shape)}")
    return matmul(a, v)


def dot(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"dot: expected both vectors to have same dtype, but found {a._dtype.name} and {b._dtype.name}")
    if a._shape != b._shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a._shape[0]}] and src [{b._shape[0]}] to have the same number of elements")
    return matmul(a, b)


inner = dot


def outer(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D vectors, got shapes {tuple(a._shape)} and {tuple(b._shape)}")
    return E.mul(V.unsqueeze(a, 1), V.unsqueeze(b, 0))


ger = outer


def _scaled_sum(name: str, inp: Tensor, prod: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta * input + alpha * prod``; beta == 0 ignores input (nan included)."""
    try:
        shape = broadcast_many(inp._shape, prod._shape)
    except RuntimeError:
        shape = None
    if shape != prod._shape:
        raise RuntimeError(f"{name}: the input of shape {tuple(inp._shape)} can't be broadcast to the "
                           f"result shape {tuple(prod._shape)}")
    if alpha != 1:
        prod = E.mul(prod, alpha)
    if beta == 0:
        return prod
    return E.add(inp if beta == 1 else E.mul(inp, beta), prod)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``."""
    return _scaled_sum("addmm", tensor_arg("addmm", input), mm(mat1, mat2), beta, alpha)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat @ vec)``."""
    return _scaled_sum("addmv", tensor_arg("addmv", input), mv(mat, vec), beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2)``, batch by batch."""
    return _scaled_sum("baddbmm", tensor_arg("baddbmm", input), bmm(batch1, batch2), beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``."""
    return _scaled_sum("addbmm", tensor_arg("addbmm", input), R.sum(bmm(batch1, batch2), 0), beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * outer(vec1, vec2)``."""
    return _scaled_sum("addr", tensor_arg("addr", input), outer(vec1, vec2), beta, alpha)


def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of the main diagonal of a matrix."""
    x = tensor_arg("trace", input)
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return R.sum(V.diagonal(x, 0, 0, 1))


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:  # noqa: A002
    """The 3-D cross product along ``dim`` (by default the first dim of size 3,
    as PyTorch still does; ``linalg.cross`` defaults to -1)."""
    a, b = tensor_arg("cross", input), tensor_arg("cross", other)
    if a.ndim != b.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got {a.ndim} and {b.ndim}")
    a, b = V.broadcast_tensors(a, b)
    if dim is None:
        dims = [i for i, n in enumerate(a._shape) if n == 3]
        if not dims:
            raise RuntimeError("no dimension of size 3 in input")
        d = dims[0]
    else:
        d = normalize_dim(dim, a.ndim)
    if a._shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {d} must have length 3. "
                           f"Got {a._shape[d]} and {b._shape[d]}")
    a0, a1, a2 = V.unbind(a, d)
    b0, b1, b2 = V.unbind(b, d)
    return stack([E.sub(E.mul(a1, b2), E.mul(a2, b1)), E.sub(E.mul(a2, b0), E.mul(a0, b2)),
                  E.sub(E.mul(a0, b1), E.mul(a1, b0))], d)


def kron(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The Kronecker product: every element of ``input`` times all of ``other``."""
    a, b = tensor_arg("kron", input), tensor_arg("kron", other)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a._shape)
    sb = (1,) * (nd - b.ndim) + tuple(b._shape)
    ea = V.reshape(a, tuple(x for n in sa for x in (n, 1)))
    eb = V.reshape(b, tuple(x for n in sb for x in (1, n)))
    return V.reshape(E.mul(ea, eb), tuple(p * q for p, q in zip(sa, sb)))


METHODS = ["matmul", "mm", "bmm", "mv", "dot", "outer", "inner", "addmm", "addmv", "baddbmm", "addbmm",
           "addr", "trace", "cross", "kron"]
