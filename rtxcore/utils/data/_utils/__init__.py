"""Internals of ``rtxcore.utils.data``, at PyTorch's paths (``_utils.collate``)."""

from . import collate

__all__ = ["collate"]
