"""The conformance suite's per-primitive semantic checks, and the suite run in
process.

``python -m rtxcore.testing DEVICE`` (or ``pytest --rtx-backend DEVICE``) is the
one command: it runs every row of ``rtxcore.testing.layouts`` (every kernel the
device supplies -- primitives and the composites it overrides -- on every dtype
it claims and every layout, each op in isolation), these semantic checks, and
smoke tests of composites, autograd and training, and prints one table.
``python -m rtxcore.testing.conformance DEVICE`` is the same command.

The checks below go through the public front-ends (scalars, in place, integer
powers, seeds, ownership of host memory) and read each op's facts from its
``OpSpec`` in ``rtxcore.dispatch.ops``. From Python::

    from rtxcore.testing.conformance import run, format_table
    print(format_table(run("mydev"), "mydev"))
"""

from __future__ import annotations

import re
import zlib
from typing import Any, Callable

import numpy as np

from ..dispatch import ops as OPS
from . import assert_close
from .layouts import stable_seed

Check = Callable[[str], None]
CHECKS: dict[str, Check] = {}


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
    from .layouts import laid_out

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
    assert not missing, f"primitives without a semantic check (rtxcore/testing/conformance.py): {sorted(missing)}"


_build()


def audit(name: str) -> list[str]:
    """What a primitive declared in ``rtxcore/dispatch/ops.py`` still lacks:
    a front-end, its in-place twin, a NumPy reference, a conformance row, a
    semantic check, a kernel in each installed backend (cpu, opencl, ...).
    Empty when the primitive is complete."""
    import rtxcore

    from ..dispatch.registry import registry
    from ..tensor import Tensor
    from . import layouts

    spec = OPS.PRIMITIVES[name]
    lacks = []
    if spec.family not in ("memory", "indexing", "matmul") and not any(
            callable(getattr(rtxcore, n, None)) for n in (name, *spec.aliases)):
        lacks.append(f"a front-end: rtxcore.{name} (rtxcore/ops/)")
    if spec.inplace and not hasattr(Tensor, spec.inplace):
        lacks.append(f"its in-place twin Tensor.{spec.inplace} (rtxcore/ops/elementwise.py)")
    if spec.family in ("unary", "binary", "compare", "ternary", "reduce"):
        try:
            ref = OPS.reference(spec)
        except (ImportError, AttributeError):
            ref = None
        if ref is None:
            lacks.append(f"a NumPy reference (OpSpec.ref {spec.ref!r} in rtxcore/dispatch/ops.py)")
    if name not in layouts.ROWS and name not in layouts.CASES:
        lacks.append("a conformance row (rtxcore/testing/layouts.py)")
    if name not in CHECKS:
        lacks.append("a semantic check (rtxcore/testing/conformance.py)")
    registry.ensure_loaded()
    for bname, entry in sorted(registry.backends.items()):
        if bname in ("cpu", "opencl", "cuda") and name not in entry.kernels:
            lacks.append(f"a kernel in the {bname} backend (backends/rtx_{bname})")
    return lacks


def assert_complete(names: Any = None) -> None:
    """Raise AssertionError naming every piece a declared primitive lacks."""
    gaps = {n: audit(n) for n in (OPS.PRIMITIVES if names is None else names)}
    gaps = {n: g for n, g in gaps.items() if g}
    if gaps:
        raise AssertionError("primitives declared in rtxcore/dispatch/ops.py but incomplete: " + "; ".join(
            f"{n} lacks {', '.join(g)}" for n, g in gaps.items()))


TABLE_BEGIN = "<!-- dtype table: generated from rtxcore/dispatch/ops.py by rtxcore.testing.conformance.dtype_table() -->"
TABLE_END = "<!-- end of dtype table -->"


def dtype_table() -> str:
    """The Markdown table of the dtypes the core sends each kernel, and what the
    front-end makes of integer inputs, from the OpSpecs (docs/authoring-backends.md
    carries it between TABLE_BEGIN and TABLE_END)."""
    names = OPS.DOMAINS["all"]
    head = "| op | kind | result | " + " | ".join(names) + " |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for kind, table in (("primitive", OPS.PRIMITIVES), ("composite", OPS.COMPOSITES)):
        for name, spec in table.items():
            dom = set(OPS.kernel_dtypes(spec))
            cells = " | ".join("x" if n in dom else "" for n in names)
            lines.append(f"| `{name}` | {kind} | {spec.result or '-'} | {cells} |")
    return "\n".join(lines)


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


Entry = tuple[str, str, float, str]  # (what, status, worst difference, detail)


def supplied_composites(device: str) -> list[str]:
    """The composites ``device``'s backend supplies kernels for (which it must get right)."""
    from ..ops.core import ready_device

    kernels = ready_device(device).kernels
    return [op for op in OPS.COMPOSITES if op in kernels]


