"""The least-squares problem the optimizer tests step through, for rtxcore and
torch alike (loss = 0.5 * ||X W + b - Y||^2 on seeded data), and the checks they
share: trajectories compared step by step, options compared with torch's."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import rtxcore as rc


def values(*ts: Any) -> list[np.ndarray]:
    """Tensors (rtxcore's or torch's) as float64 NumPy arrays."""
    return [np.array(t.detach().cpu().numpy(), dtype=np.float64) for t in ts]


def _lib(t: Any) -> Any:
    return rc if isinstance(t, rc.Tensor) else sys.modules["torch"]


class LeastSquares:
    """``X`` (rows x n_in), ``Y`` (rows x n_out) and the starting ``W0``, ``B0``,
    drawn in that order from ``default_rng(seed)``; ``steps`` per trajectory."""

    def __init__(self, seed: int, rows: int, n_in: int, n_out: int, steps: int) -> None:
        rng = np.random.default_rng(seed)
        self.X = rng.standard_normal((rows, n_in)).astype(np.float32)
        self.Y = rng.standard_normal((rows, n_out)).astype(np.float32)
        self.W0 = rng.standard_normal((n_in, n_out)).astype(np.float32)
        self.B0 = rng.standard_normal(n_out).astype(np.float32)
        self.steps = steps

    def np_grads(self, w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
        """The gradients at (w, b), in float64."""
        r = self.X.astype(np.float64) @ w + b - self.Y
        return [self.X.T.astype(np.float64) @ r, r.sum(0)]

    def start64(self) -> list[np.ndarray]:
        """The starting parameters in float64 (for the NumPy references)."""
        return [self.W0.astype(np.float64), self.B0.astype(np.float64)]

    def params(self, lib: Any = rc, **kw: Any) -> tuple[Any, Any]:
        """Leaf tensors of ``lib`` (rtxcore or torch) at the start; ``kw``: device, dtype."""
        return (lib.tensor(self.W0, requires_grad=True, **kw),
                lib.tensor(self.B0, requires_grad=True, **kw))

    def backward(self, w: Any, b: Any) -> Any:
        """The loss at (w, b), its gradients accumulated into ``.grad``; returns it."""
        lib = _lib(w)
        x = lib.tensor(self.X, device=w.device, dtype=w.dtype)
        y = lib.tensor(self.Y, device=w.device, dtype=w.dtype)
        loss = ((x @ w + b - y) ** 2).sum() * 0.5
        loss.backward()
        return loss

    def step(self, opt: Any, w: Any, b: Any) -> None:
        """One training step: zero_grad, backward, opt.step()."""
        opt.zero_grad()
        self.backward(w, b)
        opt.step()

    def trajectory(self, lib: Any, name: str, kw: dict[str, Any], steps: int | None = None,
                   **tensor_kw: Any) -> tuple[list[list[np.ndarray]], Any, tuple[Any, Any]]:
        """``lib.optim.<name>(**kw)`` stepped from the start: the parameters after
        each step, the optimizer and the parameters."""
        w, b = self.params(lib, **tensor_kw)
        opt = getattr(lib.optim, name)([w, b], **kw)
        out = []
        for _ in range(self.steps if steps is None else steps):
            self.step(opt, w, b)
            out.append(values(w, b))
        return out, opt, (w, b)


def assert_trajectories(got: list[Any], expected: list[Any], rtol: float, atol: float,
                        what: str = "", steps: int | None = None) -> None:
    """Each step's parameters (w, b) close to the expected ones; as many steps
    (``steps`` of them when given)."""
    assert len(got) == len(expected)
    if steps is not None:
        assert len(got) == steps
    for step, (gs, es) in enumerate(zip(got, expected), 1):
        for pname, g, e in zip("wb", gs, es):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol,
                                       err_msg=f"{what} step {step}, parameter {pname}")


def assert_options_match(opt: Any, topt: Any) -> None:
    """The first group's options: the same names and values as torch's (ours
    keep torch's implementation switches too)."""
    tkeys = set(topt.param_groups[0])
    assert set(opt.param_groups[0]) == tkeys
    for k in tkeys - {"params"}:
        assert opt.param_groups[0][k] == topt.param_groups[0][k], k
