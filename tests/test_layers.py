"""Imports point down only (docs/architecture.md's layers), read from the source
with ``ast`` (an import inside a function counts too):

    contract   rtxcore.dispatch (+ dtype, shape): what a backend sees
    core       tensor, device, ops, autograd, random, settings, ...
    public     rtxcore itself, nn, optim, amp, cuda, accelerator, jit,
               distributed, profiler, utils, linalg, serialization, ...
    backends   rtx_cpu, rtx_opencl, rtx_cuda, third parties: the contract only

A module may import its own layer and those below. The only import circle is
the deliberate one between the op front-ends and autograd (backward rules are
written with ops, ops record nodes), with the tensor that both make."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

import pytest

import rtxcore

CORE = Path(rtxcore.__file__).resolve().parent
REPO = CORE.parent
BACKENDS = sorted(p for p in (REPO / "backends").glob("rtx_*/rtx_*") if p.is_dir())
TEMPLATE = REPO / "examples" / "rtx_template" / "rtx_template"

# modules of the dispatch contract: a backend's whole view of rtxcore
CONTRACT = ("rtxcore.dispatch", "rtxcore.dtype", "rtxcore.shape")
# the public namespaces: above the core, never imported by it
PUBLIC = ("rtxcore", "rtxcore.__main__", "rtxcore._cli", "rtxcore.accelerator",
          "rtxcore.amp", "rtxcore.backends", "rtxcore.cuda", "rtxcore.distributed",
          "rtxcore.distributions", "rtxcore.hub", "rtxcore.jit", "rtxcore.linalg",
          "rtxcore.multiprocessing",
          "rtxcore.nn", "rtxcore.onnx",
          "rtxcore.optim", "rtxcore.profiler", "rtxcore.serialization", "rtxcore.sparse",
          "rtxcore.testing", "rtxcore.utils")
LEVEL = {"contract": 0, "core": 1, "public": 2}

# the one deliberate circle in the core: ops <-> autograd (and the tensor both return)
CIRCLE = ("rtxcore.ops", "rtxcore.autograd", "rtxcore.tensor", "rtxcore._tensor_api")
# and one among the public namespaces: nn <-> jit, because PyTorch's model.compile()
# (nn.Module) calls compile, which traces modules (rtxcore.jit reads nn's layers
# and functional ops to decompose them)
PUBLIC_CIRCLE = ("rtxcore.nn", "rtxcore.jit")

# deliberate upward imports, each with its reason: (importer, imported) -> why
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def layer(module: str) -> str:
    """``contract``, ``core`` or ``public`` for a module of rtxcore."""
    if _within(module, CONTRACT):
        return "contract"
    if module == "rtxcore" or any(_within(module, (p,)) for p in PUBLIC[1:]):
        return "public"
    return "core"


def _sources() -> dict[str, Path]:
    """Every module of rtxcore and of the in-tree backends, by dotted name."""
    found = {}
    for root in [CORE, *BACKENDS, TEMPLATE]:
        for path in root.rglob("*.py"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _sources()


def _module_name(path: Path) -> str:
    return next(name for name, p in MODULES.items() if p == path)


def _imports(path: Path, text: str | None = None, name: str | None = None) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in ``path`` (or in ``text`` as if
    it were that file); ``from . import x`` yields ``package.x`` when x is a
    module, else the package."""
    name = name or _module_name(path)
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
            for a in node.names:  # `from pkg import sub` imports the module pkg.sub
                sub = f"{mod}.{a.name}"
                out.append((node.lineno, sub if sub in MODULES or node.module is None else mod))
    return out


def _known(module: str) -> str | None:
    """The module of ours that an import names (its longest known prefix)."""
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return module or None


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, frozenset[str]]:
    """module -> the modules of ours it imports (itself left out)."""
    graph = {}
    for name, path in MODULES.items():
        targets = {_known(m) for _, m in _imports(path, name=name)}
        graph[name] = frozenset(t for t in targets if t and t != name)
    return graph


