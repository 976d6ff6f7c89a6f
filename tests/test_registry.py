"""The plugin registry and dispatch, with a fake in-process backend and small
broken plugins: device mixing, unsupported dtypes, missing kernels, overrides,
lazy loading, RTX_DISABLE_BACKENDS and plugins that fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch import Backend, hookimpl
from rtxcore.dispatch.registry import registry
from rtxcore.testing import assert_close

from . import fake_backend

HERE = Path(__file__).resolve().parent


@pytest.fixture
def fake():
    name = rc.register_backend(fake_backend, name="fake-plugin")
    fake_backend.CALLS.clear()
    try:
        yield fake_backend.CALLS
    finally:
        rc.unregister_backend(name)


def run_py(code: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=120, **kw)


# -- dispatch through the fake backend ------------------------------------------------


def test_fake_backend_runs_ops_through_its_kernels(fake):
    a = rc.tensor([[1.0, 2.0], [3.0, 4.0]], device="fake:0")
    b = rc.tensor([10.0, 20.0], device="fake:0")
    out = (a + b) * 2 - a.exp()
    assert out.device == rc.device("fake:0")
    assert str(out.device) == "fake:0"
    an = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    assert_close(out, (an + np.array([10.0, 20.0], np.float32)) * 2 - np.exp(an))
    assert fake["add"] >= 1 and fake["mul"] >= 1 and fake["exp"] >= 1
    # views reach the fake's kernels as generic View objects
    assert_close(a.t() @ a, an.T @ an)
    assert_close(a[:, 1].sum(), an[:, 1].sum())


def test_second_fake_device_and_transfers(fake):
    x = rc.arange(6, dtype=rc.float32, device="fake:1").reshape(2, 3)
    assert x.device.index == 1
    y = x.to("cpu")
    assert y.device == rc.device("cpu")
    assert_close(y, np.arange(6, dtype=np.float32).reshape(2, 3))
    z = y.to("fake:0")
    assert z.device == rc.device("fake:0")
    assert fake["from_host"] == 1 and fake["to_host"] == 1
    # a move copies: writing the copy leaves the source alone
    z.add_(1)
    assert_close(x, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_mixing_devices_names_op_and_both_devices(fake):
    a = rc.ones(3, device="fake:0")
    b = rc.ones(3, device="cpu")
    with pytest.raises(RuntimeError, match=r"add.*fake:0.*cpu"):
        a + b
    c = rc.ones(3, device="fake:1")
    with pytest.raises(RuntimeError, match=r"mul.*fake:0.*fake:1"):
        a * c
    with pytest.raises(RuntimeError, match="matmul"):
        rc.ones(2, 2, device="fake:0") @ rc.ones(2, 2)


def test_unsupported_dtype_is_refused_before_any_kernel_runs(fake):
    x = rc.ones(3, device="fake:1")
    fake.clear()
    with pytest.raises(TypeError, match=r"float64.*fake:1"):
        rc.zeros(3, dtype=rc.float64, device="fake:1")
    with pytest.raises(TypeError, match=r"float64.*fake:1"):
        x.double()
    with pytest.raises(TypeError, match=r"float64.*fake:1"):
        rc.tensor([1.0], dtype=rc.float64).to("fake:1")
    assert sum(fake.values()) == 0, f"kernels ran: {dict(fake)}"
    assert not rc.device("fake:1").supports(rc.float64)
    assert rc.device("fake:0").supports(rc.float64)
    assert rc.zeros(2, dtype=rc.float64, device="fake:0").dtype == rc.float64


def test_missing_kernel_names_op_backend_and_fix(fake):
    x = rc.ones(3, device="fake:0")
    with pytest.raises(NotImplementedError) as err:
        rc.cos(x)
    msg = str(err.value)
    assert "'cos'" in msg and "fake" in msg and "to('cpu')" in msg
    # composites still work from primitives on a backend that lacks their kernels
    assert_close(rc.log2(rc.tensor([0.5, 8.0], device="fake:0")).cpu(), np.float32([-1.0, 3.0]),
                 rtol=1e-6)


def test_composites_run_from_primitives_only(fake):
    # fake supplies no composite kernels: these exercise the core's decompositions
    xs = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.4, 1e-8, 3.0], np.float64)
    x = rc.tensor(xs, device="fake:0")
    assert_close(rc.round(x), np.round(xs))
    assert_close(rc.trunc(x), np.trunc(xs))
    assert_close(rc.ceil(x), np.ceil(xs))
    assert_close(rc.expm1(x), np.expm1(xs), rtol=1e-12)
    assert_close(rc.log1p(rc.abs(x)), np.log1p(np.abs(xs)), rtol=1e-12)
    assert_close(rc.cumsum(x, 0), np.cumsum(xs), rtol=1e-12)
    ints = rc.tensor([7, -7, 8, -9], device="fake:0")
    assert_close(ints // 3, np.array([7, -7, 8, -9]) // 3)
    assert_close(ints % 3, np.array([7, -7, 8, -9]) % 3)
    v, i = rc.sort(rc.tensor([3.0, 1.0, 2.0, 1.0, 0.5], device="fake:0"))
    assert v.tolist() == [0.5, 1.0, 1.0, 2.0, 3.0] and i.tolist() == [4, 1, 3, 2, 0]
    y = rc.zeros(4, 3, device="fake:0")
    y[rc.tensor([0, 2], device="fake:0")] = 5.0
    assert_close(y.cpu(), np.array([[5] * 3, [0] * 3, [5] * 3, [0] * 3], np.float32))


def test_dispatch_table_is_built_once_not_per_op(fake, monkeypatch):
    x = rc.ones(4, device="fake:0")

    def boom(*a, **k):
        raise AssertionError("a hook was called on the per-op path")

    monkeypatch.setattr(registry, "_impls", boom)
    monkeypatch.setattr(registry, "_rebuild", boom)
    for _ in range(3):
        x = (x + 1) * 2
    assert x.sum().item() == 4 * 22.0


def test_default_device_context_and_setter(fake):
    with rc.device("fake:1"):
        t = rc.zeros(2)
        assert t.device == rc.device("fake:1")
        with rc.device("fake:0"):
            assert rc.ones(1).device == rc.device("fake:0")
        assert rc.rand(1).device == rc.device("fake:1")
    assert rc.zeros(1).device == rc.device("cpu")
    rc.set_default_device("fake:0")
    try:
        assert rc.arange(3).device == rc.device("fake:0")
    finally:
        rc.set_default_device(None)
    assert rc.arange(3).device == rc.device("cpu")


def test_rtx_device_env_sets_default():
    r = run_py("""
        import rtxcore as rc
        print(rc.zeros(1).device)
    """, env={"RTX_DEVICE": "cpu:0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "cpu"
    r = run_py("import rtxcore as rc; rc.zeros(1)", env={"RTX_DEVICE": "cpux"})
    assert r.returncode != 0 and "unknown device type 'cpux'" in r.stderr


def test_device_index_out_of_range(fake):
    with pytest.raises(RuntimeError, match=r"fake:5 does not exist; fake has 2 devices"):
        rc.zeros(1, device="fake:5")


# -- overrides: several plugins contribute kernels to one backend ---------------------


class FastAdd:
    """Overrides one cpu kernel; pluggy's tryfirst makes it win."""

    calls = 0

    @hookimpl(tryfirst=True)
    def rtx_kernels(self, backend):
        if backend != "cpu":
            return None

        def add(out, x, y):
            FastAdd.calls += 1
            np.add(x, y, out=out)

        return {"add": add}


