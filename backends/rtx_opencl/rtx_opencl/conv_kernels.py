"""conv2d's three composite kernels on OpenCL (``rtxcore.dispatch.ops`` states
them; float32 and float64): ``conv2d``, ``conv2d_input_grad`` and
``conv2d_weight_grad``.

The core's form of a convolution builds the im2col matrix with a 6-D strided
copy of the padded input, and its input gradient (and a transposed
convolution's forward) is col2im as ``kh * kw`` strided adds into a zeroed
padded buffer: on PoCL those copies and adds were half of a DCGAN step's
device time. Here:

- im2col: one work item per row of the (C*kh*kw, N*OH*OW) matrix walks the
  samples and output positions with additions only (zero in the padding: no
  padded copy of the input);
- each product is one call of the backend's own matmul in its fast
  orientation, (OC, C*kh*kw) @ (C*kh*kw, N*OH*OW) and its transposes (a batch
  of per-sample products ran at a fraction of its speed); the forward's
  (OC, N, OH*OW) result goes into out (N, OC, OH, OW) with the bias in one
  add, the input gradient's g is copied to (OC, N*OH*OW) once;
- ``col2im``: one work item per input row sums into each pixel, in (i, j)
  order as the core's adds do, the column entries of every window position
  that read it, stepping the kernel offset by the stride (no remainder per
  tap) -- no atomics, the same sum on every run;
- the weight's gradient copies g to (OC, N, OH*OW) once and is one product
  with the columns transposed.

Compiled once per dtype; shapes, strides and geometry are arguments.
"""

from __future__ import annotations

from math import prod
from typing import Any

from rtxcore.dispatch import View

from . import codegen as C
from . import launch as L

FLOATS = frozenset({"float32", "float64"})


def _params(dt: str, operands: tuple[tuple[str, bool, int], ...],
            geometry: list[str]) -> tuple[list[str], list[str]]:
    """A kernel's parameters and argument kinds: each strided operand (name,
    read-only, rank), then the geometry as longs."""
    params, kinds = [], []
    for name, const, rank in operands:
        p, k = C.ptr_params(name, dt, rank, const)
        params += p
        kinds += k
    return params + [f"long {g}" for g in geometry], kinds + ["long"] * len(geometry)


def _im2col_source(dt: str) -> tuple[str, list[str]]:
    """One work item per row of the (C*kh*kw, N*OH*OW) matrix (a channel and a
    kernel offset): it walks the samples and output positions in order with
    additions only, writing its row contiguously, zero where the window is in
    the padding. Every work item runs the same loops, which PoCL vectorises
    across them; a per-element kernel spent its time in 64-bit divisions, and
    a strided copy of the windows in per-row setup for the 4-wide rows of a
    DCGAN's small layers."""
    params, kinds = _params(dt, (("pc", False, 2), ("px", True, 4)),
                            ["N_", "OH", "OW", "KK", "kw", "H", "W", "sh", "sw", "pt", "pl",
                             "dh", "dw"])
    ct = C.CTYPE[dt][1]
    body = f"""const long r = i;
    const long c = r / KK, rem = r % KK, a = rem / kw, b = rem % kw;
    long q = pc_o + r * pcs0;
    for (long n = 0; n < N_; n++) {{
        const long plane = px_o + n * pxs0 + c * pxs1;
        long h = a * dh - pt;
        for (long oh = 0; oh < OH; oh++, h += sh) {{
            const int hin = h >= 0 && h < H;
            const long src = plane + (hin ? h : 0) * pxs2;
            long w = b * dw - pl;
            for (long ow = 0; ow < OW; ow++, w += sw, q += pcs1) {{
                const int in = hin && w >= 0 && w < W;
                const {ct} v = in ? {C.load(dt, 'px', 'src + (in ? w : 0) * pxs3')} : 0;
                {C.store(dt, 'pc', 'q', 'v')}
            }}
        }}
    }}"""
    return C.kernel_source(f"im2col, {dt}", {dt}, params, body), kinds


