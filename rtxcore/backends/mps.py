"""``rtxcore.backends.mps``: Apple's Metal backend, which rtxcore does not have."""

from __future__ import annotations


def is_available() -> bool:
    """False: rtxcore has no MPS backend."""
    return False


def is_built() -> bool:
    """False: rtxcore has no MPS backend."""
    return False
