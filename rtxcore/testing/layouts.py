"""Every primitive on every dtype a device claims, on every layout a kernel must
handle, against the CPU backend.

A case builds the same inputs on the device under test and on ``cpu`` (through
the core, so both get the same strides and offsets), runs the op on both and
compares. Where the core itself refuses a combination (``-x`` on bool, ``max``
of nothing, writing through a broadcast) the CPU raises too and the case is
not applicable. Layouts:

    contiguous   a fresh tensor
    transposed   .t() of a contiguous one (strides reversed)
    sliced       every other column of a wider tensor (a step in the strides)
    offset       rows 1.. of a taller tensor (a storage offset)
    broadcast    one row expanded to all (a stride-0 dimension)
    empty        zero rows
    scalar       a 0-d tensor
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..dispatch import ops as OPS

LAYOUTS = ("contiguous", "transposed", "sliced", "offset", "broadcast", "empty", "scalar")
SHAPE = (3, 4)
# relative tolerance per dtype (scaled by the largest magnitude of the reference)
RTOL = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}

NA = object()  # the core refuses this combination (the CPU reference raised)


def _rc() -> Any:
    import rtxcore

    return rtxcore


def claimed_dtypes(device: str, op: str) -> list[Any]:
    """The dtypes ``device`` claims for ``op``: its dtypes, narrowed by the
    backend's per-op limits."""
    from ..ops.core import ready_device

    dev = ready_device(device)
    names = {d.name for d in dev._dtypes}
    limit = dev._limits.get(op)  # (normalised when the device was bound)
    if limit is not None:
        names &= limit
    return [dtype_named(n) for n in sorted(names)]


def dtype_named(name: str) -> Any:
    from ..dtype import BY_NAME

    return BY_NAME[name]


def values(dtype: Any, seed: int, shape: tuple[int, ...] = SHAPE, positive: bool = False) -> np.ndarray:
    """Seeded test values of ``dtype``: floats in (-3, 3) (or (0.1, 3)), small
    integers, random bools."""
    rng = np.random.default_rng(seed)
    if dtype.name == "bool":
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        lo = 0.1 if positive else -3.0
        return rng.uniform(lo, 3.0, shape).astype(dtype.numpy)
    lo = 1 if positive else (0 if dtype.kind == "u" else -5)
    return rng.integers(lo, 6, shape).astype(dtype.numpy)


def laid_out(device: str, a: np.ndarray, layout: str, dtype: Any) -> Any:
    """``a`` (2-D) on ``device`` in ``layout``: a tensor whose values are those
    of ``a`` (or its first row, first element, no rows) with that layout."""
    rc = _rc()
    if layout == "contiguous":
        return rc.tensor(a, dtype=dtype, device=device)
    if layout == "transposed":
        return rc.tensor(np.ascontiguousarray(a.T), dtype=dtype, device=device).t()
    if layout == "sliced":
        wide = np.zeros((a.shape[0], a.shape[1] * 2), a.dtype)
        wide[:, ::2] = a
        return rc.tensor(wide, dtype=dtype, device=device)[:, ::2]
    if layout == "offset":
        tall = np.zeros((a.shape[0] + 1, a.shape[1]), a.dtype)
        tall[1:] = a
        return rc.tensor(tall, dtype=dtype, device=device)[1:]
    if layout == "broadcast":
        return rc.tensor(a[:1], dtype=dtype, device=device).expand(*a.shape)
    if layout == "empty":
        return rc.tensor(a[:0], dtype=dtype, device=device)
    if layout == "scalar":
        return rc.tensor(a[0, 0], dtype=dtype, device=device)
    raise ValueError(f"unknown layout {layout!r}")


# -- one case per op family: (device, dtype, layout) -> result(s) --------------------------

# case(device, dtype, layout, tested): tested is the device under test (the
# reference runs on cpu with the same arguments)
Case = Callable[..., Any]


