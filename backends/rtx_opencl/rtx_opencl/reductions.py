"""Reductions on OpenCL (sum, prod, max, min, argmax, argmin): their templates and launches.

A reduction coalesces its kept and reduced dims (``launch.coalesce``) and picks
a kernel shape: one work item per output (short reductions, or outputs side by
side in memory), a work-group tree per output (or per part of one, with a
second launch over the parts), or 8-lane vector folds for contiguous rows and
for column sums. The kernels of one signature (sum, prod, max, min; or argmax,
argmin) compile as one program.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import View

from . import codegen as C
from . import launch as L
from . import runtime as R
from .runtime import Buffer

# the smallest and largest value of each compute type (for max/min reductions)
LIMITS = {
    "uchar": ("0", "UCHAR_MAX"), "char": ("CHAR_MIN", "CHAR_MAX"),
    "short": ("SHRT_MIN", "SHRT_MAX"), "int": ("INT_MIN", "INT_MAX"),
    "long": ("LONG_MIN", "LONG_MAX"), "float": ("-INFINITY", "INFINITY"),
    "double": ("-INFINITY", "INFINITY"),
}

# Reductions: (identity, combine(acc, v)) in the accumulator type AT.
REDUCE = {
    "sum": ("0", "acc + v"),
    "prod": ("1", "acc * v"),
    "max": ("LOWEST", "(ISNAN(acc) || acc > v) ? acc : v"),
    "min": ("HIGHEST", "(ISNAN(acc) || acc < v) ? acc : v"),
}
REDUCE_INT = {"max": "(acc > v ? acc : v)", "min": "(acc < v ? acc : v)"}


REDUCE_LOCAL = 128  # work-group size of tree reductions (a power of two)
# On a CPU device, rows of up to this many elements, and enough of them to give
# every core work, reduce one row a work item: a work-group's tree (seven
# barriers, each a pass of the group's loop on PoCL) cost 15-25x the row's own
# fold for the rows models have (a (1024, 48) row sum: 808 us against 38 us)
SERIAL_MAX = 2048


# -- OpenCL C ---------------------------------------------------------------------------


def _fold(op: str, xdt: str, at: str) -> tuple[str, str]:
    """(identity, combine(acc, v)) of reduction ``op`` of ``xdt`` elements in the
    accumulator's C type ``at``."""
    ident, combine = REDUCE[op]
    if xdt not in C.FLOATS and op in REDUCE_INT:
        combine = REDUCE_INT[op]
    lo, hi = LIMITS[at]
    return {"LOWEST": lo, "HIGHEST": hi}.get(ident, ident), combine


def _strided_params(ptr: str, prefix: str, rank: int) -> list[str]:
    return [f"long {ptr}{prefix}{d}" for d in range(rank)]


def _walk(var: str, sizes: str, rank: int, ptrs: list[tuple[str, str]], into: str) -> str:
    """C statements adding to ``<into>_<ptr>`` the offset of element ``var`` of an
    index space of ``rank`` dims (sizes ``<sizes>1..``), stride params ``<ptr><pre><d>``."""
    lines = [f"long {var}_r = {var}, {var}_q;"]
    for d in range(rank - 1, 0, -1):
        lines.append(f"{var}_q = {var}_r % {sizes}{d}; {var}_r /= {sizes}{d};")
        lines.append(" ".join(f"{into}_{p} += {var}_q * {p}{pre}{d};" for p, pre in ptrs))
    lines.append(" ".join(f"{into}_{p} += {var}_r * {p}{pre}0;" for p, pre in ptrs))
    return "\n        ".join(lines)


