"""The copies around conv2d's matrix products, as fixed C loops.

``conv_kernels`` runs a convolution as im2col and a BLAS product (or the
product and col2im), a chunk of images at a time. In NumPy each copy is an
``as_strided`` view copied out: its inner runs are one output row (32
elements, or 8 at stride 2, strided), so NumPy's per-run cost was most of it;
the zero padding was a further copy, and the output's transposition another
pass. Here each is one C loop over a chunk's images, compiled once per process
by ``cfused``'s compiler with its flags (every float operation as written: the
loops only copy, except col2im's adds and the bias add, which are NumPy's
operations in NumPy's order, so the values are the NumPy forms' bits). ctypes
lets go of the GIL, so ``conv_kernels``' split of a batch over the backend's
threads runs these copies on both cores too.

- ``im2col``: the (C*kh*kw, images*OH*OW) columns (row (c, i, j), column
  (image, oh, ow)) of a chunk of images, zero where the window reads padding;
  into a buffer or straight into the forward's ``cols`` (a row stride ``ld``).
- ``im2row``: the positions-major matrix, one row of (kh, kw, C) a position:
  each image is first made channels-last and padded in a small scratch
  buffer, then each row is kh runs of kw*C elements.
- ``col2im``: the input gradient's columns (the channel-major layout above)
  added into the images' planes, kernel offsets in row-major order (each
  plane zeroed first): the NumPy form's adds in its order.
- ``rows_to_nchw`` / ``cols_to_nchw``: a product's (positions, OC) or (OC,
  positions) result into (N, OC, OH, OW), with the bias added (``y + b``, one
  add, as NumPy's); ``nchw_to_cols`` the other way ((N, OC, P) to (OC, N*P)).

And in float32, with AVX-512 (``direct_available``; each kernel returns 0,
writing nothing, where the compiler did not target it), the products
themselves, with fused multiply-adds (the BLAS products round alike: the values
agree with the NumPy forms' to float32's precision, not bit for bit):

- ``direct_conv``: stride 1; an output row's 32 positions (two vectors) by a
  block of 4, 8 or 12 output channels, the sum over (c, i, j) in order;
- ``implicit_conv``: any stride; 16-64 channels (1-4 vectors) by 6-16
  positions a tile, each step a row of the packed weight times each position's
  input value (an offsets table into the padded image);
- ``implicit_input_grad``: the input gradient by the same tile over the input's
  channels, the positions grouped by their phase modulo the stride so that
  each takes only the kernel taps that reach it;
- ``implicit_weight_grad``: the same tile with the positions as the reduction
  (g transposed a chunk at a time), rows of cols by output channels;
- ``im2col`` by gathers where the output rows are short or strided.

Only ints and pointers cross into C, the source is fixed text, and every
wrapper checks the arrays' dtypes, layouts and sizes before a pointer is
passed; where there is no compiler (or ``RTX_CPU_CC=0``), a compile failed or
an operand does not fit, ``available`` is False and the NumPy forms run.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from . import cfused

_TYPES = cfused.FLOAT_TYPES

_TEMPLATE = r"""
/* the ow range [*a, *b) whose input column ow * sw + off lies in [0, W) */
static void span_{S}(int64_t off, int64_t sw, int64_t W, int64_t OW, int64_t *a, int64_t *b) {
    int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    int64_t hi = W - off <= 0 ? 0 : (W - off + sw - 1) / sw;
    if (lo > OW) lo = OW;
    if (hi > OW) hi = OW;
    if (hi < lo) hi = lo;
    *a = lo;
    *b = hi;
}

/* d[0 .. len) = s[0 .. len), the whole cache lines of d by non-temporal stores (the
   forward's cols, which the backward reads much later: no read of each line before
   it is written, no eviction of what the convolution works on) */
static inline void stream_{S}({T} *d, const {T} *s, int64_t len) {
#ifdef __AVX512F__
    const int64_t L = 64 / (int64_t)sizeof({T});
    int64_t q = 0;
    while (q < len && ((uintptr_t)(d + q) & 63)) { d[q] = s[q]; q++; }
    for (; q + L <= len; q += L) STREAM_{S}(d + q, s + q);
    for (; q < len; q++) d[q] = s[q];
#else
    memcpy(d, s, (size_t)len * sizeof({T}));
#endif
}

/* cols row (c - c0, i, j) (row stride ld), column (n - n0) * OH * OW + oh * OW + ow =
   x[n, c, oh * sh + i * dh - pt, ow * sw + j * dw - pl], 0 outside x, for the
   channels c0 <= c < c1 */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
void im2col_{S}({T} *cols, int64_t ld, const {T} *x, int64_t n0, int64_t n1, int64_t C,
                int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t OH, int64_t OW,
                int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw,
                int64_t c0, int64_t c1, {T} *stage) {
    int64_t P = OH * OW;
    int64_t sa[kw], sb[kw];  /* each j's span of ow */
    for (int64_t j = 0; j < kw; j++) span_{S}(j * dw - pl, sw, W, OW, sa + j, sb + j);
    /* G images at a time (their planes stay in cache over the kh * kw passes, and
       each row is written G * P elements at a stretch: a row stride of 4 KiB, one
       image's P elements at a time, made every write miss) */
    int64_t G = P >= 256 ? 1 : (256 + P - 1) / P;
    for (int64_t g0 = n0; g0 < n1; g0 += G) {
    int64_t g1 = g0 + G < n1 ? g0 + G : n1;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++) {
                {T} *row = cols + (((c - c0) * kh + i) * kw + j) * ld;
                int64_t off = j * dw - pl, a = sa[j], b = sb[j];
                for (int64_t n = g0; n < g1; n++) {
                    const {T} *xp = x + (n * C + c) * H * W;
                    {T} *dst = stage ? stage + (n - g0) * P : row + (n - n0) * P;
                    for (int64_t oh = 0; oh < OH; oh++) {
                        int64_t ih = oh * sh + i * dh - pt;
                        {T} *d = dst + oh * OW;
                        if (ih < 0 || ih >= H) {
                            if (OW >= 16) memset(d, 0, (size_t)OW * sizeof({T}));
                            else for (int64_t ow = 0; ow < OW; ow++) d[ow] = 0;
                            continue;
                        }
                        const {T} *s = xp + ih * W + off;
                        int64_t ow;
                        for (ow = 0; ow < a; ow++) d[ow] = 0;
                        if (sw == 1) {
                            /* (a library call costs more than a short row's copy) */
                            if (b - a >= 16)
                                memcpy(d + a, s + a, (size_t)(b - a) * sizeof({T}));
                            else
                                for (ow = a; ow < b; ow++) d[ow] = s[ow];
                        } else {
                            for (ow = a; ow < b; ow++) d[ow] = s[ow * sw];
                        }
                        for (ow = b; ow < OW; ow++) d[ow] = 0;
                    }
                }
                if (stage) stream_{S}(row + (g0 - n0) * P, stage, (g1 - g0) * P);
            }
    }
#ifdef __AVX512F__
    if (stage) _mm_sfence();
#endif
}

/* rows row (n - n0) * OH * OW + oh * OW + ow, column (i * kw + j) * C + c = the same
   window element; scratch holds one image channels-last, (Hs, Ws, C), Hs = (OH - 1)
   * sh + (kh - 1) * dh + 1 (Ws likewise): scratch[r, s, c] = x[n, c, r - pt, s - pl] */
