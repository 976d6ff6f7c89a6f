"""conv2d as im2col plus BLAS matmuls, each pass a NumPy call, a few images at a time.

The core's own conv2d is the same algorithm written in tensor ops (pad,
window views, a copy, a matmul, a permute, a bias add; the backward as many
again); on small images each of those is a dispatch that costs as much as its
arithmetic. Here each pass is one NumPy call over a chunk of the batch.

The im2col matrix is window-offset major, (C*kh*kw, N*OH*OW), as the core's:
row ``(c, i, j)`` holds input channel ``c`` at kernel offset ``(i, j)`` for
every output position, so each row is a run of whole output rows. The forward
fills it (the weight gradient's input) and multiplies a chunk of the batch at a
time: each chunk's matrix is still in cache when BLAS packs it, and a one-image
chunk's product is that image's (OC, OH*OW) output, written in place (no
transposing copy of the whole result). A whole-batch im2col and then one matmul
read the matrix back from memory (it is kh*kw times the input: 37 MB for 16
images of 64 channels at 32x32 and a 3x3 kernel) and took 1.3-2x as long. At
stride 1 with 32 output and 16 input channels or more, the product is taken
positions-major instead (a second, channels-last im2col, one row of (kh, kw, C)
per output position, times the weight as (kh*kw*C, OC)): OpenBLAS runs that
orientation at 93-100 GFLOP/s on this machine against 61-82 for W @ cols.

The input gradient, for stride 1, is the cross-correlation of the output
gradient (zero-padded by the kernel's extent, less the forward's padding) with
the flipped, channel-transposed weight: im2col of the gradient and one matmul
per chunk, written into dx; no scatter. From 8 gradient channels the im2col
matrix is positions-major (one row of (kh, kw, OC) per position, from a
channels-last copy), the orientation BLAS runs fastest. Strided (or where the
gradient has more than twice the input's channels) it is ``W^T @ g`` then
``kh * kw`` strided adds into the chunk's padded input (col2im), channels-last
from 8 input channels (the adds then run over C-long runs, not OW-long ones).
All read a chunk's columns while they are in cache.

The weight gradient is one matmul, its reduction over the whole batch: cols @ g^T
as (C*kh*kw, OC) where C*kh*kw >= OC (the longer matrix on the left, the
orientation OpenBLAS runs 1.2-1.5x faster here), else g @ cols^T.

On more than one thread (``rtxcore.set_num_threads``, default the cores) a large
forward or input gradient splits its batch over the threads, in runs of whole
chunks, BLAS single-threaded (as it always is here, ``blas``): the same calls per image as on one
thread, so the same bits.

float16 multiplies in float32 (NumPy has no half-precision BLAS) and is rounded
once, where it is written.

Where ``cconv``'s C loops are compiled (float32 and float64), the copies above
are C loops instead (im2col straight into cols, the transpositions, col2im's
adds); and in float32, on a machine with AVX-512, the products are C kernels of
``cconv`` with fused multiply-adds, which run at about the FMA units' rate and
need no im2col of their own (cols is still written, by non-temporal stores):

- stride 1 with output rows of 16 positions or more (superres): a direct
  convolution, 32 positions of a row by a block of 4-12 output channels in
  registers, for the forward and, as the correlation of g with the flipped
  weight, the input gradient (superres' 64-64 layer: forward 22 -> 14 ms,
  input gradient 16 -> 12 ms at one thread; PyTorch 12 and 12);
- otherwise from 16 output channels and positions (DCGAN's stride-2 layers):
  an implicit GEMM vectorized over channels, 6-16 positions by 16-64 channels
  a tile, reading the padded image through an offsets table; the input
  gradient by phases of the stride, each input position taking only the taps
  that reach it (DCGAN's 32-64 layer: forward 3.1 -> 2.3 ms, input gradient
  2.8 -> 2.1);
- the weight gradient from 16 output channels and 64 rows of cols: the same
  tile with the positions as its reduction (superres' 64-64: 15.2 -> 12.4 ms).

Each runs an image (the weight gradient: a range of rows of cols) at a time,
so the split over the threads gives the same bits as one thread.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import blas, cconv
from .fused import in_pool, threads
from .parallel import _bounds, _run

# elements of a chunk's column block at most (float32: 1 MB, the size of this
# machine's L2), and the batch is cut into chunks of whole images below that (at
# least one image)
_CHUNK = 1 << 18


# col2im runs channels-last from this many input channels (a run of C elements a
# position; below, the channel-major runs of OW are longer), and the stride-1
# correlation positions-major from this many output channels
_CL_MIN_C = 8


# conv2d's product positions-major from these many output and input channels
# (stride 1)
_ROWS_MIN_OC, _ROWS_MIN_C = 32, 16

# a call splits its batch over the threads from this many multiply-adds (below,
# handing a part to a worker costs more than it saves). Measured on this 2-core
# shared machine: with other processes busy, the split ran superres' 64-64
# layer's forward and input gradient in 73 ms against 693 with BLAS's threads on
# each chunk's product (each of those products waits for the other core). The
# split pays only while no BLAS worker spins on the other core, hence BLAS on
# one thread for good (``blas``): superres' layer 2 forward and backward, 2
# threads, 24 ms against 41 on one
_SPLIT_MIN = 1 << 24


def _over_images(part: Callable[[int, int], None], n: int, nb: int, macs: int) -> None:
    """``part(lo, hi)`` over the images range(n): one call, or (a large call, on
    more than one thread, with BLAS kept to one thread by the backend: ``blas``)
    a run of whole chunks of nb images per thread. Each image's products are
    then the very calls the single run makes (same chunks, same shapes), so the
    bits are the same for any thread count; and the im2col copies and adds,
    which BLAS's own threads wouldn't share, run on both cores."""
    t = threads()
    chunks = -(-n // nb)
    if t <= 1 or chunks < 2 or macs < _SPLIT_MIN or not blas.owned() or \
            in_pool():
        part(0, n)
        return
    _run(part, _bounds(n, min(t, chunks), nb))


def _chunk(n: int, per_image: int) -> int:
    """Images per chunk: as many as keep ``per_image * images`` within _CHUNK."""
    return max(1, min(n, _CHUNK // max(per_image, 1)))


def _work(dtype: np.dtype) -> np.dtype:
    """The dtype the products are computed in: float16 in float32."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _windows(xp: np.ndarray, kh: int, kw: int, oh: int, ow: int,
             stride: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """The (C, kh, kw, N, OH, OW) windows of the (padded) (N, C, H, W) xp."""
    n, c = xp.shape[:2]
    (sh, sw), (dh, dw) = stride, dilation
    s = xp.strides
    return as_strided(xp, (c, kh, kw, n, oh, ow),
                      (s[1], s[2] * dh, s[3] * dw, s[0], s[2] * sh, s[3] * sw))


