"""The per-primitive conformance suite, generated from ``rtxcore.dispatch.ops``.

Every primitive gets one check that drives its kernel through the core with the
layouts kernels must handle (offsets, non-contiguous strides, stride-0
broadcasts, scalar operands, in-place aliasing) and compares with NumPy.

    from rtxcore.testing.conformance import run, format_table
    print(format_table(run("mydev")))

A third-party backend runs exactly what rtxcore's own backends run.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..dispatch import ops as OPS
from . import assert_close

Check = Callable[[str], None]
CHECKS: dict[str, Check] = {}

_UNARY_REF = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "exp": np.exp, "log": np.log,
    "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "reciprocal": np.reciprocal, "floor": np.floor, "logical_not": np.logical_not,
}
_BINARY_REF = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
_REDUCE_REF = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def _rc() -> Any:
    import rtxcore

    return rtxcore


def claims(device: str, op: str, dtype_name: str) -> bool:
    """Whether ``device`` claims ``dtype_name`` for ``op`` (its dtypes narrowed by
    per-op limits): the checks test exactly what is claimed."""
    from .layouts import claimed_dtypes

    return any(d.name == dtype_name for d in claimed_dtypes(device, op))


def _strided(device: str, base: np.ndarray) -> tuple[Any, np.ndarray]:
    """``base`` laid out awkwardly on ``device``: transposed, sliced with a step
    and an offset. Returns (tensor view, the same values in NumPy)."""
    rc = _rc()
    big = np.zeros((base.shape[1] * 2 + 1, base.shape[0]), base.dtype)
    big[1::2] = base.T
    t = rc.tensor(big, device=device)[1::2].t()
    assert not t.is_contiguous() and t.storage_offset() > 0
    return t, base


def _data(op: str) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(op)) % 2**32)
    x = rng.uniform(-3, 3, (3, 4)).astype(np.float32)
    if op in ("log", "sqrt", "pow"):
        x = np.abs(x) + 0.1
    if op == "reciprocal":
        x = np.where(np.abs(x) < 0.1, 0.5, x).astype(np.float32)
    return x


def _unary(op: str) -> Check:
    def check(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data(op))
        out = getattr(rc, op)(x)
        assert_close(out, _UNARY_REF[op](xn), rtol=2e-6, atol=1e-6)

    return check


def _binary(op: str) -> Check:
    logical = op.startswith("logical") or op in OPS.COMPARE

    def check(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data(op))
        yn = _data(op + "y")[0]  # (4,): broadcast along rows with stride 0
        if op == "pow":
            yn = np.round(yn).astype(np.float32)
        y = rc.tensor(yn, device=device)
        fn = getattr(rc, op)
        ref = _BINARY_REF[op]
        assert_close(fn(x, y), ref(xn, yn), rtol=2e-6, atol=1e-6)
        assert_close(fn(x, 2.0), ref(xn, np.float32(2.0)), rtol=2e-6, atol=1e-6)
        if op not in ("pow",):
            assert_close(fn(2.0, x), ref(np.float32(2.0), xn), rtol=2e-6, atol=1e-6)
        it = next((t for t in ("int32", "int64") if claims(device, op, t)), None)
        if it is not None and (op != "div" or claims(device, op, "float32")):
            xi = rc.tensor([[5, -7, 0, 3]], dtype=getattr(rc, it), device=device)
            yi = rc.tensor([2, 3, 4, 1], dtype=getattr(rc, it), device=device)
            xin, yin = np.array([[5, -7, 0, 3]], it), np.array([2, 3, 4, 1], it)
            if op == "div":
                assert_close(fn(xi, yi), (xin / yin).astype(np.float32))
            elif op != "pow":
                assert_close(fn(xi, yi), ref(xin, yin))
        if not logical:
            # in place: the kernel gets the target as both `out` and `x`
            z = rc.tensor(xn, device=device)
            getattr(z, op + "_")(y)
            assert_close(z, ref(xn, yn), rtol=2e-6, atol=1e-6)
            # ... and the target may be strided (a transposed view)
            w = rc.tensor(np.ascontiguousarray(xn.T), device=device).t()
            getattr(w, op + "_")(y)
            assert_close(w, ref(xn, yn), rtol=2e-6, atol=1e-6)
        if op == "pow" and claims(device, op, "int64"):
            xi = rc.tensor([2, -1, 1, 3, -1], device=device)
            yi = rc.tensor([-1, -3, -2, 2, -2], device=device)
            assert (xi ** yi).tolist() == [0, -1, 1, 9, 1], "integer ** negative integer"

    return check


def _reduce(op: str) -> Check:
    def check(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data(op))
        ref = _REDUCE_REF[op]
        fn = {"sum": rc.sum, "prod": rc.prod, "max": rc.amax, "min": rc.amin}[op]
        for dim in ((0,), (1,), (0, 1)):
            if op == "prod" and len(dim) > 1:
                continue
            d = dim[0] if op == "prod" else dim
            assert_close(fn(x, d, keepdim=True), ref(xn, axis=dim, keepdims=True), rtol=1e-5, atol=1e-5)
        assert_close(fn(x), ref(xn), rtol=1e-5, atol=1e-5)
        if op == "sum" and claims(device, op, "float16"):
            # float16 accumulates in float32: 3000 ones sum to 3000, not 2048
            h = rc.ones(3000, dtype=rc.float16, device=device)
            assert h.sum().item() == 3000.0 and h.sum().dtype == rc.float16

    return check


def _arg(op: str) -> Check:
    def check(device: str) -> None:
        rc = _rc()
        xn = np.array([[1.0, 5.0, 5.0, 0.0], [2.0, 2.0, -1.0, -1.0], [7.0, 0.0, 7.0, 3.0]], np.float32)
        x, _ = _strided(device, xn)
        ref = np.argmax if op == "argmax" else np.argmin
        for dim in (0, 1):
            assert_close(getattr(rc, op)(x, dim), ref(xn, axis=dim))
        assert getattr(rc, op)(x).item() == int(ref(xn))

    return check


def _memory_checks() -> dict[str, Check]:
    def empty(device: str) -> None:
        rc = _rc()
        t = rc.empty(2, 3, device=device)
        assert tuple(t.shape) == (2, 3) and t.is_contiguous() and str(t.device) == str(rc.device(device))

    def full(device: str) -> None:
        rc = _rc()
        x, _ = _strided(device, np.zeros((3, 4), np.float32))
        x.fill_(2.5)
        assert_close(x, np.full((3, 4), 2.5, np.float32))
        if claims(device, "full", "int64"):
            assert_close(rc.full((2, 2), 7, device=device), np.full((2, 2), 7, np.int64))

    def arange(device: str) -> None:
        rc = _rc()
        if claims(device, "arange", "int64"):
            assert_close(rc.arange(5, device=device), np.arange(5))
        assert_close(rc.arange(1.0, 2.0, 0.25, device=device), np.arange(1.0, 2.0, 0.25, dtype=np.float32))
        if claims(device, "arange", "int32"):
            assert_close(rc.arange(10, 0, -3, dtype=rc.int32, device=device),
                         np.arange(10, 0, -3, dtype=np.int32))

    def copy(device: str) -> None:
        x, xn = _strided(device, _data("copy"))
        y, _ = _strided(device, np.zeros((3, 4), np.float32))
        y.copy_(x)  # strided view -> strided view
        assert_close(y, xn)
        z = _rc().zeros(4, 3, device=device)
        z.t().copy_(x)
        assert_close(z, xn.T)

    def cast(device: str) -> None:
        rc = _rc()
        xn = np.array([[-1.7, -0.2, 0.0, 2.9]], np.float32)
        x = rc.tensor(xn, device=device)
        for it in ("int32", "int64"):
            if claims(device, "cast", it):
                assert_close(x.to(getattr(rc, it)), xn.astype(it))
                assert_close(rc.tensor([[0, 3]], dtype=getattr(rc, it), device=device).float(),
                             np.float32([[0, 3]]))
        if claims(device, "cast", "bool"):
            assert_close(x.to(rc.bool_), xn.astype(bool))

    def from_host(device: str) -> None:
        rc = _rc()
        xn = np.arange(12, dtype=np.float32).reshape(3, 4)
        t = rc.tensor(xn, device=device)
        xn[0, 0] = 99  # the tensor owns its data
        assert t[0, 0].item() == 0.0

    def to_host(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data("to_host"))
        assert_close(x.cpu(), xn)
        assert x.tolist() == xn.tolist()
        if not rc.device(device).backend.shares_host_memory:
            # new memory: writing the host copy leaves the tensor alone
            t = rc.zeros(3, device=device)
            t.numpy()[0] = 5.0
            t.cpu()[1] = 6.0
            assert t.tolist() == [0.0, 0.0, 0.0], "to_host returned memory the tensor still uses"

    def uniform(device: str) -> None:
        rc = _rc()
        a = rc.rand(1000, generator=rc.Generator().manual_seed(3), device=device)
        b = rc.rand(1000, generator=rc.Generator().manual_seed(3), device=device)
        an = a.cpu().numpy()
        assert np.array_equal(an, b.cpu().numpy()), "same seed gave different numbers"
        assert an.min() >= 0 and an.max() < 1 and abs(an.mean() - 0.5) < 0.05
        c = rc.rand(1000, generator=rc.Generator().manual_seed(4), device=device)
        assert not np.array_equal(an, c.cpu().numpy())
        if claims(device, "uniform", "float16"):
            h = rc.rand(100000, dtype=rc.float16, generator=rc.Generator().manual_seed(0), device=device)
            assert h.max().item() < 1.0, "float16 uniform reached 1.0"

    def normal(device: str) -> None:
        rc = _rc()
        g = rc.Generator().manual_seed(5)
        z = rc.randn(20000, generator=g, device=device).cpu().numpy()
        assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05
        z2 = rc.randn(20000, generator=g, device=device).cpu().numpy()
        assert not np.array_equal(z, z2), "successive draws repeated"

    return {f.__name__: f for f in (empty, full, arange, copy, cast, from_host, to_host, uniform, normal)}


def _other_checks() -> dict[str, Check]:
    def where(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data("where"))
        cn = np.array([True, False, True, False])
        c = rc.tensor(cn, device=device)
        assert_close(rc.where(c, x, -1.0), np.where(cn, xn, np.float32(-1)))
        assert_close(rc.where(c, 0.5, x), np.where(cn, np.float32(0.5), xn))

    def matmul(device: str) -> None:
        rc = _rc()
        an = _data("matmul_a")[:, :3]  # (3, 3)
        bn = np.stack([_data("matmul_b"), _data("matmul_c")])  # (2, 3, 4)
        a, b = rc.tensor(an, device=device), rc.tensor(bn, device=device)
        assert_close(a @ b, an @ bn, rtol=1e-5, atol=1e-5)  # broadcast batch: stride 0
        assert_close(a.t() @ a, an.T @ an, rtol=1e-5, atol=1e-5)
        if claims(device, "matmul", "int64"):
            ai = rc.tensor([[1, 2], [3, 4]], dtype=rc.int64, device=device)
            assert_close(ai @ ai, np.array([[1, 2], [3, 4]]) @ np.array([[1, 2], [3, 4]]))

    def gather(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data("gather"))
        idn = np.array([[0, 2], [1, 1], [3, 0]])
        idx = rc.tensor(idn, device=device)
        assert_close(rc.gather(x, 1, idx), np.take_along_axis(xn, idn, 1))

    def scatter_add(device: str) -> None:
        rc = _rc()
        idn = np.array([[0, 0, 2, 0]])  # repeated index 0 must accumulate
        src = np.ones((1, 4), np.float32)
        out = rc.zeros(3, 4, device=device).scatter_add(0, rc.tensor(idn, device=device), rc.tensor(src, device=device))
        ref = np.zeros((3, 4), np.float32)
        np.add.at(ref, (idn, np.arange(4)[None]), src)
        assert_close(out, ref)
        out1 = rc.zeros(2, 3, device=device).scatter_add(
            1, rc.tensor([[0, 0, 0], [2, 1, 2]], device=device), rc.ones(2, 3, device=device))
        assert out1.tolist() == [[3.0, 0.0, 0.0], [0.0, 1.0, 2.0]]

    def index(device: str) -> None:
        x, xn = _strided(device, _data("index"))
        assert_close(x[[2, 0, 2]], xn[[2, 0, 2]])
        assert_close(x[:, [3, 1]], xn[:, [3, 1]])
        assert_close(x[[0, 1], [3, 2]], xn[[0, 1], [3, 2]])

    def masked_select(device: str) -> None:
        x, xn = _strided(device, _data("masked_select"))
        assert_close(x[x > 0], xn[xn > 0])

    return {f.__name__: f for f in (where, matmul, gather, scatter_add, index, masked_select)}


def _build() -> None:
    for name, spec in OPS.PRIMITIVES.items():
        if spec.family == "unary":
            CHECKS[name] = _unary(name)
        elif spec.family in ("binary", "compare"):
            CHECKS[name] = _binary(name)
        elif name in _REDUCE_REF:
            CHECKS[name] = _reduce(name)
        elif name in ("argmax", "argmin"):
            CHECKS[name] = _arg(name)
    CHECKS.update(_memory_checks())
    CHECKS.update(_other_checks())
    missing = set(OPS.PRIMITIVES) - set(CHECKS)
    assert not missing, f"primitives without a conformance check: {sorted(missing)}"


_build()


def run(device: str) -> dict[str, tuple[str, str]]:
    """Run every check on ``device``: {op: ("pass" | "fail" | "missing", detail)}."""
    from ..ops.core import ready_device

    kernels = ready_device(device).kernels
    results: dict[str, tuple[str, str]] = {}
    for op, check in CHECKS.items():
        if op not in kernels:
            results[op] = ("missing", "no kernel")
            continue
        try:
            check(device)
            results[op] = ("pass", "")
        except Exception as exc:  # report, don't stop: the table is the point
            results[op] = ("fail", f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    return results


def format_table(results: dict[str, tuple[str, str]], device: str = "") -> str:
    width = max(len(op) for op in results)
    lines = [f"conformance {device}".rstrip(), ""]
    for op, (status, detail) in results.items():
        lines.append(f"{op:<{width}}  {status:<8} {detail}".rstrip())
    counts = {s: sum(1 for v in results.values() if v[0] == s) for s in ("pass", "fail", "missing")}
    lines += ["", f"{counts['pass']} pass, {counts['fail']} fail, {counts['missing']} missing "
                  f"of {len(results)} primitives"]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    res = run(dev)
    print(format_table(res, dev))
    sys.exit(0 if all(s == "pass" for s, _ in res.values()) else 1)
