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
  same bits on any number of threads. (Fewer threads than blocks may run
  one block a thread -- and one thread NumPy's one call -- only where a
  comparison on random operands shows the very same bits.)

Where threadpoolctl can't drive NumPy's BLAS, BLAS keeps its own threads and
nothing is split here.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch.xp import _rows_merge

from . import cfused, cpool
from .fused import in_pool, split, threads

# multiply-adds: a product smaller than SPLIT_MIN is one call. A block has
# BLOCK_MIN at least (each block is a BLAS call of its own, packing its operands
# again: on one thread (128, 128) @ (128, 512) took 177 us as one call, 179 in 2
# blocks, 184 in 4, 191 in 8), rows or columns a multiple of ALIGN (OpenBLAS's
# kernels work in 16-row panels), and there are at most MAX_BLOCKS. On 2 threads
# of the C pool (``cpool``) the same product took 120 us in 2 blocks, 98 in 4;
# (64, 128) @ (128, 512), 4.2M, 95 -> 53 us in 2.
SPLIT_MIN = 1 << 21
BLOCK_MIN = 1 << 20
MAX_BLOCKS = 4
ALIGN = 16
# Without the C pool the blocks are the same (so are the bits) but run on
# ``fused.pool``'s Python threads only from PY_SPLIT_MIN: handing a block to one
# costs ~50 us on a 2-core VM ((128, 128) @ (128, 512), 8.4M, 172 us; in two
# halves on 2 threads 161-192, (1024, 128) @ (128, 384) 966 -> 595).
PY_SPLIT_MIN = 1 << 24
# a batch of small matrices is spread by whole matrices from BATCH_SPLIT_MIN
# multiply-adds in all (C_BATCH_SPLIT_MIN on the C pool): NumPy's loop makes a
# BLAS call per matrix, at a few us each (GPT's attention, 64 products (64, 32)
# @ (32, 64): 402 us on one thread, 4.2M multiply-adds)
BATCH_SPLIT_MIN = 1 << 21
C_BATCH_SPLIT_MIN = 1 << 18
# ... and of matrices of BATCH_MATRIX_MIN multiply-adds each at least: NumPy's own
# loop runs smaller ones faster than the split does on 2 threads (a small GPT's
# attention, 48 products (32, 16) @ (16, 32) of strided views: 33 us against 42 on
# the C threads; 64 of (64, 32) @ (32, 64), 131K each: 265 against 170)
BATCH_MATRIX_MIN = 1 << 16
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


