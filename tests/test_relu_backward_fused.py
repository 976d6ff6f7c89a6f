"""ReLU's and LeakyReLU's backward as one fused elementwise program where the
device runs them (``Backend.fuse``): the same bits as the ops (mask, product,
select), on every device, special values included; the ops while recording
(double backward) and for small or non-contiguous operands."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd.rules import pointwise as P

SHAPES = [(32, 32, 16, 16), (64, 16, 8, 8), (3, 5)]


def _values(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = 0.0
    flat[1::11] = -0.0
    flat[3] = np.nan
    flat[5] = np.inf
    flat[6] = -np.inf
    g = rng.standard_normal(shape).astype(np.float32)
    g.reshape(-1)[2] = np.nan
    return x, g


def _grad(device, act, x, g, dtype):
    t = rc.tensor(x, dtype=dtype, device=device, requires_grad=True)
    act(t).backward(rc.tensor(g, dtype=dtype, device=device))
    return t.grad.cpu().numpy()


ACTS = {"relu": rc.nn.functional.relu,
        "leaky_relu": lambda t: rc.nn.functional.leaky_relu(t, 0.2),
        "leaky_relu 1.5": lambda t: rc.nn.functional.leaky_relu(t, 1.5)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", sorted(ACTS))
def test_the_fused_backward_gives_the_ops_bits(device, act, dtype, monkeypatch):
    dt = getattr(rc, dtype)
    calls = []
    real = P._fused_select
    monkeypatch.setattr(P, "_fused_select", lambda *a: calls.append(1) or real(*a))
    for i, shape in enumerate(SHAPES):
        x, g = _values(shape, i)
        fused = _grad(device, ACTS[act], x, g, dt)
        monkeypatch.setattr(P, "_FUSE_MIN", 1 << 62)
        ops = _grad(device, ACTS[act], x, g, dt)
        monkeypatch.setattr(P, "_FUSE_MIN", 1 << 15)
        assert fused.tobytes() == ops.tobytes(), (act, shape)
    assert calls  # (the rule asked for the fused pass)
    assert any(k[0] == rc.device(device) for k in P._RUNNERS) or \
        not rc.device(device).backend.fuse  # (a runner was made where the device has them)


def test_recording_and_small_or_strided_operands_take_the_ops():
    P._RUNNERS.clear()
    x = rc.randn(64, 1024, requires_grad=True)
    # double backward: the first backward records, so the rule takes the ops
    (gx,) = rc.autograd.grad(rc.nn.functional.leaky_relu(x, 0.1).square().sum(), x,
                             create_graph=True)
    assert not P._RUNNERS and gx.requires_grad
    gx.sum().backward()  # (this one doesn't record: its leaky_relu step may fuse)
    assert x.grad is not None
    P._RUNNERS.clear()
    # a transposed gradient: the ops
    y = rc.nn.functional.relu(x)
    y.backward(rc.randn(1024, 64).t())
    assert not P._RUNNERS
    # small: the ops; large and contiguous: one program
    rc.nn.functional.relu(rc.randn(8, 8, requires_grad=True)).sum().backward()
    assert not P._RUNNERS
    rc.nn.functional.relu(rc.randn(64, 1024, requires_grad=True)).backward(rc.randn(64, 1024))
    assert list(P._RUNNERS) == [(rc.device("cpu"), "float32", False, 65536)]


def test_gradcheck_through_the_fused_pass(monkeypatch):
    from rtxcore.autograd import gradcheck

    monkeypatch.setattr(P, "_FUSE_MIN", 1)  # (a small input through the fused pass)
    fused = []
    real = P._fused_select
    monkeypatch.setattr(P, "_fused_select", lambda *a: fused.append(real(*a)) or fused[-1])
    x = (rc.randn(4, 5, dtype=rc.float64) + 0.05).requires_grad_()
    for fn in (rc.nn.functional.relu, lambda t: rc.nn.functional.leaky_relu(t, 0.3)):
        assert gradcheck(lambda t: fn(t) * 1.0, (x,), atol=1e-6)
    assert any(r is not None for r in fused)
