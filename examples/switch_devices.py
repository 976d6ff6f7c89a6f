"""Move a model and its optimizer between devices in the middle of training.

    python examples/switch_devices.py                  # cpu -> opencl
    python examples/switch_devices.py --device cpu --steps 50

What it shows, step by step:

1. A small MLP is built on cpu (under ``rc.manual_seed``, so the start is
   reproducible) and trained for a few Adam steps on a synthetic regression task.
2. ``model.to(dev)`` moves it. As in PyTorch the Parameter objects stay the same
   (only their data moves), so the optimizer still holds the right parameters,
   but Adam's state (``exp_avg``, ``exp_avg_sq``) is still on the old device.
   ``opt.load_state_dict(opt.state_dict())`` copies every state tensor onto its
   parameter's device; training then goes on there.
3. A checkpoint (model and optimizer ``state_dict``) is written with
   ``rc.save`` and read back on cpu with ``rc.load(..., map_location="cpu")``.
4. The result is compared with an all-cpu run of the same steps on the same data:
   moving devices must not change the arithmetic beyond float32 rounding.

It also shows ``with rc.device(dev):``, under which factories (``rc.zeros``,
``rc.randn``) and new modules' parameters land on ``dev``; setting the
environment variable ``RTX_DEVICE=opencl`` does the same for a whole program.
Exit status 0 when the results match the all-cpu run, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

import rtxcore as rc
from rtxcore import nn

# Two float32 runs that differ only in summation order (matmul, sum) drift apart
# by a few ulps per step; Adam's normalised updates keep that from growing much.
# Measured on PoCL: <= 2e-7 (parameters, |p| ~ 1) after 2 x 20 steps, 3e-7 after
# 2 x 100. TOL = 1e-4 leaves a 300x margin for other OpenCL drivers, and still
# catches a real mistake: restarting Adam's state at the switch moves the
# parameters by 0.2, an extra step by 1e-2, a step count off by one by 2e-3.
TOL = 1e-4


def make_data(n: int = 256, seed: int = 0) -> tuple[rc.Tensor, rc.Tensor]:
    """y = tanh(x @ w) + noise, x of shape (n, 8): generated on cpu, so every run sees it."""
    rc.manual_seed(seed)
    x = rc.randn(n, 8, device="cpu")
    w = rc.randn(8, 1, device="cpu")
    return x, (x @ w).tanh() + 0.05 * rc.randn(n, 1, device="cpu")


def make_model(seed: int = 1) -> nn.Module:
    rc.manual_seed(seed)  # built on cpu: the same initial weights whatever the device
    with rc.device("cpu"):
        return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


def train(model: nn.Module, opt: rc.optim.Optimizer, x: rc.Tensor, y: rc.Tensor,
          steps: int) -> float:
    loss = None
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return float("nan") if loss is None else loss.item()


def evaluate(model: nn.Module, x: rc.Tensor, y: rc.Tensor) -> float:
    with rc.no_grad():
        return nn.functional.mse_loss(model(x), y).item()


def _max_diff(a: dict, b: dict) -> float:
    return max(float((a[k].cpu() - b[k].cpu()).abs().max()) for k in a)


def run(source: str = "cpu", target: str = "opencl", steps: int = 20, *, lr: float = 1e-2,
        verbose: bool = False) -> dict[str, Any]:
    """Train ``steps`` Adam steps on ``source``, ``steps`` more on ``target``, round-trip
    a checkpoint through cpu; return the largest differences from an all-cpu run."""
    say = print if verbose else (lambda *a, **k: None)
    x, y = make_data()
    model = make_model().to(source)
    opt = rc.optim.Adam(model.parameters(), lr=lr)
    say(f"{steps} steps on {source}: loss {train(model, opt, x.to(source), y.to(source), steps):.6f}")

    model.to(target)                        # same Parameter objects, data now on target
    opt.load_state_dict(opt.state_dict())   # optimizer state follows its parameters
    state_devs = {str(t.device) for s in opt.state.values() for t in s.values()
                  if isinstance(t, rc.Tensor)}
    assert state_devs == {str(rc.device(target))}, state_devs
    say(f"moved model and Adam state to {target} (state on {', '.join(sorted(state_devs))})")
    say(f"{steps} steps on {target}: loss {train(model, opt, x.to(target), y.to(target), steps):.6f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.safetensors")
        rc.save({"model": model.state_dict(), "optim": opt.state_dict()}, path)
        ckpt = rc.load(path, map_location="cpu")
    restored = make_model()
    restored.load_state_dict(ckpt["model"])
    restored_opt = rc.optim.Adam(restored.parameters(), lr=lr)
    restored_opt.load_state_dict(ckpt["optim"])
    loss = evaluate(restored, x, y)
    say(f"checkpoint reloaded on cpu: loss {loss:.6f}")

    ref = make_model()                      # the all-cpu run: same seed, data, steps
    ref_opt = rc.optim.Adam(ref.parameters(), lr=lr)
    train(ref, ref_opt, x, y, 2 * steps)
    ref_loss = evaluate(ref, x, y)
    state = restored_opt.state_dict()["state"]
    ref_state = ref_opt.state_dict()["state"]
    return {
        "loss": loss,
        "param_diff": _max_diff(restored.state_dict(), ref.state_dict()),
        "state_diff": max(_max_diff({k: v for k, v in state[i].items() if k != "step"},
                                    ref_state[i]) for i in ref_state),
        "loss_diff": abs(loss - ref_loss),
        "steps_match": all(state[i]["step"] == ref_state[i]["step"] for i in ref_state),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="opencl", help="where to move the model (default opencl)")
    p.add_argument("--steps", type=int, default=20, help="Adam steps on each device")
    args = p.parse_args(argv)

    with rc.device(args.device):            # factories and new modules land on the device
        layer = nn.Linear(4, 2)
        print(f"inside `with rc.device({args.device!r})`: rc.zeros -> {rc.zeros(3).device}, "
              f"nn.Linear weight -> {layer.weight.device}")
    print(f"outside it: rc.zeros -> {rc.zeros(3).device}\n")

    r = run("cpu", args.device, args.steps, verbose=True)
    print(f"\nmax |param difference| vs all-cpu run:      {r['param_diff']:.3g}")
    print(f"max |Adam state difference| vs all-cpu run: {r['state_diff']:.3g}")
    print(f"|loss difference| vs all-cpu run:           {r['loss_diff']:.3g}")
    ok = r["steps_match"] and max(r["param_diff"], r["state_diff"], r["loss_diff"]) <= TOL
    print(f"results {'match' if ok else 'DO NOT match'} an all-cpu run to within {TOL:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