def _col2im_source(dt: str, dilated: bool) -> tuple[str, list[str]]:
    """One work item per input row (n, c, h): each pixel of the row sums the
    column entries of the window positions that read it, kernel rows then
    columns in increasing order (the core's adds' order). Undilated, the taps
    that land on a window are found by stepping the kernel offset by the
    stride from the first one (no remainder per tap); ``dilated`` tests each."""
    params, kinds = _params(dt, (("pd", False, 4), ("pc", True, 3)),
                            ["C_", "H", "W", "OH", "OW", "kh", "kw", "sh", "sw", "pt", "pl",
                             "dh", "dw"])
    ct = C.CTYPE[dt][1]
    load = C.load(dt, 'pc', 'pc_o + n * pcs0 + ((c * kh + a) * kw + b) * pcs1 + (oh * OW + ow) * pcs2')
    if dilated:
        rows = """for (long a = 0; a < kh; a++) {
        const long hh = h + pt - a * dh;
        if (hh < 0 || hh % sh) continue;
        const long oh = hh / sh;
        if (oh >= OH) continue;"""
        taps = f"""for (long b = 0; b < kw; b++) {{
                const long ww = w + pl - b * dw;
                if (ww < 0 || ww % sw) continue;
                const long ow = ww / sw;
                if (ow >= OW) continue;
                acc += {load};
            }}"""
    else:
        rows = """const long a0 = (h + pt) % sh;
    for (long a = a0, oh = (h + pt - a0) / sh; a < kh; a += sh, oh--) {
        if (oh < 0) break;
        if (oh >= OH) continue;"""
        taps = f"""const long b0 = (w + pl) % sw;
            for (long b = b0, ow = (w + pl - b0) / sw; b < kw; b += sw, ow--) {{
                if (ow < 0) break;
                if (ow < OW) acc += {load};
            }}"""
    body = f"""const long h = i % H; long t = i / H;
    const long c = t % C_; const long n = t / C_;
    const long drow = pd_o + n * pds0 + c * pds1 + h * pds2;
    for (long w = 0; w < W; w++) {{ {C.store(dt, 'pd', 'drow + w * pds3', '0')} }}
    {rows}
        for (long w = 0; w < W; w++) {{
            {ct} acc = {C.load(dt, 'pd', 'drow + w * pds3')};
            {taps}
            {C.store(dt, 'pd', 'drow + w * pds3', 'acc')}
        }}
    }}"""
    return C.kernel_source(f"col2im, {dt}{', dilated' if dilated else ''}", {dt}, params,
                           body), kinds


def _args(*views: View) -> list[Any]:
    args: list[Any] = []
    for v in views:
        args += [v.buffer.mem, v.offset, *v.strides]
    return args


def _contiguous(v: View) -> View:
    """``v``, or a contiguous copy of it."""
    from .elementwise import copy, empty

    if v.is_contiguous():
        return v
    _, c = empty(tuple(v.shape), v.dtype, v.buffer.dev.index)
    copy(c, v)
    return c


