"""Imports point down only (shared/DESIGN.md's layers): what a backend sees,
``rtxcore/dispatch/``, may import from the core nothing but ``dtype`` and
``shape`` (which themselves import only from ``dispatch``). Checked on the
source with ``ast``, so an import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rtxcore

CORE = Path(rtxcore.__file__).resolve().parent
# modules of the core that the dispatch layer may use; everything else of
# rtxcore (tensor, device, ops, autograd, nn, ...) is above it
ALLOWED = {"rtxcore.dtype", "rtxcore.shape"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in ``path`` (or in ``text`` as if
    it were that file); ``from . import x`` yields ``package.x`` (x may be a module)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    source = path.read_text() if text is None else text
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if node.module is None:  # from . import a, b: each may be a module
                out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, mod))
    return out


def _above(module: str) -> bool:
    """Whether ``module`` is part of the core above the dispatch layer."""
    if module != "rtxcore" and not module.startswith("rtxcore."):
        return False  # the standard library, numpy, pluggy, ...
    if module == "rtxcore.dispatch" or module.startswith("rtxcore.dispatch."):
        return False
    return not any(module == a or module.startswith(a + ".") for a in ALLOWED)


def _violations(paths: list[Path]) -> list[str]:
    return [f"{p.relative_to(CORE.parent)}:{line} imports {mod}"
            for p in paths for line, mod in _imports(p) if _above(mod)]


def test_dispatch_imports_nothing_above_itself():
    paths = sorted((CORE / "dispatch").glob("*.py"))
    assert len(paths) >= 5  # the scan found the package
    bad = _violations(paths)
    assert not bad, "the dispatch layer imports from above it:\n" + "\n".join(bad)


def test_dtype_and_shape_import_only_from_dispatch():
    # the two core modules dispatch may use must not reach up either
    bad = _violations([CORE / "dtype.py", CORE / "shape.py"])
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source, expected", [
    ("from ..device import Device", "rtxcore.device"),
    ("from .. import tensor", "rtxcore.tensor"),
    ("import rtxcore.ops.core", "rtxcore.ops.core"),
    ("def f():\n    from ..autograd import tape", "rtxcore.autograd"),
])
def test_the_scan_catches_imports_from_above(source, expected):
    placed = CORE / "dispatch" / "fallback.py"  # read as if it were this module
    found = _imports(placed, source)
    assert [mod for _, mod in found if _above(mod)] == [expected]
    allowed = ("from ..dtype import BY_NAME\nfrom .types import View\nimport numpy\n"
               "from . import ops\nfrom rtxcore.shape import is_contiguous\n")
    assert not [mod for _, mod in _imports(placed, allowed) if _above(mod)]
