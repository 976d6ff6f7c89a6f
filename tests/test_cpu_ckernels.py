"""rtx_cpu's fixed C loops (``ckernels``): layer_norm and its backward, the tiled
max_pool2d and its backward. Each against its NumPy form (the kernel with the C
loops switched off) and float64 references, the same bits on any thread count,
PyTorch's NaN and tie rules for the pooling, hostile indices refused, and the
NumPy form taking over where the loop cannot run (no compiler, float16, a
strided operand)."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import gradcheck
from rtx_cpu import cfused, ckernels, norm_kernels, window_kernels

pytestmark = pytest.mark.skipif(cfused._compiler() is None, reason="no C compiler")


@pytest.fixture
def numpy_form(monkeypatch):
    """Run a kernel with the C loops off (its NumPy form)."""
    def run(f, *a):
        with monkeypatch.context() as m:
            m.setattr(ckernels, "function", lambda name, dtype: None)
            return f(*a)
    return run


@pytest.fixture
def small_split(monkeypatch, submitted):
    """Threads from 2048 elements, backward blocks of 1000 elements: small inputs
    take a large one's paths. Returns the (lo, hi) runs handed to the pool."""
    monkeypatch.setattr(ckernels, "PARALLEL_MIN", 2048)
    monkeypatch.setattr(ckernels, "LN_BLOCK", 1000)
    return submitted


def _ln_ref(x, w, b, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + eps)
    y = (x - mu) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu, rstd


def _ln(x, w, b, eps=1e-5):
    m = x.shape[0]
    outs = np.empty_like(x), np.empty((m, 1), x.dtype), np.empty((m, 1), x.dtype)
    norm_kernels.layer_norm(*outs, x, w, b, eps)
    return outs


def _ln_back(g, x, mean, rstd, w):
    out = np.empty((x.shape[0] + 2, x.shape[1]), x.dtype)
    norm_kernels.layer_norm_backward(out, g, x, mean, rstd, w)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("shape", [(37, 103), (5, 8), (3, 1), (2, 3000)])
def test_layer_norm_loop_against_float64_and_numpy_form(dtype, affine, shape, numpy_form):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3 + 100).astype(dtype)  # a mean far from 0
    w = rng.standard_normal(shape[1]).astype(dtype) if affine in ("both", "weight") else None
    b = rng.standard_normal(shape[1]).astype(dtype) if affine in ("both", "bias") else None
    got = _ln(x, w, b)
    assert ckernels.function("ln_fwd", np.dtype(dtype)) is not None
    want = _ln_ref(x, w, b)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max()))
    for a, e in zip(got, numpy_form(_ln, x, w, b)):
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_backward_loop_against_float64(dtype, numpy_form):
    rng = np.random.default_rng(2)
    x, g = (rng.standard_normal((45, 77)).astype(dtype) for _ in range(2))
    w = rng.standard_normal(77).astype(dtype)
    _, mean, rstd = _ln(x, w, None)
    xd, gd, wd, md, rd = (a.astype(np.float64) for a in (x, g, w, mean, rstd))
    xhat = (xd - md) * rd
    q = gd * wd
    dx = rd * (q - q.mean(1, keepdims=True) - xhat * (q * xhat).mean(1, keepdims=True))
    want = [dx, (gd * xhat).sum(0), gd.sum(0)]
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for wt in (w, None):
        got = _ln_back(g, x, mean, rstd, wt)
        if wt is None:
            q = gd
            want[0] = rd * (q - q.mean(1, keepdims=True) - xhat * (q * xhat).mean(1, keepdims=True))
        for a, e in zip((got[:45], got[45], got[46]), want):
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol * np.abs(e).max())
        alt = numpy_form(_ln_back, g, x, mean, rstd, wt)
        np.testing.assert_allclose(got, alt, rtol=tol, atol=tol * np.abs(alt).max())


