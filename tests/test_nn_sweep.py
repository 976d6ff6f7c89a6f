"""Layers the sweep of public PyTorch training code found missing: RMSNorm (and
F.rms_norm), HuberLoss, KLDivLoss, CosineSimilarity, PairwiseDistance, Unflatten,
ParameterList and ParameterDict. Values against PyTorch with the same weights where
it imports, else against NumPy; gradients by gradcheck."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore import nn
from rtxcore.autograd import gradcheck

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the optional reference) "
                                                       "is not installed")


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_rms_norm_against_numpy(device):
    x = _rng().standard_normal((3, 4, 5)).astype(np.float32)
    w = _rng(1).standard_normal(5).astype(np.float32)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float32).eps) * w
    got = F.rms_norm(rc.tensor(x, device=device), (5,), rc.tensor(w, device=device))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    want2 = x / np.sqrt((x * x).mean((-2, -1), keepdims=True) + 1e-3)
    got2 = F.rms_norm(rc.tensor(x, device=device), [4, 5], eps=1e-3)
    np.testing.assert_allclose(got2.numpy(), want2, rtol=1e-5, atol=1e-6)


def test_rms_norm_gradcheck():
    x = rc.tensor(_rng().standard_normal((2, 3, 4)), dtype=rc.float64, requires_grad=True)
    w = rc.tensor(_rng(1).standard_normal(4), dtype=rc.float64, requires_grad=True)
    assert gradcheck(lambda a, b: F.rms_norm(a, 4, b, 1e-6), (x, w))


def test_rms_norm_errors():
    with pytest.raises(RuntimeError, match=r"rms_norm: given normalized_shape=\[3\]"):
        F.rms_norm(rc.ones(2, 4), 3)
    with pytest.raises(RuntimeError, match="expected weight of shape"):
        F.rms_norm(rc.ones(2, 4), 4, rc.ones(3))
    with pytest.raises(TypeError, match="floating-point"):
        F.rms_norm(rc.ones(2, 4, dtype=rc.int64), 4)


@needs_torch
@pytest.mark.parametrize("shape,eps,affine", [(8, None, True), ((3, 8), 1e-5, True),
                                              (8, 1e-6, False)])
def test_rms_norm_layer_against_torch(shape, eps, affine):
    x = _rng().standard_normal((4, 3, 8)).astype(np.float32)
    r, t = nn.RMSNorm(shape, eps, affine), torch.nn.RMSNorm(shape, eps, affine)
    if affine:
        w = _rng(2).standard_normal(r.weight.shape).astype(np.float32)
        r.weight.data = rc.tensor(w)
        t.weight.data = torch.tensor(w)
    rx, tx = rc.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ry, ty = r(rx), t(tx)
    np.testing.assert_allclose(ry.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = _rng(3).standard_normal(ry.shape).astype(np.float32)
    ry.backward(rc.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    if affine:
        np.testing.assert_allclose(r.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-4,
                                   atol=1e-5)
    assert list(r.state_dict()) == list(t.state_dict())


@needs_torch
@pytest.mark.parametrize("make", [
    lambda m: m.HuberLoss(), lambda m: m.HuberLoss(reduction="sum", delta=0.5),
    lambda m: m.KLDivLoss(reduction="batchmean"), lambda m: m.KLDivLoss(reduction="sum", log_target=True),
    lambda m: m.CosineSimilarity(dim=1), lambda m: m.PairwiseDistance(p=1.0, keepdim=True),
])
def test_two_input_layers_against_torch(make):
    a = _rng().standard_normal((4, 6)).astype(np.float32)
    b = _rng(1).standard_normal((4, 6)).astype(np.float32)
    r, t = make(nn), make(torch.nn)
    if isinstance(r, nn.KLDivLoss):
        a = np.log(np.abs(a) / np.abs(a).sum(1, keepdims=True))
        b = np.abs(b) / np.abs(b).sum(1, keepdims=True)
        if r.log_target:
            b = np.log(b)
    ra, ta = rc.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ry, ty = r(ra, rc.tensor(b)), t(ta, torch.tensor(b))
    np.testing.assert_allclose(ry.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    ry.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ra.grad.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_huber_gradcheck():
    a = rc.tensor(_rng().standard_normal((3, 4)), dtype=rc.float64, requires_grad=True)
    b = rc.tensor(_rng(1).standard_normal((3, 4)), dtype=rc.float64)
    assert gradcheck(lambda x: nn.HuberLoss(delta=0.7)(x, b), (a,))


def test_unflatten(device):
    x = rc.arange(24.0, device=device).reshape(2, 12)
    y = nn.Unflatten(1, (3, 4))(x)
    assert y.shape == (2, 3, 4)
    np.testing.assert_array_equal(y.numpy(), np.arange(24.0).reshape(2, 3, 4))
    assert "unflattened_size=(3, 4)" in repr(nn.Unflatten(1, (3, 4)))
    seq = nn.Sequential(nn.Flatten(), nn.Unflatten(1, (2, 6)))
    np.testing.assert_array_equal(seq(x.reshape(2, 3, 4)).numpy(), np.arange(24.0).reshape(2, 2, 6))


def test_parameter_list():
    pl = nn.ParameterList([rc.ones(2), nn.Parameter(rc.zeros(3))])
    assert len(pl) == 2 and all(isinstance(p, nn.Parameter) for p in pl)
    pl.append(rc.full((1,), 5.0))
    assert [tuple(p.shape) for p in pl] == [(2,), (3,), (1,)]
    assert list(pl.state_dict()) == ["0", "1", "2"]
    assert pl[-1].item() == 5.0 and len(pl[1:]) == 2
    pl[0] = rc.zeros(4)
    assert pl[0].shape == (4,) and isinstance(pl[0], nn.Parameter)
    with pytest.raises(IndexError):
        pl[3]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList(nn.Parameter(rc.ones(2)) for _ in range(3))

        def forward(self, x):
            for w in self.ws:
                x = x * w
            return x.sum()

    net = Net()
    assert len(list(net.parameters())) == 3
    net(rc.full((2,), 2.0)).backward()
    assert all(w.grad is not None for w in net.ws)
    assert list(net.state_dict()) == ["ws.0", "ws.1", "ws.2"]


def test_parameter_dict():
    pd = nn.ParameterDict({"a": rc.ones(2), "b": nn.Parameter(rc.zeros(1))})
    assert list(pd) == ["a", "b"] and "a" in pd and len(pd) == 2
    assert isinstance(pd["a"], nn.Parameter)
    pd["c"] = rc.ones(3)
    pd.update([("d", rc.ones(1))])
    assert list(pd.keys()) == ["a", "b", "c", "d"]
    assert list(pd.state_dict()) == ["a", "b", "c", "d"]
    del pd["b"]
    assert list(pd) == ["a", "c", "d"] and pd.get("b") is None
    assert pd.pop("a").shape == (2,)
    with pytest.raises(TypeError, match="keys are strings"):
        pd[1] = rc.ones(1)
    assert "(c): Parameter containing: [float32 of size (3,)]" in repr(pd)


@needs_torch
def test_parameter_containers_state_dict_keys_match_torch():
    class R(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.ParameterList([rc.ones(1), rc.ones(1)])
            self.d = nn.ParameterDict({"x": rc.ones(1)})

    class T(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.ParameterList([torch.ones(1), torch.ones(1)])
            self.d = torch.nn.ParameterDict({"x": torch.ones(1)})

    assert list(R().state_dict()) == list(T().state_dict())
