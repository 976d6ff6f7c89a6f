"""opencl's prepared launches: an op's kernel, work sizes and constant arguments
worked out once per signature (dtypes, shapes, strides) and reused, with each
call's buffers, offsets and scalars set afresh; per thread; cleared with the
kernel cache. Values against NumPy, bit for bit where the op is exact."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rtxcore as rc

R = pytest.importorskip("rtx_opencl.runtime")
L = pytest.importorskip("rtx_opencl.launch")

pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")


def _t(a: np.ndarray) -> rc.Tensor:
    return rc.tensor(a, device="opencl")


def _plans(kind: str) -> list:
    """This thread's cached launchers whose key starts with ``kind`` ("add plan", ...)."""
    return [k for k in R.device(0).programs if isinstance(k, tuple) and k and k[0] == kind]


def test_a_second_call_reuses_the_launch_without_planning_again(monkeypatch) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7), dtype=np.float32), rng.standard_normal((5, 7), dtype=np.float32)
    x, y = _t(a), _t(b)
    np.testing.assert_array_equal((x + y).numpy(), a + b)
    n_plans = len(_plans("add plan"))

    def no(*args, **kw):
        raise AssertionError("planned again")

    # the layout, the kernel lookup and the launcher are the first call's
    monkeypatch.setattr(L, "coalesce", no)
    monkeypatch.setattr(L, "prepare", no)
    monkeypatch.setattr(L, "kernel", no)
    for _ in range(3):
        c, d = rng.standard_normal((5, 7), dtype=np.float32), rng.standard_normal((5, 7), dtype=np.float32)
        np.testing.assert_array_equal((_t(c) + _t(d)).numpy(), c + d)
    assert len(_plans("add plan")) == n_plans


def test_new_offsets_buffers_and_scalars_each_call() -> None:
    # one signature (a row of a (6, 9) float32 tensor), different rows: offsets change
    a = np.arange(54, dtype=np.float32).reshape(6, 9)
    x = _t(a)
    for i in range(6):
        np.testing.assert_array_equal((x[i] * float(i + 1)).numpy(), a[i] * (i + 1))
        np.testing.assert_array_equal((x[i] - x[5 - i]).numpy(), a[i] - a[5 - i])
        np.testing.assert_array_equal(x[i].sum().numpy(), a[i].sum())
        np.testing.assert_allclose(x[:, i].exp().numpy(), np.exp(a[:, i]), rtol=1e-6)


def test_one_kernel_two_signatures_interleaved() -> None:
    # strided add of rank 2: (4, 6) transposed views and a broadcast row share the
    # kernel object, each with its own strides and sizes; alternate them
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 4), dtype=np.float32)
    b = rng.standard_normal((4, 6), dtype=np.float32)
    row = rng.standard_normal(6, dtype=np.float32)
    x, y, r = _t(a), _t(b), _t(row)
    for _ in range(3):
        np.testing.assert_array_equal((x.t() + y).numpy(), a.T + b)
        np.testing.assert_array_equal((y + r).numpy(), b + row)
        np.testing.assert_array_equal((x.t() + y).numpy(), a.T + b)


@pytest.mark.parametrize("n", [1, 7, 8, 255, 256, 257, 1000, 8 * 300 + 3])
def test_sizes_around_work_group_and_vector_widths(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n + 5, dtype=np.float32)
    b = rng.standard_normal(n + 5, dtype=np.float32)
    x, y = _t(a), _t(b)
    for off in (0, 3, 5):  # the vector kernel and its tail at several offsets
        np.testing.assert_array_equal((x[off:off + n] + y[:n]).numpy(), a[off:off + n] + b[:n])
        np.testing.assert_array_equal(x[off:off + n].neg().numpy(), -a[off:off + n])
    i = np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal((_t(i) * 3).numpy(), i * 3)


def test_scalar_and_tensor_operands_are_different_signatures() -> None:
    a = np.array([1.5, -2.0, 3.25], np.float32)
    x = _t(a)
    np.testing.assert_array_equal((x * 2.0).numpy(), a * 2)
    np.testing.assert_array_equal((2.0 * x).numpy(), a * 2)
    np.testing.assert_array_equal((x * x).numpy(), a * a)
    np.testing.assert_array_equal((x * 3.0).numpy(), a * 3)
    np.testing.assert_array_equal((x > 0.0).numpy(), a > 0)
    np.testing.assert_array_equal((x > x * 0.5).numpy(), a > a * 0.5)
    xi = _t(np.array([3, -4, 5], np.int32))
    np.testing.assert_array_equal((xi * 2).numpy(), np.array([6, -8, 10], np.int32))
    np.testing.assert_array_equal(xi.to(rc.float32).numpy(), np.array([3, -4, 5], np.float32))


