"""Autograd overhead of rtxcore against PyTorch (and hand-written NumPy), in one run.

    python benchmarks/autograd.py            # everything
    python benchmarks/autograd.py --quick    # a smoke run

Three tables:

1. tiny forward+backward: ``(a*b + a).sum().backward()`` on 3-element float32
   tensors (NumPy column: the same forward and gradients written by hand);
2. a 10,000-op chain ``y = y * c`` (alternating with ``y + c``), forward and
   backward timed separately, per op;
3. backward cost per node at 1k, 10k and 100k nodes (flat = linear backward).

Medians over interleaved rounds; ratios are rtxcore/PyTorch (lower is better,
1.00 is parity). This machine is shared and noisy: read ratios, rerun.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7, help="rounds per measurement (median shown)")
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    p.add_argument("--device", default="cpu", help="rtxcore device (default cpu)")
    return p.parse_args()


ARGS = _parse()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")  # tiny tensors: threads only add noise

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402

try:
    if ARGS.no_torch:
        raise ImportError
    import torch  # noqa: E402

    torch.set_num_threads(1)
except ImportError:
    torch = None


def _best_per_call(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def interleaved(cases: dict, number: int, rounds: int) -> dict:
    """Median seconds per call of each case, rounds interleaved across cases."""
    samples: dict = {k: [] for k in cases}
    for fn in cases.values():  # warm up
        fn()
    for _ in range(rounds):
        for k, fn in cases.items():
            gc.collect()
            samples[k].append(_best_per_call(fn, number))
    return {k: statistics.median(v) for k, v in samples.items()}


def fmt_us(s: float) -> str:
    return f"{s * 1e6:9.2f} us"


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n## {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


# -- 1. tiny forward+backward ------------------------------------------------------------


def tiny() -> None:
    dev = ARGS.device
    a = rc.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
    b = rc.tensor([4.0, 5.0, 6.0], device=dev, requires_grad=True)

    def rtx() -> None:
        a.grad = None
        b.grad = None
        (a * b + a).sum().backward()

    an = np.array([1.0, 2.0, 3.0], np.float32)
    bn = np.array([4.0, 5.0, 6.0], np.float32)

    def numpy_by_hand() -> None:
        _ = (an * bn + an).sum()
        g = np.ones_like(an)
        _ga, _gb = g * bn + g, g * an

    cases = {"rtxcore": rtx, "numpy (by hand)": numpy_by_hand}
    if torch is not None:
        at = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        bt = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)

        def pt() -> None:
            at.grad = None
            bt.grad = None
            (at * bt + at).sum().backward()

        cases["pytorch"] = pt
    n = 200 if ARGS.quick else 2000
    res = interleaved(cases, n, ARGS.rounds)
    rows = [[k, fmt_us(v)] for k, v in res.items()]
    if torch is not None:
        rows.append(["rtxcore / pytorch", f"{res['rtxcore'] / res['pytorch']:.2f}x"])
    table("tiny forward+backward: (a*b + a).sum().backward(), 3 elements", ["", "time"], rows)


# -- 2. a deep chain -----------------------------------------------------------------------


def _chain_rtx(n: int):
    return _chain(rc.tensor([1.0], device=ARGS.device, requires_grad=True), n)


def _chain_torch(n: int):
    return _chain(torch.tensor([1.0], requires_grad=True), n)


def _chain(x, n: int):
    """A leaf and the forward of an ``n``-op chain from it (any library)."""

    def forward():
        y = x
        for i in range(n):
            y = y * 1.0000001 if i % 2 == 0 else y + 1e-7
        return y.sum()

    return x, forward


def _one_chain(x, forward, n: int) -> tuple[float, float]:
    gc.collect()
    x.grad = None
    t0 = time.perf_counter()
    y = forward()
    t1 = time.perf_counter()
    y.backward()
    t2 = time.perf_counter()
    return (t1 - t0) / n, (t2 - t1) / n


def _chains(n: int, rounds: int) -> dict:
    """Median (forward per op, backward per node) per library, rounds interleaved."""
    libs = {"rtxcore": _chain_rtx(n)}
    if torch is not None:
        libs["pytorch"] = _chain_torch(n)
    samples: dict = {k: ([], []) for k in libs}
    for _ in range(rounds):
        for k, (x, forward) in libs.items():
            f, b = _one_chain(x, forward, n)
            samples[k][0].append(f)
            samples[k][1].append(b)
    return {k: (statistics.median(f), statistics.median(b)) for k, (f, b) in samples.items()}


def chain() -> None:
    n = 2000 if ARGS.quick else 10000
    res = _chains(n, 3 if ARGS.quick else ARGS.rounds)
    rows = [[k, fmt_us(f), fmt_us(b)] for k, (f, b) in res.items()]
    if torch is not None:
        (rf, rb), (pf, pb) = res["rtxcore"], res["pytorch"]
        rows.append(["rtxcore / pytorch", f"{rf / pf:.2f}x", f"{rb / pb:.2f}x"])
    table(f"a {n:,}-op chain (y*c, y+c alternating), per op", ["", "forward", "backward"], rows)


def scaling() -> None:
    sizes = [1000, 10000] if ARGS.quick else [1000, 10000, 100000]
    rows = []
    for n in sizes:
        res = _chains(n, 3 if n >= 100000 else ARGS.rounds)
        rb = res["rtxcore"][1]
        row = [f"{n:,}", fmt_us(rb)]
        if torch is not None:
            pb = res["pytorch"][1]
            row += [fmt_us(pb), f"{rb / pb:.2f}x"]
        rows.append(row)
    header = ["nodes", "rtxcore backward/node"] + (["pytorch backward/node", "ratio"] if torch is not None else [])
    table("backward cost per node (flat = linear in graph size)", header, rows)


def main() -> None:
    print(f"rtxcore {rc.__version__} on {ARGS.device}; numpy {np.__version__}; "
          f"torch {torch.__version__ if torch is not None else '(not installed)'}; python {sys.version.split()[0]}")
    tiny()
    chain()
    scaling()


if __name__ == "__main__":
    main()
