"""Each primitive's semantic check (``CHECKS``): through the public front-ends
-- scalars, in place, integer powers, seeds, ownership of host memory --
with each op's facts read from its ``OpSpec`` in ``rtxcore.dispatch.ops``;
``semantics`` runs one and says pass, fail or n/a.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from ..dispatch import ops as OPS
from . import assert_close
from .arrays import _rc, claimed_dtypes, laid_out, stable_seed

Check = Callable[[str], None]
CHECKS: dict[str, Check] = {}


def claims(device: str, op: str, dtype_name: str) -> bool:
    """Whether ``device`` claims ``dtype_name`` for ``op`` (its dtypes narrowed by
    per-op limits): the checks test exactly what is claimed."""
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
    rng = np.random.default_rng(stable_seed(op))
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
        assert_close(out, OPS.reference(OPS.spec(op))(xn), rtol=2e-6, atol=1e-6)

    return check


def _binary(op: str) -> Check:
    spec = OPS.spec(op)
    ref = OPS.reference(spec)

    def check(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data(op))
        yn = _data(op + "y")[0]  # (4,): broadcast along rows with stride 0
        if op == "pow":
            yn = np.round(yn).astype(np.float32)
        y = rc.tensor(yn, device=device)
        fn = getattr(rc, op)
        assert_close(fn(x, y), ref(xn, yn), rtol=2e-6, atol=1e-6)
        assert_close(fn(x, 2.0), ref(xn, np.float32(2.0)), rtol=2e-6, atol=1e-6)
        assert_close(fn(2.0, x), ref(np.float32(2.0), xn), rtol=2e-6, atol=1e-6)
        # integer operands: the result kind says what the front-end makes of them
        it = next((t for t in ("int32", "int64") if claims(device, op, t)), None)
        if spec.result == "float":
            it = next((t for t in ("int32", "int64") if claims(device, "cast", t)), None) \
                if claims(device, op, "float32") else None
        if it is not None:
            xin, yin = np.array([[5, -7, 0, 3]], it), np.array([2, 3, 4, 1], it)
            xi = rc.tensor(xin, device=device)
            yi = rc.tensor(yin, device=device)
            want = ref(xin, yin)
            if spec.result == "float":
                want = ref(xin.astype(np.float32), yin.astype(np.float32))
            assert_close(fn(xi, yi), want)
        if spec.inplace:
            # in place: the kernel gets the target as both `out` and `x`
            # (a bool result is written back in the target's dtype)
            want = ref(xn, yn).astype(xn.dtype)
            z = rc.tensor(xn, device=device)
            getattr(z, spec.inplace)(y)
            assert_close(z, want, rtol=2e-6, atol=1e-6)
            # ... and the target may be strided (a transposed view)
            w = rc.tensor(np.ascontiguousarray(xn.T), device=device).t()
            getattr(w, spec.inplace)(y)
            assert_close(w, want, rtol=2e-6, atol=1e-6)
        if op == "pow" and claims(device, op, "int64"):
            xi = rc.tensor([2, -1, 1, 3, -1], device=device)
            yi = rc.tensor([-1, -3, -2, 2, -2], device=device)
            assert (xi ** yi).tolist() == [0, -1, 1, 9, 1], "integer ** negative integer"

    return check


def _reduce(op: str) -> Check:
    def check(device: str) -> None:
        rc = _rc()
        x, xn = _strided(device, _data(op))
        spec = OPS.spec(op)
        ref = OPS.reference(spec)
        fn = getattr(rc, next((a for a in spec.aliases if hasattr(rc, a)), op))
        for dim in ((0,), (1,), (0, 1)):
            if op == "prod" and len(dim) > 1:
                continue
            d = dim[0] if op == "prod" else dim
            assert_close(fn(x, d, keepdim=True), ref(xn, axis=dim, keepdims=True), rtol=1e-5, atol=1e-5)
        assert_close(fn(x), ref(xn), rtol=1e-5, atol=1e-5)
        if op == "sum" and claims(device, op, "float16"):
            _float16_means(device)

    return check


def _float16_means(device: str) -> None:
    """float16 means accumulate in float32 (PyTorch), along every axis of long
    rows and long columns, on every layout a kernel must read."""
    rc = _rc()
    rng = np.random.default_rng(stable_seed("mean16"))
    for shape in ((2100, 3), (3, 2100)):
        a = rng.choice(np.float16([1.0, 0.5, 0.25, 1.25]), shape)
        for lay in ("contiguous", "transposed", "sliced", "offset", "broadcast"):
            x = laid_out(device, a, lay, rc.float16)
            xv = np.broadcast_to(a[:1], a.shape) if lay == "broadcast" else a
            for dim in (0, 1, None):
                got = x.mean() if dim is None else x.mean(dim)
                n = xv.size if dim is None else xv.shape[dim]
                want = np.sum(xv, axis=dim, dtype=np.float32) / n
                assert got.dtype == rc.float16, f"mean of float16 gave {got.dtype}"
                assert_close(got, np.asarray(want).astype(np.float16))


def _arg(op: str) -> Check:
    def check(device: str) -> None:
        rc = _rc()
        xn = np.array([[1.0, 5.0, 5.0, 0.0], [2.0, 2.0, -1.0, -1.0], [7.0, 0.0, 7.0, 3.0]], np.float32)
        x, _ = _strided(device, xn)
        ref = getattr(np, op)
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
        z = _rc().tensor(np.zeros((4, 3), np.float32), device=device)
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
            t = rc.tensor(np.zeros(3, np.float32), device=device)
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
        out = rc.tensor(np.zeros((3, 4), np.float32), device=device)
        out.scatter_add_(0, rc.tensor(idn, device=device), rc.tensor(src, device=device))
        ref = np.zeros((3, 4), np.float32)
        np.add.at(ref, (idn, np.arange(4)[None]), src)
        assert_close(out, ref)
        out1 = rc.tensor(np.zeros((2, 3), np.float32), device=device)
        out1.scatter_add_(1, rc.tensor([[0, 0, 0], [2, 1, 2]], device=device),
                          rc.tensor(np.ones((2, 3), np.float32), device=device))
        assert out1.tolist() == [[3.0, 0.0, 0.0], [0.0, 1.0, 2.0]]

    def index(device: str) -> None:
        x, xn = _strided(device, _data("index"))
        assert_close(x[[2, 0, 2]], xn[[2, 0, 2]])
        assert_close(x[:, [3, 1]], xn[:, [3, 1]])
        assert_close(x[[0, 1], [3, 2]], xn[[0, 1], [3, 2]])

    def masked_select(device: str) -> None:
        x, xn = _strided(device, _data("masked_select"))
        mask = _rc().tensor(xn > 0, device=device)  # (made on the host: no gt kernel)
        assert_close(_rc().masked_select(x, mask), xn[xn > 0])

    return {f.__name__: f for f in (where, matmul, gather, scatter_add, index, masked_select)}


def _build() -> None:
    for name, spec in OPS.PRIMITIVES.items():
        if spec.family == "unary":
            CHECKS[name] = _unary(name)
        elif spec.family in ("binary", "compare"):
            CHECKS[name] = _binary(name)
        elif name in OPS.REDUCE:
            CHECKS[name] = _reduce(name)
        elif name in ("argmax", "argmin"):
            CHECKS[name] = _arg(name)
    CHECKS.update(_memory_checks())
    CHECKS.update(_other_checks())
    missing = set(OPS.PRIMITIVES) - set(CHECKS)
    assert not missing, f"primitives without a semantic check (rtxcore/testing/checks.py): {sorted(missing)}"


_build()


_NEEDS = re.compile(r"op '(\w+)' has no kernel")


def semantics(device: str, op: str) -> tuple[str, str]:
    """("pass" | "fail" | "n/a", detail) of ``op``'s semantic check. A check
    that stops at another op's missing kernel is "n/a" (that op's row says it
    is missing): one missing kernel never fails another op's row."""
    try:
        CHECKS[op](device)
    except NotImplementedError as exc:
        m = _NEEDS.search(str(exc))
        if m and m.group(1) != op:
            return "n/a", f"needs {m.group(1)}, which is missing"
        return "fail", f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    except Exception as exc:
        return "fail", f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    return "pass", ""
