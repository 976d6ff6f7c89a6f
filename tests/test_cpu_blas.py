"""The cpu backend owns the cores: NumPy's BLAS on one thread, large products split
over the backend's threads (``rtx_cpu.blas``) with the same bits on any number
of threads; and glibc's malloc kept from faulting memory in every step
(``rtx_cpu.memory.tune_malloc``)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import rtxcore as rc

pytest.importorskip("rtx_cpu")
threadpoolctl = pytest.importorskip("threadpoolctl")
from rtx_cpu import blas, cpool, memory  # noqa: E402
from rtx_cpu.kernels import KERNELS  # noqa: E402

THREADS = (1, 2, 4)


def _on_threads(fn):
    old = rc.get_num_threads()
    try:
        out = {}
        for n in THREADS:
            rc.set_num_threads(n)
            out[n] = fn()
        return out
    finally:
        rc.set_num_threads(old)


def test_numpys_blas_is_kept_to_one_thread():
    assert blas.owned()
    mine = [i for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas" and "numpy" in i["filepath"]]
    assert mine and all(i["num_threads"] == 1 for i in mine)
    # rc.set_num_threads sizes the backend's own pool, never BLAS's
    _on_threads(lambda: None)
    assert all(i["num_threads"] == 1 for i in threadpoolctl.threadpool_info()
               if i["user_api"] == "blas" and "numpy" in i["filepath"])


@pytest.mark.parametrize("m,k,n", [(1000, 130, 384), (130, 1000, 700), (4096, 64, 64),
                                   (64, 4096, 64), (1024, 512, 129)])
def test_blocks_cover_the_product_and_depend_on_the_shape_alone(m, k, n):
    plan = blas.blocks(m, k, n)
    if m * k * n < blas.SPLIT_MIN or max(m, n) < 2 * blas.ALIGN:
        assert plan is None  # small, or too few rows and columns to cut
        return
    assert plan is not None
    axis, ranges = plan
    size = (m, n)[axis]
    assert size == max(m, n)
    assert ranges[0][0] == 0 and ranges[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(lo % blas.ALIGN == 0 for lo, _ in ranges)
    assert 2 <= len(ranges) <= blas.MAX_BLOCKS
    assert _on_threads(lambda: blas.blocks(m, k, n)) == {t: plan for t in THREADS}


def _run_matmul(a, b):
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    out = np.empty(shape, np.result_type(a, b))
    KERNELS["matmul"](out, np.broadcast_to(a, shape[:-2] + a.shape[-2:]),
                      np.broadcast_to(b, shape[:-2] + b.shape[-2:]))
    return out


CASES = {
    "rows": lambda r: (r.standard_normal((1000, 160)), r.standard_normal((160, 300))),
    "columns": lambda r: (r.standard_normal((150, 700)), r.standard_normal((700, 400))),
    "transposed": lambda r: (r.standard_normal((640, 900)).T, r.standard_normal((640, 300))),
    "batch": lambda r: (r.standard_normal((6, 64, 32)), r.standard_normal((6, 32, 128))),
    "broadcast weight": lambda r: (r.standard_normal((4, 300, 128)),
                                   r.standard_normal((1, 128, 256))),
}


# the C pool (``cpool``) where a compiler and NumPy's BLAS names are at hand;
# ``fused.pool``'s Python threads otherwise: the same blocks, so the same bits
PATHS = ["c", "python"]


def _use_path(path, monkeypatch):
    """Make matmul take ``path``, spying on what it splits: the list of splits."""
    monkeypatch.setattr(blas, "BATCH_SPLIT_MIN", 1 << 12)
    monkeypatch.setattr(blas, "C_BATCH_SPLIT_MIN", 1 << 12)
    monkeypatch.setattr(blas, "_one_call_is_blocks", lambda *a: False)  # (split on 1 thread too)
    calls = []
    if path == "c":
        if cpool.gemm(np.dtype(np.float64)) is None:
            pytest.skip("no C compiler or no NumPy BLAS names here")
        real_c = blas._c_matmul
        monkeypatch.setattr(blas, "_c_matmul", lambda out, a, b, axis, parts, batched: (
            real_c(out, a, b, axis, parts, batched)
            and (calls.append(out.shape[0] if batched else parts), True)[1]))
        monkeypatch.setattr(blas, "_spread", lambda *a: pytest.fail("the Python pool ran"))
    else:
        monkeypatch.setattr(blas, "_c_matmul", lambda *a: False)
        monkeypatch.setattr(blas, "PY_SPLIT_MIN", 1)
        real = blas._spread
        monkeypatch.setattr(blas, "_spread", lambda run, units, parallel=True: (
            calls.append(units if parallel else 0), real(run, units, parallel))[1])
    return calls


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_matmul_same_bits_on_any_number_of_threads(case, dtype, path, monkeypatch):
    rng = np.random.default_rng(sorted(CASES).index(case))
    a, b = (x.astype(dtype) for x in CASES[case](rng))
    calls = _use_path(path, monkeypatch)
    res = _on_threads(lambda: _run_matmul(a, b))
    assert len(calls) == len(THREADS) and all(u >= 2 for u in calls)  # split, every time
    for t in THREADS[1:]:
        assert np.array_equal(res[t], res[1]), f"{t} threads differ from one"
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(res[1], ref, rtol=tol, atol=tol * np.sqrt(a.shape[-1]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_c_pool_and_the_python_pool_give_the_same_bits(case, dtype):
    if cpool.gemm(np.dtype(dtype)) is None:
        pytest.skip("no C compiler or no NumPy BLAS names here")
    rng = np.random.default_rng(11 + sorted(CASES).index(case))
    a, b = (x.astype(dtype) for x in CASES[case](rng))
    got = {}
    for path in PATHS:
        with pytest.MonkeyPatch.context() as mp:
            calls = _use_path(path, mp)
            got[path] = _run_matmul(a, b)
            assert calls
    assert np.array_equal(got["c"], got["python"])


def _pairs(rng, dtype):
    """Operands the C pool must take as they are, or leave to NumPy: views
    BLAS can read (transposed, with a leading dimension), and ones it can't."""
    big = rng.standard_normal((8, 96, 2, 160)).astype(dtype)
    w = rng.standard_normal((160, 256)).astype(dtype)
    return {
        "row view with a leading dimension": (big[:, :, 0].reshape(8 * 96, 160)[::1], w),
        "transposed weight": (big[0, :, 1], rng.standard_normal((256, 160)).astype(dtype).T),
        "every other column (BLAS can't read it)": (
            rng.standard_normal((192, 2, 160)).astype(dtype)[:, 0, ::2], w[::2]),
        "batch over two unmergeable dims": (big.transpose(2, 0, 1, 3)[:, :4],
                                            rng.standard_normal((2, 4, 160, 64)).astype(dtype)),
        "negative strides": (big[0, ::-1, 0], w[::-1]),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("which", range(5))
def test_views_are_read_as_they_are_or_left_to_numpy(which, dtype, monkeypatch):
    monkeypatch.setattr(blas, "C_BATCH_SPLIT_MIN", 1 << 12)
    name, (a, b) = sorted(_pairs(np.random.default_rng(which), dtype).items())[which]
    res = _on_threads(lambda: _run_matmul(a, b))
    for t in THREADS[1:]:
        assert np.array_equal(res[t], res[1]), (name, t)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(res[2], ref, rtol=tol, atol=tol * np.sqrt(a.shape[-1]))


def test_products_from_several_threads_at_once_give_one_threads_bits():
    import threading

    rng = np.random.default_rng(5)
    pairs = [(rng.standard_normal((256, 128)).astype(np.float32),
              rng.standard_normal((128, 512)).astype(np.float32)) for _ in range(6)]
    want = [_run_matmul(a, b) for a, b in pairs]
    got: list = [None] * len(pairs)
    errors = []

    def work(i):
        try:
            for _ in range(20):
                r = _run_matmul(*pairs[i])
                if not np.array_equal(r, want[i]):
                    errors.append(i)
            got[i] = r
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(pairs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_jobs_of_different_sizes_back_to_back_run_each_part_once():
    # a 2-block product, then a GELU of ~20 blocks on the same C threads, over and
    # over: a worker late from one job must never run a part of the next (a part
    # run twice, or the caller returning before every part is done, shows here)
    from rtx_cpu import erf_kernels

    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)
    x = rng.standard_normal(20 * (1 << 14) + 5).astype(np.float32)
    old = rc.get_num_threads()
    rc.set_num_threads(2)
    try:
        want_p = _run_matmul(a, b)
        want_g = np.empty_like(x)
        erf_kernels.gelu(want_g, x, "none")
        for _ in range(300):
            p = _run_matmul(a, b)
            g = np.empty_like(x)
            erf_kernels.gelu(g, x, "none")
            assert np.array_equal(p, want_p) and np.array_equal(g, want_g)
    finally:
        rc.set_num_threads(old)


_FORK = """
import os, numpy as np, rtxcore as rc
from rtx_cpu.kernels import KERNELS
rc.set_num_threads(2)
a = np.ones((256, 128), np.float32); b = np.ones((128, 512), np.float32)
out = np.empty((256, 512), np.float32)
KERNELS["matmul"](out, a, b)  # the parent's C workers exist now
pid = os.fork()
if pid == 0:  # the child has none: it must make its own, not wait for the parent's
    out[:] = 0
    KERNELS["matmul"](out, a, b)
    os._exit(0 if (out == 128).all() else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_runs_products_on_threads_of_its_own():
    out = subprocess.run([sys.executable, "-c", _FORK], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "0"


def test_an_output_over_an_input_is_one_call(monkeypatch):
    monkeypatch.setattr(blas, "_spread", lambda *a: pytest.fail("split over an aliased out"))
    monkeypatch.setattr(blas, "_c_matmul", lambda *a: pytest.fail("split over an aliased out"))
    rng = np.random.default_rng(3)
    buf = rng.standard_normal((1024, 256))
    a, b = buf.copy(), rng.standard_normal((256, 256))
    KERNELS["matmul"](buf, buf, b)  # out is a: NumPy's own call buffers it
    np.testing.assert_allclose(buf, a @ b, rtol=1e-10, atol=1e-10)


def test_a_large_product_through_the_front_end_matches_numpy():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((512, 256)), rng.standard_normal((256, 512))
    got = (rc.tensor(a) @ rc.tensor(b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-10, atol=1e-10)


def test_a_failing_block_raises_and_waits_for_the_others():
    old = rc.get_num_threads()
    rc.set_num_threads(2)
    seen = []

    def run(lo, hi):
        seen.append((lo, hi))
        if lo == 0:
            raise ValueError("block failed")

    try:
        with pytest.raises(ValueError, match="block failed"):
            blas._spread(run, 4)
    finally:
        rc.set_num_threads(old)
    assert sorted(seen) == [(0, 2), (2, 4)]


# -- malloc -----------------------------------------------------------------------

_FAULTS = """
import resource, numpy as np, rtxcore as rc
from rtx_cpu import memory
rc.zeros(1)
def step():  # a step's activations: live together, then all freed
    live = [np.ones(n * 2**18, np.float32) for n in (2, 4, 4, 8, 8, 16, 2)]  # MB
    del live
for _ in range(3):
    step()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(memory.malloc_tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def _faults(env_extra):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("MALLOC_") or k == "GLIBC_TUNABLES" or k == "RTX_CPU_POOL")}
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-c", _FAULTS], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    tuned, faults = out.stdout.split()
    return tuned == "True", int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux") or memory._glibc() is None,
                    reason="glibc's mallopt")
