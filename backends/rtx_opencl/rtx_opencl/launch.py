"""Compiling once and enqueueing: kernel caches, program families, prepared launches, layouts.

Every op module (``elementwise``, ``reductions``, ``indexing``, ``matmul``,
``fused``) asks here for its compiled kernel by a key of (op, dtypes, layout)
and enqueues it; a layout is the op's index space with its mergeable dims
coalesced (``coalesce``, ``plan``). An op called again with the same
signature (dtypes, shapes, strides) reuses a *prepared launch* (``prepare``):
its kernels, work sizes and constant arguments worked out once, so a call only
sets its buffers, offsets and scalars and enqueues.
"""

from __future__ import annotations

from math import prod

import struct
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
            return _bound(prg, name, kinds)

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
        return _bound(prg, f"k_{member}", kinds[member])

    try:
        return dev.launcher(key, build, bind, program)
    except RuntimeError:  # (a member's source that doesn't compile: its error, alone)
        return kernel(dev, key, lambda: makers[member](f"k_{member}"), f"k_{member}")


def _bound(prg: Any, name: str, kinds: list[str]) -> Any:
    """Kernel ``name`` of ``prg`` with its argument types set, for PyOpenCL's
    ``k(queue, global, local, *args)`` and for ``prepare`` (``_rtx_chars``: each
    argument's struct character, None for a buffer)."""
    return typed(R.cl.Kernel(prg, name), [ARG[a] for a in kinds])


def typed(k: Any, types: list[Any]) -> Any:
    """``k`` with its arguments' types set: NumPy scalar types, None for a buffer."""
    k.set_scalar_arg_dtypes(types)
    k._rtx_chars = tuple(None if t is None else np.dtype(t).char for t in types)
    return k


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


def ranges(n: int, start: int = 0) -> list[tuple[tuple[int], tuple[int], tuple[int] | None]]:
    """The (global size, local size, global offset) of each launch ``enqueue``
    makes for ids start..start+n-1 (``start`` > 0: groups of one, the tail of a
    vector launch)."""
    if start:
        return [((n,), (1,), (start,))]
    main = n - n % LOCAL
    if not main:
        return [((n,), (1,), None)]
    return [((main,), (LOCAL,), None)] + ([((n - main,), (1,), (main,))] if main != n else [])


