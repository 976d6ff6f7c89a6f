"""Recurrent layers (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``) and their cells: values
and gradients against PyTorch given PyTorch's weights, against the equations by
hand in NumPy, gradcheck, and PyTorch's argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore.autograd import gradcheck
from rtxcore.nn.utils.rnn import pad_sequence


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "cpu") else t.detach().numpy()


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _load_from_torch(m, tm, device="cpu"):
    m.load_state_dict({k: rc.tensor(v.detach().numpy(), device=device)
                       for k, v in tm.state_dict().items()})


# -- against PyTorch -----------------------------------------------------------------------


_MODES = {
    "rnn_tanh": ("RNN", {}),
    "rnn_relu": ("RNN", {"nonlinearity": "relu"}),
    "lstm": ("LSTM", {}),
    "lstm_proj": ("LSTM", {"proj_size": 2}),
    "gru": ("GRU", {}),
    "gru_no_bias": ("GRU", {"bias": False}),
    "lstm_proj_no_bias": ("LSTM", {"proj_size": 2, "bias": False}),
}
_CONFIGS = [(1, False, False), (2, False, False), (2, True, False), (1, True, True), (2, False, True)]


@pytest.mark.parametrize("layers, bidirectional, batch_first", _CONFIGS,
                         ids=["1layer", "2layers", "2layers-bi", "bi-batch_first", "2layers-batch_first"])
@pytest.mark.parametrize("mode", list(_MODES))
def test_matches_torch(mode, layers, bidirectional, batch_first):
    torch = pytest.importorskip("torch")
    name, kw = _MODES[mode]
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(3, 4, layers, bidirectional=bidirectional,
                                 batch_first=batch_first, **kw).double()
    m = getattr(nn, name)(3, 4, layers, bidirectional=bidirectional, batch_first=batch_first,
                          **kw).double()
    assert list(m.state_dict()) == list(tm.state_dict())
    _load_from_torch(m, tm)
    x = torch.randn(*((2, 5, 3) if batch_first else (5, 2, 3)), dtype=torch.float64,
                    requires_grad=True)
    dirs = 2 if bidirectional else 1
    h_size = kw.get("proj_size", 4)
    h0 = torch.randn(layers * dirs, 2, h_size, dtype=torch.float64, requires_grad=True)
    hx_t = h0
    if name == "LSTM":
        c0 = torch.randn(layers * dirs, 2, 4, dtype=torch.float64, requires_grad=True)
        hx_t = (h0, c0)
    xr = rc.tensor(x.detach().numpy(), requires_grad=True)
    h0r = rc.tensor(h0.detach().numpy(), requires_grad=True)
    hx_r = h0r
    if name == "LSTM":
        c0r = rc.tensor(c0.detach().numpy(), requires_grad=True)
        hx_r = (h0r, c0r)
    out_t, hn_t = tm(x, hx_t)
    out_r, hn_r = m(xr, hx_r)
    np.testing.assert_allclose(_np(out_r), out_t.detach().numpy(), atol=1e-12)
    hn_t = hn_t if isinstance(hn_t, tuple) else (hn_t,)
    hn_r = hn_r if isinstance(hn_r, tuple) else (hn_r,)
    for a, b in zip(hn_r, hn_t):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), atol=1e-12)
    # a loss that weights every output and final state differently
    w_out = torch.randn(out_t.shape, dtype=torch.float64)
    loss_t = (out_t * w_out).sum() + sum((h ** 2).sum() for h in hn_t)
    loss_r = (out_r * rc.tensor(w_out.numpy())).sum() + sum((h ** 2).sum() for h in hn_r)
    loss_t.backward()
    loss_r.backward()
    params = dict(m.named_parameters())
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(_np(params[n].grad), p.grad.numpy(), atol=1e-10, err_msg=n)
    np.testing.assert_allclose(_np(xr.grad), x.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(_np(h0r.grad), h0.grad.numpy(), atol=1e-10)
    if name == "LSTM":
        np.testing.assert_allclose(_np(c0r.grad), c0.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("mode", ["rnn_tanh", "lstm", "gru"])
def test_unbatched_matches_torch(mode):
    torch = pytest.importorskip("torch")
    name, kw = _MODES[mode]
    torch.manual_seed(1)
    tm = getattr(torch.nn, name)(3, 4, 2, bidirectional=True, **kw)
    m = getattr(nn, name)(3, 4, 2, bidirectional=True, **kw)
    _load_from_torch(m, tm)
    x = torch.randn(6, 3)
    out_t, hn_t = tm(x)
    out_r, hn_r = m(rc.tensor(x.numpy()))
    assert tuple(out_r.shape) == tuple(out_t.shape) == (6, 8)
    np.testing.assert_allclose(_np(out_r), out_t.detach().numpy(), atol=1e-5)
    hn_t = hn_t if isinstance(hn_t, tuple) else (hn_t,)
    hn_r = hn_r if isinstance(hn_r, tuple) else (hn_r,)
    for a, b in zip(hn_r, hn_t):
        assert tuple(a.shape) == tuple(b.shape) == (4, 4)
        np.testing.assert_allclose(_np(a), b.detach().numpy(), atol=1e-5)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_match_torch(name, batched):
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    tm = getattr(torch.nn, name)(3, 5).double()
    m = getattr(nn, name)(3, 5).double()
    assert list(m.state_dict()) == list(tm.state_dict())
    _load_from_torch(m, tm)
    shape = (2, 3) if batched else (3,)
    hshape = (2, 5) if batched else (5,)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    h = torch.randn(*hshape, dtype=torch.float64, requires_grad=True)
    xr = rc.tensor(x.detach().numpy(), requires_grad=True)
    hr = rc.tensor(h.detach().numpy(), requires_grad=True)
    if name == "LSTMCell":
        c = torch.randn(*hshape, dtype=torch.float64)
        out_t = tm(x, (h, c))
        out_r = m(xr, (hr, rc.tensor(c.numpy())))
    else:
        out_t, out_r = (tm(x, h),), (m(xr, hr),)
    for a, b in zip(out_r, out_t):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), atol=1e-12)
    sum((o * (i + 1)).sum() for i, o in enumerate(out_t)).backward()
    sum((o * (i + 1)).sum() for i, o in enumerate(out_r)).backward()
    np.testing.assert_allclose(_np(xr.grad), x.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(_np(hr.grad), h.grad.numpy(), atol=1e-12)
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(_np(dict(m.named_parameters())[n].grad), p.grad.numpy(),
                                   atol=1e-12, err_msg=n)
    # no state given: zeros
    zero_t = tm(x)
    zero_r = m(xr)
    zero_t = zero_t if isinstance(zero_t, tuple) else (zero_t,)
    zero_r = zero_r if isinstance(zero_r, tuple) else (zero_r,)
    for a, b in zip(zero_r, zero_t):
        np.testing.assert_allclose(_np(a), b.detach().numpy(), atol=1e-12)


# -- by hand, on every device -------------------------------------------------------------


def _gru_np(x, h, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's GRU equations, one step."""
    gi = x @ w_ih.T + b_ih
    gh = h @ w_hh.T + b_hh
    i_r, i_z, i_n = np.split(gi, 3, axis=-1)
    h_r, h_z, h_n = np.split(gh, 3, axis=-1)
    r = _sigmoid(i_r + h_r)
    z = _sigmoid(i_z + h_z)
    n = np.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def test_gru_by_hand(device):
    rc.manual_seed(3)
    gru = nn.GRU(3, 4).to(device)
    w = {k: _np(v) for k, v in gru.state_dict().items()}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((1, 2, 4)).astype(np.float32)
    out, hn = gru(rc.tensor(x, device=device), rc.tensor(h0, device=device))
    h = h0[0]
    for t in range(2):
        h = _gru_np(x[t], h, w["weight_ih_l0"], w["weight_hh_l0"], w["bias_ih_l0"], w["bias_hh_l0"])
        np.testing.assert_allclose(_np(out)[t], h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(hn)[0], h, rtol=1e-5, atol=1e-5)
    cell = nn.GRUCell(3, 4).to(device)
    cw = {k: _np(v) for k, v in cell.state_dict().items()}
    got = cell(rc.tensor(x[0], device=device), rc.tensor(h0[0], device=device))
    want = _gru_np(x[0], h0[0], cw["weight_ih"], cw["weight_hh"], cw["bias_ih"], cw["bias_hh"])
    np.testing.assert_allclose(_np(got), want, rtol=1e-5, atol=1e-5)