void im2row_{S}({T} *rows, {T} *scratch, const {T} *x, int64_t n0, int64_t n1, int64_t C,
                int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t OH, int64_t OW,
                int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw) {
    int64_t P = OH * OW, K = kh * kw * C;
    int64_t Hs = (OH - 1) * sh + (kh - 1) * dh + 1, Ws = (OW - 1) * sw + (kw - 1) * dw + 1;
    int64_t s0 = pl < 0 ? 0 : (pl < Ws ? pl : Ws);
    int64_t s1 = pl + W < Ws ? pl + W : Ws;
    if (s1 < s0) s1 = s0;
    for (int64_t n = n0; n < n1; n++) {
        const {T} *xn = x + n * C * H * W;
        for (int64_t r = 0; r < Hs; r++) {
            int64_t ih = r - pt;
            {T} *sr = scratch + r * Ws * C;
            if (ih < 0 || ih >= H) {
                memset(sr, 0, (size_t)(Ws * C) * sizeof({T}));
                continue;
            }
            if (s0 > 0) memset(sr, 0, (size_t)(s0 * C) * sizeof({T}));
            if (s1 < Ws) memset(sr + s1 * C, 0, (size_t)((Ws - s1) * C) * sizeof({T}));
            for (int64_t c = 0; c < C; c++) {
                const {T} *xr = xn + c * H * W + ih * W - pl;
                for (int64_t s = s0; s < s1; s++) sr[s * C + c] = xr[s];
            }
        }
        {T} *rn = rows + (n - n0) * P * K;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                {T} *d = rn + (oh * OW + ow) * K;
                for (int64_t i = 0; i < kh; i++) {
                    const {T} *s = scratch + ((oh * sh + i * dh) * Ws + ow * sw) * C;
                    if (dw == 1)
                        memcpy(d + i * kw * C, s, (size_t)(kw * C) * sizeof({T}));
                    else
                        for (int64_t j = 0; j < kw; j++)
                            memcpy(d + (i * kw + j) * C, s + j * dw * C,
                                   (size_t)C * sizeof({T}));
                }
            }
    }
}

/* dx[n] (images n0..n1, zeroed first) += d's columns (im2col's layout, row stride ld,
   image n at column (n - n0) * OH * OW), kernel offsets (i, j) in row-major order */
void col2im_{S}({T} *dx, const {T} *d, int64_t ld, int64_t n0, int64_t n1, int64_t C,
                int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t OH, int64_t OW,
                int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw) {
    int64_t P = OH * OW;
    int64_t sa[kw], sb[kw];  /* each j's span of ow */
    for (int64_t j = 0; j < kw; j++) span_{S}(j * dw - pl, sw, W, OW, sa + j, sb + j);
    for (int64_t n = n0; n < n1; n++)
        for (int64_t c = 0; c < C; c++) {
            {T} *plane = dx + (n * C + c) * H * W;
            memset(plane, 0, (size_t)(H * W) * sizeof({T}));
            for (int64_t i = 0; i < kh; i++)
                for (int64_t j = 0; j < kw; j++) {
                    const {T} *src = d + ((c * kh + i) * kw + j) * ld + (n - n0) * P;
                    int64_t off = j * dw - pl, a = sa[j], b = sb[j];
                    for (int64_t oh = 0; oh < OH; oh++) {
                        int64_t ih = oh * sh + i * dh - pt;
                        if (ih < 0 || ih >= H) continue;
                        {T} *o = plane + ih * W + off;
                        const {T} *s = src + oh * OW;
                        if (sw == 1)
                            for (int64_t ow = a; ow < b; ow++) o[ow] = o[ow] + s[ow];
                        else
                            for (int64_t ow = a; ow < b; ow++) o[ow * sw] = o[ow * sw] + s[ow];
                    }
                }
        }
}

/* out[n, o, q] = y[(n - n0) * P + q, o] (+ b[o]), y rows of OC */
void rows_to_nchw_{S}({T} *out, const {T} *y, const {T} *b, int64_t n0, int64_t n1,
                      int64_t OC, int64_t P) {
    for (int64_t n = n0; n < n1; n++) {
        const {T} *yn = y + (n - n0) * P * OC;
        {T} *on = out + n * OC * P;
        for (int64_t q0 = 0; q0 < P; q0 += 16) {
            int64_t q1 = q0 + 16 < P ? q0 + 16 : P;
            for (int64_t o = 0; o < OC; o++) {
                {T} *d = on + o * P;
                if (b) {
                    {T} bo = b[o];
                    for (int64_t q = q0; q < q1; q++) d[q] = yn[q * OC + o] + bo;
                } else {
                    for (int64_t q = q0; q < q1; q++) d[q] = yn[q * OC + o];
                }
            }
        }
    }
}

/* out[n, o, q] = y[o * ld + (n - n0) * P + q] (+ b[o]) */
void cols_to_nchw_{S}({T} *out, const {T} *y, int64_t ld, const {T} *b, int64_t n0,
                      int64_t n1, int64_t OC, int64_t P) {
    for (int64_t n = n0; n < n1; n++)
        for (int64_t o = 0; o < OC; o++) {
            const {T} *s = y + o * ld + (n - n0) * P;
            {T} *d = out + (n * OC + o) * P;
            if (b) {
                {T} bo = b[o];
                for (int64_t q = 0; q < P; q++) d[q] = s[q] + bo;
            } else {
                memcpy(d, s, (size_t)P * sizeof({T}));
            }
        }
}

/* dst[o * ld + (n - n0) * P + q] = src[n, o, q] */
void nchw_to_cols_{S}({T} *dst, int64_t ld, const {T} *src, int64_t n0, int64_t n1,
                      int64_t OC, int64_t P) {
    for (int64_t n = n0; n < n1; n++)
        for (int64_t o = 0; o < OC; o++)
            memcpy(dst + o * ld + (n - n0) * P, src + (n * OC + o) * P,
                   (size_t)P * sizeof({T}));
}
"""

_DIRECT = r"""
/* float32 direct convolution, stride 1 (AVX-512; returns 0, writing nothing,
   where the machine lacks it): out[n, o, oh, ow] = (b[o] +) the sum over (c, i, j),
   in that order, of w[o, c, i, j] * x[n, c, oh + i * dh - pt, ow + j * dw - pl]
   (0 outside x), each term one fused multiply-add. wpk: the weight packed in blocks
   of B output channels, (blocks, C * kh * kw, B), zero past OC. Per image, x is
   first copied into xp, zero-padded (C, Hp, Wp); then an output row's 32
   positions (two vectors) by B channels are B * 2 accumulators over the
   C * kh * kw steps, each step two loads of xp and B broadcasts of wpk. */
int dconv_f32_b{B}(float *out, const float *x, const float *wpk, const float *bias,
                   float *xp, int64_t n0, int64_t n1, int64_t C, int64_t H, int64_t W,
                   int64_t OC, int64_t kh, int64_t kw, int64_t OH, int64_t OW, int64_t pt,
                   int64_t pl, int64_t dh, int64_t dw) {
#ifndef __AVX512F__
    return 0;
#else
    int64_t Hp = OH + (kh - 1) * dh, OWr = (OW + 31) / 32 * 32, Wp = OWr + (kw - 1) * dw;
    int64_t K = C * kh * kw, nblk = (OC + {B} - 1) / {B};
    int64_t s0 = pl < 0 ? 0 : (pl < Wp ? pl : Wp), s1 = pl + W < Wp ? pl + W : Wp;
    if (s1 < s0) s1 = s0;
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t c = 0; c < C; c++)
            for (int64_t r = 0; r < Hp; r++) {
                int64_t ih = r - pt;
                float *row = xp + (c * Hp + r) * Wp;
                if (ih < 0 || ih >= H) {
                    memset(row, 0, (size_t)Wp * sizeof(float));
                    continue;
                }
                if (s0 > 0) memset(row, 0, (size_t)s0 * sizeof(float));
                if (s1 > s0)
                    memcpy(row + s0, x + ((n * C + c) * H + ih) * W + s0 - pl,
                           (size_t)(s1 - s0) * sizeof(float));
                if (s1 < Wp) memset(row + s1, 0, (size_t)(Wp - s1) * sizeof(float));
            }
        for (int64_t blk = 0; blk < nblk; blk++) {
            const float *wb = wpk + blk * K * {B};
            int64_t o0 = blk * {B}, ob = OC - o0 < {B} ? OC - o0 : {B};
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow0 = 0; ow0 < OW; ow0 += 32) {
                    __m512 a0[{B}], a1[{B}];
#pragma GCC unroll 16
                    for (int o = 0; o < {B}; o++) {
                        a0[o] = _mm512_set1_ps(bias && o < ob ? bias[o0 + o] : 0.0f);
                        a1[o] = a0[o];
                    }
                    const float *wr = wb;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t i = 0; i < kh; i++) {
                            const float *xr = xp + (c * Hp + oh + i * dh) * Wp + ow0;
                            for (int64_t j = 0; j < kw; j++) {
                                __m512 v0 = _mm512_loadu_ps(xr + j * dw);
                                __m512 v1 = _mm512_loadu_ps(xr + j * dw + 16);
#pragma GCC unroll 16
                                for (int o = 0; o < {B}; o++) {
                                    __m512 wv = _mm512_set1_ps(wr[o]);
                                    a0[o] = _mm512_fmadd_ps(v0, wv, a0[o]);
                                    a1[o] = _mm512_fmadd_ps(v1, wv, a1[o]);
                                }
                                wr += {B};
                            }
                        }
                    int64_t left = OW - ow0;
                    __mmask16 m0 = left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1);
                    __mmask16 m1 = left >= 32 ? 0xFFFF :
                        (left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1));
                    for (int o = 0; o < ob; o++) {
                        float *dst = out + ((n * OC + o0 + o) * OH + oh) * OW + ow0;
                        _mm512_mask_storeu_ps(dst, m0, a0[o]);
                        _mm512_mask_storeu_ps(dst + 16, m1, a1[o]);
                    }
                }
        }
    }
    return 1;
