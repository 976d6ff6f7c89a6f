"""The graph IR: a straight-line program over device buffers, in the primitive ops.

A traced function becomes a ``Graph``: a list of nodes in the order the kernels
ran. Values are *buffer versions*: ``alloc`` makes a buffer, every kernel that
writes into a buffer makes its next version, so an in-place op (``p.add_(g)``)
is a node like any other. Kernels read and write *regions* of buffers (a shape,
strides and an offset: a view); a region other than a buffer's whole contiguous
extent is an explicit ``view`` node.

Node kinds (``Node.op``):

- ``input``: a buffer that existed before the trace: argument ``i`` of the
  function, or a tensor read from outside (a parameter, optimizer state), by name;
- ``const``: data the function made from the host (``rc.tensor(...)``);
- ``alloc``: a new uninitialised buffer of ``numel`` elements;
- ``view``: a region (shape, strides, offset in elements) of a buffer version;
- any primitive or backend-supplied composite of ``rtxcore.dispatch.ops``:
  ``outs`` are the regions it writes, ``args`` what it reads and its scalars.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Iterable, Iterator

from .. import dtype as D
from .ir import FORMAT, VERSION, Node, Ref, dumps, encode_arg, encode_attrs, iter_refs

__all__ = ["FORMAT", "VERSION", "Graph", "Node", "Ref", "dumps", "rename_outputs", "output_ids",
           "buffer_roots", "clone", "root_of", "first_versions", "final_versions", "numel"]


class Graph:
    """A traced program. ``print(graph)`` shows it one node per line."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.values: dict[int, dict[str, Any]] = {}  # id -> dtype, shape, buffer
        self.outputs: Any = None  # the function's result, tensors as view ids
        self.constants: dict[str, Any] = {}  # const name -> numpy array
        self._next = 0

    # -- building -------------------------------------------------------------------

    def new_id(self) -> int:
        self._next += 1
        return self._next - 1

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    # -- reading --------------------------------------------------------------------

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    def kernels(self) -> Iterator[Node]:
        return (n for n in self.nodes if n.op not in ("input", "const", "alloc", "view"))

    def _type(self, vid: int) -> str:
        v = self.values[vid]
        return f"{v['dtype']}[{', '.join(str(s) for s in v['shape'])}]"

    def _fmt(self, a: Any) -> str:
        if isinstance(a, Ref):
            return f"%{a.id}"
        if isinstance(a, (list, tuple)):
            return "(" + ", ".join(self._fmt(x) for x in a) + (",)" if len(a) == 1 else ")")
        return repr(a)

    def __str__(self) -> str:
        # a fresh buffer that a kernel then fills whole is that kernel's result:
        # its alloc line and "-> %alloc" are left out
        allocs = {n.id for n in self.nodes if n.op == "alloc"}
        filled = {view for n in self.kernels() for view, _ in n.writes if view in allocs}
        lines = []
        for n in self.nodes:
            if n.op == "alloc" and n.id in filled:
                continue
            if n.op == "input":
                what = f"arg {n.attrs['index']}" if n.attrs["kind"] == "arg" else n.attrs["name"]
                lines.append(f"%{n.id} = input {what} : {self._type(n.id)}")
            elif n.op == "const":
                lines.append(f"%{n.id} = const {n.attrs['name']} : {self._type(n.id)}")
            elif n.op == "alloc":
                lines.append(f"%{n.id} = alloc : {self._type(n.id)}")
            elif n.op == "view":
                lines.append(f"%{n.id} = view(%{n.args[0].id}, strides={n.attrs['strides']}, "
                             f"offset={n.attrs['offset']}) : {self._type(n.id)}")
            else:
                outs = ", ".join(f"%{new}" for _, new in n.writes)
                into = [f"%{view}" for view, _ in n.writes if view not in filled]
                args = ", ".join(self._fmt(a) for a in n.args)
                lines.append(f"{outs} = {n.op}({args})" + (f" -> {', '.join(into)}" if into else "")
                             + f" : {', '.join(self._type(v) for v, _ in n.writes)}")
        lines.append(f"return {self._fmt_out(self.outputs)}")
        return "\n".join(lines)

    def _fmt_out(self, o: Any) -> str:
        if isinstance(o, dict) and "view" in o:
            return f"%{o['view']}"
        if isinstance(o, dict) and "seq" in o:
            return "(" + ", ".join(self._fmt_out(x) for x in o["seq"]) + ")"
        if isinstance(o, dict) and "map" in o:
            return "{" + ", ".join(f"{k!r}: {self._fmt_out(v)}" for k, v in o["map"]) + "}"
        return repr(o.get("lit") if isinstance(o, dict) else o)

    def table(self) -> str:
        """Nodes counted by op, with the bytes their kernels read and write."""
        rows: dict[str, list[int]] = {}
        for n in self.kernels():
            r = rows.setdefault(n.op, [0, 0, 0])
            r[0] += 1
            r[1] += sum(self._nbytes(a) for a in iter_refs(n.args))
            r[2] += sum(self._nbytes(Ref(v)) for v, _ in n.writes)
        w = max([len(k) for k in rows] + [2])
        out = [f"{'op':<{w}}  {'nodes':>6}  {'read':>12}  {'written':>12}"]
        for op, (c, rd, wr) in sorted(rows.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
            out.append(f"{op:<{w}}  {c:>6}  {_bytes(rd):>12}  {_bytes(wr):>12}")
        tot = [sum(r[i] for r in rows.values()) for i in range(3)]
        out.append(f"{'total':<{w}}  {tot[0]:>6}  {_bytes(tot[1]):>12}  {_bytes(tot[2]):>12}")
        return "\n".join(out)

    def _nbytes(self, r: Ref) -> int:
        v = self.values[r.id]
        return math.prod(v["shape"]) * D.BY_NAME[v["dtype"]].itemsize

    def to_dot(self) -> str:
        """Graphviz source: one box per kernel, one ellipse per value it reads."""
        out = ["digraph rtxcore {", "  rankdir=TB; node [fontname=monospace, fontsize=10];"]
        for n in self.nodes:
            if n.op in ("input", "const", "alloc"):
                shape = "ellipse" if n.op != "alloc" else "point"
                label = n.attrs.get("name", n.op) if n.op != "input" or n.attrs["kind"] != "arg" \
                    else f"arg {n.attrs['index']}"
                out.append(f'  v{n.id} [shape={shape}, label="{label}\\n{self._type(n.id)}"];')
            elif n.op == "view":
                out.append(f'  v{n.id} [shape=ellipse, style=dashed, label="view\\n'
                           f'{self._type(n.id)}"];')
                out.append(f"  v{n.args[0].id} -> v{n.id};")
            else:
                out.append(f'  k{id(n)} [shape=box, label="{n.op}"];')
                for r in iter_refs(n.args):
                    out.append(f"  v{r.id} -> k{id(n)};")
                for view, new in n.writes:
                    out.append(f'  v{new} [shape=ellipse, label="%{new}\\n{self._type(view)}"];')
                    out.append(f"  k{id(n)} -> v{new};")
        out.append("}")
        return "\n".join(out)

    def render(self, path: str) -> str:
        """Draw the graph with graphviz's ``dot`` when it is installed (the format
        from ``path``'s suffix, e.g. .svg or .png); else write the ``.dot`` source
        next to it. Returns the path written."""
        import shutil
        import subprocess

        src = self.to_dot()
        exe = shutil.which("dot")
        if exe is None:
            dot = path if path.endswith(".dot") else path + ".dot"
            with open(dot, "w") as f:
                f.write(src)
            return dot
        fmt = path.rsplit(".", 1)[-1] if "." in path else "svg"
        subprocess.run([exe, f"-T{fmt}", "-o", path], input=src.encode(), check=True)
        return path

    # -- the file format ------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION,
            "values": {str(k): v for k, v in self.values.items()},
            "nodes": [{"id": n.id, "op": n.op, "args": encode_arg(n.args),
                       "attrs": encode_attrs(n.attrs) if n.op == "fused" else n.attrs,
                       "writes": [list(w) for w in n.writes]} for n in self.nodes],
            "outputs": self.outputs,
        }

    @classmethod
    def from_json(cls, doc: Any) -> "Graph":
        """The graph of a document ``to_json`` wrote, every field checked first
        (``rtxcore.jit.validate``): anything wrong is a ValueError naming it."""
        from .validate import check_document

        values, nodes, outputs = check_document(doc)
        g = cls()
        g.values = values
        g.nodes = nodes
        g.outputs = outputs
        g._next = max(g.values, default=-1) + 1
        return g


