"""rtxcore.compile: trace once, replay, retrace on a guard miss, eager where data decides."""

import warnings

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore.jit import TraceError

from .jit_steps import clipped_step


def _np(t):
    return t.detach().cpu().numpy()


def test_compiled_function_traces_once_and_replays(device):
    w = rc.randn(3, 5, device=device)

    def f(x):
        return (x @ w).tanh() * 0.5 + 1

    cf = rc.compile(f)
    for _ in range(3):
        x = rc.randn(4, 3, device=device)
        np.testing.assert_allclose(_np(cf(x)), _np(f(x)), rtol=1e-6, atol=1e-6)
    assert cf.traces == 1


def test_a_guard_miss_retraces_and_never_returns_a_stale_result():
    m = nn.Linear(3, 2)
    cm = rc.compile(m)
    x = rc.randn(4, 3)
    with rc.no_grad():
        np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-6)
        assert cm.traces == 1
        # shape
        x5 = rc.randn(5, 3)
        np.testing.assert_allclose(_np(cm(x5)), _np(m(x5)), rtol=1e-6)
        assert cm.traces == 2
        # dtype
        m64 = nn.Linear(3, 2).double()
        cm64 = rc.compile(m64)
        xd = rc.randn(4, 3, dtype=rc.float64)
        np.testing.assert_allclose(_np(cm64(xd)), _np(m64(xd)), rtol=1e-12)
        # a parameter replaced by another object
        m.weight = nn.Parameter(rc.randn(2, 3))
        np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-6)
        assert cm.traces == 3 and "parameters or buffers were replaced" in cm.misses[-1]
        # and a parameter changed in place is simply read (by reference)
        m.weight.mul_(2)
        np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-6)
        assert cm.traces == 3


def test_a_device_change_retraces(device):
    m = nn.Linear(3, 2)
    cm = rc.compile(m)
    x = rc.randn(4, 3)
    with rc.no_grad():
        cm(x)
        m.to(device)
        xd = x.to(device)
        out = cm(xd)
        assert out.device == rc.device(device)
        np.testing.assert_allclose(_np(out), _np(m(xd)), rtol=1e-6)


def _setup(opt_kind, device, seed=0):
    rc.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Dropout(0.1),
                      nn.Linear(16, 3)).to(device)
    if opt_kind == "adamw":
        opt = rc.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1, capturable=True)
    elif opt_kind == "adamw-numbers":
        opt = rc.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1)
    else:
        opt = rc.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    step = clipped_step(m, opt)

    return m, opt, step


