"""rtxcore's first job: show the backends, then fit a line by gradient descent,
with the gradient from autograd checked against the formula for it."""

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
    w = rc.zeros(2, 1, device=dev, requires_grad=True)
    for step in range(300):
        loss = ((X @ w - y) ** 2).mean()
        loss.backward()  # d loss / dw lands in w.grad
        if step == 0:
            by_hand = 2 * X.T @ (X @ w.detach() - y) / len(y)
            print(f"autograd matches d/dw mean((Xw - y)^2) by hand: "
                  f"{bool(((w.grad - by_hand).abs() < 1e-5).all())}")
            names, fn = [], loss.grad_fn
            while fn is not None:  # walk the recorded graph back to the leaf w
                names.append(fn.name())
                fn = next((e[0] for e in fn.next_functions if e is not None), None)
            print("recorded:", " <- ".join(names))
        with rc.no_grad():
            w -= 0.5 * w.grad
        w.grad = None
        if step % 100 == 0:
            print(f"step {step:3d}  loss {loss.item():.5f}")
    slope, intercept = w.detach().flatten().tolist()
    print(f"fitted on {dev}: y = {slope:.3f} x {intercept:+.3f}   (true: y = 3x - 2)")
    ok = abs(slope - 3) < 0.05 and abs(intercept + 2) < 0.05
    print("fit OK" if ok else "fit FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
