"""``rtxcore.backends.cudnn``: PyTorch's cuDNN switches. rtxcore does not use cuDNN
(its convolutions are im2col plus one matmul, on any backend): the flags are
stored and change nothing, and ``is_available()`` is False."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

enabled: bool = True
benchmark: bool = False
deterministic: bool = False
allow_tf32: bool = True
benchmark_limit: int = 10


def is_available() -> bool:
    """False: rtxcore never calls cuDNN."""
    return False


def version() -> None:
    """None: no cuDNN is loaded."""
    return None


@contextmanager
def flags(enabled: bool = False, benchmark: bool = False, deterministic: bool = False,
          allow_tf32: bool = True) -> Iterator[None]:
    """Set the flags inside a ``with`` block (restored after it)."""
    g = globals()
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    old = {n: g[n] for n in names}
    g.update(zip(names, (enabled, benchmark, deterministic, allow_tf32)))
    try:
        yield
    finally:
        g.update(old)
