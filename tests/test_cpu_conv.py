"""The cpu backend's conv2d kernels (``rtx_cpu.conv_kernels``) called as the core
calls them, on NumPy arrays: the forward (output and im2col matrix), the input
gradient by each of its paths (the stride-1 correlation channel- and
positions-major, col2im channel-major and channels-last) and the weight
gradient, against a float64 NumPy reference written here and, where it imports,
PyTorch's conv2d and its gradients; float16/32/64, asymmetric and large padding,
strides, dilation, batches cut into several chunks, non-contiguous operands, the
same bits on 1, 2 and 4 threads. And the same through
``rtxcore.nn.functional.conv2d`` on cpu."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F

from rtx_cpu import conv_kernels as K

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None


# -- a float64 reference, loop over kernel offsets -----------------------------------------


def ref_out_hw(h, w, kh, kw, stride, pads, dil):
    pt, pb, pl, pr = pads
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    return oh, ow


def ref_pad(x, pads):
    pt, pb, pl, pr = pads
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))


def ref_conv(x, w, b, stride, pads, dil):
    """Forward, float64: sum over kernel offsets of W[:, :, i, j] times a strided slice."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = ref_out_hw(h, wd, kh, kw, stride, pads, dil)
    xp = ref_pad(x, pads)
    out = np.zeros((n, oc, oh, ow))
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dil[0], j * dil[1]
            sl = xp[:, :, r0:r0 + stride[0] * (oh - 1) + 1:stride[0],
                    c0:c0 + stride[1] * (ow - 1) + 1:stride[1]]
            out += np.einsum("oc,nchw->nohw", w[:, :, i, j], sl)
    if b is not None:
        out += b.astype(np.float64).reshape(1, oc, 1, 1)
    return out


def ref_grads(x, w, g, stride, pads, dil):
    """(dx, dw), float64, by the adjoint of ref_conv's slices."""
    x, w, g = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = g.shape[2:]
    pt, pb, pl, pr = pads
    xp = ref_pad(x, pads)
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dil[0], j * dil[1]
            idx = (slice(None), slice(None), slice(r0, r0 + stride[0] * (oh - 1) + 1, stride[0]),
                   slice(c0, c0 + stride[1] * (ow - 1) + 1, stride[1]))
            dxp[idx] += np.einsum("oc,nohw->nchw", w[:, :, i, j], g)
            dw[:, :, i, j] = np.einsum("nohw,nchw->oc", g, xp[idx])
    return dxp[:, :, pt:pt + h, pl:pl + wd], dw


# -- running the kernels -------------------------------------------------------------------