def test_freed_activations_are_reused_without_page_faults():
    tuned, faults = _faults({})
    assert tuned
    # 10 steps touching 44 MB each: untuned, glibc gives the freed heap back to
    # the OS every step and faults it in again (thousands of faults)
    assert faults < 500, faults


@pytest.mark.skipif(not sys.platform.startswith("linux") or memory._glibc() is None,
                    reason="glibc's mallopt")
@pytest.mark.parametrize("env", [{"RTX_CPU_POOL": "0"}, {"MALLOC_TRIM_THRESHOLD_": "0"}])
def test_malloc_is_left_alone_when_the_user_says_so(env):
    tuned, faults = _faults(env)
    assert not tuned


def test_a_batch_of_small_matrices_stays_with_numpys_loop(monkeypatch):
    """Products of fewer than BATCH_MATRIX_MIN multiply-adds each (a small GPT's
    attention) are NumPy's own loop at any thread count, large as the batch is."""
    calls = []
    real = blas._c_matmul
    monkeypatch.setattr(blas, "_c_matmul", lambda *a: (calls.append(a[0].shape), real(*a))[1])
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 32, 16)).astype(np.float32)
    b = rng.standard_normal((64, 16, 32)).astype(np.float32)
    assert 32 * 16 * 32 < blas.BATCH_MATRIX_MIN and a.shape[0] * 32 * 16 * 32 >= blas.C_BATCH_SPLIT_MIN
    res = _on_threads(lambda: _run_matmul(a, b))
    assert calls == []
    for t in THREADS:
        assert np.array_equal(res[t], np.matmul(a, b))
    big = rng.standard_normal((8, 64, 32)).astype(np.float32), rng.standard_normal((8, 32, 64)).astype(np.float32)
    if cpool.gemm(np.dtype(np.float32)) is not None:  # (131K each: the C threads)
        _run_matmul(*big)
        assert calls


