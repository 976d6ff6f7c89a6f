"""``rtxcore.distributed``: not built yet. Scripts that ask first get truthful
answers (``is_available()`` and ``is_initialized()`` are False, as in a PyTorch
built without distributed support); anything else says it is not built yet."""

from __future__ import annotations

from typing import Any

from ._unbuilt import refuse_attribute


def is_available() -> bool:
    """False: rtxcore has no distributed backend yet."""
    return False


def is_initialized() -> bool:
    """False: no process group can exist."""
    return False


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise refuse_attribute("rtxcore", "distributed") from None
