"""Tracing is per thread: compiled functions traced and replayed from several
threads at once, beside threads running eager ops, give the one-thread results,
and leave every device's kernel table as the backend made it."""

import importlib
import threading

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore.device import Device
from rtxcore.optim.optimizer import Optimizer

T = importlib.import_module("rtxcore.jit.trace")  # (rtxcore.jit.trace is also a function)


def _untouched():
    """No device, generator or optimizer is left routed through a tracer."""
    for dev in list(Device._interned.values()):
        if dev._ready:
            assert all(T.untraced(k) is k for k in dev.kernels.values()), dev
            assert T.untraced(dev.view) is dev.view, dev
    assert not hasattr(rc.random.Generator.take, "_rtx_routed")
    assert not hasattr(Optimizer.step, "_rtx_routed")
    assert T._traces == 0 and not T._routed and not T._patched


_init_lock = threading.Lock()


def _work(kind, seed, device):
    """One thread's job: its results, recomputed the same way by any thread."""
    rng = np.random.default_rng(seed)
    w = rc.tensor(rng.standard_normal((16, 16)).astype(np.float32), device=device)
    xs = [rc.tensor(rng.standard_normal((8, 16)).astype(np.float32), device=device)
          for _ in range(6)]
    if kind == "eager":
        return [_np((x @ w).tanh() * 0.5 + x.exp().mean()) for x in xs for _ in range(3)]

    def f(x):
        h = (x @ w).tanh() * 0.5 + x.exp().mean()
        return h * h - 1

    cf = rc.compile(f)  # each thread traces its own function, and replays it
    out = [_np(cf(x)) for x in xs]
    with _init_lock:  # (the default generator is one for all threads)
        rc.manual_seed(seed)
        m = nn.Sequential(nn.Linear(16, 8), nn.GELU(), nn.Linear(8, 2)).to(device)
    opt = rc.optim.AdamW(m.parameters(), lr=1e-2)

    def step(x):
        opt.zero_grad()
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    cstep = rc.compile(step)
    out += [_np(cstep(x)) for x in xs]
    out += [_np(p) for p in m.parameters()]
    return out


def _np(t):
    return t.detach().cpu().numpy().copy()


def test_eight_threads_compiling_and_calling_beside_eager_threads(device):
    jobs = [("compiled" if i % 2 == 0 else "eager", 100 + i) for i in range(8)]
    want = [_work(kind, seed, device) for kind, seed in jobs]  # one thread, one by one
    _untouched()
    for _ in range(2):
        got: list = [None] * len(jobs)
        errors: list = []
        start = threading.Barrier(len(jobs))

        def run(i, kind, seed):
            try:
                start.wait()
                got[i] = _work(kind, seed, device)
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i, *job)) for i, job in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for (kind, _), g, w in zip(jobs, got, want):
            assert len(g) == len(w)
            for a, b in zip(g, w):
                np.testing.assert_array_equal(a, b, err_msg=kind)
        _untouched()


def test_an_exception_while_tracing_puts_everything_back():
    x = rc.ones(3)
    other_done = threading.Event()
    results = []

    def eager_meanwhile():
        for _ in range(200):
            results.append(_np(x * 2 + 1))
        other_done.set()

    def bad(t):
        y = t * 3
        threading.Thread(target=eager_meanwhile).start()
        other_done.wait(30)
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        rc.jit.trace(bad, x)
    _untouched()
    assert len(results) == 200 and all(r.tolist() == [3.0, 3.0, 3.0] for r in results)
    traced = rc.jit.trace(lambda t: t * 3, x)  # and the next trace records only its thread
    assert [n.op for n in traced.graph.kernels()] == ["mul"]


def test_a_trace_does_not_record_another_threads_kernels():
    x = rc.ones(4)
    go, done = threading.Event(), threading.Event()

    def other():
        go.wait(30)
        for _ in range(50):
            (x + 5).exp()
        done.set()

    threading.Thread(target=other).start()

    def f(t):
        go.set()
        done.wait(30)
        return t * 2

    traced = rc.jit.trace(f, x)
    assert [n.op for n in traced.graph.kernels()] == ["mul"]
    _untouched()
