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
from ..dispatch.types import contiguous_strides
from .graph import Graph, Node, Ref, _refs, rename_outputs

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

    def keep(vid: int) -> None:
        # a view and the versions it shows (a view may come before the node making
        # its version: fusion moves kernels later past views)
        while True:
            live.add(vid)
            v = g.values.get(vid)
            if v is None or "of" not in v:
                return
            vid = v["of"]

    for vid in _output_ids(g.outputs):
        keep(vid)
    # an input buffer's final version is observable
    for b, v in _final_versions(g).items():
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
            if region != _root(g, region) or n.op in ("scatter_add", "index_put"):
                keep(_root(g, region))
        for r in _refs(n.args):
            keep(r.id)
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


MAX_STEPS = 64  # a fused group's size: its kernel's arguments and its compile time stay small
MAX_BUFFERS = 24  # inputs + outputs of one group
REDUCIBLE = {"sum"}  # reductions that may end a group
# elementwise kernels that may not write over an operand they read (a where fills
# its output from y, then copies x over it; a copy engine refuses overlap)
NOT_IN_PLACE = {"where", "copy", "cast"}


def _whole(g: Graph, vid: int) -> bool:
    """A buffer version, or a view showing all of its buffer in order (a reshape)."""
    v = g.values[vid]
    if "of" not in v:
        return True
    if v["offset"] != 0 or list(v["strides"]) != list(contiguous_strides(tuple(v["shape"]))):
        return False
    base = g.values[_root(g, vid)]
    return _numel(v) == _numel(base) and v["dtype"] == base["dtype"]


def _operand_kind(g: Graph, vid: int) -> tuple[str, int] | None:
    """How a fused step reads value ``vid`` (a view shaped as the step's result):
    ``("in", 0)`` a whole buffer in order; ``("scalar", 0)`` one element for all;
    ``("row", C)`` a vector of the last dim's C elements repeated for every row
    (a bias); ``("col", C)`` one element per row of C (a per-row mean); None: a
    layout a fused program can't read."""
    if _whole(g, vid):
        return "in", 0
    v = g.values[vid]
    shape, strides = v["shape"], v["strides"]
    if all(s == 0 or d == 1 for d, s in zip(shape, strides)):
        return "scalar", 0
    if len(shape) < 2 or shape[-1] < 2:
        return None
    lead = [(d, s) for d, s in zip(shape[:-1], strides[:-1]) if d != 1]
    if strides[-1] == 1 and all(s == 0 for _, s in lead):
        return "row", shape[-1]
    if strides[-1] == 0 and lead and lead[-1][1] == 1 and \
            all(lead[i][1] == lead[i + 1][1] * lead[i + 1][0] for i in range(len(lead) - 1)):
        return "col", shape[-1]
    return None


def _reduction(g: Graph, n: Node) -> tuple[str, int] | None:
    """How a reduction node could end a fused group: ``("rows", C)`` for a sum
    over trailing axes whose C elements per output are consecutive (a row sum:
    a softmax's backward, a norm's variance), ``("all", 0)`` for a sum of every
    element (a loss, a squared norm); None when it can't (other axes, a view
    that isn't whole, a dtype other than float32/float64, an attribute)."""
    if n.op not in REDUCIBLE or len(n.writes) != 1 or n.attrs or len(n.args) != 2 \
            or not isinstance(n.args[0], Ref):
        return None
    x, axes = n.args
    region = n.writes[0][0]
    v = g.values[x.id]
    if v["dtype"] not in ("float32", "float64") or g.values[region]["dtype"] != v["dtype"] \
            or not _whole(g, x.id) or not _whole(g, region) or _numel(v) < 2:
        return None
    shape, axes = list(v["shape"]), tuple(axes)
    first = len(shape) - len(axes)
    if axes != tuple(range(first, len(shape))):
        return None
    if first == 0:
        return "all", 0
    cols = _numel({"shape": shape[first:]})
    return ("rows", cols) if cols >= 2 else None


