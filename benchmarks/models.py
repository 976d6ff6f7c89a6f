"""Real models trained side by side with PyTorch: step time and loss curves, at one thread and at the default threads.

    python benchmarks/models.py                          # every model, cpu and opencl, both settings
    python benchmarks/models.py --device cpu --steps 40 --models gpt,mlp
    python benchmarks/models.py --quick                  # smoke test: a few steps each
    python benchmarks/models.py --models gpt --profile   # cProfile top-15 of rtxcore's step
    python benchmarks/models.py --models gpt --profile ops   # rtxcore.profiler's op table
    python benchmarks/models.py --threads 1              # only one thread (a busy machine)
    python benchmarks/models.py --threads default        # only the default threads

Eight models (``benchmarks/model_zoo.py``), each built by the same code on
rtxcore and on PyTorch (``lib`` is either module), with rtxcore's initial
weights copied into PyTorch's through NumPy and the same batches on both:

- ``gpt``: a decoder-only transformer LM as nanoGPT writes it (4 layers, 4
  heads, width 128, context 64, batch 16, GELU MLP 4x, LayerNorm, causal
  self-attention with a tril mask and masked_fill, tied embeddings, dropout
  0), AdamW and ``clip_grad_norm_(1.0)``;
- ``mlp``: a character MLP LM (Bengio / makemore: Embedding(27, 24), context 8,
  flatten, Linear-tanh-Linear, batch 64), SGD;
- ``gru``: a character GRU LM (Embedding, ``nn.GRU(batch_first=True)``,
  Linear), Adam and ``clip_grad_norm_(1.0)``;
- ``cnn``: the digits CNN of ``examples/train_digits.py`` (scikit-learn's
  bundled digits), Adam;
- ``lstm``: an LSTM classifier over image rows (the digits at 28x28, 28 steps
  of 28 pixels; 2 layers, hidden 128, batch 64, Linear on the last step,
  cross_entropy), Adam;
- ``superres``: PyTorch's example super-resolution net (Conv2d 1-64-64-32-9,
  ReLU, PixelShuffle(3), orthogonal init) on batches of 16 smooth 32x32
  images against their 96x96 originals, MSE, Adam(lr 0.01);
- ``nanogpt``: the small GPT users train first (3 layers, width 48, 3 heads,
  context 32, batch 16) with minGPT's hand-written tanh-GELU
  (``0.044715 * pow(x, 3.0)``), AdamW and ``clip_grad_norm_(1.0)``;
- ``dcgan``: one iteration of PyTorch's DCGAN example at 32x32 (a
  ConvTranspose2d-BatchNorm2d-ReLU generator, a Conv2d-BatchNorm2d-LeakyReLU(0.2)
  discriminator, BCELoss, two Adam(2e-4, betas (0.5, 0.999))): D on real and
  on detached fakes, D's step, then G's step; batch 32 of the digits.

A row reads "skipped: nn.X missing" on an rtxcore without a layer it needs. The
corpus is this repository's own documentation (nothing is downloaded).

Threads: by default (``--threads both``) the table is measured twice, each in
its own process (NumPy's BLAS and OpenMP pools take their size at import):
once at one thread (``OMP/OPENBLAS/MKL_NUM_THREADS=1``, PoCL's
``POCL_MAX_PTHREAD_COUNT=1``, ``torch.set_num_threads(1)``,
``rtxcore.set_num_threads(1)``) and once with both libraries at their default
threads; each setting compares rtxcore with PyTorch at the same setting, and
the table has a column for each device and setting.

The sides alternate in blocks of four steps each (a step: forward, loss,
backward, clipping where the model has it, optimizer step, ``loss.item()``),
and the first step of a block is not timed: at the default threads PyTorch's
OpenMP workers spin on after its last op, and a step timed right after one of
PyTorch's shared the cores with them. The table shows median ms per step and
the ratio rtxcore / PyTorch, and the geometric mean of the ratios. On ``opencl`` the comparison is rtxcore on opencl against
PyTorch on cpu. Both run in one process, so PyTorch's side has the malloc
settings rtx_cpu makes at import too (``rtx_cpu.memory.tune_malloc``): on this
2-core VM that makes PyTorch's superres step ~1.25x faster than in a process of
its own (40 against 50 ms; 5,000 page faults a step fewer), so the ratios are
against that faster PyTorch. The loss curves must agree: a relative gap above ``--tol`` at
any step exits with status 1. The machine is often shared: read ratios, and
rerun.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable


def _threads_from_argv(argv: list[str]) -> int | None:
    """``--threads N`` must act before NumPy and PyTorch load their thread pools."""
    val = None
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            val = a.split("=", 1)[1]
        elif a == "--threads" and i + 1 < len(argv):
            val = argv[i + 1]
    return int(val) if val is not None and val.isdigit() else None


THREADS = _threads_from_argv(sys.argv[1:]) if __name__ == "__main__" else None
if THREADS:
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_COUNT"):
        os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - the benchmark needs PyTorch
    sys.exit("benchmarks/models.py compares with PyTorch: pip install torch")
if THREADS:
    torch.set_num_threads(THREADS)
    if hasattr(rc, "set_num_threads"):
        rc.set_num_threads(THREADS)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the builders and data are re-exported here: benchmarks/compile.py imports them from this module
from model_zoo import (MODELS, NOTES, ROOT, SPECS, Spec, char_stream, corpus,  # noqa: E402,F401
                       dcgan, digit_batches, digits_cnn, gpt, gru_lm, lm_batches, lstm_rows,
                       mlp_lm, nanogpt, superres)


def rc_clip_grad_norm_(params: Any, max_norm: float) -> Any:
    """``rtxcore.nn.utils.clip_grad_norm_``; on an rtxcore without it (comparing
    with an older checkout), the same computation inline: the total 2-norm of
    the gradients, then a scale by ``min(1, max_norm / (norm + 1e-6))``."""
    try:
        from rtxcore.nn.utils import clip_grad_norm_
    except ImportError:
        grads = [p.grad for p in params if p.grad is not None]
        total = rc.stack([g.norm() for g in grads]).norm()
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef)
        return total
    return clip_grad_norm_(params, max_norm)


def torch_clip_grad_norm_(params: Any, max_norm: float) -> Any:
    return torch.nn.utils.clip_grad_norm_(params, max_norm)


# -- running ------------------------------------------------------------------------------


def copy_weights(src: Any, dst: Any) -> None:
    """rtxcore module ``src``'s parameters into torch module ``dst``, by name."""
    theirs = dict(dst.named_parameters())
    mine = dict(src.named_parameters())
    if sorted(mine) != sorted(theirs):
        raise SystemExit(f"parameter names differ: rtxcore {sorted(mine)} vs torch "
                         f"{sorted(theirs)}")
    with torch.no_grad():
        for name, p in mine.items():
            arr = p.detach().cpu().numpy()
            if tuple(theirs[name].shape) != arr.shape:
                raise SystemExit(f"{name}: rtxcore shape {arr.shape} vs torch "
                                 f"{tuple(theirs[name].shape)}")
            theirs[name].copy_(torch.from_numpy(arr.copy()))


