"""rtxcore.optim: optimizers and lr schedulers.

Each optimizer runs a few steps of a small least-squares problem on every device;
the parameters after every step are compared with a NumPy implementation of the
algorithm written here (float64, from the published update rules) and, when
PyTorch imports, with torch.optim on the same problem. Also: parameter groups,
zero_grad, skipped parameters, state_dict round trips, constructor and
load_state_dict errors, and the schedulers' lr sequences.
"""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import optim
from rtxcore.optim import lr_scheduler

from .conftest import supports
from .optim_problem import LeastSquares, assert_options_match, assert_trajectories, values

try:
    import torch
except Exception:  # noqa: BLE001 - torch is an optional reference
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")

STEPS = 5

# -- the problem: loss = 0.5 * ||X W + b - Y||^2 -------------------------------------

P = LeastSquares(seed=1234, rows=6, n_in=3, n_out=4, steps=STEPS)
W0, B0, np_grads = P.W0, P.B0, P.np_grads


def make_params(device: str, dtype=rc.float32) -> tuple[rc.Tensor, rc.Tensor]:
    return P.params(rc, device=device, dtype=dtype)


compute_grads = P.backward


# -- NumPy references (float64) ------------------------------------------------------


class RefSGD:
    def __init__(self, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        self.o = {"lr": lr, "momentum": momentum, "dampening": dampening, "wd": weight_decay,
                      "nesterov": nesterov, "maximize": maximize}
        self.buf: dict[int, np.ndarray] = {}

    def update(self, i, p, g, o=None):
        o = {**self.o, **(o or {})}
        g = -g if o["maximize"] else g
        if o["wd"]:
            g = g + o["wd"] * p
        if o["momentum"]:
            if i not in self.buf:
                self.buf[i] = g.copy()
            else:
                self.buf[i] = o["momentum"] * self.buf[i] + (1 - o["dampening"]) * g
            g = g + o["momentum"] * self.buf[i] if o["nesterov"] else self.buf[i]
        return p - o["lr"] * g


class RefAdam:
    decoupled = False

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 maximize=False):
        self.o = {"lr": lr, "betas": betas, "eps": eps, "wd": weight_decay, "amsgrad": amsgrad,
                      "maximize": maximize}
        self.s: dict[int, dict] = {}

    def update(self, i, p, g, o=None):
        o = {**self.o, **(o or {})}
        s = self.s.setdefault(i, {"t": 0, "m": np.zeros_like(p), "v": np.zeros_like(p),
                                      "vmax": np.zeros_like(p)})
        g = -g if o["maximize"] else g
        lr, (b1, b2) = o["lr"], o["betas"]
        s["t"] += 1
        t = s["t"]
        if o["wd"]:
            if self.decoupled:
                p = p * (1 - lr * o["wd"])
            else:
                g = g + o["wd"] * p
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        v = s["v"]
        if o["amsgrad"]:
            s["vmax"] = np.maximum(s["vmax"], s["v"])
            v = s["vmax"]
        m_hat = s["m"] / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
        return p - lr * m_hat / (np.sqrt(v_hat) + o["eps"])


class RefAdamW(RefAdam):
    decoupled = True

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False):
        super().__init__(lr, betas, eps, weight_decay, amsgrad, maximize)


class RefRMSprop:
    def __init__(self, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, maximize=False):
        self.o = {"lr": lr, "alpha": alpha, "eps": eps, "wd": weight_decay, "momentum": momentum,
                      "centered": centered, "maximize": maximize}
        self.s: dict[int, dict] = {}

    def update(self, i, p, g, o=None):
        o = {**self.o, **(o or {})}
        s = self.s.setdefault(i, {"v": np.zeros_like(p), "ga": np.zeros_like(p),
                                      "buf": np.zeros_like(p)})
        g = -g if o["maximize"] else g
        a = o["alpha"]
        if o["wd"]:
            g = g + o["wd"] * p
        s["v"] = a * s["v"] + (1 - a) * g * g
        v = s["v"]
        if o["centered"]:
            s["ga"] = a * s["ga"] + (1 - a) * g
            v = v - s["ga"] ** 2
        denom = np.sqrt(v) + o["eps"]
        if o["momentum"] > 0:
            s["buf"] = o["momentum"] * s["buf"] + g / denom
            return p - o["lr"] * s["buf"]
        return p - o["lr"] * g / denom


