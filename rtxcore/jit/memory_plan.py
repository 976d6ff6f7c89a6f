"""The memory pass: ``plan_memory`` lets a fresh buffer take over one whose last
reader already ran, and an elementwise kernel (or fused group) write over an
operand that dies there, so a replay allocates less.
"""

from __future__ import annotations

from ..dispatch.fused import input_kinds
from .fusion import ELEMENTWISE, NOT_IN_PLACE, _whole
from .graph import Graph, Ref, clone, first_versions, iter_refs, numel, output_ids, root_of


def plan_memory(g: Graph) -> Graph:
    """Let a fresh buffer reuse one whose last use already ran (same dtype and
    element count; never an input's, a constant's or an output's); and, in
    place where safe, let an elementwise kernel (or a fused group) write its
    result over an operand it reads whole and that nobody reads after it --
    element ``i`` is read before it is written (the kernel contract), so
    ``y = x * 2`` with ``x`` dying there needs no new buffer."""
    g = clone(g)
    first = first_versions(g)
    last_use: dict[int, int] = {}  # buffer -> index of the last node touching it
    first_use: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        touched = [r.id for r in iter_refs(n.args)]
        if n.op == "view":
            touched.append(n.args[0].id)
        for region, new in n.writes:
            touched += [region, new]
        for v in touched:
            b = first.get(root_of(g, v)) if v in g.values else None
            if b is not None:
                last_use[b] = i
                first_use.setdefault(b, i)
    keep = {first.get(root_of(g, v)) for v in output_ids(g.outputs)}
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
        refs = [a.id for a in iter_refs(n.args)]
        # a buffer qualifies only when this node reads it once, whole and in order:
        # another read (a broadcast of one element or row, a transpose, a second
        # reshape) would see elements already overwritten
        reads: dict[int, int] = {}
        for vid in refs:
            reads[first[root_of(g, vid)]] = reads.get(first[root_of(g, vid)], 0) + 1
        if n.op == "fused":
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
            whole = [v for v in whole if reads[first[root_of(g, v)]] == 1]
            a_buf = region
            if a_buf not in allocs or first_use.get(a_buf) != i:
                continue
            va = g.values[a_buf]
            for vid in whole:
                b = canon(first[root_of(g, vid)])
                vb = g.values[b]
                if (b in allocs and b not in keep and b not in taken
                        and last_use.get(b) == i and alloc_at[b] < alloc_at[a_buf]
                        and vb["dtype"] == va["dtype"] and numel(vb) == numel(va)):
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
            pool = free.get((v["dtype"], numel(v)))
            if pool:
                home[n.id] = pool.pop()
        for b in dying.get(i, []):
            v = g.values[b]
            free.setdefault((v["dtype"], numel(v)), []).append(home.get(b, b))
    for a_buf, b in alias.items():
        home[a_buf] = home.get(canon(b), canon(b))
    for n in g.nodes:
        if n.op == "alloc" and n.id in home:
            n.attrs["reuse"] = home[n.id]
    return g
