"""Any one backend is a working install: with the cpu backend absent (disabled by
RTX_DISABLE_BACKENDS, in a fresh process), printing, numpy(), tolist(),
from_numpy, data loading and checkpoints go through the installed backend; the
default device is chosen from what is installed and ``rtx info`` says why; with
no backend at all ``rtx info`` exits non-zero with the install hint.

scripts/check_install.py checks the same with real installs from wheels."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "scripts" / "install_smoke.py"


def all_backends_but(*keep: str) -> str:
    """An RTX_DISABLE_BACKENDS value leaving only ``keep`` of the installed plugins."""
    names = {ep.name for ep in entry_points(group="rtxcore.backends")} | {"cpu", "opencl", "cuda"}
    return ",".join(sorted(names - set(keep)))


def run(args: list[str], disable: str, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("RTX_DEVICE", "RTX_FALLBACK")}
    e.update(RTX_DISABLE_BACKENDS=disable, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=e,
                          timeout=300, cwd=ROOT)


def opencl_available() -> bool:
    from rtxcore.dispatch.registry import registry

    registry.ensure_loaded()
    entry = registry.backends.get("opencl")
    return entry is not None and entry.backend.is_available()


needs_opencl = pytest.mark.skipif(not opencl_available(), reason="the opencl backend is not available here")


@needs_opencl
def test_opencl_alone_runs_the_smoke_script():
    # (the template backend, where installed, stays: an accelerator by its
    # descriptor but with a dozen kernels, it must not become the default)
    r = run([str(SMOKE), "--device", "opencl"], all_backends_but("opencl", "template"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "default device: opencl:0 (the cpu backend is disabled by RTX_DISABLE_BACKENDS; " \
           "opencl is the first available backend)" in r.stdout
    assert "print: tensor([[1., 2.]" in r.stdout and "device='opencl:0'" in r.stdout
    assert "smoke ok on opencl:0" in r.stdout


@needs_opencl
def test_opencl_alone_loads_a_checkpoint_saved_on_cpu_and_shuffles_data(tmp_path):
    """A checkpoint written where cpu is installed loads, without map_location,
    on the device of an install that lacks it; pickled cpu tensors likewise."""
    import pickle

    path = tmp_path / "ck.safetensors"
    rc.save({"w": rc.tensor([1.5, -2.0]), "step": 3}, str(path))
    (tmp_path / "t.pickle").write_bytes(pickle.dumps(rc.arange(3)))
    code = textwrap.dedent(f"""
        import pickle, numpy as np, rtxcore as rc
        from rtxcore.utils.data import DataLoader, random_split
        ck = rc.load({str(path)!r})
        print("LOADED", ck["w"].device, ck["w"].tolist(), ck["step"])
        t = pickle.loads(open({str(tmp_path / "t.pickle")!r}, "rb").read())
        print("PICKLED", t.device, t.tolist())
        seen = sorted(i for b in DataLoader(list(range(10)), batch_size=3, shuffle=True)
                      for i in b.tolist())
        print("SHUFFLED", seen)
        a, b = random_split(range(10), [7, 3], generator=rc.Generator().manual_seed(1))
        print("SPLIT", sorted(list(a.indices) + list(b.indices)) == list(range(10)))
        f = rc.from_numpy(np.array([1, 2], np.int64))
        print("FROM_NUMPY", f.device, f.dtype)
    """)
    r = run(["-c", code], all_backends_but("opencl"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LOADED opencl:0 [1.5, -2.0] 3" in r.stdout
    assert "PICKLED opencl:0 [0, 1, 2]" in r.stdout
    assert f"SHUFFLED {list(range(10))}" in r.stdout
    assert "SPLIT True" in r.stdout
    assert "FROM_NUMPY opencl:0 rtxcore.int64" in r.stdout


def test_a_host_memory_backend_alone_becomes_the_default_and_runs_the_smoke_script():
    """No PoCL needed: the only backend is the tests' in-process ``hostmem``
    (host buffers, rtx_cpu's kernels, registered under another name)."""
    code = textwrap.dedent(f"""
        import runpy, sys
        import numpy as np
        import rtxcore as rc
        from tests.host_backend import HostMemPlugin
        rc.register_backend(HostMemPlugin(), name="hostmem-plugin")
        arr = np.zeros(3, np.float32)
        t = rc.from_numpy(arr)
        arr[0] = 7  # the backend keeps host memory: from_numpy shares it, as on cpu
        print("SHARED", t.device, t.tolist())
        sys.argv = ["install_smoke.py", "--device", "hostmem"]
        runpy.run_path({str(SMOKE)!r}, run_name="__main__")
    """)
    r = run(["-c", code], all_backends_but())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SHARED hostmem:0 [7.0, 0.0, 0.0]" in r.stdout
    assert "default device: hostmem:0 (the cpu backend is disabled by RTX_DISABLE_BACKENDS; " \
           "hostmem is the first available backend)" in r.stdout
    assert "smoke ok on hostmem:0" in r.stdout


def test_rtx_info_says_which_device_is_the_default_and_why():
    r = run(["-m", "rtxcore", "info"], "")
    assert r.returncode == 0, r.stderr
    assert "default device: cpu (the cpu backend is installed)" in r.stdout
    r = run(["-m", "rtxcore", "info"], "", RTX_DEVICE="cpu:0")
    assert "default device: cpu (set by RTX_DEVICE='cpu:0')" in r.stdout
    r = run(["-m", "rtxcore", "info"], "", RTX_DEVICE="cpu:3")
    assert ("default device: cpu:3 (set by RTX_DEVICE='cpu:3'), which can't be used here: "
            "device cpu:3 does not exist; cpu has 1 device") in r.stdout, r.stdout
    r = run(["-m", "rtxcore", "info"], "", RTX_DEVICE="tpu")
    assert "default device: none (unknown device type 'tpu'; known device types: " in r.stdout


def test_rtx_info_without_any_backend_fails_with_the_install_hint():
    r = run(["-m", "rtxcore", "info"], all_backends_but())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no backend is installed" in r.stdout
    assert "pip install ./backends/rtx_cpu" in r.stdout
    assert "pip install 'rtxcore[cpu]'" in r.stdout
    # and using rtxcore says what to install
    r = run(["-c", "import rtxcore as rc; rc.zeros(1)"], all_backends_but())
    assert r.returncode != 0
    assert "RuntimeError: the 'cpu' backend is disabled by RTX_DISABLE_BACKENDS" in r.stderr


def test_set_default_device_and_rtx_device_override_the_choice(monkeypatch):
    device_mod = sys.modules["rtxcore.device"]  # (rtxcore.device is the class)

    monkeypatch.setattr(device_mod, "_global_default", [None])
    monkeypatch.setattr(device_mod, "_default_reason", [""])
    monkeypatch.setenv("RTX_DEVICE", "cpu")
    dev, why = device_mod.default_device_reason()
    assert dev == rc.device("cpu") and why == "set by RTX_DEVICE='cpu'"
    rc.set_default_device("cpu")
    assert device_mod.default_device_reason()[1] == "set by rtxcore.set_default_device"
    rc.set_default_device(None)
    monkeypatch.delenv("RTX_DEVICE")
    assert device_mod.default_device_reason() == (rc.device("cpu"), "the cpu backend is installed")
    with rc.device("cpu"):
        assert "with rtxcore.device" in device_mod.default_device_reason()[1]


def test_from_numpy_on_cpu_still_shares_memory():
    arr = np.zeros(4, np.float32)
    t = rc.from_numpy(arr)
    arr[1] = 5
    assert t.device == rc.device("cpu") and t.tolist() == [0.0, 5.0, 0.0, 0.0]