def _geometry(x_shape: tuple[int, ...], w_shape: tuple[int, ...], out_hw: tuple[int, int],
              stride: Any, padding: Any, dilation: Any, what: str) -> None:
    """Refuse shapes and geometry the kernels would index past (the core checks
    them first; a graph file's kernel node arrives here too)."""
    _, c, h, w = x_shape
    oc, wc, kh, kw = w_shape
    (sh, sw), (pt, pb, pl, pr), (dh, dw) = stride, padding, dilation
    oh, ow = out_hw
    ok = (wc == c and min(kh, kw, sh, sw, dh, dw) >= 1 and min(pt, pb, pl, pr) >= 0
          and oh == (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
          and ow == (w + pl + pr - dw * (kw - 1) - 1) // sw + 1 and oh >= 0 and ow >= 0)
    if not ok:
        raise ValueError(f"{what}: input {tuple(x_shape)}, weight {tuple(w_shape)}, output "
                         f"{oh}x{ow}, stride {tuple(stride)}, padding {tuple(padding)}, "
                         f"dilation {tuple(dilation)} do not fit together")


def _im2col(cols: View, x: View, kh: int, kw: int, oh: int, ow: int, stride: Any,
            padding: Any, dilation: Any) -> None:
    """cols (C*kh*kw, N*OH*OW) from x, zero in the padding (``_im2col_source``)."""
    n, c, h, w = x.shape
    if prod(cols.shape) == 0:
        return
    dt = x.dtype.name
    dev = x.buffer.dev
    k = L.kernel(dev, ("im2col", dt), lambda: _im2col_source(dt))
    L.enqueue(dev, k, c * kh * kw, _args(cols, x) + [
        n, oh, ow, kh * kw, kw, h, w, stride[0], stride[1], padding[0], padding[2],
        dilation[0], dilation[1]])


def conv2d(out: View, cols: View, x: View, weight: View, bias: View | None, stride: Any,
           padding: Any, dilation: Any) -> None:
    from .elementwise import binary, copy, empty
    from .matmul import matmul

    n, c, h, w = x.shape
    oc, _, kh, kw = weight.shape
    oh, ow = out.shape[2], out.shape[3]
    _geometry(tuple(x.shape), tuple(weight.shape), (oh, ow), stride, padding, dilation, "conv2d")
    kk, p = c * kh * kw, oh * ow
    if tuple(out.shape[:2]) != (n, oc) or tuple(cols.shape) != (kk, n * p):
        raise ValueError(f"conv2d: out {tuple(out.shape)} and cols {tuple(cols.shape)} for "
                         f"input {tuple(x.shape)} and weight {tuple(weight.shape)}")
    if prod(out.shape) == 0:
        return
    _im2col(cols, x, kh, kw, oh, ow, stride, padding, dilation)
    # one product (OC, C*kh*kw) @ (C*kh*kw, N*OH*OW) -- the backend's fast
    # orientation, where a batch of per-sample products is not -- then the
    # (OC, N, OH*OW) result into out (N, OC, OH, OW), the bias added on the way
    wm = _contiguous(weight)
    _, t = empty((oc, n * p), out.dtype, out.buffer.dev.index)
    matmul(View(t.buffer, (1, oc, n * p), (oc * n * p, n * p, 1), 0, t.dtype),
           View(wm.buffer, (1, oc, kk), (oc * kk, kk, 1), wm.offset, wm.dtype),
           View(cols.buffer, (1, kk, n * p), (0, *cols.strides), cols.offset, cols.dtype))
    tv = View(t.buffer, (n, oc, oh, ow), (p, n * p, ow, 1), 0, t.dtype)
    if bias is None:
        copy(out, tv)
    else:
        bb = View(bias.buffer, (n, oc, oh, ow), (0, bias.strides[0], 0, 0), bias.offset,
                  bias.dtype)
        binary("add")(out, tv, bb)


def conv2d_input_grad(dx: View, g: View, weight: View, stride: Any, padding: Any,
                      dilation: Any) -> None:
    from .elementwise import copy, empty
    from .matmul import matmul

    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    oh, ow = g.shape[2], g.shape[3]
    _geometry(tuple(dx.shape), tuple(weight.shape), (oh, ow), stride, padding, dilation,
              "conv2d_input_grad")
    if tuple(g.shape[:2]) != (n, oc):
        raise ValueError(f"conv2d_input_grad: g {tuple(g.shape)} for an input of "
                         f"{tuple(dx.shape)} and weight {tuple(weight.shape)}")
    if prod(dx.shape) == 0:
        return
    dt = dx.dtype.name
    dev = dx.buffer.dev
    kk, p = c * kh * kw, oh * ow
    # the columns' gradient (C*kh*kw, N*OH*OW) = weight^T @ g as (OC, N*OH*OW):
    # g copied to that layout once, then one product
    _, dcols = empty((kk, n * p), dx.dtype, dev.index)
    if p and oc:
        wm = _contiguous(weight)
        _, gt = empty((oc, n, p), g.dtype, dev.index)
        copy(View(gt.buffer, (n, oc, oh, ow), (p, n * p, ow, 1), 0, g.dtype), g)
        matmul(View(dcols.buffer, (1, kk, n * p), (kk * n * p, n * p, 1), 0, dcols.dtype),
               View(wm.buffer, (1, kk, oc), (0, 1, kk), wm.offset, wm.dtype),
               View(gt.buffer, (1, oc, n * p), (oc * n * p, n * p, 1), 0, gt.dtype))
    else:  # (nothing reached the input: its gradient is zeros)
        from .elementwise import full

        full(dcols, 0)
    dcv = View(dcols.buffer, (n, kk, p), (p, n * p, 1), 0, dcols.dtype)
    dilated = tuple(dilation) != (1, 1)
    k = L.kernel(dev, ("col2im", dt, dilated), lambda: _col2im_source(dt, dilated))
    L.enqueue(dev, k, n * c * h,
              _args(dx, dcv) + [c, h, w, oh, ow, kh, kw, stride[0], stride[1], padding[0],
                                  padding[2], dilation[0], dilation[1]])


def conv2d_weight_grad(dweight: View, g: View, cols: View) -> None:
    from .elementwise import copy, empty
    from .matmul import matmul

    oc = dweight.shape[0]
    kk = prod(dweight.shape[1:])
    n, goc, oh, ow = g.shape
    p = oh * ow
    if goc != oc or tuple(cols.shape) != (kk, n * p):
        raise ValueError(f"conv2d_weight_grad: dweight {tuple(dweight.shape)}, g "
                         f"{tuple(g.shape)} and cols {tuple(cols.shape)} do not fit together")
    if oc * kk == 0:
        return
    dev = dweight.buffer.dev
    # g as (OC, N*OH*OW): one copy, then one product with the columns transposed
    _, gt = empty((oc, n, p), g.dtype, dev.index)
    copy(View(gt.buffer, (n, oc, oh, ow), (p, n * p, ow, 1), 0, g.dtype), g)
    o = dweight if dweight.is_contiguous() else _contiguous(dweight)
    cs0, cs1 = cols.strides
    if n * p == 0:
        from .elementwise import full

        full(o, 0)
    else:
        matmul(View(o.buffer, (1, oc, kk), (oc * kk, kk, 1), o.offset, o.dtype),
               View(gt.buffer, (1, oc, n * p), (oc * n * p, n * p, 1), 0, gt.dtype),
               View(cols.buffer, (1, n * p, kk), (0, cs1, cs0), cols.offset, cols.dtype))
    if o is not dweight:
        copy(dweight, o)


KERNELS = {"conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad,
           "conv2d_weight_grad": conv2d_weight_grad}
