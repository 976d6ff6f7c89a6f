"""Matmul on OpenCL: register-blocked kernels for CPUs (PoCL), a simple fallback, CLBlast's GEMM.

``matmul`` is the kernel rtx_opencl's table holds; it picks among the three.

    out[b] = a[b] @ b[b]      a: (B, n, k)   b: (B, k, m)   out: (B, n, m)

Each work item computes a block of RM rows x 8*RV columns of ``out`` in vector
accumulators (a BLIS-style micro kernel: per k step, RV vectors of a row of b,
RM broadcast scalars of a, RM*RV vector multiply-adds). No barriers: on a CPU
the caches do the tiling (``matmul_strip``'s local memory is one work item's
copy of b, which PoCL keeps per work-group, in cache).

* ``pack_b`` first copies b (any strides, zero padded) into contiguous panels
  of 8*RV columns, which ``matmul_vecp`` then streams: unit-stride, TLB-friendly
  reads and no ragged right edge. A broadcast b (batch stride 0) is packed once.
* ``matmul_strip`` takes a with few rows (up to ``STRIP_N``: the convolutions'
  forward W @ cols and weight gradient dY @ cols^T, Linear layers at small
  batch), or a short sum (up to ``STRIP_KMAX``: the convolutions' input
  gradient W^T @ dY, Linear weight gradients): a work item owns one strip of
  8*RV columns (up to ``STRIP_W`` adjacent ones where b's columns are
  contiguous) and a group of row blocks, and per block of ``STRIP_K`` rows
  copies b's strips (any strides; a transposed b 8 rows at a time through an
  in-register transpose) into local memory before running the row blocks over
  them. b is read once, with no packing pass and no packed copy; the
  accumulators are resumed from out after the first block, so each output
  still sums k in order. It also takes a second batch dim (heads viewed out
  of one tensor), and a product with a few columns runs as out^T = b^T @ a^T.
* ``matmul_vec_u`` reads b in place when b and out have column stride 1 and b is
  small (fits in cache).

Measured on PoCL, 2 cores (benchmarks/ops.py): 1024^3 float32 at 5-10x the
GFLOP/s of CLBlast on the same device; ``RTX_OPENCL_MATMUL=clblast`` selects
CLBlast for float32/float64 where pyclblast is installed. The models' shapes:
``benchmarks/opencl_matmul.py``. On an AMD Zen 4 the PyPI PoCL (LLVM 14) takes
the CPU for znver3 and emits AVX2 (16 ymm registers), and the 6x2 float8 tile
runs its FMAs at about the two cores' peak (~210 GF/s at 1024^3): what is left
for the other shapes is memory traffic, not the micro kernel (Zen 4 runs a
512-bit FMA as two 256-bit halves, so 16-wide vectors would not add FLOP/s).

PoCL (3.0, LLVM 14) does not inline OpenCL builtins: ``fma``, ``min``,
``vload8`` each become a call that spills the accumulators. Hence ``a * b + c``
with FP_CONTRACT (fused to an FMA), ternaries, and an unaligned vector typedef
instead of vload/vstore in the hot loops.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import View

from . import blas as BLAS
from . import codegen as C
from . import elementwise as E
from . import launch as L
from . import runtime as R


def _tile(acc: str) -> tuple[int, int, int]:
    """(RM rows, RV vectors of 8 columns, BN = 8 * RV columns) per work item: 12
    vector accumulators, which with two b vectors and one broadcast fill the 16
    AVX registers."""
    rv = 1 if acc in ("double", "long") else 2
    return 6, rv, 8 * rv


_SIG = """(__global {T}* restrict out, long o_off, long os0, long os1, long os2,
        __global const {T}* restrict a, long a_off, long as0, long as1, long as2,
        __global const {T}* restrict b, long b_off, long bs0, long bs1, long bs2,
        int n, int k, int m)"""


def _mac(acc: str, x: str, y: str, z: str) -> str:
    """z += x*y (fma for floating types: one instruction on FMA hardware)."""
    return f"{z} = {x} * {y} + {z};"   # FP_CONTRACT ON -> llvm.fmuladd -> vfmadd


def _cvt(acc: str, ctype: str, expr: str, width: int | None = None) -> str:
    if acc == ctype:
        return expr
    return f"convert_{acc}{width or ''}({expr})"


def _accumulators(w: Any, pad: str, ctype: str, A8: str, RM: int, RV: int) -> None:
    """A work item's RM row pointers into a (rows past n clamped to the last:
    computed redundantly, never stored) and its RM x RV vector accumulators."""
    for r in range(RM):
        w(f"{pad}__global const {ctype}* ap{r} = "
          f"a + (long)(row0 + {r} < n ? row0 + {r} : n - 1) * as1;")
        for v in range(RV):
            w(f"{pad}{A8} c{r}_{v} = ({A8})(0);")


def _multiply_add(w: Any, pad: str, ctype: str, acc: str, A8: str, RM: int, RV: int) -> None:
    """One k step: each row's element of a, broadcast, times b's RV vectors ``b<v>``."""
    for r in range(RM):
        w(f"{pad}const {A8} a{r} = ({A8})({_cvt(acc, ctype, f'ap{r}[0]')}); ap{r} += as2;")
        for v in range(RV):
            w(pad + _mac(acc, f"a{r}", f"b{v}", f"c{r}_{v}"))


def _store_rows(w: Any, pad: str, ctype: str, acc: str, RM: int, RV: int,
                store: Callable[[int, str], list[str]]) -> None:
    """Each row of the block below n: its pointer ``op`` into out, then the
    lines ``store(v, value)`` gives for each of its RV accumulator vectors."""
    for r in range(RM):
        w(f"{pad}if (row0 + {r} < n) {{")
        w(f"{pad}    __global {ctype}* op = out + (long)(row0 + {r}) * os1 + (long)col0 * os2;")
        for v in range(RV):
            for line in store(v, _cvt(ctype, acc, f"c{r}_{v}", 8)):
                w(f"{pad}    {line}")
        w(f"{pad}}}")


def _vec_kernel(w: Any, ctype: str, acc: str) -> None:
    """Write (``w``, a line at a time) the kernel for b and out with column
    stride 1: b read straight from memory, 8 at a time."""
    RM, RV, BN = _tile(acc)
    name = "matmul_vec_u"
    A8 = f"{acc}8"
    w(f"__kernel void {name}" + _SIG.format(T=ctype) + "\n{")
    w(f"    /* work item -> RM={RM} rows x BN={BN} columns of out[batch] */")
    w(f"    const int col0 = get_global_id(0) * {BN};")
    w(f"    const int row0 = get_global_id(1) * {RM};")
    w("    const long bt = get_global_id(2);")
    w("    if (row0 >= n || col0 >= m) return;")
    w("    a += a_off + bt * as0;  b += b_off + bt * bs0;  out += o_off + bt * os0;")
    w(f"    if (col0 + {BN} <= m) {{")
    w("        /* ---- fast path: full column block; rows past n are clamped")
    w("           (computed redundantly, never stored) ---- */")
    _accumulators(w, " " * 8, ctype, A8, RM, RV)
    w("        __global const %s* bp = b + (long)col0 * bs2;" % ctype)
    w("        for (int kk = 0; kk < k; ++kk) {")
    for v in range(RV):
        ld = f"*(__global const {ctype}8u*)(bp + {8 * v})"
        w(f"            const {A8} b{v} = {_cvt(acc, ctype, ld, 8)};")
    _multiply_add(w, " " * 12, ctype, acc, A8, RM, RV)
    w("            bp += bs1;")
    w("        }")
    _store_rows(w, " " * 8, ctype, acc, RM, RV,
                lambda v, val: [f"*(__global {ctype}8u*)(op + {8 * v}) = {val};"])
    w("    } else {")
    w("        /* ---- slow path: partial column block, scalar dot products ---- */")
    w(f"        for (int r = row0; r < row0 + {RM} && r < n; ++r)")
    w("        for (int c = col0; c < m; ++c) {")
    w(f"            {acc} s = 0;")
    w("            __global const %s* ap = a + (long)r * as1;" % ctype)
    w("            __global const %s* bp = b + (long)c * bs2;" % ctype)
    w("            for (int kk = 0; kk < k; ++kk)")
    w("                " + _mac(acc, _cvt(acc, ctype, "ap[kk * as2]"),
                                _cvt(acc, ctype, "bp[kk * bs1]"), "s"))
    w(f"            out[(long)r * os1 + (long)c * os2] = {_cvt(ctype, acc, 's')};")
    w("        }")
    w("    }")
    w("}")


def _pack_kernels(w: Any, ctype: str, acc: str) -> None:
    """Write (``w``, a line at a time) ``pack_b`` and the kernel that reads its panels."""
    RM, RV, BN = _tile(acc)
    A8 = f"{acc}8"
    A8u = f"{ctype}8u"
    full = "\n".join(
        f"            *(__global {A8}*)(dst + {8 * v}) = "
        f"{_cvt(acc, ctype, f'*(__global const {A8u}*)(src + {8 * v})', 8)};"
        for v in range(RV))
    w(f"""/* Pack b (any strides) into column panels of width {BN}:
   pk[((bt * npan + p) * k + kk) * {BN} + j] = b[bt, kk, p*{BN} + j]  (0 past m).
   Gives the matmul unit-stride, aligned, TLB-friendly streaming of b and
   removes the column-edge special case. A work item copies PK={PACK_K} rows of
   one panel: vector copies where b's columns are contiguous, else element by
   element, each row's {BN} columns in turn (a transposed b: each column's
   cache line serves the PK rows). */