class LateAdd:
    """A trylast contribution loses to the built-in cpu kernel."""

    @hookimpl(trylast=True)
    def rtx_kernels(self, backend):
        if backend == "cpu":
            return {"add": lambda out, x, y: (_ for _ in ()).throw(AssertionError("loser ran"))}
        return None


def test_tryfirst_plugin_overrides_a_kernel_and_the_loser_is_recorded():
    plugin = FastAdd()
    late = LateAdd()
    rc.register_backend(plugin, name="fast-add")
    rc.register_backend(late, name="late-add")
    try:
        FastAdd.calls = 0
        out = rc.tensor([1.0, 2.0]) + rc.tensor([3.0, 4.0])
        assert out.tolist() == [4.0, 6.0]
        assert FastAdd.calls == 1
        entry = registry.backends["cpu"]
        assert entry.providers["add"] == "fast-add"
        assert set(entry.shadowed["add"]) == {"cpu", "late-add"}
        from rtxcore._cli import render

        text = render(kernels=True)
        assert "kernel add: from fast-add" in text and "shadows" in text
    finally:
        rc.unregister_backend("fast-add")
        rc.unregister_backend("late-add")
    FastAdd.calls = 0
    assert (rc.tensor([1.0]) + 1).tolist() == [2.0]
    assert FastAdd.calls == 0
    assert "add" not in registry.backends["cpu"].shadowed


