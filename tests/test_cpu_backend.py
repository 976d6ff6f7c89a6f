"""rtx_cpu specifics: zero-copy views and numpy(), its large-buffer pool, and
layer_norm's blocks of rows (over threads)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close

pytest.importorskip("rtx_cpu", reason="rtx_cpu (the NumPy backend) is not installed")
from rtx_cpu import memory


@pytest.fixture(autouse=True)
def small_pool(monkeypatch):
    """Pool from 256 KiB in these tests, so they need no 32 MiB buffers."""
    monkeypatch.setattr(memory, "POOL_MIN_BYTES", 256 * 1024)


def test_numpy_shares_memory_with_views():
    x = rc.arange(12, dtype=rc.float32).reshape(3, 4)
    v = x.t()[1:]
    arr = v.numpy()
    arr[0, 0] = 100.0
    assert x[0, 1].item() == 100.0
    assert np.shares_memory(arr, x.numpy())


def test_pool_reuses_large_buffers_and_never_while_alive():
    n = memory.POOL_MIN_BYTES // 4 * 2  # float32 elements: above the pool threshold
    memory.empty_cache()
    a = rc.ones(n)
    b = a + 1
    b_addr = b.numpy().ctypes.data
    del b
    gc.collect()
    assert memory.kept_bytes() >= n * 4
    hits = memory.stats["hits"]
    c = a * 3  # same size: should reuse b's buffer
    assert memory.stats["hits"] == hits + 1
    assert c.numpy().ctypes.data == b_addr
    d = a * 5  # c is alive: must get different memory
    assert d.numpy().ctypes.data != c.numpy().ctypes.data
    assert_close(c, np.full(n, 3, np.float32))
    assert_close(d, np.full(n, 5, np.float32))
    # a view keeps the buffer alive: its memory is not handed out again
    view = (a + 7)[::2]
    gc.collect()
    e = a * 9
    assert not np.shares_memory(e.numpy(), view.numpy())
    assert_close(view, np.full(n // 2, 8, np.float32))
    assert memory.empty_cache() >= 0 and memory.kept_bytes() == 0


def test_small_buffers_bypass_the_pool():
    hits, misses = memory.stats["hits"], memory.stats["misses"]
    for _ in range(10):
        rc.ones(16) + 1
    assert (memory.stats["hits"], memory.stats["misses"]) == (hits, misses)


@pytest.mark.parametrize("make_view", [
    lambda t: t[1:],
    lambda t: t.reshape(512, -1).T,
    lambda t: t.reshape(-1, 2).sum(1),
    lambda t: t,
])
def test_pooled_memory_is_not_reused_while_numpy_views_hold_it(make_view):
    n = memory.POOL_MIN_BYTES  # float32: 4x the pool threshold
    held = make_view(rc.ones(n)).numpy()
    expected = held.copy()
    gc.collect()
    for _ in range(3):
        rc.full((n,), 7.0)
        rc.full((n // 2,), 5.0)
    np.testing.assert_array_equal(held, expected)


# -- layer_norm: blocks of rows, spread over threads ------------------------------------------


@pytest.fixture
def small_ln_blocks(monkeypatch):
    """Blocks of 8 rows of 96 (tiles of 4 rows), threads from 4096 elements: a
    small input takes every path of a large one. The NumPy form alone (the C
    loops of ``ckernels`` are tested in test_cpu_ckernels.py)."""
    from rtx_cpu import ckernels
    from rtx_cpu import norm_kernels as K

    monkeypatch.setattr(ckernels, "function", lambda name, dtype: None)

    monkeypatch.setattr(K, "_LN_BLOCK", 8 * 96 + 50)  # 8 rows of 96
    monkeypatch.setattr(K, "_LN_TILE", 4 * 96 - 50)  # tiles of 4 rows
    monkeypatch.setattr(K, "_LN_SMALL", 1000)
    monkeypatch.setattr(K, "_LN_PARALLEL_MIN", 4096)
    return K


def _ln_numpy(x, w, b, eps=1e-5):
    """The unblocked whole-array NumPy forward: (y, mean, rstd)."""
    mu = x.mean(1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(1, keepdims=True) + eps)
    y = xc * rstd
    return (y if w is None else y * w) + (0 if b is None else b), mu, rstd


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_in_blocks_equals_the_unblocked_numpy(small_ln_blocks, affine):
    # 207 rows = 25 blocks of 8 and one of 7 (a whole tile of 4 and 3 rows beside it)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((207, 96)) * 3 + 20).astype(np.float32)  # (an offset mean)
    w = rng.standard_normal(96).astype(np.float32) if affine else None
    b = rng.standard_normal(96).astype(np.float32) if affine else None
    y = rc.nn.functional.layer_norm(rc.from_numpy(x), (96,), None if w is None else
                                    rc.from_numpy(w), None if b is None else rc.from_numpy(b))
    want, mu, rstd = _ln_numpy(x, w, b)
    exact = _ln_numpy(x.astype(np.float64), w, b)[0]
    scale = np.abs(exact).max()
    eps32 = np.finfo(np.float32).eps
    got = y.numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * eps32 * scale)
    # no further from float64 than the whole-array float32 NumPy, a few roundings on
    assert np.abs(got - exact).max() <= np.abs(want - exact).max() + 2 * eps32 * scale
    # the statistics, as saved for the backward: the kernel's own outputs
    out, m, r = np.empty_like(x), np.empty((207, 1), np.float32), np.empty((207, 1), np.float32)
    small_ln_blocks.layer_norm(out, m, r, x, w, b, 1e-5)
    np.testing.assert_array_equal(out, got)
    std = 1 / rstd
    np.testing.assert_allclose(m, mu, rtol=0, atol=float((4 * eps32 * np.abs(mu)).max()))
    np.testing.assert_allclose(r, rstd, rtol=4 * eps32)
    assert np.abs(m - mu).max() < 1e-5 * std.min()


@pytest.mark.parametrize("x_dt,out_dt", [(np.float16, np.float16), (np.float16, np.float32),
                                         (np.float32, np.float64), (np.float64, np.float64)])
def test_layer_norm_in_blocks_other_dtypes(small_ln_blocks, x_dt, out_dt):
    # float16 widens block by block; an output of another dtype goes through scratch
    rng = np.random.default_rng(4)
    x = rng.standard_normal((99, 96)).astype(x_dt)
    w, b = (rng.standard_normal(96).astype(x_dt) for _ in range(2))
    cdt = np.float32 if x_dt == np.float16 else x_dt
    want = [a.astype(out_dt) for a in _ln_numpy(x.astype(cdt), w.astype(cdt), b.astype(cdt))]
    got = [np.full((99, 96), np.nan, out_dt), np.full((99, 1), np.nan, out_dt),
           np.full((99, 1), np.nan, out_dt)]
    small_ln_blocks.layer_norm(*got, x, w, b, 1e-5)
    tol = 4 * np.finfo(np.float16 if np.float16 in (x_dt, out_dt) else cdt).eps
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol * np.abs(e).max())


def test_layer_norm_gives_the_same_bits_on_any_thread_count(small_ln_blocks, submitted,
                                                           monkeypatch):
    rng = np.random.default_rng(5)
    cases = [((203, 96), np.float32), ((9, 9000), np.float64)]  # rows of a block each, wide
    args = [(rng.standard_normal(s).astype(dt), rng.standard_normal(s[1]).astype(dt),
             rng.standard_normal(s[1]).astype(dt)) for s, dt in cases]
    results = {}
    old = rc.get_num_threads()
    try:
        for n in (1, 2, 3):
            rc.set_num_threads(n)
            results[n] = []
            for x, w, b in args:
                outs = [np.empty_like(x), np.empty((len(x), 1), x.dtype),
                        np.empty((len(x), 1), x.dtype)]
                small_ln_blocks.layer_norm(*outs, x, w, b, 1e-5)
                results[n].append(outs)
    finally:
        rc.set_num_threads(old)
    assert any(lo > 0 for lo, _ in submitted)  # the threaded path ran
    for n in (2, 3):
        for got, want in zip(results[n], results[1]):
            for g, e in zip(got, want):
                np.testing.assert_array_equal(g, e)
    # and the rows' results do not depend on the blocks they fell in
    monkeypatch.setattr(small_ln_blocks, "_LN_BLOCK", 1 << 16)
    for (x, w, b), want in zip(args, results[1]):
        outs = [np.empty_like(x), np.empty((len(x), 1), x.dtype), np.empty((len(x), 1), x.dtype)]
        small_ln_blocks.layer_norm(*outs, x, w, b, 1e-5)
        for g, e in zip(outs, want):
            np.testing.assert_array_equal(g, e)


# -- layer_norm_backward: the same blocks; the parameters' sums in block order ----------------


def _ln_grads_numpy(x, w, g, eps=1e-5):
    """The closed-form backward, whole-array (in x's dtype): (dx, dw, db)."""
    mu = x.mean(1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(1, keepdims=True) + eps)
    xhat = xc * rstd
    gw = g if w is None else g * w
    dx = (gw - gw.mean(1, keepdims=True) - xhat * (gw * xhat).mean(1, keepdims=True)) * rstd
    return dx, (g * xhat).sum(0), g.sum(0)


def _spy_kernel(monkeypatch, op):
    """Count the calls of the cpu device's kernel ``op``."""
    from rtxcore.ops.core import ready_device

    dev = ready_device("cpu")
    real, calls = dev.kernels[op], []

    def spy(*a):
        calls.append(a[0].shape)
        return real(*a)

    monkeypatch.setitem(dev.kernels, op, spy)
    return calls


AFFINE = ["weight+bias", "weight", "bias", "none"]


@pytest.mark.parametrize("affine", AFFINE)
def test_layer_norm_backward_in_blocks_passes_gradcheck(small_ln_blocks, monkeypatch, affine):
    # 45 x 96: 5 blocks of 8 rows and one of 5, over threads (from 4096 elements)
    from rtxcore.autograd import gradcheck

    calls = _spy_kernel(monkeypatch, "layer_norm_backward")
    rng = np.random.default_rng(6)
    x = rc.tensor(rng.standard_normal((3, 15, 96)) * 2 + 1, requires_grad=True)
    w = rc.tensor(rng.standard_normal(96), requires_grad=True) if "weight" in affine else None
    b = rc.tensor(rng.standard_normal(96), requires_grad=True) if "bias" in affine else None
    proj = rc.tensor(rng.standard_normal((3, 15, 96)))
    ins = tuple(t for t in (x, w, b) if t is not None)

    def f(*ts):
        it = iter(ts[1:])
        ww = next(it) if w is not None else None
        bb = next(it) if b is not None else None
        return (rc.nn.functional.layer_norm(ts[0], (96,), ww, bb) * proj).sum()

    assert gradcheck(f, ins)
    # the kernel computed the gradients, with the parameters' rows where they are wanted
    assert calls and set(calls) == {(45 + 2, 96) if w is not None or b is not None else (45, 96)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", AFFINE)
def test_layer_norm_backward_in_blocks_matches_torch(small_ln_blocks, monkeypatch, dtype, affine):
    torch = pytest.importorskip("torch")
    calls = _spy_kernel(monkeypatch, "layer_norm_backward")
    rng = np.random.default_rng(7)
    # 207 rows: 25 blocks of 8 and one of 7; 2 x 3 x 7 rows of 12 x 8 (one block, tiles)
    for shape, ns in (((207, 96), (96,)), ((2, 3, 7, 12, 8), (12, 8)), ((5, 33), (33,))):
        x = (rng.standard_normal(shape) * 3 + 20).astype(dtype)
        g = rng.standard_normal(shape).astype(dtype)
        w = rng.standard_normal(ns).astype(dtype) if "weight" in affine else None
        b = rng.standard_normal(ns).astype(dtype) if "bias" in affine else None
        ts = [None if a is None else rc.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]
        tt = [None if a is None else torch.from_numpy(a.copy()).requires_grad_()
              for a in (x, w, b)]
        rc.nn.functional.layer_norm(ts[0], ns, ts[1], ts[2]).backward(rc.from_numpy(g))
        torch.nn.functional.layer_norm(tt[0], ns, tt[1], tt[2]).backward(torch.from_numpy(g))
        tol = 2e-4 if dtype == np.float32 else 1e-10
        for a, ta in zip(ts, tt):
            if a is not None:
                want = ta.grad.numpy()
                assert a.grad.dtype == a.dtype and a.grad.shape == a.shape
                np.testing.assert_allclose(a.grad.numpy(), want, rtol=tol,
                                           atol=tol * np.abs(want).max())
    assert len(calls) == 3


def test_layer_norm_backward_kernel_equals_the_unblocked_numpy(small_ln_blocks):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((207, 96)) * 3 + 20).astype(np.float32)
    g = rng.standard_normal((207, 96)).astype(np.float32)
    w = rng.standard_normal(96).astype(np.float32)
    mean = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    eps32 = np.finfo(np.float32).eps
    for weight in (w, None):
        exact = _ln_grads_numpy(x.astype(np.float64), weight, g.astype(np.float64))
        want = _ln_grads_numpy(x, weight, g)
        out = np.full((209, 96), np.nan, np.float32)
        small_ln_blocks.layer_norm_backward(out, g, x, mean, rstd, weight)
        dx_only = np.full((207, 96), np.nan, np.float32)
        small_ln_blocks.layer_norm_backward(dx_only, g, x, mean, rstd, weight)
        np.testing.assert_array_equal(dx_only, out[:207])
        for got, w32, e in zip((out[:207], out[207], out[208]), want, exact):
            scale = np.abs(e).max()
            # (float32 statistics: dx's error grows with the row's mean / std)
            np.testing.assert_allclose(got, e, rtol=0, atol=400 * eps32 * scale)
            assert np.abs(got - e).max() <= np.abs(w32 - e).max() + 8 * eps32 * scale


@pytest.mark.parametrize("x_dt,out_dt", [(np.float16, np.float16), (np.float16, np.float32),
                                         (np.float32, np.float64), (np.float64, np.float64)])
def test_layer_norm_backward_in_blocks_other_dtypes(small_ln_blocks, x_dt, out_dt):
    # float16 widens block by block (g too); an output of another dtype goes through scratch
    rng = np.random.default_rng(9)
    x, g = (rng.standard_normal((99, 96)).astype(x_dt) for _ in range(2))
    w = rng.standard_normal(96).astype(x_dt)
    cdt = np.float32 if x_dt == np.float16 else x_dt
    mean = x.astype(cdt).mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x.astype(cdt) - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    want = _ln_grads_numpy(x.astype(np.float64), w.astype(np.float64), g.astype(np.float64))
    out = np.full((101, 96), np.nan, out_dt)
    small_ln_blocks.layer_norm_backward(out, g, x, mean.astype(x_dt), rstd.astype(x_dt), w)
    tol = 8 * np.finfo(np.float16 if np.float16 in (x_dt, out_dt) else cdt).eps
    for got, e in zip((out[:99], out[99], out[100]), want):
        np.testing.assert_allclose(got, e, rtol=tol, atol=tol * np.abs(e).max())


def test_layer_norm_backward_takes_a_strided_g(small_ln_blocks):
    # .sum()'s gradient is a broadcast view (stride 0), a transposed g any strides
    rng = np.random.default_rng(10)
    x = rng.standard_normal((50, 96))
    w = rng.standard_normal(96)
    mean = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(1, keepdims=True) + 1e-5)
    for g in (np.broadcast_to(np.float64(1.5), x.shape), rng.standard_normal((96, 50)).T):
        out = np.empty((52, 96))
        small_ln_blocks.layer_norm_backward(out, g, x, mean, rstd, w)
        for got, e in zip((out[:50], out[50], out[51]), _ln_grads_numpy(x, w, np.array(g))):
            np.testing.assert_allclose(got, e, rtol=1e-12, atol=1e-12 * np.abs(e).max())


