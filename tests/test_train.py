"""End to end: an MLP trained with SGD and with Adam follows the same loss curve
as a NumPy reference (always) and as PyTorch (when installed); the digits
example learns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import nn
from rtxcore.testing import training_losses

ROOT = Path(__file__).resolve().parent.parent
STEPS = 20
SIZES = [(20, 16), (16, 12), (12, 5)]  # an MLP 20-16-12-5 with ReLU between


def _problem():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 20)).astype(np.float32)
    y = rng.integers(0, 5, 32)
    W = [(rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32) for i, o in SIZES]
    B = [(rng.standard_normal(o) * 0.1).astype(np.float32) for _, o in SIZES]
    return x, y, W, B


# -- NumPy reference -----------------------------------------------------------------------


def _np_loss_and_grads(x, y, W, B):
    acts, h = [x], x
    for i in range(3):
        h = h @ W[i].T + B[i]
        if i < 2:
            h = np.maximum(h, 0)
        acts.append(h)
    z = h - h.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    n = len(y)
    loss = -logp[np.arange(n), y].mean()
    g = np.exp(logp)
    g[np.arange(n), y] -= 1
    g /= n
    gW, gB = [None] * 3, [None] * 3
    for i in (2, 1, 0):
        gW[i], gB[i] = g.T @ acts[i], g.sum(0)
        if i:
            g = (g @ W[i]) * (acts[i] > 0)
    return float(loss), gW, gB


def _np_train(opt: str):
    x, y, W, B = _problem()
    params = W + B
    state = [dict(m=np.zeros_like(p), v=np.zeros_like(p), buf=None) for p in params]
    losses = []
    for t in range(1, STEPS + 1):
        loss, gW, gB = _np_loss_and_grads(x, y, params[:3], params[3:])
        losses.append(loss)
        for p, g, s in zip(params, gW + gB, state):
            if opt == "sgd":  # lr 0.1, momentum 0.9, weight decay 1e-3
                g = g + 1e-3 * p
                s["buf"] = g.copy() if s["buf"] is None else 0.9 * s["buf"] + g
                p -= 0.1 * s["buf"]
            else:  # adam: lr 1e-2, betas (0.9, 0.999), eps 1e-8
                s["m"] = 0.9 * s["m"] + 0.1 * g
                s["v"] = 0.999 * s["v"] + 0.001 * g * g
                mhat = s["m"] / (1 - 0.9 ** t)
                vhat = s["v"] / (1 - 0.999 ** t)
                p -= 1e-2 * mhat / (np.sqrt(vhat) + 1e-8)
    return losses


# -- rtxcore and PyTorch --------------------------------------------------------------------


def _rtx_train(opt: str, device: str):
    x, y, W, B = _problem()
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 5))
    with rc.no_grad():
        for lin, w, b in zip([model[0], model[2], model[4]], W, B):
            lin.weight.copy_(rc.tensor(w))
            lin.bias.copy_(rc.tensor(b))
    model.to(device)
    o = (rc.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3) if opt == "sgd"
         else rc.optim.Adam(model.parameters(), lr=1e-2))
    xt, yt = rc.tensor(x, device=device), rc.tensor(y, device=device)
    return training_losses(model, o, nn.functional.cross_entropy, xt, yt, STEPS)


def _torch_train(opt: str):
    torch = pytest.importorskip("torch")
    x, y, W, B = _problem()
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 12),
                                torch.nn.ReLU(), torch.nn.Linear(12, 5))
    with torch.no_grad():
        for lin, w, b in zip([model[0], model[2], model[4]], W, B):
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
    o = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3) if opt == "sgd"
         else torch.optim.Adam(model.parameters(), lr=1e-2))
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    return training_losses(model, o, torch.nn.functional.cross_entropy, xt, yt, STEPS)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_mlp_matches_numpy_reference(device, opt):
    ours, ref = _rtx_train(opt, device), _np_train(opt)
    assert ref[-1] < 0.6 * ref[0]  # the reference itself learns
    np.testing.assert_allclose(ours, ref, rtol=1e-4)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_mlp_matches_pytorch(opt):
    theirs = _torch_train(opt)
    np.testing.assert_allclose(_rtx_train(opt, "cpu"), theirs, rtol=1e-4)


# -- the example ----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_train_digits_learns(tmp_path, model):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    ckpt = tmp_path / "w.safetensors"
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_digits.py"), "--model", model, "--epochs", "1",
         "--no-progress", "--checkpoint", str(ckpt)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: one epoch may miss the final target
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("test accuracy:"))
    acc = float(line.split()[2])
    assert acc > 0.5, r.stdout  # chance is 0.1
    assert "reloaded: accuracy identical" in r.stdout
    assert ckpt.exists() and ckpt.stat().st_size > 1000