def split_last(dims: list[int], sts: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """A strided layout whose last dim is longer than a work-group (``LOCAL``),
    with that dim cut in two, (n / b, b), b its largest divisor from 8 to
    ``LOCAL``, so that ``row_ranges`` can launch it by rows (unchanged where
    there is none, or rank is 1: no index math to save)."""
    last = dims[-1]
    if len(dims) < 2 or last <= LOCAL:
        return dims, sts
    b = next((b for b in range(LOCAL, 7, -1) if last % b == 0), None)
    if b is None:
        return dims, sts
    return dims[:-1] + [last // b, b], [s[:-1] + [s[-1] * b, s[-1]] for s in sts]


def row_ranges(dims: list[int], max_group: int) -> list[tuple[tuple[int, ...], tuple[int, ...],
                                                              None]] | None:
    """The one 2-D launch of a strided elementwise kernel over ``dims`` (the
    coalesced shape): global (last dim, rows), work-groups of the whole last dim
    times the most rows (a power of two dividing them) that keep a group within
    ``LOCAL`` items. None where the last dim is under 8 (groups that small cost
    more than the index math they save) or over ``max_group``: the 1-D launch."""
    last = dims[-1]
    if last < 8 or last > max_group:
        return None
    rows = prod(dims[:-1])
    k = 1
    while last * k * 2 <= LOCAL and rows % (k * 2) == 0:
        k *= 2
    return [((last, rows), (last, k), None)]


# -- prepared launches ----------------------------------------------------------------------


class Arg:
    """A place in a prepared launch's argument list that each call fills from
    its ``j``-th operand: ``view`` (a View: its buffer and its offset, two
    arguments), ``mem`` (a runtime Buffer: its memory) or ``value`` (a scalar)."""

    __slots__ = ("kind", "j")

    def __init__(self, kind: str, j: int) -> None:
        self.kind, self.j = kind, j


def view(j: int) -> Arg:
    return Arg("view", j)


def mem(j: int) -> Arg:
    return Arg("mem", j)


def value(j: int) -> Arg:
    return Arg("value", j)


PLANS = 20000  # a thread's cached kernels and plans beyond which its cache starts afresh

# struct characters PyOpenCL's Kernel._set_arg_buf_pack_multi packs itself (as its
# generated invokers use it); others are packed here with struct.pack
_PACKABLE = frozenset("cbBhHiIlLfd")
_CODE: dict[str, Any] = {}  # source of a launcher -> its compiled code


def prepare(dev: R.Device, steps: list[tuple[Any, list[Any], list[tuple]]]) -> Callable[..., None]:
    """A function of the operands (``launcher(o0, o1, ...)``) that runs each
    step's kernel over each of its ranges. A step is (kernel from ``kernel`` or
    ``family_kernel``, its argument list with ``Arg`` places for the operands
    and constants elsewhere, ``ranges(...)``). It sets the arguments in at most
    three calls per kernel, as PyOpenCL's own invoker does, but with the
    constants packed once and no argument list built per call."""
    if not (all(hasattr(k, "_rtx_chars") for k, _, _ in steps)
            and hasattr(R.cl.Kernel, "_set_arg_buf_pack_multi")):
        return _generic(dev, steps)
    ns: dict[str, Any] = {"_cl": R.cl._cl, "dev": dev, "_pack": struct.pack}
    lines, nops = ["q = dev._queue"], 0
    for s, (k, args, launches) in enumerate(steps):
        chars = k._rtx_chars
        bufs: list[str] = []
        packs: list[str] = []
        packed: list[str] = []
        cbuf: list[Any] = []
        cpack: list[Any] = []
        cpacked: list[Any] = []

        def scalar(i: int, expr: str) -> None:
            c = chars[i]
            if c in _PACKABLE:
                packs.append(f"{i}, {c.encode()!r}, {expr}")
            else:
                packed.append(f"{i}, _pack({c!r}, {expr})")

        i = 0
        for a in args:
            if type(a) is Arg:
                o = f"o{a.j}"
                nops = max(nops, a.j + 1)
                if a.kind == "view":
                    bufs.append(f"{i}, {o}.buffer.mem")
                    scalar(i + 1, f"{o}.offset")
                    i += 2
                    continue
                if a.kind == "mem":
                    bufs.append(f"{i}, {o}.mem")
                else:
                    scalar(i, o)
            elif chars[i] is None:
                cbuf += [i, a]
            elif chars[i] in _PACKABLE:
                cpack += [i, chars[i].encode(), a]
            else:
                cpacked += [i, struct.pack(chars[i], a)]
            i += 1
        if i != len(chars):
            raise TypeError(f"{k.function_name}: {i} arguments given, "
                            f"the kernel takes {len(chars)}")
        ns[f"k{s}"] = k
        for setter, here, const in (("_set_arg_multi", bufs, cbuf),
                                    ("_set_arg_buf_pack_multi", packs, cpack),
                                    ("_set_arg_buf_multi", packed, cpacked)):
            if const:
                ns[f"c{s}{setter}"] = tuple(const)
            parts = [f"({', '.join(here)},)"] if here else []
            parts += [f"c{s}{setter}"] if const else []
            if parts:
                lines.append(f"k{s}.{setter}({' + '.join(parts)})")
        for t, (g, lsz, off) in enumerate(launches):
            ns[f"g{s}_{t}"], ns[f"l{s}_{t}"], ns[f"off{s}_{t}"] = g, lsz, off
            lines.append(f"_cl.enqueue_nd_range_kernel(q, k{s}, g{s}_{t}, l{s}_{t}, off{s}_{t}, "
                         "None, False, False)")
    src = f"def launch({', '.join(f'o{j}' for j in range(nops))}):\n    " + "\n    ".join(lines)
    code = _CODE.get(src)
    if code is None:
        code = _CODE[src] = compile(src, "<rtx_opencl launch>", "exec")
    exec(code, ns)
    return ns["launch"]


def _generic(dev: R.Device, steps: list[tuple[Any, list[Any], list[tuple]]]) -> Callable[..., None]:
    """``prepare`` through PyOpenCL's invoker (``k(queue, ...)``): for kernels
    not made by ``kernel``, or a PyOpenCL without the fast setters."""
    def launch(*ops: Any) -> None:
        q = dev.queue
        for k, args, launches in steps:
            full: list[Any] = []
            for a in args:
                if type(a) is not Arg:
                    full.append(a)
                elif a.kind == "view":
                    full += [ops[a.j].buffer.mem, ops[a.j].offset]
                else:
                    full.append(ops[a.j].mem if a.kind == "mem" else ops[a.j])
            for g, lsz, off in launches:
                k(q, g, lsz, *full, global_offset=off)

    return launch


def planned(dev: R.Device, key: tuple,
            make: Callable[[], Callable[..., None]]) -> Callable[..., None]:
    """This thread's launcher for ``key`` (a call signature), made by ``make()``
    on first use and kept with the thread's kernels (``dev.programs``)."""
    programs = dev.programs
    p = programs.get(key)
    if p is None:
        p = make()
        if len(programs) >= PLANS:
            programs.clear()
        programs[key] = p
    return p


def noop(*_: Any) -> None:
    """The launcher of an empty op."""


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
