"""The tiled max pool's composite kernels on OpenCL: ``max_pool2d_tiled`` and its
backward (``rtxcore.dispatch.ops`` states them), one launch each.

The core's form of the forward gathers each tile into a row (a 6-D strided
copy), takes the max and the argmax and rebuilds the flat index in several more
kernels; its backward multiplies the gradient by a one-hot mask the size of the
input. On PoCL the pair was most of a small CNN's step. Here:

- forward: one work item per output element walks its kh x kw tile of x (any
  strides) in row-major order and keeps the first maximum, or the first NaN
  (PyTorch's choice, and rtx_cpu's), writing the value and the flat index of
  that element in its H x W plane;
- backward: the input gradient zeroed, then one work item per gradient element
  writes it at its index. Tiles do not overlap, so no two work items write one
  element; an index outside its plane is not written (the kernel never writes
  outside the output, whatever the indices say).

float16 loads and stores half and compares in float. Compiled once per (op,
dtype); shapes, strides and offsets are arguments.
"""

from __future__ import annotations

from typing import Any

from rtxcore.dispatch import View

from . import codegen as C
from . import launch as L


def _forward_source(dt: str) -> tuple[str, list[str]]:
    ct = C.CTYPE[dt][1]
    params, kinds = [], []
    for name, pdt, const in (("pv", dt, False), ("pi", "int64", False), ("px", dt, True)):
        p, k = C.ptr_params(name, pdt, 4, const)
        params += p
        kinds += k
    params += ["long C_", "long OH", "long OW", "long W", "long kh", "long kw"]
    kinds += ["long"] * 6
    body = f"""const long ow = i % OW; long r = i / OW;
    const long oh = r % OH; r /= OH;
    const long c = r % C_; const long n = r / C_;
    const long base = px_o + n * pxs0 + c * pxs1;
    const long h0 = oh * kh, w0 = ow * kw;
    {ct} best = ({ct}){C.load(dt, 'px', 'base + h0 * pxs2 + w0 * pxs3')};
    long at = h0 * W + w0;
    for (long a = 0; a < kh && !ISNAN(best); a++) {{
        for (long b = 0; b < kw; b++) {{
            const {ct} v = ({ct}){C.load(dt, 'px', 'base + (h0 + a) * pxs2 + (w0 + b) * pxs3')};
            if (ISNAN(v) || v > best) {{
                best = v;
                at = (h0 + a) * W + w0 + b;
                if (ISNAN(v)) break;
            }}
        }}
    }}
    const long o = n * pvs0 + c * pvs1 + oh * pvs2 + ow * pvs3;
    {C.store(dt, 'pv', 'pv_o + o', 'best')}
    pi[pi_o + n * pis0 + c * pis1 + oh * pis2 + ow * pis3] = at;"""
    return C.kernel_source(f"max_pool2d_tiled, {dt}", {dt}, params, body), kinds


def _backward_source(dt: str) -> tuple[str, list[str]]:
    params, kinds = [], []
    for name, pdt, const in (("po", dt, False), ("pg", dt, True), ("pi", "int64", True)):
        p, k = C.ptr_params(name, pdt, 4, const)
        params += p
        kinds += k
    params += ["long C_", "long OH", "long OW", "long H", "long W"]
    kinds += ["long"] * 5
    body = f"""const long ow = i % OW; long r = i / OW;
    const long oh = r % OH; r /= OH;
    const long c = r % C_; const long n = r / C_;
    const long at = pi[pi_o + n * pis0 + c * pis1 + oh * pis2 + ow * pis3];
    if (at < 0 || at >= H * W) return;  /* never outside the plane */
    const long h = at / W, w = at % W;
    {C.store(dt, 'po', 'po_o + n * pos0 + c * pos1 + h * pos2 + w * pos3',
             C.load(dt, 'pg', 'pg_o + n * pgs0 + c * pgs1 + oh * pgs2 + ow * pgs3'))}"""
    return C.kernel_source(f"max_pool2d_tiled_backward, {dt}", {dt}, params, body), kinds


def _args(*views: View) -> list[Any]:
    args: list[Any] = []
    for v in views:
        args += [v.buffer.mem, v.offset, *v.strides]
    return args


def max_pool2d_tiled(values: View, indices: View, x: View, kh: int, kw: int) -> None:
    n, c, h, w = x.shape
    oh, ow = values.shape[2], values.shape[3]
    if (kh < 1 or kw < 1 or tuple(values.shape) != (n, c, h // kh, w // kw)
            or tuple(indices.shape) != tuple(values.shape)):
        raise ValueError(f"max_pool2d_tiled: values {tuple(values.shape)} and indices "
                         f"{tuple(indices.shape)} for x {tuple(x.shape)} and a {kh}x{kw} tile")
    total = n * c * oh * ow
    if total == 0:
        return
    dt = x.dtype.name
    dev = x.buffer.dev
    k = L.kernel(dev, ("max_pool2d_tiled", dt), lambda: _forward_source(dt))
    L.enqueue(dev, k, total, _args(values, indices, x) + [c, oh, ow, w, kh, kw])


def max_pool2d_tiled_backward(out: View, g: View, indices: View) -> None:
    from .elementwise import full

    n, c, h, w = out.shape
    if tuple(g.shape[:2]) != (n, c) or tuple(indices.shape) != tuple(g.shape):
        raise ValueError(f"max_pool2d_tiled_backward: g {tuple(g.shape)} and indices "
                         f"{tuple(indices.shape)} for an input of {tuple(out.shape)}")
    full(out, 0)
    oh, ow = g.shape[2], g.shape[3]
    total = n * c * oh * ow
    if total == 0:
        return
    dt = out.dtype.name
    dev = out.buffer.dev
    k = L.kernel(dev, ("max_pool2d_tiled_backward", dt), lambda: _backward_source(dt))
    L.enqueue(dev, k, total, _args(out, g, indices) + [c, oh, ow, h, w])


KERNELS = {"max_pool2d_tiled": max_pool2d_tiled,
           "max_pool2d_tiled_backward": max_pool2d_tiled_backward}
