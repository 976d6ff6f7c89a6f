"""Passes that take work out of a graph, each returning a new Graph:

- ``dead_code``: drop kernels whose results nobody reads (writes into inputs,
  which a caller sees, and the outputs stay);
- ``cse``: a pure kernel computing what an earlier one computed (same op, same
  operands) reuses that result;
- ``fold_constants``: a kernel whose operands are all constants runs once, now,
  and becomes a constant.
"""

from __future__ import annotations

from typing import Any

from .graph import (Graph, Node, Ref, clone, final_versions, first_versions, iter_refs,
                    output_ids, rename_outputs, root_of)

PURE_SKIP = {"uniform", "normal", "empty", "from_host", "to_host"}


def dead_code(g: Graph) -> Graph:
    """Drop kernels (and views, allocs, constants) no output depends on. Writes
    into input buffers are kept: a caller sees them."""
    g = clone(g)
    first = first_versions(g)
    inputs = {n.id for n in g.nodes if n.op == "input"}
    live: set[int] = set()

    def keep(vid: int) -> None:
        # a view and the versions it shows (a view may come before the node making
        # its version: fusion moves kernels later past views)
        while True:
            live.add(vid)
            v = g.values.get(vid)
            if v is None or "of" not in v:
                return
            vid = v["of"]

    for vid in output_ids(g.outputs):
        keep(vid)
    # an input buffer's final version is observable
    for b, v in final_versions(g).items():
        if b in inputs:
            keep(v)
    kept: list[Node] = []
    for n in reversed(g.nodes):
        if n.op == "view":
            if n.id in live:
                kept.append(n)
            continue
        if n.op in ("input", "const", "alloc"):
            if n.id in live or n.op == "input":
                kept.append(n)
            continue
        if not any(new in live for _, new in n.writes):
            continue
        kept.append(n)
        for region, new in n.writes:
            # a partial write keeps what it doesn't overwrite: the old version is read
            keep(region)
            if region != root_of(g, region) or n.op in ("scatter_add", "index_put"):
                keep(root_of(g, region))
        for r in iter_refs(n.args):
            keep(r.id)
    # views and versions read by a kept node mark their buffers live
    kept.reverse()
    used_buffers = {first.get(root_of(g, v), v) for v in live if v in g.values}
    g.nodes = [n for n in kept if n.op not in ("alloc", "const") or n.id in used_buffers
               or n.id in live]
    return g


def _is_fresh(g: Graph, region: int, allocs: set[int]) -> bool:
    return region in allocs


def cse(g: Graph) -> Graph:
    """Reuse the result of an identical earlier pure kernel."""
    g = clone(g)
    allocs = {n.id for n in g.nodes if n.op == "alloc"}
    # a version stands for its buffer's contents only until the next write: merge
    # results only of buffers written once (by the node itself)
    first = first_versions(g)
    writes_to: dict[int, int] = {}
    for n in g.nodes:
        for region, new in n.writes:
            b = first[new]
            writes_to[b] = writes_to.get(b, 0) + 1
    allocs = {a for a in allocs if writes_to.get(a, 0) == 1}
    seen: dict[Any, list[int]] = {}
    rename: dict[int, int] = {}

    def sub(a: Any) -> Any:
        if isinstance(a, Ref):
            return Ref(rename.get(a.id, a.id))
        if isinstance(a, tuple):
            return tuple(sub(x) for x in a)
        if isinstance(a, list):
            return [sub(x) for x in a]
        return a

    out: list[Node] = []
    for n in g.nodes:
        if n.op == "view":
            n.args = [sub(a) for a in n.args]
            vkey = ("view", n.args[0].id, tuple(g.values[n.id]["shape"]),
                    tuple(n.attrs["strides"]), n.attrs["offset"], g.values[n.id]["dtype"])
            if vkey in seen:
                rename[n.id] = seen[vkey][0]
                continue
            seen[vkey] = [n.id]
            g.values[n.id]["of"] = n.args[0].id
            out.append(n)
            continue
        if n.op in ("input", "const", "alloc"):
            out.append(n)
            continue
        n.args = [sub(a) for a in n.args]
        n.writes = [(rename.get(r, r), new) for r, new in n.writes]
        pure = (n.op not in PURE_SKIP and n.op not in ("scatter_add", "index_put")
                and "rng" not in n.attrs and all(_is_fresh(g, r, allocs) for r, _ in n.writes))
        if pure:
            key = (n.op, _key(n.args), tuple(g.values[r]["dtype"] for r, _ in n.writes),
                   tuple(tuple(g.values[r]["shape"]) for r, _ in n.writes))
            if key in seen:
                for (_, new), old in zip(n.writes, seen[key]):
                    rename[new] = old
                continue
            seen[key] = [new for _, new in n.writes]
        out.append(n)
    g.nodes = out
    g.outputs = rename_outputs(g.outputs, rename)
    return dead_code(g)


def _key(args: Any) -> Any:
    out = []
    for a in args:
        if isinstance(a, Ref):
            out.append(("ref", a.id))
        elif isinstance(a, (tuple, list)):
            out.append(("seq", _key(a)))
        else:
            out.append((type(a).__name__, a if not hasattr(a, "name") else a.name))
    return tuple(out)


def fold_constants(g: Graph) -> Graph:
    """Run, now and on cpu, each pure kernel whose operands are all constants;
    it becomes a constant."""
    import numpy as np

    from .. import dtype as D
    from ..device import Device
    from ..ops.core import as_view, empty, from_host, kernel, ready_device, view_of
    from .run import _arg as run_arg

    from ..dispatch.registry import registry

    registry.ensure_loaded()
    if "cpu" not in registry.backends:
        return clone(g)  # folding runs on cpu: without its backend, nothing is folded
    g = clone(g)
    allocs = {n.id for n in g.nodes if n.op == "alloc"}
    cpu = ready_device(Device("cpu"))
    known: dict[int, Any] = {}  # value id -> cpu tensor
    consts = {n.id for n in g.nodes if n.op == "const"}
    out: list[Node] = []
    for n in g.nodes:
        if n.op == "const":
            known[n.id] = from_host(np.ascontiguousarray(g.constants[n.attrs["name"]]), cpu)
        elif n.op == "view" and n.args[0].id in known:
            v = g.values[n.id]
            known[n.id] = as_view(known[n.args[0].id], tuple(v["shape"]), tuple(v["strides"]),
                                  v["offset"])
        elif n.op not in ("input", "alloc", "view") and n.op not in PURE_SKIP and \
                "rng" not in n.attrs and n.op not in ("scatter_add", "index_put", "fused") and \
                all(r.id in known for r in iter_refs(n.args)) and any(True for _ in iter_refs(n.args)) \
                and all(r in allocs for r, _ in n.writes) and n.op in cpu.kernels:
            outs = []
            for r, new in n.writes:
                v = g.values[r]
                t = empty(tuple(v["shape"]), D.BY_NAME[v["dtype"]], cpu)
                outs.append((t, new))
            args = [run_arg(a, known) for a in n.args]
            kernel(cpu, n.op)(*(view_of(t) for t, _ in outs), *args)
            for t, new in outs:
                name = f"f{new}"
                g.constants[name] = np.array(kernel(cpu, "to_host")(view_of(t)), copy=True)
                out.append(Node(new, "const", [], {"name": name}))
                known[new] = t
                consts.add(new)
            continue
        out.append(n)
    g.nodes = out
    return dead_code(g)
