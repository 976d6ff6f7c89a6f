"""Indexing on OpenCL: gather, index, scatter_add, masked_select; their templates and launches.

Every index tensor and operand is walked as a strided operand of the output's
index space (``launch.coalesce``): strides are kernel arguments, so one
program serves every shape of a rank. scatter_add runs one work item per
column (the position with the scattered dim left out), so no two work items
write one element and sums are deterministic; masked_select counts, scans and
packs over chunks.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from rtxcore.dispatch import DType, View

from . import codegen as C
from . import elementwise as E
from . import launch as L
from . import runtime as R


# -- OpenCL C ---------------------------------------------------------------------------


def gather_source(dt: str, rank: int) -> tuple[str, list[str]]:
    """out[i] = x[same position, but index[i] along dim]: x's stride along dim is
    0 in its strides and ``xsd`` separately."""
    params, kinds = C.ptr_params("out", dt, rank, False)
    for name, d in (("pi", "int64"), ("px", dt)):
        p, k = C.ptr_params(name, d, rank)
        params += p
        kinds += k
    params += ["long xsd", "long xn"] + [f"long n{d}" for d in range(1, rank)]
    kinds += ["long"] * (rank + 1)
    body = (C.index_math(rank, ["out", "pi", "px"])
            + f"\n    const long at = {_clamped('pi[p_pi]', 'xn')};"
            + f"\n    {C.store(dt, 'out', 'p_out', C.load(dt, 'px', 'p_px + at * xsd'))}")
    return C.kernel_source(f"gather {dt}", {dt}, params, body), kinds


def _clamped(i: str, n: str) -> str:
    """Index ``i`` held inside ``[0, n)`` (``n`` >= 1: the launches skip a dim of
    size 0). The core checks indices on the device and raises at the next read
    (``async_errors``): a bad one must not reach memory outside the tensor
    meanwhile. (Ternaries: PoCL calls ``clamp``.)"""
    return f"({i} < 0 ? 0 : {i} >= {n} ? {n} - 1 : {i})"


def index_source(dt: str, rank: int, nidx: int) -> tuple[str, list[str]]:
    """out[s, t] = x[idx0[s], ..., idx<k-1>[s], t]: the index tensors and x are
    walked as operands of out's shape (strides 0 where they don't vary)."""
    params, kinds = C.ptr_params("out", dt, rank, False)
    names = ["out"]
    for j in range(nidx):
        p, k = C.ptr_params(f"pi{j}", "int64", rank)
        params += p
        kinds += k
        names.append(f"pi{j}")
    p, k = C.ptr_params("px", dt, rank)
    params += p + [f"long xsd{j}" for j in range(nidx)] + [f"long xn{j}" for j in range(nidx)] \
        + [f"long n{d}" for d in range(1, rank)]
    kinds += k + ["long"] * (2 * nidx + rank - 1)
    at = " + ".join(["p_px"] + [f"{_clamped(f'pi{j}[p_pi{j}]', f'xn{j}')} * xsd{j}"
                                for j in range(nidx)])
    body = (C.index_math(rank, names + ["px"])
            + f"\n    {C.store(dt, 'out', 'p_out', C.load(dt, 'px', at))}")
    return C.kernel_source(f"index {dt} by {nidx} index tensors", {dt}, params, body), kinds


def scatter_add_source(dt: str, rank: int) -> tuple[str, list[str]]:
    """One work item per column (a position with the dim left out) walks the dim
    in order and adds into out: columns write disjoint elements, so there are
    no races and the sum is deterministic."""
    params, kinds = C.ptr_params("out", dt, rank, False)
    for name, d in (("pi", "int64"), ("ps", dt)):
        p, k = C.ptr_params(name, d, rank)
        params += p
        kinds += k
    params += ["long osd", "long isd", "long ssd", "long len", "long on"] + \
        [f"long n{d}" for d in range(1, rank)]
    kinds += ["long"] * (5 + rank - 1)
    ct = C.CTYPE[dt][1]
    body = (C.index_math(rank, ["out", "pi", "ps"])
            + f"""
    for (long j = 0; j < len; j++) {{
        const long i = pi[p_pi + j * isd];
        const long at = p_out + {_clamped('i', 'on')} * osd;
        const {ct} v = {C.load(dt, 'out', 'at')} + {C.load(dt, 'ps', 'p_ps + j * ssd')};
        {C.store(dt, 'out', 'at', 'v')}
    }}""")
    return C.kernel_source(f"scatter_add {dt}", {dt}, params, body), kinds


def masked_select_source(dt: str, rank: int) -> str:
    """Three kernels over chunks of the row-major order of x (and mask):
    ``count`` the True per chunk, ``scan`` the counts into start positions (one
    work item: there are few chunks), ``pack`` each chunk's elements there."""
    px, _ = C.ptr_params("px", dt, rank)
    pm, _ = C.ptr_params("pm", "bool", rank)
    sizes = [f"long n{d}" for d in range(1, rank)]
    walk = C.index_math(rank, ["px", "pm"], "e").replace("\n    ", "\n            ")
    walk_mask = C.index_math(rank, ["pm"], "e").replace("\n    ", "\n            ")
    common = ", ".join(pm + sizes + ["long n", "long chunk"])
    return C.header({dt}) + f"""/* masked_select {dt} */
__kernel void count(__global long *counts, {common})
{{
    const long g = get_global_id(0);
    const long e1 = min(n, (g + 1) * chunk);
    long c = 0;
    for (long e = g * chunk; e < e1; e++) {{
        {{
            {walk_mask}
            c += pm[p_pm] != 0;
        }}
    }}
    counts[g] = c;
}}

__kernel void scan(__global long *counts, long groups)
{{
    long total = 0;
    for (long g = 0; g < groups; g++) {{ const long c = counts[g]; counts[g] = total; total += c; }}
}}

__kernel void pack(__global {C.CTYPE[dt][0]} *out, long out_o, __global const long *counts,
                   {", ".join(px)}, {common})
{{
    const long g = get_global_id(0);
    const long e1 = min(n, (g + 1) * chunk);
    long w = out_o + counts[g];
    for (long e = g * chunk; e < e1; e++) {{
        {{
            {walk}
            if (pm[p_pm]) {{ {C.store(dt, 'out', 'w', C.load(dt, 'px', 'p_px'))} w++; }}
        }}
    }}
}}
"""


