"""The fused recurrent cells (``lstm_cell``, ``gru_cell`` and their backwards,
rtxcore.dispatch.ops) on every device: each kernel against the core's
decomposition op by op (values and gradients; bit for bit on cpu, where the
kernel runs the decomposition's steps in its order), the layers and cells built
on them against the same with the kernels taken away and against PyTorch given
the same weights, gradcheck in float64 (a double backward through a cell too),
and a traced graph's cell nodes: run where the backend lacks the kernels,
refused when off their contract."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import tempfile

import numpy as np
import pytest
from safetensors.numpy import save_file

import rtxcore as rc
from rtxcore.autograd import gradcheck, gradgradcheck
from rtxcore.nn import _rnn_cells as RC
from rtxcore.ops.core import ready_device

from .conftest import supports

CELL_OPS = ("lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward")


@contextlib.contextmanager
def decomposed(device):
    """``device`` without the cell kernels: every step is the core's decomposition."""
    dev = ready_device(device)
    saved = {k: dev.kernels.pop(k) for k in CELL_OPS if k in dev.kernels}
    try:
        yield
    finally:
        dev.kernels.update(saved)


def _np(t):
    return t.detach().cpu().numpy()


def _same(got, want, device, dtype, exact=True):
    """Bit for bit on cpu (``exact``); elsewhere within a few roundings (a kernel
    may fuse a multiply-add, and its exp and tanh are the device's)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = (x if isinstance(x, np.ndarray) else _np(x) for x in (g, w))
        assert g.shape == w.shape
        if device == "cpu" and exact:
            np.testing.assert_array_equal(g, w)
        else:
            tol = {rc.float16: 4e-3, rc.float32: 2e-5, rc.float64: 1e-12}[dtype]
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _dtypes(device):
    return [d for d in (rc.float16, rc.float32, rc.float64) if supports(device, d)]


def _rand(device, dtype, *shape, seed=0):
    rng = np.random.default_rng(seed)
    return rc.tensor(rng.uniform(-2, 2, shape), dtype=dtype, device=device)


def _strided(device, dtype, b, width, seed):
    """A (b, width) operand that is not contiguous: every other column of a wider one."""
    return _rand(device, dtype, b, 2 * width, seed=seed)[:, ::2]


# -- each kernel against the decomposition ----------------------------------------------------


@pytest.mark.parametrize("n", [7, 16])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cell_kernels_against_the_decomposition(device, cell, n):
    """Forward and backward of one step, gi strided, dc given and not (LSTM);
    a hidden size of 16 takes OpenCL's float32 vector kernels, with gi
    contiguous too."""
    b, k = 5, 4 if cell == "lstm" else 3
    for dtype in _dtypes(device):
        gi = _strided(device, dtype, b, k * n, 1) if n % 8 else _rand(device, dtype, b, k * n)
        gh, prev, dh, dc = (_rand(device, dtype, *s, seed=i) for i, s in
                            enumerate([(b, k * n), (b, n), (b, n), (b, n)], 2))
        with rc.no_grad():
            if cell == "lstm":
                h, c, act = RC.lstm_cell(gi, gh, prev)
                assert act.shape == (4, b, n)
                _same((h, c, act), RC.lstm_math(gi, gh, prev), device, dtype)
                for d in (dc, None):
                    _same(RC.lstm_cell_backward(dh, d, act, c, prev),
                          RC.lstm_back_math(dh, d, act, c, prev), device, dtype)
            else:
                h, act = RC.gru_cell(gi, gh, prev)
                assert act.shape == (3, b, n)
                _same((h, act), RC.gru_math(gi, gh, prev), device, dtype)
                _same(RC.gru_cell_backward(dh, act, gh, prev),
                      RC.gru_back_math(dh, act, gh, prev), device, dtype)


_LAYERS = [
    ("LSTM", dict(num_layers=2)),
    ("LSTM", dict(proj_size=3, bidirectional=True, batch_first=True)),
    ("LSTM", dict(bias=False)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(bias=False, batch_first=True)),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("RNN", dict(bidirectional=True)),
]


def _layer_run(device, dtype, name, kw):
    """Outputs, final states and every gradient of a layer over a sequence (a
    loss on the outputs and on each final state)."""
    rc.manual_seed(3)
    m = getattr(rc.nn, name)(4, 6, **kw).to(device).to(dtype)
    x = _rand(device, dtype, 5, 3, 4, seed=7).requires_grad_()
    out, hn = m(x)
    states = hn if isinstance(hn, tuple) else (hn,)
    loss = (out * out).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(states))
    loss.backward()
    return [out, *states, x.grad] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("name, kw", _LAYERS, ids=[f"{n}-{'-'.join(kw)}" for n, kw in _LAYERS])
def test_layers_with_and_without_the_kernels(device, name, kw):
    for dtype in _dtypes(device):
        fused = _layer_run(device, dtype, name, kw)
        with decomposed(device):
            ops = _layer_run(device, dtype, name, kw)
        _same(fused, ops, device, dtype)


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_in_a_loop_against_the_op_by_op_step(device, name):
    """The cell's step (one node) against the step written op by op, as the
    modules computed it before, over a few steps as users write the loop:
    values and every gradient (the same forward bits on cpu; the gradients
    through other formulas, so within roundings)."""
    def run(fused):
        rc.manual_seed(4)
        cell = getattr(rc.nn, name)(4, 6).to(device)
        xs = _rand(device, rc.float32, 5, 3, 4, seed=8).requires_grad_()
        state = None
        for t in range(5):
            state = cell(xs[t], state) if fused else _op_by_op(cell, xs[t], state)
        h = state[0] if isinstance(state, tuple) else state
        (h * h).sum().backward()
        return [h, xs.grad] + [p.grad for p in cell.parameters()]

    got, want = run(True), run(False)
    _same(got[:1], want[:1], device, rc.float32)
    _same(got[1:], want[1:], device, rc.float32, exact=False)


def _op_by_op(cell, x, state):
    """One step as the modules' op-by-op path computes it."""
    F, n = rc.nn.functional, cell.hidden_size
    if state is None:
        state = (x.new_zeros(x.shape[0], n),) * 2 if isinstance(cell, rc.nn.LSTMCell) else \
            x.new_zeros(x.shape[0], n)
    h = state[0] if isinstance(state, tuple) else state
    gi = F.linear(x, cell.weight_ih, cell.bias_ih)
    gh = F.linear(h, cell.weight_hh, cell.bias_hh)
    if isinstance(cell, rc.nn.LSTMCell):
        i, f, g, o = (gi + gh).chunk(4, 1)
        c2 = f.sigmoid() * state[1] + i.sigmoid() * g.tanh()
        return o.sigmoid() * c2.tanh(), c2
    if isinstance(cell, rc.nn.RNNCell):
        return (gi + gh).tanh()
    r = (gi[:, :n] + gh[:, :n]).sigmoid()
    z = (gi[:, n:2 * n] + gh[:, n:2 * n]).sigmoid()
    nn_ = (gi[:, 2 * n:] + r * gh[:, 2 * n:]).tanh()
    return nn_ + z * (h - nn_)


