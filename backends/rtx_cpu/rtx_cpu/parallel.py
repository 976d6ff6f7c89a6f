"""Large elementwise and reduction kernels split over the cpu backend's threads.

One NumPy call over a large array runs on one core. NumPy lets go of the GIL
inside a ufunc's loop, so the same call over parts of ``out`` from several
threads runs on several cores. The threads are ``fused``'s pool (the backend
has one, shared with fused groups and ``layer_norm``), their number
``fused.threads()``: ``rtxcore.set_num_threads``' value, else the cores this
process may use (``OMP_NUM_THREADS`` when set, as in PyTorch). A call from one
of the pool's own threads never splits (it would wait on its own pool).

The result is the same bits for every thread count:

- elementwise: each element of ``out`` is computed by the same ufunc loop from
  the same inputs, whatever part it falls in (NumPy's loops give an element the
  same bits wherever it sits in a loop: ``tests/test_cpu_threads.py`` checks
  every kernel split here at several part boundaries). Parts are flat runs of
  whole blocks where every array is C-contiguous, else runs of two rows or more
  (the first two dims taken as one where the first is short and every array
  allows it without a copy), so a part is contiguous exactly where the whole
  is, and a kernel that picks its method by layout or size (``where``,
  ``maximum`` against a scalar) picks the same one for every part. An input
  that overlaps ``out`` other than exactly (in place) keeps the single call:
  NumPy reads it before writing.
- reductions over some axes: split along an axis that is not reduced, so every
  output element is reduced by the very loop the single call runs.
- a float sum of everything over one run of memory (contiguous, or 1-D): NumPy
  sums such a run pairwise, halving at multiples of 8 down to 128 elements. The
  top of that tree is taken here, down to leaves of at most ``LEAF`` elements
  (fixed by the length alone), the leaves summed on the threads and combined as
  NumPy combines them: the single call's bits, on any number of threads.
  Integer sums take the same leaves (exact in any order).
- max/min of everything over one run: the same leaves and tree (max and min are
  exact; only which of +0.0/-0.0, or which NaN's payload, comes out may differ
  from NumPy's own single call, and never between thread counts).
- a product of everything (NumPy multiplies in sequence), a float16 sum of
  everything (NumPy sums in float32 through 8192-element buffers) and a
  reduction of everything over a non-contiguous array of 2 dims or more stay
  one call.
"""

from __future__ import annotations

import contextvars
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch.xp import _BRANCHLESS_MIN, _FOLD_MAX, _FOLD_MIN_OUT

from .fused import in_pool, pool, threads

# Elements per part at least: a smaller ``out`` (or reduced input) runs as one call.
# Handing a part to a worker and waiting for it costs 20-50 us on this machine (2
# cores of a VM, shared: the other core is woken, and Python's pool threads don't
# spin as OpenMP's do), so a split pays only from about a millisecond of work. One
# call vs two halves on 2 busy cores (medians of 21 interleaved rounds): float32
# add 1M 159 -> 213 us, 4M 1639 -> 1747, 16M 6650 -> 6535; exp 1M 500 -> 563 us,
# 4M 2376 -> 1639, 16M 9819 -> 6643; sum over rows 4M 702 -> 480 us; on a quieter
# moment add 2M 984 -> 572 us, exp 1M 492 -> 391 us.
PART_MIN = 1 << 21  # memory-bound kernels (add, mul, copy, compare, where, sums)
PART_MIN_MATH = 1 << 20  # kernels of ~0.5 ns an element or more (exp, log, tanh, sin)
_ALIGN = 1024  # elements: flat parts start at multiples (whole cache lines, no sharing)
LEAF = 1 << 20  # elements: the most in one leaf of a sum of everything (a leaf's
# reduce call costs ~5 us: 16M elements in leaves of 128K took 1.3x the single call)


