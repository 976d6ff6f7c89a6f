"""The conformance suite ``pytest --rtx-backend DEVICE`` runs (see plugin.py).

Every primitive and every composite the device's backend supplies, on every
dtype it claims and every layout, each in isolation (``layouts.py``); each
primitive's semantic checks (``checks.py``); smoke tests of composites,
autograd and training. Tests of one primitive are skipped, as "missing", when
the device has no kernel for it; the table at the end says whether the CPU
fallback serves it. They are never skipped for any other reason.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch.fallback import NO_FALLBACK, get_fallback, strict
from rtxcore.testing import conformance, layouts, training_losses
from rtxcore.testing.plugin import device_under_test, record


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> str:
    return device_under_test(request.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    dev = device_under_test(metafunc.config)
    if "op_dtype" in metafunc.fixturenames:
        cases = [(op, dt.name) for op in rc.dispatch.ops.PRIMITIVES
                 for dt in layouts.claimed_dtypes(dev, op)]
        metafunc.parametrize("op_dtype", cases, ids=[f"{op}-{dt}" for op, dt in cases])
    if "composite_dtype" in metafunc.fixturenames:
        cases = [(op, dt.name) for op in conformance.supplied_composites(dev)
                 for dt in layouts.claimed_dtypes(dev, op)]
        if not cases:  # (said as the reason, rather than pytest's "empty parameter set")
            cases = [pytest.param(("", ""), marks=pytest.mark.skip(
                reason=f"{dev} supplies no composite kernels: the core decomposes them all"))]
            metafunc.parametrize("composite_dtype", cases, ids=["none"])
        else:
            metafunc.parametrize("composite_dtype", cases, ids=[f"{op}-{dt}" for op, dt in cases])
    if "op" in metafunc.fixturenames:
        metafunc.parametrize("op", list(conformance.CHECKS))


def _has(device: str, op: str) -> bool:
    return op in rc.device(device).kernels


def _missing(device: str, op: str, run) -> None:
    """Record ``op`` as missing, with what the CPU fallback makes of it, and skip;
    under RTX_FALLBACK=error (the strict mode for CI) a missing kernel fails."""
    mode, _ = get_fallback()
    if strict():
        record(op, "kernel", "fail", float("inf"), "no kernel (RTX_FALLBACK=error: no fallback)")
        pytest.fail(f"{device} has no {op} kernel (RTX_FALLBACK=error)")
    if op in NO_FALLBACK:
        record(op, "kernel", "missing", detail="no kernel; no fallback")
    else:
        with warnings.catch_warnings(), rc.set_fallback("cpu"):
            warnings.simplefilter("ignore", rc.FallbackWarning)
            try:
                run()
                outcome = "served by the CPU fallback" + ("" if mode == "cpu" else " (when on)")
            except Exception as exc:
                outcome = f"the CPU fallback fails: {type(exc).__name__}: {exc}".splitlines()[0][:120]
        record(op, "kernel", "missing", detail=f"no kernel; {outcome}")
    pytest.skip(f"missing: {device} has no {op} kernel")


def test_primitive_on_every_layout(device: str, op_dtype: tuple[str, str]) -> None:
    """One primitive, one claimed dtype, every layout, against the CPU backend."""
    op, dtype_name = op_dtype
    dtype = layouts.dtype_named(dtype_name)

    def run_all() -> list[tuple[str, str, float, str]]:
        return [(lay, *layouts.check(device, op, dtype, lay)) for lay in layouts.LAYOUTS]

    def run_strict() -> None:
        bad = [f"{lay}: {detail}" for lay, status, _, detail in run_all() if status == "fail"]
        if bad:
            raise AssertionError("; ".join(bad))

    if not _has(device, op):
        _missing(device, op, run_strict)
    _record_layouts(op, device, dtype_name, run_all())


def test_composite_kernel_on_every_layout(device: str, composite_dtype: tuple[str, str]) -> None:
    """A composite the backend supplies, one claimed dtype, every layout, against
    NumPy (or the core's decomposition on cpu)."""
    op, dtype_name = composite_dtype
    dtype = layouts.dtype_named(dtype_name)
    _record_layouts(op, device, dtype_name,
                    [(lay, *layouts.composite_check(device, op, dtype, lay))
                     for lay in layouts.LAYOUTS])


def _record_layouts(op: str, device: str, dtype_name: str, rows: Any) -> None:
    """Each (layout, status, worst, detail) row into the table; fail on any failure."""
    failures = []
    for lay, status, worst, detail in rows:
        if status == "n/a":
            continue
        record(op, f"{dtype_name}/{lay}", status, worst, detail)
        if status == "fail":
            failures.append(f"{lay}: {detail}")
    assert not failures, f"{op} on {device} ({dtype_name}): " + "; ".join(failures)


def test_primitive_semantics(device: str, op: str) -> None:
    """The primitive's own checks: scalars, in-place aliasing, strided targets,
    accumulating repeats, integer powers, seeds."""
    if not _has(device, op):
        _missing(device, op, lambda: conformance.CHECKS[op](device))
    if not conformance.claims(device, op, "float32"):
        return  # (the checks are written in float32; the layout tests cover the rest)
    status, detail = conformance.semantics(device, op)
    if status == "n/a":
        return  # (it needs another op's kernel, whose own row says it is missing)
    record(op, "semantics", status, 0.0, detail)  # (its worst difference: the layout rows')
    assert status == "pass", f"{op} on {device}: {detail}"


def test_fused_groups(device: str) -> None:
    """``Backend.fuse``: each fused program's runner against the same steps run
    kernel by kernel (a backend without the hook has nothing to check)."""
    from .conformance import fuse_entries

    rows = fuse_entries(device)
    for what, status, worst, detail in rows:  # the table's "fused groups" section
        record("fuse", what, status, worst, detail)
    bad = [f"{what}: {detail}" for what, status, _, detail in rows if status == "fail"]
    assert not bad, "; ".join(bad)


# -- smoke: the composites as the core builds them, autograd, training ---------------------

def _put(x, idx, value):
    x[idx] = value
    # a repeated index: the last write wins
    x[:, rc.tensor([1, 1], device=x.device)] = rc.tensor([[-1.0, -2.0]] * x.shape[0], device=x.device)
    return x


SMOKE = {
    "softmax": lambda x: x.softmax(-1), "log_softmax": lambda x: x.log_softmax(0),
    "cumsum": lambda x: x.cumsum(1), "sort": lambda x: x.sort(1, descending=True).values,
    "argsort": lambda x: x.argsort(0), "expm1": lambda x: x.expm1(), "log1p": lambda x: x.abs().log1p(),
    "sigmoid": lambda x: x.sigmoid(), "erf": lambda x: x.erf(), "round": lambda x: (x * 3).round(),
    "remainder": lambda x: x.remainder(0.7), "floor_divide": lambda x: x // 0.7,
    "clamp": lambda x: x.clamp(-1, 1), "mean/var/std": lambda x: (x.mean(0), x.var(1), x.std()),
    "norm": lambda x: x.norm(), "isnan/isinf": lambda x: ((x / 0).isnan(), (x / 0).isinf()),
    "index_put": lambda x: _put(x.clone(), rc.tensor([0, 2], device=x.device), 7.0),
    "cat/stack": lambda x: (rc.cat([x, x[:2]], 0), rc.stack([x, x.t().t()])),
    "topk": lambda x: x.topk(2, dim=1).values, "einsum": lambda x: rc.einsum("ij,kj->ik", x, x),
    "tril/flip": lambda x: (x.tril(), x.flip(0)),
}


@pytest.mark.parametrize("name", list(SMOKE))
def test_composite(device: str, name: str) -> None:
    fn = SMOKE[name]
    xn = layouts.values(rc.float32, 21)
    want = layouts.host_values(fn(rc.tensor(xn, device="cpu")))
    got = layouts.host_values(fn(rc.tensor(xn, device=device)))
    ok, worst, detail = layouts.compare(got, want)
    record(f"smoke: {name}", "float32", "pass" if ok else "fail", worst, detail)
    assert ok, f"{name} on {device}: {detail}"


def _float(device: str):
    return rc.float64 if rc.device(device).supports(rc.float64) else rc.float32


def test_autograd_gradcheck(device: str) -> None:
    dt = _float(device)
    rng = np.random.default_rng(22)
    x = rc.tensor(rng.standard_normal((3, 4)), dtype=dt, device=device, requires_grad=True)
    w = rc.tensor(rng.standard_normal((4, 5)), dtype=dt, device=device, requires_grad=True)
    idx = rc.tensor([2, 0], device=device)

    def f(x, w):
        h = (x @ w).tanh() * x.sum(1, keepdim=True).exp()
        return (h.log_softmax(-1)[idx] + h.amax(0)).sum()

    tol = dict(eps=1e-6, atol=1e-5, rtol=1e-3) if dt is rc.float64 else dict(eps=1e-2, atol=2e-2, rtol=2e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # float32 finite differences, said below
        ok = rc.autograd.gradcheck(f, (x, w), raise_exception=False, **tol)
    record("autograd: gradcheck", dt.name, "pass" if ok else "fail", 0.0 if ok else float("inf"),
           "" if ok else "analytic and numeric gradients differ")
    assert ok, f"gradcheck on {device} ({dt.name}) failed"


test_autograd_gradcheck.row = "autograd: gradcheck"  # type: ignore[attr-defined]


def test_training_loop(device: str) -> None:
    """An MLP trained 40 steps on the device learns, and follows the cpu run."""
    rng = np.random.default_rng(23)
    xn = rng.standard_normal((64, 8)).astype(np.float32)
    yn = (xn[:, 0] + xn[:, 1] > 0).astype(np.int64) + (xn[:, 2] > 1)

    def train(dev: str) -> list[float]:
        rc.manual_seed(0)
        model = rc.nn.Sequential(rc.nn.Linear(8, 16), rc.nn.ReLU(), rc.nn.Linear(16, 3))
        model.to(dev)
        opt = rc.optim.Adam(model.parameters(), lr=0.05)
        x, y = rc.tensor(xn, device=dev), rc.tensor(yn, device=dev)
        return training_losses(model, opt, rc.nn.functional.cross_entropy, x, y, 40)

    got, want = train(device), train("cpu")
    diff = float(np.max(np.abs(np.array(got) - np.array(want))))
    learned = got[-1] < 0.5 * got[0]
    ok = learned and diff < 1e-3 * max(1.0, want[0])
    record("training: 40 Adam steps", "float32", "pass" if ok else "fail", diff,
           "" if ok else f"loss {got[0]:.3f} -> {got[-1]:.3f}; cpu {want[0]:.3f} -> {want[-1]:.3f}")
    assert learned, f"the loss on {device} went {got[0]:.3f} -> {got[-1]:.3f}"
    assert ok, f"{device} departs from cpu by {diff:.3g} in the loss curve"


test_training_loop.row = "training: 40 Adam steps"  # type: ignore[attr-defined]