def reduction_source(op: str, xdt: str, odt: str, ro: int, ri: int, mode: str,
                     arg: bool = False, kname: str = "k") -> tuple[str, list[str]]:
    """Reduce ``x`` over an inner index space (``ri`` dims, ``K`` elements) for
    every point of an outer one (``ro`` dims, one output each).

    ``mode``: ``tree`` runs one work-group of REDUCE_LOCAL per (output, part):
    each work item folds every REDUCE_LOCAL-th element of its part, then the group
    combines in local memory, halving each step; with ``parts`` > 1 the groups
    write partial results to ``tmp`` (a second launch reduces those).
    ``serial`` runs one work item per output (for short reductions, or when
    neighbouring outputs are neighbours in memory).
    ``arg`` (argmax/argmin): the fold keeps (value, index), the first best wins,
    NaN counting as the best; the output is the int64 index.
    """
    ct = C.CTYPE[xdt][1]
    at = ct if arg else C.CTYPE[odt][1]
    partial = mode == "partial"
    if arg:
        cmp = ">" if op == "argmax" else "<"
        nan = "ISNAN" if xdt in C.FLOATS else "NOTNAN"
        ident = LIMITS[at][0 if op == "argmax" else 1]
        better = (f"({nan}(v) ? (!{nan}(acc) || j < acc_i) : "
                  f"(!{nan}(acc) && (v {cmp} acc || (v == acc && j < acc_i))))")
    else:
        ident, combine = _fold(op, xdt, at)

    params = ["__global " + (f"{at} *tmp" if partial else f"{C.CTYPE[odt][0]} *out"), "long out_o"]
    params += _strided_params("out", "s", ro)
    params += [f"__global const {C.CTYPE[xdt][0]} *px", "long px_o"]
    params += _strided_params("px", "s", ro) + _strided_params("px", "r", ri)
    params += [f"long n{d}" for d in range(1, ro)] + [f"long m{d}" for d in range(1, ri)]
    params += ["long K", "long parts", "long chunk"]
    kinds = ["buf", "long"] + ["long"] * ro + ["buf", "long"] + ["long"] * (ro + ri)
    kinds += ["long"] * (ro - 1 + ri - 1) + ["long"] * 3

    if arg:
        fold = f"""{{ const {at} v = {C.load(xdt, 'px', 'at_px')}; const long j = kk;
            if ({better}) {{ acc = v; acc_i = j; }} }}"""
    else:
        fold = f"{{ const {at} v = ({at}){C.load(xdt, 'px', 'at_px')}; acc = {combine}; }}"
    outer = _walk("o", "n", ro, [("out", "s"), ("px", "s")], "base")
    inner = _walk("kk", "m", ri, [("px", "r")], "at")
    loop_body = f"long at_px = base_px;\n        {inner}\n        {fold}"
    store_v = "acc_i" if arg else "acc"
    if mode == "serial":
        ids = "const long o = get_global_id(0);"
        loop = f"for (long kk = 0; kk < K; kk++) {{\n        {loop_body}\n    }}"
        finish = "    " + C.store(odt, "out", "base_out", store_v)
    else:
        G = REDUCE_LOCAL
        ids = ("const long g = get_group_id(0); const int lid = get_local_id(0);\n"
               "    const long o = g / parts, part = g % parts;")
        loop = (f"const long k1 = min(K, (part + 1) * chunk);\n"
                f"    for (long kk = part * chunk + lid; kk < k1; kk += {G}) {{\n        {loop_body}\n    }}")
        comb = ("if ({b}) {{ sv[lid] = v; si[lid] = j; }}".format(b=better.replace("acc_i", "si[lid]").replace("acc", "sv[lid]"))
                if arg else f"{{ const {at} acc = sv[lid]; sv[lid] = {combine}; }}")
        load_other = (f"const {at} v = sv[lid + s]; const long j = si[lid + s];" if arg
                      else f"const {at} v = sv[lid + s];")
        tree = f"""    __local {at} sv[{G}];
    {"__local long si[" + str(G) + "];" if arg else ""}
    sv[lid] = acc; {"si[lid] = acc_i;" if arg else ""}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = {G // 2}; s > 0; s >>= 1) {{
        if (lid < s) {{ {load_other} {comb} }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
"""
        if arg:
            tree = tree.replace("sv[lid] = acc;", "sv[lid] = acc;")
        if partial:
            finish = tree + "    if (lid == 0) tmp[g] = sv[0];"
        else:
            fin_v = "si[0]" if arg else "sv[0]"
            finish = tree + "    if (lid == 0) " + C.store(odt, "out", "base_out", fin_v)
    acc_decl = f"{at} acc = {ident};" + (" long acc_i = LONG_MAX;" if arg else "")
    attr = f"__attribute__((reqd_work_group_size({REDUCE_LOCAL}, 1, 1))) " if mode != "serial" else ""
    src = (C.header({xdt, odt}) + "#define NOTNAN(v) 0\n"
           + f"/* {op} over an inner index space, {mode} */\n"
           + f"__kernel {attr}void {kname}(" + ", ".join(params) + ")\n{\n"
           + f"    {ids}\n    long base_out = out_o, base_px = px_o;\n"
           + f"    {{\n        {outer}\n    }}\n"
           + f"    {acc_decl}\n    {loop}\n{finish}\n}}\n")
    return src, kinds