# -- against PyTorch, given its weights ----------------------------------------------------------


def _torch_pair(name, kw, device):
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)
    tm = getattr(torch.nn, name)(4, 6, **kw)
    m = getattr(rc.nn, name)(4, 6, **kw)
    m.load_state_dict({k: rc.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return torch, tm, m.to(device)


@pytest.mark.parametrize("name, kw", [("LSTM", dict(num_layers=2, batch_first=True)),
                                      ("LSTM", dict(proj_size=2, bidirectional=True)),
                                      ("GRU", dict(num_layers=2, bidirectional=True)),
                                      ("RNN", dict(nonlinearity="relu"))])
def test_layers_match_torch(device, name, kw):
    """A training step's values and gradients (float32) given PyTorch's weights."""
    torch, tm, m = _torch_pair(name, kw, device)
    x = np.random.default_rng(9).standard_normal((5, 3, 4)).astype(np.float32)
    xt, xr = torch.tensor(x, requires_grad=True), rc.tensor(x, device=device, requires_grad=True)
    res = []
    for mod, xx in ((tm, xt), (m, xr)):
        out, hn = mod(xx)
        states = hn if isinstance(hn, tuple) else (hn,)
        ((out * out).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(states))).backward()
        res.append([out, *states, xx.grad] + [p.grad for p in mod.parameters()])
    for a, b in zip(res[1], res[0]):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells_in_a_loop_match_torch(device, name):
    torch, tm, m = _torch_pair(name, {}, device)
    xs = np.random.default_rng(10).standard_normal((6, 3, 4)).astype(np.float32)
    res = []
    for lib, mod, dev in ((torch, tm, None), (rc, m, device)):
        x = lib.tensor(xs, requires_grad=True) if dev is None else \
            rc.tensor(xs, device=dev, requires_grad=True)
        state = None
        for t in range(6):
            state = mod(x[t], state)
        h = state[0] if isinstance(state, tuple) else state
        ((h * h).sum() + (state[1].sum() if isinstance(state, tuple) else 0)).backward()
        res.append([h, x.grad] + [p.grad for p in mod.parameters()])
    for a, b in zip(res[1], res[0]):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-4, atol=1e-5)


