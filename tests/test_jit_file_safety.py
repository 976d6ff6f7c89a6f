"""rtxcore.jit.load on files from anywhere: every field of a graph file is checked
(rtxcore.jit.validate) before anything of it is used. Crafted files for each
way a value from the file used to reach generated source, a cycle, fuzzed
files: each is a ValueError naming the field, or a graph that runs; nothing
a file says is ever executed."""

from __future__ import annotations

import builtins
import copy
import json
import os
import re
import tempfile
import time
import tracemalloc
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save, save_file

import rtxcore as rc
from rtxcore.jit import validate as V
from rtxcore.jit.graph import dumps
from rtxcore.jit.passes import optimize

from .jit_steps import clipped_step

# what a payload would leave behind if a file's text ever ran as code
MARK = os.path.join(tempfile.gettempdir(), f"rtxcore-graph-file-ran-{os.getpid()}")
PAYLOADS = [
    f"1); open({MARK!r}, 'w').close(); (1",
    f"0]; __import__('builtins').RTX_GRAPH_RAN = 1; [0",
    f"__import__('os').system('touch {MARK}')",
    f"x\n    open({MARK!r}, 'w').close()\n    y",
    "float32'); __import__('builtins').RTX_GRAPH_RAN = 1; ('",
]


def _id(v: object) -> str:
    """A test id that is the same in every process (payloads hold a pid)."""
    if isinstance(v, str) and v in PAYLOADS:
        return f"payload{PAYLOADS.index(v)}"
    return repr(v)[:40]


def _nothing_ran() -> None:
    assert not os.path.exists(MARK), "a graph file's text ran as code"
    assert not hasattr(builtins, "RTX_GRAPH_RAN"), "a graph file's text ran as code"


def _fn():
    """A small traced function: an external weight, a matmul, elementwise work,
    broadcasts (views), an index by a constant, reductions, random numbers, and
    outputs of every kind (tuple, dict, literal)."""
    w = rc.tensor(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32))

    def f(x):
        i = rc.tensor([3, 0, 2])
        h = (x @ w).relu() * 2 + x.sum()
        noise = rc.rand(4, 5) * 0.0
        return h[i].sum(1), {"y": (h + noise) * 0.5, "n": 3}

    return f


X = rc.tensor(np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32))


def _traced(optimized: bool):
    t = rc.jit.trace(_fn(), X)
    if optimized:
        t.graph = optimize(t.graph)
    return t


def _file(t) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(graph document, tensors) of ``t`` as ``save`` writes them."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.rtxg")
        t.save(path)
        from safetensors import safe_open

        with safe_open(path, framework="numpy") as f:
            doc = json.loads(f.metadata()["rtxcore.graph"])
            data = {k: f.get_tensor(k) for k in f.keys()}
    return doc, data


RAW, RAW_DATA = _file(_traced(False))
OPT, OPT_DATA = _file(_traced(True))
WANT = _traced(False)(X)


def _training_step():
    """A training step over more kinds of kernel: convolution, pooling, layer
    norm, GELU, an embedding, sort, gather, softmax, cumsum, Adam's updates."""
    import rtxcore.nn as nn

    rc.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(27, 6), nn.LayerNorm(6), nn.GELU())
    emb = nn.Embedding(10, 6)
    opt = rc.optim.Adam(list(m.parameters()) + list(emb.parameters()), lr=0.1)

    def step(x, i, y):
        opt.zero_grad()
        h = m(x) + emb(i)
        _, idx = h.sort(1)
        g = h.gather(1, idx[:, :2])
        loss = nn.functional.cross_entropy(h.softmax(1).log() + g.sum(), y) + h.cumsum(1).mean()
        loss.backward()
        opt.step()
        return loss.detach(), (h > 0).float().argmax(1)

    args = (rc.randn(2, 2, 6, 6), rc.tensor([1, 7]), rc.tensor([0, 5]))
    step(*args)  # Adam's state
    t = rc.jit.trace(step, *args)
    raw = _file(t)
    t.graph = optimize(t.graph)
    return args, raw, _file(t)


STEP_ARGS, STEP_RAW, STEP_OPT = _training_step()


def _write(path, doc: Any, data: dict[str, np.ndarray], text: str | None = None) -> str:
    meta = text if text is not None else json.dumps(doc)
    save_file(data, str(path), metadata={"rtxcore.graph": meta})
    return str(path)


def _node(doc, op: str, k: int = 0) -> dict[str, Any]:
    return [n for n in doc["nodes"] if n["op"] == op][k]


def _refused(tmp_path, doc, data=None, match: str = "") -> str:
    path = _write(tmp_path / "crafted.rtxg", doc, RAW_DATA if data is None else data)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=match) as info:
        rc.jit.load(path)
    assert time.perf_counter() - start < 20.0  # refused at once, not after a hang (loose: shared machines)
    _nothing_ran()
    return str(info.value)