def make_step(model: Any, opt: Any,
              clip: Callable[[Any, float], Any] | None) -> Callable[..., float]:
    params = [p for p in model.parameters()]

    def step(*batch: Any) -> float:
        opt.zero_grad()
        loss = model(*batch)
        loss.backward()
        if clip is not None:
            clip(params, 1.0)
        opt.step()
        return loss.item()

    return step


def _build_step(spec: Spec, lib: Any, model: Any, clip: Any) -> Callable[..., Any]:
    opt = spec.optim(lib, model)
    if spec.step is not None:
        return spec.step(lib, model, opt, clip if spec.clip else None)
    return make_step(model, opt, clip if spec.clip else None)


def _components(v: Any) -> tuple[float, ...]:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


def _loss_text(v: Any) -> str:
    return "/".join(f"{c:.4f}" for c in _components(v))


def _pair(spec: Spec, device: str, steps: int, seed: int,
          double: bool = False) -> tuple[Callable[..., Any], Callable[..., Any], list, list]:
    """Both sides from the same weights: (rtxcore step, torch step, rtxcore
    batches, torch batches); ``double``: model and float batches in float64."""
    rc.manual_seed(seed)
    rmodel = spec.build(rc)
    rmodel = (rmodel.double() if double else rmodel).to(device)
    torch.manual_seed(seed)
    tmodel = spec.build(torch)
    tmodel = tmodel.double() if double else tmodel
    copy_weights(rmodel, tmodel)
    rstep = _build_step(spec, rc, rmodel, rc_clip_grad_norm_)
    tstep = _build_step(spec, torch, tmodel, torch_clip_grad_norm_)
    data = spec.batches(steps, seed)
    if double:
        data = [tuple(a.astype(np.float64) if a.dtype == np.float32 else a for a in b)
                for b in data]
    rdata = [tuple(rc.tensor(a).to(device) for a in b) for b in data]
    tdata = [tuple(torch.from_numpy(a) for a in b) for b in data]
    return rstep, tstep, rdata, tdata


