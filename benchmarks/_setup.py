"""What each benchmark script does before it measures: thread limits set before
NumPy and PyTorch load their pools, and PyTorch imported when it is wanted."""

from __future__ import annotations

import os
from typing import Any


def limit_threads(threads: int | None) -> None:
    """``--threads N``: BLAS/OpenMP pools of N threads (must run before NumPy loads)."""
    if threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(threads)


def import_torch(skip: bool, threads: int | None) -> Any:
    """PyTorch (set to ``threads`` when given), or None when skipped or not installed."""
    if skip:
        return None
    try:
        import torch
    except ImportError:
        return None
    if threads:
        torch.set_num_threads(threads)
    return torch
