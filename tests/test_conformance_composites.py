"""The conformance suite checks every kernel a backend supplies, each in
isolation: composites a backend overrides, blame on the right op when one is
missing, special values, stable seeds, and a primitive declared but not built."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zlib
from collections import Counter
from typing import Any

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch import BackendPlugin, ops
from rtxcore.testing import conformance, layouts


def _cpu_like(name: str, kernels: dict[str, Any]) -> Any:
    """A plugin for backend ``name``: the cpu backend with ``kernels``."""
    from rtx_cpu import CPUBackend

    class Dev(CPUBackend):
        pass

    Dev.name = name

    return BackendPlugin(Dev, kernels)


@pytest.fixture
def backend():
    """Register a cpu-like backend with the given kernels; unregister after."""
    names = []

    def make(name: str, kernels: dict[str, Any]) -> str:
        names.append(rc.register_backend(_cpu_like(name, kernels), name=name + "-plugin"))
        return name

    yield make
    for n in names:
        rc.unregister_backend(n)


def test_wrong_composite_overrides_fail_naming_each_op(backend):
    from rtx_cpu.kernels import KERNELS

    wrong = {"ceil": "floor", "tan": "sin", "log2": "log", "trunc": "round", "logical_xor": "eq"}
    dev = backend("wrongcomp", {**KERNELS, **{op: KERNELS[by] for op, by in wrong.items()}})
    res = conformance.run(dev)
    assert sorted(conformance.failed(res)) == sorted(wrong)
    table = conformance.format_table(res, dev)
    for op in wrong:
        row = next(ln for ln in table.splitlines() if ln.startswith(op + " "))
        assert row.split()[1] == "fail", row
    assert "-- composite kernels" in table
    assert f"conformance: FAIL ({len(wrong)} rows fail)" in table


def test_the_right_overrides_pass_and_are_all_checked(backend):
    from rtx_cpu.kernels import KERNELS

    dev = backend("rightcomp", dict(KERNELS))
    res = conformance.run(dev)
    assert conformance.failed(res) == []
    supplied = [op for op in ops.COMPOSITES if op in KERNELS]
    assert supplied and all(op in res and res[op] for op in supplied)
    assert conformance.format_table(res, dev).endswith("conformance: PASS")


def test_a_missing_where_is_blamed_on_where_not_masked_select(backend, monkeypatch):
    from rtx_cpu.kernels import KERNELS

    monkeypatch.setenv("RTX_FALLBACK", "error")  # strict: nothing stands in for where
    dev = backend("nowhere", {k: v for k, v in KERNELS.items() if k != "where"})
    res = conformance.run(dev)
    assert conformance.failed(res) == ["where"]
    assert res["where"][0][:2] == ("kernel", "fail") and "no kernel" in res["where"][0][3]
    statuses = {s for _, s, _, _ in res["masked_select"]}
    assert statuses == {"pass"}, res["masked_select"]
    assert len(res["masked_select"]) > 20  # (every dtype and layout ran)
    monkeypatch.delenv("RTX_FALLBACK")  # not strict: missing, and nothing fails
    res = conformance.run(dev)
    assert res["where"] == [("kernel", "missing", 0.0, "no kernel")] and conformance.failed(res) == []


def test_the_strict_suite_fails_the_missing_where_row_and_passes_masked_select(tmp_path):
    """The same through the pytest suite: its table and its exit status."""
    code = (
        "import sys, pytest, rtxcore as rc\n"
        "sys.path.insert(0, %r)\n"
        "from test_conformance_composites import _cpu_like\n"
        "from rtx_cpu.kernels import KERNELS\n"
        "rc.register_backend(_cpu_like('nowhere', {k: v for k, v in KERNELS.items() if k != 'where'}),"
        " name='nowhere-plugin')\n"
        "sys.exit(pytest.main(['--rtx-backend', 'nowhere', '-q', '-p', 'no:cacheprovider',"
        " '-k', 'where or masked_select']))\n") % os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env={**os.environ, "RTX_FALLBACK": "error"})
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr
    rows = {ln.split()[0]: ln.split()[1] for ln in p.stdout.splitlines()
            if ln.split() and ln.split()[0] in ("where", "masked_select")}
    assert rows == {"where": "fail", "masked_select": "pass"}, p.stdout[-3000:]
    assert "conformance: FAIL (1 rows fail)" in p.stdout


def test_a_wrong_where_fails_only_where(backend):
    from rtx_cpu.kernels import KERNELS

    def where_swapped(out, cond, x, y):
        KERNELS["where"](out, cond, y, x)

    dev = backend("badwhere", {**KERNELS, "where": where_swapped})
    assert conformance.failed(conformance.run(dev)) == ["where"]


def test_each_row_calls_only_its_own_kernel(backend):
    """Isolation: a row runs its op's kernel plus allocation and transfers."""
    from rtx_cpu.kernels import KERNELS

    calls: Counter[str] = Counter()

    def traced(op: str, k: Any) -> Any:
        def kernel(*args: Any) -> Any:
            calls[op] += 1
            return k(*args)

        return kernel

    dev = backend("traced", {op: traced(op, k) for op, k in KERNELS.items()})
    allowed = {"empty", "from_host", "to_host"}
    rows = [*ops.PRIMITIVES, *(op for op in ops.COMPOSITES if op in layouts.COMPOSITE_ROWS)]
    for op in rows:
        if op in layouts.CASES:
            continue  # (memory ops: each is its own front-end; checked below)
        for dt in layouts.claimed_dtypes(dev, op):
            for lay in layouts.LAYOUTS:
                calls.clear()
                layouts.composite_check(dev, op, dt, lay) if op in ops.COMPOSITES else \
                    layouts.check(dev, op, dt, lay)
                assert set(calls) <= allowed | {op}, (op, dt.name, lay, dict(calls))
    for op in ("full", "copy", "cast", "arange", "uniform", "normal"):
        calls.clear()
        layouts.check(dev, op, rc.float32, "contiguous")
        assert set(calls) <= allowed | {op}, (op, dict(calls))