def _gap(rl: list, tl: list) -> float:
    return max(abs(a - b) / max(abs(b), 1e-8)
               for ra, ta in zip(rl, tl) for a, b in zip(_components(ra), _components(ta)))


def replay_float64(spec: Spec, device: str, steps: int, seed: int) -> float:
    """The largest relative loss gap of the same steps with both sides in float64."""
    rstep, tstep, rdata, tdata = _pair(spec, device, steps, seed, double=True)
    return _gap([rstep(*b) for b in rdata], [tstep(*b) for b in tdata])


BLOCK = 4  # steps of one side between the other's (see run_model)


def run_model(name: str, device: str, steps: int, seed: int, profile: str | None,
              label: str = "", tol: float = math.inf) -> dict[str, Any]:
    spec = SPECS[name]
    missing = [n for n in spec.needs if not hasattr(rc.nn, n)]
    if missing:
        return {"skip": f"nn.{missing[0]} missing"}
    rstep, tstep, rdata, tdata = _pair(spec, device, steps, seed)
    rt, tt, rl, tl = [], [], [], []
    prof = cProfile.Profile() if profile == "cprofile" else None
    ops = None
    if profile == "ops":
        from rtxcore.profiler import profile as op_profile

        ops = op_profile()
    gc.collect()
    # the two sides alternate in blocks of BLOCK steps, and a block's first step
    # is not timed: at the default threads PyTorch's OpenMP workers spin on after
    # its last op, and a step timed right after PyTorch's shared the cores with
    # them (compile.py's MLP: rtxcore's step 3.7-3.9 ms so, 2.2-2.5 ms with
    # OMP_WAIT_POLICY=PASSIVE, PyTorch's own the same either way)
    for b0 in range(0, steps, BLOCK):
        block = range(b0, min(b0 + BLOCK, steps))
        for i in block:
            if prof is not None and i >= 2:
                prof.enable()
            if ops is not None and i == 2:
                ops.__enter__()
            t0 = time.perf_counter()
            rl.append(rstep(*rdata[i]))
            rt.append(time.perf_counter() - t0)
            if prof is not None:
                prof.disable()
        for i in block:
            t0 = time.perf_counter()
            tl.append(tstep(*tdata[i]))
            tt.append(time.perf_counter() - t0)
    warm = min(2, steps - 1)  # first steps build kernels and state
    timed = [i for i in range(warm, steps) if i % BLOCK] or list(range(warm, steps))
    r_ms = statistics.median(rt[i] for i in timed) * 1e3
    t_ms = statistics.median(tt[i] for i in timed) * 1e3
    gap = _gap(rl, tl)
    where = f"{name} on {device}{', ' + label if label else ''}"
    if prof is not None:
        print(f"\n-- cProfile: rtxcore {where}, {steps - 2} steps (top 15 by own time)")
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if ops is not None:
        ops.__exit__(None, None, None)
        print(f"\n-- rtxcore.profiler: {where}, {steps - 2} steps (top 15 by self time; "
              f"the torch steps in between are counted in no row)")
        print(ops.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    sys.stdout.flush()
    gap64 = replay_float64(spec, device, steps, seed) if spec.chaotic and gap > tol else None
    return {"rtx": r_ms, "torch": t_ms, "ratio": r_ms / t_ms, "gap": gap, "gap64": gap64,
            "loss": [_loss_text(rl[0]), _loss_text(rl[-1]), _loss_text(tl[0]),
                     _loss_text(tl[-1])]}


def thread_label() -> str:
    tn = torch.get_num_threads()
    rn = rc.get_num_threads() if hasattr(rc, "get_num_threads") else tn
    n = str(tn) if tn == rn else f"torch {tn}/rtxcore {rn}"
    return f"{n}t" if THREADS else f"default {n}t"


def run_setting(models: list[str], devices: list[str], steps: int, seed: int, tol: float,
                profile: str | None) -> dict[str, Any]:
    """Every model on every usable device at this process's thread setting."""
    usable = []
    for d in devices:
        try:
            rc.zeros(1, device=d)
            usable.append(d)
        except Exception as e:  # noqa: BLE001 - report and go on with the other devices
            print(f"device {d}: unavailable ({e})", file=sys.stderr)
    label = thread_label()
    results: dict[str, Any] = {}
    failed = []
    for m in models:
        for d in usable:
            r = results[f"{m}|{d}"] = run_model(m, d, steps, seed, profile, label, tol)
            if "skip" in r:
                continue
            print(f"  {label:>10} {m:>9} on {d:<7}{r['ratio']:6.2f}x "
                  f"({r['rtx']:.1f} / {r['torch']:.1f} ms)", file=sys.stderr, flush=True)
            if r["gap64"] is not None:
                NOTES[f"{m} gap"] = ("float32 loss curves drift apart by rounding (training "
                                     "amplifies a one-ulp difference about tenfold a step; "
                                     "PyTorch at 1 and at 2 threads differs from itself "
                                     "alike), so the check replays the same steps in float64 "
                                     "on both sides: the gap in parentheses")
            if not (r["gap"] <= tol or (r["gap64"] is not None and r["gap64"] <= tol)):
                failed.append(f"{m} on {d} ({label}): loss curves differ by {r['gap']:.2e} "
                              f"relative (> {tol:g}"
                              + ("" if r["gap64"] is None else f"; float64: {r['gap64']:.2e}")
                              + f"); losses rtxcore {r['loss'][0]} -> "
                              f"{r['loss'][1]}, torch {r['loss'][2]} -> {r['loss'][3]}")
    return {"label": label, "usable": usable, "results": results, "failed": failed,
            "notes": dict(NOTES)}


def print_table(models: list[str], settings: list[dict[str, Any]], steps: int) -> None:
    cols = [(s, d) for d in settings[0]["usable"] for s in settings if d in s["usable"]]
    w = 27
    print(f"\nrtxcore vs torch {torch.__version__}, {steps} steps, median ms per step after 2 "
          f"warm-up steps, each side's first step of a block of {BLOCK} left out; "
          f"ratio = rtxcore / torch (opencl: rtxcore on opencl vs torch on cpu); "
          f"cells: ratio (rtxcore / torch ms)")
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        print(f"load average {load:.1f} on {cores} cores: other processes compete for them, and "
              f"a column above one thread then mostly measures that (noisy, read with care)")
    print("model".ljust(9) + "".join(f"{d + ', ' + s['label']:>{w}}" for s, d in cols)
          + "   max loss gap")
    logs: dict[int, list[float]] = {i: [] for i in range(len(cols))}
    for m in models:
        cells, gaps, gaps64 = [], [], []
        for i, (s, d) in enumerate(cols):
            r = s["results"][f"{m}|{d}"]
            if "skip" in r:
                cells.append(f"{'skipped: ' + r['skip']:>{w}}")
                continue
            logs[i].append(math.log(r["ratio"]))
            cells.append(f"{r['ratio']:>5.2f}x ({r['rtx']:6.1f} / {r['torch']:6.1f})".rjust(w))
            gaps.append(r["gap"])
            if r["gap64"] is not None:
                gaps64.append(r["gap64"])
        gap = f"{max(gaps):.1e}" if gaps else ""
        gap += f" (float64: {max(gaps64):.1e})" if gaps64 else ""
        print(m.ljust(9) + "".join(cells) + "   " + gap)
    print("geomean".ljust(9) + "".join(
        ((" " * (w - 24) + f"{math.exp(statistics.fmean(v)):>5.2f}x") if v else "").ljust(w)
        for v in logs.values()))
    notes = {k: v for s in settings for k, v in s["notes"].items() if k.split()[0] in models}
    for k, v in notes.items():
        print(f"note: {k}: {v}")


def run_both(args: argparse.Namespace) -> int:
    """Each thread setting in its own process (BLAS pools are sized at import)."""
    base = [sys.executable, os.path.abspath(__file__), "--device", args.device,
            "--models", args.models, "--steps", str(args.steps), "--tol", str(args.tol),
            "--seed", str(args.seed)]
    if args.quick:
        base.append("--quick")
    if args.profile:
        base += ["--profile", args.profile]
    settings = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in ("1", "default"):
            out = os.path.join(tmp, f"threads-{threads}.json")
            sys.stdout.flush()
            rc_ = subprocess.call(base + ["--threads", threads, "--json", out])
            if not os.path.exists(out):
                print(f"threads={threads}: the run failed (exit status {rc_})", file=sys.stderr)
                return rc_ or 1
            with open(out, encoding="utf-8") as f:
                settings.append(json.load(f))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    steps = 5 if args.quick else args.steps
    print_table(models, settings, steps)
    failed = [f for s in settings for f in s["failed"]]
    if failed:
        print("\nFAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu,opencl", help="comma-separated rtxcore devices")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--steps", type=int, default=30, help="training steps per model and device")
    p.add_argument("--quick", action="store_true", help="smoke test: 5 steps")
    p.add_argument("--tol", type=float, default=1e-3,
                   help="largest relative loss gap allowed at any step (default 1e-3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", nargs="?", const="cprofile", choices=["cprofile", "ops"],
                   help="profile rtxcore's steps after the warm-up and print the top 15: with "
                        "cProfile (the default) or, with 'ops', rtxcore.profiler's op table")
    p.add_argument("--threads", default="both",
                   help="'both' (default: a column at 1 thread and one at the default threads, "
                        "each measured in its own process), 'default', or a count N for BLAS, "
                        "OpenMP, PoCL, torch and rtxcore")
    p.add_argument("--json", help=argparse.SUPPRESS)  # a child of --threads both: results here
    args = p.parse_args(argv)
    if args.threads not in ("both", "default") and not (args.threads.isdigit()
                                                        and int(args.threads) > 0):
        p.error(f"--threads: 'both', 'default' or a positive count, not {args.threads!r}")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in SPECS:
            p.error(f"--models: unknown model {m!r} (choose from {', '.join(MODELS)})")
    if args.threads == "both":
        return run_both(args)
    if args.threads.isdigit() and THREADS != int(args.threads):
        p.error("--threads N acts at import: run this file as a script")
    steps = 5 if args.quick else args.steps
    devices = [d.strip() for d in args.device.split(",") if d.strip()]
    setting = run_setting(models, devices, steps, args.seed, args.tol, args.profile)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(setting, f)
        return 0
    print_table(models, [setting], steps)
    if setting["failed"]:
        print("\nFAILED:\n  " + "\n  ".join(setting["failed"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
