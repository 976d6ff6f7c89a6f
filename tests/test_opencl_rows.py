"""rtx_opencl's row kernels (``row_kernels``): softmax, log_softmax, their
backwards, layer_norm and its backward, one work item a row. The front-end
runs them; values equal the cpu backend's to the dtype's rounding along any
axis and on strided operands, with NaN, -inf and large values in rows; float16
computes in float; gradients through gradcheck in float64."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck

R = pytest.importorskip("rtx_opencl.runtime")
pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")

TOL = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-12}


def _spy(monkeypatch, *ops):
    calls = []
    table = rc.tensor([0.0], device="opencl")._device.kernels
    for op in ops:
        real = table[op]
        monkeypatch.setitem(table, op, lambda *a, real=real, op=op: calls.append(op) or real(*a))
    return calls


def _close(got, want, dtype):
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok].astype(np.float64), want[ok].astype(np.float64),
                               rtol=TOL[dtype] * 4, atol=TOL[dtype] * 4)


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 4).astype(dtype)
    flat = a.reshape(-1)
    flat[3] = np.nan  # a NaN row
    flat[shape[-1] * 2: shape[-1] * 3] = -np.inf  # a row of -inf: NaN, as the core's
    flat[shape[-1] * 4 + 1] = 60 if dtype == np.float16 else 500  # exp would overflow
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_family_on_opencl_equals_the_cpu_backend(fn, axis, dtype, monkeypatch):
    calls = _spy(monkeypatch, fn, fn + "_backward")
    a = _data((6, 7, 9), dtype)
    g = np.random.default_rng(1).standard_normal(a.shape).astype(dtype)
    out = {}
    for dev in ("opencl", "cpu"):
        x = rc.tensor(a, device=dev).transpose(0, 2)  # strided rows
        x = x.detach().requires_grad_()
        y = getattr(F, fn)(x, dim=axis)
        y.backward(rc.tensor(np.ascontiguousarray(g.transpose(2, 1, 0)), device=dev))
        out[dev] = (y.detach().numpy(), x.grad.numpy())
    assert fn in calls and fn + "_backward" in calls
    for got, want in zip(out["opencl"], out["cpu"]):
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_on_opencl_equals_the_cpu_backend(affine, dtype, monkeypatch):
    calls = _spy(monkeypatch, "layer_norm", "layer_norm_backward")
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((5, 3, 40)) * 3 + 20).astype(dtype)
    g = rng.standard_normal(a.shape).astype(dtype)
    w = rng.standard_normal(40).astype(dtype) if affine != "none" else None
    b = rng.standard_normal(40).astype(dtype) if affine == "both" else None
    out = {}
    for dev in ("opencl", "cpu"):
        x = rc.tensor(a, device=dev, requires_grad=True)
        wt = None if w is None else rc.tensor(w, device=dev, requires_grad=True)
        bt = None if b is None else rc.tensor(b, device=dev, requires_grad=True)
        y = F.layer_norm(x, (40,), wt, bt)
        y.backward(rc.tensor(g, device=dev))
        out[dev] = [y.detach().numpy(), x.grad.numpy()] + \
            [t.grad.numpy() for t in (wt, bt) if t is not None]
    assert calls == ["layer_norm", "layer_norm_backward"]
    tol = TOL[dtype] * (50 if dtype == np.float16 else 20)  # (the parameters' sums: 15 rows)
    for got, want in zip(out["opencl"], out["cpu"]):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol * max(1.0, float(np.abs(want).max())))


def test_row_kernels_pass_gradcheck_in_float64():
    rng = np.random.default_rng(3)
    x = rc.tensor(rng.standard_normal((4, 6)), device="opencl", requires_grad=True)
    w = rc.tensor(rng.standard_normal(6), device="opencl", requires_grad=True)
    b = rc.tensor(rng.standard_normal(6), device="opencl", requires_grad=True)
    assert gradcheck(lambda t: F.softmax(t, dim=0), (x,))
    assert gradcheck(lambda t: F.log_softmax(t, dim=1), (x,))
    assert gradcheck(lambda *t: F.layer_norm(t[0], (6,), t[1], t[2]), (x, w, b))
    assert gradcheck(lambda t: F.cross_entropy(t, rc.tensor([0, 5, 2, 1], device="opencl")), (x,))
