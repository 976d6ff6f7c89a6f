"""What a backend plugin imports: the hook marker, kernel-facing types, op names.

    from rtxcore.dispatch import hookimpl, Backend, View, ops

pluggy itself is imported only when a plugin or the registry first needs it, so
``import rtxcore`` stays cheap.
"""

from __future__ import annotations

from typing import Any, Callable

from . import ops
from .backend import Backend, BackendPlugin, Out, backend_hooks, functional, optional_import
from .types import DType, OutOfMemoryError, View, contiguous_strides

# Called after every table rebuild (the core uses it to drop per-device caches).
_listeners: list[Callable[[], None]] = []

__all__ = ["hookimpl", "Backend", "BackendPlugin", "DType", "Out", "OutOfMemoryError", "View",
           "backend_hooks", "contiguous_strides", "functional", "ops", "optional_import"]


def __getattr__(name: str) -> Any:
    if name == "hookimpl":
        from .backend import hookimpl_marker

        marker = hookimpl_marker()
        globals()["hookimpl"] = marker
        return marker
    raise AttributeError(f"module 'rtxcore.dispatch' has no attribute {name!r}")
