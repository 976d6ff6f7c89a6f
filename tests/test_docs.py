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
    assert len(implemented) == 12
    assert "implements 12 of the\nprimitives" in (ROOT / "examples" / "rtx_template" / "README.md").read_text()


def composite_signature_rows() -> str:
    """The guide's table of composite kernels, one row per ``ops.COMPOSITES``
    entry: its signature and what it computes."""
    from rtxcore.dispatch import ops

    rows = ["| kernel | does |", "|---|---|"]
    for spec in ops.COMPOSITES.values():
        sig, _, note = spec.signature.partition("  # ")
        does = spec.doc if spec.doc != spec.signature else note
        if note and spec.doc in note:
            does = note
        elif note and note not in does:
            does = f"{does} ({note})"
        cell = does.replace("|", "\\|")
        rows.append(f"| `{sig}` | {cell} |")
    return "\n".join(rows)


def primitive_tables() -> str:
    """The guide's tables of primitives, one per family, each row a
    ``ops.PRIMITIVES`` entry: its signature and contract, as the spec states them."""
    from rtxcore.dispatch import ops

    families: dict[str, list] = {}
    for spec in ops.PRIMITIVES.values():
        families.setdefault(spec.family, []).append(spec)
    blocks = []
    for family, specs in families.items():
        rows = [f"**{family}**", "", "| kernel | does |", "|---|---|"]
        rows += [f"| `{s.signature}` | {s.doc.replace('|', chr(92) + '|')} |" for s in specs]
        blocks.append("\n".join(rows))
    return "\n\n".join(blocks)


def _guide_block_is(name: str, expected: str) -> str:
    """The guide's block between ``<!-- {name}: generated ... -->`` and ``<!-- end
    of {name} -->`` is ``expected`` (a failure prints the block to paste in).
    Returns the guide."""
    guide = (ROOT / "docs" / "authoring-backends.md").read_text()
    begin = (f"<!-- {name}: generated from rtxcore/dispatch/ops.py; "
             "tests/test_docs.py prints the current block -->\n")
    end = f"\n<!-- end of {name} -->"
    assert begin in guide and end in guide
    block = guide[guide.index(begin) + len(begin):guide.index(end)]
    assert block == expected, f"docs/authoring-backends.md's {name} are stale; put in:\n{expected}"
    return guide


def test_backend_guide_primitive_tables_are_the_spec():
    """One spec: the guide's primitive tables are generated from ops.py (the suite
    reads the same OpSpecs), so a contract changed in one place can't disagree."""
    _guide_block_is("primitive tables", primitive_tables())


def test_backend_guide_composites_contract_and_members():
    """The guide lists every composite's signature (the block between its markers
    is regenerated from ops.py: a new composite fails here until the block is
    pasted in), and documents the contract points a backend author needs."""
    guide = _guide_block_is("composite signatures", composite_signature_rows())
    from rtxcore.dispatch import Backend, DType

    # every optional member of Backend has its signature in the guide
    for member in ("properties(i)", "op_dtypes(i)", "is_accelerator(i)", "notes()",
                   "view(buffer, shape, strides, offset, dtype)", "shares_host_memory",
                   "dlpack_device", "to_dlpack(view, **kwargs)", "from_dlpack(obj, index)",
                   "profiling_start(current)", "profiling_stop()"):
        assert f"`{member}" in guide, member
        assert hasattr(Backend, member.split("(")[0]), member
    # DType's attributes, each named in the guide's table
    for attr in DType.__slots__ + ("is_complex",):
        assert f"| `{attr}` |" in guide, attr
    for needle in ("must be Tensor, not View", "last write wins", "Import heavy libraries lazily",
                   "float32 or wider", 'rc.from_dlpack(x, device="mydev")'):
        assert needle in guide, needle


def test_paths_the_docs_name_exist():
    # the architecture page and the guides name files; a move must update them
    pattern = re.compile(r"\b((?:rtxcore|backends|benchmarks|examples|scripts|tests)/[\w./-]*[\w/])")
    missing, named = [], 0
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for path in pattern.findall(line):
                named += 1
                if "*" not in path and not (ROOT / path).exists():
                    missing.append(f"{doc.name}:{n}: {path}")
    assert named > 50  # the scan read the docs
    assert not missing, "docs name paths that do not exist:\n" + "\n".join(missing)
