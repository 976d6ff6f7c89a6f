"""A small caching allocator for large buffers.

A fresh large ``np.empty`` is new memory from the OS, and its first write pays a
page fault per page: NumPy's allocating 16M-float add takes about 1.5x the time
of the same add into an existing buffer. Buffers of ``POOL_MIN_BYTES`` or more are
therefore kept when the last array using them dies and handed out again for the
next request of the same size, as PyTorch's caching allocators do.

Smaller buffers go straight to NumPy. glibc's malloc already reuses freed blocks
below its mmap threshold, which grows up to 32 MiB, so there the pool only added
its bookkeeping (measured: 1.06-1.19x NumPy's time from 1 to 16 MiB with the pool,
0.56-0.71x at 32 and 64 MiB).

How "the last array" is known: the memory is exposed through a ``_Block`` (via
``__array_interface__``), which NumPy records as the base of every array and
view made from it, however derived. The block dies, and its ``__del__`` returns
the memory, only when nothing can reach that memory any more.

Below the pool, glibc's malloc: its dynamic mmap threshold sends a buffer of a
few MB to a fresh mmap (then reuses it from the heap once freed), and it gives
the heap's free top back to the OS past 2x that threshold. A training step that
frees and makes the same few-MB activations, im2col matrices and gradients
every step then pays page faults for most of them, every step: ~4,000 a step in
a small conv net (superres, batch 16), 67 ms a step against 46-53 ms with none.
On a virtual machine whose host backs guest memory lazily a fault costs far
more than on bare metal (a first touch of 38 MB: ~270 ms here, 3.4 ms after).
So on glibc the backend fixes the mmap threshold at 32 MB (the pool's floor:
below it the heap, reused; from it the pool) and keeps up to ``TRIM_BYTES`` of
free heap top instead of returning it at once (``tune_malloc``; PyTorch users
get the same from jemalloc or tcmalloc). Not done where the user has set
glibc's own ``MALLOC_*_`` variables or ``GLIBC_TUNABLES``, nor with
``RTX_CPU_POOL=0``.

``empty_cache()`` returns the kept buffers, and the heap's free memory
(``malloc_trim``), to the OS; ``RTX_CPU_POOL=0`` turns the pool and the malloc
settings off; at most ``POOL_MAX_BYTES`` are kept.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Any

import numpy as np

POOL_MIN_BYTES = 32 * 1024 * 1024
POOL_MAX_BYTES = 512 * 1024 * 1024

TRIM_BYTES = 128 * 1024 * 1024

_enabled = os.environ.get("RTX_CPU_POOL", "1") not in ("0", "false", "off")
_lock = threading.Lock()
_free: dict[int, list[np.ndarray]] = {}
_kept = 0
stats = {"hits": 0, "misses": 0}


def _release(raw: np.ndarray) -> None:
    global _kept
    with _lock:
        lst = _free.setdefault(raw.nbytes, [])
        if _kept + raw.nbytes <= POOL_MAX_BYTES and len(lst) < 8:
            lst.append(raw)
            _kept += raw.nbytes


class _Block:
    """Owner of one pooled buffer, seen by NumPy as the base of its arrays."""

    __slots__ = ("mem", "__array_interface__")

    def __init__(self, mem: np.ndarray, shape: tuple[int, ...], dt: np.dtype) -> None:
        self.mem = mem
        self.__array_interface__ = {"data": (mem.ctypes.data, False), "shape": shape,
                                    "typestr": dt.str, "version": 3}

    def __del__(self) -> None:
        if _release is not None:  # None during interpreter shutdown
            _release(self.mem)


def empty(shape: tuple[int, ...], np_dtype: Any) -> np.ndarray:
    """A C-contiguous array of ``shape``; large ones come from the pool."""
    dt = np.dtype(np_dtype)
    n = 1
    for s in shape:
        n *= s
    nbytes = n * dt.itemsize
    if nbytes < POOL_MIN_BYTES or not _enabled:
        return np.empty(shape, dt)
    global _kept
    with _lock:
        lst = _free.get(nbytes)
        raw = lst.pop() if lst else None
        if raw is not None:
            _kept -= nbytes
    if raw is None:
        stats["misses"] += 1
        raw = np.empty(nbytes, np.uint8)
    else:
        stats["hits"] += 1
    return np.asarray(_Block(raw, tuple(shape), dt))


def empty_cache() -> int:
    """Drop every kept buffer and give the heap's free memory back to the OS;
    returns how many bytes of kept buffers were released."""
    global _kept
    with _lock:
        freed = _kept
        _free.clear()
        _kept = 0
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
    return freed


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_libc: list[Any] = []


def _glibc() -> Any:
    """This process's C library when it is glibc (mallopt and malloc_trim), else None."""
    if not _libc:
        lib = None
        if sys.platform.startswith("linux"):
            try:
                c = ctypes.CDLL(None)
                if hasattr(c, "gnu_get_libc_version") and hasattr(c, "mallopt"):
                    c.mallopt.argtypes, c.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
                    c.malloc_trim.argtypes, c.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
                    lib = c
            except OSError:
                pass
        _libc.append(lib)
    return _libc[0]


def _user_set_malloc() -> bool:
    return "GLIBC_TUNABLES" in os.environ or any(
        k.startswith("MALLOC_") and k.endswith("_") for k in os.environ)


malloc_tuned = False


def tune_malloc() -> bool:
    """Fix glibc's mmap threshold at ``POOL_MIN_BYTES`` and its trim threshold at
    ``TRIM_BYTES`` (see the module's docstring); True when done. Once per process."""
    global malloc_tuned
    if malloc_tuned or not _enabled or _user_set_malloc():
        return malloc_tuned
    libc = _glibc()
    if libc is not None:
        malloc_tuned = bool(libc.mallopt(_M_MMAP_THRESHOLD, POOL_MIN_BYTES)) and \
            bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES))
    return malloc_tuned


def kept_bytes() -> int:
    return _kept
