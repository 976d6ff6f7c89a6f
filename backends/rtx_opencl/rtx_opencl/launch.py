"""Compiling once and enqueueing: kernel caches, families in one program, launch sizes, layouts.

Every op module (``elementwise``, ``reductions``, ``indexing``, ``matmul``,
``fused``) asks here for its compiled kernel by a key of (op, dtypes, layout)
and enqueues it; a layout is the op's index space with its mergeable dims
coalesced (``coalesce``, ``plan``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import View

from . import runtime as R

LOCAL = 256  # work-group size of elementwise launches; the tail runs in groups of 1

# a kernel argument's kind -> the NumPy type pyopencl passes it as (None: a buffer)
ARG = {"bool": np.uint8, "uint8": np.uint8, "int8": np.int8, "int16": np.int16,
       "int32": np.int32, "int64": np.int64, "float16": np.float32,
       "float32": np.float32, "float64": np.float64, "long": np.int64,
       "ulong": np.uint64, "buf": None}


def kernel(dev: R.Device, key: tuple, make: Callable[[], tuple[str, list[str]]],
           name: str = "k") -> Any:
    """The compiled kernel for ``key`` on ``dev``, built by ``make()`` on first use."""
    k = dev.programs.get(key)
    if k is None:
        def build() -> tuple[Any, list[str]]:
            src, kinds = make()
            return dev.build(src, describe(key)), kinds

        def bind(built: tuple[Any, list[str]]) -> Any:
            prg, kinds = built
            k = R.cl.Kernel(prg, name)
            k.set_scalar_arg_dtypes([ARG[a] for a in kinds])
            return k

        k = dev.launcher(key, build, bind)
    return k


def family_kernel(dev: R.Device, key: tuple, member: str, program: tuple,
                  makers: dict[str, Callable[[str], tuple[str, list[str]]]]) -> Any:
    """The kernel ``k_<member>`` for ``key``, from a program that holds one
    kernel per entry of ``makers`` (``makers[m](name)`` gives its source and
    argument kinds): the first use of any of them compiles all of them at once,
    and each later one is a lookup. PoCL's cost per compile is mostly fixed, so
    a family of ~15 kernels compiles in about the time of one. (The compiler's
    per-kernel code generation still happens at each kernel's first launch.)
    Should the family fail to build, ``member`` is built alone, under its own
    key: the family's key never holds a program without its other members."""
    k = dev.programs.get(key)
    if k is not None:
        return k

    def build() -> tuple[Any, dict[str, list[str]]]:
        sources, kinds = [], {}
        for m, make in makers.items():
            src, kinds[m] = make(f"k_{m}")
            sources.append(src)
        return dev.build("\n".join(sources), describe(program)), kinds

    def bind(built: tuple[Any, dict[str, list[str]]]) -> Any:
        prg, kinds = built
        k = R.cl.Kernel(prg, f"k_{member}")
        k.set_scalar_arg_dtypes([ARG[a] for a in kinds[member]])
        return k

    try:
        return dev.launcher(key, build, bind, program)
    except RuntimeError:  # (a member's source that doesn't compile: its error, alone)
        return kernel(dev, key, lambda: makers[member](f"k_{member}"), f"k_{member}")


def describe(key: tuple) -> str:
    op, *rest = key
    return f"{op} ({', '.join(str(r) for r in rest)})"


def enqueue(dev: R.Device, k: Any, n: int, args: list[Any]) -> None:
    """Run ``k`` once per element id 0..n-1: full work-groups of LOCAL, then the
    remainder in groups of one (a bounds check in the kernel would cost more)."""
    q = dev.queue
    main = n - n % LOCAL
    if main:
        k(q, (main,), (LOCAL,), *args)
    if not main:  # (a small op: no offset to pass, which saves ~1 us a launch)
        k(q, (n,), (1,), *args)
    elif main != n:
        k(q, (n - main,), (1,), *args, global_offset=(main,))


# -- layouts ----------------------------------------------------------------------------


def coalesce(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that every operand walks as one.
    Keeps the row-major order of elements; returns at least one dim."""
    dims: list[int] = []
    sts: list[list[int]] = [[] for _ in strides]
    for d in range(len(shape) - 1, -1, -1):  # innermost first
        n = shape[d]
        if n == 1:
            continue
        if dims and all(s[d] == acc[-1] * dims[-1] for s, acc in zip(strides, sts)):
            dims[-1] *= n
            continue
        dims.append(n)
        for s, acc in zip(strides, sts):
            acc.append(s[d])
    if not dims:
        return [1], [[1] for _ in strides]
    dims.reverse()
    for acc in sts:
        acc.reverse()
    return dims, sts


def plan(out: View, views: list[View]) -> tuple[str, list[int], list[list[int]]]:
    """("c", [n], ...) when every operand is contiguous, else ("s", dims, strides)."""
    dims, sts = coalesce(out.shape, [out.strides] + [v.strides for v in views])
    if len(dims) == 1 and all(s[0] == 1 for s in sts):
        return "c", dims, sts
    return "s", dims, sts
