"""Per-op time of rtxcore against NumPy and PyTorch, in one run.

    python benchmarks/ops.py                 # all sizes, default threads
    python benchmarks/ops.py --threads 1     # single-threaded BLAS/OpenMP everywhere
    python benchmarks/ops.py --device cpu --rounds 7 --quick

For each op and size it prints the median over several rounds of the time per
call, and the ratios rtxcore/NumPy and rtxcore/PyTorch (lower is better for us;
1.00 is parity). "overhead" is rtxcore's time minus NumPy's: the framework's cost
per op. PyTorch columns appear when torch is importable.

This machine is shared and noisy: read ratios, not absolute times, and rerun.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None, help="limit BLAS/OpenMP threads (e.g. 1)")
    p.add_argument("--device", default="cpu", help="rtxcore device to measure (default cpu)")
    p.add_argument("--rounds", type=int, default=7, help="rounds per measurement (median is shown)")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    return p.parse_args()


ARGS = _parse()
if ARGS.threads:
    # must happen before numpy / torch load their thread pools
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402

try:
    if ARGS.no_torch:
        raise ImportError
    import torch  # noqa: E402

    if ARGS.threads:
        torch.set_num_threads(ARGS.threads)
except ImportError:
    torch = None


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
    "view+reduce": lambda x, y: x.T[::2].sum(0),
}


def _time(fns: list, number: int, rounds: int) -> list[float]:
    """Median time per call of each function. Rounds are interleaved (a round
    of each in turn) so that the machine's drift hits all of them alike."""
    for fn in fns:
        fn()  # warm up (first-call costs: lazy loading, caches)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            times[i].append(timeit.timeit(fn, number=number) / number)
    return [statistics.median(t) for t in times]


def _fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:8.2f} us"
    return f"{s * 1e3:8.3f} ms"


def main() -> int:
    dev = rc.device(ARGS.device)
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
          + f" | threads: {ARGS.threads or 'default'} | median of {ARGS.rounds} rounds")
    head = f"{'size':<16}{'op':<13}{'rtxcore':>12}{'numpy':>12}"
    head += f"{'torch':>12}" if torch else ""
    head += f"{'rc/np':>8}" + (f"{'rc/torch':>10}" if torch else "") + f"{'overhead':>12}"
    print(head)
    print("-" * len(head))
    for label, op, t_rc, t_np, t_th in rows:
        line = f"{label:<16}{op:<13}{_fmt_time(t_rc):>12}{_fmt_time(t_np):>12}"
        if torch:
            line += f"{_fmt_time(t_th):>12}"
        line += f"{t_rc / t_np:>8.2f}"
        if torch:
            line += f"{t_rc / t_th:>10.2f}"
        line += f"{(t_rc - t_np) * 1e6:>9.2f} us"
        print(line)
    print()
    print("rc/np: rtxcore time / NumPy time (large ops: <= 1.05 means >= 0.95x NumPy's throughput)")
    print("rc/torch: rtxcore time / PyTorch eager time (tiny ops: budget <= 1.5, goal <= 1.0)")
    return 0


def _sync(x):
    # cpu results are ready when the call returns; other backends may queue work
    if ARGS.device != "cpu":
        x.cpu()
    return x


if __name__ == "__main__":
    sys.exit(main())