def run_kernels(x, w, b, g, stride, pads, dil, dx_path=None, fwd_path=None):
    """(out, cols, dx, dw) from the kernels; dx_path and fwd_path pick the input
    gradient's and the forward's path (None: the one the kernel picks)."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = ref_out_hw(h, wd, kh, kw, stride, pads, dil)
    out = np.empty((n, oc, oh, ow), x.dtype)
    cols = np.empty((c * kh * kw, n * oh * ow), x.dtype)
    fwd = {None: K.conv2d, "cols": K._conv2d_cols, "rows": K._conv2d_rows}[fwd_path]
    fwd(out, cols, x, w, b, stride, pads, dil)
    dx = np.empty(x.shape, x.dtype)
    if dx_path is None:
        K.conv2d_input_grad(dx, g, w, stride, pads, dil)
    elif dx_path == "correlate":
        K._input_grad_correlate(dx, g, w, pads, dil)
    elif dx_path == "correlate_rows":
        K._input_grad_correlate_rows(dx, g, w, pads, dil)
    elif dx_path == "col2im_cl":
        K._input_grad_col2im_cl(dx, g, w, stride, pads, dil)
    else:
        K._input_grad_col2im(dx, g, w, stride, pads, dil)
    dw = np.empty(w.shape, w.dtype)
    K.conv2d_weight_grad(dw, g, cols)
    return out, cols, dx, dw


def ref_cols(x, kh, kw, stride, pads, dil, oh, ow):
    """The im2col matrix of the contract: row (c, i, j), columns in (N, OH, OW) order."""
    xp = ref_pad(x, pads)
    n, c = x.shape[:2]
    cols = np.empty((c, kh, kw, n, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dil[0], j * dil[1]
            sl = xp[:, :, r0:r0 + stride[0] * (oh - 1) + 1:stride[0],
                    c0:c0 + stride[1] * (ow - 1) + 1:stride[1]]
            cols[:, i, j] = sl.transpose(1, 0, 2, 3)
    return cols.reshape(c * kh * kw, n * oh * ow)


TOL = {np.float16: 2e-3, np.float32: 2e-5, np.float64: 1e-12}


def close(got, want, dtype, what):
    scale = max(float(np.abs(want).max()), 1e-30)
    err = float(np.abs(got.astype(np.float64) - want).max()) / scale
    assert err <= TOL[dtype], f"{what}: relative error {err:.3g} (dtype {np.dtype(dtype).name})"


# (N, C, H, W), (OC, kh, kw), stride, pads (top, bottom, left, right), dilation
CASES = [
    ((2, 3, 7, 6), (4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((3, 2, 8, 9), (5, 3, 2), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((2, 3, 6, 7), (4, 3, 2), (1, 1), (1, 1, 0, 1), (1, 1)),  # 'same' with an even kernel
    ((2, 2, 9, 8), (3, 3, 3), (1, 1), (2, 0, 0, 3), (2, 1)),  # asymmetric, dilated
    ((1, 3, 5, 5), (2, 3, 3), (1, 1), (4, 3, 2, 5), (1, 1)),  # padding beyond the kernel
    ((2, 3, 9, 10), (4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((2, 2, 11, 9), (3, 4, 4), (2, 3), (1, 2, 0, 1), (1, 2)),  # the last rows unread
    ((3, 1, 8, 8), (6, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)),  # DCGAN's first layer
    ((2, 2, 6, 6), (9, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # OC > 2C: col2im at stride 1
    ((2, 4, 7, 7), (2, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),  # 1x1
    ((2, 8, 10, 9), (16, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1)),  # col2im channels-last
    ((3, 9, 11, 10), (5, 3, 2), (2, 1), (0, 2, 1, 0), (2, 3)),  # ... asymmetric, dilated
    ((2, 8, 6, 7), (20, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # ... at stride 1 (OC > 2C)
    ((3, 5, 4, 4), (6, 4, 4), (1, 1), (0, 0, 0, 0), (1, 1)),  # one output position the
    ((2, 3, 4, 4), (5, 4, 4), (2, 2), (0, 0, 0, 0), (1, 1)),  # kernel covers: one product
    ((3, 1, 20, 20), (4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # few rows of cols, 400
    ((2, 2, 17, 18), (3, 3, 2), (1, 1), (0, 1, 1, 0), (1, 1)),  # positions: a product per image
]


def _data(case, dtype, seed=0):
    (n, c, h, wd), (oc, kh, kw), stride, pads, dil = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, wd)).astype(dtype)
    w = (rng.standard_normal((oc, c, kh, kw)) / np.sqrt(c * kh * kw)).astype(dtype)
    b = rng.standard_normal(oc).astype(dtype)
    oh, ow = ref_out_hw(h, wd, kh, kw, stride, pads, dil)
    g = rng.standard_normal((n, oc, oh, ow)).astype(dtype)
    return x, w, b, g


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernels_against_reference(case, dtype):
    x, w, b, g = _data(case, dtype)
    _, _, stride, pads, dil = case
    out, cols, dx, dw = run_kernels(x, w, b, g, stride, pads, dil)
    assert out.dtype == dx.dtype == dw.dtype == np.dtype(dtype)
    close(out, ref_conv(x, w, b, stride, pads, dil), dtype, "forward")
    oh, ow = out.shape[2:]
    np.testing.assert_array_equal(cols, ref_cols(x, w.shape[2], w.shape[3], stride, pads, dil,
                                                 oh, ow))
    rdx, rdw = ref_grads(x, w, g, stride, pads, dil)
    close(dx, rdx, dtype, "input grad")
    close(dw, rdw, dtype, "weight grad")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_input_grad_paths_agree(case, dtype):
    """Every path of the input gradient that takes the case (the correlation,
    channel- and positions-major, only at stride 1; col2im channel-major and
    channels-last at any) gives the reference's gradient."""
    x, w, b, g = _data(case, dtype, seed=1)
    _, _, stride, pads, dil = case
    rdx, _ = ref_grads(x, w, g, stride, pads, dil)
    for path in ("correlate", "correlate_rows", "col2im", "col2im_cl")[2 * (stride != (1, 1)):]:
        _, _, dx, _ = run_kernels(x, w, b, g, stride, pads, dil, dx_path=path)
        close(dx, rdx, dtype, f"input grad by {path}")