__kernel void pack_b(__global {acc}* restrict pk,
        __global const {ctype}* restrict b, long b_off, long bs0, long bs1, long bs2,
        int k, int m)
{{
    const int pan = get_global_id(0), kk0 = get_global_id(1) * {PACK_K};
    const long bt = get_global_id(2);
    const int npan = (m + {BN - 1}) / {BN};
    if (kk0 >= k) return;
    const int col0 = pan * {BN};
    const int nk = k - kk0 < {PACK_K} ? k - kk0 : {PACK_K};
    __global const {ctype}* src = b + b_off + bt * bs0 + (long)kk0 * bs1 + (long)col0 * bs2;
    __global {acc}* dst = pk + ((bt * npan + pan) * (long)k + kk0) * {BN};
    if (bs2 == 1 && col0 + {BN} <= m) {{
        for (int r = 0; r < nk; ++r) {{
{full}
            src += bs1;  dst += {BN};
        }}
    }} else {{
        const int nc = m - col0 < {BN} ? m - col0 : {BN};
        for (int r = 0; r < nk; ++r) {{
            for (int j = 0; j < {BN}; ++j)
                dst[j] = j < nc ? {_cvt(acc, ctype, "src[j * bs2]")} : ({acc})(0);
            src += bs1;  dst += {BN};
        }}
    }}
}}
""")
    w(f"__kernel void matmul_vecp(__global {ctype}* restrict out, long o_off, long os0, long os1, long os2,")
    w(f"        __global const {ctype}* restrict a, long a_off, long as0, long as1, long as2,")
    w(f"        __global const {acc}* restrict pk, long pk_bstride, int n, int k, int m)")
    w("{")
    w(f"    /* work item -> RM={RM} rows x BN={BN} columns; b from packed panels */")
    w("    const int pan = get_global_id(0);")
    w(f"    const int col0 = pan * {BN};")
    w(f"    const int row0 = get_global_id(1) * {RM};")
    w("    const long bt = get_global_id(2);")
    w("    if (row0 >= n || col0 >= m) return;")
    w("    a += a_off + bt * as0;  out += o_off + bt * os0;")
    w(f"    __global const {A8}* bp = (__global const {A8}*)(pk + bt * pk_bstride + (long)pan * k * {BN});")
    _accumulators(w, " " * 4, ctype, A8, RM, RV)
    w("    for (int kk = 0; kk < k; ++kk) {")
    for v in range(RV):
        w(f"        const {A8} b{v} = bp[{v}];")
    _multiply_add(w, " " * 8, ctype, acc, A8, RM, RV)
    w(f"        bp += {RV};")
    w("    }")
    w(f"    const bool vec_store = col0 + {BN} <= m && os2 == 1;")
    _store_rows(w, " " * 4, ctype, acc, RM, RV, lambda v, val: [
        f"{{ const {ctype}8 t = {val};",
        f"  if (vec_store) *(__global {ctype}8u*)(op + {8 * v}) = t;",
        "  else {",
        *(f"    if (col0 + {8 * v + i} < m) op[{8 * v + i}L * os2] = t.s{i};" for i in range(8)),
        "  }}"])
    w("}")


def _strip_kernel(w: Any, ctype: str, acc: str, SW: int) -> None:
    """Write (``w``, a line at a time) ``matmul_strip``: a work item owns ``sw``
    adjacent strips of BN columns of out and a group of its row blocks; per
    block of KC rows of b it copies b's strips (any strides) into local memory,
    then runs each row block over each strip, the accumulators resumed from
    out after the first block (k is still summed in order: the same bits as
    one pass). Several strips at once read a row-major b's rows sw*BN columns
    at a time (fewer DRAM pages opened per byte than one strip's 64 bytes)."""
    RM, RV, BN = _tile(acc)
    A8, T8u = f"{acc}8", f"{ctype}8u"
    KC = STRIP_K
    w(f"__kernel void matmul_strip" + _SIG.format(T=ctype)[:-1]
      + ",\n        int rpg, int sw, int nbi, long osi, long asi, long bsi)\n{")
    w("    /* (batch: get_global_id(2) = outer * nbi + inner; strides s0 outer, si inner) */")
    w(f"    __local {A8} strip[{SW * KC * RV}];"
      f"  /* up to {SW} strips of KC={KC} rows x BN={BN} columns */")
    w(f"    const int c00 = get_global_id(0) * sw * {BN};")
    w("    const int rb0 = get_global_id(1) * rpg;")
    w("    const long bg = get_global_id(2), bt = bg / nbi, bi = bg - bt * nbi;")
    w(f"    const int nrb = (n + {RM - 1}) / {RM};")
    w("    if (c00 >= m || rb0 >= nrb) return;")
    w("    const int rb1 = rb0 + rpg < nrb ? rb0 + rpg : nrb;")
    w("    a += a_off + bt * as0 + bi * asi;  b += b_off + bt * bs0 + bi * bsi;")
    w("    out += o_off + bt * os0 + bi * osi;")
    w(f"    for (int k0 = 0; k0 < k; k0 += {KC}) {{")
    w(f"        const int kn = k - k0 < {KC} ? k - k0 : {KC};")
    w(f"        if (bs2 == 1 && c00 + sw * {BN} <= m) {{")
    w("            /* every strip full, columns contiguous: rows of sw*BN columns */")
    w(f"            __global const {ctype}* src = b + (long)k0 * bs1 + c00;")
    w("            for (int r = 0; r < kn; ++r) {")
    w(f"                __local {A8}* dst = strip + r * {RV};")
    w("                for (int s = 0; s < sw; ++s) {")
    for v in range(RV):
        ld = f"*(__global const {T8u}*)(src + s * {BN} + {8 * v})"
        w(f"                    dst[{v}] = {_cvt(acc, ctype, ld, 8)};")
    w(f"                    dst += {KC * RV};")
    w("                }")
    w("                src += bs1;")
    w("            }")
    w("        } else for (int s = 0; s < sw; ++s) {")
    w(f"            const int col0 = c00 + s * {BN};")
    w("            if (col0 >= m) break;")
    w(f"            const int nc = m - col0 < {BN} ? m - col0 : {BN};")
    w(f"            __global const {ctype}* src = b + (long)k0 * bs1 + (long)col0 * bs2;")
    w(f"            __local {A8}* dst = strip + s * {KC * RV};")
    w("            int r = 0;")
    w(f"            if (bs2 == 1 && nc == {BN}) {{")
    w("                for (; r < kn; ++r) {")
    for v in range(RV):
        ld = f"*(__global const {T8u}*)(src + {8 * v})"
        w(f"                    dst[{v}] = {_cvt(acc, ctype, ld, 8)};")
    w(f"                    src += bs1;  dst += {RV};")
    w("                }")
    w(f"            }} else if (bs1 == 1 && nc == {BN}) {{")
    w("                /* b transposed (k contiguous): 8 rows at a time, each column's 8")
    w("                   values one vector load, transposed in registers */")
    w("                for (; r + 8 <= kn; r += 8) {")
    for jj in range(BN):
        ld = f"*(__global const {T8u}*)(src + {jj} * bs2)"
        w(f"                    const {A8} t{jj} = {_cvt(acc, ctype, ld, 8)};")
    for ii in range(8):
        for v in range(RV):
            els = ", ".join(f"t{8 * v + c}.s{ii}" for c in range(8))
            w(f"                    dst[{ii * RV + v}] = ({A8})({els});")
    w(f"                    src += 8;  dst += {8 * RV};")
    w("                }")
    w("            }")
    w(f"            __local {acc}* d = (__local {acc}*)dst;")
    w("            for (; r < kn; ++r) {")
    w(f"                for (int j = 0; j < {BN}; ++j)")
    w(f"                    d[j] = j < nc ? {_cvt(acc, ctype, 'src[j * bs2]')} : ({acc})(0);")
    w(f"                src += bs1;  d += {BN};")
    w("            }")
    w("        }")
    w("        for (int s = 0; s < sw; ++s) {")
    w(f"            const int col0 = c00 + s * {BN};")
    w("            if (col0 >= m) break;")
    w(f"            const int nc = m - col0 < {BN} ? m - col0 : {BN};")
    w(f"            const bool vec = nc == {BN} && os2 == 1;")
    w("            for (int rb = rb0; rb < rb1; ++rb) {")
    w(f"                const int row0 = rb * {RM};")
    p = " " * 16
    for r in range(RM):
        w(f"{p}__global const {ctype}* ap{r} = "
          f"a + (long)(row0 + {r} < n ? row0 + {r} : n - 1) * as1 + (long)k0 * as2;")
    for r in range(RM):
        w(f"{p}__global {ctype}* op{r} = "
          f"out + (long)(row0 + {r} < n ? row0 + {r} : n - 1) * os1 + (long)col0 * os2;")
        for v in range(RV):
            els = ", ".join(f"{8 * v + i} < nc ? {_cvt(acc, ctype, f'op{r}[{8 * v + i}L * os2]')}"
                            f" : ({acc})(0)" for i in range(8))
            w(f"{p}{A8} c{r}_{v} = k0 == 0 ? ({A8})(0) : vec ? "
              f"{_cvt(acc, ctype, f'*(__global {T8u}*)(op{r} + {8 * v})', 8)} : ({A8})({els});")
    w(f"{p}__local const {A8}* bp = strip + s * {KC * RV};")
    w(f"{p}for (int kk = 0; kk < kn; ++kk) {{")
    for v in range(RV):
        w(f"{p}    const {A8} b{v} = bp[{v}];")
    _multiply_add(w, p + "    ", ctype, acc, A8, RM, RV)
    w(f"{p}    bp += {RV};")
    w(f"{p}}}")
    for r in range(RM):
        w(f"{p}if (row0 + {r} < n) {{")
        for v in range(RV):
            w(f"{p}    {{ const {ctype}8 t = {_cvt(ctype, acc, f'c{r}_{v}', 8)};")
            w(f"{p}      if (vec) *(__global {T8u}*)(op{r} + {8 * v}) = t;")
            w(f"{p}      else {{")
            for i in range(8):
                w(f"{p}        if ({8 * v + i} < nc) op{r}[{8 * v + i}L * os2] = t.s{i};")
            w(f"{p}      }}}}")
        w(f"{p}}}")
    w("            }")
    w("        }")
    w("    }")
    w("}")


def source(ctype: str, acc: str, strip_w: int | None = None) -> str:
    """The program for one dtype; ``strip_w``: the most strips a ``matmul_strip``
    work item holds in local memory (``_strip_w``; default ``STRIP_W``)."""
    strip_w = STRIP_W if strip_w is None else strip_w
    head = "#pragma OPENCL FP_CONTRACT ON\n"
    if "double" in (ctype, acc):
        head += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    head += (f"typedef {ctype}8 {ctype}8u __attribute__((aligned(sizeof({ctype}))));"
             "  /* unaligned vector */\n")
    lines: list[str] = []
    _pack_kernels(lines.append, ctype, acc)
    lines.append("")
    _vec_kernel(lines.append, ctype, acc)
    lines.append("")
    if strip_w:
        _strip_kernel(lines.append, ctype, acc, strip_w)
    return head + "\n".join(lines) + "\n"


_I64, _I32 = np.int64, np.int32
ARG_DTYPES = {
    "matmul_vec_u": [None] + [_I64] * 4 + [None] + [_I64] * 4 + [None] + [_I64] * 4 + [_I32] * 3,
    "pack_b": [None, None, _I64, _I64, _I64, _I64, _I32, _I32],
    "matmul_vecp": [None] + [_I64] * 4 + [None] + [_I64] * 4 + [None, _I64] + [_I32] * 3,
    "matmul_strip": [None] + [_I64] * 4 + [None] + [_I64] * 4 + [None] + [_I64] * 4 + [_I32] * 6
                    + [_I64] * 3,
}
STRIP_W = 4            # at most this many adjacent strips per matmul_strip work item
STRIP_K = 256          # rows of b per block of matmul_strip (BN * STRIP_K in local memory)
PACK_K = 32            # rows of b per pack_b work item
SMALL_B_BYTES = 1 << 19  # b up to this size stays in cache: don't pack it
VEC_L1 = 8               # work-group (1, VEC_L1, 1) for the packed kernel. PoCL
                         # compiles each kernel once per local size: keep it fixed


def _ceil(x: int, d: int) -> int:
    return -(-x // d)


STRIP_N = 96            # up to this many rows of a, or
STRIP_KMAX = 512        # up to this long a sum: matmul_strip (b's strips copied, not packed)
STRIP_ITEMS = 8         # at least this many work items where the rows allow (2 cores' balance;
                        # more re-read b's strips once per group of rows)


def _strip_w(dev: Any) -> int:
    """The most strips of b (``STRIP_K`` rows of 64 bytes each) a
    ``matmul_strip`` work item holds in ``dev``'s local memory, using at most
    half of it (PoCL: 1 MiB; a GPU: 32-64 KiB); 0 where not even one fits (then
    the program has no ``matmul_strip``)."""
    return next((w for w in (STRIP_W, 2, 1) if w * STRIP_K * 64 <= dev.local_mem // 2), 0)


def _strip(B: int, n: int, k: int, m: int, RM: int, BN: int, cols_contiguous: bool,
           strip_w: int) -> tuple[int, int, int, int] | None:
    """(work items along the columns, row-block groups, row blocks per group,
    strips per work item) for ``matmul_strip``, or None where the shape is for
    another kernel. ``strip_w``: the device's ``_strip_w``."""
    if (n > STRIP_N and k > STRIP_KMAX) or strip_w == 0:
        return None
    nrb, npan = _ceil(n, RM), _ceil(m, BN)
    sw = min(strip_w, npan) if cols_contiguous and _ceil(npan, strip_w) * B >= STRIP_ITEMS else 1
    ncw = _ceil(npan, sw)
    groups = min(nrb, _ceil(STRIP_ITEMS, ncw * B))
    rpg = _ceil(nrb, groups)
    return ncw, _ceil(nrb, rpg), rpg, sw


def launch(dev: Any, kernels: dict[str, Any], itemsize: int,
           out: tuple, a: tuple, b: tuple, B: int, n: int, k: int, m: int) -> None:
    """Enqueue out[i] = a[i] @ b[i] for i < B. ``out``, ``a``, ``b`` are
    (buffer, offset, (batch stride, row stride, col stride)) in elements;
    ``out`` has column stride 1 or any strides (then stored element by element)."""
    RM, RV, BN = _tile("double" if itemsize == 8 else "float")
    npan = _ceil(m, BN)
    q = dev.queue
    (ob, oo, ost), (ab, ao, ast), (bb, bo, bst) = out, a, b
    st = _strip(B, n, k, m, RM, BN, bst[2] == 1, _strip_w(dev))
    if st is not None:
        kernels["matmul_strip"](q, (st[0], st[1], B), (1, 1, 1), ob, oo, *ost, ab, ao, *ast,
                                bb, bo, *bst, n, k, m, st[2], st[3], 1, 0, 0, 0)
        return
    if bst[2] == 1 and ost[2] == 1 and k * m * itemsize <= SMALL_B_BYTES:
        gn = _ceil(_ceil(n, RM), 4) * 4
        kernels["matmul_vec_u"](q, (npan, gn, B), (1, 4, 1), ob, oo, *ost, ab, ao, *ast,
                                bb, bo, *bst, n, k, m)
        return
    nbp = 1 if bst[0] == 0 else B  # a broadcast b is packed once
    panel = npan * BN * k
    scratch = dev.alloc(nbp * panel * itemsize, "matmul packing space")
    kernels["pack_b"](q, (npan, _ceil(k, PACK_K), nbp), (1, 1, 1), scratch.mem, bb, bo, *bst, k, m)
    gn = _ceil(_ceil(n, RM), VEC_L1) * VEC_L1
    kernels["matmul_vecp"](q, (npan, gn, B), (1, VEC_L1, 1), ob, oo, *ost, ab, ao, *ast,
                           scratch.mem, 0 if nbp == 1 else panel, n, k, m)


def _launch_plan(dev: Any, kernels: dict[str, Any], itemsize: int, ost: tuple, ast: tuple,
                 bst: tuple, B: int, n: int, k: int, m: int,
                 inner: tuple = (1, 0, 0, 0)) -> Callable[[View, View, View], None]:
    """``launch`` prepared for one signature, as a function of the views (out, a, b)
    (their offsets: where batch 0 starts). ``inner``: (count, out, a, b strides)
    of a second batch dim inside the first (B counts both), for ``matmul_strip``
    only (the caller checks ``_strip``)."""
    RM, RV, BN = _tile("double" if itemsize == 8 else "float")
    npan = _ceil(m, BN)
    sides = [L.view(0), *ost, L.view(1), *ast]
    st = _strip(B, n, k, m, RM, BN, bst[2] == 1, _strip_w(dev))
    if st is not None:
        return L.prepare(dev, [(kernels["matmul_strip"],
                                [*sides, L.view(2), *bst, n, k, m, st[2], st[3], *inner],
                                [((st[0], st[1], B), (1, 1, 1), None)])])
    assert inner[0] == 1
    if bst[2] == 1 and ost[2] == 1 and k * m * itemsize <= SMALL_B_BYTES:
        gn = _ceil(_ceil(n, RM), 4) * 4
        return L.prepare(dev, [(kernels["matmul_vec_u"], [*sides, L.view(2), *bst, n, k, m],
                                [((npan, gn, B), (1, 4, 1), None)])])
    nbp = 1 if bst[0] == 0 else B  # a broadcast b is packed once
    panel = npan * BN * k
    nbytes = nbp * panel * itemsize
    gn = _ceil(_ceil(n, RM), VEC_L1) * VEC_L1
    # (operands: out, a, b, then the packing space)
    pstride = 0 if nbp == 1 else panel
    run = L.prepare(dev, [(kernels["pack_b"], [L.mem(3), L.view(2), *bst, k, m],
                           [((npan, _ceil(k, PACK_K), nbp), (1, 1, 1), None)]),
                          (kernels["matmul_vecp"], [*sides, L.mem(3), pstride, n, k, m],
                           [((npan, gn, B), (1, VEC_L1, 1), None)])])

    def packed(out: View, a: View, b: View) -> None:
        run(out, a, b, dev.alloc(nbytes, "matmul packing space"))

    return packed


# -- the fallback kernel: one dot product per work item -------------------------------


def simple_source(dt: str, rank: int) -> tuple[str, list[str]]:
    """One work item per output element: a dot product of length K along a's
    row and b's column (the fallback for shapes the tiled kernel doesn't take)."""
    params, kinds = C.ptr_params("out", dt, rank, False)
    for name in ("pa", "pb"):
        p, k = C.ptr_params(name, dt, rank)
        params += p
        kinds += k
    params += ["long ask", "long bsk", "long K"] + [f"long n{d}" for d in range(1, rank)]
    kinds += ["long"] * (3 + rank - 1)
    ct = C.CTYPE[dt][1]
    acc = {"float16": "float", "bool": "int"}.get(dt, ct)
    body = (C.index_math(rank, ["out", "pa", "pb"])
            + f"""
    {acc} acc = 0;
    for (long kk = 0; kk < K; kk++)
        acc += ({acc}){C.load(dt, 'pa', 'p_pa + kk * ask')} * ({acc}){C.load(dt, 'pb', 'p_pb + kk * bsk')};
    {C.store(dt, 'out', 'p_out', 'acc')}""")
    return C.kernel_source(f"matmul {dt}, one dot product per work item", {dt}, params, body), kinds


# -- the kernel the table holds ------------------------------------------------------------


def _matmul_simple(out: View, a: View, b: View) -> Callable[[View, View, View], None]:
    """The fallback kernel's launcher for the signature of (out, a, b)."""
    *batch, n, m = out.shape
    dev = out.buffer.dev
    nb = len(batch)
    # the output's index space (batch..., n, m); a doesn't vary along m, b along n
    sa = tuple(a.strides[:nb]) + (a.strides[-2], 0)
    sb = tuple(b.strides[:nb]) + (0, b.strides[-1])
    dims, (ost, ast, bst) = L.coalesce(out.shape, [out.strides, sa, sb])
    dt, rank = out.dtype.name, len(dims)
    k = L.kernel(dev, ("matmul_simple", dt, rank), lambda: simple_source(dt, rank))
    return L.prepare(dev, [(k, [L.view(0), *ost, L.view(1), *ast, L.view(2), *bst, a.strides[-1],
                                b.strides[-2], a.shape[-1], *dims[1:]], L.ranges(prod(out.shape)))])


def _matmul_kernels(dev: R.Device, dt: str) -> dict[str, Any]:
    key = ("matmul", dt)
    ks = dev.programs.get(key)
    if ks is None:
        def bind(prg: Any) -> dict[str, Any]:
            ks = {}
            for name, arg_dtypes in ARG_DTYPES.items():
                if name != "matmul_strip" or _strip_w(dev):
                    ks[name] = L.typed(R.cl.Kernel(prg, name), arg_dtypes)
            return ks

        ct = C.CTYPE[dt][1]
        ks = dev.launcher(key, lambda: dev.build(source(ct, ct, _strip_w(dev)), f"matmul ({dt})"),
                          bind)
    return ks


def matmul(out: View, a: View, b: View) -> None:
    key = (_PLAN, out.dtype, out.shape, out.strides, a.shape, a.strides, b.shape, b.strides)
    p = out.buffer.dev.programs.get(key)
    if p is None:
        p = L.planned(out.buffer.dev, key, lambda: _plan(out, a, b))
    p(out, a, b)


_PLAN = "matmul plan"  # (the first item of a plan's key: never an op's name)


def _operands_swapped(f: Callable[[View, View, View], None]) -> Callable[[View, View, View], None]:
    """``f`` planned for out^T = b^T @ a^T: its a is our b, its b our a."""
    return lambda out, a, b: f(out, b, a)


def _batch_loop(dev: Any, ks: dict[str, Any], isz: int, bdims: list[int], bstrides: tuple,
                strides: tuple, n: int, K: int, m: int) -> Callable[[View, View, View], None]:
    """Batch dims that don't merge into one: a launch per index of the outer ones."""
    obs, abs_, bbs = bstrides
    ost, ast, bst = (tuple(s_[-2:]) for s_ in strides)

    def own(out: View, a: View, b: View) -> None:
        for idx in np.ndindex(*bdims[:-1]):
            oo = out.offset + sum(i * s for i, s in zip(idx, obs))
            ao = a.offset + sum(i * s for i, s in zip(idx, abs_))
            bo = b.offset + sum(i * s for i, s in zip(idx, bbs))
            launch(dev, ks, isz, (out.buffer.mem, oo, (obs[-1], *ost)),
                   (a.buffer.mem, ao, (abs_[-1], *ast)), (b.buffer.mem, bo, (bbs[-1], *bst)),
                   bdims[-1], n, K, m)

    return own


def _plan(out: View, a: View, b: View) -> Callable[[View, View, View], None]:
    """matmul's launcher for the signature (dtype, shapes, strides) of (out, a, b)."""
    *batch, n, m = out.shape
    K = a.shape[-1]
    if prod(out.shape) == 0:
        return L.noop
    if K == 0:
        return lambda out, a, b: E.full(out, 0)
    dt = out.dtype.name
    if dt in ("bool", "float16"):  # (bool: logical; half: accumulates in float)
        return _matmul_simple(out, a, b)
    dev = out.buffer.dev
    nb = len(batch)
    if nb:
        bdims, (obs, abs_, bbs) = L.coalesce(tuple(batch), [out.strides[:nb], a.strides[:nb],
                                                            b.strides[:nb]])
    else:
        bdims, (obs, abs_, bbs) = [1], ([0], [0], [0])
    ks = _matmul_kernels(dev, dt)
    isz = out.dtype.itemsize
    RM, _, BN = _tile("double" if isz == 8 else "float")
    os12, as12, bs12 = out.strides[-2:], a.strides[-2:], b.strides[-2:]
    flip = m < BN // 2 and n > m
    if flip:
        # a few columns (a matrix times vectors): out^T = b^T @ a^T, so the
        # long side fills the kernels' column vectors
        n, m = m, n
        os12, as12, bs12 = os12[::-1], bs12[::-1], as12[::-1]
        abs_, bbs = bbs, abs_
    own: Callable[[View, View, View], None] | None = None
    if len(bdims) == 1:  # (one batch dim, the kernels' own)
        own = _launch_plan(dev, ks, isz, (obs[-1], *os12), (abs_[-1], *as12),
                           (bbs[-1], *bs12), bdims[-1], n, K, m)
    elif len(bdims) == 2 and _strip(bdims[0] * bdims[1], n, K, m, RM, BN, bs12[1] == 1,
                                    _strip_w(dev)) is not None:
        # two batch dims that don't merge (attention's heads as views of one
        # tensor): one launch of the strip kernel, which takes both
        own = _launch_plan(dev, ks, isz, (obs[0], *os12), (abs_[0], *as12), (bbs[0], *bs12),
                           bdims[0] * bdims[1], n, K, m, (bdims[1], obs[1], abs_[1], bbs[1]))
    if own is None:  # (the loop takes the product as it came)
        if flip:
            n, m, abs_, bbs = m, n, bbs, abs_
        own = _batch_loop(dev, ks, isz, bdims, (obs, abs_, bbs),
                          (out.strides, a.strides, b.strides), n, K, m)
    elif flip:
        own = _operands_swapped(own)
    ours = own

    def run(out: View, a: View, b: View) -> None:
        if BLAS.enabled() and BLAS.gemm(out, a, b):  # (RTX_OPENCL_MATMUL, read at each call)
            return
        ours(out, a, b)

    return run
