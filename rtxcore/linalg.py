"""``rtxcore.linalg``: PyTorch's ``torch.linalg`` norms and ``matmul``.

``vector_norm``, ``matrix_norm`` and ``norm`` are composites of elementwise ops
and reductions (rtxcore/ops/norms.py), so they run on every backend and
differentiate through their decomposition. The 2-norm's square root is guarded
so that its gradient at a zero vector is zero (as PyTorch's subgradient), not
NaN. Matrix norms that need singular values (``'nuc'``, 2, -2) raise
NotImplementedError: rtxcore has no SVD.
"""

from __future__ import annotations

from .ops.linalg import matmul  # noqa: F401  (rtxcore.linalg.matmul, as torch.linalg.matmul)
from .ops.norms import matrix_norm, norm, vector_norm  # noqa: F401

__all__ = ["norm", "vector_norm", "matrix_norm", "matmul"]
