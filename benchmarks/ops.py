"""Per-op time of rtxcore against NumPy and PyTorch, in one run.

    python benchmarks/ops.py                 # all sizes, default threads
    python benchmarks/ops.py --threads 1     # single-threaded BLAS/OpenMP everywhere
    python benchmarks/ops.py --device cpu --rounds 7 --quick

For each op and size it prints the median over several timed rounds of the time
per call, and the ratios rtxcore/NumPy and rtxcore/PyTorch (lower is better for us;
1.00 is parity). "overhead" is rtxcore's time minus NumPy's: the framework's cost
per op. PyTorch columns appear when torch is importable.

With ``--device opencl`` it prints OpenCL tables instead (see ``_main_opencl``):
elementwise and reductions against NumPy/PyTorch, matmul GFLOP/s (rtxcore's own
kernel, CLBlast via ``RTX_OPENCL_MATMUL=clblast``, NumPy, PyTorch), the cost of
a tiny op (against a bare PyOpenCL enqueue, and in host CPU time) and of a
synchronisation, and first-call (compile) time, warm and with
the on-disk kernel caches bypassed. OpenCL work is timed as the device runs it:
N calls are enqueued, then one ``rtx_opencl.synchronize()``.

    python benchmarks/ops.py --device opencl [--quick] [--only tiny]

With ``--device cuda`` it prints CUDA tables beside CuPy's own calls on the same
arrays (elementwise at 16M and 256M elements, reductions, matmul 4096 in TFLOP/s,
a tiny op), each timed as N calls then one device synchronisation.

A second cpu table times ``F.layer_norm`` with weight and bias at (64, 128),
(32, 512) and (4096, 1024), forward alone and forward + backward: rtxcore, the
textbook whole-array NumPy (forward; backward in closed form), PyTorch eager and
``torch.compile`` (inductor; pass ``--no-compile`` to skip it, about a minute of
compiling). ``--only layer_norm`` runs that table alone, ``--only ops`` the first.

The sides take turns in blocks (``benchmarks/_timing.py``, as
``benchmarks/models.py`` does): each library runs four consecutive
measurements of the same op (a measurement: many calls, or N enqueued calls
then one synchronisation), the first of which is not timed, then the next
library its four; ``--rounds`` is the number of timed measurements of each,
and the tables show their median. At the default threads PyTorch's OpenMP
workers spin on after its last op, so a measurement taken right after one of
PyTorch's would share the cores with them.

This machine is shared and noisy: read ratios, not absolute times, and rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit

from _setup import import_torch, limit_threads  # (benchmarks/_setup.py)
from _timing import BLOCK, blocks  # (benchmarks/_timing.py)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None, help="limit BLAS/OpenMP threads (e.g. 1)")
    p.add_argument("--device", default="cpu", help="rtxcore device to measure (default cpu)")
    p.add_argument("--rounds", type=int, default=7,
                   help="timed measurements of each side, in blocks (median is shown)")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    p.add_argument("--no-compile", action="store_true",
                   help="skip torch.compile (layer_norm table)")
    p.add_argument("--only", choices=("ops", "layer_norm", "tiny"), default=None,
                   help="cpu: run one table (default both); opencl: tiny, the per-op overhead table")
    return p.parse_args()


ARGS = _parse()
limit_threads(ARGS.threads)  # before numpy / torch load their thread pools

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402

torch = import_torch(ARGS.no_torch, ARGS.threads)


SIZES = {
    "tiny (1,)": (1,),
    "64x64": (64, 64),
    "1M (1024x1024)": (1024, 1024),
    "16M (4096^2)": (4096, 4096),
}
SKIP = {("16M (4096^2)", "matmul")}  # seconds per call: not a per-op overhead question

# op name -> callable(x, y) for each library; x, y are that library's arrays
OPS = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "exp": lambda x, y: x.exp() if not isinstance(x, np.ndarray) else np.exp(x),
    "sum": lambda x, y: x.sum(),
    "matmul": lambda x, y: x @ y,
    # (x.T of a 1-d tensor is deprecated in PyTorch: transpose 2-d inputs only)
    "view+reduce": lambda x, y: (x.T if x.ndim == 2 else x)[::2].sum(0),
}


def _time(fns: list, number: int, rounds: int) -> list[float]:
    """Median time per call of each function over ``rounds`` timed measurements
    of ``number`` calls. The functions take turns in blocks of four
    measurements, the first of each block not timed (``_timing.blocks``), so
    that neither another side's spinning threads nor the machine's drift favour
    one of them."""
    for fn in fns:
        fn()  # warm up (first-call costs: lazy loading, caches)
    return blocks([lambda fn=fn: timeit.timeit(fn, number=number) / number for fn in fns], rounds)


def _rounds_text(rounds: int) -> str:
    return (f"median of {rounds} timed rounds, the sides in blocks of {BLOCK} "
            f"(the first of a block untimed)")


def _fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:8.2f} us"
    return f"{s * 1e3:8.3f} ms"


def _fmt_delta(s: float) -> str:
    """A signed time difference in us or ms, e.g. '+1.25 us', '-12.345 ms'."""
    if abs(s) < 1e-3:
        return f"{s * 1e6:+.2f} us"
    return f"{s * 1e3:+.3f} ms"


def main() -> int:
    dev = rc.device(ARGS.device)
    if dev.type == "opencl":
        return _main_opencl(dev)
    if dev.type == "cuda":
        return _main_cuda(dev)
    if ARGS.only != "layer_norm":
        _ops_table(dev)
    if ARGS.only != "ops" and dev.type == "cpu":
        _layer_norm_table()
    return 0


def _ops_table(dev) -> None:
    rows = []
    for label, shape in SIZES.items():
        large = np.prod(shape) >= 1 << 20
        number = (3 if ARGS.quick else 10) if large else (2000 if ARGS.quick else 20000)
        if np.prod(shape) >= 1 << 24:
            number = 2 if ARGS.quick else 5
        rng = np.random.default_rng(0)
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(shape).astype(np.float32)
        # On cpu all three libraries read the very same input memory (zero-copy):
        # where an array sits (its alignment) moves a large exp by ~6%, which is
        # not what this table is about.
        if dev.type == "cpu":
            ra, rb = rc.from_numpy(a), rc.from_numpy(b)
        else:
            ra, rb = rc.tensor(a, device=dev), rc.tensor(b, device=dev)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
        for op, fn in OPS.items():
            if (label, op) in SKIP:
                continue
            n = number if not (op == "matmul" and large) else max(1, number // 5)
            fns = [lambda: fn(a, b), lambda: _sync(fn(ra, rb))]
            if torch:
                fns.append(lambda: fn(ta, tb))
            t_np, t_rc, *t_th = _time(fns, n, ARGS.rounds)
            rows.append((label, op, t_rc, t_np, t_th[0] if t_th else None))

    print(f"rtxcore {rc.__version__} on {dev} | numpy {np.__version__}"
          + (f" | torch {torch.__version__}" if torch else " | torch not installed")
          + f" | threads: {ARGS.threads or 'default'} | {_rounds_text(ARGS.rounds)}")
    head = f"{'size':<16}{'op':<13}{'rtxcore':>12}{'numpy':>12}"
    head += f"{'torch':>12}" if torch else ""
    head += f"{'rc/np':>8}" + (f"{'rc/torch':>10}" if torch else "") + f"{'overhead':>14}"
    print(head)
    print("-" * len(head))
    for label, op, t_rc, t_np, t_th in rows:
        line = f"{label:<16}{op:<13}{_fmt_time(t_rc):>12}{_fmt_time(t_np):>12}"
        if torch:
            line += f"{_fmt_time(t_th):>12}"
        line += f"{t_rc / t_np:>8.2f}"
        if torch:
            line += f"{t_rc / t_th:>10.2f}"
        # (at least two spaces before it: a negative overhead of a large op is wide)
        line += f"  {_fmt_delta(t_rc - t_np):>12}"
        print(line)
    print()
    print("rc/np: rtxcore time / NumPy time (large ops: <= 1.05 means >= 0.95x NumPy's throughput)")
    print("rc/torch: rtxcore time / PyTorch eager time (tiny ops: budget <= 1.3 as a geometric "
          "mean, goal <= 1.0)")
    tiny = [t_rc / t_th for label, _, t_rc, _, t_th in rows
            if t_th and label in ("tiny (1,)", "64x64")]
    if tiny:
        print(f"tiny ops (1, and 64x64), geometric mean rc/torch: "
              f"{float(np.exp(np.mean(np.log(tiny)))):.2f}x over {len(tiny)} cases")
    print()


# -- layer_norm ------------------------------------------------------------------------------

LN_SHAPES = [(64, 128), (32, 512), (4096, 1024)]


def _np_layer_norm(x, w, b, eps=1e-5):
    """The textbook whole-array NumPy forward: (y, xhat, rstd)."""
    mu = x.mean(1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(1, keepdims=True) + eps)
    xhat = xc * rstd
    return xhat * w + b, xhat, rstd


def _np_layer_norm_fwd_bwd(x, w, b, g):
    y, xhat, rstd = _np_layer_norm(x, w, b)
    gw = g * w
    dx = (gw - gw.mean(1, keepdims=True) - xhat * (gw * xhat).mean(1, keepdims=True)) * rstd
    return y, dx, (g * xhat).sum(0), g.sum(0)


def _layer_norm_table() -> None:
    """F.layer_norm (weight and bias), forward and forward + backward, against NumPy,
    PyTorch eager and torch.compile: the sides in blocks (``_time``), medians."""
    import rtxcore.nn.functional as F

    compiled = torch is not None and not ARGS.no_compile
    rows = []
    for shape in LN_SHAPES:
        m, n = shape
        large = m * n >= 1 << 20
        number = (3 if ARGS.quick else 20) if large else (200 if ARGS.quick else 2000)
        rng = np.random.default_rng(0)
        x, g = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        rx, rw, rb, rg = (rc.from_numpy(a) for a in (x, w, b, g))
        gx, gw, gb = (rc.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))

        def rc_fb(gx=gx, gw=gw, gb=gb, rg=rg, n=n):
            gx.grad = gw.grad = gb.grad = None
            F.layer_norm(gx, (n,), gw, gb).backward(rg)

        fwd = [lambda: _np_layer_norm(x, w, b), lambda: F.layer_norm(rx, (n,), rw, rb)]
        fb = [lambda: _np_layer_norm_fwd_bwd(x, w, b, g), rc_fb]
        if torch is not None:
            TF = torch.nn.functional
            tx, tw, tb, tg = (torch.from_numpy(a) for a in (x, w, b, g))
            sx, sw, sb = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))

            def th_fb(f, sx=sx, sw=sw, sb=sb, tg=tg, n=n):
                sx.grad = sw.grad = sb.grad = None
                f(sx, (n,), sw, sb).backward(tg)

            fwd.append(lambda: TF.layer_norm(tx, (n,), tw, tb))
            fb.append(lambda: th_fb(TF.layer_norm))
            if compiled:
                cf = torch.compile(TF.layer_norm, dynamic=False)
                cb = torch.compile(TF.layer_norm, dynamic=False)
                fwd.append(lambda: cf(tx, (n,), tw, tb))
                fb.append(lambda: th_fb(cb))
        for kind, fns in (("fwd", fwd), ("fwd+bwd", fb)):
            t = _time(fns, number if kind == "fwd" else max(1, number // 2), ARGS.rounds)
            rows.append((f"{m}x{n}", kind, t + [None] * (4 - len(t))))

    print(f"layer_norm (weight, bias) on cpu | threads: rtxcore {rc.get_num_threads()}"
          + (f", torch {torch.get_num_threads()}" if torch else "")
          + f" | {_rounds_text(ARGS.rounds)}")
    head = (f"{'shape':<11}{'pass':<9}{'rtxcore':>12}{'numpy':>12}{'torch':>12}"
            f"{'compiled':>12}{'rc/np':>8}{'rc/torch':>10}{'rc/compiled':>13}")
    print(head)
    print("-" * len(head))
    for label, kind, (t_np, t_rc, t_th, t_tc) in rows:
        print(f"{label:<11}{kind:<9}{_fmt_time(t_rc):>12}{_fmt_time(t_np):>12}"
              f"{_opt_time(t_th):>12}{_opt_time(t_tc):>12}{t_rc / t_np:>8.2f}"
              f"{_ratio(t_rc, t_th):>10}{_ratio(t_rc, t_tc):>13}")
    print()
    print("numpy: the textbook whole-array NumPy (forward: 5 passes; backward in closed form)")
    print("compiled: torch.compile(F.layer_norm), inductor (its backward through AOTAutograd)")
    print("rc/compiled: budget <= 1.5, goal <= 1.0 at 4096x1024")


def _sync(x):
    # cpu results are ready when the call returns; other backends may queue work
    if ARGS.device != "cpu":
        x.cpu()
    return x


# -- OpenCL ------------------------------------------------------------------------------
#
# Kernels are enqueued and run later, so a call's time is only known after a wait.
# Each measurement enqueues `number` calls back to back and synchronizes once: the
# time per call is what the queue sustains (host enqueue and device work overlap),
# as NumPy's is for a loop of allocating calls. Never a wait per op.


def _time_queued(cases: list, number: int, rounds: int) -> list[float]:
    """Median time per call of each case (fn, sync, env): ``number`` calls of
    fn, then sync() once (None: nothing to wait for), with the environment
    variables in env set meanwhile. The cases take turns in blocks as in ``_time``."""
    for case in cases:
        _run(case, 1)  # warm up: compiles kernels (CLBlast's too), fills the memory pool
    return blocks([lambda case=case: _run(case, number) for case in cases], rounds)


def _run(case: tuple, number: int) -> float:
    fn, sync, env = case
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        if sync is not None:
            sync()
        return (time.perf_counter() - t0) / number
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _close(got, want: np.ndarray, tol: float) -> str:
    """'ok' if rtxcore's result matches the float64 reference to ``tol`` (absolute)."""
    got = np.asarray(got.cpu().numpy() if hasattr(got, "cpu") else got, dtype=np.float64)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    return "ok" if got.shape == want.shape and err <= tol else f"BAD {err:.2g}"


