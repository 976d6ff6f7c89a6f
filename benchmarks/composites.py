"""Time per call of the cpu composites that run in blocks over threads, against PyTorch.

    python benchmarks/composites.py               # default threads
    python benchmarks/composites.py --threads 1   # one thread everywhere
    python benchmarks/composites.py --rounds 15 --quick

For (64, 128) and (4096, 1024) float32, forward alone and forward + backward of
``F.softmax``, ``F.log_softmax`` (last dim), ``F.cross_entropy`` (class indices,
mean), ``F.gelu`` and ``F.gelu(approximate="tanh")``, it prints the median (or
``--stat min``) time per call of rtxcore with rtx_cpu's blocked kernels, of
rtxcore with the whole-array steps they replace for the softmax family (the array-module
``softmax``/``log_softmax`` kernels, the core's backward formulas: the kernels
taken out of the table for those calls; ``-`` for GELU, whose whole-array
kernel is gone) and of PyTorch eager, the rounds of all three interleaved; and
the ratios blocked / whole-array and blocked / PyTorch.

The machine may be shared and noisy: read ratios, not absolute times, and rerun.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

from _setup import import_torch, limit_threads  # (benchmarks/_setup.py)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None, help="threads for rtxcore, PyTorch, BLAS")
    p.add_argument("--rounds", type=int, default=9, help="rounds per measurement (median shown)")
    p.add_argument("--stat", choices=("median", "min"), default="median",
                   help="of the rounds: median (default), or min on a busy machine")
    p.add_argument("--quick", action="store_true", help="fewer calls per round (a smoke run)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    return p.parse_args()


ARGS = _parse()
limit_threads(ARGS.threads)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402
import rtxcore.nn.functional as F  # noqa: E402
from rtxcore.dispatch import xp  # noqa: E402
from rtxcore.ops.core import ready_device  # noqa: E402

torch = import_torch(ARGS.no_torch, None)
TF = torch.nn.functional if torch is not None else None

if ARGS.threads:
    rc.set_num_threads(ARGS.threads)
    if torch is not None:
        torch.set_num_threads(ARGS.threads)

SHAPES = [(64, 128), (4096, 1024)]
STAT = min if ARGS.stat == "min" else statistics.median
_BLOCKED = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")


class _Table:
    """Switches the cpu kernel table between the blocked kernels and the
    whole-array steps (the array-module kernels; no backward kernels)."""

    def __init__(self) -> None:
        self.kernels = ready_device("cpu").kernels
        self.blocked = {k: self.kernels[k] for k in _BLOCKED if k in self.kernels}
        base = xp.kernels(np)
        self.whole = {"softmax": base["softmax"], "log_softmax": base["log_softmax"]}

    def use(self, blocked: bool) -> None:
        for k in _BLOCKED:
            self.kernels.pop(k, None)
        self.kernels.update(self.blocked if blocked else self.whole)


def _cases(shape: tuple[int, int]) -> list[tuple[str, object, object, bool]]:
    """(name, rtxcore call, PyTorch call or None, has a whole-array side)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    t = rng.integers(0, shape[1], shape[0])
    rx, rg, rt = rc.from_numpy(x), rc.from_numpy(g), rc.from_numpy(t)
    gx = rc.from_numpy(x.copy()).requires_grad_()
    fns = [("softmax", lambda a: F.softmax(a, -1), lambda a: TF.softmax(a, -1), True),
           ("log_softmax", lambda a: F.log_softmax(a, -1), lambda a: TF.log_softmax(a, -1), True),
           ("gelu", F.gelu, lambda a: TF.gelu(a), False),
           ("gelu tanh", lambda a: F.gelu(a, approximate="tanh"),
            lambda a: TF.gelu(a, approximate="tanh"), False)]
    if torch is not None:
        tx, tg, tt = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(t)
        sx = torch.from_numpy(x.copy()).requires_grad_()

    def both(f, a, gr):  # forward + backward with a fresh gradient
        a.grad = None
        f(a).backward(gr)

    out = []
    for name, ours, theirs, whole in fns:
        out.append((f"{name} fwd", lambda f=ours: f(rx),
                    (lambda f=theirs: f(tx)) if torch else None, whole))
        out.append((f"{name} fwd+bwd", lambda f=ours: both(f, gx, rg),
                    (lambda f=theirs: both(f, sx, tg)) if torch else None, whole))
    out.append(("cross_entropy fwd", lambda: F.cross_entropy(rx, rt),
                (lambda: TF.cross_entropy(tx, tt)) if torch else None, True))
    out.append(("cross_entropy fwd+bwd", lambda: both(lambda a: F.cross_entropy(a, rt), gx, None),
                (lambda: both(lambda a: TF.cross_entropy(a, tt), sx, None)) if torch else None,
                True))
    return out


def _fmt(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def main() -> None:
    table = _Table()
    print(f"cpu composites, float32 | threads: rtxcore {rc.get_num_threads()}"
          + (f", torch {torch.get_num_threads()}" if torch else "")
          + f" | {ARGS.stat} of {ARGS.rounds} interleaved rounds")
    head = (f"{'case':<34}{'blocked':>12}{'whole-array':>13}{'torch':>12}"
            f"{'blk/whole':>11}{'blk/torch':>11}")
    print(head)
    print("-" * len(head))
    for shape in SHAPES:
        large = shape[0] * shape[1] >= 1 << 20
        number = (2 if ARGS.quick else 10) if large else (50 if ARGS.quick else 500)
        for name, ours, theirs, whole in _cases(shape):
            sides = [lambda f=ours: (table.use(True), f())]
            if whole:
                sides.append(lambda f=ours: (table.use(False), f()))
            if theirs is not None:
                sides.append(theirs)
            for f in sides:
                f()  # (warm up)
            times: list[list[float]] = [[] for _ in sides]
            for _ in range(ARGS.rounds):
                for i, f in enumerate(sides):
                    times[i].append(timeit.timeit(f, number=number) / number)
            med = [STAT(t) for t in times]
            t_blk = med[0]
            t_whole = med[1] if whole else None
            t_torch = med[-1] if theirs is not None else None
            print(f"{'x'.join(map(str, shape)) + ' ' + name:<34}{_fmt(t_blk):>12}"
                  f"{_fmt(t_whole):>13}{_fmt(t_torch):>12}{_ratio(t_blk, t_whole):>11}"
                  f"{_ratio(t_blk, t_torch):>11}")
        table.use(True)
    print()
    print("blocked: rtx_cpu's kernels; whole-array: the steps they replace, same values")
    print("(softmax family; GELU's whole-array kernel is gone); blk/torch: lower is better")


if __name__ == "__main__":
    main()
