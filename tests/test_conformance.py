"""The per-primitive conformance suite (rtxcore/testing/conformance.py) on every
device: one test per primitive in rtxcore/dispatch/ops.py."""

from __future__ import annotations

import pytest

from rtxcore.dispatch import ops
from rtxcore.testing import conformance


def test_every_primitive_has_a_check():
    assert set(conformance.CHECKS) == set(ops.PRIMITIVES)


@pytest.mark.parametrize("op", sorted(ops.PRIMITIVES))
def test_primitive(device, op):
    conformance.CHECKS[op](device)


def test_cpu_passes_every_row():
    res = conformance.run("cpu")
    assert conformance.failed(res) == [], {op: e for op, e in res.items() if op in conformance.failed(res)}
    assert set(ops.PRIMITIVES) <= set(res)


def test_table_reports_missing_and_failing(monkeypatch):
    import rtxcore as rc

    from . import fake_backend

    name = rc.register_backend(fake_backend, name="fake-conf")
    try:
        res = conformance.run("fake:0")
        assert res["cos"] == [("kernel", "missing", 0.0, "no kernel")]
        assert conformance.failed(res) == [], conformance.failed(res)
        # a kernel that computes the wrong thing is reported as a failure
        monkeypatch.setitem(rc.device("fake:0").kernels, "sin", rc.device("fake:0").kernels["tanh"])
        res = conformance.run("fake:0")
        assert conformance.failed(res) == ["sin"]
        assert any("differ" in d for _, s, _, d in res["sin"] if s == "fail")
        table = conformance.format_table(res, "fake:0")
        n = len(ops.PRIMITIVES)
        assert f"{n} primitives on fake:0: {n - 2} pass, 1 fail, 1 missing" in table
        assert table.endswith("conformance: FAIL (1 rows fail)")
    finally:
        rc.unregister_backend(name)


# -- the pytest plugin: pytest --rtx-backend / python -m rtxcore.testing -----------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402


def _run(args: list[str], cwd, env: dict | None = None, code: str | None = None):
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})})


