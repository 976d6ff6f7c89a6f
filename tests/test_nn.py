"""nn.Module mechanics, layers (shapes, initialisation, gradients through their
parameters), containers, and the errors a user meets first."""

from __future__ import annotations

import copy
import math
from collections import OrderedDict

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import nn
from rtxcore.autograd import gradcheck
from rtxcore.testing import assert_close


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 2, bias=False)
        self.register_buffer("steps", rc.zeros((), dtype=rc.int64))
        self.register_buffer("scratch", rc.zeros(2), persistent=False)
        self.scale = nn.Parameter(rc.ones(1))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


# -- registration and traversal ----------------------------------------------------------


def test_registration_by_attribute():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [type(m).__name__ for m in net.modules()] == ["Net", "Linear", "ReLU", "Linear"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in net.parameters())
    assert net.fc2.bias is None
    # plain tensors are attributes, not parameters
    net.extra = rc.ones(2)
    assert "extra" not in dict(net.named_parameters())
    # reassigning a parameter slot with a non-Parameter is refused
    with pytest.raises(TypeError, match="fc1|weight|parameter"):
        net.fc1.weight = rc.ones(3, 4)
    del net.fc2
    assert "fc2.weight" not in dict(net.named_parameters())


def test_shared_parameters_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3


def test_setattr_before_init_raises():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(rc.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_missing_attribute_message():
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        nn.Linear(2, 2).nope


# -- state ------------------------------------------------------------------------------


def test_state_dict_round_trip_exact():
    a, b = Net(), Net()
    a.steps.add_(7)
    sd = a.state_dict()
    assert list(sd) == ["scale", "steps", "fc1.weight", "fc1.bias", "fc2.weight"]
    assert all(not t.requires_grad for t in sd.values())
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    for k, v in b.state_dict().items():
        assert np.array_equal(v.numpy(), sd[k].numpy()), k
    # the parameter objects are the same after loading (optimizers keep working)
    assert isinstance(b.fc1.weight, nn.Parameter) and b.fc1.weight.requires_grad


def test_load_state_dict_errors_list_everything():
    net = Net()
    sd = net.state_dict()
    del sd["fc1.bias"]
    del sd["scale"]
    sd["nope"] = rc.zeros(1)
    sd["fc2.weight"] = rc.zeros(5, 5)
    with pytest.raises(RuntimeError) as ei:
        net.load_state_dict(sd)
    msg = str(ei.value)
    for part in ('Missing key(s)', '"fc1.bias"', '"scale"', 'Unexpected key(s)', '"nope"',
                 "size mismatch for fc2.weight", "(5, 5)", "(2, 3)"):
        assert part in msg, part
    # non-strict: mismatched shapes still raise, keys are returned
    del sd["fc2.weight"]
    before = net.fc1.weight.detach().clone()
    sd["fc1.weight"] = rc.full((3, 4), 2.0)
    res = net.load_state_dict(sd, strict=False)
    assert sorted(res.missing_keys) == ["fc1.bias", "fc2.weight", "scale"]
    assert res.unexpected_keys == ["nope"]
    assert np.all(net.fc1.weight.detach().numpy() == 2.0) and not np.all(before.numpy() == 2.0)


def test_train_eval_and_requires_grad():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert net.training and net[1].training
    net.eval()
    assert not net.training and not net[1].training
    net.train()
    assert net[1].training
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_zero_grad_and_apply():
    net = Net()
    net(rc.randn(5, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Linear", "Net"]


def test_to_dtype_and_device_keep_parameter_objects(device):
    net = Net()
    w = net.fc1.weight
    net.to(device)
    assert net.fc1.weight is w and w.device == rc.device(device)
    assert net.steps.device == rc.device(device)
    net.to(rc.float64)
    assert w.dtype == rc.float64 and net.steps.dtype == rc.int64  # ints stay ints
    out = net(rc.randn(2, 4, dtype=rc.float64, device=device))
    assert out.dtype == rc.float64
    with pytest.raises(TypeError, match="floating point"):
        net.to(rc.int32)


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h = lin.register_forward_hook(lambda m, inp, out: calls.append(out.shape) or out * 0)
    out = lin(rc.ones(3, 2))
    assert calls == [rc.Size([3, 2])] and np.all(out.detach().numpy() == 0)
    h.remove()
    assert not np.all(lin(rc.ones(3, 2)).detach().numpy() == 0)
    pre = lin.register_forward_pre_hook(lambda m, inp: (inp[0] * 0,))
    assert_close(lin(rc.ones(1, 2)), lin.bias.detach().reshape(1, 2))
    pre.remove()


def test_repr_like_pytorch():
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(32, 10))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
        "  (1): ReLU()\n"
        "  (2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
        "  (3): Flatten(start_dim=1, end_dim=-1)\n"
        "  (4): Linear(in_features=32, out_features=10, bias=True)\n"
        ")"
    )
    assert repr(nn.Parameter(rc.ones(1))).startswith("Parameter containing:\ntensor([1.]")


def test_deepcopy_module():
    net = Net()
    twin = copy.deepcopy(net)
    assert twin.fc1.weight is not net.fc1.weight
    assert isinstance(twin.fc1.weight, nn.Parameter) and twin.fc1.weight.requires_grad
    assert np.array_equal(twin.fc1.weight.detach().numpy(), net.fc1.weight.detach().numpy())


# -- containers -----------------------------------------------------------------------


def test_containers():
    seq = nn.Sequential(OrderedDict([("a", nn.Linear(2, 3)), ("b", nn.ReLU())]))
    assert isinstance(seq.a, nn.Linear) and len(seq) == 2 and isinstance(seq[-1], nn.ReLU)
    assert isinstance(seq[:1], nn.Sequential) and len(seq[:1]) == 1
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.append(nn.ReLU())
    assert len(ml) == 4 and len(list(ml.parameters())) == 6
    md = nn.ModuleDict({"enc": nn.Linear(2, 2)})
    md["dec"] = nn.Linear(2, 1)
    assert list(md.keys()) == ["enc", "dec"] and "dec" in md
    assert [n for n, _ in md.named_parameters()][:2] == ["enc.weight", "enc.bias"]
    with pytest.raises(IndexError):
        ml[10]


# -- layers: shapes, initialisation, gradients -------------------------------------------


def test_wrong_input_shape_names_layer_and_shapes():
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=4, out_features=3.*\(2, 5\)"):
        nn.Linear(4, 3)(rc.ones(2, 5))
    with pytest.raises(RuntimeError, match=r"Conv2d\(3, 8.*\(2, 1, 8, 8\)"):
        nn.Conv2d(3, 8, 3)(rc.ones(2, 1, 8, 8))
    with pytest.raises(RuntimeError, match=r"BatchNorm2d\(4.*\(2, 3, 5, 5\)"):
        nn.BatchNorm2d(4)(rc.ones(2, 3, 5, 5))
    with pytest.raises(RuntimeError, match=r"LayerNorm\(\(5,\).*\(2, 4\)"):
        nn.LayerNorm(5)(rc.ones(2, 4))
    with pytest.raises(RuntimeError, match=r"MaxPool2d.*\(7,\)"):
        nn.MaxPool2d(2)(rc.ones(7))


def test_pytorch_initialisation_bounds():
    rc.manual_seed(0)
    lin = nn.Linear(100, 50)
    bound = 1 / math.sqrt(100)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound  # U(-b, b) has std b/sqrt(3)
    assert np.abs(b).max() <= bound
    conv = nn.Conv2d(3, 8, 3)
    cb = 1 / math.sqrt(3 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= cb
    emb = nn.Embedding(1000, 8, padding_idx=3)
    e = emb.weight.detach().numpy()
    assert abs(e.std() - 1) < 0.05 and np.all(e[3] == 0)
    bn = nn.BatchNorm1d(4)
    assert np.all(bn.weight.detach().numpy() == 1) and np.all(bn.running_var.numpy() == 1)


def test_init_functions():
    t = rc.empty(200, 300)
    nn.init.xavier_uniform_(t)
    a = math.sqrt(6 / 500)
    assert np.abs(t.numpy()).max() <= a
    nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    assert abs(t.numpy().std() - math.sqrt(2 / 200)) < 0.01
    nn.init.constant_(t, 0.5)
    assert np.all(t.numpy() == 0.5)
    nn.init.zeros_(t)
    assert np.all(t.numpy() == 0)
    nn.init.ones_(t)
    assert np.all(t.numpy() == 1)
    nn.init.normal_(t, 2.0, 0.5)
    assert abs(t.numpy().mean() - 2.0) < 0.02
    nn.init.uniform_(t, -1, 1)
    assert t.numpy().min() >= -1 and t.numpy().max() < 1
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(rc.empty(3))
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    p = nn.Parameter(rc.empty(3, 3))
    nn.init.kaiming_uniform_(p)  # in place on a leaf that requires grad: done without recording
    assert p.is_leaf and p.grad_fn is None


def _layer_gradcheck(layer: nn.Module, x: rc.Tensor) -> None:
    layer = layer.double()
    params = [p for p in layer.parameters()]
    names = [n for n, _ in layer.named_parameters()]
    x = x.double().requires_grad_(x.is_floating_point())

    def f(xx, *ps):
        # the layer with the given tensors standing in for its parameters
        return _functional_call(layer, names, ps, xx)

    ins = [x] + [p.detach().clone().requires_grad_() for p in params]
    assert gradcheck(f, ins, atol=1e-5, rtol=1e-3)


def _functional_call(layer: nn.Module, names, tensors, x):
    """layer(x) with its parameters replaced by ``tensors`` (which may require grad)."""
    originals = {}
    for n, t in zip(names, tensors):
        mod = layer.get_submodule(n.rpartition(".")[0])
        attr = n.rpartition(".")[2]
        originals[(mod, attr)] = mod._parameters[attr]
        mod._parameters[attr] = t
    try:
        return layer(x)
    finally:
        for (mod, attr), p in originals.items():
            mod._parameters[attr] = p


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.Linear(3, 2), (4, 3)),
    (lambda: nn.Conv2d(2, 3, 3, padding=1), (2, 2, 4, 4)),
    (lambda: nn.Conv2d(1, 2, (2, 3), stride=2, dilation=1), (1, 1, 5, 6)),
    (lambda: nn.LayerNorm(4), (3, 4)),
    (lambda: nn.BatchNorm1d(3), (5, 3)),
    (lambda: nn.BatchNorm2d(2), (3, 2, 2, 2)),
], ids=["linear", "conv2d", "conv2d-strided", "layernorm", "batchnorm1d", "batchnorm2d"])
def test_layer_gradients(device, make, shape):
    rc.manual_seed(1)
    layer = make().to(device)
    x = rc.randn(*shape, device=device)
    _layer_gradcheck(layer, x)


