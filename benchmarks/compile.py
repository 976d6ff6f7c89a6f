"""Eager against ``rtxcore.compile``d, in one run: the same work, rounds interleaved.

    python benchmarks/compile.py                      # every case, cpu and opencl
    python benchmarks/compile.py --device cpu --cases gelu_1m,adamw
    python benchmarks/compile.py --quick              # smoke test: small sizes, 3 rounds

Cases:

- ``gelu_1m`` / ``gelu_4m`` / ``gelu_16m``: the tanh GELU written as ten
  elementwise ops (``0.5 * x * (1 + tanh(0.79788456 * (x + 0.044715 * x**3))))``)
  on 1M / 4M / 16M float32;
- ``layer_norm``: ``F.layer_norm`` over (4096, 1024) with weight and bias;
- ``adamw``: one ``AdamW(capturable=True)`` step over 10M parameters (10
  tensors of 1M), gradients set;
- ``clip_norm``: ``clip_grad_norm_`` over 10M gradients (10 tensors of 1M):
  each squared-norm sum ends its fused group;
- ``gpt``: one training step (forward, loss, backward, ``clip_grad_norm_``,
  AdamW) of the transformer of ``benchmarks/models.py``.

Columns: median ms of an eager call and of a compiled one (after its first
call, which traced it: ``compile ms`` is that first call), and eager /
compiled (above 1: compiling paid). Devices are synchronised by reading one
element back after each call. The machine may be shared: read the ratios, and
rerun.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402
import rtxcore.nn.functional as F  # noqa: E402


def gelu_chain(x: Any) -> Any:
    return 0.5 * x * (1 + ((x + 0.044715 * x * x * x) * 0.7978845608).tanh())


def _sync(out: Any) -> None:
    t = out[0] if isinstance(out, (tuple, list)) else out
    if isinstance(t, rc.Tensor) and t.numel():
        t.detach().reshape(-1)[:1].cpu().numpy()


def case(name: str, dev: str, quick: bool) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(eager call, compiled call) of one case on ``dev``, each ready to run."""
    rng = np.random.default_rng(0)
    if name.startswith("gelu"):
        n = (1 << 20) * {"gelu_1m": 1, "gelu_4m": 4, "gelu_16m": 16}[name] // (16 if quick else 1)
        x = rc.tensor(rng.standard_normal(n).astype(np.float32), device=dev)
        cf = rc.compile(gelu_chain)
        return (lambda: gelu_chain(x)), (lambda: cf(x))
    if name == "layer_norm":
        rows = 256 if quick else 4096
        x = rc.tensor(rng.standard_normal((rows, 1024)).astype(np.float32), device=dev)
        w = rc.ones(1024, device=dev)
        b = rc.zeros(1024, device=dev)

        def ln(x: Any) -> Any:
            return F.layer_norm(x, (1024,), w, b)

        cf = rc.compile(ln)
        return (lambda: ln(x)), (lambda: cf(x))
    if name == "adamw":
        n, k = ((1 << 16) if quick else (1 << 20)), 10

        def make() -> Any:
            ps = [rc.tensor(rng.standard_normal(n).astype(np.float32), device=dev,
                            requires_grad=True) for _ in range(k)]
            for p in ps:
                p.grad = rc.tensor(rng.standard_normal(n).astype(np.float32), device=dev)
            return ps, rc.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, capturable=True)

        pa, oa = make()
        pb, ob = make()

        def step_b() -> Any:
            ob.step()
            return pb[0].detach()  # a plain tensor: a parameter itself would need autograd

        cf = rc.compile(step_b)

        def eager() -> Any:
            oa.step()
            return pa[0].detach()

        return eager, cf
    if name == "clip_norm":
        n, k = ((1 << 16) if quick else (1 << 20)), 10
        ps = [rc.tensor(rng.standard_normal(n).astype(np.float32), device=dev, requires_grad=True)
              for _ in range(k)]
        grads = [rc.tensor(rng.standard_normal(n).astype(np.float32), device=dev) for _ in ps]

        def clip() -> Any:
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            return rc.nn.utils.clip_grad_norm_(ps, 1.0)

        return clip, rc.compile(clip)
    if name == "gpt":
        import models as M

        data = M.lm_batches(65, 64, 16, 4, 0, False)
        xs = [(rc.tensor(a, device=dev), rc.tensor(b, device=dev)) for a, b in data]

        def make() -> Any:
            rc.manual_seed(0)
            m = M.gpt(rc).to(dev)
            opt = rc.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1, capturable=True)

            def step(x: Any, y: Any) -> Any:
                opt.zero_grad()
                loss = m(x, y)
                loss.backward()
                rc.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opt.step()
                return loss.detach()

            return step

        sa, sb = make(), make()
        cf = rc.compile(sb)
        i = [0]

        def pick() -> Any:
            i[0] += 1
            return xs[i[0] % len(xs)]

        return (lambda: sa(*pick())), (lambda: cf(*pick()))
    raise SystemExit(f"unknown case {name!r}")


CASES = ["gelu_1m", "gelu_4m", "gelu_16m", "layer_norm", "adamw", "clip_norm", "gpt"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu,opencl")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    rounds = 3 if a.quick else a.rounds
    print(f"eager vs rtxcore.compile, median of {rounds} interleaved rounds "
          f"(ratio = eager / compiled: above 1 the compiled call is faster)\n")
    print(f"{'case':<12} {'device':<9} {'eager ms':>10} {'compiled ms':>12} {'ratio':>7} "
          f"{'compile ms':>11}")
    for dev in a.device.split(","):
        for name in a.cases.split(","):
            eager, compiled = case(name, dev, a.quick)
            _sync(eager())  # warm both (kernels built, caches filled)
            t0 = time.perf_counter()
            _sync(compiled())  # the first call traces and optimises
            first = time.perf_counter() - t0
            _sync(compiled())
            te, tc = [], []
            for _ in range(rounds):
                t0 = time.perf_counter()
                _sync(eager())
                t1 = time.perf_counter()
                _sync(compiled())
                t2 = time.perf_counter()
                te.append(t1 - t0)
                tc.append(t2 - t1)
            me, mc = statistics.median(te) * 1e3, statistics.median(tc) * 1e3
            print(f"{name:<12} {dev:<9} {me:>10.2f} {mc:>12.2f} {me / mc:>6.2f}x "
                  f"{first * 1e3:>11.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
