"""conv_transpose2d through the backend's conv2d kernels (the forward is
conv2d_input_grad, the backward conv2d and conv2d_weight_grad): the same values
and gradients as the core's tensor-op form and as PyTorch, on every
stride/padding/output_padding/dilation path, and differentiable twice."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
import rtxcore.nn.functional.convolution as C
from rtxcore.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:
    torch = None

CASES = [  # n, c_in, c_out, h, w, k, stride, padding, output_padding, dilation
    (2, 3, 4, 5, 6, 3, 1, 0, 0, 1), (2, 3, 4, 5, 6, 3, 2, 1, 1, 1),
    (1, 8, 16, 4, 4, 4, 2, 1, 0, 1), (2, 2, 3, 7, 5, 3, 2, 2, 1, 2),
    (3, 4, 2, 3, 3, 2, 3, 0, 2, 1), (2, 5, 3, 6, 6, 5, 1, 2, 0, 1),
    (1, 2, 2, 4, 4, 3, 2, 1, 1, 3),
    (2, 4, 3, 3, 4, 3, 1, 0, 2, 3),  # output_padding >= stride: the core's form
]


def _kernel_used(monkeypatch):
    calls = []
    orig = C._ConvTranspose2dKernel.apply
    monkeypatch.setattr(C._ConvTranspose2dKernel, "apply",
                        lambda *a: calls.append(1) or orig(*a))
    return calls


def _run(device, case, dtype, core):
    n, ci, co, h, w, k, s, p, op, d = case
    g = np.random.default_rng(sum(case))
    x, wt, b = (g.standard_normal(sh) for sh in ((n, ci, h, w), (ci, co, k, k), (co,)))
    rx, rw, rb = (rc.tensor(a, dtype=dtype, device=device, requires_grad=True)
                  for a in (x, wt, b))
    if core:
        out = C._conv_transpose2d_cols(rx, rw, rb, 1, (s, s), (p, p), (op, op), (d, d))
    else:
        out = F.conv_transpose2d(rx, rw, rb, s, p, op, 1, d)
    gout = g.standard_normal(tuple(out.shape))
    out.backward(rc.tensor(gout, dtype=dtype, device=device))
    return [out.detach().cpu().numpy(), rx.grad.cpu().numpy(), rw.grad.cpu().numpy(),
            rb.grad.cpu().numpy()], (x, wt, b, gout)


@pytest.mark.parametrize("case", CASES)
def test_kernels_give_the_core_forms_values_and_gradients(device, case, monkeypatch):
    calls = _kernel_used(monkeypatch)
    got, _ = _run(device, case, rc.float64 if rc.device(device).supports(rc.float64)
                  else rc.float32, core=False)
    want, _ = _run(device, case, rc.float64 if rc.device(device).supports(rc.float64)
                   else rc.float32, core=True)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    n, ci, co, h, w, k, s, p, op, d = case
    if op < s and C._conv2d_kernels(rc.ones(1, device=device), rc.ones(1, device=device), None):
        assert calls  # (a backend with conv kernels takes this path)
    if op >= s:
        assert not calls


@pytest.mark.skipif(torch is None, reason="PyTorch (the optional reference) is not installed")
@pytest.mark.parametrize("case", CASES)
def test_against_torch(case):
    got, (x, wt, b, gout) = _run("cpu", case, rc.float64, core=False)
    n, ci, co, h, w, k, s, p, op, d = case
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, wt, b))
    to = torch.nn.functional.conv_transpose2d(tx, tw, tb, s, p, op, 1, d)
    to.backward(torch.tensor(gout))
    for a, t in zip(got, (to.detach(), tx.grad, tw.grad, tb.grad)):
        np.testing.assert_allclose(a, t.numpy(), rtol=1e-10, atol=1e-10)


def test_differentiable_twice():
    g = np.random.default_rng(3)
    x = rc.tensor(g.standard_normal((1, 2, 3, 3)), dtype=rc.float64, requires_grad=True)
    w = rc.tensor(g.standard_normal((2, 3, 3, 3)), dtype=rc.float64, requires_grad=True)

    def f(a, b):
        return F.conv_transpose2d(a, b, None, 2, 1, 1)

    assert gradcheck(f, (x, w)) and gradgradcheck(f, (x, w))


def test_float16_rounds_the_float32_result_once():
    g = np.random.default_rng(4)
    x = g.standard_normal((2, 4, 5, 5)).astype(np.float16)
    w = g.standard_normal((4, 3, 3, 3)).astype(np.float16)
    half = F.conv_transpose2d(rc.tensor(x), rc.tensor(w), stride=2, padding=1).numpy()
    full = F.conv_transpose2d(rc.tensor(x.astype(np.float32)), rc.tensor(w.astype(np.float32)),
                              stride=2, padding=1).numpy()
    np.testing.assert_allclose(half.astype(np.float32), full, rtol=2e-3, atol=2e-3)
    assert half.dtype == np.float16