def test_embedding_gradient(device):
    emb = nn.Embedding(5, 3, padding_idx=0).to(device)
    idx = rc.tensor([[1, 0, 4], [1, 1, 2]], device=device)
    emb(idx).sum().backward()
    g = emb.weight.grad.numpy()
    assert np.array_equal(g[:, 0], [0, 3, 1, 0, 1])  # counts; padding row gets nothing


def test_layers_match_numpy(device):
    rc.manual_seed(2)
    x = rc.randn(4, 6, device=device)
    lin = nn.Linear(6, 3).to(device)
    ref = x.numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    assert_close(lin(x), ref, rtol=1e-5, atol=1e-6)
    ln = nn.LayerNorm(6).to(device)
    xn = x.numpy()
    mu, var = xn.mean(-1, keepdims=True), xn.var(-1, keepdims=True)
    assert_close(ln(x), (xn - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    bn = nn.BatchNorm1d(6).to(device)
    out = bn(x)
    m, v = xn.mean(0), xn.var(0)
    assert_close(out, (xn - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    assert_close(bn.running_mean, 0.1 * m, rtol=1e-4, atol=1e-6)
    assert_close(bn.running_var, 0.9 + 0.1 * xn.var(0, ddof=1), rtol=1e-4, atol=1e-6)
    assert int(bn.num_batches_tracked.item()) == 1
    bn.eval()
    assert_close(bn(x), (xn - 0.1 * m) / np.sqrt(0.9 + 0.1 * xn.var(0, ddof=1) + 1e-5), rtol=1e-4, atol=1e-5)
    drop = nn.Dropout(0.5).to(device)
    drop.eval()
    assert_close(drop(x), xn)
    flat = nn.Flatten()(rc.ones(2, 3, 4, device=device))
    assert tuple(flat.shape) == (2, 12)
    assert_close(nn.Softmax(dim=1)(x), np.exp(xn) / np.exp(xn).sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    for mod, fn in [(nn.ReLU(), lambda a: np.maximum(a, 0)), (nn.Tanh(), np.tanh),
                    (nn.Sigmoid(), lambda a: 1 / (1 + np.exp(-a))), (nn.SiLU(), lambda a: a / (1 + np.exp(-a))),
                    (nn.Identity(), lambda a: a)]:
        assert_close(mod(x), fn(xn), rtol=1e-5, atol=1e-6)


def test_conv_pool_shapes(device):
    x = rc.randn(2, 3, 9, 7, device=device)
    assert tuple(nn.Conv2d(3, 5, 3)(x.cpu()).shape) == (2, 5, 7, 5)
    conv = nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2)).to(device)
    assert tuple(conv(x).shape) == (2, 5, 5, 5)
    assert tuple(nn.MaxPool2d(2)(x).shape) == (2, 3, 4, 3)
    assert tuple(nn.AvgPool2d(3, stride=2, padding=1)(x).shape) == (2, 3, 5, 4)
    assert tuple(nn.Conv2d(3, 4, 3, padding="same").to(device)(x).shape) == (2, 4, 9, 7)
    # unbatched input
    assert tuple(nn.Conv2d(3, 4, 3).to(device)(x[0]).shape) == (4, 7, 5)


def test_loss_modules(device):
    x = rc.randn(4, 3, device=device)
    y = rc.tensor([0, 2, 1, 2], device=device)
    xn = x.numpy()
    logp = xn - np.log(np.exp(xn).sum(1, keepdims=True))
    assert_close(nn.CrossEntropyLoss()(x, y), -logp[np.arange(4), y.numpy()].mean(), rtol=1e-5)
    assert_close(nn.NLLLoss(reduction="sum")(rc.tensor(logp, device=device), y),
                 -logp[np.arange(4), y.numpy()].sum(), rtol=1e-5)
    t = rc.randn(4, 3, device=device)
    assert_close(nn.MSELoss()(x, t), ((xn - t.numpy()) ** 2).mean(), rtol=1e-5)
    assert_close(nn.L1Loss(reduction="none")(x, t), np.abs(xn - t.numpy()), rtol=1e-5)


def test_replacing_a_module_or_parameter_keeps_its_place():
    # PyTorch keeps the registration order when a name is set again
    ml = nn.ModuleList([nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 3)])
    ml[0] = nn.Tanh()
    assert [type(m).__name__ for m in ml] == ["Tanh", "ReLU", "Linear"]
    assert list(ml._modules) == ["0", "1", "2"]
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
    seq[1] = nn.Tanh()
    assert isinstance(seq[1], nn.Tanh) and list(seq.state_dict()) == [
        "0.weight", "0.bias", "2.weight", "2.bias"]
    assert seq(rc.ones(4, 2)).shape == (4, 1)
    lin = nn.Linear(2, 2)
    lin.weight = nn.Parameter(rc.ones(2, 2))
    assert list(lin.state_dict()) == ["weight", "bias"]
    with pytest.raises(IndexError):
        seq[3] = nn.ReLU()


def test_deleting_from_a_sequence_numbers_the_rest_again():
    seq = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.Identity())
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["ReLU", "Sigmoid", "Identity"]
    assert list(seq._modules) == ["0", "1", "2"]
    del seq[-2:]
    assert [type(m).__name__ for m in seq] == ["ReLU"]
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    del ml[0]
    assert isinstance(ml[0], nn.Tanh) and len(ml) == 1