# -- misbehaving plugins -----------------------------------------------------------------


class BadDescriptor:
    @hookimpl
    def rtx_backends(self):
        return ["not a backend"]


class UnknownOp:
    @hookimpl
    def rtx_kernels(self, backend):
        return {"frobnicate": lambda out, x: None} if backend == "cpu" else None


class RaisingKernels:
    @hookimpl
    def rtx_kernels(self, backend):
        raise ValueError("kernel table exploded")


class Clash(Backend):
    name = "cpu"


class ClashingName:
    @hookimpl
    def rtx_backends(self):
        return [Clash()]


@pytest.mark.parametrize("plugin, expected", [
    (BadDescriptor(), "not a rtxcore.dispatch.Backend"),
    (UnknownOp(), "unknown op 'frobnicate'"),
    (RaisingKernels(), "kernel table exploded"),
    (ClashingName(), "backend name 'cpu' belongs to rtxcore's rtx-cpu distribution"),
])
def test_broken_plugins_are_reported_and_the_rest_keeps_working(plugin, expected):
    rc.zeros(1)  # cpu in use: its kernel table is rebuilt (the plugin asked) at registration
    name = rc.register_backend(plugin, name="troublemaker")
    try:
        problems = [p for p in registry.problems if p.plugin == "troublemaker"]
        assert problems and expected in problems[0].what
        from rtxcore._cli import render

        assert "troublemaker" in render() and expected in render()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert (rc.arange(3) * 2).tolist() == [0, 2, 4]
        conflicts = [w for w in caught if "troublemaker" in str(w.message)]
        # a refused claim on a built-in name is also warned about at first use
        assert bool(conflicts) == isinstance(plugin, ClashingName)
    finally:
        rc.unregister_backend(name)
    assert not [p for p in registry.problems if p.plugin == "troublemaker"]


def _broken_env(tmp_path: Path) -> dict[str, str]:
    """A site dir holding a distribution whose entry point fails to import."""
    site = tmp_path / "site"
    dist = site / "rtx_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rtx-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rtxcore.backends]\nbroken = broken_plugin\n")
    (site / "broken_plugin.py").write_text((HERE / "plugins" / "broken_plugin.py").read_text())
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_plugin_failing_on_import_is_isolated_and_shown(tmp_path):
    env = _broken_env(tmp_path)
    r = run_py("""
        import rtxcore as rc
        print((rc.arange(4) + 1).tolist())
        try:
            rc.zeros(1, device="broken")
        except RuntimeError as e:
            print("ERR", e)
    """, env=env)
    assert r.returncode == 0, r.stderr
    assert "[1, 2, 3, 4]" in r.stdout
    assert "ERR the 'broken' backend failed to load: ImportError: rtx-broken needs libbroken.so" in r.stdout
    info = run_py("from rtxcore._cli import main; main(['info'])", env=env)
    assert info.returncode == 0, info.stderr
    assert "FAILED" in info.stdout and "libbroken.so" in info.stdout
    assert "cpu" in info.stdout and "available" in info.stdout


def test_disable_backends_env_blocks_plugins():
    r = run_py("""
        import rtxcore as rc
        try:
            rc.zeros(1, device="cpu")
        except RuntimeError as e:
            print("ERR", e)
    """, env={"RTX_DISABLE_BACKENDS": "cpu, other"})
    assert r.returncode == 0, r.stderr
    assert "ERR the 'cpu' backend is disabled by RTX_DISABLE_BACKENDS" in r.stdout