def test_layer_norm_backward_gives_the_same_bits_on_any_thread_count(small_ln_blocks,
                                                                    submitted):
    rng = np.random.default_rng(11)
    cases = [((203, 96), np.float32), ((9, 9000), np.float64), ((77, 96), np.float16)]
    args = []
    for s, dt in cases:
        x, g = (rng.standard_normal(s).astype(dt) for _ in range(2))
        mean = x.mean(1, keepdims=True, dtype=np.float64).astype(dt)
        rstd = (1 / x.std(1, keepdims=True, dtype=np.float64)).astype(dt)
        args.append((g, x, mean, rstd, rng.standard_normal(s[1]).astype(dt)))
    results = {}
    old = rc.get_num_threads()
    try:
        for n in (1, 2, 3):
            rc.set_num_threads(n)
            results[n] = []
            for a in args:
                for w in (a[-1], None):
                    out = np.empty((a[1].shape[0] + 2, a[1].shape[1]), a[1].dtype)
                    small_ln_blocks.layer_norm_backward(out, *a[:-1], w)
                    results[n].append(out)
    finally:
        rc.set_num_threads(old)
    assert any(k0 > 0 for k0, _ in submitted)  # the threaded path ran
    for n in (2, 3):
        for got, want in zip(results[n], results[1]):
            np.testing.assert_array_equal(got, want)


