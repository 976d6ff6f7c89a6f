"""The nodes of a graph file checked in order: each node's shape and kind, the
values it defines (each once, from earlier ones: writes never form a cycle),
every reference defined by an earlier node, the attrs of inputs, constants,
allocs and views; kernels and fused groups handed to their own checks.
"""

from __future__ import annotations

from typing import Any

from ..dispatch import ops as OPS
from .fields import (DTYPES, LIMITS, Limits, _Bad, _fail, _int, _keys, _name, _numel, _show,
                     decode_arg)
from .ir import Node, Ref, iter_refs
from .kernel_checks import _Kernel
from .program_checks import _copy_program, _program

STRUCTURAL = ("input", "const", "alloc", "view", "fused")
BUFFERS = ("input", "const", "alloc")
# known ops that never are a node of their own: allocation and host transfers
# are alloc / const nodes; masked_select's size comes from data (a host read)
NOT_NODES = frozenset({"empty", "from_host", "to_host", "masked_select"})


class _Nodes:
    """The nodes of one document, checked in order, and what the checks learn of
    the values they define."""

    def __init__(self, values: dict[int, dict[str, Any]], limits: Limits = LIMITS) -> None:
        self.values = values
        self.limits = limits
        self.nodes: list[Any] = []
        self.defined: dict[int, int] = {}  # value id -> index of the node defining it
        self.parent: dict[int, int] = {}
        self.root: dict[int, int] = {}  # defined value id -> its buffer's first version
        self.kind: dict[int, str] = {}  # buffer id -> input / const / alloc
        self.bytes = 0
        self.names: dict[tuple[str, Any], int] = {}  # (what, name or index) -> node

    def unique(self, what: str, key: Any, i: int, where: str) -> None:
        at = self.names.setdefault((what, key), i)
        if at != i:
            raise _Bad(f"{where}: {what} {key!r} is node {at}'s already")

    # the value facts a check needs
    def shape(self, vid: int) -> list[int]:
        return self.values[vid]["shape"]

    def dtype(self, vid: int) -> str:
        return self.values[vid]["dtype"]

    def check(self, raw: list[Any]) -> "_Nodes":
        """Check the nodes (a list, no longer than the limit: ``check_document``
        saw to that) in two passes; ``self.nodes`` is then the decoded ``Node``
        list, ``self.bytes`` what its buffers hold together."""
        # pass 1: the shape of each node, what it defines and from what
        parsed = []
        for i, nd in enumerate(raw):
            where = f"graph node {i}"
            if not isinstance(nd, dict):
                raise _fail(where, "a node", "an object", nd)
            want = {"id", "op", "args", "attrs", "writes"}
            if set(nd) != want:
                raise _Bad(f"{where}: keys must be {sorted(want)}, got {sorted(map(str, nd))}")
            op = nd["op"]
            if type(op) is not str or not (op in STRUCTURAL or
                                           (OPS.is_known_op(op) and op not in NOT_NODES)):
                raise _Bad(f"{where}: graph names an unknown op {_show(op)} (known: "
                           f"{', '.join(STRUCTURAL)} and the kernels of rtxcore.dispatch.ops "
                           "but for empty, from_host, to_host and masked_select)")
            where = f"graph node {i} ({op})"
            nid = nd["id"]
            if not isinstance(nd["args"], list):
                raise _fail(where, "args", "a list", nd["args"])
            if not isinstance(nd["attrs"], dict):
                raise _fail(where, "attrs", "an object", nd["attrs"])
            writes = nd["writes"]
            if not isinstance(writes, list):
                raise _fail(where, "writes", "a list of [region, new version] pairs", writes)
            pairs = []
            for j, w in enumerate(writes):
                if not isinstance(w, list) or len(w) != 2:
                    raise _fail(where, f"writes[{j}]", "a [region, new version] pair of ids", w)
                r = _int(w[0], where, f"writes[{j}][0]")
                new = _int(w[1], where, f"writes[{j}][1]")
                pairs.append((r, new))
            if op in BUFFERS or op == "view":
                _int(nid, where, "id")
                if pairs:
                    raise _fail(where, "writes", "[] (it writes nothing)", writes)
                self._define(nid, i, where, "id")
                if op == "view":
                    args = nd["args"]
                    if len(args) != 1 or not isinstance(args[0], dict) or set(args[0]) != {"ref"}:
                        raise _fail(where, "args", '[{"ref": id}] (the value it shows)', args)
                    of = _int(args[0]["ref"], where, "args[0].ref")
                    val = self.values[nid]
                    if "of" not in val:
                        raise _Bad(f"{where}: value {nid} must be a view (strides, offset, of), "
                                   "is a buffer version")
                    if of != val["of"]:
                        raise _Bad(f"{where}: args[0].ref must be the value's 'of' "
                                   f"({val['of']}), got {of}")
                    self.parent[nid] = of
                else:
                    if "of" in self.values[nid]:
                        raise _Bad(f"{where}: value {nid} must be a buffer version, is a view")
                    self.parent[nid] = nid
                    self.kind[nid] = op
            else:
                if not pairs:
                    raise _fail(where, "writes", "at least one [region, new version] pair",
                                writes)
                if nid != pairs[0][1] or type(nid) is not int:
                    raise _fail(where, "id", f"the first new version it writes ({pairs[0][1]})",
                                nid)
                for j, (r, new) in enumerate(pairs):
                    self._define(new, i, where, f"writes[{j}][1]")
                    if "of" in self.values[new]:
                        raise _Bad(f"{where}: writes[{j}][1]: value {new} must be a buffer "
                                   "version, is a view")
                    if r >= new:
                        raise _Bad(f"{where}: writes[{j}]: the region ({r}) must be an earlier "
                                   f"value than the version it makes ({new})")
                    self.parent[new] = r
            parsed.append((i, nd, op, nid, pairs, where))
        # the buffer of every defined value: parents have smaller ids, so in id order
        for vid in sorted(self.defined):
            p = self.parent[vid]
            if p == vid:
                self.root[vid] = vid
                continue
            if p not in self.defined:
                raise _Bad(f"graph node {self.defined[vid]}: value {vid} is made from value {p}, "
                           "which no node defines")
            self.root[vid] = self.root[p]
        # pass 2: each node in order
        for i, nd, op, nid, pairs, where in parsed:
            self.nodes.append(self._node(i, nd, op, nid, pairs, where))
        return self

    def _define(self, vid: int, i: int, where: str, what: str) -> None:
        if vid not in self.values:
            raise _fail(where, what, "the id of a value in 'values'", vid)
        if vid in self.defined:
            raise _Bad(f"{where}: {what}: value {vid} is already defined by node "
                       f"{self.defined[vid]}")
        self.defined[vid] = i

    def _use(self, vid: int, i: int, where: str, what: str) -> None:
        """``vid`` must be a value a node before node ``i`` defines."""
        at = self.defined.get(vid)
        if at is None or at >= i:
            later = "" if at is None else f" (node {at} defines it, after this one)"
            raise _Bad(f"{where}: {what} must refer to a value an earlier node defines, "
                       f"got {_show(vid)}{later}")

    def _node(self, i: int, nd: dict[str, Any], op: str, nid: int, pairs: list[tuple[int, int]],
              where: str) -> Node:
        attrs, raw_args = nd["attrs"], nd["args"]
        val = self.values[nid] if nid in self.values else None
        if op in BUFFERS:
            if raw_args:
                raise _fail(where, "args", "[]", raw_args)
            nbytes = _numel(val["shape"]) * DTYPES[val["dtype"]].itemsize
            if op == "input":
                kind = attrs.get("kind")
                if kind == "arg":
                    _keys(attrs, {"kind", "index"}, where)
                    _int(attrs["index"], where, "attrs.index", 0, self.limits.arg_index)
                    self.unique("argument", attrs["index"], i, where)
                elif kind == "external":
                    _keys(attrs, {"kind", "name"}, where)
                    self.unique("external input", _name(attrs["name"], where, "attrs.name", self.limits.name), i,
                                where)
                else:
                    raise _fail(where, "attrs.kind", "'arg' or 'external'", kind)
                self.bytes += nbytes
            elif op == "const":
                _keys(attrs, {"name"}, where)
                self.unique("constant", _name(attrs["name"], where, "attrs.name", self.limits.name), i, where)
                self.bytes += nbytes
            else:
                if "reuse" in attrs:
                    _keys(attrs, {"reuse"}, where)
                    home = _int(attrs["reuse"], where, "attrs.reuse")
                    at = self.defined.get(home)
                    if at is None or at >= i or self.kind.get(home) != "alloc":
                        raise _fail(where, "attrs.reuse", "the id of an earlier alloc", home)
                    hv = self.values[home]
                    if hv["dtype"] != val["dtype"] or _numel(hv["shape"]) != _numel(val["shape"]):
                        raise _Bad(f"{where}: attrs.reuse: alloc {home} ({hv['dtype']}, "
                                   f"{_numel(hv['shape'])} elements) must have this alloc's dtype "
                                   f"and size ({val['dtype']}, {_numel(val['shape'])})")
                else:
                    _keys(attrs, set(), where)
                    self.bytes += nbytes
            return Node(nid, op, [], dict(attrs), [])
        if op == "view":
            _keys(attrs, {"strides", "offset"}, where)
            if not isinstance(attrs["strides"], list) or attrs["strides"] != val["strides"] or \
                    any(type(s) is not int for s in attrs["strides"]):
                raise _fail(where, "attrs.strides", f"the value's strides {val['strides']}",
                            attrs["strides"])
            if type(attrs["offset"]) is not int or attrs["offset"] != val["offset"]:
                raise _fail(where, "attrs.offset", f"an int >= 0, the value's offset "
                            f"({val['offset']})", attrs["offset"])
            root = self.root[nid]
            if self.defined[root] >= i:
                raise _Bad(f"{where}: the buffer it shows (value {root}) must be made by an "
                           "earlier node")
            return Node(nid, op, [Ref(val["of"])], {"strides": list(val["strides"]),
                                                     "offset": val["offset"]}, [])
        # a kernel or a fused group
        args = [decode_arg(a, f"{where}: args[{k}]", limits=self.limits)
                for k, a in enumerate(raw_args)]
        for r in iter_refs(args):
            self._use(r.id, i, where, "every ref in args")
        roots = set()
        for j, (r, new) in enumerate(pairs):
            self._use(r, i, where, f"writes[{j}][0]")
            rv, root = self.values[r], self.root[r]
            if root in roots:
                raise _Bad(f"{where}: writes[{j}] writes buffer {root} a second time")
            roots.add(root)
            nv, bv = self.values[new], self.values[root]
            if nv["dtype"] != bv["dtype"] or nv["shape"] != bv["shape"]:
                raise _Bad(f"{where}: writes[{j}]: new version {new} must have its buffer's "
                           f"dtype and shape ({bv['dtype']} {bv['shape']}), got {nv['dtype']} "
                           f"{nv['shape']}")
            if "of" in rv and any(s == 0 and d > 1 for d, s in zip(rv["shape"], rv["strides"])):
                raise _Bad(f"{where}: writes[{j}]: region {r} repeats elements (a stride 0 "
                           "over a dim > 1); no kernel writes such a region")
        outs = [r for r, _ in pairs]
        if op == "fused":
            _keys(attrs, {"program"}, where)
            _program(attrs["program"], where, self, args, outs)
            return Node(nid, op, args, {"program": _copy_program(attrs["program"])}, pairs)
        if "rng" in attrs:
            _keys(attrs, {"rng"}, where)
            if op not in ("uniform", "normal"):
                raise _Bad(f"{where}: attrs.rng is only for uniform and normal")
            n = _numel(self.shape(outs[0]))
            if type(attrs["rng"]) is not int or attrs["rng"] != n:
                raise _fail(where, "attrs.rng", f"the int {n} (the elements it draws)",
                            attrs["rng"])
        else:
            _keys(attrs, set(), where)
        _Kernel(self, where, op, args, outs).check()
        return Node(nid, op, args, dict(attrs), pairs)