# -- launches ---------------------------------------------------------------------------


def _nothing_to_read(out: View) -> None:
    """An index into a dim of size 0 (out of range whatever it is: the core's
    check raises at the next read): nothing to read, zeros written."""
    from .elementwise import full

    full(out, 0)


def gather(out: View, x: View, dim: int, index: View) -> None:
    if x.shape[dim] == 0:
        return _nothing_to_read(out)
    key = ("gather plan", out.dtype, out.shape, out.strides, x.shape, x.strides, dim,
           index.dtype, index.strides)
    p = out.buffer.dev.programs.get(key)
    if p is None:
        p = L.planned(out.buffer.dev, key, lambda: _gather_plan(out, x, dim, index))
    p(out, index, x)


def _gather_plan(out: View, x: View, dim: int, index: View) -> Any:
    """gather's launcher for this signature, of (out, index, x)."""
    n = prod(out.shape)
    if n == 0:
        return L.noop
    dev = out.buffer.dev
    xst = list(x.strides)
    xsd, xst[dim] = xst[dim], 0
    dims, (ost, ist, xs) = L.coalesce(out.shape, [out.strides, index.strides, tuple(xst)])
    dt, rank = out.dtype.name, len(dims)
    k = L.kernel(dev, ("gather", dt, rank), lambda: gather_source(dt, rank))
    return L.prepare(dev, [(k, [L.view(0), *ost, L.view(1), *ist, L.view(2), *xs, xsd,
                                x.shape[dim], *dims[1:]], L.ranges(n))])


def index(out: View, x: View, indices: tuple[View, ...]) -> None:
    if any(x.shape[j] == 0 for j in range(len(indices))):
        return _nothing_to_read(out)
    key = ("index plan", out.dtype, out.shape, out.strides, x.shape, x.strides,
           *[(v.dtype, v.shape, v.strides) for v in indices])
    p = out.buffer.dev.programs.get(key)
    if p is None:
        p = L.planned(out.buffer.dev, key, lambda: _index_plan(out, x, indices))
    p(out, *indices, x)


def _index_plan(out: View, x: View, indices: tuple[View, ...]) -> Any:
    """index's launcher for this signature, of (out, *indices, x)."""
    n = prod(out.shape)
    if n == 0:
        return L.noop
    dev = out.buffer.dev
    nidx = len(indices)
    tail = len(x.shape) - nidx  # x's dims after the indexed ones
    lead = len(out.shape) - tail
    strides = [out.strides]
    for v in indices:  # each has the leading shape; it doesn't vary along x's tail
        strides.append(tuple(v.strides) + (0,) * tail)
    strides.append((0,) * lead + tuple(x.strides[nidx:]))
    dims, sts = L.coalesce(out.shape, strides)
    dt, rank = out.dtype.name, len(dims)
    k = L.kernel(dev, ("index", dt, rank, nidx), lambda: index_source(dt, rank, nidx))
    args: list[Any] = [L.view(0), *sts[0]]
    for j in range(nidx):
        args += [L.view(1 + j), *sts[1 + j]]
    args += [L.view(1 + nidx), *sts[-1], *(x.strides[j] for j in range(nidx)),
             *(x.shape[j] for j in range(nidx)), *dims[1:]]
    return L.prepare(dev, [(k, args, L.ranges(n))])


