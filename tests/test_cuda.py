"""The CUDA backend (rtx_cuda on CuPy).

Without a GPU, everything that can be checked is: each way CUDA can be missing
(no CuPy, CuPy without a driver, no device) is explained in one line with the
fix, by ``rtx info`` and by any use of the device; importing never fails; the
kernel table covers every primitive; and the CUDA C the backend carries compiles
for sm_80 and sm_90 with NVRTC (what CuPy uses at run time) and with nvcc.

Tests that need a device are marked ``needs_device`` and skip with the reason
"no CUDA device"; on a GPU machine they run, as does the whole device-generic
suite (conftest adds ``cuda:N`` to the devices under test when it is available).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch import ops as OPS

# the tests of one backend skip, saying so, where it is not installed (a checkout
# run with RTX_TEST_DEVICES=mydev for another backend)
rtx_cuda = pytest.importorskip("rtx_cuda", reason="rtx_cuda (the CUDA backend) is not installed")
from rtx_cuda import runtime as R  # noqa: E402

SOURCES = sorted(Path(rtx_cuda.__file__).parent.glob("*.cu"))
ARCHS = ("80", "90")

# -- without a device ---------------------------------------------------------


@pytest.fixture
def fresh_runtime():
    """Probe CUDA again in the test, and forget what the test found after it."""
    R.reset_for_tests()
    yield R
    R.reset_for_tests()


def _fake_cupy(count: int = 0, exc: BaseException | None = None) -> types.ModuleType:
    """A stand-in for cupy whose device count is ``count`` or raises ``exc``."""
    mod = types.ModuleType("cupy")

    def get_device_count() -> int:
        if exc is not None:
            raise exc
        return count

    mod.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))
    return mod


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def test_without_cupy_everything_imports_and_says_why():
    # CuPy hidden: `import cupy` raises ImportError, as where it isn't installed
    p = _run(
        "import sys; sys.modules['cupy'] = None\n"
        "import rtxcore as rc, rtx_cuda\n"
        "from rtxcore._cli import render\n"
        "from rtxcore.testing import available_devices\n"
        "print(render())\n"
        "print('DEVICES', available_devices())\n"
        "try:\n"
        "    rc.tensor([1.0], device='cuda')\n"
        "except RuntimeError as e:\n"
        "    print('ERROR', e)\n"
        "print('CPU', (rc.ones(2) + 1).tolist())\n"
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout
    cuda_line = next(ln for ln in out.splitlines() if ln.startswith("cuda "))
    assert "unavailable" in cuda_line
    assert "why: CuPy is not importable" in out and "pip install 'rtx-cuda[cuda13]'" in out
    devices = next(ln for ln in out.splitlines() if ln.startswith("DEVICES"))
    assert "cuda" not in devices and "'cpu'" in devices
    error = next(ln for ln in out.splitlines() if ln.startswith("ERROR"))
    assert "cuda:0 is not available: CuPy is not importable" in error and "rtx-cuda[cuda13]" in error
    assert "CPU [2.0, 2.0]" in out  # the rest keeps working


@pytest.mark.parametrize("exc, count, expect", [
    (RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
                  "runtime version"), 0, "the CUDA driver is missing or older than CuPy's CUDA runtime"),
    (RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"), 0, "no CUDA device found"),
    (None, 0, "no CUDA device found"),
    (RuntimeError("cudaErrorUnknown: unknown error"), 0, "CUDA could not be initialised"),
], ids=["old-driver", "no-device-error", "zero-devices", "other"])
def test_each_cause_is_named_with_its_fix(monkeypatch, fresh_runtime, exc, count, expect):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count, exc))
    why = R.problem()
    assert why is not None and expect in why and "\n" not in why
    assert any(fix in why for fix in ("install", "NVIDIA GPU", "nvidia-smi"))
    assert R.device_count() == 0
    backend = rtx_cuda.CUDABackend()
    assert not backend.is_available() and backend.unavailable_reason() == why
    with pytest.raises(RuntimeError, match=r"device cuda:0 is not available: " + expect.split("(")[0]):
        rc.tensor([1.0, 2.0], device="cuda")
    with pytest.raises(RuntimeError, match="cuda:1 is not available"):
        rc.zeros(3).to("cuda:1")


def test_a_broken_cupy_install_is_named(monkeypatch, fresh_runtime):
    import builtins

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "cupy":
            raise OSError("libcudart.so.13: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    why = R.problem()
    assert why.startswith("CuPy is not importable (OSError: libcudart.so.13") and "rtx-cuda[cuda13]" in why


def test_this_machine_as_it_is(fresh_runtime):
    """The real probe: available with a device, else a one-line reason with a fix
    (on our CI machines: CuPy installed, no driver)."""
    why = R.problem()
    if why is None:
        assert R.device_count() >= 1
        assert "cuda:0" in rc.testing.available_devices()
        return
    assert "\n" not in why and any(f in why for f in ("install", "NVIDIA GPU", "nvidia-smi"))
    assert not any(d.startswith("cuda") for d in rc.testing.available_devices())
    with pytest.raises(RuntimeError) as info:
        rc.tensor([[1.0, 2.0]], device="cuda")
    assert str(info.value) == f"device cuda:0 is not available: {why}"


def test_kernel_table_covers_every_primitive_from_the_shared_table():
    from rtx_cpu.kernels import KERNELS as CPU
    from rtx_cuda.kernels import _OWN, KERNELS

    assert set(OPS.PRIMITIVES) <= set(KERNELS)
    # everything but allocation, transfers and random numbers is the table shared
    # with rtx_cpu (rtxcore.dispatch.xp), not a copy of it
    from rtxcore.dispatch import xp

    shared = set(xp.kernels(np))
    # (less index_put: repeated indices are undefined in CuPy; the core's
    # decomposition makes the last write win)
    assert set(KERNELS) == (shared - {"index_put"}) | set(_OWN)
    # rtx_cpu takes each shared kernel as it is, or wraps it to split large calls
    # over its threads (parallel.py; matmul: blas.py; the LSTM cell's exact steps as C
    # passes: rnn_kernels.py); its own kernels are the few NumPy-only ones:
    # scatter_add (a method picked by size), pow (no libm slow paths), softmax and
    # log_softmax (row blocks), gather and index (kept index grids, take)
    import os

    import rtx_cpu

    own = {"scatter_add", "pow", "softmax", "log_softmax", "gather", "index"}
    wrapped = {n for n in shared - own if CPU[n].__code__.co_filename != xp.__file__}
    here = os.path.dirname(rtx_cpu.__file__)
    assert CPU["matmul"].__code__.co_filename == os.path.join(here, "blas.py")
    cells = {"lstm_cell", "lstm_cell_backward"}
    assert all(CPU[n].__code__.co_filename == os.path.join(here, "rnn_kernels.py")
               for n in cells)
    assert all(CPU[n].__code__.co_filename == os.path.join(here, "parallel.py")
               for n in wrapped - {"matmul"} - cells)
    assert {"cumsum", "sort", "masked_select"} <= shared - own - wrapped  # taken as they are
    assert all(KERNELS[name].__name__ == name for name in shared - {"index_put"})
    assert set(_OWN) == {"empty", "from_host", "to_host", "uniform", "normal"}


class _RecordingXp:
    """NumPy as an array module, recording the operands each matmul gets."""

    __name__ = "recording"

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return getattr(np, name)

    def matmul(self, a, b, out):
        self.calls.append((a.shape, b.shape, a.strides, b.strides))
        return np.matmul(a, b, out=out)


def test_a_weight_broadcast_over_the_batch_is_one_2d_matmul():
    """(B, T, k) @ (k, m) reaches the kernel with the weight broadcast (stride 0);
    the shared table hands the array library one (B*T, k) @ (k, m) product, not a
    batch it would make contiguous (CuPy copies the weight once per batch)."""
    from rtxcore.dispatch import xp

    rec = _RecordingXp()
    matmul = xp.kernels(rec)["matmul"]
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    wb = np.broadcast_to(w, (4, 3, 6))
    out = np.empty((4, 5, 6), np.float32)
    a = rng.standard_normal((4, 5, 3)).astype(np.float32)
    matmul(out, a, wb)
    assert rec.calls == [((20, 3), (3, 6), (12, 4), (24, 4))]
    np.testing.assert_allclose(out, a @ w, rtol=1e-6)
    # rows that don't merge (a transposed batch) keep the batched call, still right
    at = rng.standard_normal((4, 3, 5)).astype(np.float32).transpose(0, 2, 1)
    rec.calls.clear()
    matmul(out, at, wb)
    assert [c[0] for c in rec.calls] == [(4, 5, 3)]
    np.testing.assert_allclose(out, at @ w, rtol=1e-6)


def test_integer_pow_asks_nothing_of_a_device_array_library():
    """On an array library other than NumPy, integer pow is the library's own
    (CuPy's follows C for negative exponents); no any() whose bool() would make
    the host wait for the device."""
    from rtxcore.dispatch import xp

    class NoAny(_RecordingXp):
        def any(self, *a, **k):
            raise AssertionError("pow asked any(): a host wait on a device")

    pw = xp.kernels(NoAny())["pow"]
    out = np.empty(3, np.int64)
    pw(out, np.array([2, -3, 4]), np.array([3, 2, 0]))
    assert out.tolist() == [8, 9, 1]


def test_cuda_masked_select_places_by_running_count(monkeypatch):
    """rtx_cuda's masked_select (no second host wait: each selected element goes
    to its running count), run with NumPy standing in for CuPy."""
    from rtx_cuda import kernels as K
    from rtx_cuda import runtime as R

    monkeypatch.setattr(R, "cp", np, raising=False)
    monkeypatch.setattr(K, "_shared", None)
    ms = K._table()["masked_select"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    for mask in (rng.random((5, 7)) < 0.4, np.zeros((5, 7), bool), np.ones((5, 7), bool),
                 np.broadcast_to(rng.random(7) < 0.5, (5, 7))):
        out = np.empty(int(mask.sum()), np.float32)
        ms(out, x, mask)
        np.testing.assert_array_equal(out, x[mask])
    monkeypatch.setattr(K, "_shared", None)


def test_importing_the_kernels_does_not_import_cupy():
    p = _run("import sys; import rtx_cuda.kernels as k; assert len(k.KERNELS) > 40; "
             "print('cupy' in sys.modules)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


# -- the CUDA C sources compile ------------------------------------------------------------


def test_the_backend_carries_cuda_sources():
    assert [s.name for s in SOURCES] == ["divmod.cu", "philox.cu"]
    # and the kernels the Python side launches are all defined there
    text = SOURCES[1].read_text()
    for name in ("uniform_f32", "uniform_f16", "uniform_f64"):
        assert f"RTX_UNIFORM({name}," in text  # (one macro defines the three)
    for name in ("normal_f32", "normal_f64"):
        assert f'extern "C" __global__ void {name}(' in text
    text = SOURCES[0].read_text()
    for op in ("floor_divide", "remainder"):
        for dt in ("f32", "f64"):
            assert f"RTX_BINARY({op}_{dt}," in text


def _nvrtc():
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
        return nvrtc
    except Exception:
        return None


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (nvidia-cuda-nvrtc, through CuPy) not installed")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_sources_compile_with_nvrtc(source, arch):
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(source.read_text(), source.name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f"-arch=sm_{arch}"])
        except Exception as exc:
            pytest.fail(f"{source.name} for sm_{arch}: {exc}\n{nvrtc.getProgramLog(prog)}")
        assert nvrtc.getProgramLog(prog).strip("\x00 \n") == ""  # no warnings either
        assert len(nvrtc.getCUBIN(prog)) > 1000
    finally:
        nvrtc.destroyProgram(prog)


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidate = Path(home, "bin", "nvcc")
    return str(candidate) if candidate.exists() else None


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_sources_compile_with_nvcc(source, arch, tmp_path):
    out = tmp_path / f"{source.stem}.sm_{arch}.cubin"
    p = subprocess.run([_nvcc(), "-cubin", f"-arch=sm_{arch}", "-Werror", "all-warnings",
                        "-o", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"nvcc failed for sm_{arch}:\n{p.stderr}"
    assert out.stat().st_size > 1000


# -- fused groups (Backend.fuse): generated CUDA C ------------------------------------------


def _every_op_program() -> list[dict]:
    """One program per (op, dtype) the fused kernels claim, with the awkward
    constants (NaN, +-inf, -0.0, a bool condition) among the operands."""
    from rtx_cuda import fused as FU

    progs = []
    for dt in ("float32", "float64", "int8", "int32", "int64", "uint8", "bool"):
        floaty = dt in FU.FLOATS
        for op in [*FU.UNARY, *FU.BINARY, *FU.TERNARY]:
            table = FU.UNARY if op in FU.UNARY else FU.BINARY if op in FU.BINARY else FU.TERNARY
            if table[op][0 if floaty else 1] is None or (op == "cast" and dt == "bool"):
                continue
            result = "bool" if op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                      "logical_or", "logical_not") else dt
            if op == "cast":
                result = "float64" if dt != "float64" else "int32"
            if op in FU.UNARY:
                steps = [[op, result, [["in", 0]]]]
            elif op in FU.BINARY:
                const = float("nan") if floaty else 3
                steps = [[op, result, [["in", 0], ["const", const]]],
                         [op, result, [["in", 1], ["in", 0]]] if result == dt else
                         [op, result, [["in", 0], ["in", 1]]]]
            else:
                steps = [["gt", "bool", [["in", 0], ["in", 1]]],
                         [op, dt, [["step", 0], ["in", 0], ["const", float("-inf") if floaty
                                                                else 1]]],
                         [op, dt, [["const", True], ["in", 1], ["const", -0.0 if floaty else 0]]]]
            progs.append({"n": 100, "inputs": [dt, dt], "steps": steps,
                          "outputs": list(range(len(steps)))})
    return progs


def test_fused_programs_outside_the_cuda_kernels_run_unfused():
    from rtx_cuda import fused as FU

    half = {"n": 8, "inputs": ["float16"], "steps": [["exp", "float16", [["in", 0]]]],
            "outputs": [0]}
    ipow = {"n": 8, "inputs": ["int32", "int32"],
            "steps": [["pow", "int32", [["in", 0], ["in", 1]]]], "outputs": [0]}
    fdiv = {"n": 8, "inputs": ["int32", "int32"],  # div is a float op
            "steps": [["div", "int32", [["in", 0], ["in", 1]]]], "outputs": [0]}
    other = {"n": 8, "inputs": ["float32"], "steps": [["erf", "float32", [["in", 0]]]],
             "outputs": [0]}
    for prog in (half, ipow, fdiv, other):
        assert FU.runner(prog) is None, prog
    assert callable(rtx_cuda.CUDABackend().fuse(_every_op_program()[0], 0))


@pytest.mark.skipif(_nvrtc() is None, reason="NVRTC (nvidia-cuda-nvrtc, through CuPy) not installed")
@pytest.mark.parametrize("arch", ARCHS)
def test_fused_kernels_compile_with_nvrtc(arch):
    """Every (op, dtype) the fused kernels claim, and the conformance suite's
    programs, compile without a warning (one translation unit per arch)."""
    from rtx_cuda import fused as FU
    from rtxcore.testing.conformance import FUSE_PROGRAMS

    programs = [*FUSE_PROGRAMS, *_every_op_program()]
    assert all(FU.supported(p) for p in programs)
    code = "\n".join(FU.source(p, f"k{i}") for i, p in enumerate(programs))
    for dt in ("float", "double", "bool", "long long"):
        assert f"{dt}* o0" in code  # no __restrict__: an output may be an input (in place)
    nvrtc = _nvrtc()
    prog = nvrtc.createProgram(code, "fused.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f"-arch=sm_{arch}"])
        except Exception as exc:
            pytest.fail(f"fused kernels for sm_{arch}: {exc}\n{nvrtc.getProgramLog(prog)}")
        assert nvrtc.getProgramLog(prog).strip("\x00 \n") == ""
        assert len(nvrtc.getCUBIN(prog)) > 1000 * len(programs) // 4
    finally:
        nvrtc.destroyProgram(prog)


def test_fused_float32_constants_are_the_float32_values():
    from rtx_cuda import fused as FU

    # 0.1 rounded straight to float and through double agree here; the literal
    # must be float32(0.1) exactly, whatever the C compiler's decimal rounding
    lit = FU._literal(0.1, "float32")
    assert lit.endswith("f") and float.fromhex(lit[:-1]) == float(np.float32(0.1))
    assert float.fromhex(FU._literal(0.1, "float64")) == 0.1
    assert "0x7fc00000" in FU._literal(float("nan"), "float32")
    assert "0xfff0000000000000" in FU._literal(float("-inf"), "float64")
    assert FU._literal(-0.0, "float32") == "-0x0.0p+0f"


# -- on a device -------------------------------------------------------------------------------

R.reset_for_tests()
HAVE_DEVICE = R.problem() is None
needs_device = pytest.mark.skipif(not HAVE_DEVICE, reason="no CUDA device")


@needs_device
def test_info_shows_each_device():
    from rtxcore._cli import render

    text = render()
    for i in range(R.device_count()):
        assert f"cuda:{i}" in text
    assert "compute capability=" in text and "memory=" in text


@needs_device
def test_strided_views_and_broadcasts_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    b = rng.standard_normal((8,)).astype(np.float32)
    x, y = rc.tensor(a, device="cuda"), rc.tensor(b, device="cuda")
    got = (x.T[1:7:2] * 2 + y[2:5, None]).exp().sum(dim=1)
    want = np.exp(a.T[1:7:2] * 2 + b[2:5, None]).sum(axis=1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    assert got.device == rc.device("cuda:0")


@needs_device
def test_matmul_reductions_and_indexing_match_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 48)).astype(np.float32)
    x, w = rc.tensor(a, device="cuda"), rc.tensor(b, device="cuda")
    np.testing.assert_allclose((x @ w).numpy(), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(x.argmax(dim=2).numpy(), a.argmax(axis=2))
    idx = rc.tensor([2, 0, 2], device="cuda")
    np.testing.assert_array_equal(x[idx, 1].numpy(), a[[2, 0, 2], 1])
    z = rc.zeros(4, device="cuda").scatter_add(0, rc.tensor([1, 1, 3], device="cuda"),
                                               rc.ones(3, device="cuda"))
    np.testing.assert_array_equal(z.numpy(), [0, 2, 0, 1])


@needs_device
def test_seeded_random_numbers_repeat():
    rc.manual_seed(7)
    u1, n1 = rc.rand(1000, device="cuda"), rc.randn(100_000, device="cuda")
    rc.manual_seed(7)
    u2, n2 = rc.rand(1000, device="cuda"), rc.randn(100_000, device="cuda")
    np.testing.assert_array_equal(u1.numpy(), u2.numpy())
    np.testing.assert_array_equal(n1.numpy(), n2.numpy())
    u = u1.numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    n = n1.numpy()
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02


@needs_device
def test_dlpack_with_cupy_is_zero_copy():
    import cupy

    t = rc.arange(6.0, device="cuda")
    c = cupy.from_dlpack(t)
    c[0] = 42
    assert t[0].item() == 42
    src = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)[:, ::2]
    back = rc.from_dlpack(src)
    assert back.device.type == "cuda" and back.shape == (3, 2)
    src[0, 0] = -1
    assert back[0, 0].item() == -1
    np.testing.assert_array_equal(back.numpy(), cupy.asnumpy(src))


@needs_device
def test_each_device_computes_on_itself():
    for i in range(R.device_count()):
        x = rc.ones(1000, device=f"cuda:{i}")
        y = (x * 3).sum()
        assert y.device == rc.device(f"cuda:{i}") and y.item() == 3000
        assert y.__dlpack_device__() == (2, i)


def test_argmax_and_argmin_take_the_first_nan_on_a_device_library():
    """NumPy's rule (the first NaN wins) composed without a host wait for array
    libraries whose reductions may keep any of several NaNs."""
    from rtxcore.dispatch import xp

    table = xp.kernels(_RecordingXp())
    x = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 7.0, -1.0, 0.5],
                  [np.nan, np.nan, np.nan, 3.0]], np.float32)
    for name, ref in (("argmax", np.argmax), ("argmin", np.argmin)):
        for axis in (0, 1):
            out = np.empty(np.argmax(x, axis=axis, keepdims=True).shape, np.int64)
            table[name](out, x, axis)
            np.testing.assert_array_equal(out, ref(x, axis=axis, keepdims=True))
    ints = np.array([[3, 1, 3]])
    out = np.empty((1, 1), np.int64)
    table["argmax"](out, ints, 1)
    assert out.item() == 0
