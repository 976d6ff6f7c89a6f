"""rtxcore's first job: show the backends, then fit a line by gradient descent
written out by hand (autograd arrives in the next release)."""

from __future__ import annotations

import sys

import rtxcore as rc
from rtxcore._cli import render


def main() -> int:
    print(render())
    print()
    dev = rc.get_default_device()
    rc.manual_seed(0)
    # y = 3x - 2 plus noise; recover slope and intercept
    x = rc.linspace(-1, 1, 200, device=dev).unsqueeze(1)
    y = 3 * x - 2 + 0.05 * rc.randn(200, 1, device=dev)
    X = rc.cat([x, rc.ones_like(x)], dim=1)  # (200, 2)
    w = rc.zeros(2, 1, device=dev)
    for step in range(300):
        err = X @ w - y
        grad = 2 * X.T @ err / len(y)  # d/dw mean((Xw - y)^2)
        w -= 0.5 * grad
        if step % 100 == 0:
            print(f"step {step:3d}  loss {(err ** 2).mean().item():.5f}")
    slope, intercept = w.flatten().tolist()
    print(f"fitted on {dev}: y = {slope:.3f} x {intercept:+.3f}   (true: y = 3x - 2)")
    ok = abs(slope - 3) < 0.05 and abs(intercept + 2) < 0.05
    print("fit OK" if ok else "fit FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