#endif
}
"""

_GATHER = r"""
/* channels c0 .. c1 of one (C, H, W) image xi placed at (pt, pl) in zeros: xp
   (c1 - c0, Hs, Ws), cropped where a padding is negative */
static void pad_planes_f32(float *xp, const float *xi, int64_t c0, int64_t c1, int64_t H,
                           int64_t W, int64_t Hs, int64_t Ws, int64_t pt, int64_t pl) {
    int64_t s0 = pl < 0 ? 0 : (pl < Ws ? pl : Ws), s1 = pl + W < Ws ? pl + W : Ws;
    if (s1 < s0) s1 = s0;
    for (int64_t c = c0; c < c1; c++)
        for (int64_t r = 0; r < Hs; r++) {
            int64_t ih = r - pt;
            float *row = xp + ((c - c0) * Hs + r) * Ws;
            if (ih < 0 || ih >= H) {
                memset(row, 0, (size_t)Ws * sizeof(float));
                continue;
            }
            if (s0 > 0) memset(row, 0, (size_t)s0 * sizeof(float));
            if (s1 > s0)
                memcpy(row + s0, xi + (c * H + ih) * W + s0 - pl, (size_t)(s1 - s0) * sizeof(float));
            if (s1 < Ws) memset(row + s1, 0, (size_t)(Ws - s1) * sizeof(float));
        }
}

/* float32 im2col by AVX-512 gathers (0 where the machine lacks them): im2col_f32's
   result, for output rows too short (or too strided) for its row copies. idx: per
   kernel offset (i, j), the P input indices ih * W + iw its positions read (-1 in
   the padding: 0 there), (kh * kw, P) int32s filled here. */
int im2col_gather_f32(float *cols, int64_t ld, const float *x, int64_t n0, int64_t n1,
                      int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t OH,
                      int64_t OW, int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh,
                      int64_t dw, int64_t c0, int64_t c1, float *stage, int32_t *idx) {
#ifndef __AVX512F__
    return 0;
#else
    int64_t P = OH * OW;
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) {
            int32_t *t = idx + (i * kw + j) * P;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t ih = oh * sh + i * dh - pt, iw = ow * sw + j * dw - pl;
                    t[oh * OW + ow] = ih >= 0 && ih < H && iw >= 0 && iw < W ?
                        (int32_t)(ih * W + iw) : -1;
                }
        }
    int64_t G = P >= 256 ? 1 : (256 + P - 1) / P;
    const __m512i neg = _mm512_set1_epi32(-1);
    for (int64_t g0 = n0; g0 < n1; g0 += G) {
        int64_t g1 = g0 + G < n1 ? g0 + G : n1;
        for (int64_t c = c0; c < c1; c++)
            for (int64_t ij = 0; ij < kh * kw; ij++) {
                float *row = cols + ((c - c0) * kh * kw + ij) * ld;
                const int32_t *t = idx + ij * P;
                for (int64_t n = g0; n < g1; n++) {
                    const float *plane = x + (n * C + c) * H * W;
                    float *d = stage ? stage + (n - g0) * P : row + (n - n0) * P;
                    for (int64_t p0 = 0; p0 < P; p0 += 16) {
                        int64_t left = P - p0;
                        __mmask16 lanes = left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1);
                        __m512i iv = _mm512_maskz_loadu_epi32(lanes, t + p0);
                        __mmask16 m = _mm512_mask_cmpneq_epi32_mask(lanes, iv, neg);
                        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, iv, plane, 4);
                        _mm512_mask_storeu_ps(d + p0, lanes, v);
                    }
                }
                if (stage) stream_f32(row + (g0 - n0) * P, stage, (g1 - g0) * P);
            }
    }
    _mm_sfence();
    return 1;
#endif
}
"""

_IGEMM = r"""
/* dst[blk][k][o] = w[blk * CB + o][k] (w: (OC, K)), 0 for blk * CB + o >= OC: the
   weight as the implicit GEMM reads it */
void pack_t_v{NV}(float *dst, const float *w, int64_t OC, int64_t K) {
    const int64_t CB = 16 * {NV}, nblk = (OC + CB - 1) / CB;
    for (int64_t blk = 0; blk < nblk; blk++)
        for (int64_t k0 = 0; k0 < K; k0 += 16) {
            int64_t k1 = k0 + 16 < K ? k0 + 16 : K;
            for (int64_t o = 0; o < CB; o++) {
                int64_t oo = blk * CB + o;
                float *d = dst + (blk * K) * CB + o;
                if (oo < OC)
                    for (int64_t k = k0; k < k1; k++) d[k * CB] = w[oo * K + k];
                else
                    for (int64_t k = k0; k < k1; k++) d[k * CB] = 0.0f;
            }
        }
}

/* float32 implicit-GEMM convolution, any stride, vectorized over channels (AVX-512;
   0 where the machine lacks it). A tile is R positions by NV vectors of 16
   channels, R * NV accumulators over K steps: at step k each position's input
   value xr[r][koff[k]] is broadcast and multiplied (one fused multiply-add) with
   the k-th row of the packed weight, wk[k][0 .. 16 * NV). tmp receives the tile,
   (R, 16 * NV). */