def fuse_elementwise(g: Graph, min_nodes: int = 2) -> Graph:
    """Elementwise kernels over the same number of elements become one ``fused``
    node. Each member writes a whole buffer -- a fresh one, or one it updates in
    place (``p.mul_(0.9)``, an optimizer's state) -- and reads whole buffers of
    that count, broadcasts (``["scalar", i]``: one element for all, a step size
    held in a tensor; ``["row", i]``: a vector repeated for every row, a bias;
    ``["col", i]``: one element per row, a row's mean), or Python scalars. The
    row and column operands of one group share a row length (``cols``).

    Members wait in their group, which runs where the first node that must
    follow them appears (it reads what they wrote, or writes what they read or
    wrote); every other node passing them touches other buffers. Groups of
    different sizes stay open side by side, so an optimizer's updates of
    parameters of several shapes, with its scalar arithmetic between them, fuse
    into one node per size.

    A group computes element ``i`` of every step from element ``i`` of its
    operands, and a step reading a buffer comes before any step writing it anew,
    so running the group element by element (or block by block) is the program.

    A group may end in a sum of one of its results (``_reduction``): over rows
    of ``cols`` elements (the group's ``cols``) or over everything; the program
    then says ``"reduce": "rows"`` or ``"all"``, its last step is the sum, and
    the group closes there."""
    g = _clone(g)
    # every read of every buffer version (through a view too), to know which
    # group results are needed outside; views themselves are layout, not reads
    readers: dict[int, list[int]] = {}
    for i, n in enumerate(g.nodes):
        if n.op == "view":
            continue
        for r in _refs(n.args):
            readers.setdefault(_root(g, r.id), []).append(i)
        for region, _ in n.writes:  # a later write into a result needs its buffer
            readers.setdefault(_root(g, region), []).append(i)
    outs_needed = {_root(g, v) for v in _output_ids(g.outputs)}
    first = _buffer_of_versions(g)
    # an input buffer's final version is seen by the caller, read or not
    inputs = {n.id for n in g.nodes if n.op == "input"}
    outs_needed |= {v for b, v in _final_versions(g).items() if b in inputs}

    def buf(vid: int) -> int:
        return first[_root(g, vid)]

    def fusable(n: Node) -> tuple[int, int] | None:
        """(element count, row length of its row/col operands or 0) of a fusable
        node, else None."""
        if n.op not in ELEMENTWISE or len(n.writes) != 1 or n.attrs:
            return None
        region, _ = n.writes[0]
        if not _whole(g, region):
            return None
        count = _numel(g.values[region])
        cols = 0
        for a in n.args:
            if isinstance(a, Ref):
                if _numel(g.values[a.id]) != count:
                    return None
                kind = _operand_kind(g, a.id)
                if kind is None:
                    return None
                if kind[0] != "in" and count > 1 and buf(a.id) == buf(region):
                    return None  # x.mul_(x[0]): element 0 would change under the others
                if kind[1]:
                    if cols and kind[1] != cols:
                        return None
                    cols = kind[1]
            elif not isinstance(a, (bool, int, float)):
                return None
        return count, cols

    def reads_writes(n: Node) -> tuple[set[int], set[int]]:
        r = {buf(x.id) for x in _refs(n.args)}
        w = {buf(region) for region, _ in n.writes}
        if n.op in ("scatter_add", "index_put") or any(region != _root(g, region)
                                                       for region, _ in n.writes):
            r |= w  # a partial write keeps the rest: it reads its buffer too
        return r, w

    class Group:
        def __init__(self, count: int) -> None:
            self.members: list[int] = []
            self.count = count
            self.cols = 0  # the row length its row/col operands share
            self.rb: set[int] = set()  # buffers the members read
            self.wb: set[int] = set()  # ... and write
            self.made: set[int] = set()  # versions the members make
            self.sb: set[int] = set()  # buffers read through one-element views
            self.refs: set[int] = set()
            self.reduce = ""  # "rows" / "all" once a reduction ended it

        def add(self, i: int, cols: int) -> None:
            n = g.nodes[i]
            r, w = reads_writes(n)
            self.cols = self.cols or cols
            self.members.append(i)
            self.rb |= r
            self.wb |= w
            self.made |= {new for _, new in n.writes}
            self.sb |= {buf(x.id) for x in _refs(n.args) if not _whole(g, x.id)}
            self.refs |= {x.id for x in _refs(n.args) if _root(g, x.id) not in self.made}

        def admits(self, n: Node, cols: int) -> bool:
            if len(self.members) >= MAX_STEPS or (cols and self.cols and cols != self.cols):
                return False
            if len(self.refs | {x.id for x in _refs(n.args)}) + len(self.wb) + 1 > MAX_BUFFERS:
                return False
            # one element read by every element: no member may write its buffer
            # (element i's step would race element 0's read)
            scalars = {buf(x.id) for x in _refs(n.args) if not _whole(g, x.id)}
            return not (scalars & self.wb) and not ({buf(r) for r, _ in n.writes} & self.sb)

        def conflicts(self, r: set[int], w: set[int]) -> bool:
            """Whether a node reading ``r`` and writing ``w`` must stay after the
            members (it reads what they write, or writes what they touch)."""
            return bool(r & self.wb) or bool(w & (self.wb | self.rb))

    # Members wait in their group, which runs where the first node that must
    # follow them appears: a node reading what they wrote, or writing what they
    # read or wrote. Everything else that passes them touches other buffers, so
    # the order between them doesn't matter. Groups of different element counts
    # stay open side by side (a model's parameters have several sizes); two
    # open groups never touch the same buffers (the second to do so would have
    # closed the first), so neither order between them matters either.
    open_groups: dict[int, Group] = {}
    nodes: list[Node] = []

    def close(c: int) -> None:
        grp = open_groups.pop(c)
        nodes.extend(_fused_node(grp.members, grp.reduce))

    def _fused_node(grp: list[int], reduce: str = "") -> list[Node]:
        members = [g.nodes[i] for i in grp]
        if len(grp) < min_nodes:
            return members
        member_set = set(grp)
        made = {new: k for k, m in enumerate(members) for _, new in m.writes}
        ins: list[int] = []
        steps = []
        cols = 0
        for m in members:
            operands = []
            if reduce and m is members[-1]:  # the sum: of a step's result
                steps.append([m.op, g.values[m.writes[0][0]]["dtype"],
                              [["step", made[_root(g, m.args[0].id)]]]])
                if reduce == "rows":
                    cols = cols or _reduction(g, m)[1]
                continue
            for a in m.args:
                if isinstance(a, Ref):
                    if _root(g, a.id) in made:  # the version, or a reshape of it
                        operands.append(["step", made[_root(g, a.id)]])
                    else:
                        if a.id not in ins:
                            ins.append(a.id)
                        kind = _operand_kind(g, a.id)
                        operands.append([kind[0], ins.index(a.id)])
                        cols = cols or kind[1]
                else:
                    operands.append(["const", a])
            region, _ = m.writes[0]
            steps.append([m.op, g.values[region]["dtype"], operands])
        # the buffers the group writes: each once, with its last version; an
        # earlier version needed outside would be overwritten before its reader
        # ran, so such a group stays unfused (its reader closes the group first,
        # so this is a safeguard)
        last_write: dict[int, int] = {}
        first_region: dict[int, int] = {}
        for k, m in enumerate(members):
            region, new = m.writes[0]
            last_write[first[new]] = k
            first_region.setdefault(first[new], region)
        outputs, writes = [], []
        for k, m in enumerate(members):
            region, new = m.writes[0]
            if not (new in outs_needed or any(j not in member_set for j in readers.get(new, []))
                    or (reduce and k == len(members) - 1)):  # (a sum always has its output)
                continue
            if last_write[first[new]] != k:
                return members
            outputs.append(k)
            writes.append((first_region[first[new]], new))
        program = {"n": _numel(g.values[members[0].writes[0][0]]),
                   "inputs": [g.values[v]["dtype"] for v in ins],
                   "steps": steps, "outputs": outputs}
        if cols:
            program["cols"] = cols
        if reduce:
            program["reduce"] = reduce
        return [Node(writes[0][1] if writes else -1, "fused", [Ref(v) for v in ins],
                     {"program": program}, writes)]

    for i, n in enumerate(g.nodes):
        if n.op in ("alloc", "input", "const"):
            nodes.append(n)  # a new buffer: nothing waiting touches it
            continue
        if n.op == "view":
            nodes.append(n)  # layout only: it reads no memory (see run_env)
            continue
        r, w = reads_writes(n)
        f = fusable(n)
        c, cols = f if f is not None else (None, 0)
        home = open_groups.get(c) if c is not None else None
        red = _reduction(g, n) if c is None else None
        if red is not None:
            # a sum of a group member's result (of the group's size, its rows
            # the group's rows) ends that group
            kind, rcols = red
            src = _root(g, n.args[0].id)
            home = next((grp for grp in open_groups.values() if src in grp.made), None)
            if home is None or home.count != _numel(g.values[n.args[0].id]) or \
                    (kind == "rows" and home.cols and home.cols != rcols) or not home.admits(n, 0):
                home, red = None, None
        for k in [k for k, grp in open_groups.items() if grp is not home and grp.conflicts(r, w)]:
            close(k)
        if red is not None:
            home.add(i, red[1])
            home.reduce = red[0]
            close(home.count)
            continue
        if c is None or "rng" in n.attrs:
            nodes.append(n)
            continue
        if home is not None and not home.admits(n, cols):
            close(c)
            home = None
        if home is None:
            home = open_groups[c] = Group(c)
        home.add(i, cols)
    for k in list(open_groups):
        close(k)
    g.nodes = nodes
    return dead_code(g)