# -- gradients: finite differences, double backward ---------------------------------------------


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cell_step_gradcheck_and_double_backward(device, name):
    """The cell's one node in float64: its gradient, and under create_graph the
    gradient of its gradient (the step recomputed as recorded ops)."""
    if not supports(device, rc.float64):
        pytest.skip(f"{device} has no float64")
    rc.manual_seed(6)
    cell = getattr(rc.nn, name)(2, 3).to(device).double()
    names = [n for n, _ in cell.named_parameters()]
    ps = [p.detach().clone().requires_grad_() for p in cell.parameters()]
    x, h, c = (_rand(device, rc.float64, 2, k, seed=s).requires_grad_()
               for s, k in ((11, 2), (12, 3), (13, 3)))

    def f(x, h, c, *weights):
        saved = dict(cell._parameters)
        cell._parameters.update(zip(names, weights))
        try:
            out = cell(x, (h, c)) if name == "LSTMCell" else cell(x, h)
        finally:
            cell._parameters.update(saved)
        return out

    assert gradcheck(f, [x, h, c] + ps)
    assert gradgradcheck(f, [x, h, c] + ps)


@pytest.mark.parametrize("reverse", [False, True])
def test_sequence_gradcheck_with_a_projection(device, reverse):
    """The LSTM recurrence with ``proj_size`` (its own matmul per step) and the
    GRU's, through their Functions directly, in float64."""
    from rtxcore.nn._recurrence import _GRUSeq, _LSTMSeq

    if not supports(device, rc.float64):
        pytest.skip(f"{device} has no float64")
    mk = lambda *s, seed: _rand(device, rc.float64, *s, seed=seed).requires_grad_()  # noqa: E731
    gi, h0, c0, w, wr = (mk(3, 2, 8, seed=1), mk(2, 1, seed=2), mk(2, 2, seed=3),
                         mk(8, 1, seed=4), mk(1, 2, seed=6))
    assert gradcheck(lambda *a: _LSTMSeq.apply(*a, reverse), [gi, h0, c0, w, wr])
    gi3, w3, b3 = mk(3, 2, 6, seed=7), mk(6, 2, seed=8), mk(6, seed=9)
    assert gradcheck(lambda *a: _GRUSeq.apply(*a, reverse), [gi3, c0, w3, b3])