def op_entries(device: str, op: str) -> list[Entry]:
    """Every row of one op on ``device``: each claimed dtype on each layout, and
    (primitives) the semantic check."""
    from . import layouts

    out: list[Entry] = []
    composite = op in OPS.COMPOSITES
    for dt in layouts.claimed_dtypes(device, op):
        for lay in layouts.LAYOUTS:
            status, worst, detail = (layouts.composite_check if composite else layouts.check)(
                device, op, dt, lay)
            if status != "n/a":
                out.append((f"{dt.name}/{lay}", status, worst, detail))
    if not composite and claims(device, op, "float32"):
        status, detail = semantics(device, op)
        out.append(("semantics", status, 0.0, detail))
    return out


def run(device: str) -> dict[str, list[Entry]]:
    """Every primitive and every composite kernel of ``device``, in process:
    {op: entries}, ``("kernel", "missing", ...)`` for a primitive without one
    (``"fail"`` under RTX_FALLBACK=error).
    (The smoke tests of composites, autograd and training run under pytest.)"""
    from ..ops.core import ready_device

    from ..dispatch.fallback import strict

    kernels = ready_device(device).kernels
    results: dict[str, list[Entry]] = {}
    for op in OPS.PRIMITIVES:
        if op not in kernels:
            # under RTX_FALLBACK=error (CI's strict mode) a missing kernel fails its row
            results[op] = [("kernel", "fail", float("inf"), "no kernel (RTX_FALLBACK=error)") if strict()
                           else ("kernel", "missing", 0.0, "no kernel")]
            continue
        results[op] = op_entries(device, op)
    for op in supplied_composites(device):
        results[op] = op_entries(device, op)
    results["fuse"] = fuse_entries(device)  # Backend.fuse, where the backend has it
    return results


# -- Backend.fuse: a fused group against the same steps run kernel by kernel --------------

FUSE_PROGRAMS: list[dict[str, Any]] = [
    {"n": 1003, "inputs": ["float32", "float32"],  # a tanh GELU and a second output
     "steps": [["mul", "float32", [["in", 0], ["in", 0]]],
               ["mul", "float32", [["step", 0], ["in", 0]]],
               ["mul", "float32", [["step", 1], ["const", 0.044715]]],
               ["add", "float32", [["in", 0], ["step", 2]]],
               ["mul", "float32", [["step", 3], ["const", 0.7978845608]]],
               ["tanh", "float32", [["step", 4]]],
               ["add", "float32", [["step", 5], ["const", 1.0]]],
               ["mul", "float32", [["step", 6], ["in", 0]]],
               ["mul", "float32", [["step", 7], ["const", 0.5]]],
               ["sub", "float32", [["step", 8], ["in", 1]]]],
     "outputs": [8, 9]},
    {"n": 517, "inputs": ["float32", "float32"],  # compare, where, NaN-aware max, cast
     "steps": [["gt", "bool", [["in", 0], ["in", 1]]],
               ["where", "float32", [["step", 0], ["in", 0], ["const", -1.5]]],
               ["maximum", "float32", [["step", 1], ["in", 1]]],
               ["cast", "float64", [["step", 2]]]],
     "outputs": [0, 3]},
    {"n": 300, "inputs": ["int32", "int32"],  # integers
     "steps": [["add", "int32", [["in", 0], ["in", 1]]],
               ["mul", "int32", [["step", 0], ["const", 3]]],
               ["neg", "int32", [["step", 1]]],
               ["minimum", "int32", [["step", 2], ["in", 1]]]],
     "outputs": [3]},
    {"n": 640, "cols": 16, "inputs": ["float32", "float32", "float32"],  # broadcasts:
     "steps": [["sub", "float32", [["in", 0], ["col", 2]]],  # x - mean[:, None]
               ["mul", "float32", [["step", 0], ["row", 1]]],  # ... * w[None, :]
               ["add", "float32", [["step", 1], ["const", 0.5]]]],
     "outputs": [2]},
    {"n": 91, "cols": 13, "inputs": ["float64", "float64", "float64"],  # an odd row length
     "steps": [["mul", "float64", [["row", 0], ["col", 1]]],
               ["maximum", "float64", [["step", 0], ["in", 2]]]],
     "outputs": [1]},
    {"n": 1001, "inputs": ["float32", "float32", "float32"],  # an optimizer's update:
     "steps": [["mul", "float32", [["in", 0], ["scalar", 2]]],  # a step size in a tensor,
               ["sqrt", "float32", [["in", 1]]],                # output 0 written over
               ["add", "float32", [["step", 1], ["const", 1e-8]]],  # input 0 (in place)
               ["div", "float32", [["step", 0], ["step", 2]]],
               ["sub", "float32", [["in", 0], ["step", 3]]]],
     "outputs": [4]},
    {"n": 37 * 24, "cols": 24, "reduce": "rows",  # ends in a row sum: x - mean[:, None],
     "inputs": ["float32", "float32"],            # its square summed per row, and exp
     "steps": [["sub", "float32", [["in", 0], ["col", 1]]],
               ["mul", "float32", [["step", 0], ["step", 0]]],
               ["exp", "float32", [["step", 0]]],
               ["sum", "float32", [["step", 1]]]],
     "outputs": [2, 3]},
    {"n": 11 * 13, "cols": 13, "reduce": "rows",  # float64, an odd row length, a bias
     "inputs": ["float64", "float64"],
     "steps": [["mul", "float64", [["in", 0], ["row", 1]]],
               ["tanh", "float64", [["step", 0]]],
               ["sum", "float64", [["step", 1]]]],
     "outputs": [2]},
    {"n": 5003, "reduce": "all", "inputs": ["float32", "float32"],  # a sum of everything
     "steps": [["mul", "float32", [["in", 0], ["in", 1]]],
               ["add", "float32", [["step", 0], ["const", 0.25]]],
               ["sum", "float32", [["step", 1]]]],
     "outputs": [2]},
    {"n": 8 * 1000, "reduce": "all", "inputs": ["float32"],  # a squared norm
     "steps": [["mul", "float32", [["in", 0], ["in", 0]]],
               ["sum", "float32", [["step", 0]]]],
     "outputs": [1]},
]
# program -> (output, input): that output is written into that input's memory
FUSE_ALIAS: dict[int, tuple[int, int]] = {5: (0, 0)}