def _table(head: list[tuple[str, int]], rows: list[list[str]], title: str) -> None:
    print(f"\n{title}")
    # each column at least as wide as its widest cell plus a space, so cells never touch
    head = [(h, max([w] + [len(str(r[i])) + (0 if i == 0 else 1) for r in rows if i < len(r)]))
            for i, (h, w) in enumerate(head)]
    line = "".join(f"{h:<{w}}" if i == 0 else f"{h:>{w}}" for i, (h, w) in enumerate(head))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, (_, w)) in enumerate(zip(r, head))))
    sys.stdout.flush()


def _ratio(x: float | None, y: float | None) -> str:
    return "n/a" if x is None or y is None else f"{x / y:.2f}"


def _opt_time(s: float | None) -> str:
    return "n/a" if s is None else _fmt_time(s).strip()


# The cold-compile probe, run in a child process: the first kernel of a process
# (which also pays for PoCL's compiler start-up), then an op/dtype pair never
# used before (float64 sqrt), then the same call warm.
_COLD_PROBE = r"""
import json, time, numpy as np, rtxcore as rc, rtx_opencl, rtx_opencl.runtime as R
dev = rc.device(DEVICE); d = R.device(dev.index or 0)
x32 = rc.tensor(np.ones(7, np.float32), device=dev)
x64 = rc.tensor(np.full((3, 5, 7), 4.0), dtype=rc.float64, device=dev)
rtx_opencl.synchronize()
t = time.perf_counter(); x32 + x32; rtx_opencl.synchronize(); first_any = time.perf_counter() - t
c0, s0 = d.compiles, d.compile_seconds
t = time.perf_counter(); x64.sqrt(); rtx_opencl.synchronize(); first = time.perf_counter() - t
c1, s1 = d.compiles, d.compile_seconds
t = time.perf_counter(); x64.sqrt(); rtx_opencl.synchronize(); warm = time.perf_counter() - t
print(json.dumps(dict(first_any=first_any, first=first, warm=warm, compiles=c1 - c0,
                      compile_s=s1 - s0)))
"""


