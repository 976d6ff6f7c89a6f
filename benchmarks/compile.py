"""Eager against ``rtxcore.compile``d, and both against PyTorch eager and
``torch.compile`` (inductor, cpu), in one run: the same work, the sides in blocks.

    python benchmarks/compile.py                      # every case, cpu and opencl
    python benchmarks/compile.py --device cpu --cases gelu_1m,adamw,mlp
    python benchmarks/compile.py --quick              # smoke test: small sizes, 3 rounds
    python benchmarks/compile.py --no-torch           # rtxcore only (no torch.compile builds)
    python benchmarks/compile.py --rounds 15 --train-rounds 40   # more rounds
    python benchmarks/compile.py --profile mlp --device cpu      # cProfile of 50 replays

Operation cases (first table):

- ``gelu_1m`` / ``gelu_4m`` / ``gelu_16m``: the tanh GELU written as ten
  elementwise ops (``0.5 * x * (1 + tanh(0.79788456 * (x + 0.044715 * x**3))))``)
  on 1M / 4M / 16M float32;
- ``layer_norm``: ``F.layer_norm`` over (4096, 1024) with weight and bias;
- ``adamw``: one ``AdamW(capturable=True)`` step over 10M parameters (10
  tensors of 1M), gradients set (torch: ``AdamW()`` with its defaults, as
  ``capturable`` is for accelerators there; compiled as PyTorch's "compiling
  the optimizer" recipe does, ``torch.compile`` of a function calling
  ``opt.step()``);
- ``clip_norm``: ``clip_grad_norm_`` over 10M gradients (10 tensors of 1M):
  each squared-norm sum ends its fused group;
- ``gpt``: one training step (forward, loss, backward, ``clip_grad_norm_``,
  AdamW) of the transformer of ``benchmarks/models.py``, compiled whole.

Columns: median ms of an eager call and of a compiled one (after its first
call, which traced it: ``compile ms`` is that first call), eager / compiled
(above 1: compiling paid); then the same computation on PyTorch: eager,
``torch.compile`` (``dynamic=False``; ``tc first ms`` is its first call, which
compiled it; inductor's on-disk cache makes a second run's first call
cheaper), and rtxcore compiled / ``torch.compile`` (below 1: rtxcore is faster).
PyTorch always runs on the cpu; an ``opencl`` row compares rtxcore on opencl
with PyTorch on the cpu.

Training cases (second table), AdamW with its default arguments, the same
initial weights on every side (rtxcore's, copied into each copy of the model)
and the same batches:

- ``mlp``: 784-256-256-10 with ReLU, batch 64, cross-entropy;
- ``lm``: a transformer language model, ``nn.TransformerEncoder`` of 2
  ``nn.TransformerEncoderLayer`` (d_model 128, 4 heads, feed-forward 512,
  dropout 0, pre-norm, causal mask), token and position embeddings, vocab 1000,
  sequence 64, batch 16;
- ``cnn``: Conv2d(1, 16, 3)-ReLU-MaxPool-Conv2d(16, 32, 3)-ReLU-MaxPool-Linear
  on 28x28 inputs, batch 64.

Each is stepped six ways: rtxcore ``eager``; ``compile(model)`` (``c(model)``:
the forward compiled, cross-entropy, ``loss.backward()`` and ``opt.step()``
outside: the idiomatic ``torch.compile`` use); the whole step compiled
(``c(step)``: a function doing zero_grad, forward, loss, backward, step and
``return loss``); PyTorch eager, ``torch.compile(model)`` and
``torch.compile(step)`` (its ``backward`` is a graph break: the number of
breaks is printed). Every step reads its loss back (``.item()``), so each is
synchronised. The first ``--check`` steps run before the timed ones, one step
of each side in turn, the compiled sides' first calls among them; their losses
must agree with the rtxcore eager ones to float32 tolerance (else the run exits
1), and the largest gaps (to rtxcore eager, and between rtxcore and PyTorch
eager) are printed. Every side steps through the same batches in the same order.

Timing (``benchmarks/_timing.py``, as ``benchmarks/models.py`` does): the sides
take turns in blocks of four consecutive calls (operation cases) or steps
(training cases), the first call of a block not timed; ``--rounds`` and
``--train-rounds`` are the timed calls of each side, and the tables show their
median. The training sides' blocks come in an order shuffled from round to
round, so that no side always follows the same one. Both libraries run at
their default thread counts (the header says how many), in one process, and
PyTorch's OpenMP workers spin on for a while after its last op: a call timed
right after one of PyTorch's shared the cores with them (per-call alternation
made rtxcore's eager MLP step read 3.7-3.9 ms against 2.2-2.5 ms with
``OMP_WAIT_POLICY=PASSIVE``), which the untimed first call of a block absorbs.
``--no-torch`` gives the rtxcore sides among themselves. The header and the
last line give Linux's CPU pressure, how busy the machine was.
The machine may be shared: read the ratios, and rerun. A failure or warning
of ``rtxcore.compile`` is reported under the tables (with the traceback's
last lines) and the case goes on without that side.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import random
import re
import statistics
import sys
import time
import traceback
import types
import warnings
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _timing import BLOCK, blocks  # noqa: E402  (benchmarks/_timing.py)

import rtxcore as rc  # noqa: E402
import rtxcore.nn.functional as F  # noqa: E402

try:
    import torch
except ImportError:  # the rtxcore columns still run
    torch = None


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


def torch_case(name: str, quick: bool) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(eager call, ``torch.compile``d call) of one case on PyTorch's cpu: the
    same computation as ``case`` (same sizes; ``gpt`` from rtxcore's weights)."""
    rng = np.random.default_rng(0)
    tc = lambda f: torch.compile(f, dynamic=False)  # noqa: E731 - one size per case
    if name.startswith("gelu"):
        n = (1 << 20) * {"gelu_1m": 1, "gelu_4m": 4, "gelu_16m": 16}[name] // (16 if quick else 1)
        x = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
        cf = tc(gelu_chain)
        return (lambda: gelu_chain(x)), (lambda: cf(x))
    if name == "layer_norm":
        rows = 256 if quick else 4096
        x = torch.from_numpy(rng.standard_normal((rows, 1024)).astype(np.float32))
        w, b = torch.ones(1024), torch.zeros(1024)

        def ln(x: Any) -> Any:
            return torch.nn.functional.layer_norm(x, (1024,), w, b)

        cf = tc(ln)
        return (lambda: ln(x)), (lambda: cf(x))
    if name == "adamw":
        n, k = ((1 << 16) if quick else (1 << 20)), 10

        def make() -> Any:
            ps = [torch.tensor(rng.standard_normal(n).astype(np.float32), requires_grad=True)
                  for _ in range(k)]
            for p in ps:
                p.grad = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
            return ps, torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)

        (pa, oa), (pb, ob) = make(), make()

        def step_b() -> None:
            ob.step()

        cf = tc(step_b)
        return oa.step, cf
    if name == "clip_norm":
        n, k = ((1 << 16) if quick else (1 << 20)), 10
        ps = [torch.tensor(rng.standard_normal(n).astype(np.float32), requires_grad=True)
              for _ in range(k)]
        grads = [torch.from_numpy(rng.standard_normal(n).astype(np.float32)) for _ in ps]

        def clip() -> Any:
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            return torch.nn.utils.clip_grad_norm_(ps, 1.0)

        return clip, tc(clip)
    if name == "gpt":
        import models as M

        data = M.lm_batches(65, 64, 16, 4, 0, False)
        xs = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in data]

        def make() -> Any:
            rc.manual_seed(0)
            m = M.gpt(torch)
            M.copy_weights(M.gpt(rc), m)
            opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1)

            def step(x: Any, y: Any) -> Any:
                opt.zero_grad()
                loss = m(x, y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opt.step()
                return loss.detach()

            return step

        sa, sb = make(), make()
        cf = tc(sb)
        i = [0]

        def pick() -> Any:
            i[0] += 1
            return xs[i[0] % len(xs)]

        return (lambda: sa(*pick())), (lambda: cf(*pick()))
    raise SystemExit(f"unknown case {name!r}")


# -- training steps -------------------------------------------------------------------------

TRAIN = ["mlp", "lm", "cnn"]
VOCAB, SEQ, D_MODEL = 1000, 64, 128


def build_net(name: str, lib: Any) -> Any:
    """The same network on rtxcore or PyTorch (``lib``); ``forward(x)`` gives logits."""
    nn = lib.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    if name == "lm":
        class LM(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.tok = nn.Embedding(VOCAB, D_MODEL)
                self.pos = nn.Embedding(SEQ, D_MODEL)
                layer = nn.TransformerEncoderLayer(D_MODEL, 4, 4 * D_MODEL, 0.0,
                                                   batch_first=True, norm_first=True)
                self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.ln = nn.LayerNorm(D_MODEL)
                self.head = nn.Linear(D_MODEL, VOCAB)
                self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(SEQ))
                self.register_buffer("idx", lib.arange(SEQ))

            def forward(self, x: Any) -> Any:
                h = self.tok(x) + self.pos(self.idx)
                h = self.enc(h, mask=self.mask, is_causal=True)
                return self.head(self.ln(h)).view(-1, VOCAB)

        return LM()
    raise SystemExit(f"unknown case {name!r}")


def train_batches(name: str, n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        if name == "lm":
            out.append((rng.integers(0, VOCAB, (16, SEQ)), rng.integers(0, VOCAB, 16 * SEQ)))
        else:
            shape = (64, 784) if name == "mlp" else (64, 1, 28, 28)
            out.append((rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, 64)))
    return out


def _reference_weights(name: str) -> dict[str, np.ndarray]:
    rc.manual_seed(0)
    return {k: p.detach().cpu().numpy().copy() for k, p in build_net(name, rc).named_parameters()}


def _load(model: Any, weights: dict[str, np.ndarray], lib: Any) -> Any:
    own = dict(model.named_parameters())
    assert sorted(own) == sorted(weights), (sorted(own), sorted(weights))
    with lib.no_grad():
        for k, p in own.items():
            assert tuple(p.shape) == weights[k].shape, k
            p.copy_(lib.tensor(weights[k]) if lib is rc else torch.from_numpy(weights[k]))
    return model


def _step_fn(model: Any, opt: Any, lib: Any) -> Callable[[Any, Any], Any]:
    ce = lib.nn.functional.cross_entropy

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def train_sides(name: str, dev: str, use_torch: bool,
                ) -> tuple[dict[str, Callable[[Any, Any], Any]], dict[str, Any], dict[str, Any]]:
    """{side: step(x, y)}, the compiled objects (for trace counts), and each
    side's batches' converter. Sides: eager, c(model), c(step) on rtxcore;
    torch, tc(model), tc(step) on PyTorch's cpu."""
    w = _reference_weights(name)
    steps: dict[str, Callable[[Any, Any], Any]] = {}
    compiled: dict[str, Any] = {}

    def rc_fresh() -> tuple[Any, Any]:
        m = _load(build_net(name, rc), w, rc).to(dev)
        return m, rc.optim.AdamW(m.parameters())

    m, o = rc_fresh()
    steps["eager"] = _step_fn(m, o, rc)
    m, o = rc_fresh()
    compiled["c(model)"] = cm = rc.compile(m)
    steps["c(model)"] = _step_fn(cm, o, rc)
    m, o = rc_fresh()
    compiled["c(step)"] = steps["c(step)"] = rc.compile(_step_fn(m, o, rc))
    if use_torch:
        def t_fresh() -> tuple[Any, Any]:
            m = _load(build_net(name, torch), w, torch)
            return m, torch.optim.AdamW(m.parameters())

        m, o = t_fresh()
        steps["torch"] = _step_fn(m, o, torch)
        m, o = t_fresh()
        steps["tc(model)"] = _step_fn(torch.compile(m), o, torch)
        m, o = t_fresh()
        steps["tc(step)"] = torch.compile(_step_fn(m, o, torch))
    return steps, compiled, w


def _is_rc(side: str) -> bool:
    return not side.startswith("t")


def _fail_text(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    top = "".join(traceback.format_list(tb[-3:])).rstrip()
    return f"{type(exc).__name__}: {str(exc).strip()[:500]}\n{top}"


class Report:
    """What went wrong or was warned, printed under the tables."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.bad_losses: list[str] = []

    def warned(self, where: str, caught: list[warnings.WarningMessage]) -> None:
        seen = set()
        for wm in caught:
            msg = str(wm.message).strip()
            if issubclass(wm.category, DeprecationWarning) and "rtxcore" not in wm.filename:
                continue  # torch's own import-time deprecations
            if msg in seen:
                continue
            seen.add(msg)
            origin = "rtxcore" if "rtxcore" in msg or "rtxcore" in wm.filename else "other"
            self.notes.append(f"{where}: {origin} warning {wm.category.__name__} at "
                              f"{Path(wm.filename).name}:{wm.lineno}: {msg[:300]}")


def run_train(name: str, dev: str, args: Any, rep: Report) -> dict[str, Any]:
    use_torch = torch is not None and not args.no_torch
    if use_torch:
        torch._dynamo.utils.counters.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        steps, compiled, _ = train_sides(name, dev, use_torch)
        n_check, rounds = args.check, args.train_rounds
        data = train_batches(name, 8)
        feeds = {"rc": [(rc.tensor(x, device=dev), rc.tensor(y, device=dev)) for x, y in data],
                 "t": [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data]
                 if use_torch else []}
        losses: dict[str, list[float]] = {s: [] for s in steps}
        first: dict[str, float] = {}
        live = list(steps)

        def one(side: str) -> float | None:
            i = len(losses[side])  # the side's own step count: every side sees the same batches
            x, y = feeds["rc" if _is_rc(side) else "t"][i % len(data)]
            try:
                t0 = time.perf_counter()
                loss = steps[side](x, y).item()
                dt = time.perf_counter() - t0
            except Exception as exc:  # noqa: BLE001 - report the side and go on without it
                rep.failures.append(f"{name} on {dev}, {side}, step {i}: {_fail_text(exc)}")
                live.remove(side)
                return None
            losses[side].append(loss)
            return dt

        gc.collect()
        for i in range(n_check):
            for side in list(live):
                dt = one(side)
                if dt is not None and i == 0:
                    first[side] = dt
        # the sides take turns in blocks of BLOCK steps, a block's first untimed, the
        # blocks' order shuffled each round: no side always follows the same one
        sides = list(live)
        med = blocks([lambda s=s: one(s) for s in sides], rounds, shuffle=random.Random(0))
    rep.warned(f"{name} on {dev}", caught)
    out: dict[str, Any] = {"ms": {s: m * 1e3 for s, m in zip(sides, med) if m is not None},
                           "first": {s: v * 1e3 for s, v in first.items()}, "gap": {}}
    ref = np.array(losses["eager"][:n_check], np.float64)
    for side in steps:
        got = np.array(losses[side][:n_check], np.float64)
        if side == "eager" or len(got) < n_check or len(ref) < n_check:
            continue
        if _is_rc(side):
            # float32 tolerance: a few ulps of rounding per op, grown over the checked steps
            ok = np.allclose(got, ref, rtol=1e-5, atol=1e-6)
            if not ok:
                rep.bad_losses.append(f"{name} on {dev}, {side}: losses {got.tolist()} vs eager "
                                      f"{ref.tolist()}")
        out["gap"][side] = float(np.max(np.abs(got - ref)))
    if use_torch and len(losses.get("torch", [])) >= n_check:
        t_ref = np.array(losses["torch"][:n_check], np.float64)
        out["gap"]["torch~rc"] = float(np.max(np.abs(t_ref - ref)))
    # whole run (timed rounds included): every side saw the same batches
    n_all = min(len(losses[s]) for s in live)
    out["gap_all"] = max((float(np.max(np.abs(np.array(losses[s][:n_all]) -
                                              np.array(losses["eager"][:n_all]))))
                          for s in live if _is_rc(s) and s != "eager" and n_all), default=0.0)
    out["traces"] = {s: (cf.traces, list(cf.misses)) for s, cf in compiled.items()}
    if use_torch:
        gb = torch._dynamo.utils.counters["graph_break"]
        out["graph_breaks"] = {k: v for k, v in gb.items()}
    out["failed"] = [s for s in steps if s not in live]
    out["loss"] = (losses["eager"][0], losses["eager"][-1]) if losses["eager"] else None
    return out


# -- main -------------------------------------------------------------------------------------

OP_CASES = ["gelu_1m", "gelu_4m", "gelu_16m", "layer_norm", "adamw", "clip_norm", "gpt"]
CASES = OP_CASES + TRAIN


def run_op(name: str, dev: str, args: Any, rounds: int, tcache: dict[str, Any],
           rep: Report) -> str:
    use_torch = torch is not None and not args.no_torch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sides: dict[str, Callable[[], Any]] = {}
        eager, compiled = case(name, dev, args.quick)
        sides["eager"], sides["compiled"] = eager, compiled
        if use_torch:
            if name not in tcache:
                try:
                    tcache[name] = torch_case(name, args.quick)
                except Exception as exc:  # noqa: BLE001
                    rep.failures.append(f"{name}: torch side not built: {_fail_text(exc)}")
                    tcache[name] = None
            if tcache[name] is not None:
                sides["torch"], sides["tc"] = tcache[name]
        first: dict[str, float] = {}
        live = list(sides)

        def one(side: str) -> float | None:
            try:
                t0 = time.perf_counter()
                _sync(sides[side]())
                return time.perf_counter() - t0
            except Exception as exc:  # noqa: BLE001
                rep.failures.append(f"{name} on {dev}, {side}: {_fail_text(exc)}")
                live.remove(side)
                return None

        for side in list(live):  # warm (kernels built, caches filled); compiled: trace
            dt = one(side)
            if dt is not None:
                first[side] = dt
            if side in live:
                one(side)
        # the sides take turns in blocks of BLOCK calls, a block's first untimed
        names = list(live)
        med = blocks([lambda s=s: one(s) for s in names], rounds)
    rep.warned(f"{name} on {dev}", caught)
    ms = {s: m * 1e3 for s, m in zip(names, med) if m is not None}

    def cell(s: str, w: int) -> str:
        return f"{ms[s]:>{w}.2f}" if s in ms else f"{'-':>{w}}"

    def ratio(a: str, b: str) -> str:
        return f"{ms[a] / ms[b]:>6.2f}x" if a in ms and b in ms else f"{'-':>7}"

    fc = f"{first['compiled'] * 1e3:>11.0f}" if "compiled" in first else f"{'-':>11}"
    ft = f"{first['tc'] * 1e3:>11.0f}" if "tc" in first and "tc" in ms else f"{'-':>11}"
    return (f"{name:<12} {dev:<9} {cell('eager', 10)} {cell('compiled', 12)} "
            f"{ratio('eager', 'compiled')} {fc} {cell('torch', 9)} {cell('tc', 9)} "
            f"{ratio('compiled', 'tc'):>9} {ft}")


def _pressure() -> str:
    """Linux's CPU pressure (the share of time something waited for a CPU, last
    60 s): how busy the shared machine was."""
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()
        return "cpu pressure (PSI, waiting share, last 60 s) " + some[2].split("=")[1] + "%"
    except (OSError, IndexError):
        return "cpu pressure unknown"


def _devices(spec: str) -> list[str]:
    from rtxcore.testing import available_devices

    have = available_devices()
    out = []
    for d in (d.strip() for d in spec.split(",") if d.strip()):
        if d in have or any(h.split(":")[0] == d for h in have):
            out.append(d)
        else:
            print(f"device {d}: unavailable (rtxcore.testing.available_devices() = {have})")
    return out


def _plans() -> list[Any]:
    """Every rtxcore.jit plan (a graph's generated ``replay``) alive in this process."""
    with warnings.catch_warnings():  # some of torch's lazy attributes warn when looked at
        warnings.simplefilter("ignore")
        return [f for f in gc.get_objects() if isinstance(f, types.FunctionType)
                and f.__code__.co_filename.startswith("<rtxcore.jit plan")]


def _label(name: str, fn: Any, args: tuple[Any, ...]) -> str:
    """What a plan's global ``K12``/``F20`` runs, with the shapes it was called on."""
    if name.startswith("F"):
        cl = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
        run = cl.get("run")
        what = run.__code__.co_filename.strip("<>") if run is not None else "fused group"
        return f"{what}, {cl.get('n', '?')} elements, {len(args[0]) if args else '?'} outs"
    q = getattr(fn, "__qualname__", type(fn).__name__).replace(".<locals>", "")
    shapes = [tuple(a.shape) for a in args if hasattr(a, "shape")]
    return f"{q} {' '.join(str(s).replace(' ', '') for s in shapes)}"


def profile_replays(name: str, dev: str, steps: int, rows: int) -> None:
    """Where ``steps`` replays of the whole-step-compiled training ``name`` go: plain
    timing, cProfile (top ``rows`` by cumulative and by own time), the plan's lines
    by kind, and each kernel / fused group / allocation of the plan timed alone."""
    w = _reference_weights(name)
    m = _load(build_net(name, rc), w, rc).to(dev)
    cf = rc.compile(_step_fn(m, rc.optim.AdamW(m.parameters()), rc))
    data = [(rc.tensor(x, device=dev), rc.tensor(y, device=dev))
            for x, y in train_batches(name, 8)]
    for i in range(3):  # trace, then two replays (first-replay costs out of the profile)
        cf(*data[i % len(data)]).item()
    gc.collect()
    ts = []
    for i in range(steps):
        t0 = time.perf_counter()
        cf(*data[i % len(data)]).item()
        ts.append(time.perf_counter() - t0)
    plain = statistics.median(ts) * 1e3
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for i in range(steps):
        cf(*data[i % len(data)]).item()
    prof.disable()
    wall = time.perf_counter() - t0
    print(f"{steps} replays of rtxcore.compile(step) for {name} on {dev}: {plain:.2f} ms/step "
          f"(median, no profiler), {wall / steps * 1e3:.2f} ms/step under cProfile; "
          f"traces: {cf.traces}")
    kinds = {"kernel calls": r"^K\d+\(", "fused-group calls": r"^F\d+\(",
             "allocations": r"ALLOC\d+\(\)", "views": r"^v\d+ = VIEW\(",
             "input-binding lines (4 an input)": r"= IN\[|\._storage$|\.buffer$|= view_of\(",
             "buffer aliases": r"^b\d+ = b\d+$", "Storage wraps": r"= Storage\(",
             "return": r"^return "}
    plans = _plans()
    for f in plans:  # what one replay runs: the plan's generated lines, by kind
        src = [ln.strip() for ln in f.__globals__.get("__source__", "").splitlines()[1:]]
        counts = dict.fromkeys(kinds, 0)
        for line in src:
            k = next((k for k, rx in kinds.items() if re.search(rx, line)), None)
            if k is not None:
                counts[k] += 1
        print(f"plan {f.__code__.co_filename}: {len(src)} lines: " +
              ", ".join(f"{v} {k}" for k, v in counts.items()) +
              f"; VIEW( made {sum(ln.count('VIEW(') for ln in src)} times a replay")
    for key in ("cumulative", "tottime"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(rows)
        text = s.getvalue()
        print(f"\n-- cProfile, top {rows} by {key} (rows of one name and line merge: the "
              f"fused programs of as many steps show as one code object's calls; "
              f"fused.py's call counts them all)\n" + text[text.find("   ncalls"):].rstrip())
    # each K / F / ALLOC / VIEW global of the plan wrapped in a timer, for one more run
    acc: dict[str, list[Any]] = {}
    saved: list[tuple[dict[str, Any], str, Any]] = []
    for f in plans:
        g = f.__globals__
        for k, fn in list(g.items()):
            if not (re.fullmatch(r"[KF]\d+|ALLOC\d+|VIEW", k) and callable(fn)):
                continue
            saved.append((g, k, fn))

            def timed(*a: Any, _fn: Any = fn, _k: str = k) -> Any:
                t0 = time.perf_counter()
                r = _fn(*a)
                dt = time.perf_counter() - t0
                e = acc.get(_k)
                if e is None:
                    e = acc[_k] = [0.0, 0, _label(_k, _fn, a)]
                e[0] += dt
                e[1] += 1
                return r

            g[k] = timed
    try:
        t0 = time.perf_counter()
        for i in range(steps):
            cf(*data[i % len(data)]).item()
        wall = (time.perf_counter() - t0) / steps * 1e3
    finally:
        for g, k, fn in saved:
            g[k] = fn
    per = {k: (v[0] / steps * 1e3, v[1] / steps, v[2]) for k, v in acc.items()}
    groups = {"kernels (K)": "K", "fused groups (F)": "F", "allocations": "A", "VIEW": "V"}
    tot = {g: sum(ms for k, (ms, _, _) in per.items() if k[0] == c) for g, c in groups.items()}
    rest = wall - sum(tot.values())
    note = " (opencl: a call's time is its enqueue; the device's work shows where the host " \
           "waits: in .item() under 'the rest')" if not dev.startswith("cpu") else ""
    print(f"\n-- the plan's calls timed one by one ({steps} more replays, {wall:.2f} ms/step "
          f"with the timers){note}:\n   " +
          ", ".join(f"{g} {ms:.3f} ms ({ms / wall:.0%})" for g, ms in tot.items()) +
          f"; the rest (the plan's other lines, binding, the cache check, .item(), the "
          f"timers) {rest:.3f} ms ({rest / wall:.0%})")
    print(f"   {'ms/step':>8} {'calls':>5}  what")
    for k, (ms, n, label) in sorted(per.items(), key=lambda kv: -kv[1][0])[:rows]:
        print(f"   {ms:>8.3f} {n:>5.0f}  {k}: {label}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu,opencl", help="rtxcore devices (torch: cpu)")
    p.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    p.add_argument("--rounds", type=int, default=7,
                   help="timed calls of each side of the operation cases (in blocks)")
    p.add_argument("--train-rounds", type=int, default=15,
                   help="timed steps of each side of the training cases (in blocks)")
    p.add_argument("--check", type=int, default=3,
                   help="training steps before the timed ones whose losses are compared")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch columns")
    p.add_argument("--profile", metavar="CASE", choices=TRAIN,
                   help="instead of the tables: cProfile of the whole-step-compiled training "
                        "CASE's replays on the first --device")
    p.add_argument("--profile-steps", type=int, default=50)
    p.add_argument("--profile-rows", type=int, default=25)
    a = p.parse_args(argv)
    devices = _devices(a.device)
    if a.profile:
        profile_replays(a.profile, devices[0], a.profile_steps, a.profile_rows)
        return 0
    rounds = 3 if a.quick else a.rounds
    if a.quick:
        a.train_rounds = min(a.train_rounds, 4)
    names = [c.strip() for c in a.cases.split(",") if c.strip()]
    for c in names:
        if c not in CASES:
            p.error(f"--cases: unknown case {c!r}")
    threads = (f"torch {torch.__version__}, {torch.get_num_threads()} threads (its default)"
               if torch is not None else "no torch")
    print(f"default thread counts: rtxcore {rc.get_num_threads()} threads, {threads}, NumPy's "
          f"BLAS its default; os.cpu_count() = {os.cpu_count()}; torch.compile = inductor on "
          f"the cpu; PyTorch always on the cpu; at the start: {_pressure()}")
    rep = Report()
    ops = [c for c in names if c in OP_CASES]
    train = [c for c in names if c in TRAIN]
    t_start = time.perf_counter()
    if ops:
        print(f"\neager vs rtxcore.compile vs torch, median of {rounds} timed calls of each "
              f"side, the sides in blocks of {BLOCK} calls (the first of a block untimed) "
              f"(ratio = eager / compiled: above 1 the compiled call is faster; "
              f"rtx/tc = rtxcore compiled / torch.compile: below 1 rtxcore is faster)\n")
        print(f"{'case':<12} {'device':<9} {'eager ms':>10} {'compiled ms':>12} {'ratio':>7} "
              f"{'compile ms':>11} {'torch ms':>9} {'tc ms':>9} {'rtx/tc':>9} {'tc first ms':>11}")
        tcache: dict[str, Any] = {}
        for dev in devices:
            for name in ops:
                print(run_op(name, dev, a, rounds, tcache, rep), flush=True)
    results = {}
    if train:
        print(f"\ntraining steps, AdamW defaults: median ms/step of {a.train_rounds} timed "
              f"steps of each side, the sides in blocks of {BLOCK} steps (the first of a block "
              f"untimed, the blocks' order shuffled each round), after {a.check} checked "
              f"steps; c(model) = compile(model) with loss, backward and step outside; "
              f"c(step) = the whole step compiled; tc = torch.compile (torch on the cpu); "
              f"ratios: compiled / other, below 1 the compiled side is faster\n")
        hdr = (f"{'case':<5} {'device':<7} {'eager':>7} {'c(model)':>9} {'c(step)':>8} "
               f"{'torch':>7} {'tc(model)':>9} {'tc(step)':>9} | {'cm/eager':>8} "
               f"{'cs/eager':>8} {'cm/tcm':>7} {'cs/tcs':>7} {'cs/tcm':>7}")
        print(hdr)
        for dev in devices:
            for name in train:
                r = results[name, dev] = run_train(name, dev, a, rep)
                ms = r["ms"]

                def c(s: str, w: int) -> str:
                    if s in ms:
                        return f"{ms[s]:>{w}.2f}"
                    return f"{'fail' if s in r['failed'] else '-':>{w}}"

                def q(x: str, y: str) -> str:
                    return f"{ms[x] / ms[y]:>7.2f}x" if x in ms and y in ms else f"{'-':>8}"

                print(f"{name:<5} {dev:<7} {c('eager', 7)} {c('c(model)', 9)} {c('c(step)', 8)} "
                      f"{c('torch', 7)} {c('tc(model)', 9)} {c('tc(step)', 9)} | "
                      f"{q('c(model)', 'eager'):>8} {q('c(step)', 'eager'):>8} "
                      f"{q('c(model)', 'tc(model)'):>7} {q('c(step)', 'tc(step)'):>7} "
                      f"{q('c(step)', 'tc(model)'):>7}", flush=True)
        print(f"\nfirst step ms (the compiled sides trace / compile in it), loss checks over the "
              f"first {a.check} steps (max |loss - rtxcore eager loss|; torch~rc: PyTorch eager "
              f"vs rtxcore eager), traces of the rtxcore compiled sides, torch graph breaks")
        for (name, dev), r in results.items():
            f = "  ".join(f"{s} {v:.0f}" for s, v in r["first"].items())
            g = "  ".join(f"{s} {v:.1e}" for s, v in r["gap"].items())
            tr = "  ".join(f"{s} {n}" + (f" (misses: {m})" if m else "")
                           for s, (n, m) in r["traces"].items())
            gb = sum(r.get("graph_breaks", {}).values())
            why = "; ".join(f"{k.strip().splitlines()[0][:70]} x{v}"
                            for k, v in r.get("graph_breaks", {}).items())
            loss = f"eager loss {r['loss'][0]:.4f} -> {r['loss'][1]:.4f}" if r["loss"] else ""
            print(f"{name} on {dev}: first ms: {f}\n    gaps: {g}; all steps (rtxcore "
                  f"compiled vs eager) {r['gap_all']:.1e}; {loss}\n    traces: {tr}; "
                  f"torch graph breaks: {gb}" + (f" ({why})" if why else ""))
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; at the end: {_pressure()}")
    rtx_notes = [n for n in rep.notes if ": rtxcore warning" in n]
    other = [n for n in rep.notes if ": rtxcore warning" not in n]
    if rtx_notes:
        print("\nrtxcore warnings:\n  " + "\n  ".join(rtx_notes))
    if other:
        print("\nother warnings:\n  " + "\n  ".join(other))
    if rep.failures:
        print("\nFAILURES (the side was dropped):\n  " +
              "\n  ".join(f.replace("\n", "\n    ") for f in rep.failures))
    if rep.bad_losses:
        print("\nLOSS MISMATCH (compiled vs eager beyond float32 tolerance):\n  " +
              "\n  ".join(rep.bad_losses), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
