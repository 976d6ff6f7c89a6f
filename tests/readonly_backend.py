"""A backend on immutable arrays, built as docs/authoring-backends.md section 4b
describes: NumPy arrays marked read-only stand for a library whose arrays can't
be written (JAX's, XLA's).

- A buffer is a mutable ``Holder`` around an immutable flat array; kernels get
  the core's generic ``View`` objects (the backend keeps the default ``view()``).
- A destination kernel computes a new array, then *replaces* the holder's array
  by a copy with the out region set (copy-on-write): three library calls.
- ``ro``: destination kernels only. ``rof``: the same, plus functional forms
  (``rtxcore.dispatch.functional``) of the elementwise, reduction, where, cast
  and matmul kernels: one library call each where the result is a fresh tensor.
- ``Backend.release`` counts dead buffers (``RELEASED``).

``LIBRARY_CALLS`` counts calls into the array library, by kind: ``compute``
(the op itself), ``copy`` (copying a holder's array to write into it) and
``assign`` (writing the region), which is what a functional kernel saves.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rtxcore.dispatch import (Backend, BackendPlugin, View, contiguous_strides, functional,
                              ops)
from rtxcore.dispatch.xp import kernels as xp_kernels

LIBRARY_CALLS: Counter[str] = Counter()
RELEASED: Counter[str] = Counter()
_NUMPY = xp_kernels(np)


class Holder:
    """A buffer: the one mutable thing, around an immutable flat array."""

    __slots__ = ("arr",)

    def __init__(self, arr: np.ndarray) -> None:
        arr.flags.writeable = False
        self.arr = arr


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _read(v: Any) -> Any:
    """A kernel input as a (read-only) NumPy array; numbers pass through."""
    if isinstance(v, View):
        isz = v.buffer.arr.itemsize
        return np.lib.stride_tricks.as_strided(v.buffer.arr[v.offset:], v.shape,
                                               [s * isz for s in v.strides], writeable=False)
    if isinstance(v, tuple):
        return tuple(_read(x) for x in v)
    return v


def _write(out: View, result: np.ndarray) -> None:
    """Copy-on-write: a new array for out's holder, with out's region replaced."""
    holder = out.buffer
    new = holder.arr.copy()
    LIBRARY_CALLS["copy"] += 1
    isz = new.itemsize
    region = np.lib.stride_tricks.as_strided(new[out.offset:], out.shape,
                                             [s * isz for s in out.strides])
    region[...] = result
    LIBRARY_CALLS["assign"] += 1
    holder.arr = _frozen(new)


def _compute(fn: Any, shape: tuple[int, ...], dtype: Any, *inputs: Any) -> np.ndarray:
    """The op into a new array (the NumPy kernel writes a scratch array)."""
    res = np.empty(shape, dtype.numpy)
    fn(res, *(_read(a) for a in inputs))
    LIBRARY_CALLS["compute"] += 1
    return _frozen(res)


# kernels that read out before writing it (accumulate into it)
READS_OUT = {"scatter_add"}


def _destination(op: str) -> Any:
    fn = _NUMPY[op]

    def kernel(out: View, *inputs: Any) -> None:
        if op in READS_OUT:
            res = np.array(_read(out), copy=True)
            fn(res, *(_read(a) for a in inputs))
            LIBRARY_CALLS["compute"] += 1
            _write(out, res)
        else:
            _write(out, _compute(fn, out.shape, out.dtype, *inputs))

    kernel.__name__ = op
    return kernel


def _functional(op: str) -> Any:
    fn = _NUMPY[op]

    def kernel(like: Any, *inputs: Any) -> np.ndarray:
        return _compute(fn, like.shape, like.dtype, *inputs)

    kernel.__name__ = op
    return functional(kernel)


def _empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[Any, View]:
    n = int(np.prod(shape)) if shape else 1
    h = Holder(np.zeros(n, dtype.numpy))
    LIBRARY_CALLS["empty"] += 1
    return h, View(h, shape, contiguous_strides(shape), 0, dtype)


def _from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[Any, View]:
    h = Holder(arr.reshape(-1).copy())
    return h, View(h, arr.shape, contiguous_strides(arr.shape), 0, dtype)


def _to_host(v: View) -> np.ndarray:
    return np.array(_read(v), copy=True)


def _random(kind: str) -> Any:
    def kernel(out: View, a: float, b: float, seed: int, offset: int) -> None:
        rng = np.random.default_rng([seed, offset])
        r = rng.uniform(a, b, out.shape) if kind == "uniform" else rng.normal(a, b, out.shape)
        r = r.astype(out.dtype.numpy)
        if kind == "uniform":  # [a, b) in out's dtype too (float16 rounds draws up to b)
            top = np.nextafter(np.asarray(b, r.dtype), np.asarray(a, r.dtype))
            r = np.minimum(r, top)
        _write(out, r)

    return kernel


DESTINATION = {op: _destination(op) for op in ops.PRIMITIVES if op in _NUMPY}
DESTINATION.update(empty=_empty, from_host=_from_host, to_host=_to_host,
                   uniform=_random("uniform"), normal=_random("normal"))

FUNCTIONAL_FAMILIES = ("unary", "binary", "compare", "ternary", "reduce", "matmul")
WITH_FUNCTIONAL = dict(DESTINATION)
WITH_FUNCTIONAL.update({op: _functional(op) for op, spec in ops.PRIMITIVES.items()
                        if op in _NUMPY and (spec.family in FUNCTIONAL_FAMILIES or op == "cast")})


class ReadOnlyBackend(Backend):
    """``ro``: immutable arrays, destination kernels only."""

    name = "ro"
    distribution = "readonly-backend (tests)"
    version = "0.0"

    def is_accelerator(self, index: int) -> bool:
        return False

    def adopt(self, array: Any, dtype: Any, index: int) -> tuple[Any, View]:
        h = Holder(array.reshape(-1))  # the result itself, no copy
        return h, View(h, array.shape, contiguous_strides(array.shape), 0, dtype)

    def write(self, out: View, array: Any) -> None:
        _write(out, array)

    def release(self, buffer: Any) -> None:
        RELEASED[self.name] += 1


class FunctionalBackend(ReadOnlyBackend):
    """``rof``: the same arrays, with functional kernels."""

    name = "rof"


ReadOnlyPlugin = lambda: BackendPlugin(ReadOnlyBackend, DESTINATION)  # noqa: E731
FunctionalPlugin = lambda: BackendPlugin(FunctionalBackend, WITH_FUNCTIONAL)  # noqa: E731
