"""Matmul on OpenCL: register-blocked kernels written for CPUs (PoCL), and
CLBlast's GEMM (through ``pyclblast``) on request.

    out[b] = a[b] @ b[b]      a: (B, n, k)   b: (B, k, m)   out: (B, n, m)

Each work item computes a block of RM rows x 8*RV columns of ``out`` in vector
accumulators (a BLIS-style micro kernel: per k step, RV vectors of a row of b,
RM broadcast scalars of a, RM*RV vector multiply-adds). No local memory, no
barriers: on a CPU the caches do the tiling.

* ``pack_b`` first copies b (any strides, zero padded) into contiguous panels
  of 8*RV columns, which ``matmul_vecp`` then streams: unit-stride, TLB-friendly
  reads and no ragged right edge. A broadcast b (batch stride 0) is packed once.
* ``matmul_vec_u`` reads b in place when b and out have column stride 1 and b is
  small (fits in cache) or a has few rows (packing would triple b's traffic).

Measured on PoCL, 2 cores (benchmarks/ops.py): 1024^3 float32 at 5-10x the
GFLOP/s of CLBlast on the same device; ``RTX_OPENCL_MATMUL=clblast`` selects
CLBlast for float32/float64 where pyclblast is installed.

PoCL (3.0, LLVM 14) does not inline OpenCL builtins: ``fma``, ``min``,
``vload8`` each become a call that spills the accumulators. Hence ``a * b + c``
with FP_CONTRACT (fused to an FMA), ternaries, and an unaligned vector typedef
instead of vload/vstore in the hot loops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

def _vec_shape(acc: str) -> tuple[int, int]:
    """(RM rows, RV vectors of 8 columns) per work item: 12 vector accumulators,
    which with two b vectors and one broadcast fill the 16 AVX registers."""
    if acc in ("double", "long"):
        return 6, 1
    return 6, 2


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


def _vec_kernel(ctype: str, acc: str) -> str:
    """b and out with column stride 1: b read straight from memory, 8 at a time."""
    RM, RV = _vec_shape(acc)
    BN = 8 * RV
    name = "matmul_vec_u"
    A8 = f"{acc}8"
    L = []
    w = L.append
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
    for r in range(RM):
        w(f"        __global const {ctype}* ap{r} = a + (long)(row0 + {r} < n ? row0 + {r} : n - 1) * as1;")
        for v in range(RV):
            w(f"        {A8} c{r}_{v} = ({A8})(0);")
    w("        __global const %s* bp = b + (long)col0 * bs2;" % ctype)
    w("        for (int kk = 0; kk < k; ++kk) {")
    for v in range(RV):
        ld = f"*(__global const {ctype}8u*)(bp + {8 * v})"
        w(f"            const {A8} b{v} = {_cvt(acc, ctype, ld, 8)};")
    for r in range(RM):
        w(f"            const {A8} a{r} = ({A8})({_cvt(acc, ctype, f'ap{r}[0]')}); ap{r} += as2;")
        for v in range(RV):
            w("            " + _mac(acc, f"a{r}", f"b{v}", f"c{r}_{v}"))
    w("            bp += bs1;")
    w("        }")
    for r in range(RM):
        w(f"        if (row0 + {r} < n) {{")
        w(f"            __global {ctype}* op = out + (long)(row0 + {r}) * os1 + (long)col0 * os2;")
        for v in range(RV):
            val = _cvt(ctype, acc, f"c{r}_{v}", 8)
            w(f"            *(__global {ctype}8u*)(op + {8 * v}) = {val};")
        w("        }")
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
    return "\n".join(L)


def _pack_kernels(ctype: str, acc: str) -> str:
    RM, RV = _vec_shape(acc)
    BN = 8 * RV
    A8 = f"{acc}8"
    L = []
    w = L.append
    w(f"""/* Pack b (any strides) into column panels of width {BN}:
   pk[((bt * npan + p) * k + kk) * {BN} + j] = b[bt, kk, p*{BN} + j]  (0 past m).
   Gives the matmul unit-stride, aligned, TLB-friendly streaming of b and
   removes the column-edge special case. */