@functools.lru_cache(maxsize=1024)  # (a model has a few shapes; 2.4 us -> 0.2 a call)
def blocks(m: int, k: int, n: int) -> tuple[int, list[tuple[int, int]]] | None:
    """How an (m, k) @ (k, n) product is computed, a function of its shape alone:
    (axis, ranges), blocks of the output's rows (axis 0) or columns (1, where
    there are more of them), or None: one call."""
    macs = m * k * n
    if macs < SPLIT_MIN or m < 2 or n < 2:  # (a vector's product: NumPy's gemv call)
        return None
    axis, size = (0, m) if m >= n else (1, n)
    parts = min(MAX_BLOCKS, macs // BLOCK_MIN, size // ALIGN)
    if parts < 2:
        return None
    cuts = [size * i // parts // ALIGN * ALIGN for i in range(parts)] + [size]
    return axis, [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if hi > lo]


def _spread(run: Callable[[int, int], None], units: int, parallel: bool = True) -> None:
    """``run(lo, hi)`` over range(units) in contiguous runs, one a thread."""
    split(units, run, parallel)


def _operand(x: np.ndarray, rows: int, cols: int) -> tuple[int, int] | None:
    """x's last two dims (rows, cols) as a row-major BLAS operand: (111: as it
    is, or 112: transposed; leading dimension in elements), or None (NumPy's
    matmul would copy it first)."""
    s0, s1 = x.strides[-2:]
    it = x.itemsize
    if s1 == it and s0 % it == 0 and s0 // it >= max(1, cols):
        return 111, s0 // it
    if s0 == it and s1 % it == 0 and s1 // it >= max(1, rows):
        return 112, s1 // it
    return None


def _batch_dims(shape: tuple[int, ...], *arrays: np.ndarray) -> list[tuple[int, list[int]]] | None:
    """The batch dims of ``arrays`` (all of ``shape``) merged where every array's
    strides allow: [(count, [stride of each array])], at most two, else None."""
    merged: list[tuple[int, list[int]]] = []
    for i, size in enumerate(shape):
        if size == 1:
            continue
        ss = [x.strides[i] for x in arrays]
        if merged and all(p == s * size for p, s in zip(merged[-1][1], ss)):
            merged[-1] = (merged[-1][0] * size, ss)
        else:
            merged.append((size, ss))
    return merged if len(merged) <= 2 else None


_INT32 = (1 << 31) - 1


def _c_matmul(out: np.ndarray, a: np.ndarray, b: np.ndarray, axis: int, parts: int,
              batched: bool) -> bool:
    """The product on the C pool (``cpool``): False where it can't take it (a
    dtype or layout BLAS can't read as it is: the caller runs the other path)."""
    c = cpool.gemm(out.dtype)
    if c is None or not (a.dtype == b.dtype == out.dtype) or not (
            a.flags.aligned and b.flags.aligned and out.flags.aligned):
        return False
    fn, address, ilp64 = c
    m, k = a.shape[-2:]
    n = b.shape[-1]
    la, lb, lc = _operand(a, m, k), _operand(b, k, n), _operand(out, m, n)
    if la is None or lb is None or lc is None or lc[0] != 111:
        return False
    if not ilp64 and max(m, n, k, la[1], lb[1], lc[1]) > _INT32:
        return False
    t = 1 if in_pool() else threads()
    if batched:
        dims = _batch_dims(out.shape[:-2], a, b, out)
        if dims is None:
            return False
        if len(dims) == 1:
            dims.insert(0, (1, [0, 0, 0]))
        (n0, (sa0, sb0, sc0)), (n1, (sa1, sb1, sc1)) = dims
        fn(address, ilp64, la[0], lb[0], 0, m, n, k, cfused._address(a), la[1], cfused._address(b), lb[1],
           cfused._address(out), lc[1], 0, 1, n0 * n1, n1, sa0, sa1, sb0, sb1, sc0, sc1, t)
    else:
        fn(address, ilp64, la[0], lb[0], axis, m, n, k, cfused._address(a), la[1], cfused._address(b), lb[1],
           cfused._address(out), lc[1], parts, ALIGN, 0, 0, 0, 0, 0, 0, 0, 0, t)
    return True


# On one thread a split product's blocks run one after another, each a BLAS call
# packing its operands again, and the C pool's call costs some us of Python more
# than NumPy's own: 10-15% slower than ``np.matmul`` for 2-8M multiply-adds
# ((64, 256) @ (256, 192): 75 against 66 us). Where NumPy's one call gives the
# blocks' very bits, one thread makes that call instead. BLAS's order of
# operations depends on the shapes and the operands' transpositions alone (it
# packs its operands; it never branches on values), so one comparison on random
# values settles it for every product of that shape and layout: made once each,
# up to PROBE_MAX multiply-adds (larger products keep their blocks, whose cost is
# a smaller share there). Operands on the same memory are left out: NumPy
# computes ``x @ x.T`` by another routine (syrk). With OpenBLAS here, 290 of 298
# plans tried gave equal bits; the others (K of 512 and more, narrow blocks) keep
# their blocks on one thread too.
PROBE_MAX = 1 << 26
_whole: dict[tuple[Any, ...], bool] = {}


def _one_call_is_blocks(out: np.ndarray, a: np.ndarray, b: np.ndarray, axis: int,
                        parts: int) -> bool:
    """Whether NumPy's one call computes ``a @ b`` with the bits of the C pool's
    ``parts`` blocks along ``axis`` (probed once per shape, layout and dtype)."""
    if not (a.dtype == b.dtype == out.dtype) or np.may_share_memory(a, b) or \
            not (a.flags.aligned and b.flags.aligned and out.flags.aligned):
        return False
    return _same_bits(_whole, out, a, b, axis, parts, None)


# On t threads, t blocks run faster than the plan's ``parts`` (more than t): fewer
# BLAS calls, each packing its operands once, and no thread takes more blocks than
# another (a 3-block plan on 2 threads is one block on one and two on the other).
# On 2 threads, (1024, 128) @ (128, 512).T: 719 -> 698 us; (128, 1024).T @ (1024,
# 512): 880 -> 745; (128, 1024).T @ (1024, 128): 204 -> 185; (64, 192) @ (192,
# 256).T, 3 blocks: 70 -> 52 (PyTorch: 662, 762, 182, 42). Where one comparison
# shows the plan's bits (probed as for one call: BLAS's order of operations for an
# element depends on the shapes and layouts alone), they do.
_coarse: dict[tuple[Any, ...], bool] = {}


def _coarser(out: np.ndarray, a: np.ndarray, b: np.ndarray, axis: int, parts: int,
             t: int) -> int:
    """How many blocks to run the plan's ``parts`` as on ``t`` threads (the same
    rule's cuts: ``size * i / t / ALIGN * ALIGN``): ``t`` where that gives the
    plan's bits (probed once per shape, layout, dtype and t), else ``parts``."""
    if t >= parts:
        return parts
    return t if _same_bits(_coarse, out, a, b, axis, parts, t) else parts


def _same_bits(cache: dict[tuple[Any, ...], bool], out: np.ndarray, a: np.ndarray,
               b: np.ndarray, axis: int, parts: int, other: int | None) -> bool:
    """Whether the C pool's ``parts`` blocks give the bits of ``other`` blocks
    (None: NumPy's one call): probed once per shape, layout and dtype (and
    ``other``) on random operands, kept in ``cache``; False where the C pool
    cannot read the operands as they are."""
    c = cpool.gemm(out.dtype)
    m, k = a.shape
    n = b.shape[1]
    la, lb = _operand(a, m, k), _operand(b, k, n)
    if c is None or la is None or lb is None:
        return False
    key = (out.dtype, la[0], lb[0], axis, m, n, k, parts) + (() if other is None else (other,))
    same = cache.get(key)
    if same is None:
        same = cache[key] = m * n * k <= PROBE_MAX and _probe(
            c, out.dtype, la[0], lb[0], axis, m, n, k, parts, other)
    return same


def _probe(c: tuple[Any, int, bool], dt: np.dtype, ta: int, tb: int, axis: int, m: int,
           n: int, k: int, parts: int, other: int | None = None) -> bool:
    """Whether the C pool's ``parts`` blocks give the bits of NumPy's one call
    (``other`` None) or of ``other`` blocks, on random operands."""
    fn, address, ilp64 = c
    rng = np.random.default_rng(m * 1000003 + n * 1009 + k)
    a = rng.standard_normal((m, k) if ta == 111 else (k, m)).astype(dt)
    b = rng.standard_normal((k, n) if tb == 111 else (n, k)).astype(dt)

    def blocked(p: int) -> np.ndarray:
        r = np.empty((m, n), dt)
        fn(address, ilp64, ta, tb, axis, m, n, k, cfused._address(a), a.shape[1],
           cfused._address(b), b.shape[1], cfused._address(r), n, p, ALIGN, 0, 0, 0, 0, 0,
           0, 0, 0, 1)
        return r

    want = np.matmul(a if ta == 111 else a.T, b if tb == 111 else b.T) if other is None \
        else blocked(other)
    return bool(np.array_equal(blocked(parts).view(f"u{dt.itemsize}"),
                               want.view(f"u{dt.itemsize}")))


def matmul_kernel(base: Callable[[Any, Any, Any], None]) -> Callable[[Any, Any, Any], None]:
    """rtx_cpu's matmul: ``base`` (the NumPy kernel) for small or non-BLAS
    products, else the split described in the module's docstring."""

    def matmul(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        nd = out.ndim
        if a.shape[-1] == 1 and nd >= 2 and out.dtype.kind != "c":
            # an outer product (a conv's 1x1 output, g @ w of one row): one multiply an
            # element, the product's value; NumPy's BLAS call took 2.6x as long ((2048,
            # 1) @ (1, 32): 75 against 29 us)
            np.multiply(a, b, out=out)
            return
        if nd == 2 and out.size * a.shape[1] < SPLIT_MIN:
            return base(out, a, b)  # (small: what every check below comes to)
        if not _owned or nd < 2 or a.ndim != nd or b.ndim != nd \
                or out.dtype not in _FLOATS or out.size == 0:
            return base(out, a, b)
        k = a.shape[-1]
        if nd >= 3 and not any(b.strides[:-2]) and _rows_merge(a) and _rows_merge(out):
            # (..., n, k) @ a broadcast (k, m): one 2-D product over all rows
            a, b, out = a.reshape(-1, k), b[(0,) * (nd - 2)], out.reshape(-1, out.shape[-1])
            nd = 2
        macs = out.size * k
        if nd == 2:
            plan = blocks(out.shape[0], k, out.shape[1])
        elif out.size < 2 * out.shape[-2] * out.shape[-1] or macs < C_BATCH_SPLIT_MIN \
                or min(out.shape[-2:]) < 2 or out.shape[-2] * k * out.shape[-1] < BATCH_MATRIX_MIN \
                or not (a.shape[:-2] == b.shape[:-2] == out.shape[:-2]):
            plan = None
        else:
            plan = 0, []  # whole matrices
        if plan is None or np.may_share_memory(out, a) or np.may_share_memory(out, b):
            return base(out, a, b)  # (an overlapping input: NumPy reads all of it first)
        axis, ranges = plan
        if nd == 2 and (in_pool() or threads() == 1) and \
                _one_call_is_blocks(out, a, b, axis, len(ranges)):
            return base(out, a, b)  # (one thread: NumPy's one call, the blocks' bits)
        parts = len(ranges)
        t = 1 if in_pool() else threads()
        if nd == 2 and parts > 2 and t > 1:  # (one thread: the one call above, or the plan)
            parts = _coarser(out, a, b, axis, parts, t)
        if _c_matmul(out, a, b, axis, parts, nd > 2):
            return
        if nd > 2:
            if macs < BATCH_SPLIT_MIN or out.shape[0] < 2:
                return base(out, a, b)
            ranges = [(i, i + 1) for i in range(out.shape[0])]

        def run(lo: int, hi: int) -> None:
            if nd > 2:
                base(out[lo:hi], a[lo:hi], b[lo:hi])
                return
            for r0, r1 in ranges[lo:hi]:
                if axis == 0:
                    np.matmul(a[r0:r1], b, out=out[r0:r1])
                else:
                    np.matmul(a, b[:, r0:r1], out=out[:, r0:r1])

        _spread(run, len(ranges), nd > 2 or macs >= PY_SPLIT_MIN)

    return matmul
