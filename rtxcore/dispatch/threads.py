"""The thread count asked for with ``rtxcore.set_num_threads``, where a backend reads it.

The core's ``rtxcore.set_num_threads`` (``rtxcore/_settings.py``) checks the
value, applies it to NumPy's BLAS pools and stores it here; a backend that
spreads work over threads of its own (``rtx_cpu``'s fused groups) reads it at
each call with :func:`requested`, or :func:`count` for the number to use.
"""

from __future__ import annotations

import os

_requested: int | None = None


def _default() -> int:
    """PyTorch's default: ``OMP_NUM_THREADS`` when it is a positive integer, else
    the CPUs this process may run on (its affinity mask, not the machine's count)."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


DEFAULT = _default()  # read once, at import (as PyTorch reads its environment at start)


def set_requested(n: int) -> None:
    """Store ``n`` (a positive int, checked by the caller) as the thread count asked for."""
    global _requested
    _requested = n


def requested() -> int | None:
    """The count last given to ``rtxcore.set_num_threads``, or None when it was never called."""
    return _requested


def count() -> int:
    """The thread count in force: :func:`requested`, else :data:`DEFAULT`."""
    return _requested or DEFAULT