@pytest.mark.parametrize("opt_kind", ["adamw", "sgd", "adamw-numbers"])
def test_a_compiled_training_step_matches_eager(device, opt_kind):
    """forward, backward (dropout included), clipping and the optimizer, compiled:
    the same losses, parameters and gradients as eager after several steps."""
    rng = np.random.default_rng(2)
    data = [(rc.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=device),
             rc.tensor(rng.integers(0, 3, 8), device=device)) for _ in range(6)]
    ma, oa, sa = _setup(opt_kind, device)
    mb, ob, sb = _setup(opt_kind, device)
    cb = rc.compile(sb)
    rc.manual_seed(7)
    eager = [_np(sa(x, y)) for x, y in data]
    rc.manual_seed(7)
    compiled = [_np(cb(x, y)) for x, y in data]
    np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(ma.named_parameters(), mb.parameters()):
        np.testing.assert_allclose(_np(q), _np(p), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(_np(q.grad), _np(p.grad), rtol=1e-5, atol=1e-6, err_msg=name)
    if opt_kind.startswith("adamw"):
        # the first step makes the state; then one graph (a default AdamW's step
        # count becomes a tensor once it steps inside a compiled function)
        assert cb.traces == 2
        assert all(isinstance(ob.state[p]["step"], rc.Tensor) for p in mb.parameters())


def test_host_reads_run_eagerly_with_one_warning_or_raise_with_fullgraph():
    def f(x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1

    cf = rc.compile(f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = cf(rc.ones(3))
        b = cf(rc.ones(3))
        c = cf(-rc.ones(3))
    assert [_np(t).tolist() for t in (a, b, c)] == [[2, 2, 2], [2, 2, 2], [-2, -2, -2]]
    msgs = [str(x.message) for x in w if "rtxcore.compile" in str(x.message)]
    assert len(msgs) == 1 and "test_compile.py" in msgs[0]
    with pytest.raises(TraceError, match=r"fullgraph=True.*test_compile\.py:\d+"):
        rc.compile(f, fullgraph=True)(rc.ones(3))


def test_dropout_draws_new_numbers_on_each_replay():
    d = nn.Dropout(0.5)
    cd = rc.compile(d)
    x = rc.ones(1000)
    masks = [_np(cd(x)) for _ in range(3)]
    assert not np.array_equal(masks[1], masks[2])
    rc.manual_seed(3)
    cd(x)
    again = _np(cd(x))
    rc.manual_seed(3)
    d(x)
    np.testing.assert_array_equal(again, _np(d(x)))


def test_the_cache_is_bounded_and_compile_keeps_torch_signature():
    f = rc.compile(lambda x: x + 1, cache_size=2)
    for n in (1, 2, 3, 1):
        assert _np(f(rc.zeros(n))).tolist() == [1.0] * n
    assert f.traces == 4  # (1) was dropped when (3) came
    assert rc.compile(disable=True)(len) is len
    dec = rc.compile(fullgraph=True)(lambda x: x * 3)
    assert _np(dec(rc.ones(2))).tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="expected a function or module"):
        rc.compile(3)


def _mlp(seed, device="cpu"):
    rc.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Dropout(0.2),
                         nn.Linear(16, 3)).to(device)


def test_compile_model_then_backward_outside_runs_compiled_graphs(device):
    """torch.compile(model), then loss.backward() outside: a forward graph and a
    backward graph; each replay's gradients (dropout's mask included) are eager's."""
    ma, mb = _mlp(0, device), _mlp(0, device)
    cm = rc.compile(mb)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "running eagerly"
        for i in range(4):
            x = rc.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=device)
            y = rc.tensor(rng.integers(0, 3, 8), device=device)
            for m, call in ((ma, ma), (mb, cm)):
                m.zero_grad()
                rc.manual_seed(i)
                loss = nn.functional.cross_entropy(call(x), y)
                loss.backward()
            for (name, p), q in zip(ma.named_parameters(), mb.parameters()):
                np.testing.assert_allclose(_np(q.grad), _np(p.grad), rtol=1e-6, atol=1e-7,
                                           err_msg=name)
    assert cm.traces == 1
    entry = next(iter(cm._cache.values()))
    assert entry.backward is not None and any(True for _ in entry.backward.graph.kernels())


def test_compiled_outputs_carry_a_grad_fn_and_reach_argument_history():
    """Gradients flow through the compiled node into an argument's own history
    (an encoder before the compiled part), and accumulate into .grad as eagerly."""
    rc.manual_seed(1)
    enc, head = nn.Linear(4, 5), nn.Linear(5, 2)
    chead = rc.compile(head)
    z = rc.randn(3, 4)
    for _ in range(2):
        out = chead(enc(z).tanh())
        assert out.grad_fn is not None and out.requires_grad
        (out * rc.tensor([1.0, -2.0])).sum().backward()
    got = [_np(p.grad).copy() for p in (*enc.parameters(), *head.parameters())]
    for p in (*enc.parameters(), *head.parameters()):
        p.grad = None
    for _ in range(2):
        (head(enc(z).tanh()) * rc.tensor([1.0, -2.0])).sum().backward()
    for g, p in zip(got, (*enc.parameters(), *head.parameters())):
        np.testing.assert_allclose(g, _np(p.grad), rtol=1e-6, atol=1e-7)
    assert chead.traces == 1


def test_a_compiled_function_of_a_leaf_argument_gives_its_grad():
    w = rc.randn(3, 3)
    f = rc.compile(lambda x: (x @ w).exp().sum())
    for _ in range(2):
        x = rc.randn(2, 3, requires_grad=True)
        f(x).backward()
        xe = x.detach().requires_grad_()
        (xe @ w).exp().sum().backward()
        np.testing.assert_allclose(_np(x.grad), _np(xe.grad), rtol=1e-6)
    assert f.traces == 1
    with pytest.raises(RuntimeError, match="differentiated again"):
        x = rc.randn(2, 3, requires_grad=True)
        rc.autograd.grad(f(x), x, create_graph=True)


