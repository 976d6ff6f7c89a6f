"""Passes over a Graph, each a small function returning a new Graph.

- ``dead_code``: drop kernels whose results nobody reads (writes into inputs,
  which a caller sees, and the outputs stay);
- ``cse``: a pure kernel computing what an earlier one computed (same op, same
  operands) reuses that result;
- ``fold_constants``: a kernel whose operands are all constants runs once, now,
  and becomes a constant;
- ``fuse_elementwise``: maximal runs of elementwise kernels over the same number
  of contiguous elements become one ``fused`` node, a small program a backend
  can run in one pass (``Backend.fuse``); intermediates used only inside the
  run are never written to memory;
- ``plan_memory``: a fresh buffer takes over one whose last reader already ran
  (same dtype and size), so a replay allocates less.

``optimize(graph)`` runs them in that order.
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

from ..dispatch import ops as OPS
from .graph import Graph, Node, Ref, _refs

PURE_SKIP = {"uniform", "normal", "empty", "from_host", "to_host"}
ELEMENTWISE = set(OPS.UNARY) | set(OPS.BINARY) | set(OPS.COMPARE) | {"where", "cast", "copy"}


def _clone(g: Graph) -> Graph:
    h = Graph()
    h.nodes = copy.deepcopy(g.nodes)
    h.values = copy.deepcopy(g.values)
    h.outputs = copy.deepcopy(g.outputs)
    h.constants = dict(g.constants)
    h._next = g._next
    return h


def _root(g: Graph, vid: int) -> int:
    """The buffer version a value (view or version) belongs to."""
    while "of" in g.values[vid]:
        vid = g.values[vid]["of"]
    return vid


def _output_ids(o: Any) -> Iterable[int]:
    if isinstance(o, dict):
        if "view" in o:
            yield o["view"]
        for x in o.get("seq", []):
            yield from _output_ids(x)
        for _, x in o.get("map", []):
            yield from _output_ids(x)


def _buffer_of_versions(g: Graph) -> dict[int, int]:
    """version id -> the id of its buffer's first version (input, const or alloc)."""
    first: dict[int, int] = {}
    for n in g.nodes:
        if n.op in ("input", "const", "alloc"):
            first[n.id] = n.id
        elif n.op not in ("view",):
            for region, new in n.writes:
                first[new] = first[_root(g, region)]
    return first


def _final_versions(g: Graph) -> dict[int, int]:
    """buffer (first version id) -> its last version id."""
    first = _buffer_of_versions(g)
    last: dict[int, int] = {}
    for v, b in first.items():
        last[b] = v  # versions are made in order: the last assignment wins
    return last


def dead_code(g: Graph) -> Graph:
    """Drop kernels (and views, allocs, constants) no output depends on. Writes
    into input buffers are kept: a caller sees them."""
    g = _clone(g)
    first = _buffer_of_versions(g)
    inputs = {n.id for n in g.nodes if n.op == "input"}
    live: set[int] = set()
    for vid in _output_ids(g.outputs):
        live.add(vid)
    # an input buffer's final version is observable
    for b, v in _final_versions(g).items():
        if b in inputs:
            live.add(v)
    kept: list[Node] = []
    for n in reversed(g.nodes):
        if n.op == "view":
            if n.id in live:
                live.add(n.args[0].id)
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
            live.add(region)
            if region != _root(g, region) or n.op in ("scatter_add", "index_put"):
                live.add(_root(g, region))
        for r in _refs(n.args):
            live.add(r.id)
    # views and versions read by a kept node mark their buffers live
    kept.reverse()
    used_buffers = {first.get(_root(g, v), v) for v in live if v in g.values}
    g.nodes = [n for n in kept if n.op not in ("alloc", "const") or n.id in used_buffers
               or n.id in live]
    return g


def _is_fresh(g: Graph, region: int, allocs: set[int]) -> bool:
    return region in allocs


def cse(g: Graph) -> Graph:
    """Reuse the result of an identical earlier pure kernel."""
    g = _clone(g)
    allocs = {n.id for n in g.nodes if n.op == "alloc"}
    # a version stands for its buffer's contents only until the next write: merge
    # results only of buffers written once (by the node itself)
    first = _buffer_of_versions(g)
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
    g.outputs = _rename_outputs(g.outputs, rename)
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


