"""What is particular to the opencl backend: availability messages, device
facts, memory errors, build errors, the program cache, seeded random numbers,
large reductions and both matmul paths. (Everything else runs on opencl through
the ``device`` fixture, like on every backend.)"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import rtxcore as rc

R = pytest.importorskip("rtx_opencl.runtime")  # (dev.py test always installs it)
pytest.importorskip("rtx_opencl.kernels")
BLAS = pytest.importorskip("rtx_opencl.blas")

pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")


def _dev() -> "R.Device":
    return R.device(0)


def test_rtx_info_shows_platform_and_device_facts() -> None:
    out = subprocess.run([sys.executable, "-m", "rtxcore", "info", "--kernels"],
                         capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("opencl"))
    n = len(rc.dispatch.ops.PRIMITIVES)
    assert "available" in line and f"{n}/{n}" in line
    d = _dev()
    assert d.name in out and d.platform in out
    for fact in ("compute units=", "global memory=", "fp64=", "fp16 arithmetic="):
        assert fact in out


def test_devices_are_listed_in_a_stable_order() -> None:
    import pyopencl as cl

    expected = [d.int_ptr for p in sorted(cl.get_platforms(), key=lambda p: (p.name, p.vendor, p.version))
                for d in p.get_devices()]
    assert [d.cl_device.int_ptr for d in R.devices()] == expected
    assert rc.device("opencl").index == 0 and str(rc.device("opencl:0")) == "opencl:0"


@pytest.mark.parametrize("how", ["no pyopencl", "no platform"])
def test_without_opencl_import_works_and_use_says_why(how: str) -> None:
    # a fresh interpreter, so the real backend state here is untouched
    block = ("import sys; sys.modules['pyopencl'] = None" if how == "no pyopencl" else
             "import pyopencl; pyopencl.get_platforms = lambda: []")
    code = f"""{block}
import rtxcore as rc, rtx_opencl
from rtxcore._cli import main
main(['info'])
try:
    rc.zeros(2, device='opencl')
except RuntimeError as e:
    print('ERROR:', e)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    err = next(ln for ln in res.stdout.splitlines() if ln.startswith("ERROR:"))
    if how == "no pyopencl":
        assert "PyOpenCL is not importable" in err and "pip install" in err
    else:
        assert "no OpenCL platform" in err and "pocl-binary-distribution" in err
    assert "unavailable" in res.stdout


def test_out_of_memory_names_size_and_device_and_keeps_tensors() -> None:
    d = _dev()
    keep = rc.arange(10, device="opencl", dtype=rc.float32)
    n = d.max_alloc // 4 + 1024  # one float32 buffer larger than the device allows
    with pytest.raises(RuntimeError, match=r"opencl:0 .*out of memory.*float32") as info:
        rc.empty(n, device="opencl")
    assert isinstance(info.value, R.OutOfMemoryError)
    assert "GiB" in str(info.value) and d.name in str(info.value)
    np.testing.assert_array_equal(keep.numpy(), np.arange(10, dtype=np.float32))
    assert (keep + 1).sum().item() == 55.0


def test_a_kernel_that_fails_to_build_names_op_dtypes_and_shows_the_log(monkeypatch) -> None:
    from rtx_opencl import codegen as C
    from rtx_opencl import elementwise as E

    monkeypatch.setitem(C.UNARY, "sin", ("sin(a) +* undefined_thing", None))
    # (the op families made from the broken table are this test's alone)
    monkeypatch.setattr(E, "_FAMILIES", {})
    d = _dev()
    saved, saved_built = dict(d.programs), dict(d.built)
    d.programs.clear()
    d.built.clear()
    try:
        x = rc.ones(3, device="opencl", dtype=rc.float64)
        with pytest.raises(RuntimeError) as info:
            x.sin()
        msg = str(info.value)
        assert "sin" in msg and "float64" in msg and "failed to build" in msg
        assert "undefined_thing" in msg  # the compiler's log and the source
        np.testing.assert_array_equal(x.numpy(), np.ones(3))  # nothing lost
        # the rest of sin's family (unary float64 ops) builds one by one instead
        np.testing.assert_allclose(x.exp().numpy(), np.exp(np.ones(3)))
        np.testing.assert_array_equal(x.neg().numpy(), -np.ones(3))
    finally:
        d.programs.clear()
        d.programs.update(saved)
        d.built.clear()
        d.built.update(saved_built)


