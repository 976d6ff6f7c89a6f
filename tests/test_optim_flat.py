"""Adam and AdamW's multi-tensor step (``rtxcore.optim._multi``): the group's
update on flat buffers gives bit for bit the per-parameter loop's parameters and
state (``foreach=False`` runs the loop), through every option, a checkpoint
round trip, parameters whose gradient comes and goes, and state replaced from
outside; groups it can't take (mixed dtypes) run the loop."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import optim
from rtxcore.optim import _multi

SHAPES = [(5, 3), (3,), (2, 2, 2), (1,), (7,)]


def _params(device: str, seed: int = 0, dtype=rc.float32) -> list[rc.Tensor]:
    rng = np.random.default_rng(seed)
    return [rc.tensor(rng.standard_normal(s), dtype=dtype, device=device, requires_grad=True)
            for s in SHAPES]


def _set_grads(ps: list[rc.Tensor], step: int, skip: int | None = None) -> None:
    rng = np.random.default_rng(100 + step)
    for i, p in enumerate(ps):
        g = rng.standard_normal(p.shape) * (i + 1)
        p.grad = None if i == skip else rc.tensor(g, dtype=p.dtype, device=p.device)


def _state(opt: optim.Optimizer, ps: list[rc.Tensor]) -> list[dict[str, np.ndarray]]:
    return [{k: (v.cpu().numpy() if isinstance(v, rc.Tensor) else v)
             for k, v in opt.state[p].items()} for p in ps]


def _same(a: list[rc.Tensor], b: list[rc.Tensor]) -> None:
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.detach().cpu().numpy(), y.detach().cpu().numpy())


CONFIGS = [
    (optim.Adam, {}),
    (optim.Adam, {"weight_decay": 0.1, "amsgrad": True}),
    (optim.Adam, {"maximize": True, "weight_decay": 0.05}),
    (optim.AdamW, {"weight_decay": 0.1}),
    (optim.AdamW, {"amsgrad": True, "maximize": True, "lr": 0.01}),
]


@pytest.mark.parametrize("cls, kw", CONFIGS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_flat_step_is_the_loop_bit_for_bit(device, cls, kw):
    flat_p, loop_p = _params(device), _params(device)
    flat = cls(flat_p, **kw)
    loop = cls(loop_p, foreach=False, **kw)
    for step in range(6):
        skip = 2 if step == 3 else None  # one parameter without a gradient one step
        _set_grads(flat_p, step, skip)
        _set_grads(loop_p, step, skip)
        flat.step()
        loop.step()
        _same(flat_p, loop_p)
    for a, b in zip(_state(flat, flat_p), _state(loop, loop_p)):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    # the flat path really ran: the state tensors are pieces of one buffer (but
    # parameter 2's, whose step count fell behind: from then on the step counts
    # differ, and the group runs the loop)
    st = [flat.state[p]["exp_avg"] for i, p in enumerate(flat_p) if i != 2]
    assert len({id(t._storage) for t in st}) == 1
    assert flat.state[flat_p[2]]["step"] == 5 and flat.state[flat_p[0]]["step"] == 6


def test_checkpoint_round_trip_and_replaced_state(device, tmp_path):
    ps, ref_p = _params(device), _params(device)
    opt, ref = optim.AdamW(ps, weight_decay=0.1), optim.AdamW(ref_p, weight_decay=0.1,
                                                               foreach=False)
    for step in range(3):
        _set_grads(ps, step)
        _set_grads(ref_p, step)
        opt.step()
        ref.step()
    path = tmp_path / "opt.safetensors"
    rc.save(opt.state_dict(), path)
    loaded = rc.load(path)
    # each saved state tensor is its own piece, not the flat buffer
    assert [tuple(loaded["state"][i]["exp_avg"].shape) for i in range(len(SHAPES))] == SHAPES
    opt2 = optim.AdamW(ps, weight_decay=0.1)
    opt2.load_state_dict(loaded)
    # state replaced from outside (load_state_dict makes new tensors): the next
    # step re-flattens it and goes on exactly
    for step in range(3, 6):
        _set_grads(ps, step)
        _set_grads(ref_p, step)
        opt2.step()
        ref.step()
    _same(ps, ref_p)


def test_groups_the_flat_step_cannot_take_run_the_loop():
    ps = _params("cpu")[:2] + _params("cpu", dtype=rc.float64)[2:]
    opt = optim.Adam(ps)
    _set_grads(ps, 0)
    items = list(opt._grads(opt.param_groups[0], lambda st, p: None, raw=True))
    assert not _multi.eligible(opt.param_groups[0], items)  # mixed dtypes
    ps = _params("cpu")
    opt = optim.Adam(ps)
    _set_grads(ps, 0)
    opt.step()
    ref_p = _params("cpu")
    ref = optim.Adam(ref_p, foreach=False)
    _set_grads(ref_p, 0)
    ref.step()
    _same(ps, ref_p)
    assert len({id(opt.state[p]["exp_avg"]._storage) for p in ps}) == 1
    assert len({id(ref.state[p]["exp_avg"]._storage) for p in ref_p}) == len(ps)


# -- the moments as one fused program (Backend.fuse) ----------------------------------

BIG = [(256, 160), (160,), (3, 7)]  # 41K elements: rtx_cpu's C loop (from 32K)


@pytest.mark.parametrize("dtype", [rc.float32, rc.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("kw", [{}, {"betas": (0.3, 0.95), "weight_decay": 0.2},
                                {"lr": 0.05, "eps": 1e-3}], ids=["default", "lerp-other-side", "lr"])
def test_fused_moments_are_the_loop_bit_for_bit(device, dtype, kw, monkeypatch):
    # large enough for the C loop on cpu; beta1 0.3 takes lerp's other side
    from rtxcore.optim import adam

    ran = []
    real = adam._fused_moments
    monkeypatch.setattr(adam, "_fused_moments", lambda *a: ran.append(1) or real(*a))
    rng = np.random.default_rng(5)
    data = [rng.standard_normal(s) for s in BIG]
    flat_p = [rc.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in data]
    loop_p = [rc.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in data]
    flat, loop = optim.AdamW(flat_p, **kw), optim.AdamW(loop_p, foreach=False, **kw)
    for step in range(4):
        _set_grads(flat_p, step)
        _set_grads(loop_p, step)
        flat.step()
        loop.step()
    _same(flat_p, loop_p)
    for a, b in zip(_state(flat, flat_p), _state(loop, loop_p)):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    assert len(ran) == 4
    runners = [v for k, v in flat._flat_cache.items()
               if isinstance(k, tuple) and len(k) == 6 and k[1] == "moments"]
    assert len(runners) == 1  # one program for the group, kept
    if device == "cpu":  # rtx_cpu runs fused programs: the step was one
        assert runners[0] is not None


def test_fused_moments_stay_off_under_amsgrad():
    ps = _params("cpu")
    opt = optim.Adam(ps, amsgrad=True)
    _set_grads(ps, 0)
    opt.step()
    assert not any(isinstance(k, tuple) and len(k) == 6 for k in opt._flat_cache)


@pytest.mark.parametrize("to", ["half", "double"])
def test_state_of_another_dtype_than_the_parameters_runs_the_loop(device, to):
    # model.half() / .double() after a step leaves the state float32: the flat
    # step (and its fused program) would read it as the parameters' dtype
    results = []
    for foreach in (None, False):
        rc.manual_seed(0)
        m = rc.nn.Linear(256, 160).to(device)  # 41K parameters: the C loop on cpu
        opt = optim.AdamW(m.parameters(), foreach=foreach)
        m(rc.randn(2, 256, device=device)).sum().backward()
        opt.step()
        getattr(m, to)()
        opt.zero_grad()
        x = rc.randn(2, 256, device=device)
        m(x.half() if to == "half" else x.double()).sum().backward()
        opt.step()
        w = m.weight.detach().float().cpu().numpy()
        assert np.isfinite(w).all()
        results.append(w)
    np.testing.assert_array_equal(results[0], results[1])