def _rename_outputs(o: Any, rename: dict[int, int]) -> Any:
    if isinstance(o, dict):
        if "view" in o:
            return {"view": rename.get(o["view"], o["view"])}
        if "seq" in o:
            return {**o, "seq": [_rename_outputs(x, rename) for x in o["seq"]]}
        if "map" in o:
            return {"map": [[k, _rename_outputs(v, rename)] for k, v in o["map"]]}
    return o


def fold_constants(g: Graph) -> Graph:
    """Run, now and on cpu, each pure kernel whose operands are all constants;
    it becomes a constant."""
    import numpy as np

    from .. import dtype as D
    from ..ops.core import as_view, from_host, kernel, ready_device, view_of
    from ..device import Device
    from .run import _arg as run_arg

    g = _clone(g)
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
                all(r.id in known for r in _refs(n.args)) and any(True for _ in _refs(n.args)) \
                and all(r in allocs for r, _ in n.writes) and n.op in cpu.kernels:
            outs = []
            for r, new in n.writes:
                v = g.values[r]
                from ..ops.core import empty

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


def _numel(v: dict[str, Any]) -> int:
    n = 1
    for s in v["shape"]:
        n *= s
    return n


def fuse_elementwise(g: Graph, min_nodes: int = 2) -> Graph:
    """Runs of consecutive elementwise kernels over the same number of elements
    become one ``fused`` node. Each member writes a whole buffer -- a fresh one,
    or one it updates in place (``p.mul_(0.9)``, an optimizer's state) -- and
    reads whole buffers of that count, or scalars. Allocations and views between
    members don't end a run (a view moves after the fused node: no member reads
    it). A group computes element ``i`` of every step from element ``i`` of its
    operands, and a step reading a buffer comes before any step writing it anew,
    so running the group element by element (or block by block) is the program."""
    g = _clone(g)
    # every read of every value, to know which group results are needed outside
    readers: dict[int, list[int]] = {}
    for i, n in enumerate(g.nodes):
        for r in _refs(n.args):
            readers.setdefault(r.id, []).append(i)
        if n.op == "view":
            readers.setdefault(n.args[0].id, []).append(i)
        for region, _ in n.writes:  # a later write into a result needs its buffer
            readers.setdefault(region, []).append(i)
            if region != _root(g, region):
                readers.setdefault(_root(g, region), []).append(i)
    outs_needed = set(_output_ids(g.outputs))
    first = _buffer_of_versions(g)
    # an input buffer's final version is seen by the caller, read or not
    inputs = {n.id for n in g.nodes if n.op == "input"}
    outs_needed |= {v for b, v in _final_versions(g).items() if b in inputs}

    def fusable(n: Node) -> int | None:
        """The element count of a fusable node, else None."""
        if n.op not in ELEMENTWISE or len(n.writes) != 1 or n.attrs:
            return None
        region, _ = n.writes[0]
        v = g.values[region]
        if "of" in v:
            return None
        count = _numel(v)
        for a in n.args:
            if isinstance(a, Ref):
                v = g.values[a.id]
                if "of" in v or _numel(v) != count:
                    return None
            elif not isinstance(a, (bool, int, float)):
                return None
        return count

    groups: list[list[int]] = []
    cur: list[int] = []
    cur_n: int | None = None
    for i, n in enumerate(g.nodes):
        if n.op in ("alloc", "view"):
            continue  # allocations and views don't break a run
        c = fusable(n)
        if c is not None and (not cur or c == cur_n):
            cur.append(i)
            cur_n = c
            continue
        if len(cur) >= min_nodes:
            groups.append(cur)
        cur, cur_n = ([i], c) if c is not None else ([], None)
    if len(cur) >= min_nodes:
        groups.append(cur)
    if not groups:
        return g

    replace: dict[int, Node] = {}
    drop: set[int] = set()
    moved: dict[int, list[Node]] = {}  # fused node's index -> views moved after it
    for grp in groups:
        members = [g.nodes[i] for i in grp]
        made = {new: k for k, m in enumerate(members) for _, new in m.writes}
        inside = set(range(grp[0], grp[-1] + 1))
        inputs: list[int] = []
        steps = []
        for m in members:
            operands = []
            for a in m.args:
                if isinstance(a, Ref):
                    if a.id in made:
                        operands.append(["step", made[a.id]])
                    else:
                        if a.id not in inputs:
                            inputs.append(a.id)
                        operands.append(["in", inputs.index(a.id)])
                else:
                    operands.append(["const", a])
            region, _ = m.writes[0]
            steps.append([m.op, g.values[region]["dtype"], operands])
        # the buffers the group writes: each once, with its last version; an
        # earlier version needed outside (rare: a view of it read later) would
        # be overwritten before its reader ran, so such a group stays unfused
        last_write: dict[int, int] = {}
        first_region: dict[int, int] = {}
        for k, m in enumerate(members):
            region, new = m.writes[0]
            b = first[new]
            last_write[b] = k
            first_region.setdefault(b, region)
        outputs, writes = [], []
        ok = True
        for k, m in enumerate(members):
            region, new = m.writes[0]
            member_readers = [j for j in readers.get(new, []) if j not in set(grp)]
            used_outside = new in outs_needed or any(
                j not in inside or g.nodes[j].op == "view" for j in member_readers)
            if not used_outside:
                continue
            b = first[new]
            if last_write[b] != k:
                ok = False
                break
            outputs.append(k)
            writes.append((first_region[b], new))
        if not ok:
            continue
        program = {"n": _numel(g.values[members[0].writes[0][0]]),
                   "inputs": [g.values[v]["dtype"] for v in inputs],
                   "steps": steps, "outputs": outputs}
        node = Node(writes[0][1] if writes else -1, "fused", [Ref(v) for v in inputs],
                    {"program": program}, writes)
        # at the last member's place: every allocation the outputs need came
        # before; the views among the members follow it
        replace[grp[-1]] = node
        drop.update(grp[:-1])
        views = [i for i in range(grp[0], grp[-1]) if g.nodes[i].op == "view"]
        drop.update(views)
        moved[grp[-1]] = [g.nodes[i] for i in views]
    nodes: list[Node] = []
    for i, n in enumerate(g.nodes):
        if i in replace:
            nodes.append(replace[i])
            nodes += moved.get(i, [])
        elif i not in drop:
            nodes.append(n)
    g.nodes = nodes
    return dead_code(g)


