"""In-place activations (``inplace=True``, the ``F.*_`` forms, the modules) give
the gradients of their out-of-place forms, after a layer as models use them."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck

# name -> (functional call with inplace, out-of-place reference), for x of any sign
CASES = {
    "relu": (lambda x: F.relu(x, inplace=True), F.relu),
    "relu6": (lambda x: F.relu6(x, inplace=True), F.relu6),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.5, inplace=True), lambda x: F.hardtanh(x, -0.5, 0.5)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2, inplace=True), lambda x: F.leaky_relu(x, 0.2)),
    "elu": (lambda x: F.elu(x, 0.7, inplace=True), lambda x: F.elu(x, 0.7)),
    "selu": (lambda x: F.selu(x, inplace=True), F.selu),
    "celu": (lambda x: F.celu(x, 1.3, inplace=True), lambda x: F.celu(x, 1.3)),
    "silu": (lambda x: F.silu(x, inplace=True), F.silu),
    "mish": (lambda x: F.mish(x, inplace=True), F.mish),
    "hardsigmoid": (lambda x: F.hardsigmoid(x, inplace=True), F.hardsigmoid),
    "hardswish": (lambda x: F.hardswish(x, inplace=True), F.hardswish),
    "threshold": (lambda x: F.threshold(x, 0.1, -2.0, inplace=True), lambda x: F.threshold(x, 0.1, -2.0)),
    "leaky_relu_": (lambda x: F.leaky_relu_(x, 0.2), lambda x: F.leaky_relu(x, 0.2)),
    "elu_": (lambda x: F.elu_(x, 0.7), lambda x: F.elu(x, 0.7)),
    "hardtanh_": (lambda x: F.hardtanh_(x, -0.5, 0.5), lambda x: F.hardtanh(x, -0.5, 0.5)),
    "threshold_": (lambda x: F.threshold_(x, 0.1, -2.0), lambda x: F.threshold(x, 0.1, -2.0)),
    "celu_": (lambda x: F.celu_(x, 1.3), lambda x: F.celu(x, 1.3)),
    "selu_": (F.selu_, F.selu),
    "relu_": (F.relu_, F.relu),
}

# values away from each activation's kinks, so finite differences are smooth
X = np.array([[-1.7, -0.9, -0.35, 0.3], [0.45, 0.8, 1.9, -2.6], [3.1, -0.6, 0.65, -1.2]])


def _layer_then(act):
    """``act`` applied to a linear layer's output: the input to ``act`` has a
    history whose backward rules saved tensors (as in a model)."""
    rc.manual_seed(0)
    lin = nn.Linear(4, 4).double()
    with rc.no_grad():  # a weight near the identity keeps X's values (and kinks) apart
        lin.weight.copy_(rc.eye(4, dtype=rc.float64) + 0.01 * lin.weight)
        lin.bias.zero_()
    return lin, (lambda x: act(lin(x)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_gradients_equal_out_of_place(name):
    inplace, reference = CASES[name]
    x = rc.tensor(X, dtype=rc.float64, requires_grad=True)
    lin, f = _layer_then(inplace)
    y = f(x)
    (y * rc.arange(12, dtype=rc.float64).reshape(3, 4)).sum().backward()
    got = (x.grad.numpy().copy(), lin.weight.grad.numpy().copy())

    x2 = rc.tensor(X, dtype=rc.float64, requires_grad=True)
    lin2, f2 = _layer_then(reference)
    y2 = f2(x2)
    (y2 * rc.arange(12, dtype=rc.float64).reshape(3, 4)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), y2.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[0], x2.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], lin2.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_gradcheck(name):
    inplace, _ = CASES[name]
    _, f = _layer_then(inplace)
    assert gradcheck(f, (rc.tensor(X, dtype=rc.float64, requires_grad=True),))


@pytest.mark.parametrize("module", [
    nn.LeakyReLU(0.2, inplace=True), nn.ELU(inplace=True), nn.SiLU(inplace=True),
    nn.ReLU(inplace=True), nn.Hardswish(inplace=True), nn.SELU(inplace=True), nn.Mish(inplace=True),
], ids=lambda m: type(m).__name__)
def test_inplace_modules_after_conv_train(module):
    # as a DCGAN's discriminator writes it: Conv2d then an in-place activation
    rc.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(1, 2, 3), module, nn.Conv2d(2, 1, 3))
    x = rc.randn(2, 1, 6, 6)
    net(x).sum().backward()
    g_inplace = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    module.inplace = False
    try:
        net(x).sum().backward()
    finally:
        module.inplace = True
    for a, p in zip(g_inplace, net.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_inplace_on_a_leaf_that_requires_grad_is_refused():
    x = rc.tensor([1.0, -1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.leaky_relu(x, 0.2, inplace=True)
    with rc.no_grad():  # outside recording it is a plain in-place write
        F.leaky_relu_(x, 0.5)
    assert x.tolist() == [1.0, -0.5]


def test_inplace_writes_the_input_and_returns_it():
    for name, (inplace, reference) in CASES.items():
        x = rc.tensor(X, dtype=rc.float64)
        expected = reference(x.clone()).numpy()
        out = inplace(x)
        assert out is x or out.data_ptr() == x.data_ptr(), name
        np.testing.assert_allclose(x.numpy(), expected, rtol=1e-12, err_msg=name)


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "silu", "mish", "hardswish", "selu", "celu"])
def test_inplace_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    fn = {"leaky_relu": lambda F_, x: F_.leaky_relu(x, 0.2, inplace=True),
          "elu": lambda F_, x: F_.elu(x, 0.7, inplace=True),
          "silu": lambda F_, x: F_.silu(x, inplace=True),
          "mish": lambda F_, x: F_.mish(x, inplace=True),
          "hardswish": lambda F_, x: F_.hardswish(x, inplace=True),
          "selu": lambda F_, x: F_.selu(x, inplace=True),
          "celu": lambda F_, x: F_.celu(x, 1.3, inplace=True)}[name]
    w = np.linspace(-1, 1, 16).reshape(4, 4)
    xr = rc.tensor(X, dtype=rc.float64, requires_grad=True)
    wr = rc.tensor(w, dtype=rc.float64, requires_grad=True)
    yr = fn(F, xr @ wr)
    (yr * yr).sum().backward()
    xt = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    yt = fn(torch.nn.functional, xt @ wt)
    (yt * yt).sum().backward()
    np.testing.assert_allclose(yr.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    # (PyTorch's own celu gradients differ by 6e-8 between its in-place and
    # out-of-place forms in float64: it rounds 1/alpha through float)
    tol = 1e-7 if name == "celu" else 1e-10
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=tol, atol=1e-12)
    np.testing.assert_allclose(wr.grad.numpy(), wt.grad.numpy(), rtol=tol, atol=1e-12)


# -- leaky_relu: one node, its gradient read off the output ------------------------

SPECIAL = np.array([-3.0, -0.5, -0.0, 0.0, 1e-40, -1e-40, 0.5, 2.0, 3e38, -3e38,
                    np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("slope", [0.01, 0.2, 1.0, 3.0, 1e-30])
def test_leaky_relu_bits_equal_the_branch_form(device, slope):
    # max(x, s x) / min(x, s x) against x > 0 ? x : s x, signed zeros, subnormals,
    # overflow, inf and NaN included
    with np.errstate(over="ignore"):
        want = np.where(SPECIAL > 0, SPECIAL, SPECIAL * np.float32(slope))
    got = F.leaky_relu(rc.tensor(SPECIAL, device=device), slope).cpu().numpy()
    assert np.array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("slope", [0.2, 3.0])
def test_leaky_relu_is_one_node_and_gradchecks_twice(slope):
    x = rc.tensor(X, requires_grad=True)
    y = F.leaky_relu(x, slope)
    # one node, straight on the leaf (PyTorch's name for it)
    assert y.grad_fn.name() == "LeakyReluBackward"
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "AccumulateGrad"
    assert gradcheck(lambda a: F.leaky_relu(a, slope), (x,))
    assert rc.autograd.gradgradcheck(lambda a: F.leaky_relu(a, slope) * a, (x,))
    # at 0 the gradient is the slope, as PyTorch's
    z = rc.tensor([0.0, -0.0], dtype=rc.float64, requires_grad=True)
    F.leaky_relu(z, slope).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [slope, slope])


def test_leaky_relu_in_place_needs_no_copy_of_its_input():
    from rtxcore import profiler

    a = rc.tensor(X, requires_grad=True)
    h = a * 1.0
    with profiler.profile() as prof:
        F.leaky_relu(h, 0.2, inplace=True)
    # s x, max, the write back: no clone of the input for the backward, no mask
    kernels = [e.name for e in prof.events() if e.name.startswith("cpu::")]
    assert [k for k in kernels if k != "cpu::empty"] == ["cpu::mul", "cpu::maximum", "cpu::copy"]
    h.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.where(X > 0, 1.0, 0.2))


@pytest.mark.parametrize("slope", [0.0, -0.5])
def test_leaky_relu_without_a_positive_slope_keeps_the_branch_form(slope):
    x = rc.tensor(X, requires_grad=True)
    assert gradcheck(lambda a: F.leaky_relu(a, slope), (x,))
    np.testing.assert_array_equal(F.leaky_relu(x, slope).detach().numpy(),
                                  np.where(X > 0, X, slope * X))