def reduction_vec_source(op: str, dt: str, ro: int, mode: str,
                         kname: str = "k") -> tuple[str, list[str]]:
    """Reductions that read memory 8 elements at a time (``dt`` is both x's and
    out's dtype, not float16), for CPUs where a work item is a loop iteration:

    ``rows``: the reduced elements are contiguous (a row sum). Each work item of
    a group folds its own contiguous share of the row into 8 vector lanes, then
    the group combines in local memory as in ``reduction_source``.
    ``cols``: neighbouring outputs are neighbours in x (a column sum). Each work
    item owns 8 adjacent outputs and folds whole rows of 8 into vector lanes.
    """
    ct = C.CTYPE[dt][1]
    ident, combine = _fold(op, dt, ct)
    G = REDUCE_LOCAL
    params = [f"__global {ct} *out", "long out_o"] + _strided_params("out", "s", ro)
    params += [f"__global const {ct} *px", "long px_o"] + _strided_params("px", "s", ro)
    params += ["long pxr0"] + [f"long n{d}" for d in range(1, ro)] + ["long K", "long parts", "long chunk"]
    kinds = ["buf", "long"] + ["long"] * ro + ["buf", "long"] + ["long"] * (ro + 1)
    kinds += ["long"] * (ro - 1) + ["long"] * 3
    fold8 = f"{{ const {ct}8 v = *(__global const {ct}8u*)(px + at); acc = {combine}; }}"
    lanes = " ".join(f"{{ const {ct} v = acc8.s{i}; acc = {combine}; }}" for i in range(8))
    # (the typedef guarded: C99 forbids repeating it where kernels share a program)
    head = (C.header({dt}) + f"#ifndef HAVE_{ct}8u\n#define HAVE_{ct}8u\n"
            f"typedef {ct}8 {ct}8u __attribute__((aligned(sizeof({ct}))));\n#endif\n")
    if mode in ("rows", "rows_partial"):
        # rows_partial: group g writes its part's result to out[g] (a scratch
        # buffer of parts per output, reduced by a second launch)
        fin = ("out[g] = sv[0];" if mode == "rows_partial"
               else C.store(dt, "out", "base_out", "sv[0]"))
        outer = _walk("o", "n", ro, [("out", "s"), ("px", "s")], "base")
        src = head + f"""/* {op} of contiguous rows, 8 lanes per work item, then a tree */
__kernel __attribute__((reqd_work_group_size({G}, 1, 1))) void {kname}({", ".join(params)})
{{
    const long g = get_group_id(0); const int lid = get_local_id(0);
    const long o = g / parts, part = g % parts;
    long base_out = out_o, base_px = px_o;
    {{
        {outer}
    }}
    const long k0 = part * chunk, k1 = min(K, k0 + chunk);
    const long share = (((k1 - k0 + {G - 1}) / {G}) + 7) & ~7L;  /* a multiple of 8 */
    const long s0 = k0 + lid * share, s1 = s0 + share < k1 ? s0 + share : k1;
    {ct}8 acc8 = ({ct}8)({ident});
    long kk = s0;
    {{
        {ct}8 acc = acc8;
        for (; kk + 8 <= s1; kk += 8) {{ const long at = base_px + kk; {fold8} }}
        acc8 = acc;
    }}
    {ct} acc = {ident};
    for (; kk < s1; kk++) {{ const {ct} v = px[base_px + kk]; acc = {combine}; }}
    {lanes}
    __local {ct} sv[{G}];
    sv[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = {G // 2}; s > 0; s >>= 1) {{
        if (lid < s) {{ const {ct} v = sv[lid + s]; const {ct} acc = sv[lid]; sv[lid] = {combine}; }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    if (lid == 0) {fin}
}}
"""
        return src, kinds
    # cols: the outer space is (rows of outputs, blocks of W = 8*nv along the last
    # outer dim); a work item streams its block of every row into nv vectors
    nv = 8 if mode == "cols64" else 1
    W = 8 * nv
    params.append("long nl")
    kinds.append("long")
    outer = _walk("o", "n", ro - 1, [("out", "s"), ("px", "s")], "base") if ro > 1 else ""
    last = ro - 1
    decl = " ".join(f"{ct}8 acc{u} = ({ct}8)({ident});" for u in range(nv))
    fold = "\n            ".join(
        f"{{ const {ct}8 v = *(__global const {ct}8u*)(px + at + {8 * u}); const {ct}8 acc = acc{u}; "
        f"acc{u} = {combine}; }}" for u in range(nv))
    stores = "\n        ".join(
        C.store(dt, "out", f"base_out + {8 * u + i} * outs{last}", f"acc{u}.s{i}")
        for u in range(nv) for i in range(8))
    src = head + f"""/* {op} where outputs are adjacent in x: {W} outputs per work item */
__kernel void {kname}({", ".join(params)})
{{
    const long w = get_global_id(0);
    const long blocks = (nl + {W - 1}) / {W};
    const long o = w / blocks, j = (w % blocks) * {W};
    long base_out = out_o + j * outs{last}, base_px = px_o + j * pxs{last};
    {{
        {outer}
    }}
    if (j + {W} <= nl) {{
        {decl}
        for (long kk = 0; kk < K; kk++) {{
            const long at = base_px + kk * pxr0;
            {fold}
        }}
        {stores}
    }} else {{
        for (long c = j; c < nl; c++) {{
            {ct} acc = {ident};
            const long b = base_px + (c - j) * pxs{last};
            for (long kk = 0; kk < K; kk++) {{ const {ct} v = px[b + kk * pxr0]; acc = {combine}; }}
            {C.store(dt, "out", "base_out + (c - j) * outs" + str(last), "acc")}
        }}
    }}
}}
"""
    return src, kinds