@pytest.mark.parametrize("chunk", [1, 1 << 18], ids=["one image a chunk", "whole batch"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_float16_is_float32_rounded_once(monkeypatch, case, chunk):
    """float16 computes exactly what float32 does on the same values and rounds once
    (the bias added before the rounding, not after): every path, bit for bit."""
    monkeypatch.setattr(K, "_CHUNK", chunk)
    x, w, b, g = _data(case, np.float16, seed=8)
    _, _, stride, pads, dil = case
    paths = ("correlate", "correlate_rows", "col2im", "col2im_cl")[2 * (stride != (1, 1)):]
    for fwd in ("cols", "rows"):
        for path in paths:
            half = run_kernels(x, w, b, g, stride, pads, dil, dx_path=path, fwd_path=fwd)
            full = run_kernels(*(a.astype(np.float32) for a in (x, w, b, g)), stride, pads, dil,
                               dx_path=path, fwd_path=fwd)
            for name, h16, f32 in zip(("out", "cols", "dx", "dw"), half, full):
                np.testing.assert_array_equal(h16, f32.astype(np.float16), err_msg=name)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_paths_agree(case, dtype):
    """Both forward paths (W @ cols; positions-major) give the reference's output
    and the contract's cols."""
    x, w, b, _ = _data(case, dtype, seed=6)
    _, (oc, kh, kw), stride, pads, dil = case
    n, c, h, wd = x.shape
    oh, ow = ref_out_hw(h, wd, kh, kw, stride, pads, dil)
    want = ref_conv(x, w, b, stride, pads, dil)
    for kernel in (K._conv2d_cols, K._conv2d_rows):
        for bias in (b, None):
            out = np.empty((n, oc, oh, ow), x.dtype)
            cols = np.empty((c * kh * kw, n * oh * ow), x.dtype)
            kernel(out, cols, x, w, bias, stride, pads, dil)
            close(out, want if bias is not None else want - b.astype(np.float64)[:, None, None],
                  dtype, kernel.__name__)
            np.testing.assert_array_equal(cols, ref_cols(x, kh, kw, stride, pads, dil, oh, ow))


@pytest.mark.parametrize("fwd", ["cols", "rows"])
@pytest.mark.parametrize("path", ["correlate", "correlate_rows", "col2im", "col2im_cl"])
def test_chunks_and_layouts(monkeypatch, path, fwd):
    """A batch cut into chunks of several images, a last chunk shorter than the
    others, and non-contiguous x, weight and g."""
    monkeypatch.setattr(K, "_CHUNK", 3 * 45 * 64)  # chunks of 5, 3 and 5 images
    case = ((7, 3, 8, 8), (5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
    x, w, b, g = _data(case, np.float32, seed=2)
    xs = np.asfortranarray(x)  # a different layout: as_strided's windows must follow it
    ws = w.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)
    gs = g[:, :, :, ::-1].copy()[:, :, :, ::-1]
    _, _, stride, pads, dil = case
    out, cols, dx, dw = run_kernels(xs, ws, b, gs, stride, pads, dil, dx_path=path, fwd_path=fwd)
    close(out, ref_conv(x, w, b, stride, pads, dil), np.float32, "forward")
    rdx, rdw = ref_grads(x, w, g, stride, pads, dil)
    close(dx, rdx, np.float32, "input grad")
    close(dw, rdw, np.float32, "weight grad")


# -- against PyTorch, the models' shapes ---------------------------------------------------

MODEL_LAYERS = [  # (N, C, H, W), (OC, k), stride, padding: superres and DCGAN's D
    ((4, 1, 16, 16), (16, 5), 1, 2), ((4, 16, 16, 16), (16, 3), 1, 1),
    ((4, 16, 16, 16), (8, 3), 1, 1), ((4, 8, 16, 16), (9, 3), 1, 1),
    ((4, 1, 32, 32), (8, 4), 2, 1), ((4, 8, 16, 16), (16, 4), 2, 1),
    ((4, 16, 8, 8), (32, 4), 2, 1),
]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("layer", MODEL_LAYERS, ids=str)
def test_kernels_against_torch(layer):
    (n, c, h, wd), (oc, k), s, p = layer
    case = ((n, c, h, wd), (oc, k, k), (s, s), (p, p, p, p), (1, 1))
    x, w, b, g = _data(case, np.float32, seed=3)
    out, _, dx, dw = run_kernels(x, w, b, g, (s, s), (p, p, p, p), (1, 1))
    tx = torch.from_numpy(x).requires_grad_()
    tw = torch.from_numpy(w).requires_grad_()
    ty = torch.nn.functional.conv2d(tx, tw, torch.from_numpy(b), s, p)
    ty.backward(torch.from_numpy(g))
    close(out, ty.detach().numpy().astype(np.float64), np.float32, "forward")
    close(dx, tx.grad.numpy().astype(np.float64), np.float32, "input grad")
    close(dw, tw.grad.numpy().astype(np.float64), np.float32, "weight grad")


@pytest.mark.parametrize("dtype", [rc.float32, rc.float64], ids=str)
def test_functional_conv2d_on_cpu(dtype):
    """Through rtxcore's conv2d (the kernel path: an image too large for the dense
    path) and its backward, against the reference."""
    case = ((3, 4, 12, 11), (6, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
    npdt = np.float32 if dtype is rc.float32 else np.float64
    x, w, b, g = _data(case, npdt, seed=4)
    tx = rc.tensor(x, dtype=dtype, device="cpu", requires_grad=True)
    tw = rc.tensor(w, dtype=dtype, device="cpu", requires_grad=True)
    tb = rc.tensor(b, dtype=dtype, device="cpu", requires_grad=True)
    y = F.conv2d(tx, tw, tb, padding=1)
    y.backward(rc.tensor(g, dtype=dtype, device="cpu"))
    close(y.detach().numpy(), ref_conv(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1)), npdt, "forward")
    rdx, rdw = ref_grads(x, w, g, (1, 1), (1, 1, 1, 1), (1, 1))
    close(tx.grad.numpy(), rdx, npdt, "input grad")
    close(tw.grad.numpy(), rdw, npdt, "weight grad")
    close(tb.grad.numpy(), g.astype(np.float64).sum((0, 2, 3)), npdt, "bias grad")


# -- threads -------------------------------------------------------------------------------


@pytest.mark.parametrize("path,fwd", [("correlate", "rows"), ("correlate_rows", "cols"),
                                      ("col2im", "cols"), ("col2im_cl", "rows")])
def test_same_bits_on_any_thread_count(monkeypatch, path, fwd):
    """A batch split over 1, 2 and 4 threads (each thread's chunks with one BLAS
    thread) gives the single run's bits: output, cols and input gradient."""
    pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(K, "_SPLIT_MIN", 0)
    monkeypatch.setattr(K, "_CHUNK", 2 * 64 * 64)  # chunks of one or two images
    splits = []
    real_run = K._run

    def spy(fn, calls):
        splits.append(len(calls))
        return real_run(fn, calls)

    monkeypatch.setattr(K, "_run", spy)
    stride = (1, 1) if path.startswith("correlate") else (2, 2)
    case = ((9, 8, 12, 12), (8, 3, 3), stride, (1, 1, 1, 1), (1, 1))
    x, w, b, g = _data(case, np.float32, seed=5)
    old = rc.get_num_threads()
    got = {}
    try:
        for t in (1, 2, 4):
            rc.set_num_threads(t)
            got[t] = run_kernels(x, w, b, g, stride, (1, 1, 1, 1), (1, 1), dx_path=path,
                                 fwd_path=fwd)
    finally:
        rc.set_num_threads(old)
    assert max(splits) > 1  # the batch was split
    for t in (2, 4):
        for a, z in zip(got[1], got[t]):
            np.testing.assert_array_equal(a, z)
    rdx, _ = ref_grads(x, w, g, stride, (1, 1, 1, 1), (1, 1))
    close(got[2][2], rdx, np.float32, "input grad on 2 threads")


@pytest.mark.parametrize("fwd", [K._conv2d_cols, K._conv2d_rows], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dxk", [lambda dx, g, w, s, p, d: K._input_grad_correlate(dx, g, w, p, d),
                                 lambda dx, g, w, s, p, d: K._input_grad_correlate_rows(
                                     dx, g, w, p, d),
                                 K._input_grad_col2im, K._input_grad_col2im_cl],
                         ids=["correlate", "correlate_rows", "col2im", "col2im_cl"])
@pytest.mark.parametrize("chunk", [1, 1 << 18], ids=["one image a chunk", "whole batch"])
def test_outputs_of_any_layout(monkeypatch, fwd, dxk, chunk):
    """out, dx and dweight written through whatever strides they have (channels-last
    buffers here)."""
    monkeypatch.setattr(K, "_CHUNK", chunk)
    case = ((3, 8, 9, 9), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))
    x, w, b, g = _data(case, np.float32, seed=7)
    _, _, stride, pads, dil = case
    n, c, h, wd = x.shape
    out = np.empty((n, 9, 9, 8), np.float32).transpose(0, 3, 1, 2)
    cols = np.empty((c * 9, n * 81), np.float32)
    fwd(out, cols, x, w, b, stride, pads, dil)
    close(out, ref_conv(x, w, b, stride, pads, dil), np.float32, "forward")
    dx = np.empty((n, h, wd, c), np.float32).transpose(0, 3, 1, 2)
    dxk(dx, g, w, stride, pads, dil)
    dwt = np.empty((3, 3, 8, 8), np.float32).transpose(3, 2, 0, 1)
    K.conv2d_weight_grad(dwt, g, cols)
    rdx, rdw = ref_grads(x, w, g, stride, pads, dil)
    close(dx, rdx, np.float32, "input grad")
    close(dwt, rdw, np.float32, "weight grad")


def test_one_output_position_is_one_product_with_the_same_bits_on_any_thread_count():
    """DCGAN's first ConvTranspose2d (1x1 latent -> 4x4) is the input gradient of a
    conv whose one output position the kernel covers: one product g @ W, split
    over the threads by its shape alone (so the same bits on 1, 2 and 4)."""
    rng = np.random.default_rng(11)
    n, oc, c = 64, 100, 128  # (64, 100) @ (100, 2048): 13M multiply-adds, split
    g = rng.standard_normal((n, oc, 1, 1)).astype(np.float32)
    w = (rng.standard_normal((oc, c, 4, 4)) / 20).astype(np.float32)
    old = rc.get_num_threads()
    got = {}
    try:
        for t in (1, 2, 4):
            rc.set_num_threads(t)
            dx = np.empty((n, c, 4, 4), np.float32)
            K.conv2d_input_grad(dx, g, w, (1, 1), (0, 0, 0, 0), (1, 1))
            got[t] = dx
    finally:
        rc.set_num_threads(old)
    for t in (2, 4):
        np.testing.assert_array_equal(got[1], got[t])
    want = (g.reshape(n, oc).astype(np.float64) @ w.reshape(oc, -1)).reshape(n, c, 4, 4)
    close(got[1], want, np.float32, "input grad")
    if torch is not None:
        y = torch.nn.functional.conv_transpose2d(torch.from_numpy(g), torch.from_numpy(w))
        np.testing.assert_allclose(
            F.conv_transpose2d(rc.tensor(g), rc.tensor(w)).numpy(), y.numpy(), rtol=1e-5,
            atol=1e-5)


def test_weight_grad_of_few_rows_into_a_strided_output():
    """The per-image products' sum (few rows of cols, 256+ positions) written
    through a channels-last dweight's strides, not into a temporary."""
    case = ((2, 2, 16, 16), (8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1))  # k = 18, p = 256
    x, w, b, g = _data(case, np.float32, seed=12)
    _, _, stride, pads, dil = case
    out, cols, _, _ = run_kernels(x, w, b, g, stride, pads, dil)
    assert cols.shape[0] < K._WGRAD_MIN_K and out.shape[2] * out.shape[3] >= K._WGRAD_BATCHED_MIN_P
    dwt = np.zeros((3, 3, 2, 8), np.float32).transpose(3, 2, 0, 1)
    K.conv2d_weight_grad(dwt, g, cols)
    _, rdw = ref_grads(x, w, g, stride, pads, dil)
    close(dwt, rdw, np.float32, "weight grad")