def plan_memory(g: Graph) -> Graph:
    """Let a fresh buffer reuse one whose last use already ran (same dtype and
    element count; never an input's, a constant's or an output's); and, in
    place where safe, let an elementwise kernel (or a fused group) write its
    result over an operand it reads whole and that nobody reads after it --
    element ``i`` is read before it is written (the kernel contract), so
    ``y = x * 2`` with ``x`` dying there needs no new buffer."""
    g = _clone(g)
    first = _buffer_of_versions(g)
    last_use: dict[int, int] = {}  # buffer -> index of the last node touching it
    first_use: dict[int, int] = {}
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
                first_use.setdefault(b, i)
    keep = {first.get(_root(g, v)) for v in _output_ids(g.outputs)}
    allocs = {n.id for n in g.nodes if n.op == "alloc"}
    alloc_at = {n.id: i for i, n in enumerate(g.nodes) if n.op == "alloc"}

    # in place: alias[A] = B, A's buffer is B's; B lives on as long as A
    alias: dict[int, int] = {}

    def canon(b: int) -> int:
        while b in alias:
            b = alias[b]
        return b

    for i, n in enumerate(g.nodes):
        if not (n.op == "fused" or (n.op in ELEMENTWISE and not n.attrs
                                    and n.op not in NOT_IN_PLACE)):
            continue
        refs = [a.id for a in _refs(n.args)]
        # a buffer qualifies only when this node reads it once, whole and in order:
        # another read (a broadcast of one element or row, a transpose, a second
        # reshape) would see elements already overwritten
        reads: dict[int, int] = {}
        for vid in refs:
            reads[first[_root(g, vid)]] = reads.get(first[_root(g, vid)], 0) + 1
        if n.op == "fused":
            from .run import input_kinds

            prog = n.attrs["program"]
            kinds = input_kinds(prog)
        taken: set[int] = set()
        for j, (region, _) in enumerate(n.writes):
            if n.op == "fused":
                # an input read whole by no step after the one writing output j
                # (a runner may store a step's result before later steps run)
                # (nor by the step writing it, where that step's kernel may
                # write its output before reading all of an element's operands)
                k_out = prog["outputs"][j]
                late = {v for op_, dt_, operands in prog["steps"][k_out + 1:]
                        for kind, v in operands if kind == "in"}
                if prog["steps"][k_out][0] in NOT_IN_PLACE:
                    late |= {v for kind, v in prog["steps"][k_out][2] if kind == "in"}
                whole = [a.id for q, (a, k) in enumerate(zip(n.args, kinds))
                         if k == "in" and q not in late]
            else:
                whole = [a.id for a in n.args if isinstance(a, Ref) and _whole(g, a.id)]
            whole = [v for v in whole if reads[first[_root(g, v)]] == 1]
            a_buf = region
            if a_buf not in allocs or first_use.get(a_buf) != i:
                continue
            va = g.values[a_buf]
            for vid in whole:
                b = canon(first[_root(g, vid)])
                vb = g.values[b]
                if (b in allocs and b not in keep and b not in taken
                        and last_use.get(b) == i and alloc_at[b] < alloc_at[a_buf]
                        and vb["dtype"] == va["dtype"] and _numel(vb) == _numel(va)):
                    alias[a_buf] = b
                    taken.add(b)
                    last_use[b] = last_use[a_buf]
                    if a_buf in keep:  # an output now lives in b's memory
                        keep.add(b)
                    break

    free: dict[tuple[str, int], list[int]] = {}
    dying: dict[int, list[int]] = {}
    for b, i in last_use.items():
        if b in allocs and b not in keep and b not in alias:
            dying.setdefault(i, []).append(b)
    home: dict[int, int] = {}  # alloc id -> the buffer (alloc id) whose memory it takes
    for i, n in enumerate(g.nodes):
        if n.op == "alloc" and n.id not in alias:
            v = g.values[n.id]
            pool = free.get((v["dtype"], _numel(v)))
            if pool:
                home[n.id] = pool.pop()
        for b in dying.get(i, []):
            v = g.values[b]
            free.setdefault((v["dtype"], _numel(v)), []).append(home.get(b, b))
    for a_buf, b in alias.items():
        home[a_buf] = home.get(canon(b), canon(b))
    for n in g.nodes:
        if n.op == "alloc" and n.id in home:
            n.attrs["reuse"] = home[n.id]
    return g


def optimize(g: Graph) -> Graph:
    return plan_memory(fuse_elementwise(fold_constants(cse(dead_code(g)))))
