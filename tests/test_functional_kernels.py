"""Functional kernels (rtxcore.dispatch.functional) and buffer release
(Backend.release), on a backend of immutable arrays (tests/readonly_backend.py):
``ro`` has destination kernels only, ``rof`` functional forms too."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import conformance

from . import readonly_backend as RB


@pytest.fixture(scope="module", autouse=True)
def backends():
    names = [rc.register_backend(RB.ReadOnlyPlugin(), name="ro"),
             rc.register_backend(RB.FunctionalPlugin(), name="rof")]
    yield
    for n in names:
        rc.unregister_backend(n)


@pytest.mark.parametrize("dev", ["ro:0", "rof:0"])
def test_the_immutable_backend_passes_conformance_strictly(dev, monkeypatch):
    monkeypatch.setenv("RTX_FALLBACK", "error")
    res = conformance.run(dev)
    assert conformance.failed(res) == [], {op: [e for e in res[op] if e[1] == "fail"]
                                          for op in conformance.failed(res)}
    # every primitive has its own kernel (no fused runner: the core runs fused
    # groups step by step, which is allowed)
    assert all(res[op] and res[op][0][1] != "missing" for op in res if op != "fuse")


def test_conformance_checks_the_functional_form_against_the_out_form(monkeypatch):
    good = rc.device("rof:0").kernels["exp"]

    def wrong(like, x):  # the functional form alone is wrong
        return good.functional(like, x) + np.asarray(1, like.dtype.numpy)

    def kernel(out, x):  # the out= form stays right
        good(out, x)

    kernel.functional = wrong
    monkeypatch.setitem(rc.device("rof:0").kernels, "exp", kernel)
    res = conformance.run("rof:0")
    assert conformance.failed(res) == ["exp"]
    detail = [d for _, s, _, d in res["exp"] if s == "fail"][0]
    assert "exp's functional form gives" in detail and "out= form wrote" in detail


def _calls(fn):
    RB.LIBRARY_CALLS.clear()
    fn()
    return dict(RB.LIBRARY_CALLS)


def test_one_library_call_per_op_with_functional_kernels():
    for dev in ("ro", "rof"):
        x = rc.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), device=dev)
        w = rc.tensor(np.ones((3, 4), np.float32), device=dev)
        counts = {
            "add": _calls(lambda: x + x), "exp": _calls(lambda: x.exp()),
            "sum": _calls(lambda: x.sum(1)), "matmul": _calls(lambda: x @ w),
            "where": _calls(lambda: rc.where(x > 2, x, 0.0)),
        }
        for op, c in counts.items():
            n = 2 if op == "where" else 1  # (where: the comparison, then where)
            if dev == "ro":  # empty, compute, copy-on-write (copy + assign) each
                assert c == {"empty": n, "compute": n, "copy": n, "assign": n}, (op, c)
            else:
                assert c == {"compute": n}, (op, c)


def test_in_place_and_out_still_use_the_destination_form():
    x = rc.tensor([1.0, 2.0, 3.0], device="rof")
    c = _calls(lambda: x.add_(1.0))
    assert c == {"compute": 1, "copy": 1, "assign": 1}
    assert x.tolist() == [2.0, 3.0, 4.0]
    out = rc.empty(3, device="rof")
    rc.mul(x, 2.0, out=out)
    assert out.tolist() == [4.0, 6.0, 8.0]
    v = x[::2]
    v.mul_(10.0)  # a strided target: write() into the holder's region
    assert x.tolist() == [20.0, 3.0, 40.0]


def _train(device, steps=5):
    rc.manual_seed(0)
    model = rc.nn.Sequential(rc.nn.Linear(4, 8), rc.nn.Tanh(), rc.nn.Linear(8, 1)).to(device)
    opt = rc.optim.Adam(model.parameters(), lr=0.05)
    g = np.random.default_rng(1)
    x = rc.tensor(g.standard_normal((16, 4)).astype(np.float32), device=device)
    y = rc.tensor(g.standard_normal((16, 1)).astype(np.float32), device=device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_training_matches_cpu_and_takes_fewer_calls():
    want = _train("cpu")
    calls = {}
    for dev in ("ro", "rof"):
        RB.LIBRARY_CALLS.clear()
        got = _train(dev)
        calls[dev] = sum(RB.LIBRARY_CALLS.values())
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert calls["rof"] < 0.6 * calls["ro"], calls


def test_compile_and_profile_see_every_op_on_a_functional_backend():
    x = rc.tensor([0.5, -1.0, 2.0], device="rof")
    f = rc.compile(lambda t: (t * 2).exp().sum())
    assert abs(f(x).item() - (x * 2).exp().sum().item()) < 1e-5
    assert abs(f(x).item() - (x * 2).exp().sum().item()) < 1e-5  # (the replay)
    assert rc.device("rof:0").functional  # restored after tracing
    with rc.profiler.profile() as prof:
        (x * 2).exp()
    names = {e.key for e in prof.key_averages()}
    assert "rof::mul" in names and "rof::exp" in names, names
    assert rc.device("rof:0").functional  # restored after profiling


def test_release_tells_the_backend_when_a_buffer_is_dead():
    gc.collect()
    RB.RELEASED.clear()
    x = rc.ones(4, device="rof")
    view = x[1:3]
    del x
    gc.collect()
    assert RB.RELEASED["rof"] == 0  # the view still holds the buffer
    del view
    gc.collect()
    assert RB.RELEASED["rof"] == 1
    y = rc.ones(4, device="rof") + 1  # the ones and the sum: two buffers, both dead
    del y
    gc.collect()
    assert RB.RELEASED["rof"] == 3
    x = rc.ones(2, 3, device="rof")
    s = x.sum(1)  # a reduction's functional result, viewed without the kept dim
    del x
    gc.collect()
    assert RB.RELEASED["rof"] == 4  # x's buffer only: the sum's is in use
    assert s.tolist() == [3.0, 3.0]
    del s
    gc.collect()
    assert RB.RELEASED["rof"] == 5  # and once


def test_a_functional_result_of_the_wrong_shape_is_named(monkeypatch):
    good = rc.device("rof:0").functional["exp"]
    monkeypatch.setitem(rc.device("rof:0").functional, "exp",
                        lambda like, x: good(like, x).reshape(-1)[:2])
    with pytest.raises(RuntimeError, match=r"returned an array of shape \(2,\) where \(2, 3\)"):
        rc.ones(2, 3, device="rof").exp()


def test_only_some_kernels_may_be_functional():
    from rtxcore.dispatch import BackendPlugin, functional
    from rtxcore.dispatch.registry import registry

    class Odd(RB.ReadOnlyBackend):
        name = "rodd"

    table = dict(RB.DESTINATION, gather=functional(lambda like, x, dim, index: None))
    name = rc.register_backend(BackendPlugin(Odd, table), name="rodd")
    try:
        rc.device("rodd:0")._resolve()
        assert "gather" not in rc.device("rodd:0").functional
        assert any("'gather' for 'rodd' is marked functional" in p.what
                   for p in registry.problems), registry.problems
    finally:
        rc.unregister_backend(name)