REFS = {"SGD": RefSGD, "Adam": RefAdam, "AdamW": RefAdamW, "RMSprop": RefRMSprop}

CASES = [
    ("SGD", {"lr": 0.01}),
    ("SGD", {"lr": 0.01, "momentum": 0.9}),
    ("SGD", {"lr": 0.01, "momentum": 0.9, "dampening": 0.5, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.01, "momentum": 0.8, "nesterov": True, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.01, "momentum": 0.9, "maximize": True}),
    ("Adam", {"lr": 0.05}),
    ("Adam", {"lr": 0.05, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.05, "amsgrad": True}),
    ("Adam", {"lr": 0.05, "betas": (0.3, 0.9), "amsgrad": True, "maximize": True,
              "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.3, "amsgrad": True}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.0, "maximize": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.005, "alpha": 0.95, "centered": True, "momentum": 0.5, "maximize": True}),
]
CASE_IDS = [f"{n}-" + ",".join(f"{k}={v}" for k, v in kw.items()) for n, kw in CASES]


def rc_trajectory(name, kw, device, steps=STEPS, dtype=rc.float32):
    return P.trajectory(rc, name, kw, steps, device=device, dtype=dtype)


def ref_trajectory(name, kw, steps=STEPS):
    ref = REFS[name](**kw)
    ps = P.start64()
    out = []
    for _ in range(steps):
        gs = np_grads(*ps)
        ps = [ref.update(i, p, g) for i, (p, g) in enumerate(zip(ps, gs))]
        out.append([p.copy() for p in ps])
    return out


def torch_trajectory(name, kw, steps=STEPS):
    return P.trajectory(torch, name, kw, steps)[0]


# -- update rules ----------------------------------------------------------------------


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_matches_numpy_reference(device, name, kw):
    got, opt, (w, b) = rc_trajectory(name, kw, device)
    assert_trajectories(got, ref_trajectory(name, kw), rtol=1e-5, atol=1e-6, what=name)
    # the update ran on the parameters' device, out of the graph; state lives there too
    assert w.is_leaf and b.is_leaf and w.requires_grad and w.grad_fn is None
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, rc.Tensor):
                assert v.device == w.device and v.dtype == w.dtype and not v.requires_grad


@needs_torch
@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_matches_torch(device, name, kw):
    got, opt, _ = rc_trajectory(name, kw, device)
    assert_trajectories(got, torch_trajectory(name, kw), rtol=1e-5, atol=1e-6, what=name)
    # same state entries, same param_groups options as torch (ours minus its
    # implementation switches: foreach, fused, capturable, differentiable)
    tw, tb = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    topt = getattr(torch.optim, name)([tw, tb], **kw)
    assert_options_match(opt, topt)
    (tw.sum() + tb.sum()).backward()
    topt.step()
    assert set(opt.state[opt.param_groups[0]["params"][0]]) == set(topt.state[tw])


def test_float64_parameters(device):
    if not supports(device, rc.float64):
        pytest.skip(f"{device} has no float64")
    for name, kw in [("SGD", {"lr": 0.01, "momentum": 0.9}), ("Adam", {"lr": 0.05}),
                     ("RMSprop", {"lr": 0.01, "centered": True})]:
        got, opt, (_w, _) = rc_trajectory(name, kw, device, dtype=rc.float64)
        assert_trajectories(got, ref_trajectory(name, kw), rtol=1e-10, atol=1e-10, what=name)
        assert all(v.dtype == rc.float64 for st in opt.state.values() for v in st.values()
                   if isinstance(v, rc.Tensor))


def test_defaults():
    w = rc.zeros(2, requires_grad=True)
    g = optim.SGD([w]).param_groups[0]
    assert (g["lr"], g["momentum"], g["dampening"], g["weight_decay"], g["nesterov"],
            g["maximize"]) == (1e-3, 0, 0, 0, False, False)
    g = optim.Adam([w]).param_groups[0]
    assert (g["lr"], g["betas"], g["eps"], g["weight_decay"], g["amsgrad"], g["maximize"]) \
        == (1e-3, (0.9, 0.999), 1e-8, 0, False, False)
    assert g["decoupled_weight_decay"] is False
    g = optim.AdamW([w]).param_groups[0]
    assert (g["lr"], g["betas"], g["eps"], g["weight_decay"], g["amsgrad"]) \
        == (1e-3, (0.9, 0.999), 1e-8, 1e-2, False)
    assert g["decoupled_weight_decay"] is True
    g = optim.RMSprop([w]).param_groups[0]
    assert (g["lr"], g["alpha"], g["eps"], g["weight_decay"], g["momentum"], g["centered"]) \
        == (1e-2, 0.99, 1e-8, 0, 0, False)
    assert isinstance(optim.AdamW([w]), optim.Adam)
    assert all(issubclass(c, optim.Optimizer)
               for c in (optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop))
    assert rc.optim is optim and optim.lr_scheduler is lr_scheduler


def test_adam_decoupled_weight_decay_is_adamw(device):
    a, _, _ = rc_trajectory("Adam", {"lr": 0.05, "weight_decay": 0.2,
                                     "decoupled_weight_decay": True},
                            device)
    b, _, _ = rc_trajectory("AdamW", {"lr": 0.05, "weight_decay": 0.2}, device)
    assert_trajectories(a, b, rtol=0, atol=0)


# -- groups, gradients, closures ---------------------------------------------------------


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop"])
def test_param_groups_with_own_options(device, name):
    w, b = make_params(device)
    base = {"lr": 0.01, "momentum": 0.9} if name == "SGD" else {"lr": 0.02}
    extra = {"lr": 0.1, "weight_decay": 0.1}
    if name == "Adam":
        extra["betas"] = (0.5, 0.9)
    opt = getattr(optim, name)([{"params": [w]}, {"params": b, **extra}], **base)
    assert opt.param_groups[0]["lr"] == base["lr"] and opt.param_groups[1]["lr"] == 0.1
    assert opt.param_groups[1]["params"] == [b]  # a lone tensor becomes a list
    ref = REFS[name](**base)
    ps = P.start64()
    for step in range(STEPS):
        P.step(opt, w, b)
        gs = np_grads(*ps)
        ps = [ref.update(0, ps[0], gs[0]),
              ref.update(1, ps[1], gs[1], {**extra, "wd": extra["weight_decay"]})]
        assert_trajectories([values(w, b)], [ps], rtol=2e-5, atol=2e-5, what=f"step {step}")


def test_add_param_group(device):
    w, b = make_params(device)
    opt = optim.SGD([w], lr=0.1, momentum=0.5)
    opt.add_param_group({"params": [b], "lr": 0.5})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.5
    compute_grads(w, b)
    gb = values(b.grad)[0]
    opt.step()
    np.testing.assert_allclose(values(b)[0], B0 - 0.5 * gb, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [w]})
    with pytest.raises(TypeError, match="must be a dict"):
        opt.add_param_group([w])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        opt.add_param_group({"params": [rc.zeros(1, requires_grad=True)], "lr": -1})


