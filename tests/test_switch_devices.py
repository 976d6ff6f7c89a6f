"""Switching devices mid-training (examples/switch_devices.py) on every ordered pair
of devices, the default device (``with rc.device``, ``RTX_DEVICE``), exact
round trips between devices, and optimizer state left on the wrong device."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import nn

from .conftest import _devices
from .dtypes_table import ALL, need, npdt, rdt

ROOT = Path(__file__).resolve().parent.parent


def _load_example():
    spec = importlib.util.spec_from_file_location(
        "switch_devices_example", ROOT / "examples" / "switch_devices.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


example = _load_example()


# -- the example's scenario on every ordered pair of devices ------------------------------


@pytest.mark.parametrize("source,target", list(permutations(_devices(), 2)))
def test_switch_matches_all_cpu_run(source, target):
    r = example.run(source, target, steps=20)
    assert r["steps_match"]
    assert np.isfinite(r["loss"]) and r["loss"] < 0.2  # it did learn something
    for key in ("param_diff", "state_diff", "loss_diff"):
        assert r[key] <= example.TOL, (key, r)


def test_example_main(capsys):
    assert example.main(["--device", "opencl", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "nn.Linear weight -> opencl:0" in out
    assert f"results match an all-cpu run to within {example.TOL:g}" in out


# -- the default device -------------------------------------------------------------------


def test_with_device_sets_default(device):
    dev = rc.device(device)
    with rc.device(device):
        layer = nn.Linear(3, 2)
        assert rc.zeros(2).device == dev
        assert rc.randn(2, 3).device == dev
        assert layer.weight.device == dev and layer.bias.device == dev
        with rc.device("cpu"):  # nests
            assert rc.zeros(1).device == rc.device("cpu")
        assert rc.ones(1).device == dev
    assert rc.zeros(1).device == rc.get_default_device()


def test_rtx_device_env_sets_default():
    code = textwrap.dedent("""
        import rtxcore as rc
        from rtxcore import nn
        print(rc.zeros(1).device, rc.randn(2).device, nn.Linear(2, 2).weight.device)
    """)
    env = {**os.environ, "RTX_DEVICE": "opencl"}
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["opencl:0"] * 3


# -- moving tensors -----------------------------------------------------------------------


def _values(name: str, shape=(5, 6)) -> np.ndarray:
    n = int(np.prod(shape))
    rng = np.random.default_rng(0)
    if name == "bool":
        return rng.random(shape) < 0.5
    dt = npdt(name)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        vals[:4] = [info.min, info.max, 0, 1]
        return vals.reshape(shape)
    info = np.finfo(dt)
    vals = rng.standard_normal(n).astype(dt) * 100
    vals[:8] = [np.nan, np.inf, -np.inf, -0.0, info.max, info.tiny,
                info.smallest_subnormal, -info.eps]
    return vals.reshape(shape)


def _same_bits(a: np.ndarray, b: np.ndarray, nan_payload: bool = False) -> bool:
    """Bit for bit (so -0.0 and subnormals count); a NaN need only stay a NaN
    unless ``nan_payload``."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f" and not nan_payload:
        nan = np.isnan(a)
        if not np.array_equal(nan, np.isnan(b)):
            return False
        a, b = a[~nan], b[~nan]
    return a.tobytes() == b.tobytes()


VIEWS = {
    "contiguous": (lambda t: t, lambda a: a),
    "transposed": (lambda t: t.transpose(0, 1), lambda a: a.T),
    "offset_step": (lambda t: t[1:, ::2], lambda a: a[1:, ::2]),
    "column": (lambda t: t[:, 3], lambda a: a[:, 3]),
    "expanded": (lambda t: t[2:3].expand(4, 6), lambda a: np.broadcast_to(a[2:3], (4, 6))),
}


@pytest.mark.parametrize("name", ALL)
def test_round_trip_is_exact(device, name):
    need(device, name)
    a = _values(name)
    cpu = rc.tensor(a, device="cpu")
    for view, (tview, aview) in VIEWS.items():
        on_dev = tview(cpu).to(device)  # a cpu view moved to the device
        assert on_dev.device == rc.device(device) and on_dev.dtype == rdt(name)
        back = on_dev.to("cpu")
        assert _same_bits(back.numpy(), aview(a)), (view, "cpu -> device -> cpu")
        whole = cpu.to(device)  # a view taken on the device, moved back
        assert _same_bits(tview(whole).to("cpu").numpy(), aview(a)), (view, "device view -> cpu")
    assert _same_bits(cpu.numpy(), a)  # the source is untouched


def test_strided_float16_copy_keeps_nan_payload():
    # strided copies move bits, not values: a float16 NaN keeps its payload
    a = np.array([[np.nan, 1.0], [2.0, 3.0]], np.float16)
    t = rc.tensor(a, device="opencl").transpose(0, 1)
    assert _same_bits(t.to("cpu").numpy(), a.T, nan_payload=True)


def test_numpy_of_device_tensor(device):
    t = rc.arange(6, dtype=rc.float32, device=device)
    arr = t.numpy()
    arr[0] = 100.0
    if rc.device(device).backend.shares_host_memory:  # cpu: shares memory, as PyTorch
        assert t[0].item() == 100.0
    else:  # opencl: a copy, each time
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert not np.shares_memory(t.numpy(), t.numpy())


def test_numpy_of_opencl_tensor_is_a_copy():
    t = rc.tensor([[1, 2, 3], [4, 5, 6]], dtype=rc.int32, device="opencl")
    arr = t.transpose(0, 1).numpy()
    arr[...] = 0
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]


# -- optimizer state on another device than its parameters --------------------------------


@pytest.mark.parametrize("dev", [d for d in _devices() if rc.device(d) != rc.device("cpu")])
@pytest.mark.parametrize("make_opt", [
    lambda ps: rc.optim.Adam(ps, lr=0.1),
    lambda ps: rc.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: rc.optim.RMSprop(ps, lr=0.1),
], ids=["Adam", "SGD", "RMSprop"])
def test_step_with_state_on_another_device(dev, make_opt):
    device = dev
    rc.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = make_opt(model.parameters())
    x = rc.randn(8, 3)

    def step(x):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    step(x)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    counts = [s.get("step") for s in opt.state.values()]
    model.to(device)  # the state stays on cpu
    with pytest.raises(RuntimeError, match=r"optimizer state '\w+' of parameter 0 in group 0 "
                       r"is on cpu, but the parameter is on .*load_state_dict"):
        step(x.to(device))
    # refused before anything changed: no parameter moved, no step count advanced
    assert [s.get("step") for s in opt.state.values()] == counts
    for k, v in model.state_dict().items():
        assert _same_bits(v.cpu().numpy(), before[k].numpy()), k
    opt.load_state_dict(opt.state_dict())  # the fix the message names
    step(x.to(device))
    assert all(t.device == rc.device(device) for s in opt.state.values() for t in s.values()
               if isinstance(t, rc.Tensor))