def test_layer_norm_backward_kernel_only_when_not_recording(monkeypatch):
    # create_graph: the core's composite (it differentiates again); else the kernel
    from rtxcore.autograd import gradgradcheck

    calls = _spy_kernel(monkeypatch, "layer_norm_backward")
    rng = np.random.default_rng(12)
    x = rc.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    w = rc.tensor(rng.standard_normal(6), requires_grad=True)
    b = rc.tensor(rng.standard_normal(6), requires_grad=True)
    y = rc.nn.functional.layer_norm(x, (6,), w, b)
    g = rc.tensor(rng.standard_normal((4, 6)))
    first = rc.autograd.grad(y, (x, w, b), g, retain_graph=True)
    assert len(calls) == 1
    again = rc.autograd.grad(y, (x, w, b), g, create_graph=True)
    assert len(calls) == 1 and again[0].requires_grad and again[1].requires_grad
    for a, e in zip(first, again):
        np.testing.assert_allclose(a.numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert gradgradcheck(lambda *ts: rc.nn.functional.layer_norm(ts[0], (6,), ts[1], ts[2]),
                         (x, w, b))


def test_layer_norm_backward_at_the_default_blocks(monkeypatch):
    # 1100 rows of 520: blocks of 1008 rows (whole tiles of 16), the second of 92, over
    # two threads; against PyTorch, and the same bits on one thread
    torch = pytest.importorskip("torch")
    calls = _spy_kernel(monkeypatch, "layer_norm_backward")
    rng = np.random.default_rng(13)
    x, g = (rng.standard_normal((1100, 520)).astype(np.float32) for _ in range(2))
    w, b = (rng.standard_normal(520).astype(np.float32) for _ in range(2))
    tt = [torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]
    torch.nn.functional.layer_norm(tt[0], (520,), tt[1], tt[2]).backward(torch.from_numpy(g))
    grads = {}
    old = rc.get_num_threads()
    try:
        for n in (1, 2):
            rc.set_num_threads(n)
            ts = [rc.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]
            rc.nn.functional.layer_norm(ts[0], (520,), ts[1], ts[2]).backward(rc.from_numpy(g))
            grads[n] = [t.grad.numpy() for t in ts]
    finally:
        rc.set_num_threads(old)
    assert len(calls) == 2
    for got, ta in zip(grads[2], tt):
        want = ta.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    for a, e in zip(grads[2], grads[1]):
        np.testing.assert_array_equal(a, e)
