"""Norms and distances: ``torch.linalg``'s ``vector_norm``, ``matrix_norm`` and
``norm`` (``rtxcore.linalg`` re-exports them), and ``dist``, ``cdist``,
``cosine_similarity`` and ``pairwise_distance``.

All are composites of elementwise ops and reductions, so they run on every
backend and differentiate through their decomposition. The 2-norm's square root
is guarded so that its gradient at a zero vector is zero (as PyTorch's
subgradient), not NaN. Matrix norms that need singular values (``'nuc'``, 2,
-2) raise NotImplementedError: rtxcore has no SVD.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtype as D
from ..shape import broadcast_many, normalize_dim
from ..tensor import Tensor
from . import elementwise as E
from . import reduction as R
from . import views as V
from .core import bad_operand, cast, mixed_devices, tensor_arg


def _prepare(name: str, x: Any, dtype: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise bad_operand(name, x)
    if x._dtype.kind != "f":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {x._dtype.name}")
    if dtype is not None:
        dt = D.as_dtype(dtype)
        if dt.kind != "f":
            raise RuntimeError(f"{name}: dtype should be floating point, but got {dt.name}")
        x = x.to(dt)  # differentiable, unlike core.cast
    return x


def _root(s: Tensor, p: float) -> Tensor:
    """``s ** (1/p)`` for a sum of powers ``s >= 0``, with a zero gradient where
    ``s`` is 0 (the norm of a zero vector)."""
    zero = E.eq(s, 0.0)
    safe = E.where(zero, 1.0, s)
    r = E.sqrt(safe) if p == 2 else E.pow(safe, 1.0 / p)
    return E.where(zero, 0.0, r)


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Tensor:
    """The ``ord``-norm of ``x`` over ``dim`` (all elements when None), as
    ``torch.linalg.vector_norm``: ord may be any real number, ``inf`` or ``-inf``."""
    x = _prepare("linalg.vector_norm", x, dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if isinstance(dim, int):
        dim = (dim,)
    p = float(ord)
    if x.numel() == 0 and (p < 0 or p == math.inf):
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty tensor "
                           "because the operation does not have an identity")
    if x._dtype is D.float16 and p not in (math.inf, -math.inf, 0):
        # powers of half overflow from 256: accumulate in float32, as PyTorch
        return vector_norm(x.to(D.float32), ord, dim, keepdim).to(D.float16)  # differentiable
    a = E.abs(x)
    if p == math.inf:
        return R.amax(a, dim, keepdim)
    if p == -math.inf:
        return R.amin(a, dim, keepdim)
    if p == 0:
        return R.sum(cast(E.ne(x, 0.0), x._dtype), dim, keepdim)
    if p == 1:
        return R.sum(a, dim, keepdim)
    if p == 2:
        return _root(R.sum(E.mul(x, x), dim, keepdim), 2)
    return _root(R.sum(E.pow(a, p), dim, keepdim), p)


def _not_svd(ord: Any) -> NotImplementedError:  # noqa: A002
    return NotImplementedError(
        f"linalg.matrix_norm: ord={ord!r} needs singular values, and rtxcore has no SVD yet; "
        "use ord='fro', 1, -1, inf or -inf"
    )


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,  # noqa: A002, N803
                dtype: Any = None) -> Tensor:
    """The ``ord``-norm of the matrices of ``A`` over the two dims ``dim``:
    'fro', 1 / -1 (max / min column sum of |A|), inf / -inf (row sums)."""
    A = _prepare("linalg.matrix_norm", A, dtype)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 dimensions, got {A.ndim}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = normalize_dim(dim[0], A.ndim), normalize_dim(dim[1], A.ndim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        raise _not_svd(ord)
    if isinstance(ord, str) or ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    a = E.abs(A)
    # 1 / -1: sum down each column (over d0), then max / min over the columns (d1)
    inner, outer = (d0, d1) if ord in (1, -1) else (d1, d0)
    s = R.sum(a, inner, True)
    r = R.amax(s, outer, True) if ord > 0 else R.amin(s, outer, True)
    return r if keepdim else V.squeeze(V.squeeze(r, max(d0, d1)), min(d0, d1))


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002, N803
         dtype: Any = None) -> Tensor:
    """``torch.linalg.norm``: a vector norm when ``dim`` is an int (or ``A`` is
    1-D), a matrix norm when ``dim`` is a pair (or ``A`` is 2-D and ``ord`` is
    given); with neither, the 2-norm of all elements."""
    if not isinstance(A, Tensor):
        raise bad_operand("linalg.norm", A)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) == 1:
            return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
        if len(dim) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:  # noqa: A002
    """The p-norm of ``input - other``."""
    d = E.sub(tensor_arg("dist", input), tensor_arg("dist", other))
    return R.norm(V.reshape(d, (-1,)), p)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between each row of ``x1`` (..., P, M) and each row of
    ``x2`` (..., R, M): a (..., P, R) tensor. Computed on the differences (exact
    at zero distance, with a zero gradient there as in PyTorch)."""
    for v in (x1, x2):
        if not isinstance(v, Tensor):
            raise bad_operand("cdist", v)
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1._shape[-1] != x2._shape[-1]:
        raise RuntimeError(f"cdist: X1 and X2 must have the same number of columns. "
                           f"X1: {x1._shape[-1]} X2: {x2._shape[-1]}")
    if x1._dtype.kind != "f" or x2._dtype.kind != "f":
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1._dtype.name}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1._device is not x2._device:
        raise mixed_devices("cdist", x1, x2)
    broadcast_many(x1._shape[:-2], x2._shape[:-2])
    diff = E.sub(V.unsqueeze(x1, -2), V.unsqueeze(x2, -3))
    return vector_norm(diff, p, -1)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcast),
    each norm clamped to at least ``eps``, as PyTorch computes it."""
    a, b = V.broadcast_tensors(tensor_arg("cosine_similarity", x1), tensor_arg("cosine_similarity", x2))
    a, b = E._float(a), E._float(b)
    na = E.clamp(R.norm(a, 2, dim, True), min=float(eps))
    nb = E.clamp(R.norm(b, 2, dim, True), min=float(eps))
    return R.sum(E.mul(E.div(a, na), E.div(b, nb)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of ``x1 - x2 + eps`` along the last dim."""
    d = E.add(E.sub(tensor_arg("pairwise_distance", x1), tensor_arg("pairwise_distance", x2)), float(eps))
    return R.norm(d, p, -1 if d.ndim else None, keepdim)


METHODS = ["dist"]
