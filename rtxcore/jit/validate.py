"""Strict checks of a graph document (the JSON of a graph file) before anything
of it is used.

A graph file comes from outside: ``rtxcore.jit.load`` must not let it run
code, loop, overflow or allocate without bound. ``check_document`` reads the
JSON that ``Graph.to_json`` writes and checks every field -- its type, its
range and what it refers to -- and returns the decoded parts ``Graph.from_json``
builds the graph from. Anything wrong is a ``ValueError`` naming the field::

    graph node 12 (view): attrs.offset must be an int >= 0, the value's offset (0),
    got '1); import os'

What is checked (``docs/graph-file.md`` has the format and the threat model):

- the header (``format``, ``version``) and that no other top-level key is there;
- values: ids (keys: decimal ints, no sign, no leading zeros), dtype names (the
  nine canonical names), shapes (at most ``MAX_RANK`` non-negative ints whose
  product is at most ``MAX_NUMEL``), views' strides, offset and ``of`` (an
  earlier buffer version, not a view) and that a view stays inside the buffer
  it shows, with that buffer's dtype;
- nodes: ``op`` from the closed lists, ``attrs`` with exactly the keys of the
  op, ``args`` decoded strictly and matched against what the op's kernel takes
  (arity, refs, scalars, axes, strings only where a kernel takes one), the
  shapes and dtypes of its operands as the kernel contract in
  ``rtxcore.dispatch.ops`` states them (operands shaped as the output,
  reductions' axes, matmul's dims, ...), ``writes`` (each new version defined
  once, its region an earlier value: writes never form a cycle), every
  reference defined by an earlier node (a view may show a version made later,
  its buffer is made earlier), fused programs in full (see ``_program``);
- outputs: ``{"view": id}``, ``{"seq": [...], "type": "tuple"|"list"}``,
  ``{"map": [[key, output], ...]}``, ``{"lit": scalar}``, at most
  ``MAX_OUTPUT_DEPTH`` deep;
- limits: ``MAX_NODES`` nodes, ``MAX_VALUES`` values, and the bytes of every
  buffer the graph allocates, reads from the file or binds as an input
  together at most ``max_bytes()`` (``MAX_BYTES``, 16 GiB, or the environment
  variable ``RTX_GRAPH_MAX_BYTES``).

Index values inside tensors (``gather``'s, ``index``'s, ...) are data: no
check of the file can see them. A plan of a graph read from a file checks them
as it runs (``index_operands``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator

from .. import dtype as D
from ..dispatch import ops as OPS
from ..dispatch.types import contiguous_strides

# -- limits ----------------------------------------------------------------------------

MAX_NODES = 1_000_000
MAX_VALUES = 4_000_000
MAX_RANK = 32
MAX_INT = 2**62  # any id, stride, offset, count in a file
MAX_NUMEL = 2**59  # elements of one value (its bytes stay below 2**62)
MAX_BYTES = 16 * 2**30  # all buffers together (see max_bytes)
MAX_ARG_INDEX = 65535  # an argument position
MAX_ARG_DEPTH = 4  # nesting of a kernel argument (a tuple of refs is depth 2)
MAX_OUTPUT_DEPTH = 32  # nesting of the outputs (tuples of lists of dicts ...)
MAX_FUSED_STEPS = 1024
MAX_FUSED_INPUTS = 256
MAX_NAME = 256
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")  # const and external input names
_ID_KEY = re.compile(r"0|[1-9][0-9]{0,18}")
_FLOAT_TEXT = re.compile(r"-?(nan|inf|[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)")

DTYPES: dict[str, D.DType] = {d.name: d for d in D.ALL}  # canonical names only
STRUCTURAL = ("input", "const", "alloc", "view", "fused")
BUFFERS = ("input", "const", "alloc")
# known ops that never are a node of their own: allocation and host transfers
# are alloc / const nodes; masked_select's size comes from data (a host read)
NOT_NODES = frozenset({"empty", "from_host", "to_host", "masked_select"})
# kernels writing more than one output (rtxcore.jit.trace.OUTPUTS) and those
# reading what they write (READS_OUT): their first args are the written regions
N_OUTPUTS = {"max_pool2d_tiled": 2, "sort": 2, "layer_norm": 3, "conv2d": 2}
READS_OUT = frozenset({"scatter_add", "index_put"})
APPROXIMATE = ("none", "tanh")  # gelu's one string argument


def max_bytes() -> int:
    """The most bytes a graph's buffers may hold together: ``RTX_GRAPH_MAX_BYTES``
    when set (an int, suffixes K/M/G/T for powers of 1024), else ``MAX_BYTES``."""
    raw = os.environ.get("RTX_GRAPH_MAX_BYTES", "").strip()
    if not raw:
        return MAX_BYTES
    m = re.fullmatch(r"([0-9]{1,19})\s*([KMGT]?)i?B?", raw, re.I)
    if not m:
        raise ValueError(f"RTX_GRAPH_MAX_BYTES must be a number of bytes (e.g. 17179869184 "
                         f"or 16G), got {raw!r}")
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")


def _show(x: Any) -> str:
    try:
        r = repr(x)
    except Exception:  # pragma: no cover - JSON values always have a repr
        r = f"<{type(x).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


class _Bad(ValueError):
    pass


def _fail(where: str, what: str, expect: str, got: Any) -> _Bad:
    return _Bad(f"{where}: {what} must be {expect}, got {_show(got)}")


def _is_int(x: Any) -> bool:
    return type(x) is int


def _int(x: Any, where: str, what: str, lo: int = 0, hi: int = MAX_INT) -> int:
    if type(x) is not int or not lo <= x <= hi:
        bound = f"an int >= {lo}" if hi == MAX_INT else f"an int in [{lo}, {hi}]"
        raise _fail(where, what, bound, x)
    return x


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _is_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float)


def _scalar_fits(v: Any, dt: str) -> bool:
    """Whether Python scalar ``v`` is a valid operand of a kernel computing in
    dtype ``dt`` (the core converts scalars to the op's dtype first)."""
    t = type(v)
    if t is bool:
        return True
    d = DTYPES[dt]
    if t is int:
        if d.kind == "b":
            return False
        if d.kind == "f":
            return -2**64 <= v <= 2**64
        import numpy as np

        info = np.iinfo(d.numpy)
        return int(info.min) <= v <= int(info.max)
    if t is float:
        return d.kind == "f"
    return False


# -- the document ----------------------------------------------------------------------


def check_document(doc: Any) -> tuple[dict[int, dict[str, Any]], list[Any], Any]:
    """Check a graph document; returns ``(values, nodes, outputs)``: the values by
    int id, ``Node`` objects with decoded args, the outputs as they are."""
    from .graph import FORMAT, VERSION

    if not isinstance(doc, dict):
        raise _fail("graph", "the document", "a JSON object", type(doc).__name__)
    if doc.get("format") != FORMAT:
        raise _Bad(f"not an rtxcore graph (no 'format': '{FORMAT}' header; "
                   f"got {_show(doc.get('format'))})")
    ver = doc.get("version")
    if type(ver) is int and ver > VERSION:
        raise _Bad(f"graph format version {ver!r} is newer than this rtxcore reads "
                   f"(version {VERSION}); upgrade rtxcore")
    _int(ver, "graph header", "version", 1, VERSION)
    keys = {"format", "version", "values", "nodes", "outputs"}
    if set(doc) != keys:
        extra, missing = sorted(set(doc) - keys), sorted(keys - set(doc))
        raise _Bad(f"graph header: keys must be {sorted(keys)}"
                   + (f"; unknown {extra}" if extra else "")
                   + (f"; missing {missing}" if missing else ""))
    values = _values(doc["values"])
    nodes = _Nodes(values).check(doc["nodes"])
    outputs = doc["outputs"]
    _outputs(outputs, "graph outputs", nodes.defined, 0)
    return values, nodes.nodes, outputs


def _values(raw: Any) -> dict[int, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise _fail("graph values", "the values", "an object of id: value", raw)
    if len(raw) > MAX_VALUES:
        raise _Bad(f"graph values: {len(raw)} values, more than the limit of {MAX_VALUES}")
    values: dict[int, dict[str, Any]] = {}
    for key, v in raw.items():
        if not isinstance(key, str) or not _ID_KEY.fullmatch(key) or int(key) > MAX_INT:
            raise _fail("graph values", "every id", f"a decimal int in [0, {MAX_INT}] "
                        "(no sign, spaces or leading zeros)", key)
        vid = int(key)
        where = f"graph value {vid}"
        if not isinstance(v, dict):
            raise _fail(where, "the value", "an object", v)
        view = "of" in v
        want = {"dtype", "shape", "strides", "offset", "of"} if view else {"dtype", "shape"}
        if set(v) != want:
            raise _Bad(f"{where}: keys must be {sorted(want)}, got {sorted(map(str, v))}")
        if type(v["dtype"]) is not str or v["dtype"] not in DTYPES:
            raise _fail(where, "dtype", f"one of {', '.join(DTYPES)}", v["dtype"])
        shape = _shape(v["shape"], where, "shape")
        out: dict[str, Any] = {"dtype": v["dtype"], "shape": shape}
        if view:
            strides = v["strides"]
            if not isinstance(strides, list) or len(strides) != len(shape):
                raise _fail(where, "strides", f"a list of {len(shape)} ints (one per dim)",
                            strides)
            for s in strides:
                _int(s, where, "strides[i]", -MAX_INT, MAX_INT)
            out["strides"] = list(strides)
            out["offset"] = _int(v["offset"], where, "offset")
            of = v["of"]
            if type(of) is not int or not 0 <= of < vid:
                raise _fail(where, "of", f"the id of an earlier value (below {vid})", of)
            out["of"] = of
        values[vid] = out
    # each view inside the buffer version it shows (that version's dtype, its elements)
    for vid, v in values.items():
        if "of" not in v:
            continue
        b = v["of"]
        if b not in values or "of" in values[b]:
            raise _fail(f"graph value {vid}", "of", "the id of a buffer version (not a view)", b)
        bv = values[b]
        if v["dtype"] != bv["dtype"]:
            raise _Bad(f"graph value {vid}: a view of {bv['dtype']} value {b} must be "
                       f"{bv['dtype']}, got {v['dtype']}")
        lo, hi = _reach(v)
        if hi >= 0 and (lo < 0 or hi >= _numel(bv["shape"])):
            raise _Bad(f"graph value {vid}: the view (shape {v['shape']}, strides "
                       f"{v['strides']}, offset {v['offset']}) reaches elements {lo}..{hi} of "
                       f"value {b}, which has {_numel(bv['shape'])}")
    return values


def _shape(s: Any, where: str, what: str) -> list[int]:
    if not isinstance(s, list) or len(s) > MAX_RANK:
        raise _fail(where, what, f"a list of at most {MAX_RANK} ints >= 0", s)
    n = 1
    for d in s:
        _int(d, where, f"{what}[i]", 0, MAX_NUMEL)
        n *= d
        if n > MAX_NUMEL:
            raise _Bad(f"{where}: {what} {_show(s)} has more than {MAX_NUMEL} elements")
    return list(s)


def _reach(v: dict[str, Any]) -> tuple[int, int]:
    """(lowest, highest) element a view touches; (0, -1) for an empty one."""
    if 0 in v["shape"]:
        return 0, -1
    lo = hi = v["offset"]
    for d, s in zip(v["shape"], v["strides"]):
        if s > 0:
            hi += (d - 1) * s
        else:
            lo += (d - 1) * s
    return lo, hi


def _whole(v: dict[str, Any], root: dict[str, Any]) -> bool:
    """A buffer version, or a view showing all of its buffer in order."""
    if "of" not in v:
        return True
    return (v["offset"] == 0 and tuple(v["strides"]) == contiguous_strides(tuple(v["shape"]))
            and _numel(v["shape"]) == _numel(root["shape"]))


# -- outputs ---------------------------------------------------------------------------


def _outputs(o: Any, where: str, defined: dict[int, int], depth: int) -> None:
    if depth > MAX_OUTPUT_DEPTH:
        raise _Bad(f"{where}: outputs nest deeper than {MAX_OUTPUT_DEPTH}")
    if not isinstance(o, dict) or len(o) not in (1, 2):
        raise _fail(where, "an output", '{"view": id}, {"seq": [...], "type": ...}, '
                    '{"map": [[key, output], ...]} or {"lit": scalar}', o)
    if "view" in o and len(o) == 1:
        vid = o["view"]
        if not _is_int(vid) or vid not in defined:
            raise _fail(where, "view", "the id of a value a node defines", vid)
    elif "seq" in o and set(o) == {"seq", "type"}:
        if o["type"] not in ("tuple", "list") or type(o["type"]) is not str:
            raise _fail(where, "type", "'tuple' or 'list'", o["type"])
        if not isinstance(o["seq"], list):
            raise _fail(where, "seq", "a list of outputs", o["seq"])
        for i, x in enumerate(o["seq"]):
            _outputs(x, f"{where}.seq[{i}]", defined, depth + 1)
    elif "map" in o and len(o) == 1:
        if not isinstance(o["map"], list):
            raise _fail(where, "map", "a list of [key, output] pairs", o["map"])
        for i, kv in enumerate(o["map"]):
            if not isinstance(kv, list) or len(kv) != 2 or \
                    not (kv[0] is None or type(kv[0]) in (str, bool, int, float)):
                raise _fail(f"{where}.map[{i}]", "an item", "a [key, output] pair with a "
                            "string, number, bool or null key", kv)
            if type(kv[0]) is int and abs(kv[0]) > 2**64:
                raise _fail(f"{where}.map[{i}]", "the key", "an int of at most 64 bits", kv[0])
            _outputs(kv[1], f"{where}.map[{i}]", defined, depth + 1)
    elif "lit" in o and len(o) == 1:
        x = o["lit"]
        if not (x is None or type(x) in (str, bool, float) or
                (type(x) is int and abs(x) <= 2**64)):
            raise _fail(where, "lit", "null, a bool, a number of at most 64 bits or a string", x)
    else:
        raise _fail(where, "an output", '{"view": id}, {"seq": [...], "type": ...}, '
                    '{"map": [[key, output], ...]} or {"lit": scalar}', o)


# -- kernel arguments --------------------------------------------------------------------


def decode_arg(a: Any, where: str, depth: int = 0) -> Any:
    """A kernel argument from its JSON (``graph._enc``'s encoding), strictly:
    refs, bools, ints of at most 64 bits, floats (non-finite ones and integral
    ones tagged ``{"float": text}``), tuples, lists, null, strings, dtypes."""
    from .graph import Ref

    if depth > MAX_ARG_DEPTH:
        raise _Bad(f"{where}: nests deeper than {MAX_ARG_DEPTH}")
    t = type(a)
    if a is None or t in (bool, str, float):
        if t is str and len(a) > MAX_NAME:
            raise _fail(where, "a string argument", f"at most {MAX_NAME} characters", a)
        return a
    if t is int:
        if not -2**63 <= a < 2**64:
            raise _fail(where, "an int argument", "within 64 bits", a)
        return a
    if t is list:
        return [decode_arg(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(a)]
    if t is dict and len(a) == 1:
        (k, v), = a.items()
        if k == "ref":
            return Ref(_int(v, where, "ref", 0))
        if k == "float":
            if type(v) is not str or len(v) > 40 or not _FLOAT_TEXT.fullmatch(v):
                raise _fail(where, "float", "a float's text ('nan', 'inf', '-inf', '2.0')", v)
            return float(v)
        if k == "tuple":
            if type(v) is not list:
                raise _fail(where, "tuple", "a list", v)
            return tuple(decode_arg(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v))
        if k == "dtype":
            if type(v) is not str or v not in DTYPES:
                raise _fail(where, "dtype", f"one of {', '.join(DTYPES)}", v)
            return DTYPES[v]
    raise _fail(where, "an argument", 'a ref {"ref": id}, a scalar, a list, a tuple '
                '{"tuple": [...]}, a float {"float": text}, a dtype {"dtype": name}, a string '
                "or null", a)


def iter_refs(args: Any) -> Iterator[Any]:
    from .graph import Ref

    for a in args:
        if isinstance(a, Ref):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from iter_refs(a)


# -- nodes ---------------------------------------------------------------------------------


class _Nodes:
    def __init__(self, values: dict[int, dict[str, Any]]) -> None:
        self.values = values
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

    def check(self, raw: Any) -> "_Nodes":
        from .graph import Node

        if not isinstance(raw, list):
            raise _fail("graph nodes", "the nodes", "a list", type(raw).__name__)
        if len(raw) > MAX_NODES:
            raise _Bad(f"graph nodes: {len(raw)} nodes, more than the limit of {MAX_NODES}")
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
            self.nodes.append(self._node(i, nd, op, nid, pairs, where, Node))
        limit = max_bytes()
        if self.bytes > limit:
            raise _Bad(f"graph: its buffers hold {self.bytes} bytes together, more than the "
                       f"limit of {limit} (RTX_GRAPH_MAX_BYTES or "
                       "rtxcore.jit.validate.MAX_BYTES raise it)")
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
              where: str, Node: Any) -> Any:
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
                    _int(attrs["index"], where, "attrs.index", 0, MAX_ARG_INDEX)
                    self.unique("argument", attrs["index"], i, where)
                elif kind == "external":
                    _keys(attrs, {"kind", "name"}, where)
                    self.unique("external input", _name(attrs["name"], where, "attrs.name"), i,
                                where)
                else:
                    raise _fail(where, "attrs.kind", "'arg' or 'external'", kind)
                self.bytes += nbytes
            elif op == "const":
                _keys(attrs, {"name"}, where)
                self.unique("constant", _name(attrs["name"], where, "attrs.name"), i, where)
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
            from .graph import Ref

            return Node(nid, op, [Ref(val["of"])], {"strides": list(val["strides"]),
                                                     "offset": val["offset"]}, [])
        # a kernel or a fused group
        args = [decode_arg(a, f"{where}: args[{k}]") for k, a in enumerate(raw_args)]
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


def _keys(attrs: dict[str, Any], want: set[str], where: str) -> None:
    if set(attrs) != want:
        raise _Bad(f"{where}: attrs must have the keys {sorted(want)}, got "
                   f"{sorted(map(str, attrs))}")


def _name(x: Any, where: str, what: str) -> str:
    if type(x) is not str or len(x) > MAX_NAME or not NAME.fullmatch(x):
        raise _fail(where, what, f"a name of letters, digits, '_', '.' and '-' (at most "
                    f"{MAX_NAME}, not starting with '.' or '-')", x)
    return x


def _copy_program(p: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy of a checked program (plain lists, floats decoded)."""
    out: dict[str, Any] = {"n": p["n"], "inputs": list(p["inputs"]),
                           "steps": [[op, dt, [[k, _const(v) if k == "const" else v]
                                               for k, v in operands]]
                                     for op, dt, operands in p["steps"]],
                           "outputs": list(p["outputs"])}
    for k in ("cols", "reduce"):
        if k in p:
            out[k] = p[k]
    return out


def _const(v: Any) -> Any:
    if isinstance(v, dict):  # {"float": text}: a non-finite float (JSON has none)
        return float(v["float"])
    return v


# -- kernels: each op's arguments, shapes and dtypes ---------------------------------------

_FAMILY = {name: s.family for name, s in {**OPS.PRIMITIVES, **OPS.COMPOSITES}.items()}


def _domain(op: str) -> tuple[str, ...]:
    return OPS.DOMAINS[OPS.spec(op).dtypes]


def _bool_result(op: str) -> bool:
    return OPS.spec(op).result == "bool"


UNARY_OPS = frozenset(n for n, f in _FAMILY.items() if f == "unary")
BINARY_OPS = frozenset(n for n, f in _FAMILY.items() if f in ("binary", "compare"))
# what a fused step may be (rtxcore.jit.passes.ELEMENTWISE: primitives only)
ELEMENTWISE = frozenset(OPS.UNARY) | frozenset(OPS.BINARY) | frozenset(OPS.COMPARE) | \
    {"where", "cast", "copy"}
# integer division: the core refuses a zero divisor before the kernel runs (a
# host read, so a traced one has a Python-number divisor); a file's must be too
INT_DIVISION = frozenset({"floor_divide", "remainder"})


class _Kernel:
    def __init__(self, nodes: _Nodes, where: str, op: str, args: list[Any],
                 outs: list[int]) -> None:
        self.n, self.where, self.op, self.args, self.outs = nodes, where, op, args, outs

    def fail(self, msg: str) -> _Bad:
        return _Bad(f"{self.where}: {msg}")

    def ref(self, k: int, what: str | None = None, optional: bool = False) -> int | None:
        from .graph import Ref

        a = self.args[k]
        if optional and a is None:
            return None
        if not isinstance(a, Ref):
            raise _fail(self.where, f"args[{k}]" + (f" ({what})" if what else ""),
                        "a ref to a value" + (" or null" if optional else ""), a)
        return a.id

    def int_arg(self, k: int, what: str, lo: int, hi: int) -> int:
        return _int(self.args[k], self.where, f"args[{k}] ({what})", lo, hi)

    def ints(self, k: int, what: str, n: int | None, lo: int, hi: int) -> list[int]:
        a = self.args[k]
        if not isinstance(a, tuple) or (n is not None and len(a) != n) or len(a) > MAX_RANK:
            raise _fail(self.where, f"args[{k}] ({what})",
                        f"a tuple of {n if n is not None else 'at most ' + str(MAX_RANK)} ints",
                        a)
        for x in a:
            _int(x, self.where, f"args[{k}] ({what}) items", lo, hi)
        return list(a)

    def arity(self, n: int) -> None:
        if len(self.args) != n:
            raise self.fail(f"{self.op} takes {n} arguments after its output"
                            f"{'s' if len(self.outs) > 1 else ''}, got {len(self.args)}")

    def shape(self, vid: int) -> list[int]:
        return self.n.shape(vid)

    def dtype(self, vid: int) -> str:
        return self.n.dtype(vid)

    def same_shape(self, vid: int, shape: list[int], what: str) -> None:
        if self.shape(vid) != list(shape):
            raise self.fail(f"{what} (value {vid}) must have shape {list(shape)}, got "
                            f"{self.shape(vid)}")

    def dtype_is(self, vid: int, dts: Any, what: str) -> None:
        dts = (dts,) if isinstance(dts, str) else tuple(dts)
        if self.dtype(vid) not in dts:
            raise self.fail(f"{what} (value {vid}) must be {' or '.join(dts)}, got "
                            f"{self.dtype(vid)}")

    def scalar(self, k: int, dt: str, what: str) -> None:
        v = self.args[k]
        if not _is_scalar(v) or not _scalar_fits(v, dt):
            raise _fail(self.where, f"args[{k}] ({what})", f"a {dt} operand: a ref or a "
                        "Python scalar of that dtype", v)

    def check(self) -> None:
        op = self.op
        n_out = N_OUTPUTS.get(op, 1)
        if len(self.outs) != n_out:
            raise self.fail(f"{op} writes {n_out} region{'s' if n_out > 1 else ''}, "
                            f"got {len(self.outs)}")
        if op in READS_OUT:  # the regions it accumulates into come first, as refs
            for j, r in enumerate(self.outs):
                if len(self.args) <= j or self.ref(j, "the region it reads") != r:
                    raise self.fail(f"args[{j}] must be a ref to the region it writes ({r})")
            self.args = self.args[len(self.outs):]
        if op in UNARY_OPS or op in ("copy", "cast"):
            return self.unary()
        if op in BINARY_OPS:
            return self.binary()
        check = getattr(self, "k_" + op, None)
        if check is None:  # an op added to rtxcore.dispatch.ops without a check here
            raise self.fail(f"this rtxcore can't check a graph's {op} nodes: it doesn't load it")
        check()

    # -- elementwise
    def unary(self) -> None:
        self.arity(1)
        out, op = self.outs[0], self.op
        x = self.ref(0, "x")
        self.same_shape(x, self.shape(out), "x")
        if op == "cast":
            return
        if op == "copy" or not _bool_result(op):
            self.dtype_is(out, self.dtype(x), "the output")
        else:
            self.dtype_is(out, "bool", "the output")
        self.dtype_is(x, _domain(op) if op != "copy" else DTYPES, "x")

    def operands(self, ks: tuple[int, ...], names: str) -> None:
        """Each of args ``ks``: a ref or a Python scalar (an elementwise operand)."""
        from .graph import Ref

        for k, name in zip(ks, names):
            a = self.args[k]
            if not _is_scalar(a) and not isinstance(a, Ref):
                raise _fail(self.where, f"args[{k}] ({name})", "a ref to a value or a Python "
                            "scalar", a)

    def binary(self) -> None:
        self.arity(2)
        self.operands((0, 1), "xy")
        out, op = self.outs[0], self.op
        shape = self.shape(out)
        refs = [k for k in (0, 1) if not _is_scalar(self.args[k])]
        if not refs:
            raise self.fail(f"{op} needs at least one ref operand, got two scalars")
        xs = [self.ref(k, "xy"[k]) for k in refs]
        for k, x in zip(refs, xs):
            self.same_shape(x, shape, "xy"[k])
        dt = self.dtype(xs[0])
        for k, x in zip(refs, xs):
            self.dtype_is(x, dt, "xy"[k])
        self.dtype_is(xs[0], _domain(op), "the operands")
        self.dtype_is(out, "bool" if _bool_result(op) else dt, "the output")
        for k in (0, 1):
            if k not in refs:
                self.scalar(k, dt, "xy"[k])
        if op in INT_DIVISION and DTYPES[dt].kind in "iu" and \
                (1 in refs or self.args[1] == 0):
            raise _fail(self.where, "args[1] (y)", f"a non-zero int: the divisor of an integer "
                        f"{op} (a tensor of divisors can't be checked for zeros)", self.args[1])

    def k_where(self) -> None:
        self.arity(3)
        self.operands((1, 2), "xy")
        out = self.outs[0]
        shape, dt = self.shape(out), self.dtype(out)
        cond = self.ref(0, "cond")
        self.same_shape(cond, shape, "cond")
        self.dtype_is(cond, "bool", "cond")
        for k in (1, 2):
            if _is_scalar(self.args[k]):
                self.scalar(k, dt, "xy"[k - 1])
            else:
                x = self.ref(k, "xy"[k - 1])
                self.same_shape(x, shape, "xy"[k - 1])
                self.dtype_is(x, dt, "xy"[k - 1])

    # -- memory
    def k_full(self) -> None:
        self.arity(1)
        self.scalar(0, self.dtype(self.outs[0]), "value")

    def k_arange(self) -> None:
        self.arity(2)
        out = self.outs[0]
        if len(self.shape(out)) != 1:
            raise self.fail(f"arange's output must be 1-D, got shape {self.shape(out)}")
        for k in (0, 1):
            v = self.args[k]
            if type(v) not in (bool, int, float) or (type(v) is int and abs(v) > 2**63):
                raise _fail(self.where, f"args[{k}]", "a number", v)

    def _random(self) -> None:
        self.arity(4)
        self.dtype_is(self.outs[0], _domain(self.op), "the output")
        for k in (0, 1):
            v = self.args[k]
            if type(v) not in (int, float) or (type(v) is int and abs(v) > 2**63):
                raise _fail(self.where, f"args[{k}]", "a number", v)
        self.int_arg(2, "seed", 0, 2**63 - 1)
        self.int_arg(3, "offset", 0, 2**63 - 1)

    k_uniform = k_normal = _random

    # -- reductions and scans
    def _reduce(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        shape = self.shape(x)
        axes = self.ints(1, "axes", None, 0, max(len(shape) - 1, 0))
        if axes != sorted(set(axes)) or any(a >= len(shape) for a in axes):
            raise _fail(self.where, "args[1] (axes)", f"sorted distinct axes of a rank "
                        f"{len(shape)} operand", self.args[1])
        self.same_shape(out, [1 if d in axes else s for d, s in enumerate(shape)], "the output")
        self.dtype_is(x, _domain(self.op), "x")
        self.dtype_is(out, self.dtype(x), "the output")

    k_sum = k_prod = k_max = k_min = _reduce

    def _axis(self, k: int, shape: list[int]) -> int:
        if not shape:
            raise self.fail(f"{self.op} needs an operand of rank >= 1")
        return self.int_arg(k, "axis", 0, len(shape) - 1)

    def _arg_reduce(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        shape = self.shape(x)
        axis = self._axis(1, shape)
        self.same_shape(out, [1 if d == axis else s for d, s in enumerate(shape)], "the output")
        self.dtype_is(out, "int64", "the output")
        self.dtype_is(x, _domain(self.op), "x")

    k_argmax = k_argmin = _arg_reduce

    def _scan(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        self.same_shape(x, self.shape(out), "x")
        self._axis(1, self.shape(x))
        self.dtype_is(x, _domain(self.op), "x")
        self.dtype_is(out, self.dtype(x), "the output")

    k_cumsum = k_softmax = k_log_softmax = _scan

    # -- matmul
    def k_matmul(self) -> None:
        self.arity(2)
        out = self.outs[0]
        a, b = self.ref(0, "a"), self.ref(1, "b")
        sa, sb, so = self.shape(a), self.shape(b), self.shape(out)
        if len(sa) < 2 or len(sa) != len(sb) or len(so) != len(sa) or sa[:-2] != sb[:-2] or \
                sa[-1] != sb[-2] or so != sa[:-2] + [sa[-2], sb[-1]]:
            raise self.fail(f"matmul's shapes must be a (*B, n, k), b (*B, k, m), out "
                            f"(*B, n, m), got a {sa}, b {sb}, out {so}")
        dt = self.dtype(out)
        self.dtype_is(out, _domain("matmul"), "the output")
        self.dtype_is(a, dt, "a")
        self.dtype_is(b, dt, "b")

    # -- indexing
    def k_gather(self) -> None:
        self.arity(3)
        out = self.outs[0]
        x, idx = self.ref(0, "x"), self.ref(2, "index")
        sx, so = self.shape(x), self.shape(out)
        dim = self._axis(1, sx)
        self.same_shape(idx, so, "index")
        if len(so) != len(sx) or any(o > s for d, (o, s) in enumerate(zip(so, sx)) if d != dim):
            raise self.fail(f"gather's output {so} must have x's rank and fit x {sx} "
                            f"but along dim {dim}")
        self.dtype_is(idx, "int64", "index")
        self.dtype_is(x, self.dtype(out), "x")

    def k_scatter_add(self) -> None:
        self.arity(3)
        out = self.outs[0]
        idx, src = self.ref(1, "index"), self.ref(2, "src")
        so, si = self.shape(out), self.shape(idx)
        dim = self._axis(0, so)
        self.same_shape(src, si, "src")
        if len(si) != len(so) or any(i > s for d, (i, s) in enumerate(zip(si, so)) if d != dim):
            raise self.fail(f"scatter_add's index {si} must have out's rank and fit out {so} "
                            f"but along dim {dim}")
        self.dtype_is(idx, "int64", "index")
        self.dtype_is(src, self.dtype(out), "src")

    def _indices(self, k: int, rank: int) -> list[int]:
        from .graph import Ref

        a = self.args[k]
        if not isinstance(a, tuple) or not 1 <= len(a) <= rank or \
                not all(isinstance(r, Ref) for r in a):
            raise _fail(self.where, f"args[{k}] (indices)", f"a tuple of 1 to {rank} refs", a)
        ids = [r.id for r in a]
        for r in ids:
            self.same_shape(r, self.shape(ids[0]), "every index")
            self.dtype_is(r, "int64", "every index")
        return ids

    def k_index(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        ids = self._indices(1, len(self.shape(x)))
        want = self.shape(ids[0]) + self.shape(x)[len(ids):]
        self.same_shape(out, want, "the output")
        self.dtype_is(x, self.dtype(out), "x")

    def k_index_put(self) -> None:
        self.arity(2)
        out = self.outs[0]
        ids = self._indices(0, len(self.shape(out)))
        vals = self.ref(1, "values")
        target = self.shape(ids[0]) + self.shape(out)[len(ids):]
        sv = self.shape(vals)
        if len(sv) > len(target) or any(v not in (1, t) for v, t in
                                        zip(reversed(sv), reversed(target))):
            raise self.fail(f"index_put's values {sv} must broadcast to the indexed shape "
                            f"{target}")
        self.dtype_is(vals, self.dtype(out), "values")

    # -- composites
    def k_gelu(self) -> None:
        self.arity(2)
        out = self.outs[0]
        x = self.ref(0, "x")
        self.same_shape(x, self.shape(out), "x")
        self.dtype_is(out, _domain("gelu"), "the output")
        self.dtype_is(x, self.dtype(out), "x")
        if self.args[1] not in APPROXIMATE or type(self.args[1]) is not str:
            raise _fail(self.where, "args[1] (approximate)", "'none' or 'tanh'", self.args[1])

    def k_gelu_backward(self) -> None:
        self.arity(4)
        out = self.outs[0]
        self.dtype_is(out, _domain("gelu"), "the output")
        for k, what in enumerate(("g", "x", "y")):
            r = self.ref(k, what)
            self.same_shape(r, self.shape(out), what)
            self.dtype_is(r, self.dtype(out), what)
        if self.args[3] not in APPROXIMATE or type(self.args[3]) is not str:
            raise _fail(self.where, "args[3] (approximate)", "'none' or 'tanh'", self.args[3])

    def k_layer_norm(self) -> None:
        self.arity(4)
        out, mean, rstd = self.outs
        x = self.ref(0, "x")
        sx = self.shape(x)
        if len(sx) != 2:
            raise self.fail(f"layer_norm's x must be 2-D (M, N), got {sx}")
        m, n = sx
        if list(self.n.values[x].get("strides", [n, 1])) != list(contiguous_strides((m, n))):
            raise self.fail(f"layer_norm's x (value {x}) must be contiguous")
        self.same_shape(out, sx, "the output")
        self.same_shape(mean, [m, 1], "mean")
        self.same_shape(rstd, [m, 1], "rstd")
        dt = self.dtype(x)
        for r, what in ((x, "x"), (out, "the output"), (mean, "mean"), (rstd, "rstd")):
            self.dtype_is(r, _domain("layer_norm") if r == x else dt, what)
        for k, what in ((1, "weight"), (2, "bias")):
            r = self.ref(k, what, optional=True)
            if r is not None:
                self.same_shape(r, [n], what)
                self.dtype_is(r, dt, what)
        if type(self.args[3]) not in (int, float):
            raise _fail(self.where, "args[3] (eps)", "a number", self.args[3])

    def k_layer_norm_backward(self) -> None:
        self.arity(5)
        out = self.outs[0]
        g, x = self.ref(0, "g"), self.ref(1, "x")
        sx = self.shape(x)
        if len(sx) != 2:
            raise self.fail(f"layer_norm_backward's x must be 2-D (M, N), got {sx}")
        m, n = sx
        if list(self.n.values[x].get("strides", [n, 1])) != list(contiguous_strides((m, n))):
            raise self.fail(f"layer_norm_backward's x (value {x}) must be contiguous")
        if self.shape(out) not in ([m, n], [m + 2, n]):
            raise self.fail(f"layer_norm_backward's output (value {out}) must have shape "
                            f"{[m, n]} or {[m + 2, n]}, got {self.shape(out)}")
        self.same_shape(g, sx, "g")
        dt = self.dtype(x)
        self.dtype_is(x, _domain("layer_norm_backward"), "x")
        self.dtype_is(out, dt, "the output")
        self.dtype_is(g, dt, "g")
        for k, what in ((2, "mean"), (3, "rstd")):
            r = self.ref(k, what)
            self.same_shape(r, [m, 1], what)
            self.dtype_is(r, dt, what)
        w = self.ref(4, "weight", optional=True)
        if w is not None:
            self.same_shape(w, [n], "weight")
            self.dtype_is(w, dt, "weight")

    def k_max_pool2d_tiled(self) -> None:
        self.arity(3)
        values, indices = self.outs
        x = self.ref(0, "x")
        sx = self.shape(x)
        if len(sx) != 4:
            raise self.fail(f"max_pool2d_tiled's x must be 4-D (N, C, H, W), got {sx}")
        kh = self.int_arg(1, "kh", 1, max(sx[2], 1))
        kw = self.int_arg(2, "kw", 1, max(sx[3], 1))
        want = [sx[0], sx[1], sx[2] // kh, sx[3] // kw]
        self.same_shape(values, want, "values")
        self.same_shape(indices, want, "indices")
        self.dtype_is(x, _domain("max_pool2d_tiled"), "x")
        self.dtype_is(values, self.dtype(x), "values")
        self.dtype_is(indices, "int64", "indices")

    def k_max_pool2d_tiled_backward(self) -> None:
        self.arity(2)
        out = self.outs[0]
        g, idx = self.ref(0, "g"), self.ref(1, "indices")
        so, sg = self.shape(out), self.shape(g)
        if len(so) != 4 or len(sg) != 4 or sg[:2] != so[:2] or sg[2] > so[2] or sg[3] > so[3]:
            raise self.fail(f"max_pool2d_tiled_backward's shapes must be out (N, C, H, W), "
                            f"g (N, C, OH <= H, OW <= W), got out {so}, g {sg}")
        self.same_shape(idx, sg, "indices")
        self.dtype_is(out, _domain("max_pool2d_tiled_backward"), "the output")
        self.dtype_is(g, self.dtype(out), "g")
        self.dtype_is(idx, "int64", "indices")

    def _conv_params(self, k: int) -> tuple[list[int], list[int], list[int]]:
        stride = self.ints(k, "stride", 2, 1, 2**31)
        padding = self.ints(k + 1, "padding", 4, 0, 2**31)
        dilation = self.ints(k + 2, "dilation", 2, 1, 2**31)
        return stride, padding, dilation

    def _conv_out(self, sx: list[int], sw: list[int], stride: list[int], padding: list[int],
                  dilation: list[int]) -> list[int]:
        """(N, OC, OH, OW) of a conv of x ``sx`` by weight ``sw``."""
        if len(sx) != 4 or len(sw) != 4 or sw[1] != sx[1]:
            raise self.fail(f"{self.op}'s x must be (N, C, H, W) and weight (OC, C, kh, kw), "
                            f"got x {sx}, weight {sw}")
        dims = []
        for d, (size, kern) in enumerate(zip(sx[2:], sw[2:])):
            span = size + padding[2 * d] + padding[2 * d + 1] - dilation[d] * (kern - 1) - 1
            if span < 0:
                raise self.fail(f"{self.op}'s kernel {sw[2:]} is larger than the padded input")
            dims.append(span // stride[d] + 1)
        return [sx[0], sw[0], *dims]

    def k_conv2d(self) -> None:
        self.arity(6)
        out, cols = self.outs
        x, w = self.ref(0, "x"), self.ref(1, "weight")
        bias = self.ref(2, "bias", optional=True)
        sx, sw = self.shape(x), self.shape(w)
        so = self._conv_out(sx, sw, *self._conv_params(3))
        self.same_shape(out, so, "the output")
        self.same_shape(cols, [sx[1] * sw[2] * sw[3], sx[0] * so[2] * so[3]], "cols")
        dt = self.dtype(out)
        self.dtype_is(out, _domain("conv2d"), "the output")
        for r, what in ((x, "x"), (w, "weight"), (cols, "cols")):
            self.dtype_is(r, dt, what)
        if bias is not None:
            self.same_shape(bias, [sw[0]], "bias")
            self.dtype_is(bias, dt, "bias")

    def k_conv2d_input_grad(self) -> None:
        self.arity(5)
        dx = self.outs[0]
        g, w = self.ref(0, "g"), self.ref(1, "weight")
        so = self._conv_out(self.shape(dx), self.shape(w), *self._conv_params(2))
        self.same_shape(g, so, "g")
        dt = self.dtype(dx)
        self.dtype_is(dx, _domain("conv2d_input_grad"), "the output")
        self.dtype_is(g, dt, "g")
        self.dtype_is(w, dt, "weight")

    def k_conv2d_weight_grad(self) -> None:
        self.arity(2)
        dw = self.outs[0]
        g, cols = self.ref(0, "g"), self.ref(1, "cols")
        sw, sg = self.shape(dw), self.shape(g)
        if len(sw) != 4 or len(sg) != 4 or sg[1] != sw[0]:
            raise self.fail(f"conv2d_weight_grad's shapes must be dweight (OC, C, kh, kw), "
                            f"g (N, OC, OH, OW), got {sw}, {sg}")
        self.same_shape(cols, [sw[1] * sw[2] * sw[3], sg[0] * sg[2] * sg[3]], "cols")
        dt = self.dtype(dw)
        self.dtype_is(dw, _domain("conv2d_weight_grad"), "the output")
        self.dtype_is(g, dt, "g")
        self.dtype_is(cols, dt, "cols")

    def k_sort(self) -> None:
        self.arity(3)
        values, indices = self.outs
        x = self.ref(0, "x")
        sx = self.shape(x)
        self._axis(1, sx)
        self.same_shape(values, sx, "values")
        self.same_shape(indices, sx, "indices")
        self.dtype_is(x, _domain("sort"), "x")
        self.dtype_is(values, self.dtype(x), "values")
        self.dtype_is(indices, "int64", "indices")
        if type(self.args[2]) is not bool:
            raise _fail(self.where, "args[2] (descending)", "a bool", self.args[2])


def index_operands(graph: Any, node: Any) -> list[tuple[int, int, str]]:
    """The index operands of a kernel node whose values no file check can see:
    ``(value id, bound, what)`` for each, its elements must lie in
    ``[0, bound)``. Empty for every other op."""
    vals, op, args = graph.values, node.op, node.args
    if op in READS_OUT:
        args = args[len(node.writes):]
    out = vals[node.writes[0][0]]["shape"] if node.writes else []
    if op == "gather":
        return [(args[2].id, vals[args[0].id]["shape"][args[1]], "gather's index")]
    if op == "scatter_add":
        return [(args[1].id, out[args[0]], "scatter_add's index")]
    if op == "index":
        x = vals[args[0].id]["shape"]
        return [(r.id, x[j], f"index's indices[{j}]") for j, r in enumerate(args[1])]
    if op == "index_put":
        return [(r.id, out[j], f"index_put's indices[{j}]") for j, r in enumerate(args[0])]
    if op == "max_pool2d_tiled_backward":
        return [(args[1].id, out[2] * out[3], "max_pool2d_tiled_backward's indices")]
    return []


# -- fused programs ------------------------------------------------------------------------

_OPERAND_KINDS = ("in", "scalar", "row", "col", "step", "const")
_PROGRAM_KEYS = {"n", "inputs", "steps", "outputs"}


def _arity(op: str) -> int:
    if op == "where":
        return 3
    return 2 if op in BINARY_OPS else 1


def _program(p: Any, where: str, nodes: _Nodes, args: list[Any], outs: list[int]) -> None:
    """A fused node's program: what ``rtxcore.jit.passes.fuse_elementwise`` makes
    and the backends' ``fuse`` (cpu, opencl, cuda) turn into code: ``n`` elements,
    ``inputs`` (dtype names, one per arg), ``steps`` (``[op, dtype, operands]``,
    an elementwise op; a ``"sum"`` of an earlier step only as the last step of a
    reducing program), ``outputs`` (the steps stored, ascending), and optionally
    ``cols`` (the row length of "row"/"col" operands and of a "rows" sum; it
    divides ``n``) and ``reduce`` ("rows" or "all"). Operands: ``["in", i]``
    (input i, whole), ``["scalar", i]``, ``["row", i]``, ``["col", i]``
    (input i broadcast), ``["step", k]`` (an earlier step's result),
    ``["const", number]``. The node's args are the inputs (refs, their dtypes
    the program's), its writes the outputs (whole buffers of the outputs' sizes)."""
    from .graph import Ref

    w = f"{where}: attrs.program"
    if not isinstance(p, dict):
        raise _fail(where, "attrs.program", "an object", p)
    if not _PROGRAM_KEYS <= set(p) <= _PROGRAM_KEYS | {"cols", "reduce"}:
        raise _Bad(f"{w}: keys must be {sorted(_PROGRAM_KEYS)} and optionally 'cols' and "
                   f"'reduce', got {sorted(map(str, p))}")
    n = _int(p["n"], w, "n", 0, MAX_NUMEL)
    inputs = p["inputs"]
    if not isinstance(inputs, list) or len(inputs) > MAX_FUSED_INPUTS or \
            not all(type(d) is str and d in DTYPES for d in inputs):
        raise _fail(w, "inputs", f"a list of at most {MAX_FUSED_INPUTS} dtype names", inputs)
    reduce = p.get("reduce")
    if "reduce" in p and (type(reduce) is not str or reduce not in ("rows", "all")):
        raise _fail(w, "reduce", "'rows' or 'all'", reduce)
    cols = 0
    if "cols" in p:
        cols = _int(p["cols"], w, "cols", 1, MAX_NUMEL)
        if n % cols:
            raise _fail(w, "cols", f"a divisor of n ({n})", cols)
    if reduce == "rows" and not cols:
        raise _Bad(f"{w}: a program reducing rows needs 'cols'")
    if reduce and n < 2:
        raise _fail(w, "n", "at least 2 in a reducing program", n)
    steps = p["steps"]
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_FUSED_STEPS:
        raise _fail(w, "steps", f"a list of 1 to {MAX_FUSED_STEPS} steps", steps)
    kinds: dict[int, str] = {}
    step_dt: list[str] = []
    for k, s in enumerate(steps):
        ws = f"{w}.steps[{k}]"
        if not isinstance(s, list) or len(s) != 3:
            raise _fail(ws, "a step", "[op, dtype, operands]", s)
        op, dt, operands = s
        last_sum = reduce is not None and k == len(steps) - 1
        if last_sum:
            if op != "sum":
                raise _fail(ws, "op", "'sum' (the last step of a reducing program)", op)
        elif type(op) is not str or op not in ELEMENTWISE:
            raise _fail(ws, "op", "an elementwise op (a unary, binary or comparison "
                        "primitive, where, cast or copy)"
                        + ("; 'sum' only ends a reducing program" if op == "sum" else ""), op)
        if type(dt) is not str or dt not in DTYPES:
            raise _fail(ws, "dtype", f"one of {', '.join(DTYPES)}", dt)
        if not isinstance(operands, list) or len(operands) != (1 if last_sum else _arity(op)):
            raise _fail(ws, "operands", f"a list of {1 if last_sum else _arity(op)} operands",
                        operands)
        known: list[str | None] = []
        for j, o in enumerate(operands):
            wo = f"{ws}.operands[{j}]"
            if not isinstance(o, list) or len(o) != 2 or type(o[0]) is not str or \
                    o[0] not in _OPERAND_KINDS:
                raise _fail(wo, "an operand", f"[kind, value] with kind one of "
                            f"{', '.join(_OPERAND_KINDS)}", o)
            kind, v = o
            if last_sum and kind != "step":
                raise _fail(wo, "the sum's operand", "['step', k]", o)
            if kind == "const":
                if isinstance(v, dict) and set(v) == {"float"}:
                    v = decode_arg(v, wo)
                if not _is_scalar(v):
                    raise _fail(wo, "a const", "a bool, an int or a float", v)
                known.append(None)
            elif kind == "step":
                if type(v) is not int or not 0 <= v < k:
                    raise _fail(wo, "a step operand", f"the index of an earlier step (below {k})",
                                v)
                known.append(step_dt[v])
            else:
                if type(v) is not int or not 0 <= v < len(inputs):
                    raise _fail(wo, f"an {kind!r} operand", f"the index of a program input "
                                f"(below {len(inputs)})", v)
                if kinds.setdefault(v, kind) != kind:
                    raise _Bad(f"{wo}: input {v} is read as {kinds[v]!r} and as {kind!r}: "
                               "a program reads each input one way")
                if kind in ("row", "col") and not cols:
                    raise _Bad(f"{wo}: a {kind!r} operand needs the program's 'cols'")
                known.append(inputs[v])
        _step_dtypes(ws, op, dt, operands, known, last_sum)
        step_dt.append(dt)
    outputs = p["outputs"]
    if not isinstance(outputs, list) or not outputs or \
            not all(type(k) is int and 0 <= k < len(steps) for k in outputs) or \
            any(a >= b for a, b in zip(outputs, outputs[1:])):
        raise _fail(w, "outputs", f"a non-empty ascending list of step indices below "
                    f"{len(steps)}", outputs)
    if reduce and outputs[-1] != len(steps) - 1:
        raise _Bad(f"{w}: the sum ending a reducing program must be an output")
    unused = [i for i in range(len(inputs)) if i not in kinds]
    if unused:
        raise _Bad(f"{w}: inputs {unused} are read by no step")
    # the node around it: args are the inputs, writes the outputs
    if len(args) != len(inputs) or not all(isinstance(a, Ref) for a in args) or \
            len({a.id for a in args}) != len(args):
        raise _Bad(f"{where}: args must be {len(inputs)} distinct refs, one per program input")
    if len(outs) != len(outputs):
        raise _Bad(f"{where}: writes must be {len(outputs)}, one per program output")
    vals, rows = nodes.values, (n // cols if cols else n)
    for j, (r, k) in enumerate(zip(outs, outputs)):
        size = (rows if reduce == "rows" else 1) if reduce and k == len(steps) - 1 else n
        v, root = vals[r], vals[nodes.root[r]]
        if _numel(v["shape"]) != size or not _whole(v, root) or v["dtype"] != steps[k][1]:
            raise _Bad(f"{where}: writes[{j}] (value {r}) must be a whole {steps[k][1]} buffer "
                       f"of {size} elements (program output {j}), got {v['dtype']} "
                       f"{v['shape']}" + ("" if _whole(v, root) else " (a part of a buffer)"))
    for i, a in enumerate(args):
        v, root = vals[a.id], vals[nodes.root[a.id]]
        kind = kinds[i]
        if v["dtype"] != inputs[i]:
            raise _Bad(f"{where}: args[{i}] (value {a.id}) must be {inputs[i]} (program input "
                       f"{i}), got {v['dtype']}")
        if _numel(v["shape"]) != n:
            raise _Bad(f"{where}: args[{i}] (value {a.id}) must have n = {n} elements, got "
                       f"shape {v['shape']}")
        if kind == "in":
            if not _whole(v, root):
                raise _Bad(f"{where}: args[{i}] (value {a.id}), an 'in' operand, must be a "
                           "whole buffer")
            continue
        size = {"scalar": 1, "row": cols, "col": rows}[kind]
        off = v.get("offset", 0) if n else 0
        if off + size > _numel(root["shape"]):
            raise _Bad(f"{where}: args[{i}] (value {a.id}), a {kind!r} operand, reads "
                       f"{size} elements from {off}, past its buffer's "
                       f"{_numel(root['shape'])}")


def _step_dtypes(ws: str, op: str, dt: str, operands: list[Any], known: list[str | None],
                 last_sum: bool) -> None:
    """A step's dtypes as the kernel contract states them for its op."""
    def bad(msg: str) -> _Bad:
        return _Bad(f"{ws}: {msg}")

    if last_sum:
        if dt not in ("float32", "float64") or known[0] != dt:
            raise bad(f"the sum must be of a float32 or float64 step, in its dtype; got "
                      f"{known[0]} summed as {dt}")
        return
    if op == "cast":
        if known[0] is None:
            raise bad("cast's operand must be an input or a step")
        return
    if op == "where":
        if known[0] != "bool":
            raise bad(f"where's condition must be a bool input or step, got "
                      f"{known[0] or 'a const'}")
        for j in (1, 2):
            if known[j] is None:
                if not _scalar_fits(_const(operands[j][1]), dt):
                    raise bad(f"operand {j} must be a {dt} const, got {_show(operands[j][1])}")
            elif known[j] != dt:
                raise bad(f"operand {j} must be {dt}, got {known[j]}")
        return
    refs = [d for d in known if d is not None]
    if not refs:
        raise bad(f"{op} needs an input or step operand, got only consts")
    od = refs[0]
    if any(d != od for d in refs):
        raise bad(f"{op}'s operands must share one dtype, got {known}")
    if op != "copy" and od not in _domain(op):
        raise bad(f"{op} is not defined for {od}")
    want = "bool" if op != "copy" and _bool_result(op) else od
    if dt != want:
        raise bad(f"{op} of {od} gives {want}, the step says {dt}")
    for j, d in enumerate(known):
        if d is None and not _scalar_fits(_const(operands[j][1]), od):
            raise bad(f"operand {j} must be a {od} const, got {_show(operands[j][1])}")


# -- graphs in memory ------------------------------------------------------------------------


def check_graph(graph: Any) -> None:
    """Check a ``Graph`` as if it were read from a file (its JSON, round trip)."""
    import json

    from .graph import dumps

    check_document(json.loads(dumps(graph)))


def check_indices(t: Any, bound: int, what: str) -> None:
    """Raise IndexError unless every element of index tensor ``t`` lies in
    ``[0, bound)``: what a replay of a graph read from a file runs before each
    kernel reading indices (``index_operands``)."""
    from ..autograd.grad_mode import no_grad

    if t.numel() == 0:
        return
    with no_grad():
        lo, hi = int(t.min().item()), int(t.max().item())
    if lo < 0 or hi >= bound:
        bad = lo if lo < 0 else hi
        raise IndexError(f"{what}: index {bad} is out of range for a dim of size {bound} (a "
                         "graph read from a file: its index tensors are checked as it runs)")