def rename_outputs(o: Any, rename: dict[int, int]) -> Any:
    """A graph's outputs with value ids renamed (``rename``: old -> new)."""
    if isinstance(o, dict):
        if "view" in o:
            return {"view": rename.get(o["view"], o["view"])}
        if "seq" in o:
            return {**o, "seq": [rename_outputs(x, rename) for x in o["seq"]]}
        if "map" in o:
            return {"map": [[k, rename_outputs(v, rename)] for k, v in o["map"]]}
    return o


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def output_ids(o: Any) -> Iterable[int]:
    """The value ids a graph's outputs name (``{"view": id}``, in order)."""
    if isinstance(o, dict):
        if "view" in o:
            yield o["view"]
        for x in o.get("seq", []):
            yield from output_ids(x)
        for _, x in o.get("map", []):
            yield from output_ids(x)


def buffer_roots(graph: Graph) -> dict[int, int]:
    """value id -> the id of the input, const or alloc whose buffer it shows. (A
    view may come before the node making the version it shows: the optimiser
    moves kernels later past views, which are layout only.)"""
    parent: dict[int, int] = {}
    for n in graph.nodes:
        if n.op in ("input", "const", "alloc"):
            parent[n.id] = n.id
        elif n.op == "view":
            parent[n.id] = n.args[0].id
        else:
            for region, new in n.writes:
                parent[new] = region
    root: dict[int, int] = {}
    for v in parent:
        path = []
        while v not in root and parent[v] != v:
            path.append(v)
            v = parent[v]
        r = root.get(v, v)
        for p in path:
            root[p] = r
        root[v] = r
    return root