def test_every_elementwise_and_reduction_row_gets_the_special_values():
    f32 = rc.float32
    fi = np.finfo(np.float32)
    for op, spec in [*ops.PRIMITIVES.items(), *ops.COMPOSITES.items()]:
        if spec.family not in ("unary", "binary", "compare", "ternary", "reduce") \
                or "float32" not in ops.kernel_dtypes(spec):
            continue
        call = layouts.calls_for(op, f32, "contiguous")[0]
        seen = np.concatenate([np.asarray(a.a, np.float64).ravel() for a in call.args
                               if isinstance(a, layouts.Arr) and a.a.dtype == np.float32])
        assert np.isnan(seen).any(), op
        for v in (0.0, 0.5, 2.5, -1.5, float(fi.tiny)):
            assert (seen == v).any(), (op, v)
        assert (np.signbit(seen) & (seen == 0)).any(), (op, "-0.0")
        if op not in ("prod", "argmax", "argmin") or op == "sum":
            assert (seen == math.inf).any() or op == "prod", (op, "inf")
        if op not in ("sum", "prod"):
            assert (seen == float(fi.max)).any(), (op, "max")
    i32 = np.iinfo(np.int32)
    for op in ("add", "neg", "max", "maximum", "eq"):
        a = layouts.calls_for(op, rc.int32, "contiguous")[0].args[0].a
        assert a.min() == i32.min and a.max() == i32.max, op


def test_float16_sums_accumulate_in_float32_on_every_axis_and_layout(backend):
    """The injected bug: float16 sum accumulating in float16 along an outer axis."""
    from rtx_cpu.kernels import KERNELS

    def sum16(out, x, axes):
        if x.dtype != np.float16 or axes[0] != 0:
            return KERNELS["sum"](out, x, axes)
        acc = np.zeros(x.shape[1:], np.float16)
        for row in x:  # row by row, in float16
            acc = (acc + row).astype(np.float16)
        out[...] = acc.reshape(out.shape) if len(axes) == 1 else acc.sum(dtype=np.float32)

    dev = backend("sum16", {**KERNELS, "sum": sum16})
    for lay in ("contiguous", "transposed", "sliced", "offset", "broadcast"):
        status, _, detail = layouts.check(dev, "sum", rc.float16, lay)
        assert status == "fail" and "accumulation" in detail, (lay, status, detail)
    assert layouts.check(dev, "sum", rc.float32, "contiguous")[0] == "pass"


def test_sign_of_nan_and_zero_are_checked(backend):
    """The injected bugs: sign(nan) = 0, sign(+-0) = 1."""
    from rtx_cpu.kernels import KERNELS

    def sign_nan0(out, x):
        np.copyto(out, np.nan_to_num(np.sign(x)))

    def sign_zero1(out, x):
        np.copyto(out, np.where(x == 0, 1, np.sign(x)).astype(out.dtype))

    for name, k in (("signnan", sign_nan0), ("signzero", sign_zero1)):
        dev = backend(name, {**KERNELS, "sign": k})
        assert layouts.check(dev, "sign", rc.float32, "contiguous")[0] == "fail", name