class _Padder:
    """A chunk-sized zero buffer (nb, C, H + top + bottom, W + left + right) whose
    border stays zero: each chunk copies only its interior (cropped where a pad
    is negative), so the buffer is zeroed once per call, not once per chunk."""

    def __init__(self, nb: int, c: int, h: int, w: int, pads: tuple[int, int, int, int],
                 dtype: np.dtype) -> None:
        pt, pb, pl, pr = pads
        self.hp, self.wp = h + pt + pb, w + pl + pr
        self.buf = np.zeros((nb, c, self.hp, self.wp), dtype)
        # source rows/cols [s0, s1) land at [d0, d0 + s1 - s0)
        self.rows = (max(0, -pt), h - max(0, -pb), max(0, pt))
        self.cols = (max(0, -pl), w - max(0, -pr), max(0, pl))

    def fill(self, x: np.ndarray) -> np.ndarray:
        """The padded copy of x (nb' <= nb images): a view of the buffer."""
        r0, r1, rd = self.rows
        c0, c1, cd = self.cols
        buf = self.buf[:x.shape[0]]
        np.copyto(buf[:, :, rd:rd + r1 - r0, cd:cd + c1 - c0], x[:, :, r0:r1, c0:c1],
                  casting="unsafe")
        return buf


def _matmul_into(dst: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """dst (M, L) = a @ b, in place where dst has the product's dtype and BLAS's
    layout (contiguous rows), else through a temporary."""
    if dst.dtype == a.dtype and dst.strides[1] == dst.itemsize:
        np.matmul(a, b, out=dst)
    else:
        np.copyto(dst, a @ b, casting="unsafe")


# -- the same algorithms with the copies as C loops (``cconv``) ---------------------------


def _c_ready(*arrays: np.ndarray | None) -> bool:
    """Whether ``cconv``'s loops take these operands: compiled, and float32 or
    float64 throughout (float16 keeps the NumPy forms, which multiply in float32)."""
    dt = arrays[0].dtype
    return all(a is None or a.dtype == dt for a in arrays) and cconv.available(dt)


def _c_writable(a: np.ndarray) -> bool:
    return a.flags.c_contiguous and a.flags.writeable


def _contig(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else np.ascontiguousarray(a)


def _c_conv2d(out: np.ndarray, cols: np.ndarray | None, x: np.ndarray, weight: np.ndarray,
              bias: np.ndarray | None, stride: tuple[int, int],
              padding: tuple[int, int, int, int], dilation: tuple[int, int],
              rows_major: bool) -> None:
    """conv2d with cconv's copies: each chunk's im2col written straight into its
    columns of cols (BLAS reads it from there while it is in cache); the product
    ``W @ cols`` (an image's output written in place) or, ``rows_major``, the
    positions-major ``rows @ W^T`` from a second, channels-last im2col; the
    result transposed into out with the bias by one loop."""
    x, bias = _contig(x), _contig(bias)
    n, c, h, w = x.shape
    oc, _, kh, kw = weight.shape
    oh, ow = out.shape[2:]
    geo = cconv.Geometry(c, h, w, kh, kw, oh, ow, stride, (padding[0], padding[2]), dilation)
    k, p = geo.k, geo.p
    nb = _chunk(n, k * p)
    if rows_major:
        wr = np.ascontiguousarray(weight.transpose(2, 3, 1, 0)).reshape(k, oc)
    else:
        w2 = np.ascontiguousarray(weight.reshape(oc, k))
    b3 = None if bias is None else bias.reshape(oc, 1)

    def part(lo: int, hi: int) -> None:
        if rows_major:
            rows = np.empty((nb * p, k), x.dtype)
            buf = cconv.scratch(geo, x.dtype)
        elif cols is None:
            own = np.empty((k, nb * p), x.dtype)  # (the chunk's im2col, for the product)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            cb = own[:, :m * p] if cols is None and not rows_major else \
                None if cols is None else cols[:, b0 * p:b1 * p]
            if cb is not None:
                cconv.im2col(cb, x, b0, b1, geo)
            if rows_major:
                rb = rows[:m * p]
                cconv.im2row(rb, buf, x, b0, b1, geo)
                cconv.rows_to_nchw(out, rb @ wr, bias, b0, b1)
            elif m == 1:
                o2 = out[b0].reshape(oc, p)
                np.matmul(w2, cb, out=o2)
                if b3 is not None:
                    np.add(o2, b3, out=o2)
            else:
                cconv.cols_to_nchw(out, w2 @ cb, bias, b0, b1)

    _over_images(part, n, nb, oc * k * p * n)


def _c_input_grad_correlate(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                            padding: tuple[int, int, int, int], dilation: tuple[int, int],
                            rows_major: bool) -> None:
    """Stride 1: dx = g padded by the kernel's extent less the forward's padding,
    correlated with the flipped, channel-swapped weight; g's im2col (or,
    ``rows_major``, its positions-major rows) by cconv, one product a chunk,
    transposed into dx by one loop (or written in place)."""
    g = _contig(g)
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    dh, dw = dilation
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    geo = cconv.Geometry(oc, g.shape[2], g.shape[3], kh, kw, h, w, (1, 1),
                         (eh - padding[0], ew - padding[2]), dilation)
    k, p = geo.k, geo.p
    nb = _chunk(n, k * p)
    flipped = weight[:, :, ::-1, ::-1]
    if rows_major:  # row (i, j, o), column c
        wr = np.ascontiguousarray(flipped.transpose(2, 3, 0, 1)).reshape(k, c)
    else:  # row c, column (o, i, j)
        w2 = np.ascontiguousarray(flipped.transpose(1, 0, 2, 3)).reshape(c, k)

    def part(lo: int, hi: int) -> None:
        if rows_major:
            mat = np.empty((nb * p, k), g.dtype)
            buf = cconv.scratch(geo, g.dtype)
        else:
            mat = np.empty((k, nb * p), g.dtype)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            if rows_major:
                rb = mat[:m * p]
                cconv.im2row(rb, buf, g, b0, b1, geo)
                cconv.rows_to_nchw(dx, rb @ wr, None, b0, b1)
                continue
            cb = mat[:, :m * p]
            cconv.im2col(cb, g, b0, b1, geo)
            if m == 1:
                np.matmul(w2, cb, out=dx[b0].reshape(c, p))
            else:
                cconv.cols_to_nchw(dx, w2 @ cb, None, b0, b1)

    _over_images(part, n, nb, c * k * p * n)


def _c_input_grad_col2im(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                         stride: tuple[int, int], padding: tuple[int, int, int, int],
                         dilation: tuple[int, int]) -> None:
    """dx = col2im of ``W^T @ g``, a chunk at a time: g's images side by side
    (one loop; an image's own (OC, OH*OW) as it is), the product, and cconv's
    col2im adding each column into the planes (no padded buffer: the adds
    skip what falls in the padding)."""
    g = _contig(g)
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    geo = cconv.Geometry(c, h, w, kh, kw, oh, ow, stride, (padding[0], padding[2]), dilation)
    k, p = geo.k, geo.p
    w2t = weight.reshape(oc, k).T  # (K, OC), read transposed by BLAS (no copy)
    nb = _chunk(n, k * p)

    def part(lo: int, hi: int) -> None:
        gbuf = np.empty((oc, nb * p), g.dtype)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            if m == 1:
                gb = g[b0].reshape(oc, p)
            else:
                gb = gbuf[:, :m * p]
                cconv.nchw_to_cols(gb, g, b0, b1)
            cconv.col2im(dx, w2t @ gb, b0, b1, geo)

    _over_images(part, n, nb, oc * k * p * n)


# the direct convolution (stride 1, float32) for output rows of at least this many
# positions (below, most of its 32-lane vectors would be padding)
_DIRECT_MIN_OW = 16


# ... and of at least this many output channels (an input gradient of 1-3 channels,
# superres' first layer's: its blocks would be mostly padding, 2x the im2col product)
_DIRECT_MIN_OC = 4


# the forward's C im2col (around BLAS) from this many output positions an image:
# below, its per-row work is most of it (DCGAN's 4x4 -> 1x1 conv, the transpose of
# its first ConvTranspose2d: 0.79 ms against NumPy's 0.50)
_C_IM2COL_MIN_P = 16


def _direct_ok(dt: np.dtype, stride: tuple[int, int], ow: int) -> bool:
    return tuple(stride) == (1, 1) and ow >= _DIRECT_MIN_OW and cconv.direct_available(dt)


def _c_direct(out: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
              geo: cconv.Geometry, cols: np.ndarray | None) -> None:
    """out = the stride-1 convolution of x with weight (plus bias) by cconv's
    direct loop, an image at a time (over the threads in runs of images); cols,
    where given, filled with x's im2col by the same parts."""
    n, oc = x.shape[0], weight.shape[0]
    b = cconv.block(oc)
    wpk = cconv.pack(weight, b)
    p = geo.p
    nb = _chunk(n, geo.k * p)

    def part(lo: int, hi: int) -> None:
        buf = cconv.direct_scratch(geo)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            if cols is not None:
                cconv.im2col(cols[:, b0 * p:b1 * p], x, b0, b1, geo, stream=True)
            cconv.direct_conv(out, x, wpk, b, bias, buf, b0, b1, geo)

    _over_images(part, n, nb, oc * geo.k * p * n)


# the implicit GEMM (any stride, vectorized over channels) from this many channels
# (its output's in the forward, the input's in the input gradient): below, most of
# its 16-lane vectors would be padding
_IMPLICIT_MIN_C = 16
# ... and from this many positions an image (the output's; the input gradient's g's):
# a tile is 6-16 positions of one image, and a smaller g's padding would be most of
# what the input gradient's steps read (DCGAN's first ConvTranspose2d, 1x1 -> 4x4:
# 3x the GEMM and col2im)
_IMPLICIT_MIN_P = 16
# ... and from this many steps (C * kh * kw): the digits CNN's 1-16 3x3 layer (9)
# took 0.095 ms against 0.057 by the C im2col and BLAS; DCGAN's 1-32 4x4 (16) 0.28
# against 0.33
_IMPLICIT_MIN_K = 16


def _c_implicit(out: np.ndarray, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None,
                geo: cconv.Geometry, cols: np.ndarray | None) -> None:
    """out = conv2d of x (any stride) by cconv's implicit GEMM, an image at a time
    (over the threads in runs of images), cols (where given) filled with x's
    im2col by the same parts."""
    n, oc = x.shape[0], weight.shape[0]
    nv = cconv.vectors(oc, geo.p)
    wpk = cconv.pack_weight(weight, nv)
    bpk = None if bias is None else cconv.pack_channels(bias.reshape(1, oc), nv)
    p = geo.p
    nb = _chunk(n, geo.k * p)

    def part(lo: int, hi: int) -> None:
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            if cols is not None:
                cconv.im2col(cols[:, b0 * p:b1 * p], x, b0, b1, geo, stream=True)
            cconv.implicit_conv(out, x, wpk, nv, bpk, b0, b1, geo)

    _over_images(part, n, nb, oc * geo.k * p * n)


def _c_implicit_input_grad(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                           geo: cconv.Geometry) -> None:
    """dx = conv2d's input gradient (dilation 1) by cconv's implicit GEMM over
    the input's channels, each input position taking only the kernel taps that
    reach it (a strided convolution's phases), an image at a time."""
    n, c = dx.shape[:2]
    oc = weight.shape[0]
    nv = cconv.vectors(c, -(-geo.h // geo.sh) * -(-geo.w // geo.sw))
    wph = cconv.pack_phases(weight, geo.sh, geo.sw, nv)
    nb = _chunk(n, geo.k * geo.p)

    def part(lo: int, hi: int) -> None:
        for b0 in range(lo, hi, nb):
            cconv.implicit_input_grad(dx, g, wph, nv, b0, min(hi, b0 + nb), geo)

    _over_images(part, n, nb, oc * geo.k * geo.p * n)


def conv2d(out: np.ndarray, cols: np.ndarray | None, x: np.ndarray, weight: np.ndarray,
           bias: np.ndarray | None, stride: tuple[int, int], padding: tuple[int, int, int, int],
           dilation: tuple[int, int]) -> None:
    """out (N, OC, OH, OW) = weight (OC, C, kh, kw) cross-correlated with x (N, C, H, W)
    padded by ``padding`` (top, bottom, left, right) with zeros, plus bias (OC,);
    cols (C*kh*kw, N*OH*OW) receives the im2col matrix (the weight gradient's input),
    or is None: nothing needs it (``conv2d_weight_grad_x`` takes x instead).
    With cconv's loops (float32/float64, a C compiler): the direct convolution
    (float32, stride 1, rows of 16 or more), else the implicit GEMM (float32, 16
    output channels, positions and steps or more), else cconv's im2col around
    BLAS (16 positions or more), else NumPy's. Without: stride 1 with 32 output
    and 16 input channels or more, the product positions-major
    (``_conv2d_rows``), else ``W @ cols`` (``_conv2d_cols``)."""
    rows_major = tuple(stride) == (1, 1) and weight.shape[0] >= _ROWS_MIN_OC and \
        weight.shape[1] >= _ROWS_MIN_C
    if _c_ready(x, weight, bias, out, cols) and _c_writable(out) and (cols is None or (
            cols.strides[1] == cols.itemsize and cols.flags.writeable)):
        n, c, h, w = x.shape
        oc, _, kh, kw = weight.shape
        geo = cconv.Geometry(c, h, w, kh, kw, out.shape[2], out.shape[3], stride,
                             (padding[0], padding[2]), dilation)
        if _direct_ok(x.dtype, stride, out.shape[3]) and oc >= _DIRECT_MIN_OC:
            _c_direct(out, np.ascontiguousarray(x), weight, _contig(bias), geo, cols)
        elif oc >= _IMPLICIT_MIN_C and geo.p >= _IMPLICIT_MIN_P and \
                geo.k >= _IMPLICIT_MIN_K and cconv.direct_available(x.dtype):
            _c_implicit(out, np.ascontiguousarray(x), weight, _contig(bias), geo, cols)
        elif geo.p >= _C_IM2COL_MIN_P:
            _c_conv2d(out, cols, x, weight, bias, stride, padding, dilation, rows_major)
        else:  # (NumPy's window copy is the faster there)
            _conv2d_cols(out, cols, x, weight, bias, stride, padding, dilation)
    elif rows_major:
        _conv2d_rows(out, cols, x, weight, bias, stride, padding, dilation)
    else:
        _conv2d_cols(out, cols, x, weight, bias, stride, padding, dilation)


def _conv2d_cols(out: np.ndarray, cols: np.ndarray | None, x: np.ndarray, weight: np.ndarray,
                 bias: np.ndarray | None, stride: tuple[int, int],
                 padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> None:
    """conv2d as W (OC, C*kh*kw) @ a chunk's compact im2col matrix, which is then
    copied into its columns of cols; a one-image chunk's product is written
    straight into out."""
    n, c, h, w = x.shape
    oc, _, kh, kw = weight.shape
    oh, ow = out.shape[2:]
    k, p = c * kh * kw, oh * ow
    wt = _work(weight.dtype)
    w2 = np.ascontiguousarray(weight.reshape(oc, k), wt)
    nb = _chunk(n, k * p)
    b3 = None if bias is None else bias.reshape(oc, 1, 1)

    def part(lo: int, hi: int) -> None:
        padder = _Padder(nb, c, h, w, padding, x.dtype) if any(padding) else None
        # the chunk's im2col matrix, compact (and so in cache for the product),
        # copied into its columns of cols after the product
        buf = np.empty((k, nb * p), wt)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            xb = x[b0:b1] if padder is None else padder.fill(x[b0:b1])
            cb = buf[:, :m * p]
            np.copyto(cb.reshape(c, kh, kw, m, oh, ow),
                      _windows(xb, kh, kw, oh, ow, stride, dilation))
            if m == 1 and out[b0].flags.c_contiguous and out.dtype == wt:
                # the image's (OC, OH*OW) output is the product (float16: through
                # the general path, so that the bias is added before the rounding)
                _matmul_into(out[b0].reshape(oc, p), w2, cb)
                if b3 is not None:
                    np.add(out[b0], b3, out=out[b0], casting="unsafe")
            else:
                y = (w2 @ cb).reshape(oc, m, oh, ow).transpose(1, 0, 2, 3)
                if b3 is None:
                    np.copyto(out[b0:b1], y, casting="unsafe")
                else:
                    np.add(y, b3, out=out[b0:b1], casting="unsafe")
            if cols is not None:
                np.copyto(cols[:, b0 * p:b1 * p], cb, casting="unsafe")

    _over_images(part, n, nb, oc * k * p * n)


def _windows_cl(xc: np.ndarray, kh: int, kw: int, oh: int, ow: int,
                stride: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """The (N, OH, OW, kh, kw, C) windows of the (padded) channels-last (N, H, W, C)
    xc: copied out, each position's row of the positions-major im2col matrix
    (kw * C-long runs where the dilation is 1)."""
    (sh, sw), (dh, dw) = stride, dilation
    s = xc.strides
    n, c = xc.shape[0], xc.shape[3]
    return as_strided(xc, (n, oh, ow, kh, kw, c),
                      (s[0], s[1] * sh, s[2] * sw, s[1] * dh, s[2] * dw, s[3]))


def _input_grad_correlate_rows(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                               padding: tuple[int, int, int, int],
                               dilation: tuple[int, int]) -> None:
    """The stride-1 correlation positions-major: the padded g of a chunk made
    channels-last, its im2col rows ((kh, kw, OC) per input position, copied in
    kw*OC-long runs) times the flipped weight as (kh*kw*OC, C), transposed into
    dx. BLAS runs this orientation faster than ``_input_grad_correlate``'s W @
    cols (superres' 64-64 layer: 16-17 ms against 19.5 for the whole gradient);
    the channels-last copy is made from the padded g (a plane's stride then is
    not a multiple of 4 KiB, which made the same transposing copy 5x slower)."""
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    dh, dw = dilation
    pt, pb, pl, pr = padding
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    k, p = oc * kh * kw, h * w
    wt = _work(weight.dtype)
    # row (i, j, o), column c = weight[o, c, kh-1-i, kw-1-j]
    wr = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(2, 3, 0, 1), wt).reshape(k, c)
    nb = _chunk(n, k * p)

    def part(lo: int, hi: int) -> None:
        padder = _Padder(nb, oc, g.shape[2], g.shape[3], (eh - pt, eh - pb, ew - pl, ew - pr),
                         wt)
        gc = np.empty((nb, h + eh, w + ew, oc), wt)
        rows = np.empty((nb * p, k), wt)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            np.copyto(gc[:m], padder.fill(g[b0:b1]).transpose(0, 2, 3, 1))
            rb = rows[:m * p]
            np.copyto(rb.reshape(m, h, w, kh, kw, oc),
                      _windows_cl(gc[:m], kh, kw, h, w, (1, 1), dilation))
            y = (rb @ wr).reshape(m, h, w, c).transpose(0, 3, 1, 2)
            np.copyto(dx[b0:b1], y, casting="unsafe")

    _over_images(part, n, nb, c * k * p * n)


def _conv2d_rows(out: np.ndarray, cols: np.ndarray | None, x: np.ndarray, weight: np.ndarray,
                 bias: np.ndarray | None, stride: tuple[int, int],
                 padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> None:
    """conv2d with the product positions-major: a chunk's im2col rows (one per
    output position, (kh, kw, C) each) from a channels-last copy of the padded
    input, times the weight as (kh*kw*C, OC), transposed into out with the bias;
    cols is filled straight from the windows (a second im2col, but OpenBLAS runs
    this product 1.2x (64 output channels) to 1.4x (32) faster than W @ cols:
    superres' 64-64 and 64-32 layers 5-10% faster in all; with fewer channels,
    or strided, the extra copies cost more than that)."""
    n, c, h, w = x.shape
    oc, _, kh, kw = weight.shape
    oh, ow = out.shape[2:]
    k, p = c * kh * kw, oh * ow
    wt = _work(weight.dtype)
    wr = np.ascontiguousarray(weight.transpose(2, 3, 1, 0), wt).reshape(k, oc)
    nb = _chunk(n, k * p)
    cols6 = None if cols is None else cols.reshape(c, kh, kw, n, oh, ow)
    b3 = None if bias is None else bias.reshape(oc, 1, 1)

    def part(lo: int, hi: int) -> None:
        padder = _Padder(nb, c, h, w, padding, x.dtype) if any(padding) else None
        pt, pb, pl, pr = padding
        xc = np.empty((nb, h + pt + pb, w + pl + pr, c), wt)
        rows = np.empty((nb * p, k), wt)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            xb = x[b0:b1] if padder is None else padder.fill(x[b0:b1])
            if cols6 is not None:
                np.copyto(cols6[:, :, :, b0:b1], _windows(xb, kh, kw, oh, ow, stride, dilation))
            np.copyto(xc[:m], xb.transpose(0, 2, 3, 1), casting="unsafe")
            rb = rows[:m * p]
            np.copyto(rb.reshape(m, oh, ow, kh, kw, c),
                      _windows_cl(xc[:m], kh, kw, oh, ow, stride, dilation))
            y = (rb @ wr).reshape(m, oh, ow, oc).transpose(0, 3, 1, 2)
            if b3 is None:
                np.copyto(out[b0:b1], y, casting="unsafe")
            else:
                np.add(y, b3, out=out[b0:b1], casting="unsafe")

    _over_images(part, n, nb, oc * k * p * n)


def _input_grad_correlate(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                          padding: tuple[int, int, int, int],
                          dilation: tuple[int, int]) -> None:
    """Stride 1: dx = g, zero-padded by the dilated kernel's extent less the
    forward's padding, cross-correlated with the flipped weight whose in and out
    channels are swapped: im2col of g and one matmul per chunk."""
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    dh, dw = dilation
    pt, pb, pl, pr = padding
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    k, p = oc * kh * kw, h * w
    wt = _work(weight.dtype)
    # (C, OC*kh*kw): row c, column (o, i, j) = weight[o, c, kh-1-i, kw-1-j]
    w2 = np.ascontiguousarray(weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3), wt).reshape(c, k)
    nb = _chunk(n, k * p)

    def part(lo: int, hi: int) -> None:
        # g's rows land so that gq row u + i*dh feeds dx row u: g (OH rows) padded
        # by eh - pt on top and eh - pb below (cropped where that is negative)
        padder = _Padder(nb, oc, g.shape[2], g.shape[3], (eh - pt, eh - pb, ew - pl, ew - pr),
                         wt)
        gcols = np.empty((k, nb * p), wt)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            gq = padder.fill(g[b0:b1])
            cb = gcols[:, :m * p]
            np.copyto(cb.reshape(oc, kh, kw, m, h, w),
                      _windows(gq, kh, kw, h, w, (1, 1), dilation))
            if m == 1 and dx[b0].flags.c_contiguous:
                _matmul_into(dx[b0].reshape(c, p), w2, cb)
            else:
                y = (w2 @ cb).reshape(c, m, h, w).transpose(1, 0, 2, 3)
                np.copyto(dx[b0:b1], y, casting="unsafe")

    _over_images(part, n, nb, c * k * p * n)


def _input_grad_col2im(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                       stride: tuple[int, int], padding: tuple[int, int, int, int],
                       dilation: tuple[int, int]) -> None:
    """dx = weight^T @ g as columns, each added back onto the (padded) input
    positions its window read (col2im), a chunk of images at a time."""
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    pt, pb, pl, pr = padding
    k, p = c * kh * kw, oh * ow
    wt = _work(weight.dtype)
    w2t = np.ascontiguousarray(weight.reshape(oc, k).T, wt)  # (K, OC)
    nb = _chunk(n, k * p)
    hspan, wspan = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    # the rows/cols the windows reach (a strided conv may leave some of the padded
    # input's last ones unread: their gradient is zero)
    hr, wr = hspan + dh * (kh - 1), wspan + dw * (kw - 1)
    hb, wb = max(hr, pt + h), max(wr, pl + w)
    direct = not any(padding) and dx.dtype == wt and hb == h and wb == w

    def part(lo: int, hi: int) -> None:
        dxp = None if direct else np.empty((nb, c, hb, wb), wt)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            gb = g[b0:b1]
            rows = gb.reshape(oc, p) if m == 1 else \
                np.ascontiguousarray(gb.transpose(1, 0, 2, 3)).reshape(oc, m * p)
            d6 = (w2t @ rows.astype(wt, copy=False)).reshape(c, kh, kw, m, oh, ow)
            acc = dx[b0:b1] if dxp is None else dxp[:m]
            acc[...] = 0
            for i in range(kh):
                r0 = i * dh
                for j in range(kw):
                    c0 = j * dw
                    dst = acc[:, :, r0:r0 + hspan:sh, c0:c0 + wspan:sw]
                    np.add(dst, d6[:, i, j].transpose(1, 0, 2, 3), out=dst)
            if dxp is not None:
                np.copyto(dx[b0:b1], acc[:, :, pt:pt + h, pl:pl + w], casting="unsafe")

    _over_images(part, n, nb, oc * k * p * n)


def _input_grad_col2im_cl(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                          stride: tuple[int, int], padding: tuple[int, int, int, int],
                          dilation: tuple[int, int]) -> None:
    """col2im channels-last, a chunk of images at a time: g as (positions, OC)
    times the weight as (OC, kh*kw*C) gives each position's (kh, kw, C) patch;
    the ``kh * kw`` strided adds into an (nb, H, W, C) accumulator then run over
    whole C-long runs instead of OW-long ones (a 4x4 stride-2 kernel on 8x8
    outputs: 8 elements a run, so NumPy's per-run cost was most of the time),
    and one transposing copy gives dx."""
    n, c, h, w = dx.shape
    oc, _, kh, kw = weight.shape
    oh, ow = g.shape[2:]
    (sh, sw), (dh, dw) = stride, dilation
    pt, pb, pl, pr = padding
    k, p = c * kh * kw, oh * ow
    wt = _work(weight.dtype)
    w2 = np.ascontiguousarray(weight.transpose(0, 2, 3, 1), wt).reshape(oc, k)
    nb = _chunk(n, k * p)
    hspan, wspan = sh * (oh - 1) + 1, sw * (ow - 1) + 1
    hb = max(hspan + dh * (kh - 1), pt + h)
    wb = max(wspan + dw * (kw - 1), pl + w)

    def part(lo: int, hi: int) -> None:
        acc = np.empty((nb, hb, wb, c), wt)
        gt = np.empty((nb, oh, ow, oc), wt)
        for b0 in range(lo, hi, nb):
            b1 = min(hi, b0 + nb)
            m = b1 - b0
            gm = gt[:m]
            np.copyto(gm, g[b0:b1].transpose(0, 2, 3, 1), casting="unsafe")
            d = (gm.reshape(m * p, oc) @ w2).reshape(m, oh, ow, kh, kw, c)
            am = acc[:m]
            am[...] = 0
            for i in range(kh):
                r0 = i * dh
                for j in range(kw):
                    c0 = j * dw
                    dst = am[:, r0:r0 + hspan:sh, c0:c0 + wspan:sw]
                    np.add(dst, d[:, :, :, i, j], out=dst)
            np.copyto(dx[b0:b1], am[:, pt:pt + h, pl:pl + w].transpose(0, 3, 1, 2),
                      casting="unsafe")

    _over_images(part, n, nb, oc * k * p * n)


def _product(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    np.matmul(a, b, out=out)


# rtx_cpu's matmul kernel (large products split by shape over the threads: ``blas``)
_matmul = blas.matmul_kernel(_product)


def _one_position(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                  padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> bool:
    """Where the convolution's output is one position that the kernel covers
    exactly (no padding, no dilation: DCGAN's first ConvTranspose2d from its
    1x1 latent, its critic's last 4x4 -> 1x1 conv), dx (N, C*kh*kw) is one
    product, g (N, OC) @ weight (OC, C*kh*kw), with no im2col or col2im (a
    ConvTranspose2d 100 -> 128 from 1x1 to 4x4, batch 32: 1.2 -> ~0.15 ms).
    False where that is not the case."""
    n, c, h, w = dx.shape
    oc = weight.shape[0]
    if g.shape[2:] != (1, 1) or (h, w) != weight.shape[2:] or any(padding) or \
            tuple(dilation) != (1, 1) or not dx.flags.c_contiguous or not dx.flags.writeable:
        return False
    wt = _work(dx.dtype)
    g2 = g.reshape(n, oc).astype(wt, copy=False)
    w2 = weight.reshape(oc, c * h * w).astype(wt, copy=False)
    d = dx.reshape(n, c * h * w) if dx.dtype == wt else np.empty((n, c * h * w), wt)
    _matmul(d, g2, w2)
    if d.dtype != dx.dtype:  # (float16: rounded once)
        np.copyto(dx.reshape(d.shape), d, casting="unsafe")
    return True


def conv2d_input_grad(dx: np.ndarray, g: np.ndarray, weight: np.ndarray,
                      stride: tuple[int, int], padding: tuple[int, int, int, int],
                      dilation: tuple[int, int]) -> None:
    """dx (N, C, H, W) = the gradient of conv2d's input for the output gradient g
    (N, OC, OH, OW): for stride 1 the correlation of the padded g with the flipped
    weight (where g has at most twice the input's channels: its im2col matrix is
    then at most twice col2im's), else col2im."""
    c, oc = dx.shape[1], weight.shape[0]
    if _one_position(dx, g, weight, padding, dilation):
        return
    if _c_ready(dx, g, weight) and _c_writable(dx):
        if _direct_ok(dx.dtype, stride, dx.shape[3]) and c >= _DIRECT_MIN_OC:
            # the correlation of g, padded by the kernel's extent less the forward's
            # padding, with the flipped weight, its channels swapped
            kh, kw = weight.shape[2:]
            eh, ew = dilation[0] * (kh - 1), dilation[1] * (kw - 1)
            geo = cconv.Geometry(oc, g.shape[2], g.shape[3], kh, kw, dx.shape[2], dx.shape[3],
                                 (1, 1), (eh - padding[0], ew - padding[2]), dilation)
            wf = weight[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
            _c_direct(dx, np.ascontiguousarray(g), wf, None, geo, None)
        elif c >= _IMPLICIT_MIN_C and g.shape[2] * g.shape[3] >= _IMPLICIT_MIN_P and \
                tuple(dilation) == (1, 1) and min(padding) >= 0 and \
                cconv.direct_available(dx.dtype):
            n, _, h, w = dx.shape
            kh, kw = weight.shape[2:]
            geo = cconv.Geometry(c, h, w, kh, kw, g.shape[2], g.shape[3], stride,
                                 (padding[0], padding[2]), dilation)
            _c_implicit_input_grad(dx, np.ascontiguousarray(g), weight, geo)
        elif tuple(stride) == (1, 1) and oc <= 2 * c and g.shape[2] >= weight.shape[2] and \
                g.shape[3] >= weight.shape[3]:
            # (a g smaller than the kernel, DCGAN's first ConvTranspose2d's 1x1: the
            # correlation's rows would be mostly its padding; col2im, 0.98 -> 0.4 ms)
            _c_input_grad_correlate(dx, g, weight, padding, dilation, oc >= _CL_MIN_C)
        else:
            _c_input_grad_col2im(dx, g, weight, stride, padding, dilation)
    elif tuple(stride) == (1, 1) and oc <= 2 * c:
        if oc >= _CL_MIN_C:
            _input_grad_correlate_rows(dx, g, weight, padding, dilation)
        else:
            _input_grad_correlate(dx, g, weight, padding, dilation)
    elif c >= _CL_MIN_C:
        _input_grad_col2im_cl(dx, g, weight, stride, padding, dilation)
    else:
        _input_grad_col2im(dx, g, weight, stride, padding, dilation)


# the weight gradient by cconv's implicit GEMM from this many output channels and
# rows of cols (fewer rows: its tiles would be mostly padding, superres' 1-64 5x5
# 1.35 ms against BLAS's 1.15). Few output channels leave most of a 16-lane vector
# empty, but BLAS does worse on a (K, N*P) @ (N*P, OC) product that narrow (and the
# im2col matrix is written first): at 2 threads superres' 32-9 layer took 3.8 ms by
# BLAS, 1.2 by the tile; 32-3 3.4 / 2.0, 64-4 1.6 / 1.0; 32-1 2.0 either way
_WGRAD_MIN_OC, _WGRAD_MIN_K = 2, 64
# ... and below that many rows, a product per image from this many positions an
# image (fewer: the per-image calls cost more than the copy of g they save)
_WGRAD_BATCHED_MIN_P = 256
_BATCHED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _c_weight_grad(dweight: np.ndarray, g: np.ndarray, cols: np.ndarray) -> None:
    """dweight = g @ cols^T by cconv's implicit GEMM: vectors of output channels
    (g transposed a chunk of positions at a time), tiles of rows of cols, the
    reduction over the positions in order; rows of cols split over the threads
    (each row's sums are the same whoever computes them)."""
    k = cols.shape[0]
    _tiled_weight_grad(dweight, g.shape[1] * k * cols.shape[1], k, 16,
                       lambda dwt, nv, lo, hi: cconv.implicit_weight_grad(dwt, g, cols, nv, lo, hi))


def _tiled_weight_grad(dweight: np.ndarray, macs: int, units: int, align: int,
                       part: Callable[[np.ndarray, int, int, int], None]) -> None:
    """dweight from cconv's weight-gradient tile: ``part(dwt, nv, lo, hi)`` fills
    the transposed, channel-blocked dwt for units lo..hi (rows of cols, or input
    channels), split over the threads in multiples of ``align`` from _SPLIT_MIN
    multiply-adds; then dwt into dweight."""
    oc = dweight.shape[0]
    k = dweight[0].size
    nv = cconv.vectors(oc)
    dwt = np.empty((-(-oc // (16 * nv)), k, 16 * nv), np.float32)
    t = threads()
    parts = 1 if t <= 1 or macs < _SPLIT_MIN or in_pool() else min(t, units // align)
    if parts <= 1:
        part(dwt, nv, 0, units)
    else:
        _run(lambda lo, hi: part(dwt, nv, lo, hi), _bounds(units, parts, align))
    d = dwt.transpose(0, 2, 1).reshape(-1, k)[:oc]
    np.copyto(dweight, d.reshape(dweight.shape))


def conv2d_weight_grad(dweight: np.ndarray, g: np.ndarray, cols: np.ndarray) -> None:
    """dweight (OC, C, kh, kw) = g (N, OC, OH, OW) as (OC, N*OH*OW) @ cols^T."""
    n, oc, oh, ow = g.shape
    k = cols.shape[0]
    if oc >= _WGRAD_MIN_OC and k >= _WGRAD_MIN_K and _c_ready(g, cols, dweight) and \
            cconv.direct_available(g.dtype) and cols.strides[1] == cols.itemsize and \
            dweight.flags.writeable:
        _c_weight_grad(dweight, np.ascontiguousarray(g), cols)
        return
    p = oh * ow
    if k < _WGRAD_MIN_K and p >= _WGRAD_BATCHED_MIN_P and cols.dtype == g.dtype == dweight.dtype \
            and g.dtype in _BATCHED_DTYPES and cols.strides[1] == cols.itemsize:
        # few rows of cols (a first layer's C*kh*kw): a product per image, (OC, P) @
        # (P, K), then their sum, instead of copying g transposed into (OC, N*P)
        # (the copy is most of the time: the digits-size 1-16 3x3 layer at batch
        # 64, 0.91 -> 0.17 ms; superres' 1-64 5x5, 1.27 -> 1.03)
        per_image = np.matmul(g.reshape(n, oc, p), cols.reshape(k, n, p).transpose(1, 2, 0))
        np.copyto(dweight, np.add.reduce(per_image, axis=0).reshape(dweight.shape))
        return
    wt = _work(cols.dtype)
    rows = np.ascontiguousarray(g.transpose(1, 0, 2, 3), wt).reshape(oc, n * oh * ow)
    if cols.dtype != wt:
        cols = cols.astype(wt)
    # BLAS is faster with the long matrix on the left: cols @ rows^T, (K, OC), then
    # its transpose (small) into dweight; 1.2-1.5x for K >= OC
    d = (cols @ rows.T).T if k >= oc else rows @ cols.T
    np.copyto(dweight, d.reshape(dweight.shape), casting="unsafe")


def conv2d_weight_grad_x(dweight: np.ndarray, g: np.ndarray, x: np.ndarray,
                         stride: tuple[int, int], padding: tuple[int, int, int, int],
                         dilation: tuple[int, int]) -> None:
    """dweight (OC, C, kh, kw) = conv2d's weight gradient for output gradient g (N,
    OC, OH, OW) and input x (N, C, H, W), with x's im2col formed here a chunk of
    images at a time (conv2d then writes no cols: for superres' 64-64 layer 38 MB
    a step that went to memory and back). The bits are conv2d_weight_grad's of
    conv2d's cols: the C tile's sums run over the positions in order and carry
    from chunk to chunk; the other forms take the whole matrix as before."""
    n, oc, oh, ow = g.shape
    _, c, kh, kw = dweight.shape
    k, p = c * kh * kw, oh * ow
    if n == 0 or p == 0:
        dweight[...] = 0
        return
    geo = cconv.Geometry(c, x.shape[2], x.shape[3], kh, kw, oh, ow, stride,
                         (padding[0], padding[2]), dilation) if _c_ready(g, x, dweight) else None
    if geo is not None and oc >= _WGRAD_MIN_OC and k >= _WGRAD_MIN_K and \
            cconv.direct_available(g.dtype) and dweight.flags.writeable:
        _c_weight_grad_x(dweight, np.ascontiguousarray(g), np.ascontiguousarray(x), geo)
        return
    cols = np.empty((k, n * p), x.dtype)
    if geo is not None and p >= _C_IM2COL_MIN_P:
        xc = np.ascontiguousarray(x)
        _over_images(lambda lo, hi: cconv.im2col(cols[:, lo * p:hi * p], xc, lo, hi, geo),
                     n, 1, oc * k * p * n)
    else:
        xp = _Padder(n, c, x.shape[2], x.shape[3], padding, x.dtype).fill(x) \
            if any(padding) else x
        np.copyto(cols.reshape(c, kh, kw, n, oh, ow),
                  _windows(xp, kh, kw, oh, ow, stride, dilation))
    conv2d_weight_grad(dweight, g, cols)


def _c_weight_grad_x(dweight: np.ndarray, g: np.ndarray, x: np.ndarray,
                     geo: cconv.Geometry) -> None:
    """``_c_weight_grad`` reading x itself (``cconv.implicit_weight_grad_x``: each
    image padded once, no im2col matrix), the input channels split over the
    threads (each row's sums are the same whoever computes them)."""
    _tiled_weight_grad(dweight, g.shape[1] * geo.k * geo.p * g.shape[0], geo.c, 1,
                       lambda dwt, nv, c0, c1: cconv.implicit_weight_grad_x(dwt, g, x, nv, geo,
                                                                            c0, c1))


KERNELS: dict[str, Any] = {
    "conv2d": conv2d, "conv2d_input_grad": conv2d_input_grad,
    "conv2d_weight_grad": conv2d_weight_grad, "conv2d_weight_grad_x": conv2d_weight_grad_x,
}
