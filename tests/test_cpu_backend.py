"""rtx_cpu specifics: zero-copy views and numpy(), its large-buffer pool, and
layer_norm's blocks of rows (over threads)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close

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
    small input takes every path of a large one."""
    from rtx_cpu import kernels as K

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


def test_layer_norm_gives_the_same_bits_on_any_thread_count(small_ln_blocks, monkeypatch):
    from rtx_cpu import fused

    submitted = []
    real_pool = fused.pool

    class Spy:
        def submit(self, *a, **k):
            submitted.append(a[-3:])  # (lo, hi, rows)
            return real_pool().submit(*a, **k)

    monkeypatch.setattr(fused, "pool", lambda: Spy())
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
    assert any(lo > 0 for lo, _, _ in submitted)  # the threaded path ran
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
