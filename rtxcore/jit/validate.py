"""Strict checks of a graph document (the JSON of a graph file) before anything
of it is used: the header, values and outputs here, the nodes through
``node_checks`` (kernels: ``kernel_checks``; fused programs: ``program_checks``).

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
  its buffer is made earlier), fused programs in full (``program_checks``);
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

import json
import os
import re
from typing import Any

from .fields import (DTYPES, MAX_ARG_DEPTH, MAX_ARG_INDEX, MAX_BYTES, MAX_FUSED_INPUTS,  # noqa: F401
                     MAX_FUSED_STEPS, MAX_INT, MAX_NAME, MAX_NODES, MAX_NUMEL, MAX_OUTPUT_DEPTH,
                     MAX_RANK, MAX_VALUES, NAME, Limits, _Bad, _fail, _int, _is_int, _numel, _show,
                     decode_arg)
from .ir import FORMAT, VERSION, dumps, iter_refs  # noqa: F401  (iter_refs: validate.iter_refs)
from .kernel_checks import (APPROXIMATE, BINARY_OPS, ELEMENTWISE, INT_DIVISION,  # noqa: F401
                            N_OUTPUTS, READS_OUT, UNARY_OPS, _Kernel)
from .node_checks import BUFFERS, NOT_NODES, STRUCTURAL, _Nodes  # noqa: F401

_ID_KEY = re.compile(r"0|[1-9][0-9]{0,18}")


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


def _limits() -> Limits:
    """The limits the nodes' checks run under: this module's ``MAX_*`` now."""
    return Limits(rank=MAX_RANK, numel=MAX_NUMEL, arg_index=MAX_ARG_INDEX,
                  arg_depth=MAX_ARG_DEPTH, fused_steps=MAX_FUSED_STEPS,
                  fused_inputs=MAX_FUSED_INPUTS, name=MAX_NAME)


# -- the document ----------------------------------------------------------------------


def check_document(doc: Any) -> tuple[dict[int, dict[str, Any]], list[Any], Any]:
    """Check a graph document; returns ``(values, nodes, outputs)``: the values by
    int id, ``Node`` objects with decoded args, the outputs as they are."""
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
    raw = doc["nodes"]
    if not isinstance(raw, list):
        raise _fail("graph nodes", "the nodes", "a list", type(raw).__name__)
    if len(raw) > MAX_NODES:
        raise _Bad(f"graph nodes: {len(raw)} nodes, more than the limit of {MAX_NODES}")
    nodes = _Nodes(values, _limits()).check(raw)
    limit = max_bytes()
    if nodes.bytes > limit:
        raise _Bad(f"graph: its buffers hold {nodes.bytes} bytes together, more than the "
                   f"limit of {limit} (RTX_GRAPH_MAX_BYTES or "
                   "rtxcore.jit.validate.MAX_BYTES raise it)")
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


# -- index values: checked as a graph read from a file runs ----------------------------


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


# -- graphs in memory ------------------------------------------------------------------------


def check_graph(graph: Any) -> None:
    """Check a ``Graph`` as if it were read from a file (its JSON, round trip)."""
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
