"""The thread count asked for with ``rtxcore.set_num_threads``, where a backend reads it.

The core's ``rtxcore.set_num_threads`` (``rtxcore/_settings.py``) checks the
value, applies it to NumPy's BLAS pools and stores it here; a backend that
spreads work over threads of its own (``rtx_cpu``'s fused groups) reads it at
each call with :func:`requested`.
"""

from __future__ import annotations

_requested: int | None = None


def set_requested(n: int) -> None:
    """Store ``n`` (a positive int, checked by the caller) as the thread count asked for."""
    global _requested
    _requested = n


def requested() -> int | None:
    """The count last given to ``rtxcore.set_num_threads``, or None when it was never called."""
    return _requested
