"""Reading a fused program (``Backend.fuse``): its form checked, per-element steps, operand sizes.

The core makes these programs (``rtxcore.jit``'s fusion pass, or a graph file
its loader validated); a backend's runner starts from :func:`elementwise_steps`
-- the one check of "is this a program I may run" every built-in backend
shares -- and sizes its operands with :func:`input_sizes` and
:func:`output_sizes`, as the core does when it calls the runner.
"""

from __future__ import annotations

from typing import Any

__all__ = ["elementwise_steps", "input_kinds", "input_sizes", "output_sizes"]

_INPUT_KINDS = ("in", "scalar", "row", "col")


def elementwise_steps(prog: dict[str, Any]) -> list[Any] | None:
    """The steps a runner evaluates element by element -- every step, or all
    but the sum that ends a reducing program -- or None when ``prog`` is not
    one a runner may take (the runner then returns None and the core runs the
    steps one by one). None for: a ``"reduce"`` other than ``"rows"`` or
    ``"all"``, or one whose last step is not a sum of one earlier step stored
    as an output; a ``cols`` that is not a positive int dividing ``n``, or no
    ``cols`` where a row or column operand or a ``"rows"`` sum needs one; an
    output that names no step; an operand of an unknown kind, naming no input
    or no earlier step, or an input read two ways. A runner whose code indexes
    memory with these numbers (a C loop, a device kernel) relies on them."""
    steps, n = prog["steps"], prog["n"]
    reduce = prog.get("reduce")
    if reduce not in (None, "rows", "all") or not steps:
        return None
    cols = prog.get("cols", 0)
    if cols and (type(cols) is not int or cols < 1 or n % cols) or reduce == "rows" and not cols:
        return None
    last = len(steps) - 1
    if any(type(k) is not int or not 0 <= k <= last for k in prog["outputs"]):
        return None
    if reduce:
        op, _, operands = steps[-1]
        if op != "sum" or last not in prog["outputs"] or len(operands) != 1 or \
                operands[0][0] != "step" or type(operands[0][1]) is not int or \
                not 0 <= operands[0][1] < last:
            return None
        steps = steps[:-1]
    n_in = len(prog["inputs"])
    read_as: dict[int, str] = {}
    for k, (_, _, operands) in enumerate(steps):
        for kind, v in operands:
            if kind == "step":
                if type(v) is not int or not 0 <= v < k:
                    return None
            elif kind in _INPUT_KINDS:
                # each input read one way: the size it is given is the size read
                if type(v) is not int or not 0 <= v < n_in or read_as.setdefault(v, kind) != kind:
                    return None
                if kind in ("row", "col") and not cols:
                    return None
            elif kind != "const":
                return None
    return steps


def input_kinds(prog: dict[str, Any]) -> list[str]:
    """How a fused program reads each input: "in", "scalar", "row" or "col"."""
    kinds = ["in"] * len(prog["inputs"])
    for _, _, operands in prog["steps"]:
        for kind, v in operands:
            if kind in ("scalar", "row", "col"):
                kinds[v] = kind
    return kinds


def input_sizes(prog: dict[str, Any]) -> list[int]:
    """The element count of each input of a fused program: ``n`` for "in", 1 for
    "scalar", the row length ``cols`` for "row", the row count for "col"."""
    n, cols = prog["n"], prog.get("cols", 0)
    size = {"in": n, "scalar": 1, "row": cols, "col": n // cols if cols else 0}
    return [size[k] for k in input_kinds(prog)]


def output_sizes(prog: dict[str, Any]) -> list[int]:
    """The element count of each output of a fused program: ``n``, but for the
    sum ending a reducing program: one per row (``"rows"``) or one (``"all"``)."""
    n, last = prog["n"], len(prog["steps"]) - 1
    red = {"rows": n // prog["cols"] if prog.get("cols") else n, "all": 1}.get(prog.get("reduce"))
    return [red if red is not None and k == last else n for k in prog["outputs"]]