# -- reading buffers and versions (what the passes share) ----------------------------------


def clone(g: Graph) -> Graph:
    """A deep copy of ``g`` (its constants shared): what a pass edits."""
    h = Graph()
    h.nodes = copy.deepcopy(g.nodes)
    h.values = copy.deepcopy(g.values)
    h.outputs = copy.deepcopy(g.outputs)
    h.constants = dict(g.constants)
    h._next = g._next
    return h


def root_of(g: Graph, vid: int) -> int:
    """The buffer version a value (view or version) belongs to."""
    while "of" in g.values[vid]:
        vid = g.values[vid]["of"]
    return vid


def first_versions(g: Graph) -> dict[int, int]:
    """version id -> the id of its buffer's first version (input, const or alloc)."""
    first: dict[int, int] = {}
    for n in g.nodes:
        if n.op in ("input", "const", "alloc"):
            first[n.id] = n.id
        elif n.op not in ("view",):
            for region, new in n.writes:
                first[new] = first[root_of(g, region)]
    return first


def final_versions(g: Graph) -> dict[int, int]:
    """buffer (first version id) -> its last version id."""
    first = first_versions(g)
    last: dict[int, int] = {}
    for v, b in first.items():
        last[b] = v  # versions are made in order: the last assignment wins
    return last


def numel(v: dict[str, Any]) -> int:
    """The elements of a value (its ``values`` entry)."""
    n = 1
    for s in v["shape"]:
        n *= s
    return n