# -- launches -----------------------------------------------------------------------------

_AT_DTYPE = {"float": "float32", "double": "float64", "long": "int64", "int": "int32",
             "short": "int16", "char": "int8", "uchar": "uint8"}


def _reduction_kernel(dev: R.Device, op: str, xdt: str, odt: str, ro: int, ri: int, mode: str,
                      arg: bool = False) -> Any:
    """``reduction_source``'s kernel, compiled with its family (sum, prod, max, min;
    or argmax, argmin) of the same dtypes and layout as one program."""
    ops = ("argmax", "argmin") if arg else tuple(REDUCE)
    makers = {o: (lambda name, o=o: reduction_source(o, xdt, odt, ro, ri, mode, arg, name))
              for o in ops}
    return L.family_kernel(dev, (op, xdt, odt, ro, ri, mode), op,
                           ("reduce", xdt, odt, ro, ri, mode, arg), makers)


def _reduction_vec_kernel(dev: R.Device, op: str, xdt: str, ro: int, mode: str) -> Any:
    """``reduction_vec_source``'s kernel, compiled with its family as one program."""
    makers = {o: (lambda name, o=o: reduction_vec_source(o, xdt, ro, mode, name)) for o in REDUCE}
    return L.family_kernel(dev, (op, xdt, ro, mode), op, ("reduce_vec", xdt, ro, mode), makers)