def _cold_probe(device: str, env: dict, runs: int) -> dict | None:
    """Median of each number of ``_COLD_PROBE`` over ``runs`` child processes."""
    results = []
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", _COLD_PROBE.replace("DEVICE", repr(device))],
                           env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            print(f"cold-compile probe failed ({env}):\n{p.stderr[-2000:]}")
            return None
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def _bare_enqueue(d):
    """A call that enqueues a 1-element add kernel with PyOpenCL alone (its
    invoker, arguments typed once): what a tiny op can't go below."""
    import pyopencl as cl

    prg = cl.Program(d.ctx, "__kernel void add(__global float *o, long oo, __global const float *a,"
                            " long ao, __global const float *b, long bo)"
                            " { long i = get_global_id(0); o[oo + i] = a[ao + i] + b[bo + i]; }").build()
    k = prg.add
    k.set_scalar_arg_dtypes([None, np.int64] * 3)
    bufs = [cl.Buffer(d.ctx, cl.mem_flags.READ_WRITE, 4) for _ in range(3)]
    q = d.queue
    return lambda: k(q, (1,), (1,), bufs[0], 0, bufs[1], 0, bufs[2], 0)


def _host_cpu(fns: list, number: int, rounds: int) -> list[float]:
    """Median CPU time of this thread per call of each fn (``number`` calls a
    measurement, the fns in blocks as in ``_time``; the device drained before
    each measurement)."""
    import rtx_opencl

    def measure(fn) -> float:
        rtx_opencl.synchronize()
        t0 = time.thread_time()
        for _ in range(number):
            fn()
        return (time.thread_time() - t0) / number

    out = blocks([lambda fn=fn: measure(fn) for fn in fns], rounds)
    rtx_opencl.synchronize()
    return out