static void itile_v{NV}(const float *const *xr, const int64_t *koff, const float *wk,
                        int64_t K, const float *init, int64_t istride, float *tmp) {
    __m512 acc[{R}][{NV}];
#pragma GCC unroll 16
    for (int r = 0; r < {R}; r++)
#pragma GCC unroll 4
        for (int v = 0; v < {NV}; v++)
            acc[r][v] = init ? _mm512_loadu_ps(init + r * istride + 16 * v) :
                _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        int64_t o = koff[k];
        __m512 w[{NV}];
#pragma GCC unroll 4
        for (int v = 0; v < {NV}; v++) w[v] = _mm512_loadu_ps(wk + (k * {NV} + v) * 16);
#pragma GCC unroll 16
        for (int r = 0; r < {R}; r++) {
            __m512 xv = _mm512_set1_ps(xr[r][o]);
#pragma GCC unroll 4
            for (int v = 0; v < {NV}; v++) acc[r][v] = _mm512_fmadd_ps(xv, w[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < {R}; r++)
#pragma GCC unroll 4
        for (int v = 0; v < {NV}; v++) _mm512_storeu_ps(tmp + (r * {NV} + v) * 16, acc[r][v]);
}

/* out[n, o, oh, ow] = (b[o] +) the sum over (c, i, j), in that order, of
   w[o, c, i, j] * x[n, c, oh * sh + i * dh - pt, ow * sw + j * dw - pl] (0 outside x).
   wpk: (blocks, C * kh * kw, 16 * NV), zero past OC; bpk: (blocks, 16 * NV) or NULL;
   xp: one image padded, (C, Hs, Ws); koff: C * kh * kw int64s. */
int iconv_fwd_v{NV}(float *out, const float *x, const float *wpk, const float *bpk,
                    float *xp, int64_t *koff, int64_t n0, int64_t n1, int64_t C, int64_t H,
                    int64_t W, int64_t OC, int64_t kh, int64_t kw, int64_t OH, int64_t OW,
                    int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw) {
#ifndef __AVX512F__
    return 0;
#else
    const int64_t CB = 16 * {NV}, P = OH * OW, K = C * kh * kw, nblk = (OC + CB - 1) / CB;
    int64_t Hs = (OH - 1) * sh + (kh - 1) * dh + 1, Ws = (OW - 1) * sw + (kw - 1) * dw + 1;
    float tmp[{R} * 16 * {NV}];
    const float *xr[{R}];
    for (int64_t c = 0, k = 0; c < C; c++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++, k++) koff[k] = (c * Hs + i * dh) * Ws + j * dw;
    for (int64_t n = n0; n < n1; n++) {
        pad_planes_f32(xp, x + n * C * H * W, 0, C, H, W, Hs, Ws, pt, pl);
        for (int64_t blk = 0; blk < nblk; blk++) {
            int64_t o0 = blk * CB, ob = OC - o0 < CB ? OC - o0 : CB;
            for (int64_t p0 = 0; p0 < P; p0 += {R}) {
                int64_t pr = P - p0 < {R} ? P - p0 : {R};
                for (int r = 0; r < {R}; r++) {
                    int64_t q = p0 + (r < pr ? r : pr - 1);
                    xr[r] = xp + (q / OW) * sh * Ws + (q % OW) * sw;
                }
                itile_v{NV}(xr, koff, wpk + blk * K * CB, K, bpk ? bpk + blk * CB : 0, 0, tmp);
                for (int64_t o = 0; o < ob; o++) {
                    float *d = out + (n * OC + o0 + o) * P + p0;
                    for (int64_t r = 0; r < pr; r++) d[r] = tmp[r * CB + o];
                }
            }
        }
    }
    return 1;
#endif
}

/* conv2d's input gradient, dilation 1, padding >= 0: dx[n, c, ih, iw] = the sum
   over (o, ti, tj), in that order, of g[n, o, U - ti, V - tj] * w[o, c, a + ti * sh,
   b + tj * sw], where (U, a) = divmod(ih + pt, sh), (V, b) = divmod(iw + pl, sw)
   (0 outside g): each input position's phase (a, b) takes the kernel taps that reach
   it, and no zero products. wph: per phase (a, b), row-major, its rows (o, ti, tj)
   of (blocks of) 16 * NV channels c: (blocks, rows of all phases, 16 * NV);
   gp: one image of g placed at (Th, Tw) in zeros, (OC, Hg, Wg). */
int iconv_bwd_v{NV}(float *dx, const float *g, const float *wph, float *gp, int64_t *koff,
                    int64_t n0, int64_t n1, int64_t C, int64_t H, int64_t W, int64_t OC,
                    int64_t kh, int64_t kw, int64_t OH, int64_t OW, int64_t sh, int64_t sw,
                    int64_t pt, int64_t pl) {
#ifndef __AVX512F__
    return 0;
#else
    const int64_t CB = 16 * {NV}, nblk = (C + CB - 1) / CB, HW = H * W;
    int64_t Th = (kh - 1) / sh, Tw = (kw - 1) / sw;
    int64_t Hg = (H - 1 + pt) / sh + Th + 1, Wg = (W - 1 + pl) / sw + Tw + 1;
    int64_t rows_all = OC * kh * kw;
    float tmp[{R} * 16 * {NV}];
    const float *xr[{R}];
    int64_t pos[{R}];
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t o = 0; o < OC; o++)
            for (int64_t r = 0; r < Hg; r++) {
                float *row = gp + (o * Hg + r) * Wg;
                int64_t oh = r - Th;
                memset(row, 0, (size_t)Wg * sizeof(float));
                if (oh < 0 || oh >= OH) continue;
                int64_t q1 = OW + Tw < Wg ? OW + Tw : Wg;
                if (q1 > Tw)
                    memcpy(row + Tw, g + ((n * OC + o) * OH + oh) * OW,
                           (size_t)(q1 - Tw) * sizeof(float));
            }
        int64_t row0 = 0;  /* the phase's first row in wph */
        for (int64_t a = 0; a < sh; a++)
            for (int64_t b = 0; b < sw; b++) {
                int64_t ni = a < kh ? (kh - 1 - a) / sh + 1 : 0;
                int64_t nj = b < kw ? (kw - 1 - b) / sw + 1 : 0;
                int64_t K = OC * ni * nj;
                for (int64_t o = 0, k = 0; o < OC; o++)
                    for (int64_t ti = 0; ti < ni; ti++)
                        for (int64_t tj = 0; tj < nj; tj++, k++)
                            koff[k] = (o * Hg + Th - ti) * Wg + Tw - tj;
                /* the phase's positions: ih = ((a - pt) mod sh) + sh * u, likewise iw */
                int64_t ih0 = ((a - pt) % sh + sh) % sh, iw0 = ((b - pl) % sw + sw) % sw;
                int64_t nu = H > ih0 ? (H - ih0 + sh - 1) / sh : 0;
                int64_t nv = W > iw0 ? (W - iw0 + sw - 1) / sw : 0;
                int64_t np = nu * nv;
                for (int64_t blk = 0; blk < nblk; blk++) {
                    int64_t c0 = blk * CB, cb = C - c0 < CB ? C - c0 : CB;
                    const float *wk = wph + (blk * rows_all + row0) * CB;
                    for (int64_t p0 = 0; p0 < np; p0 += {R}) {
                        int64_t pr = np - p0 < {R} ? np - p0 : {R};
                        for (int r = 0; r < {R}; r++) {
                            int64_t q = p0 + (r < pr ? r : pr - 1);
                            int64_t ih = ih0 + (q / nv) * sh, iw = iw0 + (q % nv) * sw;
                            pos[r] = ih * W + iw;
                            xr[r] = gp + ((ih + pt) / sh) * Wg + (iw + pl) / sw;
                        }
                        if (K > 0) {
                            itile_v{NV}(xr, koff, wk, K, 0, 0, tmp);
                        } else {
                            memset(tmp, 0, sizeof(tmp));
                        }
                        for (int64_t c = 0; c < cb; c++) {
                            float *d = dx + (n * C + c0 + c) * HW;
                            for (int64_t r = 0; r < pr; r++) d[pos[r]] = tmp[r * CB + c];
                        }
                    }
                }
                row0 += K;
            }
    }
    return 1;
#endif
}

/* gt (qn, CB) = g's channels o0 .. o0 + ob (zeros up to CB) at the qn positions
   from (n, p) on, in order over g's (N, OC, P) images */
static void gtrans_v{NV}(float *gt, const float *g, int64_t OC, int64_t P, int64_t o0,
                         int64_t ob, int64_t n, int64_t p, int64_t qn) {
    const int64_t CB = 16 * {NV};
    for (int64_t q = 0; q < qn; n++, p = 0) {
        int64_t run = P - p < qn - q ? P - p : qn - q;
        for (int64_t o = 0; o < CB; o++) {
            float *d = gt + q * CB + o;
            if (o < ob) {
                const float *src = g + (n * OC + o0 + o) * P + p;
                for (int64_t t = 0; t < run; t++) d[t * CB] = src[t];
            } else {
                for (int64_t t = 0; t < run; t++) d[t * CB] = 0.0f;
            }
        }
        q += run;
    }
}

/* one tile of the weight gradient: acc's kr rows (of CB) = (their sums so far,
   carry, or 0) + the qn positions' products, the tail tile's rows padded */
static void wtile_v{NV}(const float *const *xr, const int64_t *koff, const float *gt,
                        int64_t qn, float *acc, int64_t kr, int carry) {
    const int64_t CB = 16 * {NV};
    float tmp[{R} * 16 * {NV}];
    if (carry && kr < {R}) {
        memcpy(tmp, acc, (size_t)(kr * CB) * sizeof(float));
        for (int64_t r = kr; r < {R}; r++)
            memcpy(tmp + r * CB, acc + (kr - 1) * CB, (size_t)CB * sizeof(float));
        itile_v{NV}(xr, koff, gt, qn, tmp, CB, tmp);
    } else {
        itile_v{NV}(xr, koff, gt, qn, carry ? acc : 0, CB, tmp);
    }
    memcpy(acc, tmp, (size_t)(kr * CB) * sizeof(float));
}