def _reduce_plan(op: str, out: View, x: View, axes: tuple[int, ...],
                 arg: bool = False) -> Callable[[View, View], None]:
    """The launcher reducing any ``x`` of this one's dtype, shape and strides over
    ``axes`` into an ``out`` of this one's (``x``'s shape with those axes 1)."""
    M = prod(out.shape)
    if M == 0:
        return L.noop
    dev = x.buffer.dev
    keep = [d for d in range(len(x.shape)) if d not in axes]
    oshape, (ost, xst) = L.coalesce(tuple(x.shape[d] for d in keep),
                                    [tuple(out.strides[d] for d in keep),
                                   tuple(x.strides[d] for d in keep)])
    ishape, (ist,) = L.coalesce(tuple(x.shape[d] for d in axes),
                                [tuple(x.strides[d] for d in axes)])
    K = prod(ishape)
    ro, ri = len(oshape), len(ishape)
    xdt, odt = x.dtype.name, out.dtype.name
    vec = not arg and xdt == odt and xdt != "float16"
    OUT, X = [L.view(0), *ost], [L.view(1), *xst]  # (the operands: out, x, then scratch)
    # Column sums (outputs side by side in x): 8 outputs per work item.
    if vec and ri == 1 and xst[-1] == 1 and ist[-1] != 1 and oshape[-1] >= 8:
        nl = oshape[-1]
        cmode, W = ("cols64", 64) if nl >= 64 else ("cols", 8)
        k = _reduction_vec_kernel(dev, op, xdt, ro, cmode)
        items = (M // nl) * -(-nl // W)
        return L.prepare(dev, [(k, [*OUT, *X, ist[0], *oshape[1:], K, 1, K, nl], L.ranges(items))])
    # One work item per output when the reduction is short, or when outputs sit
    # side by side in x and the reduced elements don't. Otherwise a work-group
    # per output (or per part of one, for few long reductions).
    if K <= 16 or (ist[-1] != 1 and xst[-1] == 1 and M >= 64) or \
            (dev.is_cpu and K <= SERIAL_MAX and M >= 4 * dev.compute_units):
        mode = "serial"
    else:
        mode = "tree"
    G = REDUCE_LOCAL
    parts = 1
    if mode == "tree":
        want = 4 * dev.compute_units
        if M < want and K > 8 * G and not arg:  # (an index can't be split)
            parts = min(-(-want // M), -(-K // (4 * G)))
    chunk = -(-K // parts)
    if mode == "tree" and vec and ri == 1 and ist[0] == 1:
        # contiguous rows: each work item folds its share 8 elements at a time
        rmode = "rows" if parts == 1 else "rows_partial"
        k = _reduction_vec_kernel(dev, op, xdt, ro, rmode)
        xargs = [*X, 1, *oshape[1:], K, parts, chunk]
        if parts == 1:
            return L.prepare(dev, [(k, [*OUT, *xargs], [((M * G,), (G,), None)])])
        first = L.prepare(dev, [(k, [L.mem(2), 0, *ost, *xargs], [((M * parts * G,), (G,), None)])])
        return _split(dev, first, M * parts * x.dtype.itemsize,
                      _partials_plan(op, dev, out, ost, oshape, xdt, parts))
    args = [*X, *ist, *oshape[1:], *ishape[1:], K, parts, chunk]
    if parts == 1:
        k = _reduction_kernel(dev, op, xdt, odt, ro, ri, mode, arg)
        sizes = L.ranges(M) if mode == "serial" else [((M * G,), (G,), None)]
        return L.prepare(dev, [(k, [*OUT, *args], sizes)])
    # two launches: `parts` partial results per output into scratch, then reduce those
    tdt = _AT_DTYPE[C.CTYPE[odt][1]]
    k = _reduction_kernel(dev, op, xdt, odt, ro, ri, "partial")
    first = L.prepare(dev, [(k, [L.mem(2), 0, *ost, *args], [((M * parts * G,), (G,), None)])])
    return _split(dev, first, M * parts * np.dtype(L.ARG[tdt]).itemsize,
                  _partials_plan(op, dev, out, ost, oshape, tdt, parts))


def _split(dev: R.Device, first: Callable[..., None], nbytes: int,
           second: Callable[..., None]) -> Callable[[View, View], None]:
    """A reduction in two launches: partial results into fresh scratch, then theirs."""
    def run(out: View, x: View) -> None:
        tmp = dev.alloc(nbytes, "reduction partials")
        first(out, x, tmp)
        second(out, tmp)

    return run


def _partials_plan(op: str, dev: R.Device, out: View, ost: list[int], oshape: list[int],
                   tdt: str, parts: int) -> Callable[[View, Buffer], None]:
    """Second launch of a split reduction, of (out, scratch): output o folds
    scratch[o*parts : (o+1)*parts]."""
    odt, ro, G = out.dtype.name, len(oshape), REDUCE_LOCAL
    k = _reduction_kernel(dev, op, tdt, odt, ro, 1, "tree")
    tst = [parts * prod(oshape[d + 1:]) for d in range(ro)]
    return L.prepare(dev, [(k, [L.view(0), *ost, L.mem(1), 0, *tst, 1, *oshape[1:], parts, 1, parts],
                            [((prod(oshape) * G,), (G,), None)])])


def _reduce(op: str, out: View, x: View, axes: tuple[int, ...], arg: bool = False) -> None:
    """Reduce ``x`` over ``axes`` into ``out`` (``x``'s shape with those axes 1),
    through the launcher prepared for this signature."""
    key = (_PLAN, op, out.dtype, x.dtype, x.shape, x.strides, out.strides, axes)
    p = x.buffer.dev.programs.get(key)
    if p is None:
        p = L.planned(x.buffer.dev, key, lambda: _reduce_plan(op, out, x, axes, arg))
    p(out, x)


_PLAN = "reduction plan"  # (the first item of a plan's key: never an op's name)


def reduction(op: str) -> Callable[..., None]:
    def kernel(out: View, x: View, axes: tuple[int, ...]) -> None:
        _reduce(op, out, x, axes)

    kernel.__name__ = op
    return kernel


def argreduction(op: str) -> Callable[..., None]:
    def kernel(out: View, x: View, axis: int) -> None:
        _reduce(op, out, x, (axis,), arg=True)

    kernel.__name__ = op
    return kernel