# one thread: NumPy's one call where it gives the blocks' bits (probed per shape)
ONE_CALL = {
    "rows": lambda r: (r.standard_normal((1000, 160)), r.standard_normal((160, 300))),
    "columns": lambda r: (r.standard_normal((64, 192)), r.standard_normal((192, 256))),
    "transposed weight": lambda r: (r.standard_normal((64, 128)),
                                    r.standard_normal((512, 128)).T),
    "transposed input": lambda r: (r.standard_normal((192, 48)).T, r.standard_normal((192, 512))),
    "long reduction": lambda r: (r.standard_normal((48, 1024)), r.standard_normal((1024, 48))),
    "x @ x.T": lambda r: (lambda x: (x, x.T))(r.standard_normal((200, 96))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(ONE_CALL))
def test_one_thread_makes_one_call_only_where_it_gives_the_blocks_bits(case, dtype, monkeypatch):
    if cpool.gemm(np.dtype(dtype)) is None:
        pytest.skip("no C compiler or no NumPy BLAS names here")
    monkeypatch.setattr(blas, "_whole", {})
    calls = []
    real = blas._c_matmul
    monkeypatch.setattr(blas, "_c_matmul", lambda *a: (calls.append(a[0].shape), real(*a))[1])
    rng = np.random.default_rng(sorted(ONE_CALL).index(case) + 40)
    a, b = (x.astype(dtype) for x in ONE_CALL[case](rng))
    if case == "x @ x.T":
        b = a.T  # (the same memory)
    assert blas.blocks(a.shape[0], a.shape[1], b.shape[1]) is not None  # (a split product)
    res = {}
    for t in THREADS:  # 1 first: the probe, then the product
        calls.clear()
        res[t] = _on_threads_once(t, lambda: _run_matmul(a, b))
        if t > 1:
            assert calls, "more threads: the C pool's blocks"
        elif case == "x @ x.T":
            assert calls and not blas._whole  # (NumPy's own routine for it: never probed)
        else:
            probed = list(blas._whole.values())
            assert len(probed) == 1
            assert bool(calls) != probed[0]  # one call exactly where the probe found equal bits
    for t in THREADS[1:]:
        assert np.array_equal(res[t], res[1]), f"{t} threads differ from one"
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(res[1], ref, rtol=tol, atol=tol * np.sqrt(a.shape[1]))


def _on_threads_once(t, fn):
    old = rc.get_num_threads()
    rc.set_num_threads(t)
    try:
        return fn()
    finally:
        rc.set_num_threads(old)


COARSE = {  # (a, b) of a 4-block and of a 3-block plan
    "4 blocks": lambda r: (r.standard_normal((1024, 128)).T, r.standard_normal((1024, 384))),
    "3 blocks": lambda r: (r.standard_normal((64, 192)), r.standard_normal((256, 192)).T),
}


@pytest.mark.parametrize("case", sorted(COARSE))
@pytest.mark.parametrize("probe", ["real", "differs"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_threads_run_two_blocks_only_where_they_give_the_plans_bits(dtype, probe, case,
                                                                        monkeypatch):
    # a plan of 3 or 4 blocks on 2 threads: 2 blocks where one comparison shows the
    # plan's bits, else the plan's; the same bits either way
    if cpool.gemm(np.dtype(dtype)) is None:
        pytest.skip("no C compiler or no NumPy BLAS names here")
    monkeypatch.setattr(blas, "_coarse", {})
    monkeypatch.setattr(blas, "_one_call_is_blocks", lambda *a: False)
    if probe == "differs":
        monkeypatch.setattr(blas, "_probe", lambda *a: False)
    parts = []
    real = blas._c_matmul
    monkeypatch.setattr(blas, "_c_matmul", lambda *a: (parts.append(a[4]), real(*a))[1])
    rng = np.random.default_rng(7)
    a, b = (x.astype(dtype) for x in COARSE[case](rng))
    axis, ranges = blas.blocks(a.shape[0], a.shape[1], b.shape[1])
    plan = len(ranges)
    assert plan == int(case[0])
    res = {}
    for t in THREADS:
        parts.clear()
        res[t] = _on_threads_once(t, lambda: _run_matmul(a, b))
        if 1 < t < plan:
            (probed,) = [v for k, v in blas._coarse.items() if k[-1] == t]
            assert parts == [t if probed else plan]
            assert probe == "real" or not probed  # (the real outcome is BLAS's: either)
        else:
            assert parts == [plan]
    for t in THREADS[1:]:
        assert np.array_equal(res[t], res[1]), f"{t} threads differ from one"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
@pytest.mark.parametrize("shapes", [((2048, 1), (1, 32)), ((3, 4, 1), (3, 1, 6)),
                                    ((2, 5, 1), (1, 7)), ((0, 1), (1, 3))])
def test_an_outer_product_is_one_multiply_an_element(shapes, dtype):
    rng = np.random.default_rng(3)
    sa, sb = shapes
    a = (rng.standard_normal(sa) * 3).astype(dtype)
    b = (rng.standard_normal(sb) * 3).astype(dtype)
    if a.size:
        a.flat[0] = 0.0
        a.flat[-1] = np.inf if np.dtype(dtype).kind == "f" else 7
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    got = _run_matmul(a, b)
    assert got.shape == shape
    with np.errstate(invalid="ignore"):
        want = np.matmul(np.broadcast_to(a, shape[:-2] + a.shape[-2:]),
                         np.broadcast_to(b, shape[:-2] + b.shape[-2:]))
    np.testing.assert_array_equal(got, want)


def test_an_outer_product_of_inf_and_zero_warns_nothing():
    # PyTorch computes inf * 0 = nan silently; so does every rtx_cpu kernel, even
    # with warnings made errors (-W error: the backend's own filters come first)
    import subprocess
    import sys

    code = ("import numpy as np, rtxcore as rc\n"
            "r = (rc.tensor([[float('inf')], [1e30]]) @ rc.tensor([[0.0, 1e30]])).numpy()\n"
            "assert np.isnan(r[0, 0]) and np.isinf(r[0, 1]) and r[1, 0] == 0, r\n")
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr
