"""Utilities: ``rtxcore.utils.data`` (datasets and the DataLoader)."""

from __future__ import annotations

from . import data

__all__ = ["data"]
