"""The conv2d kernels' C loops (``rtx_cpu.cconv``): the copies (im2col, also by
non-temporal stores, im2row, col2im, the transpositions) give exactly the NumPy
forms' arrays; the float32 direct convolution (stride 1) and the implicit GEMM
(any stride; the input gradient by phases) give the float64 reference's values
through ``conv_kernels`` on the paths the dispatch picks (checked by counting
the calls), with channel and position tails, asymmetric padding, dilation and
strides, and the weight gradient by the same tile over chunks of positions; the
same bits on 1, 2 and 3 threads; the NumPy forms where there is no
compiler or the operands do not fit; the wrappers refuse
operands they do not take; gradcheck in float64 through rtxcore's conv2d and
conv_transpose2d."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck

pytest.importorskip("rtx_cpu", reason="rtx_cpu (the NumPy backend) is not installed")
from rtx_cpu import cconv, cfused  # noqa: E402
from rtx_cpu import conv_kernels as K  # noqa: E402

pytestmark = pytest.mark.skipif(cfused._compiler() is None, reason="no C compiler")

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None


# -- a float64 reference ---------------------------------------------------------------------


def out_hw(h, w, kh, kw, stride, pads, dil):
    pt, pb, pl, pr = pads
    return ((h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1,
            (w + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1)


def padded(x, pads):
    """x zero-padded, a negative pad cropping."""
    pt, pb, pl, pr = pads
    h, w = x.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (max(pt, 0), max(pb, 0)), (max(pl, 0), max(pr, 0))))
    return xp[:, :, max(-pt, 0):max(-pt, 0) + h + pt + pb, max(-pl, 0):max(-pl, 0) + w + pl + pr]


def ref_cols(x, kh, kw, stride, pads, dil, oh, ow):
    xp = padded(x, pads)
    s = xp.strides
    n, c = x.shape[:2]
    win = as_strided(xp, (c, kh, kw, n, oh, ow),
                     (s[1], s[2] * dil[0], s[3] * dil[1], s[0], s[2] * stride[0],
                      s[3] * stride[1]))
    return np.ascontiguousarray(win).reshape(c * kh * kw, n * oh * ow)


def ref_conv(x, w, b, stride, pads, dil):
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = out_hw(h, wd, kh, kw, stride, pads, dil)
    cols = ref_cols(x.astype(np.float64), kh, kw, stride, pads, dil, oh, ow)
    y = (w.astype(np.float64).reshape(oc, -1) @ cols).reshape(oc, n, oh, ow).transpose(1, 0, 2, 3)
    return y + (0 if b is None else b.astype(np.float64).reshape(oc, 1, 1))


def ref_grads(x, w, g, stride, pads, dil):
    """(dx, dw) in float64: dw = g @ cols^T, dx the adjoint of im2col."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = g.shape[2:]
    g2 = g.astype(np.float64).transpose(1, 0, 2, 3).reshape(oc, -1)
    dw = (g2 @ ref_cols(x.astype(np.float64), kh, kw, stride, pads, dil, oh, ow).T)
    d6 = (w.astype(np.float64).reshape(oc, -1).T @ g2).reshape(c, kh, kw, n, oh, ow)
    pt, pb, pl, pr = pads
    big = max(0, -pt, -pb, -pl, -pr)  # room for negative pads
    dxp = np.zeros((n, c, h + pt + pb + 2 * big, wd + pl + pr + 2 * big))
    for i in range(kh):
        for j in range(kw):
            r0, c0 = big + i * dil[0], big + j * dil[1]
            dst = dxp[:, :, r0:r0 + stride[0] * (oh - 1) + 1:stride[0],
                      c0:c0 + stride[1] * (ow - 1) + 1:stride[1]]
            dst += d6[:, i, j].transpose(1, 0, 2, 3)
    dx = dxp[:, :, big + pt:big + pt + h, big + pl:big + pl + wd]
    return dx, dw.reshape(w.shape)


def close(got, want, what, tol=2e-5):
    err = float(np.abs(got.astype(np.float64) - want).max()) / max(float(np.abs(want).max()),
                                                                   1e-30)
    assert err <= tol, f"{what}: relative error {err:.3g}"


