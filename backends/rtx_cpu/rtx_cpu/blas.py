"""NumPy's BLAS kept to one thread, and large products split over the backend's own.

The backend has one pool of threads (``fused.pool``) for everything it runs in
parallel: elementwise parts, reductions, fused groups, the C conv kernels. A
threaded BLAS would be a second owner of the same cores: after each threaded
call OpenBLAS's workers spin for a while (about 0.1 s) waiting for the next, so
whatever the pool runs meanwhile shares a core with a spinning thread. In a
small conv net (superres, batch 16, 2 cores) that made the second core worth
nothing: 2x the CPU time of one thread for the same step time; with BLAS kept
to one thread and the products split here, the step took 46-53 ms instead of
77-98 ms. (PyTorch has the same single owner: its OpenMP pool runs BLAS too.)

So at import the backend sets NumPy's BLAS to one thread (through
``threadpoolctl``; other libraries' BLAS, such as PyTorch's, are left alone),
and ``matmul`` splits a large product over ``fused.threads()`` threads itself:

- a batch of matrices (``(..., n, k) @ (..., k, m)``) by whole matrices: each
  is the very BLAS call NumPy's loop over the batch makes;
- one product by blocks of the output's rows (or columns, where there are
  more), each block one BLAS call. BLAS picks its kernels by size, so a
  block's elements can differ in the last bits from the same elements of one
  whole call; the blocks are therefore chosen from the shape alone (never from
  the thread count) and the same blocks run on one thread as on eight: the
  same bits on any number of threads.

Where threadpoolctl can't drive NumPy's BLAS, BLAS keeps its own threads and
nothing is split here.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rtxcore.dispatch.xp import _rows_merge

from .fused import split

# multiply-adds: a product smaller than SPLIT_MIN is one call (handing half to a
# worker and waiting for it costs ~50 us on this 2-core VM; a float32 product
# runs ~48 multiply-adds a ns on one thread: (128, 128) @ (128, 512), 8.4M, 172
# us; in two halves on 2 threads 161-192, (256, 128) @ (128, 512) 330 -> 243-272,
# (1024, 128) @ (128, 384) 966 -> 595); a block has BLOCK_MIN at least (each
# block is a BLAS call of its own, packing its operands again: blocks small
# enough to be inefficient would cost one thread time), rows or columns a
# multiple of ALIGN, and there are at most MAX_BLOCKS
SPLIT_MIN = 1 << 24
BLOCK_MIN = 1 << 23
MAX_BLOCKS = 4
ALIGN = 64
# a batch of small matrices splits from fewer: NumPy's loop makes a BLAS call
# per matrix, at a few us each (GPT's attention, 64 products (64, 32) @ (32, 64):
# 402 us on one thread, 4.2M multiply-adds)
BATCH_SPLIT_MIN = 1 << 21
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
           np.dtype(np.complex128))

_owned: bool | None = None  # None: not tried yet


def own() -> bool:
    """Set NumPy's BLAS to one thread, once; True where threadpoolctl could."""
    global _owned
    if _owned is None:
        try:
            from threadpoolctl import ThreadpoolController

            libs = [c for c in ThreadpoolController().select(user_api="blas").lib_controllers
                    if "numpy" in (c.filepath or "")]
            for c in libs:
                c.set_num_threads(1)
            _owned = bool(libs)
        except Exception:  # not installed, or a BLAS it can't drive
            _owned = False
    return _owned


def owned() -> bool:
    """Whether the backend's threads (not BLAS's) run its large products."""
    return bool(_owned)


def blocks(m: int, k: int, n: int) -> tuple[int, list[tuple[int, int]]] | None:
    """How an (m, k) @ (k, n) product is computed, a function of its shape alone:
    (axis, ranges), blocks of the output's rows (axis 0) or columns (1, where
    there are more of them), or None: one call."""
    macs = m * k * n
    if macs < SPLIT_MIN:
        return None
    axis, size = (0, m) if m >= n else (1, n)
    parts = min(MAX_BLOCKS, macs // BLOCK_MIN, size // ALIGN)
    if parts < 2:
        return None
    cuts = [size * i // parts // ALIGN * ALIGN for i in range(parts)] + [size]
    return axis, [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if hi > lo]


def _spread(run: Callable[[int, int], None], units: int) -> None:
    """``run(lo, hi)`` over range(units) in contiguous runs, one a thread."""
    split(units, run, True)


def matmul_kernel(base: Callable[[Any, Any, Any], None]) -> Callable[[Any, Any, Any], None]:
    """rtx_cpu's matmul: ``base`` (the NumPy kernel) for small or non-BLAS
    products, else the split described in the module's docstring."""

    def matmul(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        nd = out.ndim
        if not _owned or nd < 2 or a.ndim != nd or b.ndim != nd \
                or out.dtype not in _FLOATS or out.size == 0:
            return base(out, a, b)
        k = a.shape[-1]
        if nd >= 3 and not any(b.strides[:-2]) and _rows_merge(a) and _rows_merge(out):
            # (..., n, k) @ a broadcast (k, m): one 2-D product over all rows
            a, b, out = a.reshape(-1, k), b[(0,) * (nd - 2)], out.reshape(-1, out.shape[-1])
            nd = 2
        if nd == 2:
            plan = blocks(out.shape[0], k, out.shape[1])
        elif out.shape[0] < 2 or out.size * k < BATCH_SPLIT_MIN or not (
                a.shape[:-2] == b.shape[:-2] == out.shape[:-2]):
            plan = None
        else:
            plan = 0, [(i, i + 1) for i in range(out.shape[0])]  # whole matrices
        if plan is None or np.may_share_memory(out, a) or np.may_share_memory(out, b):
            return base(out, a, b)  # (an overlapping input: NumPy reads all of it first)
        axis, ranges = plan

        def run(lo: int, hi: int) -> None:
            if nd > 2:
                base(out[lo:hi], a[lo:hi], b[lo:hi])
                return
            for r0, r1 in ranges[lo:hi]:
                if axis == 0:
                    np.matmul(a[r0:r1], b, out=out[r0:r1])
                else:
                    np.matmul(a, b[:, r0:r1], out=out[:, r0:r1])

        _spread(run, len(ranges))

    return matmul