def test_layer_norm_loops_give_the_same_bits_on_any_thread_count(small_split):
    rng = np.random.default_rng(3)
    cases = [((203, 96), np.float32), ((9, 900), np.float64), ((40, 7), np.float32)]
    results = {}
    old = rc.get_num_threads()
    try:
        for n in (1, 2, 3):
            rc.set_num_threads(n)
            out = results[n] = []
            for shape, dt in cases:
                r = np.random.default_rng(4)
                x, g = (r.standard_normal(shape).astype(dt) for _ in range(2))
                w, b = (r.standard_normal(shape[1]).astype(dt) for _ in range(2))
                y, mean, rstd = _ln(x, w, b)
                out += [y, mean, rstd, _ln_back(g, x, mean, rstd, w)]
    finally:
        rc.set_num_threads(old)
    assert any(lo > 0 for lo, _ in small_split)  # the threaded path ran
    for n in (2, 3):
        for got, want in zip(results[n], results[1]):
            np.testing.assert_array_equal(got, want)
    del rng


def test_layer_norm_through_the_front_end_passes_gradcheck(small_split):
    rng = np.random.default_rng(5)
    x = rc.tensor(rng.standard_normal((30, 11)), requires_grad=True)
    w = rc.tensor(rng.standard_normal(11), requires_grad=True)
    b = rc.tensor(rng.standard_normal(11), requires_grad=True)
    assert gradcheck(lambda *t: rc.nn.functional.layer_norm(t[0], (11,), t[1], t[2]), (x, w, b))


def test_layer_norm_loop_leaves_other_operands_to_numpy(monkeypatch):
    calls = []
    for name in ("ln_fwd", "ln_bwd"):
        fn = ckernels.function(name, np.dtype(np.float32))
        assert fn is not None
    real = ckernels.function
    monkeypatch.setattr(ckernels, "function",
                        lambda name, dt: calls.append(name) or real(name, dt))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    # float16, a strided x, a float64 weight with float32 x: the NumPy form
    for xs, w in ((x.astype(np.float16), None), (x[:, ::2], None),
                  (x, np.ones(16, np.float64))):
        m = xs.shape[0]
        outs = (np.empty(xs.shape, xs.dtype), np.empty((m, 1), np.float32 if xs.dtype ==
                np.float16 else xs.dtype), np.empty((m, 1), np.float32 if xs.dtype ==
                np.float16 else xs.dtype))
        assert not ckernels.layer_norm(*outs, xs, w, None, 1e-5)
        norm_kernels.layer_norm(*outs, xs, w, None, 1e-5)
        want = _ln_ref(xs, w, None)[0]
        np.testing.assert_allclose(outs[0], want, rtol=2e-3, atol=2e-3)
    assert "ln_fwd" in calls


def test_no_compiler_means_the_numpy_forms(monkeypatch):
    try:
        with monkeypatch.context() as m:
            m.setenv("RTX_CPU_CC", "0")
            ckernels.reset()
            assert ckernels.function("ln_fwd", np.dtype(np.float32)) is None
            rng = np.random.default_rng(7)
            x = rng.standard_normal((4, 2, 6, 6)).astype(np.float32)
            v, i = np.empty((4, 2, 3, 3), np.float32), np.empty((4, 2, 3, 3), np.int64)
            assert not ckernels.max_pool2d_tiled(v, i, x, 2, 2)
            window_kernels.max_pool2d_tiled(v, i, x, 2, 2)  # NumPy's form
            np.testing.assert_array_equal(v, x.reshape(4, 2, 3, 2, 3, 2).max(axis=(3, 5)))
    finally:
        ckernels.reset()  # (the next call looks for the compiler again)
    assert ckernels.function("ln_fwd", np.dtype(np.float32)) is not None