def test_named_parameters(device):
    w, b = make_params(device)
    opt = optim.Adam([("weight", w), ("bias", b)], lr=0.1)
    assert opt.param_groups[0]["params"] == [w, b]
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["weight", "bias"]


def test_zero_grad(device):
    w, b = make_params(device)
    opt = optim.SGD([w, b], lr=0.1)
    opt.zero_grad()  # no grads yet: nothing to do
    assert w.grad is None
    compute_grads(w, b)
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g  # zeroed in place, same tensor
    assert not np.any(values(w.grad, b.grad)[0]) and not np.any(values(b.grad)[0])
    assert not w.grad.requires_grad
    compute_grads(w, b)  # accumulates onto the zeros: one gradient's worth
    np.testing.assert_allclose(values(w.grad)[0], np_grads(W0.astype(np.float64), B0)[0],
                               rtol=1e-5, atol=1e-5)
    opt.zero_grad()
    assert w.grad is None and b.grad is None
    opt.zero_grad(set_to_none=True)
    assert w.grad is None


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_grad_none_skipped(device, name):
    w, b = make_params(device)
    kw = {"lr": 0.1, "momentum": 0.9} if name == "SGD" else {"lr": 0.1, "weight_decay": 0.1}
    opt = getattr(optim, name)([w, b], **kw)
    compute_grads(w, b)
    b.grad = None
    opt.step()
    opt.step()
    np.testing.assert_array_equal(values(b)[0], B0)  # untouched, even by weight decay
    assert b not in opt.state and w in opt.state
    if name != "SGD":
        assert opt.state[w]["step"] == 2
    assert not np.allclose(values(w)[0], W0)


