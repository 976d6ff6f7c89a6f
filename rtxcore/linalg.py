"""``rtxcore.linalg``: PyTorch's ``torch.linalg`` norms.

``vector_norm``, ``matrix_norm`` and ``norm`` are composites of elementwise ops
and reductions, so they run on every backend and differentiate through their
decomposition. The 2-norm's square root is guarded so that its gradient at a
zero vector is zero (as PyTorch's subgradient), not NaN. Matrix norms that need
singular values (``'nuc'``, 2, -2) raise NotImplementedError: rtxcore has no SVD.
"""

from __future__ import annotations

import math
from typing import Any

from . import dtype as D
from .ops import elementwise as E
from .ops import reduction as R
from .ops import views as V
from .ops.core import bad_operand, cast
from .ops.linalg import matmul  # noqa: F401  (rtxcore.linalg.matmul, as torch.linalg.matmul)
from .shape import normalize_dim
from .tensor import Tensor

__all__ = ["norm", "vector_norm", "matrix_norm", "matmul"]


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
