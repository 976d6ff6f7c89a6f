"""Time per element of the cpu kernels models use, on special inputs, against NumPy and PyTorch.

    python benchmarks/kernel_inputs.py                  # every kernel, every input class
    python benchmarks/kernel_inputs.py --only pow,exp   # kernels whose name starts so
    python benchmarks/kernel_inputs.py --ab             # the pow kernel before/after alone
    python benchmarks/kernel_inputs.py --threads 1 --rounds 9 --n 131072

A kernel's time can depend on the values it is given: libm and SIMD math
libraries take slow paths for some inputs (NumPy's ``power`` with a negative
base took 150 ns an element against 1 ns for a positive one), and arithmetic on
subnormals can be many times slower than on normal numbers. For every
elementwise op, reduction and composite a model calls on cpu (unary math,
activations, ``pow`` with the exponents models write, binary arithmetic, row
reductions, softmax, layer_norm, and forward + backward of a few), this times
rtxcore's front-end, NumPy's equivalent (the textbook formula where NumPy has
no function; ``-`` where it has none at all) and PyTorch's (when importable),
on ``--n`` float32 elements (reductions: rows of 512) of each input class:

  normal     standard normal values
  negative   -|standard normal|
  subnormal  standard normal * 1e-40 (float32 subnormals)
  nan/inf    NaN, inf and -inf mixed
  huge       standard normal * 1e30
  tiny       standard normal * 1e-30

and prints nanoseconds per element, the median of ``--rounds`` rounds taken in
turn (rtxcore, NumPy, PyTorch, round after round). A cell marked ``!`` is 10x
or more its row's time on normal values; the rtxcore outliers are listed at the
end with their ratios to the normal class and to NumPy on the same input.

``--ab`` (also printed after the main table) times rtx_cpu's ``pow`` kernel
against the shared NumPy kernel it replaced (``rtxcore.dispatch.xp``:
``np.power`` plus C's rule for integers), called directly on the same arrays in
alternating rounds, for each scalar exponent, input class and float dtype.

The machine may be shared and noisy: read ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable

from _setup import import_torch, limit_threads  # (benchmarks/_setup.py)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=131072, help="elements per input (default 131072)")
    p.add_argument("--rounds", type=int, default=7, help="rounds per measurement (median shown)")
    p.add_argument("--stat", choices=("median", "min"), default="median",
                   help="of the rounds: median (default), or min on a busy machine")
    p.add_argument("--threads", type=int, default=None, help="threads for rtxcore, PyTorch, BLAS")
    p.add_argument("--only", default=None, help="comma-separated kernel name prefixes")
    p.add_argument("--ab", action="store_true", help="only the pow kernel before/after table")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    return p.parse_args()


ARGS = _parse()
limit_threads(ARGS.threads)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402
import rtxcore.nn.functional as F  # noqa: E402

torch = import_torch(ARGS.no_torch, None)
TF = torch.nn.functional if torch is not None else None

if ARGS.threads:
    rc.set_num_threads(ARGS.threads)
    if torch is not None:
        torch.set_num_threads(ARGS.threads)

np.seterr(all="ignore")
COLS = 512  # row length of the reductions


def _classes(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    z = rng.standard_normal(n)
    specials = rng.choice(np.array([np.nan, np.inf, -np.inf]), n)
    return {name: a.astype(np.float32) for name, a in (
        ("normal", z), ("negative", -np.abs(z)), ("subnormal", z * 1e-40),
        ("nan/inf", specials), ("huge", z * 1e30), ("tiny", z * 1e-30))}


# -- the kernels: name -> (rtxcore, NumPy or None, PyTorch) callables of one array.
# A second operand, where there is one, is the normal class's array (``other``).

def _np_gelu_tanh(x: np.ndarray) -> np.ndarray:
    c, k = np.float32(0.7978845608), np.float32(0.044715)
    return 0.5 * x * (1 + np.tanh(c * (x + k * x * x * x)))


def _np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_log_softmax(x: np.ndarray) -> np.ndarray:
    s = x - x.max(-1, keepdims=True)
    return s - np.log(np.exp(s).sum(-1, keepdims=True))


def _np_layer_norm(x: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + np.float32(1e-5))


def _kernels() -> dict[str, tuple[Callable, Callable | None, Callable | None, str]]:
    """name -> (rtxcore fn, NumPy fn, PyTorch fn, kind); kind is "elem",
    "rows" (the input as (n / 512, 512)), "bin" (a second operand) or "grad"
    (forward and backward: rtxcore and PyTorch only)."""
    T, t = rc, torch
    k: dict[str, tuple[Any, Any, Any, str]] = {}

    def add(name: str, r: Any, n: Any, p: Any, kind: str = "elem") -> None:
        k[name] = (r, n, p if t is not None else None, kind)

    for op in ("neg", "abs", "exp", "log", "sqrt", "reciprocal", "sin", "cos", "tanh",
               "expm1", "log1p", "sign", "floor"):
        add(op, getattr(T, op), getattr(np, {"neg": "negative"}.get(op, op)),
            getattr(t, op, None))
    add("rsqrt", T.rsqrt, lambda x: 1 / np.sqrt(x), getattr(t, "rsqrt", None))
    add("sigmoid", T.sigmoid, lambda x: 1 / (1 + np.exp(-x)), getattr(t, "sigmoid", None))
    add("erf", T.erf, None, getattr(t, "erf", None))
    add("relu", F.relu, lambda x: np.maximum(x, 0), TF and TF.relu)
    add("silu", F.silu, lambda x: x / (1 + np.exp(-x)), TF and TF.silu)
    add("softplus", F.softplus, lambda x: np.logaddexp(0, x), TF and TF.softplus)
    add("gelu", F.gelu, None, TF and TF.gelu)
    add("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), _np_gelu_tanh,
        TF and (lambda x: TF.gelu(x, approximate="tanh")))
    for e in (2, 3, 4, -1, -2, 0.5, -0.5, 1.5, 2.5, 7):
        add(f"pow{e:g}", lambda x, e=e: x ** e, lambda x, e=e: np.power(x, np.float32(e)),
            lambda x, e=e: x ** e)
    add("pow3.0 (rc.pow)", lambda x: T.pow(x, 3.0), lambda x: np.power(x, np.float32(3.0)),
        t and (lambda x: t.pow(x, 3.0)))
    for op, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                  ("div", np.divide), ("maximum", np.maximum)):
        add(f"{op}(x, y)", getattr(T, op), f, getattr(t, op, None), "bin")
    add("div(y, x)", lambda x, y: T.div(y, x), lambda x, y: np.divide(y, x),
        t and (lambda x, y: t.div(y, x)), "bin")
    add("clamp", lambda x: T.clamp(x, -1.0, 1.0), lambda x: np.clip(x, -1, 1),
        t and (lambda x: t.clamp(x, -1.0, 1.0)))
    add("sum(all)", lambda x: x.sum(), np.sum, t and (lambda x: x.sum()), "rows")
    for op in ("sum", "mean", "amax", "argmax", "var"):
        add(f"{op}(-1)", lambda x, op=op: getattr(x, op)(-1),
            lambda x, op=op: getattr(np, op)(x, -1), t and (lambda x, op=op: getattr(x, op)(-1)),
            "rows")
    add("logsumexp(-1)", lambda x: T.logsumexp(x, -1),
        lambda x: np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1),
        t and (lambda x: t.logsumexp(x, -1)), "rows")
    add("softmax(-1)", lambda x: F.softmax(x, -1), _np_softmax,
        TF and (lambda x: TF.softmax(x, -1)), "rows")
    add("log_softmax(-1)", lambda x: F.log_softmax(x, -1), _np_log_softmax,
        TF and (lambda x: TF.log_softmax(x, -1)), "rows")
    add("layer_norm", lambda x: F.layer_norm(x, (COLS,)), _np_layer_norm,
        TF and (lambda x: TF.layer_norm(x, (COLS,))), "rows")
    add("norm", lambda x: x.norm(), np.linalg.norm, t and (lambda x: x.norm()), "rows")
    # forward + backward (the backward kernels: pow's 3 * x**2, tanh's, gelu's, ...)
    for name, fr, fp in (
            ("pow3 fwd+bwd", lambda x: x ** 3, lambda x: x ** 3),
            ("pow0.5 fwd+bwd", lambda x: x ** 0.5, lambda x: x ** 0.5),
            ("tanh fwd+bwd", rc.tanh, t and t.tanh),
            ("sigmoid fwd+bwd", rc.sigmoid, t and t.sigmoid),
            ("gelu fwd+bwd", F.gelu, TF and TF.gelu),
            ("gelu_tanh fwd+bwd", lambda x: F.gelu(x, approximate="tanh"),
             TF and (lambda x: TF.gelu(x, approximate="tanh"))),
            ("softmax fwd+bwd", lambda x: F.softmax(x.reshape(-1, COLS), -1).reshape(-1),
             TF and (lambda x: TF.softmax(x.reshape(-1, COLS), -1).reshape(-1)))):
        add(name, fr, None, fp, "grad")
    return k


# -- timing


def _calls(fn: Callable[[], Any]) -> int:
    """Calls per round: about 1 ms of work, at least one."""
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    return max(1, min(200, int(1e-3 / max(dt, 1e-7))))


def _median_times(fns: list[Callable[[], Any] | None], rounds: int) -> list[float | None]:
    """Seconds per call of each function, rounds of each in turn, medians
    (or minima: ``--stat``)."""
    live = [f for f in fns if f is not None]
    for f in live:
        f()  # warm up
    number = [_calls(f) for f in live]
    times: list[list[float]] = [[] for _ in live]
    for _ in range(rounds):
        for i, f in enumerate(live):
            t0 = time.perf_counter()
            for _ in range(number[i]):
                f()
            times[i].append((time.perf_counter() - t0) / number[i])
    stat = min if ARGS.stat == "min" else statistics.median
    med = iter(stat(t) for t in times)
    return [next(med) if f is not None else None for f in fns]


def _bind(kind: str, r: Any, n: Any, p: Any, a: np.ndarray, other: np.ndarray) -> list[Any]:
    """The three zero-argument calls of one kernel on array ``a``."""
    if kind == "rows":
        a, other = a.reshape(-1, COLS), other.reshape(-1, COLS)
    ra, rb = rc.tensor(a), rc.tensor(other)
    ta = tb = None
    if torch is not None:
        ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(other.copy())
    if kind == "grad":
        ra.requires_grad_(True)
        g = rc.ones(a.shape)

        def rgrad() -> Any:
            return rc.autograd.grad(r(ra), ra, g)

        pgrad = None
        if p is not None:
            ta.requires_grad_(True)
            tg = torch.ones(a.shape)

            def pgrad() -> Any:
                return torch.autograd.grad(p(ta), ta, tg)
        return [rgrad, None, pgrad]
    if kind == "bin":
        return [lambda: r(ra, rb), n and (lambda: n(a, other)), p and (lambda: p(ta, tb))]
    return [lambda: r(ra), n and (lambda: n(a)), p and (lambda: p(ta))]


def _cell(v: float | None, base: float | None) -> str:
    if v is None:
        return f"{'-':>10}"
    mark = "!" if base and v >= 10 * base else " "
    return f"{v:9.2f}{mark}"


def main_table(classes: dict[str, np.ndarray]) -> list[tuple[str, str, float, float, float | None]]:
    kernels = _kernels()
    if ARGS.only:
        want = tuple(ARGS.only.split(","))
        kernels = {k: v for k, v in kernels.items() if k.startswith(want)}
    other = classes["normal"][::-1].copy()
    impls = ["rtxcore", "numpy"] + (["torch"] if torch is not None else [])
    print(f"ns per element, {ARGS.n} float32 elements (rows of {COLS} for reductions), "
          f"{ARGS.stat} of {ARGS.rounds} interleaved rounds; ! = 10x or more the normal class")
    print(f"{'kernel':<20}{'impl':<9}" + "".join(f"{c:>10}" for c in classes))
    outliers = []
    for name, (r, n, p, kind) in kernels.items():
        per: dict[str, list[float | None]] = {i: [] for i in impls}
        for a in classes.values():
            ts = _median_times(_bind(kind, r, n, p, a, other), ARGS.rounds)
            for i, v in zip(impls, ts):
                per[i].append(None if v is None else v / a.size * 1e9)
        for j, impl in enumerate(impls):
            base = per[impl][0]
            if all(v is None for v in per[impl]):
                continue
            cells = "".join(_cell(v, base) for v in per[impl])
            print(f"{name if j == 0 else '':<20}{impl:<9}{cells}")
        base = per["rtxcore"][0]
        for c, v, nv in zip(classes, per["rtxcore"], per["numpy"]):
            if base and v is not None and v >= 10 * base:
                outliers.append((name, c, v, v / base, None if nv is None else v / nv))
    return outliers


def ab_table(classes: dict[str, np.ndarray]) -> None:
    """rtx_cpu's pow kernel against the NumPy kernel it replaced, same arrays."""
    from rtx_cpu.kernels import KERNELS
    from rtxcore.dispatch import xp

    new, old = KERNELS["pow"], xp.kernels(np)["pow"]
    exps = (2.0, 3.0, 4.0, -1.0, -2.0, 0.5, -0.5, 1.5, 2.5, 7.0, -3.0)
    print(f"\npow kernel, before (np.power) / after (rtx_cpu.pow_kernels): ns per element, "
          f"{ARGS.n} elements, {ARGS.stat} of {ARGS.rounds} alternating rounds")
    print(f"{'dtype':<8}{'exponent':>9}  " + "".join(f"{c:>22}" for c in classes))
    ratios: dict[str, list[float]] = {}
    for dt in (np.float32, np.float64, np.float16):
        for e in exps:
            cells = []
            for c, a in classes.items():
                x = a.astype(dt)
                o1, o2 = np.empty_like(x), np.empty_like(x)
                t_old, t_new = _median_times([lambda: old(o1, x, e), lambda: new(o2, x, e)],
                                             ARGS.rounds)
                r = t_old / t_new
                ratios.setdefault(c, []).append(r)
                cells.append(f"{t_old / x.size * 1e9:7.2f}->{t_new / x.size * 1e9:6.2f} {r:5.0f}x")
            print(f"{np.dtype(dt).name:<8}{e:>9g}  " + "".join(f"{s:>22}" for s in cells))
    print("geomean speed-up by class: " + ", ".join(
        f"{c} {statistics.geometric_mean(v):.1f}x" for c, v in ratios.items()))


def main() -> int:
    classes = _classes(ARGS.n - ARGS.n % COLS)
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else '-'}, "
          f"rtxcore threads {rc.get_num_threads()}")
    if not ARGS.ab:
        outliers = main_table(classes)
        print("\nrtxcore cells 10x or more their kernel's normal-values time "
              "(ns/element, x normal, x NumPy on the same input):")
        for name, c, v, rb, rn in outliers:
            print(f"  {name:<20}{c:<10}{v:9.2f}{rb:7.1f}x" + (f"{rn:7.2f}x" if rn else "      -"))
        if not outliers:
            print("  none")
    if not ARGS.only or ARGS.ab or any(p.startswith("pow") for p in ARGS.only.split(",")):
        ab_table(classes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