def _tiny_opencl(dev, d, rounds: int) -> None:
    """Table 4 of the OpenCL run: the cost of a tiny op against a bare PyOpenCL enqueue."""
    import rtx_opencl

    sync = rtx_opencl.synchronize
    quick = ARGS.quick
    one = np.ones(1, np.float32)
    r1 = rc.tensor(one, device=dev)
    c1 = rc.tensor(one)  # rtxcore's cpu backend, for the framework's own cost
    number = 500 if quick else 3000
    bare = _bare_enqueue(d)  # PyOpenCL alone: one add kernel enqueued through its invoker
    cases = [(bare, sync, None),                       # the floor: a bare PyOpenCL enqueue
             (lambda: r1 + r1, sync, None),            # back to back, one sync at the end
             (lambda: r1.exp(), sync, None),
             (lambda: r1.sum(), sync, None),
             (lambda: (r1 + r1, sync()), None, None),  # each op waited for
             (lambda: sync(), None, None),             # a sync on an idle queue
             (lambda: (r1 + r1).cpu(), None, None),    # op and read the result back
             (lambda: c1 + c1, None, None),
             (lambda: one + one, None, None)]
    if torch:
        t1 = torch.from_numpy(one)
        cases.append((lambda: t1 + t1, None, None))
    ts = _time_queued(cases, number, rounds)
    # the calling thread's CPU time per call of the enqueueing rows: the host's own
    # work, which waiting for a core on a busy machine doesn't inflate
    cpu = _host_cpu([c[0] for c in cases[:4]], number, rounds)
    names = ["bare PyOpenCL enqueue (1-element add kernel)",
             "opencl: add, enqueued back to back (per call)", "opencl: exp, back to back",
             "opencl: sum, back to back", "opencl: add + synchronize()",
             "opencl: synchronize() on an idle queue", "opencl: add + .cpu() (read 4 bytes)",
             "rtxcore cpu backend: add", "numpy: add"] + (["torch: add"] if torch else [])
    rows = [[nm, _fmt_time(t).strip(), _ratio(t, ts[8]), _ratio(t, ts[0]),
             _opt_time(cpu[i] if i < 4 else None), _ratio(cpu[i], cpu[0]) if i < 4 else "-"]
            for i, (nm, t) in enumerate(zip(names, ts))]
    _table([("1-element float32 op", 48), ("time per call", 16), ("vs numpy", 10), ("vs bare", 9),
            ("host CPU", 11), ("CPU vs bare", 12)], rows,
           "4. per-op overhead of a tiny op (budget: <= 2x a bare PyOpenCL enqueue; host CPU: the"
           " calling thread's CPU time per call)")


