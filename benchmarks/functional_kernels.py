"""Functional kernels on a backend of immutable arrays, measured.

    python benchmarks/functional_kernels.py

The backend is tests/readonly_backend.py (NumPy arrays marked read-only, in
mutable holders): ``ro`` has destination kernels only -- each op allocates
``out``, computes, then copies the holder's array to write the result in --
``rof`` adds functional forms (``rtxcore.dispatch.functional``), called wherever
the result is a fresh tensor. Two tables:

1. library calls per op (array-library calls: compute, copy, assign, and the
   allocation of ``out``), for the ops a training step is made of;
2. the training step of a small MLP (Adam), ms per step, median of interleaved
   rounds, with ``cpu`` (NumPy, in place) for reference, and the calls per step.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rtxcore as rc  # noqa: E402
from tests import readonly_backend as RB  # noqa: E402


def calls(fn) -> int:
    RB.LIBRARY_CALLS.clear()
    fn()
    return sum(RB.LIBRARY_CALLS.values())


def step_fn(device: str, width: int, batch: int):
    rc.manual_seed(0)
    model = rc.nn.Sequential(rc.nn.Linear(width, width), rc.nn.Tanh(),
                             rc.nn.Linear(width, 1)).to(device)
    opt = rc.optim.Adam(model.parameters(), lr=1e-3)
    g = np.random.default_rng(0)
    x = rc.tensor(g.standard_normal((batch, width)).astype(np.float32), device=device)
    y = rc.tensor(g.standard_normal((batch, 1)).astype(np.float32), device=device)

    def step() -> None:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()

    return step


def main() -> None:
    rc.register_backend(RB.ReadOnlyPlugin(), name="ro")
    rc.register_backend(RB.FunctionalPlugin(), name="rof")
    print("library calls per op (a (64, 64) float32 operand)")
    print(f"{'op':>12} {'ro (out=)':>10} {'rof':>6}")
    for name, make in (("x + y", lambda x, w: x + x), ("x.exp()", lambda x, w: x.exp()),
                       ("x.sum(1)", lambda x, w: x.sum(1)), ("x @ w", lambda x, w: x @ w),
                       ("where", lambda x, w: rc.where(x > 0, x, 0.0)),
                       ("x.add_(1)", lambda x, w: x.add_(1.0))):
        row = []
        for dev in ("ro", "rof"):
            x = rc.ones(64, 64, device=dev)
            w = rc.ones(64, 64, device=dev)
            row.append(calls(lambda: make(x, w)))
        print(f"{name:>12} {row[0]:>10} {row[1]:>6}")
    print()
    for width, batch in ((64, 32), (256, 64)):
        steps = {d: step_fn(d, width, batch) for d in ("cpu", "ro", "rof")}
        per = {d: calls(s) for d, s in steps.items() if d != "cpu"}
        times: dict[str, list[float]] = {d: [] for d in steps}
        for s in steps.values():
            s()  # warm up
        for _ in range(15):  # rounds interleaved: cpu, ro, rof, cpu, ...
            for d, s in steps.items():
                t0 = time.perf_counter()
                s()
                times[d].append(time.perf_counter() - t0)
        med = {d: statistics.median(v) for d, v in times.items()}
        print(f"MLP {width}-{width}-1, batch {batch}, Adam: ms per step (median of 15)")
        print(f"  cpu {med['cpu'] * 1e3:7.2f}   ro {med['ro'] * 1e3:7.2f} ({per['ro']} calls)"
              f"   rof {med['rof'] * 1e3:7.2f} ({per['rof']} calls)   rof/ro "
              f"{med['rof'] / med['ro']:.2f}x")


if __name__ == "__main__":
    main()