def test_saved_graphs_load_and_run_raw_and_optimized(tmp_path):
    """The reference files: both load, validate and give what the function gives
    (the optimised one has fused groups and reused buffers)."""
    ops = {n["op"] for n in OPT["nodes"]}
    assert "fused" in ops and any("reuse" in n["attrs"] for n in OPT["nodes"])
    assert any("rng" in n["attrs"] for n in RAW["nodes"])
    for doc, data in ((RAW, RAW_DATA), (OPT, OPT_DATA)):
        g = rc.jit.load(_write(tmp_path / "ok.rtxg", doc, data))
        got = g(X)
        np.testing.assert_allclose(got[0].numpy(), WANT[0].numpy(), rtol=1e-6)
        np.testing.assert_allclose(got[1]["y"].numpy(), WANT[1]["y"].numpy(), rtol=1e-6)
        assert got[1]["n"] == 3


# -- each way a file's value used to reach generated Python -----------------------------


@pytest.mark.parametrize("payload", PAYLOADS[:2], ids=_id)
def test_a_view_offset_that_is_code_is_refused(tmp_path, payload):
    doc = copy.deepcopy(RAW)
    view = _node(doc, "view")
    view["attrs"]["offset"] = payload
    doc["values"][str(view["id"])]["offset"] = payload
    msg = _refused(tmp_path, doc, match=r"offset must be an int >= 0")
    assert re.match(r".*graph value \d+: offset", msg)
    doc["values"][str(view["id"])]["offset"] = 0  # the node's alone
    _refused(tmp_path, doc, match=r"graph node \d+ \(view\): attrs\.offset must be an int")


def test_a_view_past_its_buffer_is_refused(tmp_path):
    doc = copy.deepcopy(RAW)
    view = _node(doc, "view")
    view["attrs"]["offset"] = doc["values"][str(view["id"])]["offset"] = 10**6
    _refused(tmp_path, doc, match=r"reaches elements 1000000\.\.1000000 of value \d+")
    doc = copy.deepcopy(RAW)
    view = _node(doc, "view")
    doc["values"][str(view["id"])]["strides"] = [2**62, -2**62]
    view["attrs"]["strides"] = [2**62, -2**62]
    _refused(tmp_path, doc, match=r"reaches elements")


@pytest.mark.parametrize("payload", PAYLOADS[:2] + [2**80, -1, 7.0, True], ids=_id)
def test_an_rng_count_that_is_not_the_draws_is_refused(tmp_path, payload):
    doc = copy.deepcopy(RAW)
    next(n for n in doc["nodes"] if "rng" in n["attrs"])["attrs"]["rng"] = payload
    _refused(tmp_path, doc, match=r"graph node \d+ \(uniform\): attrs\.rng must be the int 20")


@pytest.mark.parametrize("payload", PAYLOADS[:2] + [-1, 10**30], ids=_id)
def test_an_alloc_reuse_that_is_not_an_earlier_alloc_is_refused(tmp_path, payload):
    doc = copy.deepcopy(OPT)
    next(n for n in doc["nodes"] if "reuse" in n["attrs"])["attrs"]["reuse"] = payload
    _refused(tmp_path, doc, data=OPT_DATA, match=r"\(alloc\): attrs\.reuse must be")


def test_an_alloc_reusing_a_buffer_of_another_size_is_refused(tmp_path):
    doc = copy.deepcopy(OPT)
    a = next(n for n in doc["nodes"] if "reuse" in n["attrs"])
    doc["values"][str(a["id"])]["shape"] = [1]
    _refused(tmp_path, doc, data=OPT_DATA, match=r"attrs\.reuse: alloc \d+ .* must have this "
                                                  r"alloc's dtype and size")


@pytest.mark.parametrize("where", ["operand", "n", "cols", "inputs", "outputs", "op", "dtype"])
def test_a_fused_program_with_code_in_it_is_refused(tmp_path, where):
    doc = copy.deepcopy(OPT)
    prog = _node(doc, "fused")["attrs"]["program"]
    payload = PAYLOADS[0]
    if where == "operand":
        prog["steps"][0][2][0][1] = payload
    elif where in ("n", "cols"):
        prog[where] = payload
    elif where == "inputs":
        prog["inputs"][0] = payload
    elif where == "outputs":
        prog["outputs"][0] = payload
    elif where == "op":
        prog["steps"][0][0] = payload
    else:
        prog["steps"][0][1] = payload
    _refused(tmp_path, doc, data=OPT_DATA, match=r"graph node \d+ \(fused\): attrs\.program")


def test_a_fused_program_reading_an_input_two_ways_or_past_its_size_is_refused(tmp_path):
    doc = copy.deepcopy(OPT)
    prog = next(n for n in doc["nodes"] if n["op"] == "fused"
                and any(k == "scalar" for s in n["attrs"]["program"]["steps"]
                        for k, _ in s[2]))["attrs"]["program"]
    step, j = next((s, j) for s in prog["steps"] for j, (k, _) in enumerate(s[2]) if k == "scalar")
    i = step[2][j][1]
    prog["steps"].insert(0, ["neg", "float32", [["in", i]]])
    prog["outputs"] = [k + 1 for k in prog["outputs"]]
    for s in prog["steps"][1:]:
        s[2] = [[k, v + 1] if k == "step" else [k, v] for k, v in s[2]]
    _refused(tmp_path, doc, data=OPT_DATA, match=r"is read as 'in' and as 'scalar'|"
                                                  r"is read as 'scalar' and as 'in'")
    doc = copy.deepcopy(OPT)
    prog = _node(doc, "fused")["attrs"]["program"]
    prog["n"] *= 2
    _refused(tmp_path, doc, data=OPT_DATA, match=r"\(fused\): (writes|args)\[0\]")


def test_writes_that_form_a_cycle_are_refused_quickly(tmp_path):
    """A version made from a later one (graph.buffer_roots would loop forever on
    the cycle), and views showing each other."""
    doc = copy.deepcopy(RAW)
    kernels = [n for n in doc["nodes"] if n["writes"]]
    a, b = kernels[0], kernels[1]
    a["writes"][0][0], b["writes"][0][0] = b["writes"][0][1], a["writes"][0][1]
    _refused(tmp_path, doc, match=r"writes\[0\]")
    doc = copy.deepcopy(RAW)
    view = _node(doc, "view")
    vid = view["id"]
    of = doc["values"][str(vid)]["of"]
    doc["values"][str(of)] = {**doc["values"][str(vid)], "of": vid}
    _refused(tmp_path, doc, match=rf"graph value ({of}|{vid}): of must be the id of")


@pytest.mark.parametrize("name", [PAYLOADS[0], "../../etc/passwd", "", "a b", "x" * 300, 7],
                         ids=_id)
def test_an_external_or_constant_name_that_is_not_a_name_is_refused(tmp_path, name):
    doc = copy.deepcopy(RAW)
    next(n for n in doc["nodes"] if n["op"] == "input" and
         n["attrs"]["kind"] == "external")["attrs"]["name"] = name
    _refused(tmp_path, doc, match=r"\(input\): attrs\.name must be a name")
    doc = copy.deepcopy(RAW)
    _node(doc, "const")["attrs"]["name"] = name
    _refused(tmp_path, doc, match=r"\(const\): attrs\.name must be a name")


@pytest.mark.parametrize("dtype", [PAYLOADS[4], "float", "double", "bfloat16", 7, None],
                         ids=_id)
def test_a_dtype_that_is_not_one_of_the_nine_is_refused(tmp_path, dtype):
    doc = copy.deepcopy(RAW)
    doc["values"]["0"]["dtype"] = dtype
    _refused(tmp_path, doc, match=r"graph value 0: dtype must be one of bool, uint8")
    doc = copy.deepcopy(OPT)
    _node(doc, "fused")["attrs"]["program"]["inputs"][0] = dtype
    _refused(tmp_path, doc, data=OPT_DATA, match=r"attrs\.program: inputs must be")


@pytest.mark.parametrize("op", [PAYLOADS[2], "to_host", "empty", "from_host", "masked_select",
                                "__class__", 3], ids=_id)
def test_an_op_outside_the_closed_lists_is_refused(tmp_path, op):
    doc = copy.deepcopy(RAW)
    _node(doc, "matmul")["op"] = op
    _refused(tmp_path, doc, match=r"graph node \d+: graph names an unknown op")


@pytest.mark.parametrize("change, match", [
    (lambda d: _node(d, "matmul").update(id=PAYLOADS[0]), r"\(matmul\): id must be"),
    (lambda d: d.update(outputs={"view": PAYLOADS[0]}), r"graph outputs: view must be"),
    (lambda d: d.update(outputs={"seq": [], "type": PAYLOADS[0]}), r"graph outputs: type must"),
    (lambda d: d["values"].update({"01": d["values"]["0"]}), r"every id must be a decimal int"),
    (lambda d: d["values"]["0"].update(shape=[4, PAYLOADS[0]]), r"shape\[i\] must be an int"),
    (lambda d: d["values"]["0"].update(shape=[True, 5]), r"shape\[i\] must be an int"),
    (lambda d: d["values"]["0"].update(shape=[2**40, 2**40]), r"more than \d+ elements"),
    (lambda d: d["values"]["0"].update(shape=[1] * 40), r"at most 32 ints"),
    (lambda d: _node(d, "maximum")["args"].__setitem__(1, PAYLOADS[0]),
     r"\(maximum\): args\[1\] \(y\) must be a ref to a value or a Python scalar"),
    (lambda d: _node(d, "maximum")["args"].__setitem__(1, {"float": PAYLOADS[0]}),
     r"args\[1\]: float must be a float's text"),
    (lambda d: _node(d, "maximum")["args"].__setitem__(1, {"dtype": "float32"}),
     r"args\[1\] \(y\) must be a ref to a value or a Python scalar, got rtxcore\.float32"),
    (lambda d: _node(d, "sum").update(args=[_node(d, "sum")["args"][0], {"tuple": [5]}]),
     r"\(sum\): args\[1\] \(axes\) items must be an int in \[0, 1\]"),
    (lambda d: _node(d, "input").update(attrs={"kind": "arg", "index": PAYLOADS[0]}),
     r"attrs\.index must be an int"),
    (lambda d: _node(d, "input").update(attrs={"kind": "arg", "index": 0, "x": 1}),
     r"attrs must have the keys \['index', 'kind'\]"),
    (lambda d: d.update(version=99), r"newer than this rtxcore reads"),
    (lambda d: d.update(version=True), r"version must be an int"),
    (lambda d: d.update(extra=1), r"unknown \['extra'\]"),
    (lambda d: d["nodes"].append(copy.deepcopy(_node(d, "matmul"))), r"is already defined"),
    (lambda d: d["nodes"].reverse(), r"must refer to a value an earlier node defines|"
                                     r"must be made by an earlier node"),
])
def test_other_fields_out_of_type_or_range_are_refused(tmp_path, change, match):
    doc = copy.deepcopy(RAW)
    change(doc)
    _refused(tmp_path, doc, match=match)


@pytest.mark.parametrize("text, match", [
    ('{"format": "rtxcore.graph", "format": "x"}', r"names 'format' twice"),
    ('{"format": "rtxcore.graph", "version": NaN}', r"has NaN"),
    ("[" * 100000 + "]" * 100000, r"nests too deeply|malformed"),
    ('{"format": "rtxcore.graph", "version": 1, "values": {}, "nodes": [], "outputs": '
     '{"lit": 1' + "0" * 5000 + "}}", r"malformed"),
    ("not json", r"malformed"),
])
def test_json_that_is_not_plain_json_is_refused(tmp_path, text, match):
    path = _write(tmp_path / "j.rtxg", None, RAW_DATA, text=text)
    with pytest.raises(ValueError, match=match):
        rc.jit.load(path)


def test_tensors_of_the_file_must_be_the_graphs(tmp_path):
    const = f"const/{_node(RAW, 'const')['attrs']['name']}"
    ext = next(k for k in RAW_DATA if k.startswith("input/"))
    for key, arr, match in [
            (const, None, r"constant 'c0' is missing"),
            (ext, None, r"external input 'ext0' is missing"),
            (const, np.zeros(3, np.int32), r"constant 'c0' is int32\[3\] in the file; the graph "
                                           r"says int64\[3\]"),
            (const, np.zeros(7, np.int64), r"int64\[7\] in the file; the graph says int64\[3\]"),
            (ext, np.zeros((5, 3), np.float32), r"external input 'ext0' is float32\[5, 3\]")]:
        data = dict(RAW_DATA)
        if arr is None:
            del data[key]
        else:
            data[key] = arr
        _refused(tmp_path, RAW, data=data, match=match)


def test_arguments_too_small_for_the_graph_are_refused_at_the_call(tmp_path):
    g = rc.jit.load(_write(tmp_path / "g.rtxg", RAW, RAW_DATA))
    with pytest.raises(ValueError, match=r"argument 0: the graph reads float32 12 elements"):
        g(rc.randn(2, 3))
    with pytest.raises(ValueError, match=r"argument 0: .* got a float64 tensor"):
        g(rc.randn(4, 3, dtype=rc.float64))
    with pytest.raises(TypeError, match=r"argument 0: expected a Tensor"):
        g(3.0)
    with pytest.raises(TypeError, match=r"takes argument 0; got 0 arguments"):
        g()
    with pytest.raises(ValueError, match=r"external input 'ext0': the graph reads float32 15"):
        g(X, externals={"ext0": rc.randn(2)})


def test_index_values_from_a_file_are_checked_as_it_runs(tmp_path, device):
    """A constant index tensor out of range: no check of the file can see it (it
    is data); the replay checks it before the kernel reads it -- on a device
    kernel, out of range means reading outside the buffer."""
    data = dict(RAW_DATA)
    data["const/c0"] = np.array([3, 0, 9], np.int64)
    g = rc.jit.load(_write(tmp_path / "idx.rtxg", RAW, data))
    with pytest.raises(IndexError, match=r"index's indices\[0\]: index 9 is out of range for a "
                                         r"dim of size 4"):
        g(X.to(device))
    data["const/c0"] = np.array([3, -1, 2], np.int64)
    g = rc.jit.load(_write(tmp_path / "idx.rtxg", RAW, data))
    with pytest.raises(IndexError, match=r"index -1 is out of range"):
        g(X.to(device))
    # in range, the checks pass and the graph computes what the function does
    got = rc.jit.load(_write(tmp_path / "ok.rtxg", RAW, RAW_DATA))(X.to(device))
    np.testing.assert_allclose(got[0].cpu().numpy(), WANT[0].numpy(), rtol=1e-5)


def test_resource_limits(tmp_path, monkeypatch):
    monkeypatch.setenv("RTX_GRAPH_MAX_BYTES", "64")
    _refused(tmp_path, RAW, match=r"buffers hold \d+ bytes together, more than the limit of 64")
    monkeypatch.setenv("RTX_GRAPH_MAX_BYTES", "1K")
    assert V.max_bytes() == 1024
    monkeypatch.setenv("RTX_GRAPH_MAX_BYTES", "lots")
    _refused(tmp_path, RAW, match=r"RTX_GRAPH_MAX_BYTES must be a number of bytes")
    monkeypatch.delenv("RTX_GRAPH_MAX_BYTES")
    monkeypatch.setattr(V, "MAX_BYTES", 64)
    _refused(tmp_path, RAW, match=r"more than the limit of 64")
    monkeypatch.setattr(V, "MAX_BYTES", 2**34)
    monkeypatch.setattr(V, "MAX_NODES", 5)
    _refused(tmp_path, RAW, match=r"graph nodes: \d+ nodes, more than the limit of 5")
    monkeypatch.setattr(V, "MAX_VALUES", 5)
    _refused(tmp_path, RAW, match=r"graph values: \d+ values, more than the limit of 5")


def test_a_non_finite_constant_in_a_fused_program_round_trips(tmp_path):
    """A where filling -inf (an attention mask) fuses into a program holding -inf:
    JSON has no -inf, so the file tags it as kernel arguments are tagged."""
    def f(x):
        return (x * 2).masked_fill(x > 0, float("-inf")) + 1

    t = rc.jit.trace(f, X)
    t.graph = optimize(t.graph)
    assert "inf" in str([n.attrs for n in t.graph.nodes if n.op == "fused"])
    path = str(tmp_path / "inf.rtxg")
    t.save(path)
    np.testing.assert_array_equal(rc.jit.load(path)(X).numpy(), f(X).numpy())


def test_every_kernel_op_has_a_check():
    from rtxcore.dispatch import ops

    for op in {*ops.PRIMITIVES, *ops.COMPOSITES} - V.NOT_NODES:
        assert op in V.UNARY_OPS or op in V.BINARY_OPS or op in ("copy", "cast") or \
            hasattr(V._Kernel, "k_" + op), op


@pytest.mark.parametrize("change, match", [
    (lambda n: n["args"].pop(), r"layer_norm_backward takes 5 arguments"),
    (lambda n: n["args"].__setitem__(4, n["args"][0]),
     r"weight \(value \d+\) must have shape \[6\]"),
    (lambda n: n["args"].__setitem__(2, n["args"][1]),
     r"mean \(value \d+\) must have shape \[2, 1\]"),
    (lambda n: n["args"].__setitem__(0, n["args"][2]), r"g \(value \d+\) must have shape \[2, 6\]"),
    (lambda n: n["args"].__setitem__(1, n["args"][4]), r"layer_norm_backward's x must be 2-D"),
])
def test_a_layer_norm_backward_node_off_its_contract_is_refused(tmp_path, change, match):
    """The training step's layer_norm_backward (out (M + 2, N): the parameters' rows)."""
    doc, data = copy.deepcopy(STEP_RAW[0]), STEP_RAW[1]
    n = _node(doc, "layer_norm_backward")
    assert doc["values"][str(n["writes"][0][0])]["shape"] == [4, 6]
    change(n)
    _refused(tmp_path, doc, data, match=match)


def test_graphs_of_the_tracer_and_the_passes_pass_the_checks():
    """A training step (forward, backward, clipping, SGD with momentum) and a
    convolution's forward and backward, as traced and as optimised, read back
    as they were written."""
    import rtxcore.nn as nn

    rc.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Flatten(),
                      nn.Linear(3 * 6 * 6, 4), nn.LayerNorm(4), nn.GELU())
    opt = rc.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    step = clipped_step(m, opt)

    x, y = rc.randn(2, 2, 6, 6), rc.tensor([1, 3])
    step(x, y)  # the momentum buffers
    t = rc.jit.trace(step, x, y)
    for g in (t.graph, optimize(t.graph)):
        V.check_graph(g)
        values, nodes, outputs = V.check_document(json.loads(dumps(g)))
        assert [(n.id, n.op, n.args, n.attrs, n.writes) for n in nodes] == \
            [(n.id, n.op, n.args, n.attrs, n.writes) for n in g.nodes]
        assert values == g.values


# -- the fuzzer ------------------------------------------------------------------------------

WORDS = ["float32", "float64", "int64", "bool", "in", "step", "const", "scalar", "row", "col",
         "add", "mul", "div", "pow", "maximum", "eq", "where", "cast", "copy", "sum", "neg",
         "exp", "logical_not", "matmul", "index", "gather", "full", "fused", "view", "alloc",
         "input", "tuple", "list", "arg", "external", "rows", "all", "none", "tanh", "ref",
         "float", "c0", "ext0"]
KEYS = ["ref", "float", "tuple", "dtype", "view", "seq", "type", "map", "lit", "of", "strides",
        "offset", "shape", "reuse", "rng", "kind", "index", "name", "program", "n", "cols"]
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 40),
    st.sampled_from([-1, 2**31, 2**62 + 1, 2**63, 2**64, -2**63 - 1, 10**30]),
    st.floats(width=32), st.text(max_size=6), st.sampled_from(WORDS + PAYLOADS))
JSON = st.recursive(SCALAR, lambda ch: st.one_of(st.lists(ch, max_size=4),
                                                 st.dictionaries(st.sampled_from(KEYS), ch,
                                                                 max_size=3)), max_leaves=8)
# values a valid file has in such places: these make files that may pass the checks
NEAR = st.one_of(st.integers(-2, 40), st.sampled_from(WORDS), st.booleans(),
                 st.sampled_from([0.5, -1.0, float("inf")]),
                 st.lists(st.integers(0, 6), max_size=4))
pos = st.integers(0, 2**16)
MUTATION = st.one_of(
    st.tuples(st.just("replace"), pos, JSON),
    st.tuples(st.just("replace"), pos, NEAR),
    st.tuples(st.just("nudge"), pos, st.sampled_from([-2, -1, 1, 2, 5, 2**62])),
    st.tuples(st.just("delete"), pos),
    st.tuples(st.just("copy"), pos, pos),
    st.tuples(st.just("duplicate node"), pos, pos),
    st.tuples(st.just("swap nodes"), pos, pos),
)


def _paths(doc: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []

    def walk(x: Any, path: tuple[Any, ...]) -> None:
        out.append(path)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, path + (k,))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, path + (i,))

    walk(doc, ())
    return out


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _mutate(doc: dict[str, Any], op: tuple, paths: list[tuple[Any, ...]],
            ints: list[tuple[Any, ...]]) -> None:
    """Apply ``op`` to ``doc``; ``paths`` (and ``ints``, those of int fields) are
    the unmutated document's: one an earlier mutation removed is skipped."""
    try:
        _apply(doc, op, ints if op[0] == "nudge" else paths)
    except (KeyError, IndexError, TypeError):
        pass


def _apply(doc: dict[str, Any], op: tuple, paths: list[tuple[Any, ...]]) -> None:
    kind = op[0]
    nodes = doc.get("nodes")
    if kind in ("duplicate node", "swap nodes"):
        if not isinstance(nodes, list) or not nodes:
            return
        a, b = op[1] % len(nodes), op[2] % len(nodes)
        if kind == "duplicate node":
            nodes.insert(b, copy.deepcopy(nodes[a]))
        else:
            nodes[a], nodes[b] = nodes[b], nodes[a]
        return
    if not paths:
        return
    path = paths[op[1] % len(paths)]
    parent, key = _at(doc, path[:-1]), path[-1]
    if kind == "replace":
        parent[key] = op[2]
    elif kind == "nudge":
        if type(parent[key]) is int:
            parent[key] += op[2]
    elif kind == "copy":
        parent[key] = copy.deepcopy(_at(doc, paths[op[2] % len(paths)]))
    elif kind == "delete":
        del parent[key]


def _outcome(path: str, args: tuple[Any, ...]) -> str:
    """Load (timed, its memory traced) and, loaded, call with the right arguments."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        g = rc.jit.load(path)
    except ValueError:
        return "refused at load"
    finally:
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < 20.0, f"a load took {elapsed:.1f} s"  # (a hang, not a slow machine)
        assert peak < 16 << 20, f"a load allocated {peak} bytes"
    try:
        g(*args)
    except (ValueError, TypeError) as exc:
        assert re.search(r"argument|external input", str(exc)), repr(exc)
        return "input mismatch at the call"
    except IndexError as exc:
        assert "checked as it runs" in str(exc), repr(exc)
        return "index out of range at the call"
    return "ran"


def test_fuzzed_graph_files_load_cleanly_or_are_refused(tmp_path, monkeypatch, record_property):
    """Valid files (a traced function and a training step, raw and optimised)
    with fields replaced by
    random JSON values (code among them), nudged ints, deleted keys, copied
    subtrees, duplicated and swapped nodes. Every outcome: a ValueError at load,
    or a graph that runs -- where the call may only refuse its inputs or an
    index out of range. Nothing a file says runs; each load is fast and small."""
    monkeypatch.setenv("RTX_GRAPH_MAX_BYTES", str(1 << 20))  # a fuzzed shape allocates little
    bases = []
    for doc, data, args in [(RAW, RAW_DATA, (X,)), (OPT, OPT_DATA, (X,)),
                            (*STEP_RAW, STEP_ARGS), (*STEP_OPT, STEP_ARGS)]:
        paths = _paths(doc)[1:]
        ints = [p for p in paths if type(_at(doc, p)) is int]
        bases.append((json.dumps(doc), data, args, paths, ints))
    outcomes: Counter[str] = Counter()
    path = str(tmp_path / "fuzzed.rtxg")

    # (RTX_HYPOTHESIS=explore draws at random: for looking for new counterexamples)
    @settings(max_examples=500, deadline=5000, database=None,
              derandomize=os.environ.get("RTX_HYPOTHESIS", "ci") != "explore",
              suppress_health_check=list(HealthCheck))
    @given(st.integers(0, len(bases) - 1), st.lists(MUTATION, min_size=1, max_size=3))
    @example(0, [("nudge", 3, -1)])
    @example(1, [("replace", 0, PAYLOADS[0])])
    def run(which: int, ops: list[tuple]) -> None:
        text, data, args, paths, ints = bases[which]
        doc = json.loads(text)
        for op in ops:
            _mutate(doc, op, paths, ints)
        text = json.dumps(doc)  # (a NaN drawn is written as Python does: NaN)
        with open(path, "wb") as f:
            f.write(save(data, metadata={"rtxcore.graph": text}))
        start = time.perf_counter()
        outcome = _outcome(path, args)
        elapsed = time.perf_counter() - start
        assert elapsed < 40.0, f"{outcome} took {elapsed:.1f} s after {ops}"  # (a hang)
        _nothing_ran()
        assert os.listdir(tmp_path) == ["fuzzed.rtxg"]
        outcomes[outcome] += 1

    run()
    table = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))
    record_property("graph_fuzz_outcomes", table)
    print(f"\ngraph file fuzz outcomes: {table}")
    assert outcomes["refused at load"] and outcomes["ran"]


def _batch_norm_step():
    """A traced forward and backward through BatchNorm2d (its two kernels on cpu)."""
    import rtxcore.nn as nn

    rc.manual_seed(0)
    bn = nn.BatchNorm2d(3)

    def step(x):
        x = x.detach().requires_grad_()
        y = bn(x)
        (dx,) = rc.autograd.grad((y * y).sum(), x)
        return y.detach(), dx

    return _file(rc.jit.trace(step, rc.randn(2, 3, 4, 5)))


BN_DOC, BN_DATA = _batch_norm_step()


@pytest.mark.parametrize("op, change, match", [
    ("batch_norm", lambda n: n["args"].pop(), r"batch_norm takes 4 arguments"),
    ("batch_norm", lambda n: n["args"].__setitem__(1, n["args"][0]),
     r"weight \(value \d+\) must have shape \[3\]"),
    ("batch_norm", lambda n: n["writes"].__setitem__(1, n["writes"][0]), r"already defined"),
    ("batch_norm", lambda n: n["args"].__setitem__(3, "1e-5; import os"), r"eps"),
    ("batch_norm_backward", lambda n: n["args"].__setitem__(2, n["args"][0]),
     r"mean \(value \d+\) must have shape \[3\]"),
    ("batch_norm_backward", lambda n: n["args"].__setitem__(0, n["args"][2]),
     r"g \(value \d+\) must have shape \[2, 3, 20\]"),
])
def test_a_batch_norm_node_off_its_contract_is_refused(tmp_path, op, change, match):
    """A crafted file can't hand batch_norm's C loops vectors shorter than the
    channels, an input of another shape, or code for eps: refused at load."""
    doc = copy.deepcopy(BN_DOC)
    change(_node(doc, op))
    _refused(tmp_path, doc, BN_DATA, match=match)


def _conv_step():
    """A traced conv forward and backward (x's and the weight's gradients): the cols
    form (conv2d writes cols, conv2d_weight_grad reads them)."""
    import rtxcore.nn as nn

    rc.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)

    def step(x):
        x = x.detach().requires_grad_()
        y = conv(x)
        return rc.autograd.grad((y * y).sum(), (x, conv.weight))

    x = rc.randn(2, 3, 5, 5)
    return (*_file(rc.jit.trace(step, x)), x, step(x))


CONV_DOC, CONV_DATA, CONV_X, CONV_WANT = _conv_step()


def _as_weight_grad_x(doc: dict[str, Any]) -> dict[str, Any]:
    """The file with its conv2d_weight_grad node as the conv2d_weight_grad_x of
    the conv2d's input (a form the tracer never writes, but a file may hold)."""
    doc = copy.deepcopy(doc)
    conv, wgrad = _node(doc, "conv2d"), _node(doc, "conv2d_weight_grad")
    wgrad["op"] = "conv2d_weight_grad_x"
    wgrad["args"] = [wgrad["args"][0], conv["args"][0], *copy.deepcopy(conv["args"][3:6])]
    return doc


def test_a_weight_gradient_from_x_node_loads_and_runs_on_every_device(tmp_path, device):
    """The tracer keeps the cols form; a file's conv2d_weight_grad_x node runs as
    rtx_cpu's kernel, elsewhere as the core's decomposition (im2col, a matmul)."""
    ops = [n["op"] for n in CONV_DOC["nodes"]]
    assert "conv2d_weight_grad" in ops and "conv2d_weight_grad_x" not in ops
    g = rc.jit.load(_write(tmp_path / "wgx.rtxg", _as_weight_grad_x(CONV_DOC), CONV_DATA))
    assert "conv2d_weight_grad_x" in {n.op for n in g.graph.nodes}
    got = g(CONV_X.to(device))
    for a, b in zip(got, CONV_WANT):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change, match", [
    (lambda n: n["args"].pop(), r"conv2d_weight_grad_x takes 5 arguments"),
    (lambda n: n["args"].__setitem__(1, n["args"][0]), r"x must be \(N, C, H, W\)"),
    (lambda n: n["args"].__setitem__(2, {"tuple": [2, 2]}), r"g \(value \d+\) must have shape"),
    (lambda n: n["args"].__setitem__(3, "(1, 1, 1, 1); import os"), r"padding"),
    (lambda n: n["args"].__setitem__(4, {"tuple": [0, 1]}), r"dilation"),
])
def test_a_weight_gradient_from_x_node_off_its_contract_is_refused(tmp_path, change, match):
    doc = _as_weight_grad_x(CONV_DOC)
    change(_node(doc, "conv2d_weight_grad_x"))
    _refused(tmp_path, doc, CONV_DATA, match=match)


def test_the_im2col_matrix_of_a_weight_gradient_from_x_counts_against_the_limit(
        tmp_path, monkeypatch):
    """A backend may form the whole im2col matrix for the node (rtx_cpu's NumPy
    forms, the core's decomposition): a file can't ask for more memory that way
    than its buffers may hold (a 1x1 input padded by 383 a side would be 64 GiB)."""
    doc = _as_weight_grad_x(CONV_DOC)
    cols = 27 * 50 * 4  # (C*kh*kw, N*OH*OW) float32 of the step's conv
    limit = _buffer_bytes(CONV_DOC) + cols - 1
    monkeypatch.setenv("RTX_GRAPH_MAX_BYTES", str(limit))
    rc.jit.load(_write(tmp_path / "cols.rtxg", CONV_DOC, CONV_DATA))
    _refused(tmp_path, doc, CONV_DATA, match=r"buffers hold \d+ bytes together, more than "
                                                  rf"the limit of {limit}")
    monkeypatch.setenv("RTX_GRAPH_MAX_BYTES", str(limit + 1))
    rc.jit.load(_write(tmp_path / "x.rtxg", doc, CONV_DATA))


def _buffer_bytes(doc: dict[str, Any]) -> int:
    """What a document's buffers hold together (the validator's count)."""
    from rtxcore.jit.node_checks import _Nodes

    values = V._values(doc["values"])
    return _Nodes(values, V._limits()).check(doc["nodes"]).bytes


def test_a_backward_traced_after_an_untraced_forward_records_the_weight_gradient():
    """The forward wrote no cols; the traced backward's weight gradient from x is
    a recorded node, so a replay computes it (it was not looked up before)."""
    import rtxcore.nn as nn

    rc.manual_seed(0)
    conv = nn.Conv2d(16, 32, 3, padding=1)
    y = conv(rc.randn(2, 16, 6, 6))

    def step(g):
        return rc.autograd.grad(y, conv.weight, g, retain_graph=True)[0]

    t = rc.jit.trace(step, rc.randn(*y.shape))
    assert "conv2d_weight_grad_x" in [n.op for n in t.graph.nodes]
    g2 = rc.randn(*y.shape)
    np.testing.assert_allclose(t(g2).numpy(), step(g2).numpy(), rtol=1e-6, atol=1e-5)