def fuse_entries(device: str) -> list[Entry]:
    """One row per program: ``Backend.fuse``'s runner against the steps run one by
    one on cpu; "missing" where the backend has no runner (the core then runs
    the steps through the device's kernels, each checked by its own rows)."""
    from .. import dtype as D
    from ..jit.run import input_sizes, output_sizes, run_steps
    from ..ops.core import empty, ready_device, view_of

    dev = ready_device(device)
    rng = np.random.default_rng(zlib.crc32(b"fuse"))
    out: list[Entry] = []
    for i, prog in enumerate(FUSE_PROGRAMS):
        name = f"program {i}"
        if any(dt not in {d.name for d in dev._dtypes} for dt in
               prog["inputs"] + [s[1] for s in prog["steps"]]):
            continue  # a dtype the device lacks
        try:
            runner = dev.backend.fuse(prog, dev.index)
        except Exception as exc:  # noqa: BLE001  (a backend's bug: its row says so)
            out.append((name, "fail", float("inf"), f"fuse() raised {type(exc).__name__}: {exc}"))
            continue
        if runner is None:
            out.append((name, "missing", 0.0, "no fused runner: the core runs the steps one by one"))
            continue
        n = prog["n"]
        sizes = input_sizes(prog)
        data = []
        for q, dt in enumerate(prog["inputs"]):
            a = rng.standard_normal(sizes[q]) * 3
            if sizes[q] >= 4 and prog.get("reduce") != "all":  # (a NaN would be all it sums)
                a[:4] = [0.0, -0.0, np.nan, np.inf] if dt.startswith("float") else a[:4]
            data.append(a.astype(dt) if dt.startswith("float") else
                        rng.integers(-100, 100, a.shape).astype(dt))
        ins = [_rc().tensor(a.copy(), device=device) for a in data]
        osizes = output_sizes(prog)
        outs = [empty((m,), D.BY_NAME[prog["steps"][k][1]], dev)
                for k, m in zip(prog["outputs"], osizes)]
        if i in FUSE_ALIAS:
            j, into = FUSE_ALIAS[i]
            outs[j] = ins[into]
        try:
            runner([view_of(t) for t in outs], [view_of(t) for t in ins])
        except Exception as exc:  # noqa: BLE001
            out.append((name, "fail", float("inf"), f"the runner raised {type(exc).__name__}: {exc}"))
            continue
        # the reference: the same steps one by one on cpu (the reference backend),
        # so a row depends on the fused runner alone
        cpu = ready_device("cpu")
        refs = [empty((m,), D.BY_NAME[prog["steps"][k][1]], cpu)
                for k, m in zip(prog["outputs"], osizes)]
        run_steps(prog, refs, [_rc().tensor(a.copy(), device="cpu") for a in data], cpu)
        worst, bad = 0.0, ""
        for j, (o, r) in enumerate(zip(outs, refs)):
            got, want = o.cpu().numpy(), r.cpu().numpy()
            if got.dtype.kind == "f" and osizes[j] != n:  # a sum: in another order
                ok = np.isclose(got, want, rtol=1e-5, atol=1e-5 * n / osizes[j], equal_nan=True)
            elif got.dtype.kind == "f":
                ok = np.isclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)
            else:
                ok = got == want
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                bad = f"output {j}[{k}] = {got[k]!r}, the steps give {want[k]!r}"
                worst = float("inf")
        out.append((name, "fail" if bad else "pass", worst, bad or f"{n} elements"))
    return out


def format_table(results: dict[str, list[Entry]], device: str = "") -> str:
    """The table ``python -m rtxcore.testing`` prints."""
    from .plugin import format_table as table

    return table(results, device)


def failed(results: dict[str, list[Entry]]) -> list[str]:
    """The ops with a failing row."""
    return [op for op, entries in results.items() if any(s == "fail" for _, s, _, _ in entries)]


if __name__ == "__main__":
    import sys

    from .__main__ import main

    sys.exit(main(sys.argv[1:]))
