"""The fusion pass: ``fuse_elementwise`` makes maximal runs of elementwise
kernels over the same number of contiguous elements one ``fused`` node, a small
program a backend can run in one pass (``Backend.fuse``); intermediates used
only inside the run are never written to memory.
"""

from __future__ import annotations

from ..dispatch import ops as OPS
from ..dispatch.types import contiguous_strides
from .graph import (Graph, Node, Ref, clone, final_versions, first_versions, iter_refs, numel,
                    output_ids, root_of)
from .simplify import dead_code

ELEMENTWISE = set(OPS.UNARY) | set(OPS.BINARY) | set(OPS.COMPARE) | {"where", "cast", "copy"}
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
    base = g.values[root_of(g, vid)]
    return numel(v) == numel(base) and v["dtype"] == base["dtype"]


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
            or not _whole(g, x.id) or not _whole(g, region) or numel(v) < 2:
        return None
    shape, axes = list(v["shape"]), tuple(axes)
    first = len(shape) - len(axes)
    if axes != tuple(range(first, len(shape))):
        return None
    if first == 0:
        return "all", 0
    cols = numel({"shape": shape[first:]})
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
    g = clone(g)
    # every read of every buffer version (through a view too), to know which
    # group results are needed outside; views themselves are layout, not reads
    readers: dict[int, list[int]] = {}
    for i, n in enumerate(g.nodes):
        if n.op == "view":
            continue
        for r in iter_refs(n.args):
            readers.setdefault(root_of(g, r.id), []).append(i)
        for region, _ in n.writes:  # a later write into a result needs its buffer
            readers.setdefault(root_of(g, region), []).append(i)
    outs_needed = {root_of(g, v) for v in output_ids(g.outputs)}
    first = first_versions(g)
    # an input buffer's final version is seen by the caller, read or not
    inputs = {n.id for n in g.nodes if n.op == "input"}
    outs_needed |= {v for b, v in final_versions(g).items() if b in inputs}

    def buf(vid: int) -> int:
        return first[root_of(g, vid)]

    def fusable(n: Node) -> tuple[int, int] | None:
        """(element count, row length of its row/col operands or 0) of a fusable
        node, else None."""
        if n.op not in ELEMENTWISE or len(n.writes) != 1 or n.attrs:
            return None
        region, _ = n.writes[0]
        if not _whole(g, region):
            return None
        count = numel(g.values[region])
        cols = 0
        for a in n.args:
            if isinstance(a, Ref):
                if numel(g.values[a.id]) != count:
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
        r = {buf(x.id) for x in iter_refs(n.args)}
        w = {buf(region) for region, _ in n.writes}
        if n.op in ("scatter_add", "index_put") or any(region != root_of(g, region)
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
            self.sb |= {buf(x.id) for x in iter_refs(n.args) if not _whole(g, x.id)}
            self.refs |= {x.id for x in iter_refs(n.args) if root_of(g, x.id) not in self.made}

        def admits(self, n: Node, cols: int) -> bool:
            if len(self.members) >= MAX_STEPS or (cols and self.cols and cols != self.cols):
                return False
            if len(self.refs | {x.id for x in iter_refs(n.args)}) + len(self.wb) + 1 > MAX_BUFFERS:
                return False
            # one element read by every element: no member may write its buffer
            # (element i's step would race element 0's read)
            scalars = {buf(x.id) for x in iter_refs(n.args) if not _whole(g, x.id)}
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
                              [["step", made[root_of(g, m.args[0].id)]]]])
                if reduce == "rows":
                    cols = cols or _reduction(g, m)[1]
                continue
            for a in m.args:
                if isinstance(a, Ref):
                    if root_of(g, a.id) in made:  # the version, or a reshape of it
                        operands.append(["step", made[root_of(g, a.id)]])
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
        program = {"n": numel(g.values[members[0].writes[0][0]]),
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
            src = root_of(g, n.args[0].id)
            home = next((grp for grp in open_groups.values() if src in grp.made), None)
            if home is None or home.count != numel(g.values[n.args[0].id]) or \
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