def _main_opencl(dev) -> int:
    import rtx_opencl
    import rtx_opencl.blas as BLAS
    import rtx_opencl.runtime as R

    d = R.device(dev.index or 0)
    sync = rtx_opencl.synchronize
    quick = ARGS.quick
    rounds = min(ARGS.rounds, 3) if quick else ARGS.rounds
    wall0 = time.perf_counter()
    c_start, s_start = d.compiles, d.compile_seconds
    print(f"rtxcore {rc.__version__} on {dev} ({d.name}, {d.platform}, {d.compute_units} compute units)"
          f" | numpy {np.__version__}"
          + (f" | torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else " | torch not installed")
          + f" | threads: {ARGS.threads or 'default'} | {_rounds_text(rounds)}"
          + (" | --quick" if quick else ""))
    print("OpenCL times: N calls enqueued back to back, then one synchronize(); outputs are fresh tensors."
          f" Load average at start: {os.getloadavg()[0]:.2f} (on a shared machine thread pools suffer first).")
    if ARGS.only == "tiny":
        _tiny_opencl(dev, d, rounds)
        return 0
    rng = np.random.default_rng(0)

    # 1. elementwise -----------------------------------------------------------------
    rows = []
    for label, shape, number in (("1M", (1024, 1024), 5 if quick else 20),
                                 ("16M", (4096, 4096), 2 if quick else 5)):
        a = rng.standard_normal(shape, dtype=np.float32)
        b = rng.standard_normal(shape, dtype=np.float32)
        ra, rb = rc.tensor(a, device=dev), rc.tensor(b, device=dev)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
        for op in ("add", "mul", "exp"):
            fn = OPS[op]
            cases = [(lambda: fn(a, b), None, None), (lambda: fn(ra, rb), sync, None)]
            if torch:
                cases.append((lambda: fn(ta, tb), None, None))
            t_np, t_rc, *t_th = _time_queued(cases, number, rounds)
            t_th = t_th[0] if t_th else None
            want = fn(a.astype(np.float64), b.astype(np.float64))
            check = _close(fn(ra, rb), want, 1e-5 * float(np.max(np.abs(want))))
            nbytes = a.nbytes * (2 if op == "exp" else 3)
            rows.append([label, op, _fmt_time(t_rc).strip(), _fmt_time(t_np).strip(), _opt_time(t_th),
                         _ratio(t_rc, t_np), _ratio(t_rc, t_th), f"{nbytes / t_rc / 1e9:.1f}", check])
        del ra, rb
    _table([("size", 7), ("op", 6), ("rtxcore", 12), ("numpy", 12), ("torch", 12), ("rc/np", 8),
            ("rc/torch", 10), ("rc GB/s", 9), ("check", 8)], rows,
           "1. elementwise, float32 (time per call; rc/np > 1 means slower than NumPy)")

    # 2. reductions ------------------------------------------------------------------
    rows = []
    n = 4096
    a = rng.standard_normal((n, n), dtype=np.float32)
    ra = rc.tensor(a, device=dev)
    ta = torch.from_numpy(a) if torch else None
    a64 = a.astype(np.float64)
    for what, fn, want, scale in (
            ("sum()", lambda x: x.sum(), a64.sum(), np.abs(a64).sum()),
            ("sum(-1)", lambda x: x.sum(-1), a64.sum(-1), np.abs(a64).sum(-1).max()),
            ("sum(0)", lambda x: x.sum(0), a64.sum(0), np.abs(a64).sum(0).max())):
        cases = [(lambda: fn(a), None, None), (lambda: fn(ra), sync, None)]
        if torch:
            cases.append((lambda: fn(ta), None, None))
        t_np, t_rc, *t_th = _time_queued(cases, 2 if quick else 5, rounds)
        t_th = t_th[0] if t_th else None
        check = _close(fn(ra), np.asarray(want), 1e-5 * float(scale))
        rows.append([f"{n}x{n}", what, _fmt_time(t_rc).strip(), _fmt_time(t_np).strip(), _opt_time(t_th),
                     _ratio(t_rc, t_np), _ratio(t_rc, t_th), f"{a.nbytes / t_rc / 1e9:.1f}", check])
    del ra
    _table([("shape", 11), ("op", 9), ("rtxcore", 12), ("numpy", 12), ("torch", 12), ("rc/np", 8),
            ("rc/torch", 10), ("rc GB/s", 9), ("check", 8)], rows,
           "2. reductions, float32 (time per call)")

    # 3. matmul ----------------------------------------------------------------------
    rows = []
    clblast = BLAS.available()
    for n in (256, 1024) if quick else (256, 1024, 2048):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        ra, rb = rc.tensor(a, device=dev), rc.tensor(b, device=dev)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
        own = {"RTX_OPENCL_MATMUL": ""}
        cases = [(lambda: a @ b, None, None), (lambda: ra @ rb, sync, own)]
        if clblast:
            cases.append((lambda: ra @ rb, sync, {"RTX_OPENCL_MATMUL": "clblast"}))
        if torch:
            cases.append((lambda: ta @ tb, None, None))
        number = 1 if n >= 1024 else (3 if quick else 10)
        ts = _time_queued(cases, number, min(rounds, 3) if n >= 2048 else rounds)
        t_np, t_rc = ts[0], ts[1]
        t_cb = ts[2] if clblast else None
        t_th = ts[-1] if torch else None
        want = a.astype(np.float64) @ b.astype(np.float64)
        tol = 1e-4 * float(np.max(np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)))
        check = _close(ra @ rb, want, tol)
        if clblast:
            os.environ["RTX_OPENCL_MATMUL"] = "clblast"
            try:
                check += "/" + _close(ra @ rb, want, tol)
            finally:
                os.environ.pop("RTX_OPENCL_MATMUL")
        gf = lambda t: "n/a" if t is None else f"{2 * n ** 3 / t / 1e9:.1f}"  # noqa: E731
        rows.append([f"{n}^3", gf(t_rc), gf(t_cb), gf(t_np), gf(t_th), _fmt_time(t_rc).strip(),
                     _ratio(t_rc, t_np), _ratio(t_cb, t_rc), check])
    _table([("n", 7), ("rc own", 9), ("clblast", 9), ("numpy", 9), ("torch", 9), ("rc own t", 12),
            ("own/np", 8), ("clb/own", 9), ("check own/clb", 15)], rows,
           "3. matmul, float32, GFLOP/s (higher is better; own/np and clb/own are time ratios)"
           + ("" if clblast else " -- pyclblast not importable: clblast n/a"))

    _tiny_opencl(dev, d, rounds)

    # 5. first-call compile time -------------------------------------------------------------
    x64 = rc.tensor(np.full((2, 3, 5, 7), 4.0), dtype=rc.float64, device=dev)
    sync()
    c0, s0 = d.compiles, d.compile_seconds
    t0 = time.perf_counter()
    x64.sqrt()
    sync()
    first = time.perf_counter() - t0
    c1_, s1_ = d.compiles, d.compile_seconds
    t0 = time.perf_counter()
    x64.sqrt()
    sync()
    warm = time.perf_counter() - t0
    rows = [["this process (float64 sqrt, new here)", _fmt_time(first).strip(), _fmt_time(warm).strip(),
             f"{(s1_ - s0) * 1e3:.1f} ms", str(c1_ - c0), "-"]]
    runs = 1 if quick else 3
    for what, env in (("child, on-disk caches as they are", {}),
                      ("child, caches bypassed (cold)", {"POCL_KERNEL_CACHE": "0", "PYOPENCL_NO_CACHE": "1"})):
        r = _cold_probe(str(dev), env, runs)
        if r is None:
            continue
        rows.append([what, _fmt_time(r["first"]).strip(), _fmt_time(r["warm"]).strip(),
                     f"{r['compile_s'] * 1e3:.1f} ms", str(r["compiles"]), _fmt_time(r["first_any"]).strip()])
    _table([("float64 sqrt, first call", 40), ("first call", 12), ("warm", 12), ("compiling", 12),
            ("builds", 8), ("1st kernel", 12)], rows,
           f"5. first-call (compile) time; children: median of {runs} processes; '1st kernel' is the first"
           " float32 add of the child (PoCL start-up included)")
    print("cold = env POCL_KERNEL_CACHE=0 (PoCL's ~/.cache/pocl) and PYOPENCL_NO_CACHE=1 (pyopencl's; on"
          " PoCL pyopencl already defers to the ICD's cache). Times include the wait for the result.")
    print(f"\nbackend counters for {dev}: compiles={d.compiles} compile_seconds={d.compile_seconds:.2f}"
          f" ({d.compiles - c_start} builds, {d.compile_seconds - s_start:.2f} s in this run)"
          f" | run took {time.perf_counter() - wall0:.1f} s | load average now {os.getloadavg()[0]:.2f}")
    return 0