__kernel void pack_b(__global {acc}* restrict pk,
        __global const {ctype}* restrict b, long b_off, long bs0, long bs1, long bs2,
        int k, int m)
{{
    const int j = get_global_id(0), kk = get_global_id(1);
    const long bt = get_global_id(2);
    const int npan = (m + {BN - 1}) / {BN};
    if (kk >= k || j >= npan * {BN}) return;
    {ctype} v = 0;
    if (j < m) v = b[b_off + bt * bs0 + kk * bs1 + j * bs2];
    pk[((bt * npan + j / {BN}) * k + kk) * {BN} + j % {BN}] = {_cvt(acc, ctype, "v")};
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
    for r in range(RM):
        w(f"    __global const {ctype}* ap{r} = a + (long)(row0 + {r} < n ? row0 + {r} : n - 1) * as1;")
        for v in range(RV):
            w(f"    {A8} c{r}_{v} = ({A8})(0);")
    w("    for (int kk = 0; kk < k; ++kk) {")
    for v in range(RV):
        w(f"        const {A8} b{v} = bp[{v}];")
    for r in range(RM):
        w(f"        const {A8} a{r} = ({A8})({_cvt(acc, ctype, f'ap{r}[0]')}); ap{r} += as2;")
        for v in range(RV):
            w("        " + _mac(acc, f"a{r}", f"b{v}", f"c{r}_{v}"))
    w(f"        bp += {RV};")
    w("    }")
    w(f"    const bool vec_store = col0 + {BN} <= m && os2 == 1;")
    for r in range(RM):
        w(f"    if (row0 + {r} < n) {{")
        w(f"        __global {ctype}* op = out + (long)(row0 + {r}) * os1 + (long)col0 * os2;")
        for v in range(RV):
            val = _cvt(ctype, acc, f"c{r}_{v}", 8)
            w(f"        {{ const {ctype}8 t = {val};")
            w(f"          if (vec_store) *(__global {ctype}8u*)(op + {8 * v}) = t;")
            w("          else {")
            for i in range(8):
                w(f"            if (col0 + {8 * v + i} < m) op[{8 * v + i}L * os2] = t.s{i};")
            w("          }}")
        w("    }")
    w("}")
    return "\n".join(L)


def source(ctype: str, acc: str) -> str:
    head = "#pragma OPENCL FP_CONTRACT ON\n"
    if "double" in (ctype, acc):
        head += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    head += (f"typedef {ctype}8 {ctype}8u __attribute__((aligned(sizeof({ctype}))));"
             "  /* unaligned vector */\n")
    return head + _pack_kernels(ctype, acc) + "\n\n" + _vec_kernel(ctype, acc) + "\n"


_I64, _I32 = np.int64, np.int32
ARG_DTYPES = {
    "matmul_vec_u": [None] + [_I64] * 4 + [None] + [_I64] * 4 + [None] + [_I64] * 4 + [_I32] * 3,
    "pack_b": [None, None, _I64, _I64, _I64, _I64, _I32, _I32],
    "matmul_vecp": [None] + [_I64] * 4 + [None] + [_I64] * 4 + [None, _I64] + [_I32] * 3,
}
SMALL_N = 16            # fewer rows of a than this: don't pack b
SMALL_B_BYTES = 1 << 19  # b up to this size stays in cache: don't pack it
VEC_L1 = 8               # work-group (1, VEC_L1, 1) for the packed kernel. PoCL
                         # compiles each kernel once per local size: keep it fixed


def _ceil(x: int, d: int) -> int:
    return -(-x // d)


def launch(dev: Any, kernels: dict[str, Any], itemsize: int,
           out: tuple, a: tuple, b: tuple, B: int, n: int, k: int, m: int) -> None:
    """Enqueue out[i] = a[i] @ b[i] for i < B. ``out``, ``a``, ``b`` are
    (buffer, offset, (batch stride, row stride, col stride)) in elements;
    ``out`` has column stride 1 or any strides (then stored element by element)."""
    RM, RV = _vec_shape("double" if itemsize == 8 else "float")
    BN = 8 * RV
    npan = _ceil(m, BN)
    q = dev.queue
    (ob, oo, ost), (ab, ao, ast), (bb, bo, bst) = out, a, b
    if bst[2] == 1 and ost[2] == 1 and (n < SMALL_N or k * m * itemsize <= SMALL_B_BYTES):
        gn = _ceil(_ceil(n, RM), 4) * 4
        kernels["matmul_vec_u"](q, (npan, gn, B), (1, 4, 1), ob, oo, *ost, ab, ao, *ast,
                                bb, bo, *bst, n, k, m)
        return
    nbp = 1 if bst[0] == 0 else B  # a broadcast b is packed once
    panel = npan * BN * k
    scratch = dev.alloc(nbp * panel * itemsize, "matmul packing space")
    kernels["pack_b"](q, (npan * BN, k, nbp), (BN, 1, 1), scratch.mem, bb, bo, *bst, k, m)
    gn = _ceil(_ceil(n, RM), VEC_L1) * VEC_L1
    kernels["matmul_vecp"](q, (npan, gn, B), (1, VEC_L1, 1), ob, oo, *ost, ab, ao, *ast,
                           scratch.mem, 0 if nbp == 1 else panel, n, k, m)