def plan_memory(g: Graph) -> Graph:
    """Let a fresh buffer reuse one whose last use already ran (same dtype and
    element count; never an input's, a constant's or an output's)."""
    g = _clone(g)
    first = _buffer_of_versions(g)
    last_use: dict[int, int] = {}  # buffer -> index of the last node touching it
    for i, n in enumerate(g.nodes):
        touched = [r.id for r in _refs(n.args)]
        if n.op == "view":
            touched.append(n.args[0].id)
        for region, new in n.writes:
            touched += [region, new]
        for v in touched:
            b = first.get(_root(g, v)) if v in g.values else None
            if b is not None:
                last_use[b] = i
    keep = {first.get(_root(g, v)) for v in _output_ids(g.outputs)}
    allocs = {n.id for n in g.nodes if n.op == "alloc"}
    free: dict[tuple[str, int], list[int]] = {}
    dying: dict[int, list[int]] = {}
    for b, i in last_use.items():
        if b in allocs and b not in keep:
            dying.setdefault(i, []).append(b)
    home: dict[int, int] = {}  # alloc id -> the buffer (alloc id) whose memory it takes
    for i, n in enumerate(g.nodes):
        if n.op == "alloc":
            v = g.values[n.id]
            pool = free.get((v["dtype"], _numel(v)))
            if pool:
                home[n.id] = pool.pop()
        for b in dying.get(i, []):
            v = g.values[b]
            free.setdefault((v["dtype"], _numel(v)), []).append(home.get(b, b))
    for n in g.nodes:
        if n.op == "alloc" and n.id in home:
            n.attrs["reuse"] = home[n.id]
    return g


def optimize(g: Graph) -> Graph:
    return plan_memory(fuse_elementwise(fold_constants(cse(dead_code(g)))))