def test_lstm_and_rnn_by_hand(device):
    rc.manual_seed(4)
    lstm = nn.LSTM(2, 3, bias=False).to(device)
    rnn = nn.RNN(2, 3, nonlinearity="relu").to(device)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 1, 2)).astype(np.float32)
    out, (hn, cn) = lstm(rc.tensor(x, device=device))
    w_ih, w_hh = _np(lstm.weight_ih_l0), _np(lstm.weight_hh_l0)
    h = c = np.zeros((1, 3), np.float32)
    for t in range(3):
        i, f, g, o = np.split(x[t] @ w_ih.T + h @ w_hh.T, 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        np.testing.assert_allclose(_np(out)[t], h, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(cn)[0], c, rtol=1e-5, atol=1e-5)
    out, hn = rnn(rc.tensor(x, device=device))
    p = {k: _np(v) for k, v in rnn.state_dict().items()}
    h = np.zeros((1, 3), np.float32)
    for t in range(3):
        h = np.maximum(x[t] @ p["weight_ih_l0"].T + p["bias_ih_l0"] + h @ p["weight_hh_l0"].T
                       + p["bias_hh_l0"], 0)
    np.testing.assert_allclose(_np(hn)[0], h, rtol=1e-5, atol=1e-5)


def test_batch_first_and_bidirectional_layout(device):
    rc.manual_seed(5)
    gru = nn.GRU(3, 4, bidirectional=True).to(device)
    gru_bf = nn.GRU(3, 4, bidirectional=True, batch_first=True).to(device)
    gru_bf.load_state_dict(gru.state_dict())
    x = rc.randn(5, 2, 3, device=device)
    out, hn = gru(x)
    out_bf, hn_bf = gru_bf(x.transpose(0, 1))
    assert tuple(out.shape) == (5, 2, 8) and tuple(out_bf.shape) == (2, 5, 8)
    np.testing.assert_allclose(_np(out_bf.transpose(0, 1)), _np(out), atol=1e-6)
    np.testing.assert_allclose(_np(hn_bf), _np(hn), atol=1e-6)
    # the forward direction's last step and the reverse direction's first are h_n
    np.testing.assert_allclose(_np(hn)[0], _np(out)[-1, :, :4], atol=1e-6)
    np.testing.assert_allclose(_np(hn)[1], _np(out)[0, :, 4:], atol=1e-6)


@pytest.mark.parametrize("name", ["GRU", "LSTM", "RNN"])
def test_gradcheck(device, name):
    rc.manual_seed(6)
    # small, so the finite differences stay quick on the slower devices
    m = getattr(nn, name)(1, 2, bidirectional=name == "GRU" and device == "cpu").to(device).double()
    names = [n for n, _ in m.named_parameters()]
    x = rc.randn(3, 1, 1, dtype=rc.float64, device=device, requires_grad=True)
    ps = [p.detach().clone().requires_grad_() for p in m.parameters()]

    def f(xx, *tensors):
        originals = dict(m._parameters)
        m._parameters.update(zip(names, tensors))
        try:
            out, hn = m(xx)
        finally:
            m._parameters.update(originals)
        return out, (hn[0] if isinstance(hn, tuple) else hn)

    assert gradcheck(f, [x] + ps)


def test_dropout_between_layers():
    rc.manual_seed(7)
    gru = nn.GRU(3, 4, num_layers=2, dropout=1.0)
    x = rc.randn(4, 2, 3)
    out_train, _ = gru(x)
    # with p=1 the second layer sees zeros: the same as running it alone on zeros
    top = nn.GRU(4, 4)
    top.load_state_dict({k.replace("_l1", "_l0"): v for k, v in gru.state_dict().items() if "_l1" in k})
    want, _ = top(rc.zeros(4, 2, 4))
    np.testing.assert_allclose(_np(out_train), _np(want), atol=1e-6)
    gru.eval()
    out_eval, _ = gru(x)
    assert not np.allclose(_np(out_eval), _np(want), atol=1e-3)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.5)