def test_reductions_in_one_and_two_launches_repeat() -> None:
    rng = np.random.default_rng(2)
    # few outputs of many elements: partial results, then a second launch
    long = rng.standard_normal((2, 1 << 16), dtype=np.float32)
    cols = rng.standard_normal((100, 70), dtype=np.float32)
    for _ in range(2):
        for a, axis in ((long, 1), (long, None), (cols, 0), (cols, 1)):
            x = _t(a)
            got = (x.sum() if axis is None else x.sum(axis)).numpy()
            want = a.astype(np.float64).sum(axis)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
        x = _t(cols)
        np.testing.assert_array_equal(x.max(0).values.numpy(), cols.max(0))
        np.testing.assert_array_equal(x.argmin(1).numpy(), cols.argmin(1))


def test_matmul_paths_repeat_with_new_data() -> None:
    rng = np.random.default_rng(3)
    for (n, k, m) in ((3, 5, 4), (64, 192, 256), (40, 300, 600)):  # b read in place; packed
        for _ in range(2):
            a = rng.standard_normal((n, k), dtype=np.float32)
            b = rng.standard_normal((k, m), dtype=np.float32)
            want = a.astype(np.float64) @ b.astype(np.float64)
            np.testing.assert_allclose((_t(a) @ _t(b)).numpy(), want, rtol=1e-4, atol=1e-4)
            bt = _t(np.ascontiguousarray(b.T)).t()  # b with transposed strides
            np.testing.assert_allclose((_t(a) @ bt).numpy(), want, rtol=1e-4, atol=1e-4)
    # batched, with a broadcast b, and float16 (the one-dot-product kernel)
    a = rng.standard_normal((3, 4, 5), dtype=np.float32)
    b = rng.standard_normal((5, 6), dtype=np.float32)
    np.testing.assert_allclose((_t(a) @ _t(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5)
    h = rng.standard_normal((2, 3, 4, 5)).astype(np.float16)
    w = rng.standard_normal((5, 2)).astype(np.float16)
    np.testing.assert_allclose((_t(h) @ _t(w)).numpy().astype(np.float32),
                               h.astype(np.float32) @ w.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_indexing_repeats() -> None:
    rng = np.random.default_rng(4)
    table = rng.standard_normal((27, 6), dtype=np.float32)
    t = _t(table)
    for _ in range(2):
        idx = rng.integers(0, 27, (5, 3))
        np.testing.assert_array_equal(t[_t(idx)].numpy(), table[idx])
        g = rng.integers(0, 6, (27, 2))
        np.testing.assert_array_equal(rc.gather(t, 1, _t(g)).numpy(), np.take_along_axis(table, g, 1))
        where = rng.integers(0, 4, (3, 6))
        src = rng.standard_normal((3, 6), dtype=np.float32)
        got = rc.zeros(4, 6, device="opencl").scatter_add(0, _t(where), _t(src))
        want = np.zeros((4, 6), np.float32)
        for i in range(3):  # (in order, as the kernel adds)
            for j in range(6):
                want[where[i, j], j] += src[i, j]
        np.testing.assert_array_equal(got.numpy(), want)


def test_each_thread_has_its_own_launchers() -> None:
    # a launcher sets its kernel's arguments then enqueues: two threads sharing one
    # kernel object could run each other's; each thread prepares its own
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(300, dtype=np.float32) for _ in range(4)]
    errors: list[BaseException] = []

    def work(a: np.ndarray) -> None:
        try:
            x = _t(a)
            for _ in range(50):
                np.testing.assert_array_equal((x * x + x).numpy(), a * a + a)
        except BaseException as exc:  # (reported in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(a,)) for a in data]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_clearing_the_kernel_cache_clears_the_launchers() -> None:
    x = _t(np.ones(4, np.float32))
    (x + x).numpy()
    assert _plans("add plan")
    d = R.device(0)
    saved = dict(d.programs)
    try:
        d.programs.clear()
        assert not _plans("add plan")
        np.testing.assert_array_equal((x + x).numpy(), np.full(4, 2, np.float32))
        assert _plans("add plan")
    finally:
        d.programs.clear()
        d.programs.update(saved)


def test_prepare_without_the_fast_setters_runs_through_the_invoker(monkeypatch) -> None:
    # a kernel bound without argument characters: PyOpenCL's k(queue, ...) instead
    d = R.device(0)
    x = _t(np.arange(10, dtype=np.float32))
    out = _t(np.zeros(10, np.float32))
    (x + x).numpy()  # (the float32 add kernel of contiguous operands, compiled)
    k = L.kernel(d, ("add", "float32", "float32", "float32", "ccc", 0), lambda: None)
    plain = R.cl.Kernel(k.program, k.function_name)
    plain.set_scalar_arg_dtypes([None, np.int64] * 3)
    run = L.prepare(d, [(plain, [L.view(0), L.view(1), L.view(2)], L.ranges(10))])
    run(out._h, x._h, x._h)
    np.testing.assert_array_equal(out.numpy(), np.arange(10, dtype=np.float32) * 2)
    # and the fast path packs characters PyOpenCL doesn't itself with struct
    run = L.prepare(d, [(k, [L.view(0), L.view(1), L.view(2)], L.ranges(10))])
    monkeypatch.setattr(k, "_rtx_chars", (None, "q", None, "q", None, "q"), raising=False)
    run2 = L.prepare(d, [(k, [L.view(0), L.view(1), L.view(2)], L.ranges(10))])
    x3 = _t(np.full(10, 3, np.float32))
    run(out._h, x3._h, x._h)
    np.testing.assert_array_equal(out.numpy(), np.arange(10, dtype=np.float32) + 3)
    run2(out._h, x._h, x3._h)
    np.testing.assert_array_equal(out.numpy(), np.arange(10, dtype=np.float32) + 3)


def test_a_wrong_argument_count_is_refused() -> None:
    d = R.device(0)
    x = _t(np.arange(4, dtype=np.float32))
    (x + x).numpy()
    k = L.kernel(d, ("add", "float32", "float32", "float32", "ccc", 0), lambda: None)
    with pytest.raises(TypeError, match="arguments"):
        L.prepare(d, [(k, [L.view(0), L.view(1)], L.ranges(4))])


def test_ranges_match_enqueue() -> None:
    assert L.ranges(5) == [((5,), (1,), None)]
    assert L.ranges(512) == [((512,), (256,), None)]
    assert L.ranges(600) == [((512,), (256,), None), ((88,), (1,), (512,))]
    assert L.ranges(3, 40) == [((3,), (1,), (40,))]


# -- strided layouts launched by rows ---------------------------------------------------


def test_row_ranges_and_split_last() -> None:
    # a work-group is the whole last dim times a power of two of rows (within LOCAL)
    assert L.row_ranges([6, 32], 4096) == [((32, 6), (32, 2), None)]
    assert L.row_ranges([5, 7, 64], 4096) == [((64, 35), (64, 1), None)]
    assert L.row_ranges([1024, 16], 4096) == [((16, 1024), (16, 16), None)]
    assert L.row_ranges([9, 5], 4096) is None  # last dim under 8: one linear id
    assert L.row_ranges([2, 5000], 4096) is None  # over the device's work-group
    # a last dim longer than a work-group: cut at its largest divisor <= LOCAL
    assert L.split_last([3, 9216], [[1, 27648], [9216, 1]]) == \
        ([3, 36, 256], [[1, 27648 * 256, 27648], [9216, 256, 1]])
    assert L.split_last([3, 1009], [[1, 3], [1009, 1]]) == ([3, 1009], [[1, 3], [1009, 1]])
    assert L.split_last([4000], [[2]]) == ([4000], [[2]])  # rank 1: no index math


@pytest.mark.parametrize("shape, perm", [
    ((16, 4, 6, 6), (1, 0, 3, 2)),       # last dim 6: the linear launch
    ((5, 3, 40), (1, 0, 2)),             # rows of 40
    ((2, 3, 1000), (1, 0, 2)),           # 1000 = 250 x 4: split, then rows
    ((3, 2, 1009), (1, 0, 2)),           # a prime over LOCAL: the linear launch
    ((4, 3, 2, 5, 16), (4, 2, 0, 3, 1)),
    ((7, 9, 12), (2, 0, 1)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_])
def test_strided_copies_and_arithmetic_launched_by_rows_match_numpy(shape, perm, dtype) -> None:
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(shape) * 5).astype(dtype)
    x = _t(a)
    np.testing.assert_array_equal(x.permute(*perm).contiguous().numpy(),
                                  np.ascontiguousarray(a.transpose(perm)))
    if dtype != np.bool_:
        b = (rng.standard_normal(shape[-1]) * 5).astype(dtype)  # broadcast: stride 0 rows
        got = (x.permute(*perm)[..., ::1] + _t(a.transpose(perm).copy())).numpy()
        np.testing.assert_array_equal(got, a.transpose(perm) + a.transpose(perm))
        view = x[..., 1:]  # an offset and a gap between rows
        np.testing.assert_array_equal((view * _t(b[1:])).numpy(), a[..., 1:] * b[1:])


def test_an_im2col_window_view_copies_by_rows() -> None:
    from rtxcore.ops.core import as_view

    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 4, 10, 10)).astype(np.float32)
    x = _t(a)
    s = x._strides
    shape = (4, 3, 3, 3, 8, 8)  # (C, kh, kw, N, OH, OW) over the unpadded input
    strides = (s[1], s[2], s[3], s[0], s[2], s[3])
    got = as_view(x, shape, strides, 0).contiguous().numpy()
    want = np.lib.stride_tricks.as_strided(a, shape, [st * 4 for st in strides])
    np.testing.assert_array_equal(got, want)
    rows = [k for k in R.device(0).programs if isinstance(k, tuple) and "rows" in k]
    assert rows  # the launch was the 2-D one