def test_float64_is_refused_before_launch_where_the_device_lacks_it(monkeypatch) -> None:
    d = _dev()
    monkeypatch.setattr(d, "fp64", False)
    dev = rc.device("opencl")
    dev._resolve()
    try:
        with pytest.raises(TypeError, match="float64.*opencl:0"):
            rc.zeros(3, dtype=rc.float64, device="opencl")
        x = rc.ones(3, device="opencl")
        with pytest.raises(TypeError, match="float64"):
            x.to(rc.float64)
    finally:
        monkeypatch.undo()
        dev._resolve()
    assert rc.zeros(3, dtype=rc.float64, device="opencl").dtype is rc.float64


def test_programs_compile_once_per_op_dtype_and_layout() -> None:
    d = _dev()
    x = rc.ones(5, 7, device="opencl", dtype=rc.int16)
    (x * x).numpy()
    before = d.compiles
    for shape in [(5, 7), (9,), (2, 3, 4)]:  # contiguous: one kernel for every shape
        y = rc.ones(*shape, device="opencl", dtype=rc.int16)
        (y * y).numpy()
    assert d.compiles == before
    (x.t() * x.t()).numpy()  # a strided layout is a new program, once
    after = d.compiles
    (x.t() * x.t()).numpy()
    assert d.compiles == after == before + 1


def test_random_numbers_are_seeded_and_distributed() -> None:
    rc.manual_seed(7)
    a = rc.rand(100_000, device="opencl").numpy()
    b = rc.randn(100_000, device="opencl", dtype=rc.float64).numpy()
    rc.manual_seed(7)
    np.testing.assert_array_equal(a, rc.rand(100_000, device="opencl").numpy())
    np.testing.assert_array_equal(b, rc.randn(100_000, device="opencl", dtype=rc.float64).numpy())
    assert 0.0 <= a.min() and a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.01 and abs(a.std() - (1 / 12) ** 0.5) < 0.01
    assert abs(b.mean()) < 0.02 and abs(b.std() - 1) < 0.02
    assert len(np.unique(a)) > 99_000  # no repeated stream
    h = rc.rand(50_000, device="opencl", dtype=rc.float16).numpy()
    assert h.dtype == np.float16 and 0 <= h.min() and h.max() < 1


@pytest.mark.parametrize("shape,axes", [((3_000_000,), None), ((8, 400_000), (1,)),
                                         ((400_000, 3), (0,)), ((64, 64, 64), (0, 2))])
def test_large_reductions_match_numpy(shape, axes) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    t = rc.tensor(a, device="opencl")
    dim = axes if axes is None else tuple(axes)
    ref = a.astype(np.float64)
    np.testing.assert_allclose(t.sum(dim).numpy(), ref.sum(axis=axes), rtol=1e-4, atol=1e-2)
    np.testing.assert_array_equal(t.amax(dim).numpy(), a.max(axis=axes))
    np.testing.assert_array_equal(t.amin(dim).numpy(), a.min(axis=axes))
    if axes is not None and len(axes) == 1:
        np.testing.assert_array_equal(t.argmax(axes[0]).numpy(), a.argmax(axis=axes[0]))
    ints = rc.tensor((a * 10).astype(np.int64), device="opencl")
    assert ints.sum().item() == int((a * 10).astype(np.int64).sum())