def test_parameters_and_init():
    rc.manual_seed(8)
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {k: tuple(v.shape) for k, v in lstm.state_dict().items()}
    assert shapes["weight_ih_l0"] == (20, 3) and shapes["weight_hh_l0"] == (20, 2)
    assert shapes["weight_ih_l1_reverse"] == (20, 4) and shapes["weight_hr_l1_reverse"] == (2, 5)
    assert len(shapes) == 2 * 2 * 5
    bound = 1 / math.sqrt(5)
    for v in lstm.parameters():
        a = _np(v)
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.5 * bound
    gru = nn.GRU(3, 4, bias=False)
    assert list(gru.state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert "GRU(3, 4, bias=False)" == repr(gru)
    assert repr(nn.RNN(2, 3, 2, nonlinearity="relu")) == "RNN(2, 3, num_layers=2, nonlinearity=relu)"


def test_errors():
    gru = nn.GRU(10, 20, 2)
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size. Expected 10, got 7"):
        gru(rc.randn(5, 3, 7))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(2, 3, 20\), got \[1, 3, 20\]"):
        gru(rc.randn(5, 3, 10), rc.randn(1, 3, 20))
    with pytest.raises(ValueError, match="GRU: Expected input to be 2D or 3D, got 4D"):
        gru(rc.randn(1, 5, 3, 10))
    with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D but got 3-D"):
        gru(rc.randn(5, 10), rc.randn(2, 1, 20))
    with pytest.raises(ValueError, match="does not match weight dtype"):
        gru(rc.randn(5, 3, 10, dtype=rc.float64))
    lstm = nn.LSTM(10, 20)
    with pytest.raises(RuntimeError, match=r"Expected hidden\[1\] size \(1, 3, 20\), got \[1, 3, 5\]"):
        lstm(rc.randn(5, 3, 10), (rc.zeros(1, 3, 20), rc.zeros(1, 3, 5)))
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.GRU(3, 4, dropout=2.0)
    cell = nn.GRUCell(10, 20)
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 7 expected 10"):
        cell(rc.randn(3, 7))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 5, expected 20"):
        cell(rc.randn(3, 10), rc.randn(3, 5))
    with pytest.raises(RuntimeError, match="Input batch size 3 doesn't match hidden0 batch size 4"):
        cell(rc.randn(3, 10), rc.randn(4, 20))
    with pytest.raises(ValueError, match="LSTMCell: Expected input to be 1D or 2D, got 3D"):
        nn.LSTMCell(10, 20)(rc.randn(1, 3, 10))


def test_pad_sequence(device):
    a = rc.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    b = rc.tensor([4.0], device=device)
    out = pad_sequence([a, b], padding_value=-1.0)
    np.testing.assert_array_equal(_np(out), [[1, 4], [2, -1], [3, -1]])
    out_bf = pad_sequence([a, b], batch_first=True, padding_side="left")
    np.testing.assert_array_equal(_np(out_bf), [[1, 2, 3], [0, 0, 4]])
    (out * rc.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], device=device)).sum().backward()
    np.testing.assert_array_equal(_np(a.grad), [1, 2, 3])
    with pytest.raises(ValueError, match="padding_side"):
        pad_sequence([a], padding_side="middle")