def test_a_training_step_may_return_loss_as_it_is():
    """The idiom ``return loss`` (not ``loss.detach()``): the step replays, and
    the returned loss is a plain tensor (its history was spent inside)."""
    ma, mb = _mlp(3), _mlp(3)
    oa = rc.optim.Adam(ma.parameters(), lr=1e-2)
    ob = rc.optim.Adam(mb.parameters(), lr=1e-2)

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    cstep = rc.compile(lambda x, y: step(mb, ob, x, y))
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(5):
            x = rc.tensor(rng.standard_normal((8, 6)).astype(np.float32))
            y = rc.tensor(rng.integers(0, 3, 8))
            rc.manual_seed(i)
            le = step(ma, oa, x, y)
            rc.manual_seed(i)
            lc = cstep(x, y)
            np.testing.assert_allclose(_np(lc), _np(le), rtol=1e-5)
    assert cstep.traces == 2  # the first step makes Adam's state
    for p, q in zip(ma.parameters(), mb.parameters()):
        np.testing.assert_allclose(_np(q), _np(p), rtol=1e-5, atol=1e-6)


def test_retracing_past_the_limit_warns_once_naming_what_changed_then_runs_eagerly():
    cf = rc.compile(lambda x: x * 2 + 1, options={"recompile_limit": 3})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 7):
            assert _np(cf(rc.ones(n))).tolist() == [3.0] * n
    msgs = [str(x.message) for x in w if "rtxcore.compile" in str(x.message)]
    assert cf.traces == 3 and len(msgs) == 1, msgs
    assert "shape changed from (3,) to (4,)" in msgs[0] and "recompile_limit=3" in msgs[0]
    assert "torch" not in msgs[0]


def test_eager_fallback_messages_name_rtxcore():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rc.compile(lambda x: x * float(x.sum()))(rc.ones(2))
    msgs = [str(x.message) for x in w]
    assert msgs and all("rtxcore" in m and "torch." not in m for m in msgs)


def test_the_compiled_node_is_named_as_pytorch_names_it():
    m = nn.Linear(3, 2)
    cm = rc.compile(m)
    cm(rc.ones(1, 3))
    out = cm(rc.ones(1, 3))
    assert out.grad_fn.name() == "CompiledFunctionBackward"


def test_a_grad_set_on_a_tensor_from_outside_is_set_by_each_replay():
    """``p.grad = ...`` on tensors that are neither a module's nor an
    optimizer's (clip_grad_norm_ over a list, a closure's leaves) is part of
    what the call does: each replay sets it as eagerly."""
    ps = [rc.randn(5, requires_grad=True) for _ in range(3)]

    def clip(*gs):
        for p, g in zip(ps, gs):
            p.grad = g.clone()
        return rc.nn.utils.clip_grad_norm_(ps, 1.0)

    cf = rc.compile(clip)
    for i in range(3):
        gs = [rc.randn(5) * (i + 1) for _ in ps]
        norm = cf(*gs)
        want = [g.numpy() * min(1.0, 1.0 / (float(norm) + 1e-6)) for g in gs]
        for p, w in zip(ps, want):
            np.testing.assert_allclose(_np(p.grad), w, rtol=1e-5)
    assert cf.traces == 1

    w = rc.randn(4, requires_grad=True)  # a closure's leaf, backward inside

    def step(x):
        w.grad = None
        loss = (x * w).sum()
        loss.backward()
        return loss.detach()

    cs = rc.compile(step)
    for _ in range(3):
        x = rc.randn(4)
        cs(x)
        np.testing.assert_array_equal(_np(w.grad), _np(x))


def test_gradients_accumulate_across_replays_as_eagerly():
    """A compiled call running backward without zero_grad adds to .grad, as
    eager does; a .grad cleared outside between calls is cleared for the replay."""
    def run(compiled, zero_between):
        rc.manual_seed(0)
        m = nn.Linear(4, 2)

        def f(x):
            m(x).sum().backward()
            return m.weight.grad.sum().detach()

        g = rc.compile(f) if compiled else f
        out = []
        for i in range(4):
            if zero_between and i == 2:
                m.zero_grad()
            g(rc.ones(3, 4) * (i + 1))
            out.append(_np(m.weight.grad).copy())
        return out

    for zero_between in (False, True):
        for a, b in zip(run(True, zero_between), run(False, zero_between)):
            np.testing.assert_allclose(a, b, rtol=1e-6)