def test_a_cell_step_is_one_node():
    """LSTMCell's step records one node whose edges lead to the leaves."""
    cell = rc.nn.LSTMCell(3, 4)
    x = rc.randn(2, 3, requires_grad=True)
    h, c = cell(x)
    assert type(h.grad_fn).__name__ == "LSTMCellStepBackward"
    assert c.grad_fn is h.grad_fn
    leaves = {type(e[0]).__name__ if isinstance(e, tuple) else type(e).__name__
              for e in h.grad_fn.next_functions if e is not None}
    assert all("Accumulate" in n for n in leaves), leaves


@pytest.mark.parametrize("name", ["LSTM", "RNN", "GRU"])
def test_an_empty_batch(device, name):
    m = getattr(rc.nn, name)(3, 4).to(device)
    x = rc.randn(5, 0, 3, device=device, requires_grad=True)
    out, hn = m(x)
    assert tuple(out.shape) == (5, 0, 4)
    out.sum().backward()
    assert tuple(x.grad.shape) == (5, 0, 3)


# -- traced graphs -------------------------------------------------------------------------------


def _traced_step():
    """A forward and backward through an LSTM (with a projection) and a GRU,
    traced on cpu: its cell nodes, and the function to compare with."""
    rc.manual_seed(0)
    lstm, gru = rc.nn.LSTM(3, 4, proj_size=2), rc.nn.GRU(2, 5)
    params = list(lstm.parameters()) + list(gru.parameters())

    def f(x):
        out, (h, c) = lstm(x)
        out2, _ = gru(out)
        loss = (out2 * out2).sum() + h.sum() + c.sum()
        return rc.autograd.grad(loss, [x] + params)

    x = rc.randn(6, 2, 3, requires_grad=True)
    return f, x, rc.jit.trace(f, x)


def _saved(t):
    path = os.path.join(tempfile.mkdtemp(), "cells.rtxg")
    t.save(path)
    return path


def test_traced_cells_run_on_every_device_and_as_the_decomposition(device):
    f, x, t = _traced_step()
    ops = [n.op for n in t.graph.kernels()]
    assert {op: ops.count(op) for op in CELL_OPS} == {op: 6 for op in CELL_OPS}
    g = rc.jit.load(_saved(t))
    want = f(x)
    for without in (False, True):
        with decomposed(device) if without else contextlib.nullcontext():
            got = g(x.detach().to(device).requires_grad_())
        for a, b in zip(got, want):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)


def _doc_and_data(t):
    from safetensors import safe_open

    with safe_open(_saved(t), framework="numpy") as fh:
        return (json.loads(fh.metadata()["rtxcore.graph"]),
                {k: fh.get_tensor(k) for k in fh.keys()})


@pytest.mark.parametrize("op, change, match", [
    ("lstm_cell", lambda n: n["args"].pop(), r"lstm_cell takes 3 arguments"),
    ("lstm_cell", lambda n: n["args"].__setitem__(2, n["args"][0]),
     r"c_prev \(value \d+\) must have shape \[2, 4\]"),
    ("lstm_cell_backward", lambda n: n["args"].__setitem__(2, n["args"][0]),
     r"act \(value \d+\) must be \(4, B, H\)"),
    ("gru_cell", lambda n: n["args"].__setitem__(0, n["args"][2]),
     r"gi \(value \d+\) must have shape \[2, 15\]"),
    ("gru_cell_backward", lambda n: n["args"].__setitem__(3, None), r"args\[3\] \(h_prev\)"),
])
def test_a_cell_node_off_its_contract_is_refused(tmp_path, op, change, match):
    _, _, t = _traced_step()
    doc, data = _doc_and_data(t)
    node = next(n for n in doc["nodes"] if n["op"] == op)
    change(node)
    path = str(tmp_path / "crafted.rtxg")
    save_file(data, path, metadata={"rtxcore.graph": json.dumps(copy.deepcopy(doc))})
    with pytest.raises(ValueError, match=match):
        rc.jit.load(path)