/* float32 weight gradient (AVX-512; 0 where the machine lacks it): dwt[k][o] (K rows
   of 16 * NV * blocks, zero past OC) = the sum over positions q (image by image, in
   order) of cols[k][q] * g[n, o, p], q = n * P + p, one fused multiply-add a term,
   for the rows k in [k0, k1). The positions are taken Q at a time: gt holds their g
   transposed, (Q, 16 * NV), and each tile of R rows of cols carries its
   accumulators from chunk to chunk through dwt. koff: Q int64s. */
int iwgrad_v{NV}(float *dwt, const float *cols, int64_t ld, const float *g, float *gt,
                 int64_t *koff, int64_t N, int64_t OC, int64_t P, int64_t K, int64_t Q,
                 int64_t k0, int64_t k1) {
#ifndef __AVX512F__
    return 0;
#else
    const int64_t CB = 16 * {NV}, nblk = (OC + CB - 1) / CB, NP = N * P;
    const float *xr[{R}];
    for (int64_t q = 0; q < Q; q++) koff[q] = q;
    for (int64_t blk = 0; blk < nblk; blk++) {
        int64_t o0 = blk * CB, ob = OC - o0 < CB ? OC - o0 : CB;
        for (int64_t q0 = 0; q0 < NP; q0 += Q) {
            int64_t qn = NP - q0 < Q ? NP - q0 : Q;
            gtrans_v{NV}(gt, g, OC, P, o0, ob, q0 / P, q0 % P, qn);
            for (int64_t kt = k0; kt < k1; kt += {R}) {
                int64_t kr = k1 - kt < {R} ? k1 - kt : {R};
                for (int r = 0; r < {R}; r++)
                    xr[r] = cols + (kt + (r < kr ? r : kr - 1)) * ld + q0;
                /* (accumulators in dwt already past the first positions) */
                wtile_v{NV}(xr, koff, gt, qn, dwt + (blk * K + kt) * CB, kr, q0 > 0);
            }
        }
    }
    return 1;
#endif
}

/* iwgrad from x itself, no im2col matrix: dwt as iwgrad's, for the rows (c, i, j)
   of the channels c0 <= c < c1, summed over the positions of images n0 .. n1 in
   order; the channels c0 .. c1 of G images at a time (G = Q / P, at least 1)
   padded into xp ((G, c1 - c0, Hs, Ws), as iconv_fwd pads one) and read where
   iwgrad reads cols: the same products in the same order, so the bits of iwgrad
   over those images' im2col rows. more: dwt holds the sums over earlier images to
   go on from. gt: Q * 16 * NV floats; koff: Q. */
