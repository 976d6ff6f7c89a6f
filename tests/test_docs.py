"""The README's example and the demo run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Ten lines\n\n```python\n(.*?)```", text, re.S).group(1)
    assert len(code.strip().splitlines()) <= 10
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "tensor([26., 36.])" in r.stdout  # (x.T @ x + 1).sum(0) for x = [[1, 2], [3, 4]]
    # d/dw sum(tanh(x @ w)) = x.T @ (1 - tanh(x @ w)**2), for w = [0.5, -1]
    import numpy as np

    xn, wn = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, -1.0])
    expected = xn.T @ (1 - np.tanh(xn @ wn) ** 2)
    last = r.stdout.strip().splitlines()[-1]
    got = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", last)]
    assert np.allclose(got, expected, atol=1e-4), (last, expected)


def test_demo_fits_its_line():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rtx-cpu" in r.stdout and "fit OK" in r.stdout


def test_backend_guide_covers_every_primitive_and_the_template_is_as_described():
    from rtxcore.dispatch import ops

    guide = (ROOT / "docs" / "authoring-backends.md").read_text()
    for name, spec in ops.PRIMITIVES.items():
        assert f"`{spec.signature}`" in guide, f"{name} missing from docs/authoring-backends.md"
    for needle in ("--rtx-backend", "set_fallback", "RTX_FALLBACK", "op_dtypes", "tryfirst",
                   "--kernels", "examples/rtx_template"):
        assert needle in guide, needle
    import importlib.util

    spec = importlib.util.spec_from_file_location("rtx_template_doc", ROOT / "examples" / "rtx_template"
                                                  / "rtx_template" / "__init__.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    implemented = [op for op in ops.PRIMITIVES if op in mod.KERNELS]
    assert len(implemented) == 12 and len(ops.PRIMITIVES) == 48
    assert "12 of the 48" in (ROOT / "examples" / "rtx_template" / "README.md").read_text()
