"""The graph IR's pieces and their JSON: ``Node``, ``Ref``, the file format's name
and version, and the encoding of kernel arguments.

``graph.Graph`` is built of these; ``validate`` reads a file's JSON back into
them (strictly) without needing the ``Graph`` class, so both sit above this
module.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

from .. import dtype as D

FORMAT = "rtxcore.graph"
VERSION = 1


@dataclass
class Node:
    """One step. ``id`` names the value it defines (-1 for none): a buffer version
    for ``input``/``const``/``alloc`` and the first written region's new version
    for a kernel; a view for ``view``. ``writes`` pairs each out region (a view
    id) with the buffer version the write creates."""

    id: int
    op: str
    args: list[Any] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    writes: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Ref:
    """A value used as a kernel argument (a view or a whole buffer version)."""

    id: int


def iter_refs(args: Any) -> Iterator[Ref]:
    """Every ``Ref`` in a node's args, through tuples and lists."""
    for a in args:
        if isinstance(a, Ref):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from iter_refs(a)


# JSON for kernel arguments: refs, scalars (floats keep their type; inf/nan
# spelled out), tuples, None, strings and dtypes, each tagged where JSON is ambiguous.
# (Read back, strictly, by rtxcore.jit.validate.decode_arg.)

def encode_arg(a: Any) -> Any:
    if isinstance(a, Ref):
        return {"ref": a.id}
    if isinstance(a, bool) or a is None or isinstance(a, str):
        return a
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        return {"float": repr(a)} if not math.isfinite(a) or a == int(a) else a
    if isinstance(a, (list, tuple)):
        return {"tuple": [encode_arg(x) for x in a]} if isinstance(a, tuple) else \
            [encode_arg(x) for x in a]
    if isinstance(a, D.DType):
        return {"dtype": a.name}
    raise TypeError(f"can't store kernel argument of type {type(a).__name__} in a graph")


def encode_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """A fused node's attrs as JSON: its program's non-finite constants (a
    ``where`` filling ``-inf``) tagged as kernel arguments are, JSON has none."""
    prog = attrs.get("program")
    if not isinstance(prog, dict) or "steps" not in prog:
        return attrs
    steps = [[op, dt, [[k, {"float": repr(v)} if k == "const" and isinstance(v, float)
                        and not math.isfinite(v) else v] for k, v in operands]]
             for op, dt, operands in prog["steps"]]
    return {**attrs, "program": {**prog, "steps": steps}}


def dumps(graph: Any) -> str:
    """A graph's document (``Graph.to_json``) as JSON text."""
    return json.dumps(graph.to_json(), allow_nan=False)
