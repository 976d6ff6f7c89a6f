"""``nn.MultiheadAttention`` and the transformer layers: values against PyTorch
given PyTorch's weights (masks bool and float, key padding, causal), one head by
hand in NumPy, gradcheck, and PyTorch's argument errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore.autograd import gradcheck


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "cpu") else t.detach().numpy()


def _load_from_torch(m, tm):
    m.load_state_dict({k: rc.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _close(got, want, atol=1e-12):
    np.testing.assert_allclose(_np(got), want.detach().numpy(), atol=atol)


_L, _S, _N, _E, _H = 4, 5, 3, 8, 2


def _masks(torch):
    g = torch.Generator().manual_seed(0)
    kpm = torch.zeros(_N, _S, dtype=torch.bool)
    kpm[0, -2:] = True
    bool_mask = torch.rand(_L, _S, generator=g) > 0.6
    bool_mask[:, 0] = False  # every query keeps one key
    return {
        "none": {},
        "key_padding": {"key_padding_mask": kpm},
        "float_key_padding": {"key_padding_mask": torch.randn(_N, _S, generator=g, dtype=torch.float64)},
        "bool": {"attn_mask": bool_mask},
        "float": {"attn_mask": torch.randn(_L, _S, generator=g, dtype=torch.float64)},
        "float3d+key_padding": {"attn_mask": torch.randn(_N * _H, _L, _S, generator=g, dtype=torch.float64),
                                "key_padding_mask": kpm},
    }


@pytest.mark.parametrize("config", [{}, {"add_bias_kv": True}, {"add_zero_attn": True},
                                    {"kdim": 6, "vdim": 5}, {"batch_first": True}, {"bias": False}],
                         ids=["default", "bias_kv", "zero_attn", "kdim_vdim", "batch_first", "no_bias"])
def test_mha_matches_torch(config):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(_E, _H, **config).double().eval()
    m = nn.MultiheadAttention(_E, _H, **config).double().eval()
    assert sorted(m.state_dict()) == sorted(tm.state_dict())
    _load_from_torch(m, tm)
    bf = config.get("batch_first", False)
    kd, vd = config.get("kdim", _E), config.get("vdim", _E)

    def shaped(n, d):
        return torch.randn(*((_N, n, d) if bf else (n, _N, d)), dtype=torch.float64)

    q, k, v = shaped(_L, _E), shaped(_S, kd), shaped(_S, vd)
    rq, rk, rv = (rc.tensor(t.numpy()) for t in (q, k, v))
    for name, masks in _masks(torch).items():
        rmasks = {a: rc.tensor(b.numpy()) for a, b in masks.items()}
        for need_weights in (True, False):
            for average in (True, False):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # torch: mixed bool / float masks
                    out_t, w_t = tm(q, k, v, need_weights=need_weights,
                                    average_attn_weights=average, **masks)
                out_r, w_r = m(rq, rk, rv, need_weights=need_weights,
                               average_attn_weights=average, **rmasks)
                _close(out_r, out_t)
                if need_weights:
                    assert tuple(w_r.shape) == tuple(w_t.shape), name
                    _close(w_r, w_t)
                else:
                    assert w_r is None


def test_mha_causal_and_unbatched_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    tm = torch.nn.MultiheadAttention(_E, _H).double().eval()
    m = nn.MultiheadAttention(_E, _H).double().eval()
    _load_from_torch(m, tm)
    x = torch.randn(_L, _N, _E, dtype=torch.float64)
    rx = rc.tensor(x.numpy())
    causal = torch.nn.Transformer.generate_square_subsequent_mask(_L, dtype=torch.float64)
    rcausal = nn.Transformer.generate_square_subsequent_mask(_L, dtype=rc.float64)
    np.testing.assert_array_equal(_np(rcausal), causal.numpy())
    bool_causal = torch.triu(torch.ones(_L, _L, dtype=torch.bool), 1)
    for need_weights in (True, False):
        out_t, _ = tm(x, x, x, attn_mask=causal, is_causal=True, need_weights=need_weights)
        out_r, _ = m(rx, rx, rx, attn_mask=rcausal, is_causal=True, need_weights=need_weights)
        _close(out_r, out_t)
        out_t, _ = tm(x, x, x, attn_mask=bool_causal, need_weights=need_weights)
        out_r, _ = m(rx, rx, rx, attn_mask=rc.tensor(bool_causal.numpy()), need_weights=need_weights)
        _close(out_r, out_t)
    out_t, w_t = tm(x[:, 0], x[:, 0], x[:, 0], average_attn_weights=False)
    out_r, w_r = m(rx[:, 0], rx[:, 0], rx[:, 0], average_attn_weights=False)
    assert tuple(out_r.shape) == (_L, _E) and tuple(w_r.shape) == (_H, _L, _L)
    _close(out_r, out_t)
    _close(w_r, w_t)


def test_mha_gradients_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    tm = torch.nn.MultiheadAttention(_E, _H, batch_first=True).double()
    m = nn.MultiheadAttention(_E, _H, batch_first=True).double()
    _load_from_torch(m, tm)
    q = torch.randn(_N, _L, _E, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(_N, _S, _E, dtype=torch.float64, requires_grad=True)
    rq = rc.tensor(q.detach().numpy(), requires_grad=True)
    rkv = rc.tensor(kv.detach().numpy(), requires_grad=True)
    kpm = torch.zeros(_N, _S, dtype=torch.bool)
    kpm[1, 0] = True
    out_t, w_t = tm(q, kv, kv, key_padding_mask=kpm)
    out_r, w_r = m(rq, rkv, rkv, key_padding_mask=rc.tensor(kpm.numpy()))
    (out_t.sum() + (w_t ** 2).sum()).backward()
    (out_r.sum() + (w_r ** 2).sum()).backward()
    np.testing.assert_allclose(_np(rq.grad), q.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(_np(rkv.grad), kv.grad.numpy(), atol=1e-10)
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(_np(dict(m.named_parameters())[n].grad), p.grad.numpy(),
                                   atol=1e-10, err_msg=n)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_layers_match_torch(norm_first, activation, batch_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    kw = {"activation": activation, "norm_first": norm_first, "batch_first": batch_first}
    te = torch.nn.TransformerEncoderLayer(_E, _H, 16, **kw).double().eval()
    e = nn.TransformerEncoderLayer(_E, _H, 16, **kw).double().eval()
    td = torch.nn.TransformerDecoderLayer(_E, _H, 16, **kw).double().eval()
    d = nn.TransformerDecoderLayer(_E, _H, 16, **kw).double().eval()
    assert list(e.state_dict()) == list(te.state_dict())
    assert list(d.state_dict()) == list(td.state_dict())
    _load_from_torch(e, te)
    _load_from_torch(d, td)

    def shaped(n):
        return torch.randn(*((_N, n, _E) if batch_first else (n, _N, _E)), dtype=torch.float64)

    src, tgt, mem = shaped(_L), shaped(_L), shaped(_S)
    r = {k: rc.tensor(v.numpy()) for k, v in (("src", src), ("tgt", tgt), ("mem", mem))}
    causal = torch.nn.Transformer.generate_square_subsequent_mask(_L, dtype=torch.float64)
    rcausal = rc.tensor(causal.numpy())
    kpm = torch.zeros(_N, _S, dtype=torch.bool)
    kpm[2, -1] = True
    _close(e(r["src"]), te(src))
    _close(e(r["src"], src_mask=rcausal, is_causal=True), te(src, src_mask=causal, is_causal=True))
    _close(d(r["tgt"], r["mem"], tgt_mask=rcausal, tgt_is_causal=True,
             memory_key_padding_mask=rc.tensor(kpm.numpy())),
           td(tgt, mem, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=kpm))


def test_transformer_stacks_match_torch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: nested tensors need batch_first
        tt = torch.nn.Transformer(_E, _H, 2, 2, 16).double().eval()
    t = nn.Transformer(_E, _H, 2, 2, 16).double().eval()
    assert list(t.state_dict()) == list(tt.state_dict())
    assert "encoder.layers.1.self_attn.in_proj_weight" in t.state_dict()
    assert t.encoder.layers[0] is not t.encoder.layers[1]  # deep copies
    _load_from_torch(t, tt)
    src = torch.randn(_S, _N, _E, dtype=torch.float64)
    tgt = torch.randn(_L, _N, _E, dtype=torch.float64)
    mask = nn.Transformer.generate_square_subsequent_mask(_L, dtype=rc.float64)
    kpm = torch.zeros(_N, _S, dtype=torch.bool)
    kpm[0, 0] = True
    want = tt(src, tgt, tgt_mask=torch.tensor(_np(mask)), src_key_padding_mask=kpm,
              memory_key_padding_mask=kpm)
    got = t(rc.tensor(src.numpy()), rc.tensor(tgt.numpy()), tgt_mask=mask,
            src_key_padding_mask=rc.tensor(kpm.numpy()), memory_key_padding_mask=rc.tensor(kpm.numpy()))
    _close(got, want, atol=1e-11)


# -- by hand, on every device ---------------------------------------------------------------


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_one_head_by_hand(device):
    rc.manual_seed(5)
    m = nn.MultiheadAttention(4, 1, bias=True).to(device)
    with rc.no_grad():
        m.in_proj_bias.copy_(rc.randn(12, device=device))  # non-zero biases
    p = {k: _np(v) for k, v in m.state_dict().items()}
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 1, 4)).astype(np.float32)
    kv = rng.standard_normal((2, 1, 4)).astype(np.float32)
    mask = np.array([[False, True], [False, False], [True, False]])
    out, w = m(rc.tensor(q, device=device), rc.tensor(kv, device=device), rc.tensor(kv, device=device),
               attn_mask=rc.tensor(mask, device=device))
    wq, wk, wv = np.split(p["in_proj_weight"], 3)
    bq, bk, bv = np.split(p["in_proj_bias"], 3)
    qq, kk, vv = q[:, 0] @ wq.T + bq, kv[:, 0] @ wk.T + bk, kv[:, 0] @ wv.T + bv
    scores = qq @ kk.T / math.sqrt(4)
    scores[mask] = -np.inf
    a = _softmax(scores)
    want = (a @ vv) @ p["out_proj.weight"].T + p["out_proj.bias"]
    np.testing.assert_allclose(_np(out)[:, 0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_np(w)[0], a, rtol=1e-5, atol=1e-6)
    out2, none = m(rc.tensor(q, device=device), rc.tensor(kv, device=device),
                   rc.tensor(kv, device=device), attn_mask=rc.tensor(mask, device=device),
                   need_weights=False)
    assert none is None
    np.testing.assert_allclose(_np(out2)[:, 0], want, rtol=1e-5, atol=1e-5)


def test_dropout_in_training(device):
    # p=1 drops every attention weight: the output is out_proj's bias alone
    m = nn.MultiheadAttention(4, 2, dropout=1.0).to(device)
    with rc.no_grad():
        m.out_proj.bias.copy_(rc.arange(4.0, device=device))
    x = rc.randn(3, 2, 4, device=device)
    out, w = m(x, x, x)
    np.testing.assert_allclose(_np(out), np.broadcast_to(np.arange(4.0), (3, 2, 4)), atol=1e-6)
    assert np.all(_np(w) == 0)
    m.eval()
    out, _ = m(x, x, x)
    assert not np.allclose(_np(out), np.broadcast_to(np.arange(4.0), (3, 2, 4)), atol=1e-3)


def test_mha_gradcheck(device):
    rc.manual_seed(6)
    m = nn.MultiheadAttention(4, 2).to(device).double()
    with rc.no_grad():
        m.in_proj_bias.copy_(rc.randn(12, dtype=rc.float64, device=device))
    q = rc.randn(2, 1, 4, dtype=rc.float64, device=device, requires_grad=True)
    kv = rc.randn(3, 1, 4, dtype=rc.float64, device=device, requires_grad=True)
    w = m.in_proj_weight.detach().clone().requires_grad_()
    mask = rc.tensor([[0.0, -1.0, 0.5], [0.0, 0.0, -math.inf]], dtype=rc.float64, device=device)

    def f(qq, kk, ww):
        m._parameters["in_proj_weight"] = ww
        try:
            out, attn = m(qq, kk, kk, attn_mask=mask)
        finally:
            m._parameters["in_proj_weight"] = w0
        return out, attn

    w0 = m._parameters["in_proj_weight"]
    # the weight's gradient is compared with PyTorch's above; here on cpu only, to stay quick
    assert gradcheck(f, [q, kv, w.requires_grad_(device == "cpu")])


def test_encoder_layer_trains(device):
    # one SGD step on a tiny encoder lowers its loss: gradients reach every parameter
    rc.manual_seed(7)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0).to(device)
    x = rc.randn(3, 2, 4, device=device)
    target = rc.randn(3, 2, 4, device=device)
    opt = rc.optim.SGD(layer.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = ((layer(x) - target) ** 2).mean()
        loss.backward()
        assert all(p.grad is not None for p in layer.parameters())
        opt.step()
        losses.append(loss.item())
    assert losses[1] < losses[0]


def test_errors():
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    m = nn.MultiheadAttention(4, 2)
    x = rc.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match=r"The shape of the 2D attn_mask is \(2, 2\), but should be \(3, 3\)"):
        m(x, x, x, attn_mask=rc.zeros(2, 2))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="expected `key` and `value` to be 3-D"):
        m(x, x[0], x[0])
    with pytest.raises(AssertionError, match="only bool and floating types of attn_mask"):
        m(x, x, x, attn_mask=rc.zeros(3, 3, dtype=rc.int64))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")
    t = nn.Transformer(4, 2, 1, 1, 8)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        t(rc.randn(3, 2, 4), rc.randn(3, 1, 4))