def _unary(op: str) -> Case:
    positive = op in ("log", "sqrt")

    def case(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
        x = laid_out(device, values(dtype, 1, positive=positive), layout, dtype)
        return getattr(_rc(), op)(x)

    return case


def _binary(op: str) -> Case:
    def case(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
        rc = _rc()
        x = laid_out(device, values(dtype, 2, positive=op == "pow"), layout, dtype)
        y = laid_out(device, values(dtype, 3, positive=op in ("div", "pow")), layout, dtype)
        if op == "pow" and dtype.kind == "f":
            y = y / 2
        return getattr(rc, op)(x, y)

    return case


def _where(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    c = laid_out(device, values(dtype_named("bool"), 4), layout, rc.bool_)
    x = laid_out(device, values(dtype, 5), layout, dtype)
    y = laid_out(device, values(dtype, 6), layout, dtype)
    return rc.where(c, x, y)


def _reduce(op: str) -> Case:
    def case(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
        rc = _rc()
        fn = {"sum": rc.sum, "prod": rc.prod, "max": rc.amax, "min": rc.amin}[op]
        x = laid_out(device, values(dtype, 7), layout, dtype)
        if x.dim() == 0:
            return (fn(x),)
        out = [fn(x, 1, keepdim=True)]
        if op != "prod" and (x.numel() or op == "sum"):  # (max of nothing is an error)
            out.append(fn(x, (0, 1)))
        if x.numel():
            out.append(fn(x, 0))
        return tuple(out)

    return case


def _arg(op: str) -> Case:
    def case(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
        rc = _rc()
        x = laid_out(device, values(dtype, 8), layout, dtype)
        fn = getattr(rc, op)
        return (fn(x),) if x.dim() == 0 else (fn(x, 1), fn(x, 0)) if x.numel() else (fn(x, 1),)

    return case


def _matmul(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    x = laid_out(device, values(dtype, 9), layout, dtype)
    y = rc.tensor(values(dtype, 10, (4, 5)), dtype=dtype, device=device)
    return x @ y


def _full(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    x = laid_out(device, values(dtype, 11), layout, dtype)
    return x.fill_(1)


def _arange(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    if layout != "contiguous":
        return NA
    rc = _rc()
    return rc.arange(0, 5, dtype=dtype, device=device), rc.arange(5, 0, -2, dtype=dtype, device=device)


def _copy(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    x = laid_out(device, values(dtype, 12), layout, dtype)
    into = rc.zeros(*x.shape, dtype=dtype, device=device)
    return x.clone(), into.copy_(x)


def _cast(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    x = laid_out(device, values(dtype, 13), layout, dtype)
    targets = [t for t in claimed_dtypes(tested or device, "cast") if t is not dtype]
    return tuple(x.to(t) for t in targets)


def _transfer(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    # from_host, then to_host of a view of it (compared through .cpu())
    return laid_out(device, values(dtype, 14), layout, dtype)


def _empty(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    if layout != "contiguous":
        return NA
    rc = _rc()
    t = rc.empty(2, 3, dtype=dtype, device=device)
    return ("shape", tuple(t.shape), t.dtype.name, t.device == rc.device(device), t.is_contiguous())


def _random(op: str) -> Case:
    def case(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
        if layout != "contiguous":
            return NA
        rc = _rc()
        make = rc.rand if op == "uniform" else rc.randn
        a = make(20000, dtype=dtype, generator=rc.Generator().manual_seed(3), device=device)
        b = make(20000, dtype=dtype, generator=rc.Generator().manual_seed(3), device=device)
        an = a.cpu().numpy().astype(np.float64)
        same = bool(np.array_equal(an, b.cpu().numpy().astype(np.float64)))
        # statistics, not values: generators may differ between backends
        if op == "uniform":
            ok = an.min() >= 0 and an.max() < 1 and abs(an.mean() - 0.5) < 0.02
        else:
            ok = abs(an.mean()) < 0.04 and abs(an.std() - 1) < 0.04
        return ("stats", same, bool(ok))

    return case


def _gather(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    x = laid_out(device, values(dtype, 15), layout, dtype)
    rows = x.shape[0] if x.dim() else 0
    idx = rc.tensor(np.array([[0, 3], [2, 2], [1, 0]])[:rows], device=device)
    return rc.gather(x, 1, idx)


def _scatter_add(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    x = laid_out(device, values(dtype, 16), layout, dtype)
    if x.dim() == 0:
        return NA
    src = rc.tensor(values(dtype, 17, (2, 4)), dtype=dtype, device=device)
    idx = rc.tensor(np.array([[0, 2, 0, 1], [0, 0, 2, 2]]), device=device)  # repeats accumulate
    if x.shape[0] == 0:
        return rc.scatter_add(x, 1, idx[:0, :2], src[:0, :2])
    return rc.scatter_add(x, 0, idx, src)


def _index(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    x = laid_out(device, values(dtype, 18), layout, dtype)
    if x.dim() == 0:
        return NA
    out = [x[:, [3, 1, 3]]]
    if x.shape[0]:
        out += [x[[2, 0, 2]], x[[0, 1], [3, 2]]]
    return tuple(out)


def _masked_select(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    x = laid_out(device, values(dtype, 19), layout, dtype)
    m = laid_out(device, values(dtype_named("bool"), 20), layout, rc.bool_)
    return x[m]


def _build() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for name, spec in OPS.PRIMITIVES.items():
        if spec.family == "unary":
            cases[name] = _unary(name)
        elif spec.family in ("binary", "compare"):
            cases[name] = _binary(name)
        elif name in OPS.REDUCE:
            cases[name] = _reduce(name)
    cases.update(argmax=_arg("argmax"), argmin=_arg("argmin"), where=_where, matmul=_matmul,
                 full=_full, arange=_arange, copy=_copy, cast=_cast, from_host=_transfer,
                 to_host=_transfer, empty=_empty, uniform=_random("uniform"),
                 normal=_random("normal"), gather=_gather, scatter_add=_scatter_add,
                 index=_index, masked_select=_masked_select)
    missing = set(OPS.PRIMITIVES) - set(cases)
    assert not missing, f"primitives without a layout case: {sorted(missing)}"
    return cases


CASES = _build()


# -- running and comparing -------------------------------------------------------------------


def host_values(r: Any) -> Any:
    """A case's result(s) as NumPy arrays (metadata and statistics as they are)."""
    if isinstance(r, tuple) and r and isinstance(r[0], str):
        return r  # metadata or statistics: compared as they are
    if isinstance(r, (tuple, list)):
        return tuple(host_values(e) for e in r)
    return r.cpu().numpy()


def compare(got: Any, want: Any) -> tuple[bool, float, str]:
    """(ok, worst absolute difference, what differs)."""
    if isinstance(want, tuple) and want and isinstance(want[0], str):
        if want[0] == "stats":
            ok = got[1] and got[2]
            return ok, 0.0, "" if ok else f"random numbers: same seed repeats={got[1]}, statistics ok={got[2]}"
        return got == want, 0.0, "" if got == want else f"got {got}, want {want}"
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return False, float("inf"), "different number of results"
        worst, ok, what = 0.0, True, ""
        for g, w in zip(got, want):
            o, d, m = compare(g, w)
            worst = max(worst, d)
            if not o and ok:
                ok, what = False, m
        return ok, worst, what
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, float("inf"), f"got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.size == 0:
        return True, 0.0, ""
    if want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan_ok = np.array_equal(np.isnan(g), np.isnan(w))
        fin = ~np.isnan(w)
        same_inf = np.array_equal(np.isinf(g[fin]), np.isinf(w[fin])) and np.array_equal(
            g[fin][np.isinf(w[fin])], w[fin][np.isinf(w[fin])])
        finite = fin & ~np.isinf(w)
        err = float(np.max(np.abs(g[finite] - w[finite]), initial=0.0))
        scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
        tol = RTOL.get(want.dtype.name, 2e-5) * scale
        ok = nan_ok and same_inf and err <= tol
        return ok, err, "" if ok else (f"worst difference {err:.3g} > {tol:.2g}" if nan_ok and same_inf
                                       else "nan/inf in different places")
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    return err == 0, err, "" if err == 0 else f"worst difference {err:g} (exact expected)"


def check(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    """("pass" | "fail" | "n/a", worst difference, detail) of one case."""
    case = CASES[op]
    try:
        want = case("cpu", dtype, layout, device)
        if want is not NA:
            want = host_values(want)
    except Exception:
        return "n/a", 0.0, ""
    if want is NA:
        return "n/a", 0.0, ""
    try:
        got = host_values(case(device, dtype, layout, device))
    except Exception as exc:
        return "fail", float("inf"), f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    ok, worst, what = compare(got, want)
    return ("pass" if ok else "fail"), worst, what
