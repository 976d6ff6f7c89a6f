"""rtxcore.optim: Adagrad, Adadelta, Adamax, NAdam and LBFGS.

Each optimizer runs ten steps of a small least-squares problem on every device;
the parameters after every step are compared with a NumPy implementation of the
published update rule (float64) and, when PyTorch imports, with torch.optim on
the same problem from the same initial weights. LBFGS also minimises the
Rosenbrock function with and without the strong-Wolfe line search.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import optim

from .optim_problem import LeastSquares, assert_options_match, assert_trajectories

STEPS = 10

P = LeastSquares(seed=99, rows=7, n_in=3, n_out=2, steps=STEPS)
W0, np_grads = P.W0, P.np_grads


def rc_trajectory(name, kw, device, steps=STEPS):
    return P.trajectory(rc, name, kw, steps, device=device)


def torch_trajectory(torch, name, kw, steps=STEPS):
    return P.trajectory(torch, name, kw, steps)[:2]


# -- NumPy references, from the published update rules ----------------------------------


def ref_adagrad(lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                maximize=False):
    def run(ps):
        sums = [np.full_like(p, initial_accumulator_value) for p in ps]
        out = []
        for t in range(1, STEPS + 1):
            gs = np_grads(*ps)
            new = []
            for p, g, s in zip(ps, gs, sums):
                g = -g if maximize else g
                g = g + weight_decay * p
                clr = lr / (1 + (t - 1) * lr_decay)
                s += g * g
                new.append(p - clr * g / (np.sqrt(s) + eps))
            ps = new
            out.append([p.copy() for p in ps])
        return out
    return run


def ref_nadam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas

    def run(ps):
        m = [np.zeros_like(p) for p in ps]
        v = [np.zeros_like(p) for p in ps]
        mu_prod = 1.0
        out = []
        for t in range(1, STEPS + 1):
            gs = np_grads(*ps)
            mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
            mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
            mu_prod *= mu
            new = []
            for i, (p, g) in enumerate(zip(ps, gs)):
                g = -g if maximize else g
                if decoupled_weight_decay:
                    p = p * (1 - lr * weight_decay)
                else:
                    g = g + weight_decay * p
                m[i] = b1 * m[i] + (1 - b1) * g
                v[i] = b2 * v[i] + (1 - b2) * g * g
                denom = np.sqrt(v[i] / (1 - b2 ** t)) + eps
                p = p - lr * (1 - mu) / (1 - mu_prod) * g / denom
                p = p - lr * mu_next / (1 - mu_prod * mu_next) * m[i] / denom
                new.append(p)
            ps = new
            out.append([p.copy() for p in ps])
        return out
    return run


def ref_adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    def run(ps):
        v = [np.zeros_like(p) for p in ps]
        u = [np.zeros_like(p) for p in ps]
        out = []
        for _ in range(STEPS):
            gs = np_grads(*ps)
            new = []
            for i, (p, g) in enumerate(zip(ps, gs)):
                g = (-g if maximize else g) + weight_decay * p
                v[i] = rho * v[i] + (1 - rho) * g * g
                delta = np.sqrt(u[i] + eps) / np.sqrt(v[i] + eps) * g
                u[i] = rho * u[i] + (1 - rho) * delta * delta
                new.append(p - lr * delta)
            ps = new
            out.append([p.copy() for p in ps])
        return out
    return run


def ref_adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    b1, b2 = betas

    def run(ps):
        m = [np.zeros_like(p) for p in ps]
        u = [np.zeros_like(p) for p in ps]
        out = []
        for t in range(1, STEPS + 1):
            gs = np_grads(*ps)
            new = []
            for i, (p, g) in enumerate(zip(ps, gs)):
                g = (-g if maximize else g) + weight_decay * p
                m[i] = b1 * m[i] + (1 - b1) * g
                u[i] = np.maximum(b2 * u[i], np.abs(g) + eps)
                new.append(p - lr / (1 - b1 ** t) * m[i] / u[i])
            ps = new
            out.append([p.copy() for p in ps])
        return out
    return run


REFS = {"Adagrad": ref_adagrad, "NAdam": ref_nadam, "Adadelta": ref_adadelta,
        "Adamax": ref_adamax}

CASES = [
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.3, "eps": 1e-8}),
    ("Adagrad", {"lr": 0.05, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.05}),
    ("Adadelta", {"maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "eps": 1e-6}),
    ("Adamax", {"lr": 0.01, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.05, "betas": (0.8, 0.95), "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.02, "maximize": True}),
]
CASE_IDS = [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_matches_numpy_reference(device, name, kw):
    got, opt, (w, b) = rc_trajectory(name, kw, device)
    expected = REFS[name](**kw)(P.start64())
    assert_trajectories(got, expected, rtol=2e-5, atol=2e-6, what=name, steps=STEPS)
    # the parameters moved, and stayed leaves; the state lives on their device
    assert not np.allclose(got[-1][0], W0)
    assert w.is_leaf and w.grad_fn is None
    for st in opt.state.values():
        assert st["step"] == STEPS
        for v in st.values():
            if isinstance(v, rc.Tensor):
                assert v.device == w.device and v.dtype == w.dtype and not v.requires_grad


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_matches_torch(name, kw):
    torch = pytest.importorskip("torch")
    got, opt, _ = rc_trajectory(name, kw, "cpu")
    expected, topt = torch_trajectory(torch, name, kw)
    assert_trajectories(got, expected, rtol=1e-5, atol=1e-6, what=name, steps=STEPS)
    # the same options and state entries as torch's (minus its implementation switches)
    assert_options_match(opt, topt)
    tstate = topt.state_dict()["state"]
    ours = opt.state_dict()["state"]
    assert set(ours) == set(tstate)
    for i in ours:
        assert set(ours[i]) == set(tstate[i])
        for k, v in tstate[i].items():
            np.testing.assert_allclose(np.asarray(rc.as_tensor(ours[i][k]).numpy()
                                                  if isinstance(ours[i][k], rc.Tensor)
                                                  else ours[i][k], dtype=np.float64),
                                       v.double().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_torch_checkpoint_loads():
    """A torch state_dict (tensor step counts and mu_product) resumes the run."""
    torch = pytest.importorskip("torch")
    kw = {"lr": 0.05}
    _, topt, (tw, tb) = P.trajectory(torch, "NAdam", kw, steps=4)
    sd = topt.state_dict()
    conv = {"state": {i: {k: rc.tensor(v.numpy()) for k, v in st.items()}
                      for i, st in sd["state"].items()},
            "param_groups": copy.deepcopy(sd["param_groups"])}
    w = rc.tensor(tw.detach().numpy(), requires_grad=True)
    b = rc.tensor(tb.detach().numpy(), requires_grad=True)
    opt = optim.NAdam([w, b], **kw)
    opt.load_state_dict(conv)
    assert opt.state[w]["step"] == 4
    P.step(topt, tw, tb)
    P.backward(w, b)
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kw", [c for c in CASES if not c[1]], ids=lambda v: str(v))
def test_state_dict_round_trip(device, name, kw):
    full, _, _ = rc_trajectory(name, kw, device, steps=6)
    _, opt, (w, b) = rc_trajectory(name, kw, device, steps=3)
    sd = copy.deepcopy(opt.state_dict())
    w2 = rc.tensor(w.detach().numpy(), device=device, requires_grad=True)
    b2 = rc.tensor(b.detach().numpy(), device=device, requires_grad=True)
    opt2 = getattr(optim, name)([w2, b2], **kw)
    opt2.load_state_dict(sd)
    for _ in range(3):
        P.step(opt2, w2, b2)
    np.testing.assert_allclose(w2.detach().numpy(), full[-1][0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(b2.detach().numpy(), full[-1][1], rtol=1e-6, atol=1e-7)


def test_adagrad_state_made_at_construction():
    w = rc.zeros(3, requires_grad=True)
    opt = optim.Adagrad([w], initial_accumulator_value=0.25)
    sd = opt.state_dict()
    assert sd["state"][0]["step"] == 0
    np.testing.assert_array_equal(sd["state"][0]["sum"].numpy(), np.full(3, 0.25, np.float32))


def test_grad_none_skipped():
    w = rc.ones(2, requires_grad=True)
    v = rc.ones(2, requires_grad=True)
    for cls in (optim.Adadelta, optim.Adamax, optim.NAdam):
        opt = cls([w, v])
        (w * 2).sum().backward()
        opt.step()
        assert v not in opt.state or not opt.state[v]
        np.testing.assert_array_equal(v.detach().numpy(), [1, 1])
        w.grad = None


@pytest.mark.parametrize("cls,kw,msg", [
    (optim.Adagrad, {"lr": -1}, "Invalid learning rate: -1"),
    (optim.Adagrad, {"lr_decay": -0.1}, "Invalid lr_decay value: -0.1"),
    (optim.Adagrad, {"initial_accumulator_value": -1},
     "Invalid initial_accumulator_value value: -1"),
    (optim.Adagrad, {"eps": -1}, "Invalid epsilon value: -1"),
    (optim.Adadelta, {"rho": 1.5}, "Invalid rho value: 1.5"),
    (optim.Adadelta, {"weight_decay": -1}, "Invalid weight_decay value: -1"),
    (optim.Adamax, {"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0: 1.0"),
    (optim.Adamax, {"eps": -1e-3}, "Invalid epsilon value: -0.001"),
    (optim.NAdam, {"momentum_decay": -1}, "Invalid momentum_decay value: -1"),
    (optim.NAdam, {"betas": (0.9, 1.0)}, "Invalid beta parameter at index 1: 1.0"),
    (optim.LBFGS, {"lr": -1}, "Invalid learning rate: -1"),
])
def test_invalid_hyperparameters(cls, kw, msg):
    with pytest.raises(ValueError, match=msg):
        cls([rc.zeros(1, requires_grad=True)], **kw)


def test_defaults_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("Adagrad", "Adadelta", "Adamax", "NAdam", "LBFGS"):
        ours = getattr(optim, name)([rc.zeros(1, requires_grad=True)]).defaults
        theirs = getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)]).defaults
        for k, v in ours.items():
            assert theirs[k] == v, (name, k)


# -- LBFGS ------------------------------------------------------------------------------


def supports64(device):
    return rc.device(device).supports(rc.float64)


def rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def test_lbfgs_minimises_rosenbrock(device):
    if not supports64(device):
        pytest.skip(f"{device} has no float64")
    minimise_rosenbrock(device, "strong_wolfe")


def test_lbfgs_fixed_step_minimises_rosenbrock():
    minimise_rosenbrock("cpu", None)


def minimise_rosenbrock(device, line_search_fn):
    xy = rc.tensor([-1.5, 2.0], dtype=rc.float64, device=device, requires_grad=True)
    opt = optim.LBFGS([xy], lr=1 if line_search_fn else 0.5, max_iter=200,
                      line_search_fn=line_search_fn, history_size=10)
    calls = 0

    def closure():
        nonlocal calls
        calls += 1
        opt.zero_grad()
        loss = rosenbrock(xy)
        loss.backward()
        return loss

    first = opt.step(closure)
    assert float(first) == pytest.approx(rosenbrock(np.array([-1.5, 2.0])))
    for _ in range(5):
        opt.step(closure)
    np.testing.assert_allclose(xy.detach().numpy(), [1.0, 1.0], atol=1e-4)
    st = opt.state[xy]
    assert st["func_evals"] == calls and st["n_iter"] > 10
    assert len(st["old_dirs"]) <= 10


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_matches_torch(line_search_fn):
    torch = pytest.importorskip("torch")
    A = np.array([[3.0, 0.5, 0.1], [0.5, 2.0, 0.3], [0.1, 0.3, 1.0]])
    c = np.array([1.0, -2.0, 0.5])
    x0 = np.array([0.3, 0.7, -1.2])

    def run(lib, tensor):
        x = tensor(x0, requires_grad=True)
        a, cc = tensor(A), tensor(c)
        opt = lib.optim.LBFGS([x], lr=0.8, max_iter=4, history_size=3,
                              line_search_fn=line_search_fn)

        def closure():
            opt.zero_grad()
            loss = 0.5 * (x @ (a @ x)) - (cc * x).sum() + (x ** 4).sum() * 0.1
            loss.backward()
            return loss

        out = []
        for _ in range(3):
            opt.step(closure)
            out.append(x.detach().numpy().copy())
        return out, opt.state[x]

    ours, st = run(rc, lambda v, **k: rc.tensor(v, dtype=rc.float64, **k))
    theirs, tst = run(torch, lambda v, **k: torch.tensor(v, dtype=torch.float64, **k))
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    assert st["func_evals"] == tst["func_evals"] and st["n_iter"] == tst["n_iter"]


def test_lbfgs_errors():
    a, b = rc.zeros(1, requires_grad=True), rc.zeros(1, requires_grad=True)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a])
    with pytest.raises(ValueError, match="parameter groups"):
        opt.add_param_group({"params": [b]})
    a.grad = rc.ones(1)
    bad = optim.LBFGS([a], line_search_fn="armijo")  # refused when used, as in PyTorch
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        bad.step(lambda: (a * 2).sum())
    with pytest.raises(TypeError):
        opt.step()
    assert opt.defaults["max_eval"] == 25 and math.isclose(opt.defaults["tolerance_grad"], 1e-7)


def test_lbfgs_state_dict_round_trip():
    xy = rc.tensor([-1.0, 1.5], dtype=rc.float64, requires_grad=True)
    opt = optim.LBFGS([xy], max_iter=5, line_search_fn="strong_wolfe")

    def closure_for(p, o):
        def closure():
            o.zero_grad()
            loss = rosenbrock(p)
            loss.backward()
            return loss
        return closure

    opt.step(closure_for(xy, opt))
    xy2 = rc.tensor(xy.detach().numpy(), dtype=rc.float64, requires_grad=True)
    opt2 = optim.LBFGS([xy2], max_iter=5, line_search_fn="strong_wolfe")
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    opt.step(closure_for(xy, opt))
    opt2.step(closure_for(xy2, opt2))
    np.testing.assert_array_equal(xy2.detach().numpy(), xy.detach().numpy())


# -- learning-rate schedulers -----------------------------------------------------------

from rtxcore.optim import lr_scheduler  # noqa: E402


def group_params(lib, n):
    return [{"params": [lib.zeros(1, requires_grad=True)]} for _ in range(n)]


def make_opt(lib, kind, lrs=(0.1, 0.03)):
    groups = group_params(lib, len(lrs))
    for g, lr in zip(groups, lrs):
        g["lr"] = lr
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=lrs[0], momentum=0.9)
    return lib.optim.Adam(groups, lr=lrs[0])


def drive(lib, kind, make, steps, metrics=None, epochs=None):
    """lr, momentum/beta1 and get_last_lr() of each group before each step."""
    opt = make_opt(lib, kind)
    sched = make(lib.optim.lr_scheduler, opt)
    out = []
    for i in range(steps):
        key = "momentum" if kind == "sgd" else "betas"
        mom = [g[key] if kind == "sgd" else g[key][0] for g in opt.param_groups]
        out.append(([g["lr"] for g in opt.param_groups], mom, list(sched.get_last_lr())))
        opt.step()
        if metrics is not None:
            sched.step(metrics[i])
        elif epochs is not None:
            sched.step(epochs[i])
        else:
            sched.step()
    return out, sched


PLATEAU_METRICS = [5.0, 4.0, 4.0, 3.9999, 4.1, 4.2, 3.0, 3.0, 3.0, 3.0, 3.0, 2.0, 2.0,
                   2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]

SCHEDULES = [
    ("sgd", lambda L, o: L.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=25), 25, None),
    ("adam", lambda L, o: L.OneCycleLR(o, max_lr=0.3, epochs=3, steps_per_epoch=8,
                                       anneal_strategy="linear", pct_start=0.25,
                                       three_phase=True), 24, None),
    ("sgd", lambda L, o: L.OneCycleLR(o, max_lr=0.2, total_steps=12, cycle_momentum=False,
                                      div_factor=10.0, final_div_factor=100.0), 12, None),
    ("sgd", lambda L, o: L.ReduceLROnPlateau(o, patience=1, factor=0.5), 25, PLATEAU_METRICS),
    ("sgd", lambda L, o: L.ReduceLROnPlateau(o, mode="max", patience=0, threshold=0.5,
                                             threshold_mode="abs", cooldown=2,
                                             min_lr=[0.01, 0.02]), 25,
     [-x for x in PLATEAU_METRICS]),
    ("sgd", lambda L, o: L.ExponentialLR(o, gamma=0.8), 15, None),
    ("sgd", lambda L, o: L.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), 15, None),
    ("sgd", lambda L, o: L.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
     15, None),
    ("sgd", lambda L, o: L.ConstantLR(o, factor=0.5, total_iters=4), 10, None),
    ("sgd", lambda L, o: L.PolynomialLR(o, total_iters=8, power=2.0), 12, None),
    ("sgd", lambda L, o: L.MultiplicativeLR(o, lambda e: 0.9), 8, None),
    ("sgd", lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001),
     25, None),
    ("sgd", lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=4), 14, None),
    ("sgd", lambda L, o: L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=3),
                                            L.ExponentialLR(o, gamma=0.7)], milestones=[4]),
     12, None),
    ("sgd", lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, factor=0.5, total_iters=2),
                                            L.CosineAnnealingLR(o, T_max=4),
                                            L.StepLR(o, step_size=2)], milestones=[3, 7]),
     14, None),
    ("sgd", lambda L, o: L.ChainedScheduler([L.ConstantLR(o, factor=0.5, total_iters=3),
                                             L.ExponentialLR(o, gamma=0.9)]), 8, None),
    ("sgd", lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=3,
                                    step_size_down=2), 20, None),
    ("adam", lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                     mode="triangular2"), 20, None),
    ("sgd", lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                    mode="exp_range", gamma=0.9), 20, None),
]
SCHEDULE_IDS = ["OneCycle-cos", "OneCycle-3phase-linear-adam", "OneCycle-nomomentum",
                "Plateau-min-rel", "Plateau-max-abs-cooldown", "Exponential", "MultiStep",
                "Linear", "Constant", "Polynomial", "Multiplicative", "WarmRestarts-Tmult",
                "WarmRestarts", "Sequential", "Sequential3", "Chained", "Cyclic-tri",
                "Cyclic-tri2-adam", "Cyclic-exp"]


@pytest.mark.parametrize("kind,make,steps,metrics", SCHEDULES, ids=SCHEDULE_IDS)
def test_schedulers_match_torch(kind, make, steps, metrics):
    torch = pytest.importorskip("torch")
    ours, sched = drive(rc, kind, make, steps, metrics)
    theirs, tsched = drive(torch, kind, make, steps, metrics)
    for i, ((lr, mom, last), (tlr, tmom, tlast)) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(lr, tlr, rtol=1e-12, atol=1e-15, err_msg=f"lr, step {i}")
        np.testing.assert_allclose(mom, tmom, rtol=1e-12, atol=1e-15, err_msg=f"momentum {i}")
        np.testing.assert_allclose(last, tlast, rtol=1e-12, atol=1e-15, err_msg=f"last {i}")
    assert set(sched.state_dict()) == set(tsched.state_dict())
    # the schedule changes the lr somewhere
    assert len({tuple(o[0]) for o in ours}) > 1


def test_warm_restarts_fractional_epochs_match_torch():
    torch = pytest.importorskip("torch")
    epochs = [e + i / 4 for e in range(7) for i in range(4)]

    def make(L, o):
        return L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.01)

    ours, _ = drive(rc, "sgd", make, len(epochs), epochs=epochs)
    theirs, _ = drive(torch, "sgd", make, len(epochs), epochs=epochs)
    np.testing.assert_allclose([o[0] for o in ours], [t[0] for t in theirs], rtol=1e-12)


def test_one_cycle_by_hand():
    opt = make_opt(rc, "sgd", (0.1,))
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.3)
    lrs, moms = [], []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    init, lo = 1.0 / 25, 1.0 / 25 / 1e4
    up_end = 0.3 * 10 - 1

    def cos(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)

    expected = [cos(init, 1.0, s / up_end) if s <= up_end
                else cos(1.0, lo, (s - up_end) / (9 - up_end)) for s in range(10)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    assert lrs[2] == pytest.approx(1.0) and moms[2] == pytest.approx(0.85)
    assert moms[0] == pytest.approx(0.95)
    with pytest.raises(ValueError, match="Tried to step 11 times"):
        sched.step()


def test_reduce_on_plateau_by_hand():
    opt = make_opt(rc, "sgd", (1.0,))
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=2, factor=0.5, min_lr=0.2)
    lrs = []
    for m in [1.0, 1.0, 1.0, 1.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]:
        sched.step(rc.tensor(m))
        lrs.append(opt.param_groups[0]["lr"])
    # bad epochs: 3 after the first 1.0 -> halve; 0.5 resets; 3 more -> halve twice, floor
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2]
    assert sched.get_last_lr() == [0.2]
    sd = copy.deepcopy(sched.state_dict())
    sched2 = lr_scheduler.ReduceLROnPlateau(make_opt(rc, "sgd", (1.0,)))
    sched2.load_state_dict(sd)
    assert sched2.best == 0.5 and sched2.patience == 2 and sched2._is_better(0.4, 0.5)


def test_exponential_and_multistep_by_hand():
    opt = make_opt(rc, "sgd", (0.2,))
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    got = []
    for _ in range(4):
        got.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    np.testing.assert_allclose(got, [0.2, 0.1, 0.05, 0.025], rtol=1e-15)
    opt = make_opt(rc, "sgd", (1.0,))
    sched = lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.1)
    got = []
    for _ in range(6):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    np.testing.assert_allclose(got, [1, 1, 0.1, 0.1, 0.01, 0.01], rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda L, o: L.OneCycleLR(o, max_lr=0.5, total_steps=20),
    lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
    lambda L, o: L.SequentialLR(o, [L.LinearLR(o, total_iters=3), L.ExponentialLR(o, 0.8)],
                                milestones=[3]),
    lambda L, o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3),
    lambda L, o: L.PolynomialLR(o, total_iters=10),
], ids=["OneCycle", "WarmRestarts", "Sequential", "Cyclic", "Polynomial"])
def test_scheduler_state_dict_round_trip(make):
    full, _ = drive(rc, "sgd", make, 14)
    opt = make_opt(rc, "sgd")
    sched = make(lr_scheduler, opt)
    for _ in range(6):
        opt.step()
        sched.step()
    sd, osd = copy.deepcopy(sched.state_dict()), copy.deepcopy(opt.state_dict())
    opt2 = make_opt(rc, "sgd")
    sched2 = make(lr_scheduler, opt2)
    opt2.load_state_dict(osd)
    sched2.load_state_dict(sd)
    got = []
    for _ in range(6, 14):
        got.append([g["lr"] for g in opt2.param_groups])
        opt2.step()
        sched2.step()
    np.testing.assert_allclose(got, [f[0] for f in full[6:]], rtol=1e-12)


def test_scheduler_errors():
    opt = make_opt(rc, "sgd")
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode avg is unknown"):
        lr_scheduler.ReduceLROnPlateau(opt, mode="avg")
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1])
    with pytest.raises(ValueError, match="total_steps OR"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="pct_start"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have the same length"):
        lr_scheduler.OneCycleLR(opt, max_lr=[0.1], total_steps=10)
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        lr_scheduler.OneCycleLR(optim.Adagrad(group_params(rc, 1)), max_lr=0.1, total_steps=5)
    with pytest.raises(ValueError, match="Expected positive integer T_0"):
        lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="T_mult"):
        lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        lr_scheduler.SequentialLR(opt, [lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[2])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        lr_scheduler.SequentialLR(opt, [lr_scheduler.ReduceLROnPlateau(opt),
                                        lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[2])
    with pytest.raises(ValueError, match="mode is invalid"):
        lr_scheduler.CyclicLR(opt, 0.01, 0.1, mode="sine")


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "Adamax", "NAdam"])
def test_implementation_switches_are_accepted_kept_and_checked(name):
    import inspect

    cls = getattr(rc.optim, name)
    params = [rc.nn.Parameter(rc.ones(2))]
    accepted = [k for k in ("foreach", "fused", "capturable") if k in inspect.signature(cls).parameters]
    assert "foreach" in accepted  # every one of these takes foreach in PyTorch
    opt = cls(params, lr=0.1, **{k: (True if k != "fused" else None) for k in accepted})
    for k in accepted:
        assert k in opt.param_groups[0]
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        cls(params, lr=0.1, differentiable=True)
    if "fused" in accepted:
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
            cls(params, lr=0.1, fused=True, foreach=True)
