"""The fast paths of ``max_pool2d`` (non-overlapping tiles as one node, the backend's
``max_pool2d_tiled`` kernels) and of ``conv2d`` (small images as one matmul with
the convolution's dense matrix): values and indices against NumPy written here
(and torch where it imports), the gradient of tied maxima going to the first as
in PyTorch, gradcheck / gradgradcheck in float64, and the dense conv against the
im2col path, on every device; and the cpu backend's conv2d kernels against the
core's tensor-op conv2d."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.nn.functional import convolution as FC  # conv2d's paths, patched where they live
from rtxcore.autograd import gradcheck, gradgradcheck


def T(a, device, rg=False):
    arr = np.asarray(a)
    dt = {np.dtype(np.float32): rc.float32, np.dtype(np.float64): rc.float64}.get(arr.dtype)
    t = rc.tensor(arr, dtype=dt, device=device)
    return t.requires_grad_() if rg else t


def A(t):
    return np.asarray(t.detach().cpu().numpy())


def np_tile_max(x, kh, kw):
    """Values and flat H*W indices of the first maximum (or first NaN) of each tile."""
    n, c, h, w = x.shape
    oh, ow = h // kh, w // kw
    vals = np.zeros((n, c, oh, ow), x.dtype)
    idx = np.zeros((n, c, oh, ow), np.int64)
    for a in range(n):
        for b in range(c):
            for i in range(oh):
                for j in range(ow):
                    tile = x[a, b, i * kh:(i + 1) * kh, j * kw:(j + 1) * kw].reshape(-1)
                    nan = np.flatnonzero(np.isnan(tile)) if tile.dtype.kind == "f" else []
                    p = int(nan[0]) if len(nan) else int(np.argmax(tile))  # argmax: first
                    vals[a, b, i, j] = tile[p]
                    idx[a, b, i, j] = (i * kh + p // kw) * w + j * kw + p % kw
    return vals, idx


def np_tile_grad(g, idx, shape):
    out = np.zeros(shape)
    n, c = shape[:2]
    for a in range(n):
        for b in range(c):
            np.add.at(out[a, b].reshape(-1), idx[a, b].reshape(-1), g[a, b].reshape(-1))
    return out


@pytest.mark.parametrize("shape,k", [((2, 3, 8, 8), 2), ((2, 2, 7, 9), 2), ((1, 2, 6, 9), (3, 2)),
                                     ((3, 1, 4, 4), 4)], ids=str)
def test_tiled_values_indices_and_grad(device, shape, k):
    r = np.random.default_rng(1)
    x = r.standard_normal(shape)
    x[0, 0, :2, :2] = 0.5  # a tied tile
    kh, kw = (k, k) if isinstance(k, int) else k
    vals, idx = np_tile_max(x, kh, kw)
    xs = T(x, device, rg=True)
    v, i = F.max_pool2d(xs, k, return_indices=True)
    np.testing.assert_array_equal(A(v), vals)
    assert i.dtype == rc.int64
    np.testing.assert_array_equal(A(i), idx)
    np.testing.assert_array_equal(A(F.max_pool2d(T(x, device), k)), vals)
    g = r.standard_normal(vals.shape)
    F.max_pool2d(xs, k).backward(T(g, device))
    np.testing.assert_array_equal(A(xs.grad), np_tile_grad(g, idx, shape))


def test_ties_go_to_the_first_maximum(device):
    # zeros everywhere: every window is one tie; tiled and overlapping windows alike
    x = np.zeros((1, 2, 4, 6))
    for kw in (dict(kernel_size=2), dict(kernel_size=2, stride=1), dict(kernel_size=3, padding=1)):
        xs = T(x, device, rg=True)
        F.max_pool2d(xs, **kw).sum().backward()
        _, idx = F.max_pool2d(T(x, device), return_indices=True, **kw)
        # one whole unit per window, all at its returned index (the first element)
        expected = np_tile_grad(np.ones(tuple(idx.shape)), A(idx), x.shape)
        np.testing.assert_array_equal(A(xs.grad), expected)
        assert A(xs.grad).max() >= 1.0  # not shared out in fractions
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(2)
    xr = np.round(r.standard_normal((2, 3, 6, 6)))  # many ties
    g = r.standard_normal((2, 3, 3, 3))
    xs = T(xr, device, rg=True)
    F.max_pool2d(xs, 2).backward(T(g, device))
    tx = torch.tensor(xr, requires_grad=True)
    torch.nn.functional.max_pool2d(tx, 2).backward(torch.tensor(g))
    np.testing.assert_array_equal(A(xs.grad), tx.grad.numpy())


def test_tiled_nan_and_integers(device):
    x = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4)
    x[0, 0, 1, 0] = np.nan
    vals, idx = np_tile_max(x, 2, 2)
    v, i = F.max_pool2d(T(x, device), 2, return_indices=True)
    np.testing.assert_array_equal(A(v), vals)  # NaN propagates (array_equal: NaN == NaN)
    np.testing.assert_array_equal(A(i), idx)
    assert A(i)[0, 0, 0, 0] == 4  # the NaN's position, as PyTorch
    xi = np.random.default_rng(3).integers(-3, 3, (2, 2, 4, 6))
    vi, ii = np_tile_max(xi, 2, 3)
    out, ind = F.max_pool2d(T(xi, device), (2, 3), return_indices=True)
    assert out.dtype == rc.int64
    np.testing.assert_array_equal(A(out), vi)
    np.testing.assert_array_equal(A(ind), ii)


def test_tiled_matches_torch(device):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(4).standard_normal((2, 3, 9, 7)).astype(np.float32)
    v, i = F.max_pool2d(T(x, device), (3, 2), return_indices=True)
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), (3, 2), return_indices=True)
    np.testing.assert_array_equal(A(v), tv.numpy())
    np.testing.assert_array_equal(A(i), ti.numpy())
    u = F.max_pool2d(T(x[0], device), 2)  # unbatched
    tu = torch.nn.functional.max_pool2d(torch.tensor(x[0]), 2)
    np.testing.assert_array_equal(A(u), tu.numpy())


def test_tiled_gradcheck_and_gradgradcheck(device):
    # distinct values: no ties, where the max isn't differentiable
    vals = (np.random.default_rng(5).permutation(2 * 5 * 6) * 0.37 + 0.1).reshape(1, 2, 5, 6)
    x = T(vals, device, rg=True)
    assert gradcheck(lambda x: F.max_pool2d(x, 2), (x,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2) * 1.5, (x,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, (2, 3), return_indices=True)[0], (x,))


CONV_CASES = [
    dict(x=(2, 3, 4, 4), w=(5, 3, 3, 3), padding=1),
    dict(x=(1, 2, 5, 4), w=(3, 2, 2, 3), stride=(2, 1), padding=(1, 0)),
    dict(x=(2, 2, 5, 5), w=(2, 2, 3, 3), dilation=2, padding=2, bias=False),
    dict(x=(2, 1, 4, 3), w=(2, 1, 3, 3), padding="same"),
]


def _conv_args(case, device, rg=False):
    case = dict(case)
    r = np.random.default_rng(6)
    x = T(r.standard_normal(case.pop("x")), device, rg)
    w = T(r.standard_normal(case.pop("w")), device, rg)
    b = T(r.standard_normal(w.shape[0]), device, rg) if case.pop("bias", True) else None
    return x, w, b, case


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_dense_conv_matches_im2col(device, case, monkeypatch):
    monkeypatch.setattr(FC, "_conv2d_kernels", lambda *a: None)  # the core's two paths
    x, w, b, kw = _conv_args(case, device, rg=True)
    g = None
    results = []
    for ratio in (0, 1000):  # the im2col path, then the dense one
        monkeypatch.setattr(FC, "_DENSE_CONV_RATIO", ratio)
        for t in (x, w, b):
            if t is not None:
                t.grad = None
        out = F.conv2d(x, w, b, **kw)
        assert out.is_contiguous()
        if g is None:
            g = T(np.random.default_rng(7).standard_normal(tuple(out.shape)), device)
        out.backward(g)
        results.append([A(out)] + [A(t.grad) for t in (x, w, b) if t is not None])
    for im2col, dense in zip(*results):
        np.testing.assert_allclose(dense, im2col, rtol=1e-10, atol=1e-10)
    torch = pytest.importorskip("torch")
    tx, tw = torch.tensor(A(x)), torch.tensor(A(w))
    tb = torch.tensor(A(b)) if b is not None else None
    np.testing.assert_allclose(results[1][0], torch.nn.functional.conv2d(tx, tw, tb, **kw).numpy(),
                               rtol=1e-10, atol=1e-10)


def test_dense_conv_is_used_on_small_images(device, monkeypatch):
    monkeypatch.setattr(FC, "_conv2d_kernels", lambda *a: None)
    calls = []
    real = FC._conv2d_dense
    monkeypatch.setattr(FC, "_conv2d_dense", lambda *a: calls.append(1) or real(*a))
    x = T(np.zeros((2, 4, 4, 4), np.float32), device)
    F.conv2d(x, T(np.zeros((8, 4, 3, 3), np.float32), device), padding=1)
    assert calls == [1]
    F.conv2d(x, T(np.zeros((8, 2, 3, 3), np.float32), device), padding=1, groups=2)
    assert calls == [1]  # grouped: im2col


def test_dense_conv_against_a_backends_kernels_only_where_the_kernel_covers_the_image(
        device, monkeypatch):
    kernels = FC._conv2d_kernels(T(np.zeros((1, 1, 3, 3), np.float32), device),
                                 T(np.zeros((1, 1, 3, 3), np.float32), device), None)
    calls = []
    real = FC._conv2d_dense
    monkeypatch.setattr(FC, "_conv2d_dense", lambda *a: calls.append(1) or real(*a))
    w = T(np.zeros((8, 4, 3, 3), np.float32), device)
    F.conv2d(T(np.zeros((2, 4, 4, 4), np.float32), device), w, padding=1)
    # 16 pixels for 9 taps: the backend's kernels where it has them, else the
    # dense product (against the core's im2col in tensor ops)
    assert calls == ([] if kernels is not None else [1])
    F.conv2d(T(np.zeros((2, 4, 3, 3), np.float32), device), w)
    assert calls[-1:] == [1]  # the kernel covers the image: one product


@pytest.mark.parametrize("case", [dict(x=(1, 2, 4, 4), w=(2, 2, 3, 3), padding=1),
                                  dict(x=(1, 1, 5, 4), w=(2, 1, 2, 3), stride=(2, 1),
                                       padding=(1, 0)),
                                  dict(x=(1, 1, 4, 4), w=(1, 1, 3, 3), dilation=2, padding=2)],
                         ids=str)
def test_dense_conv_gradcheck_and_gradgradcheck(device, case, monkeypatch):
    monkeypatch.setattr(FC, "_conv2d_kernels", lambda *a: None)
    monkeypatch.setattr(FC, "_DENSE_CONV_RATIO", 1000)
    x, w, b, kw = _conv_args(case, device, rg=True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, **kw), (x, w, b))
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, None, **kw), (x, w))


# -- the cpu backend's conv2d kernels (conv2d, conv2d_input_grad, conv2d_weight_grad)

KERNEL_CASES = CONV_CASES + [
    dict(x=(2, 3, 7, 6), w=(4, 3, 3, 2), stride=(2, 3), padding=(2, 1), dilation=(1, 2)),
    dict(x=(1, 2, 6, 6), w=(3, 2, 1, 1)),
]


def _grads(x, w, b, kw, g):
    for t in (x, w, b):
        if t is not None:
            t.grad = None
    out = F.conv2d(x, w, b, **kw)
    out.backward(g)
    return [A(out)] + [A(t.grad) for t in (x, w, b) if t is not None]


@pytest.mark.parametrize("case", KERNEL_CASES, ids=str)
def test_conv_kernels_match_the_core_conv(case, monkeypatch):
    monkeypatch.setattr(FC, "_DENSE_CONV_RATIO", 0)  # small images take the dense path first
    calls = []
    real = FC._Conv2dKernel.apply
    monkeypatch.setattr(FC._Conv2dKernel, "apply", lambda *a: calls.append(1) or real(*a))
    x, w, b, kw = _conv_args(case, "cpu", rg=True)
    out = F.conv2d(x, w, b, **kw)
    g = T(np.random.default_rng(8).standard_normal(tuple(out.shape)), "cpu")
    got = _grads(x, w, b, kw, g)
    assert calls, "the kernel path did not run"
    with monkeypatch.context() as m:
        m.setattr(FC, "_conv2d_kernels", lambda *a: None)
        want = _grads(x, w, b, kw, g)
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)
    torch = pytest.importorskip("torch")
    tx, tw = torch.tensor(A(x)), torch.tensor(A(w))
    tb = torch.tensor(A(b)) if b is not None else None
    np.testing.assert_allclose(got[0], torch.nn.functional.conv2d(tx, tw, tb, **kw).numpy(),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", KERNEL_CASES[1::2], ids=str)
def test_conv_kernels_gradcheck_and_gradgradcheck(case, monkeypatch):
    monkeypatch.setattr(FC, "_DENSE_CONV_RATIO", 0)
    calls = []
    real = FC._Conv2dKernel.apply
    monkeypatch.setattr(FC._Conv2dKernel, "apply", lambda *a: calls.append(1) or real(*a))
    x, w, b, kw = _conv_args(case, "cpu", rg=True)
    assert FC._conv2d_kernels(x, w, b) is not None
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, **kw), (x, w, b))
    # a recording backward differentiates the core's conv2d
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, None, **kw), (x, w))
    assert calls, "the kernel path did not run"


def test_conv_kernels_layouts_dtypes_and_what_needs_grad(monkeypatch):
    monkeypatch.setattr(FC, "_DENSE_CONV_RATIO", 0)
    r = np.random.default_rng(9)
    xa = r.standard_normal((3, 5, 6, 2)).astype(np.float32)  # (N, H, W, C): channels last
    wa = r.standard_normal((4, 2, 3, 3)).astype(np.float32)
    x = T(xa, "cpu").permute(0, 3, 1, 2)  # a non-contiguous (N, C, H, W) view
    w = T(wa, "cpu", rg=True)
    out = F.conv2d(x, w, padding=1)  # the input needs no gradient: only the weight's
    out.sum().backward()
    assert x.grad is None
    w64 = T(wa.astype(np.float64), "cpu", rg=True)
    out64 = F.conv2d(T(xa.astype(np.float64), "cpu").permute(0, 3, 1, 2), w64, padding=1)
    out64.sum().backward()
    np.testing.assert_allclose(A(out), A(out64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(A(w.grad), A(w64.grad), rtol=1e-5, atol=1e-4)
    # float16 accumulates in float32: within a float16 rounding of the float64 result
    x16 = T(xa, "cpu").to(rc.float16).permute(0, 3, 1, 2).requires_grad_()
    w16 = w.detach().to(rc.float16).requires_grad_()
    out16 = F.conv2d(x16, w16, padding=1)
    assert out16.dtype == rc.float16
    out16.sum().backward()
    np.testing.assert_allclose(A(out16).astype(np.float64), A(out64), rtol=2e-3, atol=4e-3)
    np.testing.assert_allclose(A(w16.grad).astype(np.float64), A(w64.grad), rtol=2e-3, atol=2e-2)
    # mixed dtypes are not the kernels' (the core's conv2d decides what they mean)
    assert FC._conv2d_kernels(x, w64, None) is None
