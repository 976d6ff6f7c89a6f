"""``rtxcore.backends.opt_einsum``: PyTorch's einsum contraction-order switches.
rtxcore's ``einsum`` takes two operands at most and never calls the
opt_einsum package, so ``is_available()`` is False and ``enabled`` / ``strategy``
are stored and change nothing."""

from __future__ import annotations

from typing import Any

enabled: bool = True
strategy: str = "auto"


def is_available() -> bool:
    """False: rtxcore's einsum does not use opt_einsum."""
    return False


def get_opt_einsum() -> Any:
    """None: rtxcore does not load opt_einsum."""
    return None