int iwgradx_v{NV}(float *dwt, const float *x, float *xp, const float *g, float *gt,
                  int64_t *koff, int64_t n0, int64_t n1, int64_t C, int64_t H, int64_t W,
                  int64_t OC, int64_t kh, int64_t kw, int64_t OH, int64_t OW, int64_t sh,
                  int64_t sw, int64_t pt, int64_t pl, int64_t dh, int64_t dw, int64_t Q,
                  int64_t c0, int64_t c1, int64_t more) {
#ifndef __AVX512F__
    return 0;
#else
    const int64_t CB = 16 * {NV}, P = OH * OW, K = C * kh * kw, KK = kh * kw;
    const int64_t nblk = (OC + CB - 1) / CB, k0 = c0 * KK, k1 = c1 * KK;
    const int64_t G = P >= Q ? 1 : Q / P;
    int64_t Hs = (OH - 1) * sh + (kh - 1) * dh + 1, Ws = (OW - 1) * sw + (kw - 1) * dw + 1;
    const int64_t CS = (c1 - c0) * Hs * Ws;  /* one padded image */
    const float *xr[{R}];
    for (int64_t na = n0; na < n1; na += G) {
        int64_t nb = na + G < n1 ? na + G : n1, GP = (nb - na) * P;
        for (int64_t n = na; n < nb; n++)
            pad_planes_f32(xp + (n - na) * CS, x + n * C * H * W, c0, c1, H, W, Hs, Ws, pt, pl);
        for (int64_t blk = 0; blk < nblk; blk++) {
            int64_t o0 = blk * CB, ob = OC - o0 < CB ? OC - o0 : CB;
            for (int64_t q0 = 0; q0 < GP; q0 += Q) {
                int64_t qn = GP - q0 < Q ? GP - q0 : Q;
                gtrans_v{NV}(gt, g, OC, P, o0, ob, na + q0 / P, q0 % P, qn);
                for (int64_t q = 0; q < qn; q++) {
                    int64_t i = (q0 + q) / P, p = (q0 + q) % P;
                    koff[q] = i * CS + (p / OW) * sh * Ws + (p % OW) * sw;
                }
                for (int64_t kt = k0; kt < k1; kt += {R}) {
                    int64_t kr = k1 - kt < {R} ? k1 - kt : {R};
                    for (int r = 0; r < {R}; r++) {
                        int64_t k = kt + (r < kr ? r : kr - 1), c = k / KK, ij = k % KK;
                        xr[r] = xp + ((c - c0) * Hs + (ij / kw) * dh) * Ws + (ij % kw) * dw;
                    }
                    wtile_v{NV}(xr, koff, gt, qn, dwt + (blk * K + kt) * CB, kr,
                                more || na > n0 || q0 > 0);
                }
            }
        }
    }
    return 1;
#endif
}
"""

# the implicit-GEMM convolution's (vectors of 16 channels, positions) a tile
TILES = ((1, 16), (2, 12), (4, 6))

# im2col by gathers for at most this many output positions an image (its index
# table: kh * kw * P int32s)
GATHER_MAX_P = 1 << 14

# the direct convolution's blocks of output channels (compiled variants)
BLOCKS = (4, 8, 12)

SOURCE = "#include <stdint.h>\n#include <string.h>\n" \
    "#ifdef __AVX512F__\n#include <immintrin.h>\n" \
    "#define STREAM_f32(d, s) _mm512_stream_ps((d), _mm512_loadu_ps(s))\n" \
    "#define STREAM_f64(d, s) _mm512_stream_pd((d), _mm512_loadu_pd(s))\n#endif\n" + "".join(
        _TEMPLATE.replace("{S}", s).replace("{T}", t) for s, t in _TYPES.values()) + \
    _GATHER + "".join(_DIRECT.replace("{B}", str(b)) for b in BLOCKS) + \
    "".join(_IGEMM.replace("{NV}", str(v)).replace("{R}", str(r)) for v, r in TILES)

_P, _I = ctypes.c_void_p, ctypes.c_int64
_GEOM = [_I] * 13  # n0, n1, C, H, W, kh, kw, OH, OW, sh, sw, pt, pl; then dh, dw
_SIGNATURES = {
    "im2col": ([_P, _I, _P] + _GEOM + [_I] * 4 + [_P], None),
    "im2row": ([_P, _P, _P] + _GEOM + [_I, _I], None),
    "col2im": ([_P, _P, _I] + _GEOM + [_I, _I], None),
    "rows_to_nchw": ([_P, _P, _P] + [_I] * 4, None),
    "cols_to_nchw": ([_P, _P, _I, _P] + [_I] * 4, None),
    "nchw_to_cols": ([_P, _I, _P] + [_I] * 4, None),
}
_funcs: dict[tuple[str, np.dtype], Any] | None = None
_lock = threading.Lock()


def _load() -> dict[tuple[str, np.dtype], Any]:
    global _funcs
    if _funcs is None:
        with _lock:
            if _funcs is None:
                funcs: dict[tuple[str, np.dtype], Any] = {}
                lib = None if cfused._compiler() is None else \
                    cfused.library(SOURCE, "the conv2d copies")
                if lib is not None:
                    funcs.update(cfused.typed_functions(lib, _SIGNATURES))
                    fn = lib.im2col_gather_f32
                    fn.argtypes, fn.restype = [_P, _I, _P] + _GEOM + [_I] * 4 + [_P, _P], \
                        ctypes.c_int
                    funcs["gather", np.dtype(np.float32)] = fn
                    for b in BLOCKS:
                        fn = getattr(lib, f"dconv_f32_b{b}")
                        fn.argtypes, fn.restype = [_P] * 5 + [_I] * 14, ctypes.c_int
                        funcs[f"dconv{b}", np.dtype(np.float32)] = fn
                    for v, _ in TILES:
                        fn = getattr(lib, f"iconv_fwd_v{v}")
                        fn.argtypes, fn.restype = [_P] * 6 + [_I] * 16, ctypes.c_int
                        funcs[f"ifwd{v}", np.dtype(np.float32)] = fn
                        fn = getattr(lib, f"iconv_bwd_v{v}")
                        fn.argtypes, fn.restype = [_P] * 5 + [_I] * 14, ctypes.c_int
                        funcs[f"ibwd{v}", np.dtype(np.float32)] = fn
                        fn = getattr(lib, f"iwgrad_v{v}")
                        fn.argtypes, fn.restype = [_P, _P, _I, _P, _P, _P] + [_I] * 7, \
                            ctypes.c_int
                        funcs[f"iwgrad{v}", np.dtype(np.float32)] = fn
                        fn = getattr(lib, f"iwgradx_v{v}")
                        fn.argtypes, fn.restype = [_P] * 6 + [_I] * 20, ctypes.c_int
                        funcs[f"iwgradx{v}", np.dtype(np.float32)] = fn
                        fn = getattr(lib, f"pack_t_v{v}")
                        fn.argtypes, fn.restype = [_P] * 2 + [_I] * 2, None
                        funcs[f"pack{v}", np.dtype(np.float32)] = fn
                    # (a probe: 0 where the machine has no AVX-512, and then the
                    # direct convolution is never offered)
                    probe = np.zeros(1, np.float32)
                    one = np.ones(4, np.float32)
                    buf = np.empty(64, np.float32)
                    p = probe.ctypes.data
                    if funcs["dconv4", np.dtype(np.float32)](
                            p, p, one.ctypes.data, None, buf.ctypes.data, 0, 1, 1, 1, 1, 1, 1,
                            1, 1, 1, 0, 0, 1, 1) == 1:
                        funcs["direct", np.dtype(np.float32)] = True
                _funcs = funcs
    return _funcs


def available(dtype: np.dtype) -> bool:
    """Whether the loops are compiled for ``dtype`` (float32 / float64)."""
    return np.dtype(dtype) in _TYPES and bool(_load())


def reset() -> None:
    """Forget the loaded functions (the next call looks for a compiler again)."""
    global _funcs
    with _lock:
        _funcs = None


class Geometry:
    """A convolution's shape: images of (C, H, W), a (kh, kw) kernel, stride,
    padding (top, left; the bottom and right follow from OH, OW, and may crop),
    dilation, and the (OH, OW) output."""

    def __init__(self, c: int, h: int, w: int, kh: int, kw: int, oh: int, ow: int,
                 stride: tuple[int, int], pads: tuple[int, int], dilation: tuple[int, int]):
        self.c, self.h, self.w, self.kh, self.kw, self.oh, self.ow = c, h, w, kh, kw, oh, ow
        (self.sh, self.sw), (self.pt, self.pl), (self.dh, self.dw) = stride, pads, dilation
        if min(c, h, w, kh, kw, oh, ow, self.sh, self.sw, self.dh, self.dw) < 1:
            raise ValueError(f"conv geometry out of range: {vars(self)}")
        self.p = oh * ow
        self.k = c * kh * kw

    def args(self, n0: int, n1: int) -> tuple[int, ...]:
        return (n0, n1, self.c, self.h, self.w, self.kh, self.kw, self.oh, self.ow, self.sh,
                self.sw, self.pt, self.pl, self.dh, self.dw)


def _check_images(a: np.ndarray, dt: np.dtype, per_image: tuple[int, ...], n1: int,
                  what: str, write: bool = False) -> None:
    if a.dtype != dt or not a.flags.c_contiguous or a.ndim != 1 + len(per_image) or \
            tuple(a.shape[1:]) != per_image or a.shape[0] < n1 or (write and not a.flags.writeable):
        raise ValueError(f"cconv: {what} {a.dtype} {a.shape} does not fit "
                         f"(want {dt} (>={n1}, {per_image}), C-contiguous)")


def _check_matrix(a: np.ndarray, dt: np.dtype, rows: int, cols: int, what: str,
                  write: bool = False) -> int:
    """a's row stride in elements, after checking that a is a (rows, cols) matrix
    of dt with unit column stride (a column range of a larger matrix allowed)."""
    if a.dtype != dt or a.ndim != 2 or a.shape != (rows, cols) or \
            a.strides[1] != a.itemsize or a.strides[0] % a.itemsize or \
            (rows > 1 and a.strides[0] < cols * a.itemsize) or (write and not a.flags.writeable):
        raise ValueError(f"cconv: {what} {a.dtype} {a.shape} {a.strides} does not fit "
                         f"(want {dt} ({rows}, {cols}) rows of unit stride)")
    return a.strides[0] // a.itemsize if rows > 1 else cols


def _fn(name: str, dt: np.dtype) -> Any:
    fn = _load().get((name, dt))
    if fn is None:
        raise RuntimeError(f"cconv: {name} is not compiled for {dt}")
    return fn


def im2col(cols: np.ndarray, x: np.ndarray, n0: int, n1: int, g: Geometry,
           stream: bool = False, channels: tuple[int, int] | None = None) -> None:
    """cols ((C*kh*kw, (n1-n0)*OH*OW), unit column stride) = im2col of x[n0:n1];
    ``stream``: by non-temporal stores (cols not read again soon); ``channels``
    (c0, c1): only those channels' rows, cols then ((c1-c0)*kh*kw, ...)."""
    dt = x.dtype
    _check_images(x, dt, (g.c, g.h, g.w), n1, "x")
    c0, c1 = (0, g.c) if channels is None else channels
    if not 0 <= c0 < c1 <= g.c or not 0 <= n0 <= n1:
        raise ValueError(f"cconv: im2col of channels {c0}..{c1}, images {n0}..{n1} "
                         f"does not fit {g.c} channels")
    ld = _check_matrix(cols, dt, (c1 - c0) * g.kh * g.kw, (n1 - n0) * g.p, "cols", True)
    stage = np.empty(max(g.p, 256 + g.p), dt) if stream else None
    sp = None if stage is None else stage.ctypes.data
    if (g.sw > 1 or g.ow < 16) and 16 <= g.p <= GATHER_MAX_P and g.h * g.w < 1 << 31 and \
            direct_available(dt):
        # short or strided output rows: the gathers (DCGAN's 64-128 layer, 4x4
        # outputs at stride 2: 0.55 -> 0.23 ms; its 32-64, 8x8: 0.70 -> 0.44)
        idx = np.empty(g.kh * g.kw * g.p, np.int32)
        if _fn("gather", dt)(cols.ctypes.data, ld, x.ctypes.data, *g.args(n0, n1), c0, c1,
                             sp, idx.ctypes.data) == 1:
            return
    _fn("im2col", dt)(cols.ctypes.data, ld, x.ctypes.data, *g.args(n0, n1), c0, c1, sp)


def scratch(g: Geometry, dt: np.dtype) -> np.ndarray:
    """im2row's scratch buffer for one image."""
    hs = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
    ws = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1
    return np.empty(hs * ws * g.c, dt)


def im2row(rows: np.ndarray, buf: np.ndarray, x: np.ndarray, n0: int, n1: int,
           g: Geometry) -> None:
    """rows ((n1-n0)*OH*OW, kh*kw*C), C-contiguous) = the positions-major windows
    of x[n0:n1], column (i, j, c); buf from ``scratch``."""
    dt = x.dtype
    _check_images(x, dt, (g.c, g.h, g.w), n1, "x")
    if not rows.flags.c_contiguous:
        raise ValueError("cconv: rows must be C-contiguous")
    _check_matrix(rows, dt, (n1 - n0) * g.p, g.k, "rows", True)
    if buf.dtype != dt or buf.ndim != 1 or not buf.flags.c_contiguous or \
            buf.size < scratch(g, dt).size:
        raise ValueError("cconv: im2row's scratch buffer does not fit")
    _fn("im2row", dt)(rows.ctypes.data, buf.ctypes.data, x.ctypes.data, *g.args(n0, n1))


