"""rtx_cpu specifics: zero-copy views and numpy(), and its large-buffer pool."""

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