def _parts(size: int, part_min: int) -> int:
    """How many parts a call over ``size`` elements takes: 1 when small, on one
    thread, or from one of the pool's threads."""
    n = min(threads(), size // part_min)
    if n <= 1 or in_pool():
        return 1
    return n


def _run(fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> None:
    """``fn(*args)`` for each args in calls: the first on this thread, the rest on
    the pool; returns when all are done (and raises what any raised)."""
    # each in a copy of this thread's context: NumPy's error state (np.errstate) is
    # a context variable, and a part must warn or raise as the single call would
    futures = [pool().submit(contextvars.copy_context().run, fn, *args) for args in calls[1:]]
    try:
        fn(*calls[0])
    finally:
        for f in futures:
            f.result()


def _bounds(n: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``parts`` runs covering range(n), as even as whole multiples of ``align`` allow."""
    cuts = [n * i // parts // align * align for i in range(parts)] + [n]
    return [(lo, hi) for lo, hi in zip(cuts, cuts[1:]) if hi > lo]


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.strides == b.strides and a.shape == b.shape)


# -- elementwise ---------------------------------------------------------------------


def elementwise(kernel: Callable[..., None], out: np.ndarray, args: tuple[Any, ...],
                part_min: int = PART_MIN) -> None:
    """``kernel(out, *args)`` (arrays broadcast to ``out``'s shape, or scalars),
    over parts of ``out`` on the threads when it is large, else one call."""
    n = _parts(out.size, part_min)
    calls = _elementwise_parts(out, args, n) if n > 1 else None
    if calls is None:
        kernel(out, *args)
    else:
        _run(kernel, calls)


def _elementwise_parts(out: np.ndarray, args: tuple[Any, ...],
                       n: int) -> list[tuple[Any, ...]] | None:
    """Each part's (out, *args), or None where out can't be split safely."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    for a in arrays:
        if a is not out and np.may_share_memory(a, out) and not _same_view(a, out):
            return None  # partly overlapping: the single call reads before it writes
    shape = out.shape
    if out.flags.c_contiguous and all(a.shape == shape and a.flags.c_contiguous
                                      for a in arrays):
        o = out.reshape(-1)
        flat = [a.reshape(-1) if isinstance(a, np.ndarray) else a for a in args]
        return [(o[lo:hi], *(a[lo:hi] if isinstance(a, np.ndarray) else a for a in flat))
                for lo, hi in _bounds(o.size, n, _ALIGN)]
    if not shape:
        return None
    full = [a if not isinstance(a, np.ndarray) or a.shape == shape
            else np.broadcast_to(a, shape) for a in args]
    while len(shape) > 1 and shape[0] < 4 * n:  # (2, T, C): rows of (2 * T, C)
        merged = [_merge_lead(a) if isinstance(a, np.ndarray) else a for a in (out, *full)]
        if any(m is None for m in merged):
            break
        out, *full = merged
        shape = out.shape
    n = min(n, shape[0] // 2)  # parts of two rows at least (see the module's docstring)
    if n <= 1:
        return None
    return [(out[lo:hi], *(a[lo:hi] if isinstance(a, np.ndarray) else a for a in full))
            for lo, hi in _bounds(shape[0], n)]


def _merge_lead(a: np.ndarray) -> np.ndarray | None:
    """A view of ``a`` with its first two dims as one, or None where that needs a copy."""
    (n0, n1), (s0, s1) = a.shape[:2], a.strides[:2]
    if n0 != 1 and n1 != 1 and s0 != s1 * n1:
        return None
    step = s1 if n0 == 1 or n1 != 1 else s0
    return np.lib.stride_tricks.as_strided(a, (n0 * n1, *a.shape[2:]), (step, *a.strides[2:]))


def unary(base: Any, part_min: int = PART_MIN) -> Callable[[np.ndarray, Any], None]:
    """A ufunc kernel (``base.ufunc``, as ``rtxcore.dispatch.xp`` makes them) that
    splits when large; small calls cost what they did (one call of the ufunc)."""
    f = base.ufunc

    least = 2 * part_min

    def kernel(out: np.ndarray, x: Any) -> None:
        if out.size < least:
            f(x, out=out)
        else:
            elementwise(base, out, (x,), part_min)

    kernel.ufunc = f  # type: ignore[attr-defined]  # fused groups call it directly
    return kernel


def binary(base: Any, part_min: int = PART_MIN) -> Callable[[np.ndarray, Any, Any], None]:
    """``unary``'s twin for a binary ufunc kernel."""
    f = base.ufunc

    least = 2 * part_min

    def kernel(out: np.ndarray, x: Any, y: Any) -> None:
        if out.size < least:
            f(x, y, out=out)
        else:
            elementwise(base, out, (x, y), part_min)

    kernel.ufunc = f  # type: ignore[attr-defined]
    return kernel


def wrap(base: Callable[..., None], arity: int,
         part_min: int = PART_MIN) -> Callable[..., None]:
    """An elementwise kernel ``base(out, *args)`` of ``arity`` args that splits
    when large (one call more than ``base`` when small, no ``*args``). Its parts
    are never smaller than the size at which ``rtxcore.dispatch.xp``'s kernels
    change method (``where``, ``maximum`` against a scalar, whose argument order
    decides which of +0.0/-0.0 it returns), so each part takes the whole's."""
    part_min = max(part_min, _BRANCHLESS_MIN)
    least = 2 * part_min
    if arity == 2:
        def kernel(out: np.ndarray, x: Any, y: Any) -> None:
            if out.size < least:
                base(out, x, y)
            else:
                elementwise(base, out, (x, y), part_min)
    elif arity == 3:
        def kernel(out: np.ndarray, c: Any, x: Any, y: Any) -> None:  # type: ignore[misc]
            if out.size < least:
                base(out, c, x, y)
            else:
                elementwise(base, out, (c, x, y), part_min)
    else:
        raise ValueError(f"wrap: arity {arity} (2 or 3)")
    return kernel


def copy_kernel(casting: str | None, part_min: int = PART_MIN) -> Callable[..., None]:
    """``copy`` (casting None: NumPy's default, same kind) or ``cast`` ("unsafe"):
    ``np.copyto`` into out, split when large."""
    least = 2 * part_min
    copyto = np.copyto
    if casting is None:
        def kernel(out: np.ndarray, x: Any) -> None:
            if out.size < least:
                copyto(out, x)
            else:
                elementwise(_copy_part, out, (x,), part_min)
    else:
        def kernel(out: np.ndarray, x: Any) -> None:  # type: ignore[misc]
            if out.size < least:
                copyto(out, x, casting=casting)
            else:
                elementwise(_cast_part, out, (x,), part_min)
    return kernel


def _copy_part(out: np.ndarray, x: Any) -> None:
    np.copyto(out, x)


def _cast_part(out: np.ndarray, x: Any) -> None:
    np.copyto(out, x, casting="unsafe")


# -- reductions ----------------------------------------------------------------------

_SUM_INIT = np.add.reduce(np.full(16, -0.0))  # NumPy's start value for a sum: +0.0 here
_TREE_SUM = frozenset(np.dtype(t) for t in (np.float32, np.float64))


Reduce = Callable[[np.ndarray, np.ndarray, tuple[int, ...]], None]


def reduction(ufunc: Any, base: Reduce, part_min: int = PART_MIN) -> Reduce:
    """The reduction kernel ``base(out, x, axes)`` (out keeps the reduced dims as
    1s) of ``ufunc``, split over the threads when x is large (see the docstring)."""
    least = 2 * part_min

    def kernel(out: np.ndarray, x: np.ndarray, axes: tuple[int, ...]) -> None:
        if x.size < least:
            base(out, x, axes)
        else:
            _reduce(ufunc, base, out, x, axes, part_min)

    return kernel


def _reduce(ufunc: Any, base: Callable[..., None], out: np.ndarray, x: np.ndarray,
            axes: tuple[int, ...], part_min: int) -> None:
    n = _parts(x.size, part_min)
    if n <= 1:
        base(out, x, axes)
        return
    kept = [d for d in range(x.ndim) if d not in axes and x.shape[d] >= 2]
    if kept:
        _reduce_split(base, out, x, axes, kept, n)
    elif not _reduce_tree(ufunc, out, x, n):
        base(out, x, axes)


def _reduce_split(base: Callable[..., None], out: np.ndarray, x: np.ndarray,
                  axes: tuple[int, ...], kept: list[int], n: int) -> None:
    """Parts along a kept axis: the first long enough for every thread, else the longest."""
    d = next((d for d in kept if x.shape[d] >= 2 * n), None)
    if d is None:
        d = max(kept, key=lambda e: x.shape[e])
    n = min(n, x.shape[d] // 2)
    # base folds a few elements per output as slices when out has _FOLD_MIN_OUT
    # elements or more: every part must then have as many, to fold as the whole does
    size = 1
    for a in axes:
        size *= x.shape[a]
    if axes and size <= _FOLD_MAX and out.size >= _FOLD_MIN_OUT:
        n = min(n, out.size // (2 * _FOLD_MIN_OUT))  # (a part: half its even share at least)
    if n <= 1:
        base(out, x, axes)
        return
    lead = (slice(None),) * d
    _run(base, [(out[lead + (slice(lo, hi),)], x[lead + (slice(lo, hi),)], axes)
                for lo, hi in _bounds(x.shape[d], n)])


def _reduce_tree(ufunc: Any, out: np.ndarray, x: np.ndarray, n: int) -> bool:
    """A reduction of everything as NumPy's pairwise tree (see the docstring);
    False where it isn't one (the caller runs the single call)."""
    if ufunc is np.add:
        if x.dtype not in _TREE_SUM and x.dtype.kind not in "iu":
            return False
    elif ufunc not in (np.maximum, np.minimum) or x.dtype.kind not in "fiu" \
            or x.dtype == np.float16:
        return False
    if x.flags.c_contiguous:
        flat = x.reshape(-1)
    else:
        flat = x.reshape(-1) if x.ndim == 1 else x.squeeze() if x.size == max(x.shape) else None
        if flat is None or flat.ndim != 1:
            return False
    leaves: list[tuple[int, int]] = []
    _leaves(0, flat.size, leaves)
    if len(leaves) < 2:
        return False
    vals = np.empty(len(leaves), flat.dtype)
    ident = x.dtype.type(-0.0) if ufunc is np.add and x.dtype.kind == "f" else None

    def run(k0: int, k1: int) -> None:
        for k in range(k0, k1):
            lo, hi = leaves[k]
            if ident is not None:  # the pairwise sum alone: -0.0 + s is s, bit for bit
                vals[k] = ufunc.reduce(flat[lo:hi], initial=ident)
            else:
                vals[k] = ufunc.reduce(flat[lo:hi])

    _run(run, _bounds(len(leaves), min(n, len(leaves))))
    root, _ = _combine(ufunc, vals, 0, flat.size, 0)
    if ufunc is np.add and x.dtype.kind == "f":
        root = ufunc(x.dtype.type(_SUM_INIT), root)  # the single call's start value
    out[...] = root
    return True


def _leaves(lo: int, hi: int, acc: list[tuple[int, int]]) -> None:
    """NumPy's pairwise halving of [lo, hi) (the halves split at a multiple of 8)
    down to runs of at most LEAF elements, appended in order."""
    n = hi - lo
    if n <= LEAF:
        acc.append((lo, hi))
        return
    n2 = n // 2
    n2 -= n2 % 8
    _leaves(lo, lo + n2, acc)
    _leaves(lo + n2, hi, acc)


def _combine(ufunc: Any, vals: np.ndarray, lo: int, hi: int, k: int) -> tuple[Any, int]:
    """(the value of [lo, hi) from its leaves' values starting at vals[k], the next k):
    the halves as ``_leaves`` made them, left op right."""
    n = hi - lo
    if n <= LEAF:
        return vals[k], k + 1
    n2 = n // 2
    n2 -= n2 % 8
    left, k = _combine(ufunc, vals, lo, lo + n2, k)
    right, k = _combine(ufunc, vals, lo + n2, hi, k)
    return ufunc(left, right), k
