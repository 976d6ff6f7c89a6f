"""The conformance suite run in process (``run``: every row of a device, as one
table), and what a primitive declared in ``rtxcore.dispatch.ops`` still lacks
(``audit``).

``python -m rtxcore.testing DEVICE`` (or ``pytest --rtx-backend DEVICE``) is the
one command: it runs every row of ``rtxcore.testing.layouts`` (every kernel the
device supplies -- primitives and the composites it overrides -- on every dtype
it claims and every layout, each op in isolation), the semantic checks of
``rtxcore.testing.checks``, ``Backend.fuse``'s programs
(``rtxcore.testing.fused_programs``), and smoke tests of composites, autograd
and training, and prints one table. ``python -m rtxcore.testing.conformance
DEVICE`` is the same command.

The semantic checks go through the public front-ends (scalars, in place, integer
powers, seeds, ownership of host memory) and read each op's facts from its
``OpSpec`` in ``rtxcore.dispatch.ops``. From Python::

    from rtxcore.testing.conformance import run, format_table
    print(format_table(run("mydev"), "mydev"))
"""

from __future__ import annotations

from typing import Any

from ..dispatch import ops as OPS
from .checks import CHECKS, Check, _data, _strided, claims, semantics  # noqa: F401
from .fused_programs import FUSE_ALIAS, FUSE_PROGRAMS, Entry, fuse_entries  # noqa: F401


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
        lacks.append("a conformance row (rtxcore/testing/rows.py)")
    if name not in CHECKS:
        lacks.append("a semantic check (rtxcore/testing/checks.py)")
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
