"""conv2d as im2col plus one BLAS matmul, each pass a NumPy call.

The core's own conv2d is the same algorithm written in tensor ops (pad,
window views, a copy, a matmul, a permute, a bias add; the backward as many
again); on small images each of those is a dispatch that costs as much as its
arithmetic. Here the forward is one strided copy into the im2col matrix, one
matmul and one add that writes the (N, OC, OH, OW) result; the backward is two
matmuls and ``kh * kw`` strided adds.

The im2col matrix is window-offset major, (C*kh*kw, N*OH*OW), as the core's:
row ``(c, i, j)`` holds input channel ``c`` at kernel offset ``(i, j)`` for
every output position, so each row is a run of whole output rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided


def _padded(x: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    if not any(pads):
        return x
    n, c, h, w = x.shape
    pt, pb, pl, pr = pads
    xp = np.zeros((n, c, h + pt + pb, w + pl + pr), x.dtype)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    return xp


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b; float16 in float32 (NumPy has no half-precision BLAS; the result is
    rounded once, where it is written)."""
    if a.dtype == np.float16:
        return a.astype(np.float32) @ b.astype(np.float32)
    return a @ b


def _cols6(cols: np.ndarray, c: int, kh: int, kw: int, n: int, oh: int, ow: int) -> np.ndarray:
    return cols.reshape(c, kh, kw, n, oh, ow)


def conv2d(out: np.ndarray, cols: np.ndarray, x: np.ndarray, weight: np.ndarray,
           bias: np.ndarray | None, stride: tuple[int, int], padding: tuple[int, int, int, int],
           dilation: tuple[int, int]) -> None:
    """out (N, OC, OH, OW) = weight (OC, C, kh, kw) cross-correlated with x (N, C, H, W)
    padded by ``padding`` (top, bottom, left, right) with zeros, plus bias (OC,);
    cols (C*kh*kw, N*OH*OW) receives the im2col matrix (the weight gradient's input)."""
    n, c = x.shape[:2]
    oc, _, kh, kw = weight.shape
    oh, ow = out.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    xp = _padded(x, padding)
    s = xp.strides
    windows = as_strided(xp, (c, kh, kw, n, oh, ow),
                         (s[1], s[2] * dh, s[3] * dw, s[0], s[2] * sh, s[3] * sw))
    np.copyto(_cols6(cols, c, kh, kw, n, oh, ow), windows)
    y = _mm(weight.reshape(oc, c * kh * kw), cols)  # (OC, N*OH*OW)
    y = y.reshape(oc, n, oh, ow).transpose(1, 0, 2, 3)
    if bias is None:
        np.copyto(out, y, casting="unsafe")
    else:
        np.add(y, bias.reshape(oc, 1, 1), out=out, casting="unsafe")


def _as_rows(g: np.ndarray) -> np.ndarray:
    """g (N, OC, OH, OW) as the (OC, N*OH*OW) matrix of the forward's product."""
    n, oc, oh, ow = g.shape
    return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(oc, n * oh * ow)


def conv2d_input_grad(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                      stride: tuple[int, int], padding: tuple[int, int, int, int],
                      dilation: tuple[int, int]) -> None:
    """dx (N, C, H, W) = the gradient of conv2d's input for the output gradient g
    (N, OC, OH, OW): weight^T @ g as columns, each added back onto the (padded)
    input positions its window read (col2im)."""
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    pt, pb, pl, pr = padding
    dcols = _mm(weight.reshape(oc, c * kh * kw).T, _as_rows(g))
    d6 = _cols6(dcols, c, kh, kw, n, oh, ow)
    padded = any(padding) or dx.dtype != dcols.dtype
    if padded:  # (float16 accumulates in dcols' float32 too)
        dxp = np.zeros((n, c, h + pt + pb, w + pl + pr), dcols.dtype)
    else:
        dxp = dx
        dxp[...] = 0
    hspan, wspan = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    for i in range(kh):
        r0 = i * dh
        for j in range(kw):
            c0 = j * dw
            dst = dxp[:, :, r0:r0 + hspan:sh, c0:c0 + wspan:sw]
            np.add(dst, d6[:, i, j].transpose(1, 0, 2, 3), out=dst)
    if padded:
        np.copyto(dx, dxp[:, :, pt:pt + h, pl:pl + w], casting="unsafe")


def conv2d_weight_grad(dweight: np.ndarray, g: np.ndarray, cols: np.ndarray) -> None:
    """dweight (OC, C, kh, kw) = g (N, OC, OH, OW) as (OC, N*OH*OW) @ cols^T."""
    d = _mm(_as_rows(g), cols.T)
    np.copyto(dweight, d.reshape(dweight.shape), casting="unsafe")


KERNELS: dict[str, Any] = {
    "conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad,
    "conv2d_weight_grad": conv2d_weight_grad,
}
