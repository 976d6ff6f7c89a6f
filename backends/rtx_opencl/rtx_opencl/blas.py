"""CLBlast's GEMM through pyclblast, for float32/float64 matmul on request.

``RTX_OPENCL_MATMUL=clblast`` routes matmul here when pyclblast is installed
(it needs the CLBlast library to build: Debian's ``libclblast-dev``). The
default is rtx_opencl's own kernel (``matmul.py``), which measured faster on
PoCL; ``benchmarks/ops.py --device opencl`` prints both.
"""

from __future__ import annotations

import os
from typing import Any

from . import runtime as R

_pyclblast: Any = None
_state: list[bool | None] = [None]


def available() -> bool:
    """Whether pyclblast imports (and so CLBlast can be used)."""
    global _pyclblast
    if _state[0] is None:
        try:
            import pyclblast

            _pyclblast = pyclblast
            _state[0] = True
        except Exception:
            _state[0] = False
    return bool(_state[0])


def enabled() -> bool:
    return os.environ.get("RTX_OPENCL_MATMUL", "").lower() == "clblast" and available()


def _matrix(v: Any) -> tuple[bool, int] | None:
    """(transposed, leading dimension) of the last two dims of view ``v`` as
    CLBlast's row-major layout sees it, or None if it can't."""
    rows, cols = v.shape[-2], v.shape[-1]
    rs, cs = v.strides[-2], v.strides[-1]
    if cs == 1 or cols == 1:
        ld = rs if rows > 1 else cols
        return (False, ld) if ld >= max(cols, 1) else None
    if rs == 1 or rows == 1:
        ld = cs if cols > 1 else rows
        return (True, ld) if ld >= max(rows, 1) else None
    return None


def _array(buf: R.Buffer, dtype: Any) -> Any:
    """A pyopencl Array over the whole buffer (pyclblast wants one; offsets go
    separately), made once per buffer and dtype."""
    import pyopencl.array as cla

    arr = buf.arrays.get(dtype.name) if buf.arrays else None
    if arr is None:
        arr = cla.Array(buf.dev.queue, (1, buf.nbytes // dtype.itemsize), dtype.numpy,
                        data=buf.mem)
        if buf.arrays is None:
            buf.arrays = {}
        buf.arrays[dtype.name] = arr
    return arr


def gemm(out: Any, a: Any, b: Any) -> bool:
    """Enqueue out = a @ b with CLBlast; False (nothing done) when the dtype or
    layout isn't one CLBlast takes."""
    if out.dtype.name not in ("float32", "float64") or len(out.shape) != 2:
        return False  # batched: our kernel takes any batch layout
    la, lb, lo = _matrix(a), _matrix(b), _matrix(out)
    if la is None or lb is None or lo is None or lo[0]:
        return False
    n, m = out.shape
    k = a.shape[-1]
    q = out.buffer.dev.queue
    _pyclblast.gemm(q, n, m, k, _array(a.buffer, a.dtype), _array(b.buffer, b.dtype),
                    _array(out.buffer, out.dtype), a_ld=la[1], b_ld=lb[1], c_ld=lo[1],
                    a_transp=la[0], b_transp=lb[0], a_offset=a.offset, b_offset=b.offset,
                    c_offset=out.offset)
    return True
