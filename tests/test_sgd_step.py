"""SGD's plain step (its kernels called directly) against the update by hand in
NumPy: values, the parameter's version counter, and the general path it leaves
to (a float tensor lr, a non-contiguous parameter)."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc


def test_plain_step_values_and_version(device):
    rc.manual_seed(0)
    p = rc.randn(4, 3, device=device, requires_grad=True)
    g = rc.randn(4, 3, device=device)
    p0, g0 = p.detach().cpu().numpy().copy(), g.cpu().numpy()
    p.grad = g
    y = p * p  # saves p: the step must count as an in-place write to it
    rc.optim.SGD([p], lr=0.25).step()
    np.testing.assert_allclose(p.detach().cpu().numpy(), p0 - np.float32(0.25) * g0, rtol=1e-6)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_tensor_lr_and_strided_parameter():
    base = rc.randn(3, 4)
    p = base.t().detach().requires_grad_()  # a transposed view: not contiguous
    p.grad = rc.ones(4, 3)
    before = p.detach().numpy().copy()
    rc.optim.SGD([p], lr=rc.tensor(0.5)).step()
    np.testing.assert_allclose(p.detach().numpy(), before - 0.5, rtol=1e-6)