def circles(graph: dict[str, Any]) -> list[set[str]]:
    """The import circles: strongly connected parts of more than one module
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    part = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        part.add(w)
                        if w == v:
                            break
                    if len(part) > 1:
                        found.append(part)
    return found


def test_the_scan_finds_the_tree():
    assert len(MODULES) > 120 and "rtxcore.ops.core" in MODULES and "rtx_cpu.kernels" in MODULES
    graph = import_graph()
    assert "rtxcore.dispatch.registry" in graph["rtxcore.device"]
    assert "rtxcore.dispatch" in graph["rtx_cpu"] or "rtxcore.dispatch.types" in graph["rtx_cpu"]


def test_imports_point_down():
    bad = []
    for name, targets in import_graph().items():
        if not name.startswith("rtxcore"):
            continue
        for target in targets:
            if not target.startswith("rtxcore"):
                continue
            if LEVEL[layer(target)] > LEVEL[layer(name)] and (name, target) not in EXCEPTIONS:
                bad.append(f"{name} ({layer(name)}) imports {target} ({layer(target)})")
    assert not bad, "imports that point up:\n" + "\n".join(sorted(bad))


def test_exceptions_are_still_needed():
    graph = import_graph()
    stale = [pair for pair in EXCEPTIONS if pair[1] not in graph.get(pair[0], ())]
    assert not stale, f"listed exceptions no longer imported (remove them): {stale}"


def test_backends_import_only_the_contract():
    bad = []
    for name, path in MODULES.items():
        if name.startswith("rtxcore"):
            continue
        for line, mod in _imports(path, name=name):
            if (mod == "rtxcore" or mod.startswith("rtxcore.")) and not _within(mod, ("rtxcore.dispatch",)):
                bad.append(f"{path.relative_to(REPO)}:{line} imports {mod}")
    assert not bad, "a backend reaches past rtxcore.dispatch:\n" + "\n".join(bad)


def test_the_only_circles_are_ops_and_autograd_and_nn_and_jit():
    found = circles(import_graph())
    outside = [sorted(c) for c in found
               if not (all(_within(m, CIRCLE) for m in c) or all(_within(m, PUBLIC_CIRCLE) for m in c))]
    assert not outside, "import circles:\n" + "\n".join(" <-> ".join(c) for c in outside)
    assert len(found) <= 2, f"more than two circles: {[sorted(c) for c in found]}"


def test_dispatch_imports_nothing_above_itself():
    graph = import_graph()
    names = [n for n in MODULES if _within(n, CONTRACT)]
    assert len(names) >= 7  # the scan found the package
    bad = [f"{n} imports {t}" for n in names for t in graph[n]
           if t.startswith("rtxcore") and layer(t) != "contract"]
    assert not bad, "the dispatch layer imports from above it:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, expected", [
    ("from ..device import Device", "rtxcore.device"),
    ("from .. import tensor", "rtxcore.tensor"),
    ("import rtxcore.ops.core", "rtxcore.ops.core"),
    ("def f():\n    from ..autograd import tape", "rtxcore.autograd.tape"),
    ("from .. import nn", "rtxcore.nn"),
])
def test_the_scan_catches_imports_from_above(source, expected):
    placed = CORE / "dispatch" / "fallback.py"  # read as if it were this module
    found = [_known(mod) for _, mod in _imports(placed, source)]
    assert [m for m in found if m and layer(m) != "contract"] == [expected]
    allowed = ("from ..dtype import BY_NAME\nfrom .types import View\nimport numpy\n"
               "from . import ops\nfrom rtxcore.shape import is_contiguous\n")
    assert all(layer(_known(m)) == "contract" for _, m in _imports(placed, allowed) if _known(m))


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [{"x", "y"}]


@pytest.mark.parametrize("module, expected", [
    ("rtxcore.dispatch.registry", "contract"), ("rtxcore.dtype", "contract"),
    ("rtxcore.ops.core", "core"), ("rtxcore.tensor", "core"), ("rtxcore.device", "core"),
    ("rtxcore.nn.functional", "public"), ("rtxcore", "public"), ("rtxcore.linalg", "public"),
])
def test_layers_of_modules(module, expected):
    assert layer(module) == expected