def test_import_is_lazy_and_loads_no_plugin():
    r = run_py("""
        import sys
        import rtxcore
        print("pluggy" in sys.modules, "rtx_cpu" in sys.modules)
        rtxcore.zeros(1)
        print("pluggy" in sys.modules, "rtx_cpu" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True", "True"]


def test_a_plugins_kernels_are_asked_for_when_its_device_is_first_used():
    # a plugin whose rtx_kernels is slow for its own device (as one importing a
    # large library there): using cpu must neither call it for that device nor wait
    r = run_py("""
        import json, sys, time
        import rtxcore as rc
        from rtxcore.dispatch import hookimpl
        from rtxcore.dispatch.registry import registry
        from tests.fake_backend import PRIMS_KERNELS, PrimsBackend

        CALLS = []

        class Slowpoke(PrimsBackend):
            name = "slowpoke"

        class SlowPlugin:
            @hookimpl
            def rtx_backends(self):
                return [Slowpoke()]

            @hookimpl
            def rtx_kernels(self, backend):
                CALLS.append(backend)
                if backend != "slowpoke":
                    return None
                time.sleep(1.5)
                return PRIMS_KERNELS

        rc.register_backend(SlowPlugin(), name="slow-plugin")
        out = {"registered": list(CALLS)}
        t0 = time.perf_counter()
        x = rc.zeros(3) + 1
        out["cpu_s"] = time.perf_counter() - t0
        out["after_cpu"] = list(CALLS)
        out["built"] = sorted(n for n, e in registry.backends.items() if e.built)
        y = rc.ones(2, device="slowpoke") * 3
        z = rc.ones(2, device="slowpoke") + y  # (asked once, not per use)
        out["after_slowpoke"] = list(CALLS)
        out["values"] = [x.tolist(), z.tolist()]
        from rtxcore._cli import render
        text = render()
        out["info_calls"] = list(CALLS)
        out["info_row"] = next(ln for ln in text.splitlines() if ln.startswith("slowpoke "))
        print(json.dumps(out))
    """, cwd=str(HERE.parent))
    assert r.returncode == 0, r.stderr
    import json

    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["registered"] == []  # registering asks no plugin for kernels
    assert "slowpoke" not in out["after_cpu"] and out["cpu_s"] < 1.0, out
    assert out["after_cpu"] == ["cpu"]  # only cpu's table was built, once
    assert out["built"] == ["cpu"]
    assert out["after_slowpoke"].count("slowpoke") == 1
    assert out["values"] == [[1.0, 1.0, 1.0], [4.0, 4.0]]
    # rtx info counts the kernels of a table built already, and builds none itself
    total = len(rc.dispatch.ops.PRIMITIVES)
    assert f"{total}/{total}" in out["info_row"] and "available" in out["info_row"]
    assert out["info_calls"].count("slowpoke") == 1


def test_an_unavailable_backend_is_not_asked_for_kernels_and_info_says_why():
    class Gone(Backend):
        name = "gone"
        distribution = "gone-backend (tests)"

        def is_available(self):
            return False

        def unavailable_reason(self):
            return "its driver is not installed"

    asked = []

    class GonePlugin:
        @hookimpl
        def rtx_backends(self):
            return [Gone()]

        @hookimpl
        def rtx_kernels(self, backend):
            asked.append(backend)
            return {} if backend == "gone" else None  # (no library: no kernels)

    name = rc.register_backend(GonePlugin(), name="gone-plugin")
    try:
        with pytest.raises(RuntimeError, match="gone:0 is not available: its driver is not"):
            rc.zeros(1, device="gone")
        from rtxcore._cli import collect, render

        row = next(r for r in collect() if r["name"] == "gone")
        assert row["available"] is False and row["primitives"] is None and row["missing"] == []
        lines = render().splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith("gone "))
        block = [lines[at]] + [ln for ln in lines[at + 1:] if ln.startswith(" ")][:3]
        assert "unavailable" in block[0] and "/" not in block[0].split("unavailable")[1]
        assert block[1].strip() == "why: its driver is not installed"
        end = next((i for i, ln in enumerate(lines[at + 1:]) if not ln.startswith(" ")), None)
        assert not [ln for ln in lines[at + 1: at + 1 + end] if "missing" in ln]
        assert "gone" not in asked
    finally:
        rc.unregister_backend(name)


def test_rtx_info_into_a_closed_pipe_exits_quietly():
    # `rtx info | head`: the reader is gone before everything is written
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "rtxcore", "info"], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert r.stderr == "" and r.returncode == 1


# -- rtx info ---------------------------------------------------------------------------------


def test_rtx_info_lists_backends_devices_and_coverage(fake):
    from rtxcore._cli import collect, render

    rows = {r["name"]: r for r in collect(kernels=True)}
    total = len(rc.dispatch.ops.PRIMITIVES)
    assert rows["cpu"]["primitives"] == (total, total)
    assert rows["cpu"]["available"] and rows["cpu"]["devices"]
    assert rows["fake"]["primitives"] == (total - 1, total)
    assert rows["fake"]["missing"] == ["cos"]
    assert [d["index"] for d in rows["fake"]["devices"]] == [0, 1]
    assert "float64" not in rows["fake"]["devices"][1]["dtypes"]
    text = render(kernels=True)
    assert f"{total}/{total}" in text and f"{total - 1}/{total}" in text
    assert "missing primitives: cos" in text


@pytest.mark.parametrize("argv", [["-m", "rtxcore", "info"], ["-c", "from rtxcore._cli import main; main(['info'])"]])
def test_info_commands_run(argv):
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "cpu" in r.stdout and "rtx-cpu" in r.stdout and "available" in r.stdout


def test_rtx_console_script_installed():
    exe = Path(sys.executable).parent / "rtx"
    assert exe.exists(), f"the rtx console script is missing beside {sys.executable}"
    r = subprocess.run([str(exe), "info"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "rtx-cpu" in r.stdout


@pytest.mark.parametrize("dev", ["fake:0", "fake:1"])  # with and without float64
@pytest.mark.parametrize("npdt", [np.int64, np.int32, np.int8, np.uint8])
def test_integer_division_decomposition_is_exact(fake, dev, npdt):
    rng = np.random.default_rng(1)
    info = np.iinfo(npdt)
    xs = rng.integers(info.min, info.max, 1000, dtype=npdt)
    ys = rng.integers(info.min, info.max, 1000, dtype=npdt)
    ys[:300] = rng.integers(1, 8, 300).astype(npdt)
    ys[ys == 0] = 1
    if npdt is np.int64:  # quotients beyond float32's and float64's exact range
        xs[:3], ys[:3] = [2**62 + 1, 16777217, 2**53 + 1], [7, 1, 10]
    x, y = rc.tensor(xs, device=dev), rc.tensor(ys, device=dev)
    assert "floor_divide" not in rc.device(dev).kernels
    assert_close(x // y, xs // ys)
    assert_close(x % y, xs % ys)
    assert_close(x // 3, xs // npdt(3))


class NoMemory:
    """A backend whose plugin forgot the allocation kernels."""

    class B(Backend):
        name = "nomem"

    @hookimpl
    def rtx_backends(self):
        return [self.B()]

    @hookimpl
    def rtx_kernels(self, backend):
        return {"add": lambda out, x, y: None} if backend == "nomem" else None


def test_backend_without_memory_kernels_is_refused_clearly():
    name = rc.register_backend(NoMemory(), name="nomem-plugin")
    try:
        with pytest.raises(RuntimeError, match=r"nomem-plugin.*empty, from_host, to_host"):
            rc.zeros(2, device="nomem")
        assert (rc.ones(2) + 1).tolist() == [2.0, 2.0]
    finally:
        rc.unregister_backend(name)


def test_round_decomposition_keeps_large_floats(fake):
    xs = np.array([8388609.0, -8388609.0, 2.5, -3.5, 1e30], np.float32)
    assert_close(rc.round(rc.tensor(xs, device="fake:1")).cpu(), np.round(xs))


def test_indices_on_another_accelerator_are_refused(fake):
    x = rc.arange(6, device="fake:0")
    cpu_idx = rc.tensor([0, 2])
    assert x[cpu_idx].tolist() == [0, 2]  # cpu indices are moved, as in PyTorch
    with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same device"):
        x[rc.tensor([0, 2], device="fake:1")]
    with pytest.raises(RuntimeError, match="indices should be either on cpu"):
        rc.arange(3)[rc.tensor([True, False, True], device="fake:0")]


def test_registering_a_disabled_plugin_is_refused(monkeypatch):
    monkeypatch.setenv("RTX_DISABLE_BACKENDS", "fast-add")
    with pytest.raises(RuntimeError, match="disabled by RTX_DISABLE_BACKENDS"):
        rc.register_backend(FastAdd(), name="fast-add")
    assert "fast-add" not in [p for p, _ in registry.pm.list_name_plugin()]


def test_rtx_info_builds_no_kernel_table_unless_asked():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json
        from rtxcore.dispatch.registry import registry
        from rtxcore._cli import collect, render
        text = render()
        built_after_info = sorted(n for n, e in registry.backends.items() if e.built)
        rows = {r["name"]: r for r in collect()}
        text_k = render(kernels=True)
        built_after_kernels = sorted(n for n, e in registry.backends.items() if e.built)
        print(json.dumps([built_after_info, rows["cpu"]["primitives"], "unbuilt" in text,
                          built_after_kernels, "unbuilt" in text_k]))
    """)], capture_output=True, text=True, timeout=120, cwd=str(HERE.parent))
    assert r.returncode == 0, r.stderr
    import json

    built, cpu_prims, says_unbuilt, built_k, unbuilt_k = json.loads(r.stdout.strip().splitlines()[-1])
    assert built == [] and cpu_prims is None and says_unbuilt
    assert "cpu" in built_k and "opencl" in built_k and not unbuilt_k