def col2im(dx: np.ndarray, d: np.ndarray, n0: int, n1: int, g: Geometry) -> None:
    """dx[n0:n1] = col2im of d ((C*kh*kw, (n1-n0)*OH*OW), unit column stride)."""
    dt = d.dtype
    _check_images(dx, dt, (g.c, g.h, g.w), n1, "dx", True)
    ld = _check_matrix(d, dt, g.k, (n1 - n0) * g.p, "d")
    _fn("col2im", dt)(dx.ctypes.data, d.ctypes.data, ld, *g.args(n0, n1))


def _bias(b: np.ndarray | None, dt: np.dtype, oc: int) -> int | None:
    if b is None:
        return None
    if b.dtype != dt or b.shape != (oc,) or not b.flags.c_contiguous:
        raise ValueError(f"cconv: bias {b.dtype} {b.shape} does not fit")
    return b.ctypes.data


def rows_to_nchw(out: np.ndarray, y: np.ndarray, b: np.ndarray | None, n0: int,
                 n1: int) -> None:
    """out[n0:n1] (N, OC, OH, OW) = y ((n1-n0)*OH*OW, OC), C-contiguous, transposed,
    plus b."""
    dt = y.dtype
    _, oc, oh, ow = out.shape
    _check_images(out, dt, (oc, oh, ow), n1, "out", True)
    if not y.flags.c_contiguous:
        raise ValueError("cconv: y must be C-contiguous")
    _check_matrix(y, dt, (n1 - n0) * oh * ow, oc, "y")
    _fn("rows_to_nchw", dt)(out.ctypes.data, y.ctypes.data, _bias(b, dt, oc), n0, n1, oc,
                            oh * ow)


def cols_to_nchw(out: np.ndarray, y: np.ndarray, b: np.ndarray | None, n0: int,
                 n1: int) -> None:
    """out[n0:n1] (N, OC, OH, OW) = y (OC, (n1-n0)*OH*OW) plus b."""
    dt = y.dtype
    _, oc, oh, ow = out.shape
    _check_images(out, dt, (oc, oh, ow), n1, "out", True)
    ld = _check_matrix(y, dt, oc, (n1 - n0) * oh * ow, "y")
    _fn("cols_to_nchw", dt)(out.ctypes.data, y.ctypes.data, ld, _bias(b, dt, oc), n0, n1, oc,
                            oh * ow)


def nchw_to_cols(dst: np.ndarray, src: np.ndarray, n0: int, n1: int) -> None:
    """dst (OC, (n1-n0)*P) = src[n0:n1] (N, OC, ...) with its images side by side."""
    dt = src.dtype
    oc = src.shape[1]
    per = tuple(src.shape[1:])
    _check_images(src, dt, per, n1, "src")
    p = int(np.prod(per[1:], dtype=np.int64)) if len(per) > 1 else 1
    ld = _check_matrix(dst, dt, oc, (n1 - n0) * p, "dst", True)
    _fn("nchw_to_cols", dt)(dst.ctypes.data, ld, src.ctypes.data, n0, n1, oc, p)


def direct_available(dtype: np.dtype) -> bool:
    """Whether the direct convolution runs here (float32, AVX-512)."""
    return bool(_load().get(("direct", np.dtype(dtype))))


