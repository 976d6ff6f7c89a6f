"""Whether the calling thread is being traced: the one piece of ``rtxcore.jit``'s
state that layers below it (the core, ``optim``) read. ``jit/trace.py`` sets it;
nothing here imports from above the core."""

from __future__ import annotations

import threading
from typing import Any


class _Local(threading.local):
    tracer: Any = None  # this thread's trace (a jit.trace._Tracer), if it is tracing


_tls = _Local()


def is_tracing() -> bool:
    """Whether the calling thread is being traced (by ``rtxcore.jit.trace``, or
    by the first call of a function ``rtxcore.compile`` made)."""
    return _tls.tracer is not None