# -- CUDA --------------------------------------------------------------------------------
#
# rtxcore's cuda kernels are CuPy calls on views of our buffers, so the question is
# what the framework costs on top of the same CuPy call: each row times rtxcore and
# CuPy's own function on the same data, N calls then one synchronize().


def _main_cuda(dev) -> int:
    import cupy as cp

    idx = dev.index or 0
    quick = ARGS.quick
    rounds = min(ARGS.rounds, 3) if quick else ARGS.rounds

    def sync() -> None:
        cp.cuda.Device(idx).synchronize()

    props = cp.cuda.runtime.getDeviceProperties(idx)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"rtxcore {rc.__version__} on {dev} ({name}, sm_{props['major']}{props['minor']}) | "
          f"cupy {cp.__version__} | numpy {np.__version__} | {_rounds_text(rounds)}"
          + (" | --quick" if quick else ""))
    print("times: N calls enqueued back to back, then one synchronize(); outputs are fresh arrays")
    rows = []
    with cp.cuda.Device(idx):
        # 1. elementwise
        for label, n in (("16M", 1 << 24), ("256M", 1 << 28)):
            a = cp.random.standard_normal(n, dtype=cp.float32)
            b = cp.random.standard_normal(n, dtype=cp.float32)
            ra, rb = rc.from_dlpack(a), rc.from_dlpack(b)
            for op, own in (("add", lambda: cp.add(a, b)), ("mul", lambda: cp.multiply(a, b)),
                            ("exp", lambda: cp.exp(a))):
                fn = OPS[op]
                number = 10 if label == "16M" else 3
                t_cp, t_rc = _time_queued([(own, sync, None), (lambda: fn(ra, rb), sync, None)],
                                          number, rounds)
                check = "ok" if bool(cp.allclose(cp.from_dlpack(fn(ra, rb)), own(), rtol=1e-6)) else "BAD"
                nbytes = a.nbytes * (2 if op == "exp" else 3)
                rows.append([label, op, _fmt_time(t_rc).strip(), _fmt_time(t_cp).strip(),
                             f"{t_cp / t_rc:.2f}", f"{nbytes / t_rc / 1e9:.0f}", check])
        # 2. reductions
        m = 1 << 14
        a = cp.random.standard_normal((m, m), dtype=cp.float32)
        ra = rc.from_dlpack(a)
        for what, own, mine in (("sum()", lambda: a.sum(), lambda: ra.sum()),
                                ("sum(-1)", lambda: a.sum(-1), lambda: ra.sum(-1)),
                                ("sum(0)", lambda: a.sum(0), lambda: ra.sum(0)),
                                ("max(-1)", lambda: a.max(-1), lambda: ra.amax(-1))):
            t_cp, t_rc = _time_queued([(own, sync, None), (mine, sync, None)], 5, rounds)
            check = "ok" if bool(cp.allclose(cp.from_dlpack(mine()), own(), rtol=1e-4, atol=1e-2)) else "BAD"
            rows.append([f"{m}^2", what, _fmt_time(t_rc).strip(), _fmt_time(t_cp).strip(),
                         f"{t_cp / t_rc:.2f}", f"{a.nbytes / t_rc / 1e9:.0f}", check])
        _table([("size", 7), ("op", 9), ("rtxcore", 12), ("cupy", 12), ("rc/cupy thr", 12),
                ("rc GB/s", 9), ("check", 7)], rows,
               "1. elementwise and reductions, float32 (rc/cupy thr = rtxcore's throughput as a "
               "fraction of CuPy's; budget >= 0.9)")
        # 3. matmul
        rows = []
        for n in (1024, 4096) if quick else (1024, 4096, 8192):
            a = cp.random.standard_normal((n, n), dtype=cp.float32)
            b = cp.random.standard_normal((n, n), dtype=cp.float32)
            ra, rb = rc.from_dlpack(a), rc.from_dlpack(b)
            t_cp, t_rc = _time_queued([(lambda: a @ b, sync, None), (lambda: ra @ rb, sync, None)],
                                      10 if n <= 4096 else 3, rounds)
            check = "ok" if bool(cp.allclose(cp.from_dlpack(ra @ rb), a @ b, rtol=1e-3, atol=1e-2)) else "BAD"
            tf = lambda t: f"{2 * n ** 3 / t / 1e12:.1f}"  # noqa: E731
            rows.append([f"{n}^3", tf(t_rc), tf(t_cp), f"{t_cp / t_rc:.2f}", check])
        _table([("n", 7), ("rc TFLOP/s", 11), ("cupy", 9), ("rc/cupy", 9), ("check", 7)], rows,
               "2. matmul, float32 (cuBLAS through CuPy; full float32: CuPy uses TF32 "
               "only with CUPY_TF32=1)")
        # 4. a tiny op: the framework's cost per call
        one = cp.ones(1, cp.float32)
        r1 = rc.from_dlpack(one)
        t_cp, t_rc, t_sync = _time_queued([(lambda: one + one, sync, None), (lambda: r1 + r1, sync, None),
                                           (sync, None, None)], 2000, rounds)
        _table([("1-element float32 add", 34), ("time per call", 15), ("vs cupy", 9)],
               [["cupy", _fmt_time(t_cp).strip(), "1.00"], ["rtxcore", _fmt_time(t_rc).strip(),
                                                            f"{t_rc / t_cp:.2f}"],
                ["synchronize() on an idle device", _fmt_time(t_sync).strip(), f"{t_sync / t_cp:.2f}"]],
               "3. per-op overhead of a tiny op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