def _pool(x, kh, kw):
    n, c, h, w = x.shape
    v = np.empty((n, c, h // kh, w // kw), x.dtype)
    i = np.empty(v.shape, np.int64)
    window_kernels.max_pool2d_tiled(v, i, x, kh, kw)
    return v, i


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k", [((3, 4, 8, 8), (2, 2)), ((2, 3, 7, 9), (3, 2)),
                                     ((1, 2, 5, 5), (1, 1)), ((2, 2, 6, 4), (3, 4))])
def test_max_pool_loop_equals_the_numpy_form_with_nan_ties_and_signed_zeros(
        dtype, shape, k, numpy_form):
    rng = np.random.default_rng(8)
    x = rng.integers(-2, 3, shape).astype(dtype)  # many ties
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, flat.size // 9, replace=False)] = np.nan
    flat[rng.choice(flat.size, 4, replace=False)] = -np.inf
    flat[rng.choice(flat.size, 4, replace=False)] = np.inf
    got = _pool(x, *k)
    want = numpy_form(_pool, x, *k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    g = rng.standard_normal(got[0].shape).astype(dtype)
    d1, d2 = np.empty_like(x), np.empty_like(x)
    window_kernels.max_pool2d_tiled_backward(d1, g, got[1])
    numpy_form(window_kernels.max_pool2d_tiled_backward, d2, g, got[1])
    np.testing.assert_array_equal(d1, d2)


def test_max_pool_loop_first_nan_and_first_maximum():
    x = np.array([[[[1, 5, 5, 2], [5, 0, np.nan, np.nan]]]], np.float32)
    v, i = _pool(x, 2, 2)
    np.testing.assert_array_equal(v, [[[[5, np.nan]]]])
    np.testing.assert_array_equal(i, [[[[1, 6]]]])  # the first 5; the first NaN


def test_max_pool_backward_loop_refuses_an_index_outside_its_plane():
    g = np.ones((1, 2, 2, 2), np.float32)
    idx = np.zeros((1, 2, 2, 2), np.int64)
    for bad in (16, -1, 1 << 40):
        idx[0, 1, 1, 0] = bad
        out = np.full((1, 2, 4, 4), 7, np.float32)
        with pytest.raises(IndexError, match="outside"):
            window_kernels.max_pool2d_tiled_backward(out, g, idx)


def test_max_pool_loops_give_the_same_bits_on_any_thread_count(small_split):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 7, 12, 10)).astype(np.float32)
    g = rng.standard_normal((5, 7, 6, 5)).astype(np.float32)
    results = {}
    old = rc.get_num_threads()
    try:
        for n in (1, 2, 3):
            rc.set_num_threads(n)
            v, i = _pool(x, 2, 2)
            d = np.empty_like(x)
            window_kernels.max_pool2d_tiled_backward(d, g, i)
            results[n] = (v, i, d)
    finally:
        rc.set_num_threads(old)
    assert any(lo > 0 for lo, _ in small_split)
    for n in (2, 3):
        for a, e in zip(results[n], results[1]):
            np.testing.assert_array_equal(a, e)


def test_max_pool_through_the_front_end_passes_gradcheck():
    rng = np.random.default_rng(10)
    x = rc.tensor(rng.standard_normal((2, 3, 6, 8)), requires_grad=True)
    assert gradcheck(lambda t: rc.nn.functional.max_pool2d(t, 2), (x,))


def test_read_only_operands_reach_the_loop_by_their_address():
    # a read-only array has no writable buffer to export: its address is taken
    # the slow way, and the loop still runs on it
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    w = rng.standard_normal(40).astype(np.float32)
    want = _ln(x, w, None)
    x.setflags(write=False)
    w.setflags(write=False)
    m = x.shape[0]
    outs = np.empty_like(x), np.empty((m, 1), np.float32), np.empty((m, 1), np.float32)
    assert ckernels.layer_norm(*outs, x, w, None, 1e-5)
    for a, e in zip(outs, want):
        np.testing.assert_array_equal(a, e)