@pytest.mark.parametrize("rows,k", [(1024, 17), (1024, 48), (300, 2048), (300, 2049), (7, 64)])
def test_many_short_rows_reduce_one_a_work_item_on_a_cpu_device(rows, k) -> None:
    # on PoCL, rows up to SERIAL_MAX with work for every core fold one a work item
    # (a work-group's tree per row cost 15-25x); the values are NumPy's all the same
    from rtx_opencl import reductions as RD

    rng = np.random.default_rng(3)
    a = rng.standard_normal((rows, k)).astype(np.float32)
    a[1, 5] = np.nan  # NaN first-wins for the argmax, NaN for max and sum
    a[2, 3] = a[2, 9] = 50.0  # a tie: the first index
    t = rc.tensor(a, device="opencl")
    ref = a.astype(np.float64)
    ok = ~np.isnan(ref.sum(1))
    np.testing.assert_allclose(t.sum(1).numpy()[ok], ref.sum(1)[ok], rtol=1e-5, atol=1e-4)
    assert np.isnan(t.sum(1).numpy()[1]) and np.isnan(t.amax(1).numpy()[1])
    np.testing.assert_array_equal(t.amax(1).numpy()[ok], a.max(1)[ok])
    np.testing.assert_array_equal(t.argmax(1).numpy(), np.nanargmax(np.where(np.isnan(a), np.inf,
                                                                             a), 1))
    ints = (a[ok] * 100).astype(np.int64)
    np.testing.assert_array_equal(rc.tensor(ints, device="opencl").sum(1).numpy(), ints.sum(1))
    np.testing.assert_allclose(t.half().float().sum(1).numpy()[ok],
                               a.astype(np.float16).astype(np.float64).sum(1)[ok],
                               rtol=1e-3, atol=1e-2)
    d = R.device(0)
    # the kernel the sum ran: serial (one row a work item) or a group's tree
    modes = {key[-1] for key in d.programs if isinstance(key, tuple) and len(key) >= 4
             and key[0] == "sum" and key[1] == "float32"}
    if d.is_cpu and k <= RD.SERIAL_MAX and rows >= 4 * d.compute_units:
        assert "serial" in modes
    if k > RD.SERIAL_MAX:
        assert "rows" in modes  # a long contiguous row: a work-group's 8-lane folds


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "float16", "bool"])
@pytest.mark.parametrize("shape", [((70, 50), (50, 90)), ((3, 1, 20, 17), (4, 17, 33)),
                                   ((1, 600), (600, 700)), ((129, 5), (5, 3))])
def test_matmul_kernel_shapes_dtypes_and_layouts(dtype, shape) -> None:
    rng = np.random.default_rng(1)
    sa, sb = shape
    a = rng.integers(-3, 4, sa).astype(dtype)
    b = rng.integers(-3, 4, sb).astype(dtype)
    ta, tb = rc.tensor(a, device="opencl"), rc.tensor(b, device="opencl")
    ref = (a.astype(np.float64) @ b.astype(np.float64))
    ref = ref.astype(bool) if dtype == "bool" else ref.astype(dtype)
    np.testing.assert_allclose((ta @ tb).numpy().astype(np.float64), ref.astype(np.float64), rtol=1e-3)
    # transposed operands (column stride != 1) and an offset view
    at = rc.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device="opencl").transpose(-1, -2)
    big = rc.tensor(np.concatenate([b, b], axis=-1), device="opencl")[..., b.shape[-1]:]
    np.testing.assert_allclose((at @ big).numpy().astype(np.float64), ref.astype(np.float64), rtol=1e-3)


def test_clblast_path_matches_our_kernel(monkeypatch) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)
    ta, tb = rc.tensor(a, device="opencl"), rc.tensor(b, device="opencl")
    ours = (ta @ tb).numpy()
    monkeypatch.setenv("RTX_OPENCL_MATMUL", "clblast")
    assert BLAS.enabled() == BLAS.available()
    theirs = (ta @ tb).numpy()
    theirs_t = (ta @ rc.tensor(np.ascontiguousarray(b.T), device="opencl").t()).numpy()
    np.testing.assert_allclose(ours, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(theirs, ours, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(theirs_t, ours, rtol=1e-4, atol=1e-4)
    if os.environ.get("RTX_REQUIRE_CLBLAST"):
        assert BLAS.available(), "pyclblast is not importable"


def test_numpy_is_a_copy_and_to_round_trips() -> None:
    x = rc.arange(6, device="opencl").reshape(2, 3)
    arr = x.numpy()
    arr[0, 0] = 100
    assert x[0, 0].item() == 0
    back = x.t().to("cpu")
    np.testing.assert_array_equal(back.numpy(), np.arange(6).reshape(2, 3).T)
    assert back.to("opencl").device == rc.device("opencl")
