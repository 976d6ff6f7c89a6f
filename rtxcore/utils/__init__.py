"""Utilities: ``rtxcore.utils.data`` (datasets and the DataLoader)."""

from __future__ import annotations

from . import data

__all__ = ["data"]


def __getattr__(name: str) -> object:
    from .._unbuilt import UNBUILT, refuse_attribute

    if f"utils.{name}" in UNBUILT:
        raise refuse_attribute(__name__, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