def test_a_reference_that_raises_is_a_failure_not_na(monkeypatch):
    def broken(device, dtype, layout, tested=""):
        raise ValueError("the reference broke")

    monkeypatch.setitem(layouts.CASES, "full", broken)
    status, _, detail = layouts.check("cpu", "full", rc.float32, "contiguous")
    assert status == "fail" and "the cpu reference raised ValueError" in detail


def test_seeds_are_the_same_in_every_process():
    assert layouts.stable_seed("add") == zlib.crc32(b"add")
    code = "from rtxcore.testing import conformance as c; print(c._data('add').tobytes().hex())"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and conformance._data("add").tobytes().hex() in outs.pop()


def test_a_primitive_declared_only_in_ops_fails_naming_what_is_missing(monkeypatch):
    spec = ops._e("frobnicate", "binary", "frobnicate x with y", inplace="frobnicate_",
                  operands=("y", "x"))
    monkeypatch.setitem(ops.PRIMITIVES, "frobnicate", spec)
    with pytest.raises(AssertionError) as e:
        conformance.assert_complete()
    msg = str(e.value)
    for piece in ("frobnicate lacks", "a front-end: rtxcore.frobnicate", "in-place twin Tensor.frobnicate_",
                  "a NumPy reference", "a kernel in the cpu backend", "a kernel in the opencl backend"):
        assert piece in msg, (piece, msg)
    # (its conformance row and semantic check are generated from the spec)
    assert spec.signature == "frobnicate(out, y, x)"
    # a family without generated rows: the conformance modules refuse to load
    code = ("from rtxcore.dispatch import ops\n"
            "ops.PRIMITIVES['frobnicate'] = ops.OpSpec('frobnicate', 'indexing', 'frobnicate(out, x)', 'f')\n"
            "import rtxcore.testing.layouts\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "frobnicate" in p.stderr and "conformance row" in p.stderr


def test_every_declared_primitive_is_complete():
    conformance.assert_complete()


def test_the_dtypes_the_core_sends_each_kernel_are_its_declared_domain(backend):
    """OpSpec.dtypes is what the front-ends really send (traced on every dtype)."""
    from rtx_cpu.kernels import KERNELS

    seen: dict[str, set[str]] = {}

    def traced(op: str, k: Any) -> Any:
        def kernel(out: Any, *args: Any) -> Any:
            x = next((a for a in args if hasattr(a, "dtype")), out)
            seen.setdefault(op, set()).add(np.dtype(x.dtype).name)
            return k(out, *args)

        return kernel

    dev = backend("domains", {op: (traced(op, k) if op not in ops.REQUIRED else k)
                              for op, k in KERNELS.items()})
    for name in ops.DOMAINS["all"]:
        dt = layouts.dtype_named(name)
        x = rc.tensor(np.ones((2, 3)), dtype=dt, device=dev)
        for op, spec in ops.PRIMITIVES.items():
            if spec.family not in ("unary", "binary", "compare", "reduce") or op in ("argmax", "argmin"):
                continue
            fn = getattr(rc, next((a for a in spec.aliases if hasattr(rc, a)), op))
            try:
                fn(x, 1) if spec.family == "reduce" else fn(x) if spec.family == "unary" else fn(x, x)
            except (RuntimeError, TypeError):
                pass  # (the core refuses some dtypes: -x of bool)
    for op, spec in ops.PRIMITIVES.items():
        if op in seen and spec.family in ("unary", "binary", "compare", "reduce"):
            assert seen[op] <= set(ops.kernel_dtypes(spec)), (op, seen[op])


def test_the_dtype_table_in_the_guide_is_generated_from_ops():
    from pathlib import Path

    guide = (Path(__file__).resolve().parent.parent / "docs" / "authoring-backends.md").read_text()
    begin, end = guide.index(conformance.TABLE_BEGIN), guide.index(conformance.TABLE_END)
    shown = guide[begin + len(conformance.TABLE_BEGIN):end].strip()
    assert shown == conformance.dtype_table(), "regenerate it: rtxcore.testing.conformance.dtype_table()"
    for name in (*ops.PRIMITIVES, *ops.COMPOSITES):
        assert f"| `{name}` |" in shown, name