def test_plugin_runs_the_suite_and_ends_with_the_table(tmp_path):
    # in an empty folder: the suite comes from the installed plugin
    p = _run(["pytest", "--rtx-backend", "cpu", "-q", "-p", "no:cacheprovider",
              "-k", "add or matmul or training"], tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    out = p.stdout
    assert "rtxcore conformance: cpu" in out
    rows = {ln.split()[0]: ln.split()[1] for ln in out.splitlines()
            if ln.split() and ln.split()[0] in ("add", "matmul")}
    assert rows == {"add": "pass", "matmul": "pass"}
    assert "training: 40 Adam steps  pass" in out
    # -k left the rest out: they are not in the table
    assert not any(ln.startswith("exp ") for ln in out.splitlines())


def test_a_wrong_kernel_fails_with_its_worst_difference(tmp_path):
    # a backend whose exp is off by 1e-3, registered in-process, then the suite
    code = textwrap.dedent("""
        import sys, numpy as np, pytest, rtxcore as rc
        from rtxcore.dispatch import BackendPlugin
        from rtx_cpu import CPUBackend
        from rtx_cpu.kernels import KERNELS

        class Off(CPUBackend):
            name = "off"

        def bad_exp(out, x):
            np.exp(x, out=out)
            out *= 1.001

        rc.register_backend(BackendPlugin(Off, {**KERNELS, "exp": bad_exp}), name="off-plugin")
        sys.exit(pytest.main(["--rtx-backend", "off", "-q", "-p", "no:cacheprovider", "-k", "exp or add"]))
    """)
    p = _run([], tmp_path, code=code)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr
    exp_row = next(ln for ln in p.stdout.splitlines() if ln.startswith("exp "))
    assert exp_row.split()[1] == "fail" and "worst difference" in exp_row, exp_row
    assert float(exp_row.split()[3]) > 9e-4  # the worst (relative) difference column
    assert next(ln for ln in p.stdout.splitlines() if ln.startswith("add ")).split()[1] == "pass"


def test_an_unknown_backend_is_a_usage_error(tmp_path):
    p = _run(["rtxcore.testing", "nosuchdev"], tmp_path)
    assert p.returncode == 4, p.stdout + p.stderr  # pytest's usage error
    assert "--rtx-backend nosuchdev: unknown device type 'nosuchdev'" in p.stderr + p.stdout


# the template backend from its folder, registered in-process: the test doesn't
# depend on it being installed (CI installs it and runs its table too)
_TEMPLATE = textwrap.dedent("""
    import importlib.util, sys, pytest, rtxcore as rc
    from pathlib import Path
    if "rtx_template" not in sys.modules:
        path = Path(%r) / "examples" / "rtx_template" / "rtx_template" / "__init__.py"
        spec = importlib.util.spec_from_file_location("rtx_template", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        from rtxcore.dispatch.registry import registry
        registry.ensure_loaded()
        if "template" not in registry.backends:
            rc.register_backend(mod, name="template")
    sys.exit(pytest.main(["--rtx-backend", "template", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
""")


def test_template_backend_passes_what_it_implements_and_falls_back_for_the_rest(tmp_path):
    from pathlib import Path

    code = _TEMPLATE % str(Path(__file__).resolve().parent.parent)
    p = _run([], tmp_path, env={"RTX_FALLBACK": "cpu"}, code=code)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    out = p.stdout
    n = len(ops.PRIMITIVES)
    assert f"{n} primitives on template:0: 12 pass, 0 fail, {n - 12} missing" in out
    assert out.count("conformance: PASS") == 1
    assert "cos  " in out and "no kernel; served by the CPU fallback" in out
    assert "training: 40 Adam steps  pass" in out and "autograd: gradcheck      pass" in out
    # strict: without the fallback the smoke tests fail, naming the missing op
    p = subprocess.run([sys.executable, "-c", code, "-k", "training"], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path, env={**os.environ, "RTX_FALLBACK": "error"})
    assert p.returncode == 1 and "has no kernel on device template:0" in p.stdout
    # ... and the table says so: exit status and table agree
    assert "training: 40 Adam steps  fail" in p.stdout and "conformance: FAIL (1 rows fail)" in p.stdout


def test_the_conformance_module_is_the_same_command(tmp_path):
    p = _run(["rtxcore.testing.conformance", "cpu", "-k", "add-float32 or training"], tmp_path)
    q = _run(["rtxcore.testing", "cpu", "-k", "add-float32 or training"], tmp_path)
    assert p.returncode == q.returncode == 0, p.stdout[-2000:] + p.stderr
    table = [ln for ln in p.stdout.splitlines() if ln.startswith(("add ", "training"))]
    assert table and table == [ln for ln in q.stdout.splitlines() if ln.startswith(("add ", "training"))]


def test_other_pytest_runs_do_not_import_rtxcore(tmp_path):
    (tmp_path / "test_other.py").write_text(
        "import sys\n\ndef test_no_rtxcore():\n    assert 'rtxcore' not in sys.modules\n")
    p = _run(["pytest", "-q", "-p", "no:cacheprovider", "test_other.py"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 passed" in p.stdout
    p = _run(["pytest", "--help"], tmp_path)
    assert "--rtx-backend=DEVICE" in p.stdout  # the option is there all the same


# -- the spec's rules, each checked as stated -----------------------------------------


def _fake_with_cast(monkeypatch, cast):
    import rtxcore as rc

    from . import fake_backend

    name = rc.register_backend(fake_backend, name="fake-cast")
    monkeypatch.setitem(rc.device("fake:0").kernels, "cast", fake_backend._wrap("cast", cast))
    return name


def _saturating_cast(out, x):
    """C-correct where the spec speaks; saturates where it says 'unspecified'
    (negative floats to unsigned types become 0, as on CUDA)."""
    import numpy as np

    if x.dtype.kind == "f" and out.dtype.kind == "u":
        np.copyto(out, np.clip(np.trunc(x), 0, None), casting="unsafe")
    else:
        np.copyto(out, x, casting="unsafe")


def _rounding_cast(out, x):
    """Wrong where the spec speaks: float -> int rounds instead of truncating."""
    import numpy as np

    np.copyto(out, np.rint(x) if x.dtype.kind == "f" and out.dtype.kind in "iu" else x,
              casting="unsafe")


def test_cast_rows_check_what_the_spec_states_and_nothing_else(monkeypatch):
    import rtxcore as rc
    from rtxcore.dispatch import ops
    from rtxcore.testing.layouts import check

    assert "a negative value to an unsigned type" in ops.PRIMITIVES["cast"].doc
    name = _fake_with_cast(monkeypatch, _saturating_cast)
    try:
        for layout in ("contiguous", "transposed", "broadcast"):
            assert check("fake:0", "cast", rc.float32, layout)[0] == "pass", layout
    finally:
        rc.unregister_backend(name)


def test_a_failing_row_shows_the_inputs_at_the_first_difference(monkeypatch):
    import re

    import rtxcore as rc
    from rtxcore.testing.layouts import check

    name = _fake_with_cast(monkeypatch, _rounding_cast)
    try:
        status, _, detail = check("fake:0", "cast", rc.float32, "transposed")
    finally:
        rc.unregister_backend(name)
    assert status == "fail"
    m = re.search(r"got (-?\d+), want (-?\d+); from x=(-?[\d.]+)", detail)
    assert m, detail
    got, want, x = int(m[1]), int(m[2]), float(m[3])
    assert want == int(x) and got == round(x) != want  # truncation expected, rounding seen


def test_kernel_rows_show_their_operands(monkeypatch):
    import rtxcore as rc
    from rtxcore.testing import conformance

    from . import fake_backend

    name = rc.register_backend(fake_backend, name="fake-operands")
    try:
        monkeypatch.setitem(rc.device("fake:0").kernels, "sub", rc.device("fake:0").kernels["add"])
        res = conformance.run("fake:0")
    finally:
        rc.unregister_backend(name)
    details = [d for _, s, _, d in res["sub"] if s == "fail"]
    assert details and "; from x=" in details[0] and ", y=" in details[0], details


def test_float16_products_must_accumulate_in_float32_as_the_spec_says(monkeypatch):
    import numpy as np

    import rtxcore as rc
    from rtxcore.dispatch import ops
    from rtxcore.testing.layouts import check

    from . import fake_backend

    assert "float16 accumulates in float32" in ops.PRIMITIVES["prod"].doc

    def prod_in_float16(out, x, axes):  # multiplies in float16, rounding at every step
        acc = np.ones(out.shape, np.float16)
        moved = np.moveaxis(x, axes, tuple(range(len(axes)))).reshape((-1,) + out.shape) \
            if axes else x[None]
        for row in moved:
            acc = (acc * row).astype(np.float16)
        np.copyto(out, acc.reshape(out.shape))

    name = rc.register_backend(fake_backend, name="fake-prod")
    try:
        assert check("fake:0", "prod", rc.float16, "contiguous")[0] == "pass"
        monkeypatch.setitem(rc.device("fake:0").kernels, "prod",
                            fake_backend._wrap("prod", prod_in_float16))
        status, _, detail = check("fake:0", "prod", rc.float16, "contiguous")
    finally:
        rc.unregister_backend(name)
    assert status == "fail" and "differ" in detail, detail  # a wrong value, not a crash


def test_a_checkout_run_for_another_backend_skips_the_missing_backends_tests(tmp_path):
    """RTX_TEST_DEVICES=mydev pytest tests, where rtx_cuda is not installed: its
    module skips with the reason instead of ending the collection."""
    from pathlib import Path

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "rtx_cuda.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'rtx_cuda'\", name='rtx_cuda')\n")
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               RTX_TEST_DEVICES="cpu")
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                          "tests/test_cuda.py"], capture_output=True, text=True, timeout=300,
                         cwd=root, env=env)
    assert res.returncode in (0, 5), res.stdout + res.stderr  # 5: nothing left to run
    assert "rtx_cuda (the CUDA backend) is not installed" in res.stdout, res.stdout
    assert "error" not in res.stdout.lower().split("short test summary")[0], res.stdout


def test_a_filtered_run_says_it_is_partial(tmp_path):
    n = len(ops.PRIMITIVES)
    p = _run(["rtxcore.testing", "template", "-k", "matmul or fuse"], tmp_path,
             env={"RTX_FALLBACK": "cpu"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    assert f"1 of {n} primitives on template:0: 1 pass, 0 fail, 0 missing" in p.stdout
    # the template has no fuse hook: its row is missing, and the count says so
    assert "1 fused groups: 0 pass, 0 fail, 1 missing" in p.stdout
    assert p.stdout.count("conformance: PASS -- a partial run") == 1
    assert len([ln for ln in p.stdout.splitlines() if ln.startswith("conformance:")]) == 1