def test_pad_sequence_matches_torch():
    torch = pytest.importorskip("torch")
    seqs = [np.random.default_rng(i).standard_normal((n, 2)) for i, n in enumerate((2, 4, 1))]
    want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=True,
                                           padding_value=0.5)
    got = pad_sequence([rc.tensor(s) for s in seqs], batch_first=True, padding_value=0.5)
    np.testing.assert_array_equal(_np(got), want.numpy())


def test_language_model_trains(device):
    # Embedding -> GRU (2 layers, dropout) -> Linear, hidden state carried across
    # batches (detached): a few Adam steps lower the loss
    rc.manual_seed(9)
    emb, gru, head = nn.Embedding(7, 4), nn.GRU(4, 6, 2, dropout=0.1, batch_first=True), nn.Linear(6, 7)
    model = nn.ModuleList([emb, gru, head]).to(device)
    opt = rc.optim.Adam(model.parameters(), lr=0.05)
    tokens = rc.tensor([[i % 7 for i in range(s, s + 6)] for s in range(3)], device=device)
    h = None
    losses = []
    for _ in range(4):
        out, h = gru(emb(tokens[:, :-1]), h)
        h = h.detach()
        loss = nn.functional.cross_entropy(head(out).reshape(-1, 7), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_backward_frees_saved_steps():
    gru = nn.GRU(2, 3)
    out, _ = gru(rc.randn(4, 1, 2))
    loss = out.sum()
    loss.backward(retain_graph=True)
    first = gru.weight_hh_l0.grad.clone()
    loss.backward()  # retained: runs again and accumulates
    np.testing.assert_allclose(_np(gru.weight_hh_l0.grad), 2 * _np(first), rtol=1e-6)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_a_double_backward_through_a_recurrent_layer_fails_loudly(cls):
    layer = getattr(rc.nn, cls)(3, 4)
    x = rc.randn(5, 2, 3, requires_grad=True)
    out = layer(x)[0]
    g, = rc.autograd.grad(out.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice a function that was marked "
                                           "with @once_differentiable"):
        (g * g).sum().backward()
    out = layer(x)[0]  # once is fine
    out.sum().backward()
    assert x.grad is not None and layer.weight_hh_l0.grad is not None