def block(oc: int) -> int:
    """The direct convolution's block of output channels for oc of them: the one
    that wastes the fewest accumulators, the larger on a tie."""
    return min(BLOCKS, key=lambda b: (-(-oc // b) * b - oc, -b))


def pack(weight: np.ndarray, b: int) -> np.ndarray:
    """The (OC, C, kh, kw) float32 weight as the direct convolution reads it:
    (blocks, C*kh*kw, b), zero past OC."""
    oc = weight.shape[0]
    k = weight[0].size
    nblk = -(-oc // b)
    wp = np.zeros((nblk * b, k), np.float32)
    wp[:oc] = weight.reshape(oc, k)
    return np.ascontiguousarray(wp.reshape(nblk, b, k).transpose(0, 2, 1))


def direct_scratch(g: Geometry) -> np.ndarray:
    """The direct convolution's padded image, (C, Hp, Wp)."""
    hp = g.oh + (g.kh - 1) * g.dh
    wp = -(-g.ow // 32) * 32 + (g.kw - 1) * g.dw
    return np.empty(g.c * hp * wp, np.float32)


def direct_conv(out: np.ndarray, x: np.ndarray, wpk: np.ndarray, b: int,
                bias: np.ndarray | None, buf: np.ndarray, n0: int, n1: int,
                g: Geometry) -> None:
    """out[n0:n1] = the stride-1 convolution of x[n0:n1] with the packed weight
    (``pack(weight, b)``) plus bias, in float32."""
    dt = np.dtype(np.float32)
    if g.sh != 1 or g.sw != 1 or b not in BLOCKS or not direct_available(dt):
        raise ValueError("cconv: the direct convolution takes stride 1, float32, AVX-512")
    oc = out.shape[1]
    _check_images(x, dt, (g.c, g.h, g.w), n1, "x")
    _check_images(out, dt, (oc, g.oh, g.ow), n1, "out", True)
    nblk = -(-oc // b)
    if wpk.dtype != dt or not wpk.flags.c_contiguous or wpk.shape != (nblk, g.k, b):
        raise ValueError(f"cconv: packed weight {wpk.shape} does not fit")
    if buf.dtype != dt or not buf.flags.c_contiguous or buf.size < direct_scratch(g).size:
        raise ValueError("cconv: the direct convolution's scratch buffer does not fit")
    done = _fn(f"dconv{b}", dt)(out.ctypes.data, x.ctypes.data, wpk.ctypes.data,
                                _bias(bias, dt, oc), buf.ctypes.data, n0, n1, g.c, g.h,
                                g.w, oc, g.kh, g.kw, g.oh, g.ow, g.pt, g.pl, g.dh, g.dw)
    if done != 1:
        raise RuntimeError("cconv: the direct convolution did not run")


# relative cost of a tile's multiply-add by its vectors (fewer vectors: more loads
# per multiply-add; measured on DCGAN's 32-64 and 64-128 layers)
_TILE_COST = {1: 1.15, 2: 1.05, 4: 1.0}


def vectors(c: int, positions: int = 0) -> int:
    """The implicit-GEMM tile's vectors of 16 channels for c channels, over runs
    of ``positions`` positions: the tile with the fewest multiply-adds on
    padding (a run's last tile, the last block's channels), weighed by its cost."""
    def cost(tile: tuple[int, int]) -> float:
        v, r = tile
        waste = -(-positions // r) * r / positions if positions else 1.0
        return waste * -(-c // (16 * v)) * 16 * v * _TILE_COST[v]
    return min(TILES, key=cost)[0]


def pack_channels(w2: np.ndarray, nv: int) -> np.ndarray:
    """(K, C) float32 rows as the implicit GEMM reads them: (blocks, K, 16 * nv),
    zero past C."""
    k, c = w2.shape
    cb = 16 * nv
    nblk = -(-c // cb)
    wp = np.zeros((k, nblk * cb), np.float32)
    wp[:, :c] = w2
    return np.ascontiguousarray(wp.reshape(k, nblk, cb).transpose(1, 0, 2))


def implicit_conv(out: np.ndarray, x: np.ndarray, wpk: np.ndarray, nv: int,
                  bpk: np.ndarray | None, n0: int, n1: int, g: Geometry) -> None:
    """out[n0:n1] = the convolution of x[n0:n1] (any stride) with the packed
    weight (``pack_channels`` of the (C*kh*kw, OC) weight) plus the packed bias
    (``pack_channels`` of (1, OC)), float32."""
    dt = np.dtype(np.float32)
    oc = out.shape[1]
    if not direct_available(dt) or (nv, ) not in [(v, ) for v, _ in TILES]:
        raise ValueError("cconv: the implicit GEMM takes float32 on AVX-512")
    _check_images(x, dt, (g.c, g.h, g.w), n1, "x")
    _check_images(out, dt, (oc, g.oh, g.ow), n1, "out", True)
    nblk = -(-oc // (16 * nv))
    if wpk.dtype != dt or not wpk.flags.c_contiguous or wpk.shape != (nblk, g.k, 16 * nv):
        raise ValueError(f"cconv: packed weight {wpk.shape} does not fit")
    if bpk is not None and (bpk.dtype != dt or not bpk.flags.c_contiguous or
                            bpk.shape != (nblk, 1, 16 * nv)):
        raise ValueError(f"cconv: packed bias {bpk.shape} does not fit")
    hs = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
    ws = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1
    xp = np.empty(g.c * hs * ws, dt)
    koff = np.empty(g.k, np.int64)
    done = _fn(f"ifwd{nv}", dt)(out.ctypes.data, x.ctypes.data, wpk.ctypes.data,
                                None if bpk is None else bpk.ctypes.data, xp.ctypes.data,
                                koff.ctypes.data, n0, n1, g.c, g.h, g.w, oc, g.kh, g.kw,
                                g.oh, g.ow, g.sh, g.sw, g.pt, g.pl, g.dh, g.dw)
    if done != 1:
        raise RuntimeError("cconv: the implicit GEMM did not run")


def implicit_weight_grad_x(dwt: np.ndarray, g: np.ndarray, x: np.ndarray, nv: int,
                           geo: Geometry, c0: int, c1: int) -> None:
    """``implicit_weight_grad`` over all of g's images with cols formed from x as
    it goes (rows of the channels c0 .. c1): the same bits, no im2col matrix."""
    dt = np.dtype(np.float32)
    if not direct_available(dt) or nv not in [v for v, _ in TILES]:
        raise ValueError("cconv: the implicit weight gradient takes float32 on AVX-512")
    n, oc = g.shape[:2]
    _check_images(g, dt, (oc, geo.oh, geo.ow), n, "g")
    _check_images(x, dt, (geo.c, geo.h, geo.w), n, "x")
    nblk = -(-oc // (16 * nv))
    if dwt.dtype != dt or not dwt.flags.c_contiguous or dwt.shape != (nblk, geo.k, 16 * nv) or \
            not dwt.flags.writeable or not 0 <= c0 < c1 <= geo.c:
        raise ValueError(f"cconv: dwt {dwt.shape} or channels {c0}..{c1} do not fit")
    hs = (geo.oh - 1) * geo.sh + (geo.kh - 1) * geo.dh + 1
    ws = (geo.ow - 1) * geo.sw + (geo.kw - 1) * geo.dw + 1
    q = weight_grad_chunk(nv)
    images = 1 if geo.p >= q else min(n, q // geo.p)  # (the C loop's G, at most n)
    xp = np.empty(max(1, images) * (c1 - c0) * hs * ws, dt)
    gt = np.empty(q * 16 * nv, dt)
    koff = np.empty(q, np.int64)
    done = _fn(f"iwgradx{nv}", dt)(dwt.ctypes.data, x.ctypes.data, xp.ctypes.data,
                                   g.ctypes.data, gt.ctypes.data, koff.ctypes.data, 0, n,
                                   geo.c, geo.h, geo.w, oc, geo.kh, geo.kw, geo.oh, geo.ow,
                                   geo.sh, geo.sw, geo.pt, geo.pl, geo.dh, geo.dw, q, c0, c1, 0)
    if done != 1:
        raise RuntimeError("cconv: the implicit weight gradient did not run")


def pack_phases(weight: np.ndarray, sh: int, sw: int, nv: int) -> np.ndarray:
    """The (OC, C, kh, kw) weight as ``implicit_input_grad`` reads it: for each
    phase (a, b) in row-major order, rows (o, ti, tj) = weight[o, :, a + ti * sh,
    b + tj * sw], packed by ``pack_channels``."""
    oc, c = weight.shape[:2]
    parts = [weight[:, :, a::sh, b::sw].transpose(0, 2, 3, 1).reshape(-1, c)
             for a in range(sh) for b in range(sw)]
    return pack_channels(np.concatenate(parts).astype(np.float32, copy=False), nv)


def implicit_input_grad(dx: np.ndarray, gr: np.ndarray, wph: np.ndarray, nv: int, n0: int,
                        n1: int, g: Geometry) -> None:
    """dx[n0:n1] = conv2d's input gradient for the output gradient gr[n0:n1]
    (geometry g: dx's images (C, H, W), gr's (OC, OH, OW); dilation 1, padding
    >= 0), float32, with the weight packed by ``pack_phases``."""
    dt = np.dtype(np.float32)
    if not direct_available(dt) or g.dh != 1 or g.dw != 1 or g.pt < 0 or g.pl < 0:
        raise ValueError("cconv: the implicit input gradient takes float32 on AVX-512, "
                         "dilation 1 and padding >= 0")
    oc = gr.shape[1]
    _check_images(dx, dt, (g.c, g.h, g.w), n1, "dx", True)
    _check_images(gr, dt, (oc, g.oh, g.ow), n1, "g")
    nblk = -(-g.c // (16 * nv))
    if wph.dtype != dt or not wph.flags.c_contiguous or \
            wph.shape != (nblk, oc * g.kh * g.kw, 16 * nv):
        raise ValueError(f"cconv: phase-packed weight {wph.shape} does not fit")
    th, tw = (g.kh - 1) // g.sh, (g.kw - 1) // g.sw
    hg, wg = (g.h - 1 + g.pt) // g.sh + th + 1, (g.w - 1 + g.pl) // g.sw + tw + 1
    gp = np.empty(oc * hg * wg, dt)
    koff = np.empty(oc * g.kh * g.kw, np.int64)
    done = _fn(f"ibwd{nv}", dt)(dx.ctypes.data, gr.ctypes.data, wph.ctypes.data,
                                gp.ctypes.data, koff.ctypes.data, n0, n1, g.c, g.h, g.w, oc,
                                g.kh, g.kw, g.oh, g.ow, g.sh, g.sw, g.pt, g.pl)
    if done != 1:
        raise RuntimeError("cconv: the implicit input gradient did not run")


def pack_weight(weight: np.ndarray, nv: int) -> np.ndarray:
    """``pack_channels(weight.reshape(OC, -1).T, nv)`` of a float32 (OC, ...)
    weight, by one C loop (NumPy's transposing copy took 0.4 ms for DCGAN's
    64-128 layer)."""
    oc = weight.shape[0]
    w2 = np.ascontiguousarray(weight, np.float32).reshape(oc, -1)
    k = w2.shape[1]
    nblk = -(-oc // (16 * nv))
    dst = np.empty((nblk, k, 16 * nv), np.float32)
    _fn(f"pack{nv}", np.dtype(np.float32))(dst.ctypes.data, w2.ctypes.data, oc, k)
    return dst


def weight_grad_chunk(nv: int) -> int:
    """Positions a chunk of ``implicit_weight_grad`` (its transposed g: 64 KiB)."""
    return (1 << 14) // (16 * nv)


def implicit_weight_grad(dwt: np.ndarray, g: np.ndarray, cols: np.ndarray, nv: int,
                         k0: int, k1: int) -> None:
    """dwt[:, k0:k1] ((blocks, K, 16 * nv), float32) = cols[k0:k1] @ g's (N*P, OC)
    transpose, blocks of 16 * nv channels (zero past OC): the weight gradient
    transposed, by the implicit GEMM's tile (the reduction over positions in
    order, image by image)."""
    dt = np.dtype(np.float32)
    if not direct_available(dt):
        raise ValueError("cconv: the implicit weight gradient takes float32 on AVX-512")
    n, oc = g.shape[:2]
    p = int(np.prod(g.shape[2:], dtype=np.int64))
    _check_images(g, dt, tuple(g.shape[1:]), n, "g")
    k = cols.shape[0]
    ld = _check_matrix(cols, dt, k, n * p, "cols")
    nblk = -(-oc // (16 * nv))
    if dwt.dtype != dt or not dwt.flags.c_contiguous or dwt.shape != (nblk, k, 16 * nv) or \
            not dwt.flags.writeable or not 0 <= k0 <= k1 <= k:
        raise ValueError(f"cconv: dwt {dwt.shape} or rows {k0}..{k1} do not fit")
    q = weight_grad_chunk(nv)
    gt = np.empty(q * 16 * nv, dt)
    koff = np.empty(q, np.int64)
    done = _fn(f"iwgrad{nv}", dt)(dwt.ctypes.data, cols.ctypes.data, ld, g.ctypes.data,
                                  gt.ctypes.data, koff.ctypes.data, n, oc, p, k, q, k0, k1)
    if done != 1:
        raise RuntimeError("cconv: the implicit weight gradient did not run")