def data(case, dtype=np.float32, seed=0):
    (n, c, h, wd), (oc, kh, kw), stride, pads, dil = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, wd)).astype(dtype)
    w = (rng.standard_normal((oc, c, kh, kw)) / np.sqrt(c * kh * kw)).astype(dtype)
    b = rng.standard_normal(oc).astype(dtype)
    oh, ow = out_hw(h, wd, kh, kw, stride, pads, dil)
    g = rng.standard_normal((n, oc, oh, ow)).astype(dtype)
    return x, w, b, g


def run(x, w, b, g, stride, pads, dil):
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = out_hw(h, wd, kh, kw, stride, pads, dil)
    out = np.empty((n, oc, oh, ow), x.dtype)
    cols = np.empty((c * kh * kw, n * oh * ow), x.dtype)
    K.conv2d(out, cols, x, w, b, stride, pads, dil)
    dx = np.empty(x.shape, x.dtype)
    K.conv2d_input_grad(dx, g, w, stride, pads, dil)
    dw = np.empty(w.shape, w.dtype)
    K.conv2d_weight_grad(dw, g, cols)
    return out, cols, dx, dw


def spy(monkeypatch, names):
    """Counts of the calls to cconv's functions ``names``."""
    counts = dict.fromkeys(names, 0)
    for name in names:
        real = getattr(cconv, name)

        def wrapped(*a, _real=real, _name=name, **k):
            counts[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(cconv, name, wrapped)
    return counts


# -- the copies: exactly NumPy's arrays -----------------------------------------------------

COPY_CASES = [  # (N, C, H, W), (kh, kw), stride, pads (top, bottom, left, right), dilation
    ((3, 2, 7, 6), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 3, 8, 8), (4, 4), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((2, 1, 9, 7), (3, 3), (2, 2), (0, 0, 0, 0), (2, 2)),
    ((1, 4, 5, 5), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1)),
    ((2, 2, 6, 6), (3, 3), (1, 1), (-1, -1, -1, -1), (1, 1)),  # negative: cropped
    ((2, 2, 6, 5), (2, 2), (3, 3), (3, 4, 3, 3), (1, 1)),  # padding beyond the kernel
    ((5, 3, 4, 4), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # several images a group
    ((2, 3, 20, 35), (3, 2), (1, 2), (0, 2, 1, 0), (2, 3)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", COPY_CASES, ids=str)
def test_copies_are_numpys(case, dtype):
    (n, c, h, w), (kh, kw), stride, pads, dil = case
    oh, ow = out_hw(h, w, kh, kw, stride, pads, dil)
    x = np.random.default_rng(1).standard_normal((n, c, h, w)).astype(dtype)
    geo = cconv.Geometry(c, h, w, kh, kw, oh, ow, stride, (pads[0], pads[2]), dil)
    want = ref_cols(x, kh, kw, stride, pads, dil, oh, ow)
    p = oh * ow
    for stream in (False, True):
        # into a column range of a wider matrix, images 1.. of x
        big = np.full((c * kh * kw, (n + 2) * p), np.nan, dtype)
        cconv.im2col(big[:, p:n * p], x, 1, n, geo, stream=stream)
        np.testing.assert_array_equal(big[:, p:n * p], want[:, p:])
        assert np.isnan(big[:, :p]).all() and np.isnan(big[:, n * p:]).all()
    rows = np.empty((n * p, c * kh * kw), dtype)
    cconv.im2row(rows, cconv.scratch(geo, dtype), x, 0, n, geo)
    np.testing.assert_array_equal(
        rows, want.reshape(c, kh, kw, n * p).transpose(3, 1, 2, 0).reshape(n * p, -1))
    # col2im: the adjoint of im2col, its adds in the reference's order
    d = np.random.default_rng(2).standard_normal((c * kh * kw, n * p)).astype(dtype)
    dx = np.full(x.shape, np.nan, dtype)
    cconv.col2im(dx, d, 0, n, geo)
    d6 = d.reshape(c, kh, kw, n, oh, ow)
    want_dx = np.zeros(x.shape, dtype)
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                ih = a * stride[0] + i * dil[0] - pads[0]
                for q in range(ow):
                    iw = q * stride[1] + j * dil[1] - pads[2]
                    if 0 <= ih < h and 0 <= iw < w:
                        want_dx[:, :, ih, iw] += d6[:, i, j, :, a, q].T
    np.testing.assert_array_equal(dx, want_dx)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_transpositions_are_numpys(dtype):
    rng = np.random.default_rng(3)
    y = rng.standard_normal((3 * 20, 7)).astype(dtype)
    b = rng.standard_normal(7).astype(dtype)
    out = np.full((5, 7, 4, 5), np.nan, dtype)
    cconv.rows_to_nchw(out, y, b, 1, 4)
    np.testing.assert_array_equal(out[1:4], (y.reshape(3, 20, 7) + b).transpose(0, 2, 1)
                                  .reshape(3, 7, 4, 5))
    assert np.isnan(out[0]).all() and np.isnan(out[4]).all()
    yc = rng.standard_normal((7, 100)).astype(dtype)
    cconv.cols_to_nchw(out, yc[:, 20:80], None, 2, 5)
    np.testing.assert_array_equal(out[2:5], yc[:, 20:80].reshape(7, 3, 4, 5).transpose(1, 0, 2, 3))
    cconv.cols_to_nchw(out, yc[:, 20:80], b, 2, 5)
    np.testing.assert_array_equal(out[2:5], (yc[:, 20:80] + b[:, None]).reshape(7, 3, 4, 5)
                                  .transpose(1, 0, 2, 3))
    dst = np.empty((7, 60), dtype)
    cconv.nchw_to_cols(dst, out, 2, 5)
    np.testing.assert_array_equal(dst, out[2:5].transpose(1, 0, 2, 3).reshape(7, 60))


def test_wrappers_refuse_what_they_do_not_take():
    x = np.zeros((2, 3, 6, 6), np.float32)
    geo = cconv.Geometry(3, 6, 6, 3, 3, 4, 4, (1, 1), (0, 0), (1, 1))
    cols = np.empty((27, 32), np.float32)
    with pytest.raises(ValueError):
        cconv.im2col(cols, x.astype(np.float64), 0, 2, geo)  # dtype
    with pytest.raises(ValueError):
        cconv.im2col(cols[:, :16], x, 0, 2, geo)  # too few columns
    with pytest.raises(ValueError):
        cconv.im2col(cols, np.asfortranarray(x), 0, 2, geo)  # layout
    with pytest.raises(ValueError):
        cconv.im2col(cols, x, 0, 3, geo)  # images beyond x
    with pytest.raises(ValueError):
        cconv.im2col(np.empty((32, 27), np.float32).T, x, 0, 2, geo)  # column stride
    with pytest.raises(ValueError):
        cconv.col2im(x[:, :2].copy(), cols, 0, 2, geo)  # channels
    with pytest.raises(ValueError):
        cconv.Geometry(3, 6, 6, 3, 3, 0, 4, (1, 1), (0, 0), (1, 1))
    out = np.empty((2, 5, 4, 4), np.float32)
    with pytest.raises(ValueError):
        cconv.rows_to_nchw(out, np.empty((32, 4), np.float32), None, 0, 2)
    if cconv.direct_available(np.float32):
        w = np.zeros((5, 3, 3, 3), np.float32)
        with pytest.raises(ValueError):  # packed for another block
            cconv.direct_conv(out, x, cconv.pack(w, 4), 8, None, cconv.direct_scratch(geo),
                              0, 2, geo)
        with pytest.raises(ValueError):  # stride 2
            g2 = cconv.Geometry(3, 6, 6, 3, 3, 2, 2, (2, 2), (0, 0), (1, 1))
            cconv.direct_conv(out[:, :, :2, :2].copy(), x, cconv.pack(w, 8), 8, None,
                              cconv.direct_scratch(g2), 0, 2, g2)
    else:
        assert not cconv.direct_available(np.float32)


# -- the direct convolution and the implicit GEMM, through conv_kernels ----------------------

# (N, C, H, W), (OC, kh, kw), stride, pads, dilation; the forward's and the input
# gradient's C kernel (on a machine with AVX-512)
KERNEL_CASES = [
    (((2, 5, 9, 20), (7, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)), "direct", "direct"),
    (((2, 3, 10, 37), (13, 3, 2), (1, 1), (2, 0, 1, 3), (2, 1)), "direct", None),
    (((3, 1, 16, 18), (9, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1)), "direct", None),  # superres' 1st
    (((2, 6, 8, 18), (5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)), "direct", "direct"),
    (((2, 20, 6, 33), (4, 3, 3), (1, 1), (0, 2, 3, 1), (1, 2)), "direct", "direct"),
    (((3, 5, 11, 13), (17, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)), "implicit", None),
    (((2, 18, 12, 10), (6, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)), None, "implicit"),
    (((2, 20, 13, 12), (33, 3, 4), (3, 2), (2, 0, 1, 2), (1, 1)), "implicit", "implicit"),
    (((2, 17, 5, 5), (9, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)), None, "implicit"),
    (((3, 64, 8, 8), (40, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)), "implicit", "implicit"),
    (((2, 16, 9, 9), (16, 3, 3), (2, 2), (0, 0, 0, 0), (2, 2)), None, None),  # dilated dx: GEMM
    (((2, 32, 4, 4), (16, 4, 4), (1, 1), (0, 0, 0, 0), (1, 1)), None, None),  # 1x1 output
]
_FNS = {"direct": "direct_conv", "implicit": "implicit_conv"}
_DX_FNS = {"direct": "direct_conv", "implicit": "implicit_input_grad"}


@pytest.mark.parametrize("case,fwd,dxk", KERNEL_CASES, ids=lambda v: str(v))
def test_kernels_against_reference(monkeypatch, case, fwd, dxk):
    x, w, b, g = data(case, seed=4)
    _, (oc, kh, kw), stride, pads, dil = case
    counts = spy(monkeypatch, ["direct_conv", "implicit_conv", "implicit_input_grad",
                               "implicit_weight_grad"])
    n, c, h, wd = x.shape
    oh, ow = out_hw(h, wd, kh, kw, stride, pads, dil)
    out = np.empty((n, oc, oh, ow), np.float32)
    cols = np.empty((c * kh * kw, n * oh * ow), np.float32)
    K.conv2d(out, cols, x, w, b, stride, pads, dil)
    used = {"forward": {k for k, v in counts.items() if v}}
    counts.update(dict.fromkeys(counts, 0))
    dx = np.empty(x.shape, np.float32)
    K.conv2d_input_grad(dx, g, w, stride, pads, dil)
    used["input grad"] = {k for k, v in counts.items() if v}
    counts.update(dict.fromkeys(counts, 0))
    dw = np.empty(w.shape, np.float32)
    K.conv2d_weight_grad(dw, g, cols)
    used["weight grad"] = {k for k, v in counts.items() if v}
    close(out, ref_conv(x, w, b, stride, pads, dil), "forward")
    np.testing.assert_array_equal(cols, ref_cols(x, kh, kw, stride, pads, dil, oh, ow))
    rdx, rdw = ref_grads(x, w, g, stride, pads, dil)
    close(dx, rdx, "input grad")
    close(dw, rdw, "weight grad")
    if cconv.direct_available(np.float32):
        # the kernels the dispatch picked
        wgrad = oc >= K._WGRAD_MIN_OC and c * kh * kw >= K._WGRAD_MIN_K
        assert used == {"forward": {_FNS[fwd]} if fwd else set(),
                        "input grad": {_DX_FNS[dxk]} if dxk else set(),
                        "weight grad": {"implicit_weight_grad"} if wgrad else set()}
        # (without bias too)
        out2 = np.empty_like(out)
        K.conv2d(out2, cols, x, w, None, stride, pads, dil)
        close(out2, ref_conv(x, w, None, stride, pads, dil), "forward without bias")


@pytest.mark.parametrize("case", [c for c, _, _ in KERNEL_CASES], ids=str)
def test_float64_and_the_numpy_forms(monkeypatch, case):
    """float64 takes the C copies (not the float32 kernels) to the reference's
    precision; with no compiler the NumPy forms give the C path's float32
    values."""
    _, _, stride, pads, dil = case
    x, w, b, g = data(case, np.float64, seed=5)
    out, _, dx, dw = run(x, w, b, g, stride, pads, dil)
    rdx, rdw = ref_grads(x, w, g, stride, pads, dil)
    close(out, ref_conv(x, w, b, stride, pads, dil), "float64 forward", 1e-12)
    close(dx, rdx, "float64 input grad", 1e-12)
    close(dw, rdw, "float64 weight grad", 1e-12)
    x, w, b, g = (a.astype(np.float32) for a in (x, w, b, g))
    with_c = run(x, w, b, g, stride, pads, dil)
    # no compiler (as RTX_CPU_CC=0 makes it: cfused finds none), for cconv alone
    monkeypatch.setattr(cfused, "_compiler", lambda: None)
    cconv.reset()
    try:
        assert not cconv.available(np.float32)
        counts = spy(monkeypatch, ["im2col", "col2im", "direct_conv", "implicit_conv"])
        without = run(x, w, b, g, stride, pads, dil)
        assert not any(counts.values())
    finally:
        monkeypatch.undo()
        cconv.reset()
    assert cconv.available(np.float32)
    for name, a, z in zip(("out", "cols", "dx", "dw"), with_c, without):
        if name == "cols":
            np.testing.assert_array_equal(a, z)
        else:
            close(a, z.astype(np.float64), f"C vs NumPy {name}")


def test_operands_of_other_layouts():
    """Non-contiguous x, weight, g and bias (copied for the loops), and outputs
    that are not C-contiguous (the NumPy forms write them)."""
    case = ((3, 6, 9, 17), (20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
    x, w, b, g = data(case, seed=6)
    xs = np.asfortranarray(x)
    ws = w.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)
    gs = g[:, :, :, ::-1].copy()[:, :, :, ::-1]
    bs = np.stack([b, b], 1)[:, 0]
    out, _, dx, dw = run(xs, ws, bs, gs, (1, 1), (1, 1, 1, 1), (1, 1))
    close(out, ref_conv(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1)), "forward")
    rdx, rdw = ref_grads(x, w, g, (1, 1), (1, 1, 1, 1), (1, 1))
    close(dx, rdx, "input grad")
    close(dw, rdw, "weight grad")
    n, c, h, wd = x.shape
    out_cl = np.empty((n, 9, 17, 20), np.float32).transpose(0, 3, 1, 2)
    cols = np.empty((c * 9, n * 9 * 17), np.float32)
    K.conv2d(out_cl, cols, x, w, b, (1, 1), (1, 1, 1, 1), (1, 1))
    close(out_cl, ref_conv(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1)), "channels-last out")
    dx_cl = np.empty((n, h, wd, c), np.float32).transpose(0, 3, 1, 2)
    K.conv2d_input_grad(dx_cl, g, w, (1, 1), (1, 1, 1, 1), (1, 1))
    close(dx_cl, rdx, "channels-last dx")


@pytest.mark.parametrize("k,oc,n,p", [(100, 40, 3, 700), (64, 16, 2, 1500), (150, 70, 5, 64)])
def test_weight_grad_over_chunks_and_row_ranges(k, oc, n, p):
    """The implicit weight gradient over several chunks of positions (accumulators
    carried through, the last tile of rows short) against float64, and split into
    ranges of rows anywhere: the same bits."""
    if not cconv.direct_available(np.float32):
        with pytest.raises(ValueError):
            cconv.implicit_weight_grad(np.empty((1, k, 16), np.float32),
                                       np.zeros((n, oc, p), np.float32),
                                       np.zeros((k, n * p), np.float32), 1, 0, k)
        return
    rng = np.random.default_rng(10)
    cols = rng.standard_normal((k, n * p)).astype(np.float32)
    g = rng.standard_normal((n, oc, p)).astype(np.float32)
    want = g.astype(np.float64).transpose(1, 0, 2).reshape(oc, -1) @ cols.astype(np.float64).T
    for nv in (1, 2, 4):
        chunks = -(-n * p // cconv.weight_grad_chunk(nv))
        assert chunks > 1 or (n, p) == (5, 64)  # (the last case: one chunk)
        blocks = -(-oc // (16 * nv))
        whole = np.empty((blocks, k, 16 * nv), np.float32)
        cconv.implicit_weight_grad(whole, g, cols, nv, 0, k)
        got = whole.transpose(0, 2, 1).reshape(-1, k)
        close(got[:oc], want, f"dw by {nv} vectors", 1e-5)
        assert not got[oc:].any()  # zero past OC
        split = np.empty_like(whole)
        for lo, hi in ((0, 7), (7, k // 2), (k // 2, k)):
            cconv.implicit_weight_grad(split, g, cols, nv, lo, hi)
        np.testing.assert_array_equal(split, whole)


# -- threads -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [
    ((7, 8, 6, 20), (12, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # direct, both ways
    ((7, 20, 10, 10), (24, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)),  # implicit, both ways
    ((7, 6, 9, 9), (4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # GEMM and col2im
], ids=str)
def test_same_bits_on_any_thread_count(monkeypatch, case):
    """A batch split over 1, 2 and 3 threads gives the single run's bits: output,
    cols, input and weight gradients."""
    pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(K, "_SPLIT_MIN", 0)
    monkeypatch.setattr(K, "_CHUNK", 1)  # an image a chunk
    splits = []
    real_run = K._run
    monkeypatch.setattr(K, "_run", lambda fn, calls: splits.append(len(calls)) or
                        real_run(fn, calls))
    x, w, b, g = data(case, seed=7)
    _, _, stride, pads, dil = case
    old = rc.get_num_threads()
    got = {}
    try:
        for t in (1, 2, 3):
            rc.set_num_threads(t)
            got[t] = run(x, w, b, g, stride, pads, dil)
    finally:
        rc.set_num_threads(old)
    assert max(splits) == 3
    for t in (2, 3):
        for a, z in zip(got[1], got[t]):
            np.testing.assert_array_equal(a, z)
    rdx, _ = ref_grads(x, w, g, stride, pads, dil)
    close(got[3][2], rdx, "input grad on 3 threads")


# -- through rtxcore, float64 gradcheck and float32 against PyTorch ------------------------


@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 1), (3, 0)])
def test_gradcheck_conv2d_and_conv_transpose2d(stride, padding):
    rng = np.random.default_rng(8)
    x = rc.tensor(rng.standard_normal((2, 3, 7, 6)), requires_grad=True)
    w = rc.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    b = rc.tensor(rng.standard_normal(4), requires_grad=True)
    assert gradcheck(lambda a, k, c: F.conv2d(a, k, c, stride=stride, padding=padding),
                     (x, w, b))
    wt = rc.tensor(rng.standard_normal((3, 4, 3, 3)), requires_grad=True)
    assert gradcheck(lambda a, k, c: F.conv_transpose2d(a, k, c, stride=stride,
                                                        padding=padding), (x, wt, b))


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("layer", [  # (N, C, H, W), OC, k, stride, padding
    ((4, 64, 16, 16), 32, 3, 1, 1), ((4, 32, 16, 16), 9, 3, 1, 1), ((4, 1, 16, 16), 64, 5, 1, 2),
    ((8, 32, 16, 16), 64, 4, 2, 1), ((8, 64, 8, 8), 128, 4, 2, 1), ((8, 128, 4, 4), 1, 4, 1, 0),
], ids=str)
def test_model_layers_against_torch(layer):
    """superres' and DCGAN's layers (smaller batches) through rtxcore's conv2d and
    conv_transpose2d in float32, against PyTorch's values and gradients."""
    (n, c, h, wd), oc, k, s, p = layer
    rng = np.random.default_rng(9)
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = (rng.standard_normal((oc, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    for transpose in (False, True):
        xin = x if not transpose else \
            rng.standard_normal((n, oc, *out_hw(h, wd, k, k, (s, s), (p,) * 4, (1, 1))))\
            .astype(np.float32)
        rx, rw = (rc.tensor(a, requires_grad=True) for a in (xin, w))
        tx, tw = (torch.from_numpy(a).requires_grad_() for a in (xin, w))
        if transpose:
            ry, ty = F.conv_transpose2d(rx, rw, None, s, p), \
                torch.nn.functional.conv_transpose2d(tx, tw, None, s, p)
        else:
            ry, ty = F.conv2d(rx, rw, None, s, p), torch.nn.functional.conv2d(tx, tw, None, s, p)
        gy = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ry.backward(rc.tensor(gy))
        ty.backward(torch.from_numpy(gy))
        close(ry.detach().numpy(), ty.detach().numpy().astype(np.float64), f"{layer} out",
              1e-5)
        close(rx.grad.numpy(), tx.grad.numpy().astype(np.float64), f"{layer} dx", 1e-5)
        close(rw.grad.numpy(), tw.grad.numpy().astype(np.float64), f"{layer} dw", 1e-5)