def test_sgd_without_momentum_keeps_no_state(device):
    w, b = make_params(device)
    opt = optim.SGD([w, b], lr=0.1)
    compute_grads(w, b)
    opt.step()
    assert len(opt.state) == 0 and opt.state_dict()["state"] == {}


def test_closure(device):
    w, b = make_params(device)
    opt = optim.Adam([w, b], lr=0.1)
    calls = []

    def closure():
        assert rc.is_grad_enabled()
        opt.zero_grad()
        loss = compute_grads(w, b)
        calls.append(loss.item())
        return loss

    with rc.no_grad():  # the closure still records
        loss = opt.step(closure)
    assert len(calls) == 1 and loss.item() == calls[0]
    assert opt.step() is None
    assert rc.is_grad_enabled()


def test_step_restores_grad_mode_after_error(device):
    w = rc.zeros(3, device=device, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    w.grad = rc.ones(3, device=device)
    opt.param_groups[0]["lr"] = "oops"
    with pytest.raises(TypeError):
        opt.step()
    assert rc.is_grad_enabled()


def test_lr_can_change_between_steps(device):
    w = rc.zeros(3, device=device, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    w.grad = rc.ones(3, device=device)
    opt.step()
    opt.param_groups[0]["lr"] = 0.5
    opt.step()
    np.testing.assert_allclose(values(w)[0], [-0.6] * 3, rtol=1e-6)


def test_tensor_lr(device):
    w = rc.zeros(3, device=device, requires_grad=True)
    lr = rc.tensor(0.5)  # a 0-d tensor on the host, as PyTorch allows
    opt = optim.SGD([w], lr=lr)
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):
        w.grad = rc.ones(3, device=device)
        opt.step()
        sched.step()
    np.testing.assert_allclose(values(w)[0], [-0.75] * 3, rtol=1e-6)
    assert opt.param_groups[0]["lr"] is lr and lr.item() == 0.125  # updated in place
    assert sched.get_last_lr()[0] is not lr and sched.get_last_lr()[0].item() == 0.125
    assert opt.param_groups[0]["initial_lr"].item() == 0.5


# -- state_dict ------------------------------------------------------------------------------

SD_CASES = [
    ("SGD", {"lr": 0.01, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.05, "amsgrad": True}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
]


@pytest.mark.parametrize("name,kw", SD_CASES, ids=[c[0] for c in SD_CASES])
def test_state_dict_round_trip(device, name, kw):
    full, _, _ = rc_trajectory(name, kw, device, steps=6)

    w, b = make_params(device)
    opt = getattr(optim, name)([w, b], **kw)
    for _ in range(3):
        P.step(opt, w, b)
    sd = copy.deepcopy(opt.state_dict())
    wv, bv = values(w, b)

    # a new optimizer (other hyperparameters: the loaded ones win) on new parameters
    w2 = rc.tensor(wv, device=device, dtype=rc.float32, requires_grad=True)
    b2 = rc.tensor(bv, device=device, dtype=rc.float32, requires_grad=True)
    opt2 = getattr(optim, name)([w2, b2], lr=123.0)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    assert opt2.param_groups[0]["params"] == [w2, b2]
    rest = []
    for _ in range(3):
        P.step(opt2, w2, b2)
        rest.append(values(w2, b2))
    assert_trajectories(rest, full[3:], rtol=1e-6, atol=1e-7, what=f"{name} resumed")

    # the original optimizer continues independently of the loaded copy
    for _ in range(3):
        P.step(opt, w, b)
    assert_trajectories([values(w, b)], full[5:], rtol=1e-6, atol=1e-7, what=f"{name} original")


def test_state_dict_format(device):
    w, b = make_params(device)
    c = rc.zeros(2, device=device, requires_grad=True)
    opt = optim.Adam([{"params": [w, b]}, {"params": [c], "lr": 0.5}], lr=0.1)
    compute_grads(w, b)
    opt.step()
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["betas"] == (0.9, 0.999)
    assert set(sd["state"]) == {0, 1}  # c had no gradient: no state
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][0]["step"] == 1
    assert sd["state"][0]["exp_avg"] is opt.state[w]["exp_avg"]  # references, as in PyTorch
    assert "params" in opt.param_groups[0]  # packing did not touch the live groups
    assert all(isinstance(p, rc.Tensor) for p in opt.param_groups[0]["params"])


def test_load_state_dict_moves_and_casts(device):
    w = rc.tensor(W0, requires_grad=True)  # on cpu, float32
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = rc.ones(w.shape)
    opt.step()
    sd = opt.state_dict()
    dt = rc.float64 if supports(device, rc.float64) else rc.float32
    w2 = rc.tensor(W0, device=device, dtype=dt, requires_grad=True)
    opt2 = optim.SGD([w2], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd)
    buf = opt2.state[w2]["momentum_buffer"]
    assert buf.device == w2.device and buf.dtype == dt
    np.testing.assert_array_equal(values(buf)[0], np.ones(W0.shape))
    assert buf is not sd["state"][0]["momentum_buffer"]
    # a tensor step count (PyTorch's checkpoints) loads as a number
    a = optim.Adam([w2])
    a.load_state_dict({"state": {0: {"step": rc.tensor(3.0), "exp_avg": rc.zeros(3, 4),
                                     "exp_avg_sq": rc.zeros(3, 4)}},
                       "param_groups": [dict(a.state_dict()["param_groups"][0])]})
    assert a.state[w2]["step"] == 3 and isinstance(a.state[w2]["step"], int)


def test_load_state_dict_errors(device):
    w, b = make_params(device)
    opt = optim.SGD([w, b], lr=0.1, momentum=0.9)
    compute_grads(w, b)
    opt.step()
    sd = opt.state_dict()
    one_group = optim.SGD([{"params": [w]}, {"params": [b]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        one_group.load_state_dict(sd)
    bigger = optim.SGD([w, b, rc.zeros(1, device=device, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        bigger.load_state_dict(sd)
    swapped = optim.SGD([b, w], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="shape"):
        swapped.load_state_dict(sd)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"state": {}})
    # a failed load leaves the optimizer as it was
    assert bigger.param_groups[0]["lr"] == 0.1 and len(bigger.state) == 0


# -- constructor errors ---------------------------------------------------------------------


def test_constructor_errors(device):
    w = rc.zeros(3, device=device, requires_grad=True)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.Adam(iter([]))
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        optim.SGD([w, 1.0], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        optim.SGD(3, lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({w}, lr=0.1)
    with pytest.raises(ValueError, match="duplicate parameters"):
        optim.SGD([w, w], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    # a generator (module.parameters()) is fine, and a non-leaf that retains grad too
    optim.SGD((p for p in [w]), lr=0.1)
    v = w * 2
    v.retain_grad()
    optim.SGD([v], lr=0.1)


@pytest.mark.parametrize("cls,kw,msg", [
    (optim.SGD, {"lr": -0.1}, "Invalid learning rate: -0.1"),
    (optim.SGD, {"lr": 0.1, "momentum": -0.5}, "Invalid momentum value: -0.5"),
    (optim.SGD, {"lr": 0.1, "weight_decay": -1e-4}, "Invalid weight_decay value: -0.0001"),
    (optim.SGD, {"lr": 0.1, "nesterov": True},
     "Nesterov momentum requires a momentum and zero dampening"),
    (optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "nesterov": True}, "Nesterov"),
    (optim.SGD, {"lr": float("nan")}, "Invalid learning rate: nan"),
    (optim.Adam, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (optim.Adam, {"eps": -1e-8}, "Invalid epsilon value: -1e-08"),
    (optim.Adam, {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
    (optim.Adam, {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
    (optim.Adam, {"betas": 0.9}, "betas must be a pair"),
    (optim.Adam, {"weight_decay": -0.1}, "Invalid weight_decay value: -0.1"),
    (optim.AdamW, {"lr": -2.0}, "Invalid learning rate: -2.0"),
    (optim.AdamW, {"betas": (0.9, 1.5)}, "Invalid beta parameter at index 1: 1.5"),
    (optim.AdamW, {"weight_decay": -0.01}, "Invalid weight_decay value: -0.01"),
    (optim.RMSprop, {"lr": -0.01}, "Invalid learning rate: -0.01"),
    (optim.RMSprop, {"alpha": -0.5}, "Invalid alpha value: -0.5"),
    (optim.RMSprop, {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    (optim.RMSprop, {"momentum": -0.9}, "Invalid momentum value: -0.9"),
    (optim.RMSprop, {"weight_decay": -3.0}, "Invalid weight_decay value: -3.0"),
])
def test_invalid_hyperparameters(cls, kw, msg):
    w = rc.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(".", r"\.")):
        cls([w], **kw)
    # the same values in a parameter group are refused too
    base = {k: v for k, v in kw.items() if k != "nesterov"}
    if "nesterov" not in kw:
        with pytest.raises(ValueError):
            cls([{"params": [w], **base}])


def test_repr_and_pickle_state():
    w = rc.zeros(2, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    r = repr(opt)
    assert r.startswith("SGD (") and "Parameter Group 0" in r and "lr: 0.1" in r
    assert set(opt.__getstate__()) == {"defaults", "state", "param_groups"}


# -- lr schedulers --------------------------------------------------------------------------


def sched_opt(lrs=(0.1,), lib=rc):
    groups = [{"params": [lib.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs]
    return lib.optim.SGD(groups, lr=lrs[0])


def run_schedule(sched, opt, epochs):
    """lr in use at each epoch (as a training loop sees it) and get_last_lr()."""
    lrs, last = [], []
    for _ in range(epochs):
        lrs.append([g["lr"] for g in opt.param_groups])
        last.append(list(sched.get_last_lr()))
        opt.step()
        sched.step()
    return lrs, last


def test_step_lr():
    opt = sched_opt((0.1, 0.02))
    sched = lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.02]
    assert sched.base_lrs == [0.1, 0.02] and sched.last_epoch == 0
    lrs, last = run_schedule(sched, opt, 10)
    expected = [[base * 0.5 ** (e // 3) for base in (0.1, 0.02)] for e in range(10)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    assert last == lrs
    assert sched.last_epoch == 10
    assert lr_scheduler.StepLR(sched_opt(), 2).gamma == 0.1


def test_cosine_annealing_lr():
    base, eta_min, T = 0.1, 0.001, 5
    opt = sched_opt((base,))
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=T, eta_min=eta_min)
    lrs, last = run_schedule(sched, opt, 3 * T + 1)
    expected = [eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / T)) / 2
                for e in range(3 * T + 1)]
    assert [x[0] for x in lrs] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert lrs[T][0] == pytest.approx(eta_min) and lrs[2 * T][0] == pytest.approx(base)
    assert last == lrs
    opt = sched_opt((1.0,))
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    assert sched.eta_min == 0.0
    lrs, _ = run_schedule(sched, opt, 5)
    assert [x[0] for x in lrs] == pytest.approx([1.0, 0.8535533905932737, 0.5,
                                                 0.14644660940672624, 0.0], abs=1e-12)


def test_lambda_lr():
    opt = sched_opt((0.1,))
    sched = lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e)
    lrs, last = run_schedule(sched, opt, 6)
    assert [x[0] for x in lrs] == pytest.approx([0.1 * 0.9 ** e for e in range(6)], rel=1e-12)
    assert last == lrs

    opt = sched_opt((0.1, 1.0))
    sched = lr_scheduler.LambdaLR(opt, [lambda e: 1.0 / (e + 1), lambda e: e + 1])
    lrs, _ = run_schedule(sched, opt, 4)
    np.testing.assert_allclose(lrs, [[0.1 / (e + 1), 1.0 * (e + 1)] for e in range(4)], rtol=1e-12)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])


class _Warmup:
    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


@pytest.mark.parametrize("make", [
    lambda o: lr_scheduler.StepLR(o, step_size=2, gamma=0.3),
    lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
    lambda o: lr_scheduler.LambdaLR(o, _Warmup(5)),
], ids=["StepLR", "CosineAnnealingLR", "LambdaLR"])
def test_scheduler_state_dict_round_trip(make):
    opt = sched_opt((0.1, 0.05))
    sched = make(opt)
    full, _ = run_schedule(sched, opt, 12)

    opt = sched_opt((0.1, 0.05))
    sched = make(opt)
    run_schedule(sched, opt, 5)
    sd = copy.deepcopy(sched.state_dict())
    osd = copy.deepcopy(opt.state_dict())
    assert "optimizer" not in sd and sd["last_epoch"] == 5

    opt2 = sched_opt((0.1, 0.05))
    sched2 = make(opt2)
    if isinstance(sched2, lr_scheduler.LambdaLR):
        sched2.lr_lambdas[0].n = 99  # restored from the state dict below
    opt2.load_state_dict(osd)
    sched2.load_state_dict(sd)
    assert sched2.last_epoch == 5 and sched2.get_last_lr() == sched.get_last_lr()
    rest, _ = run_schedule(sched2, opt2, 7)
    np.testing.assert_allclose(rest, full[5:], rtol=1e-12)


def test_lambda_lr_state_dict_saves_callable_objects_only():
    opt = sched_opt((0.1, 0.2))
    sched = lr_scheduler.LambdaLR(opt, [_Warmup(3), lambda e: 1.0])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"n": 3}, None]
    assert "optimizer" not in sd and sd["base_lrs"] == [0.1, 0.2]


def test_scheduler_resume_needs_initial_lr():
    opt = sched_opt()
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(opt, step_size=2, last_epoch=3)
    lr_scheduler.StepLR(opt, step_size=2)
    sched = lr_scheduler.StepLR(opt, step_size=2, last_epoch=3)  # initial_lr now set
    assert sched.last_epoch == 4
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)


def test_scheduler_warnings():
    opt = sched_opt()
    sched = lr_scheduler.StepLR(opt, step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt = sched_opt()
    sched = lr_scheduler.StepLR(opt, step_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()
        sched.get_last_lr()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(4)  # closed form: 0.1 * 0.1 ** 2
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3)


def test_scheduler_drives_training(device):
    w = rc.zeros(3, device=device, requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        w.grad = rc.ones(3, device=device)
        opt.step()
        sched.step()
    np.testing.assert_allclose(values(w)[0], [-1.75] * 3, rtol=1e-6)  # 1 + 0.5 + 0.25


@needs_torch
@pytest.mark.parametrize("name,kw", [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("CosineAnnealingLR", {"T_max": 6, "eta_min": 0.002}),
    ("CosineAnnealingLR", {"T_max": 3}),
    ("LambdaLR", {"lr_lambda": lambda e: 1 / (1 + 0.3 * e)}),
])
def test_schedulers_match_torch(name, kw):
    opt = sched_opt((0.1, 0.03))
    sched = getattr(lr_scheduler, name)(opt, **kw)
    ours, last = run_schedule(sched, opt, 20)

    topt = sched_opt((0.1, 0.03), lib=torch)
    tsched = getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    theirs, tlast = run_schedule(tsched, topt, 20)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(last, tlast, rtol=1e-12, atol=1e-15)
    assert set(sched.state_dict()) == set(tsched.state_dict())
