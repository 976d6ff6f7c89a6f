"""Training-step time: rtxcore (every available device) against PyTorch and a
hand-written NumPy step, in one run.

    python benchmarks/train.py            # MLP 784-256-128-10 at batch 64 and 512, and the CNN
    python benchmarks/train.py --quick

One step = forward, cross-entropy loss, zero_grad, backward, SGD (momentum 0.9)
update. The NumPy column is the same MLP step written out by hand (float32):
the floor for a NumPy backend. Medians over interleaved rounds; this machine is
shared and noisy, so read the ratios and rerun.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

from _setup import import_torch, limit_threads  # (benchmarks/_setup.py)

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--rounds", type=int, default=7)
p.add_argument("--quick", action="store_true")
p.add_argument("--threads", type=int, default=None, help="limit BLAS/OpenMP threads")
p.add_argument("--no-torch", action="store_true")
ARGS = p.parse_args()
limit_threads(ARGS.threads)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402
from rtxcore import nn  # noqa: E402
from rtxcore.testing import available_devices  # noqa: E402

torch = import_torch(ARGS.no_torch, ARGS.threads)

LR, MOMENTUM = 0.01, 0.9


def rtx_mlp(device: str):
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(device)
    return model, rc.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def rtx_cnn(device: str):
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10)).to(device)
    return model, rc.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def torch_mlp():
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    return model, torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def torch_cnn():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))
    return model, torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def step_fn(lib, model, opt, x, y):
    ce = rc.nn.functional.cross_entropy if lib is rc else torch.nn.functional.cross_entropy

    def step():
        loss = ce(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def numpy_mlp_step(batch: int):
    """The MLP step by hand: forward, softmax cross-entropy, backward, SGD+momentum."""
    rng = np.random.default_rng(0)
    sizes = [(784, 256), (256, 128), (128, 10)]
    W = [rng.standard_normal((o, i), dtype=np.float32) * np.float32(i ** -0.5) for i, o in sizes]
    B = [np.zeros(o, np.float32) for _, o in sizes]
    VW = [np.zeros_like(w) for w in W]
    VB = [np.zeros_like(b) for b in B]
    x = rng.standard_normal((batch, 784), dtype=np.float32)
    y = rng.integers(0, 10, batch)

    def step():
        acts = [x]
        h = x
        for i in range(3):
            h = h @ W[i].T + B[i]
            if i < 2:
                h = np.maximum(h, 0)
            acts.append(h)
        z = h - h.max(1, keepdims=True)
        p_ = np.exp(z)
        p_ /= p_.sum(1, keepdims=True)
        g = p_
        g[np.arange(batch), y] -= 1
        g /= batch
        for i in (2, 1, 0):
            gw = g.T @ acts[i]
            gb = g.sum(0)
            if i:
                g = (g @ W[i]) * (acts[i] > 0)
            VW[i] = MOMENTUM * VW[i] + gw
            VB[i] = MOMENTUM * VB[i] + gb
            W[i] -= LR * VW[i]
            B[i] -= LR * VB[i]

    return step


def timed(cases: dict, number: int, rounds: int) -> dict:
    samples = {k: [] for k in cases}
    for fn in cases.values():
        fn()
        fn()
    for _ in range(rounds):
        for k, fn in cases.items():
            gc.collect()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t0) / number)
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    rc.manual_seed(0)
    devices = available_devices()
    print(f"rtxcore {rc.__version__} on {', '.join(devices)} | numpy {np.__version__} | "
          f"torch {torch.__version__ if torch else '(not installed)'} | python {sys.version.split()[0]}")
    rounds = 3 if ARGS.quick else ARGS.rounds
    rows = []
    configs = [("MLP 784-256-128-10", 64), ("MLP 784-256-128-10", 512), ("CNN 1x28x28", 64)]
    for name, batch in configs:
        cnn = name.startswith("CNN")
        cases = {}
        xn = np.random.default_rng(1).standard_normal((batch, 1, 28, 28) if cnn else (batch, 784)).astype(np.float32)
        yn = np.random.default_rng(2).integers(0, 10, batch)
        for dev in devices:
            model, opt = rtx_cnn(dev) if cnn else rtx_mlp(dev)
            x, y = rc.tensor(xn, device=dev), rc.tensor(yn, device=dev)
            cases[f"rtxcore {dev}"] = step_fn(rc, model, opt, x, y)
        if torch is not None:
            model, opt = torch_cnn() if cnn else torch_mlp()
            cases["pytorch"] = step_fn(torch, model, opt, torch.from_numpy(xn), torch.from_numpy(yn))
        if not cnn:
            cases["numpy by hand"] = numpy_mlp_step(batch)
        number = 5 if ARGS.quick else (20 if batch <= 64 else 10)
        res = timed(cases, number, rounds)
        for k, v in res.items():
            ratio = f"{v / res['pytorch']:.2f}x" if "pytorch" in res else "-"
            rows.append((f"{name} batch {batch}", k, f"{v * 1e3:8.2f} ms", ratio))
    print("\n| model | library | step time | / pytorch |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