# float16 scatters run on float32 copies: the sums never round to float16 midway
# (which stops at 2048 when adding ones), only the result, once per element
_F32 = DType("float32", "f", np.float32)


def scatter_add(out: View, dim: int, index: View, src: View) -> None:
    length = index.shape[dim] if index.shape else 1
    cols = prod(index.shape) // length if length else 0
    if cols == 0 or (out.shape and out.shape[dim] == 0):
        return  # (nothing to add into: any index is out of range, raised at the next read)
    dev = out.buffer.dev
    if out.dtype.name == "float16":
        _, wide_out = E.empty(out.shape, _F32, dev.index)
        _, wide_src = E.empty(src.shape, _F32, dev.index)
        E.cast(wide_out, out)
        E.cast(wide_src, src)
        scatter_add(wide_out, dim, index, wide_src)
        E.cast(out, wide_out)
        return

    key = ("scatter_add plan", out.dtype, out.shape[dim] if out.shape else 1, out.strides, dim,
           index.dtype,
           index.shape, index.strides, src.strides)
    p = dev.programs.get(key)
    if p is None:
        p = L.planned(dev, key, lambda: _scatter_add_plan(out, dim, index, src, length, cols))
    p(out, index, src)


def _scatter_add_plan(out: View, dim: int, index: View, src: View, length: int, cols: int) -> Any:
    """scatter_add's launcher for this signature, of (out, index, src)."""
    def drop(t: tuple[int, ...]) -> tuple[int, ...]:
        return t[:dim] + t[dim + 1:]

    along = (out.strides[dim], index.strides[dim], src.strides[dim]) if index.shape else (0, 0, 0)
    dims, (ost, ist, sst) = L.coalesce(drop(index.shape),
                                       [drop(out.strides), drop(index.strides), drop(src.strides)])
    dt, rank = out.dtype.name, len(dims)
    dev = out.buffer.dev
    k = L.kernel(dev, ("scatter_add", dt, rank), lambda: scatter_add_source(dt, rank))
    return L.prepare(dev, [(k, [L.view(0), *ost, L.view(1), *ist, L.view(2), *sst, *along, length,
                                out.shape[dim] if out.shape else 1, *dims[1:]], L.ranges(cols))])


def masked_select(out: View, x: View, mask: View) -> None:
    n = prod(x.shape)
    if n == 0 or prod(out.shape) == 0:
        return
    dev = out.buffer.dev
    dims, (xst, mst) = L.coalesce(x.shape, [x.strides, mask.strides])
    dt, rank = x.dtype.name, len(dims)
    key = ("masked_select", dt, rank)
    prg = dev.programs.get(key)
    if prg is None:
        def bind(built: Any) -> tuple[Any, Any, Any]:
            sizes = [np.int64] * (rank + 1)  # n1.., n, chunk
            walked = [None, np.int64] + [np.int64] * rank
            ks = tuple(R.cl.Kernel(built, name) for name in ("count", "scan", "pack"))
            ks[0].set_scalar_arg_dtypes([None, *walked, *sizes])
            ks[1].set_scalar_arg_dtypes([None, np.int64])
            ks[2].set_scalar_arg_dtypes([None, np.int64, None, *walked, *walked, *sizes])
            return ks

        prg = dev.launcher(key, lambda: dev.build(masked_select_source(dt, rank), L.describe(key)),
                           bind)
    count, scan, pack = prg
    chunk = max(1024, -(-n // 256))
    groups = -(-n // chunk)
    counts = dev.alloc(groups * 8, "masked_select counts")
    q = dev.queue
    m_args = [mask.buffer.mem, mask.offset, *mst, *dims[1:], n, chunk]
    count(q, (groups,), (1,), counts.mem, *m_args)
    scan(q, (1,), (1,), counts.mem, groups)
    pack(q, (groups,), (1,), out.buffer.mem, out.offset, counts.mem,
         x.buffer.mem, x.offset, *xst, *m_args)
