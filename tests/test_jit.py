"""rtxcore.jit: tracing into a graph of kernels, reading it, saving it, replaying it."""

import json
import re

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore.jit import TraceError

from .jit_steps import clipped_step


def _np(t):
    return t.detach().numpy()


def _f(w):
    def f(x):
        return (x @ w).relu() * 2 + x.sum()
    return f


def test_trace_replays_new_inputs(device):
    rng = np.random.default_rng(0)
    w = rc.tensor(rng.standard_normal((3, 5)).astype(np.float32), device=device)
    x = rc.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device)
    f = _f(w)
    t = rc.jit.trace(f, x)
    for _ in range(2):
        x2 = rc.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device)
        y = t(x2)
        assert y.device == x2.device and y.shape == (4, 5)
        np.testing.assert_allclose(_np(y), _np(f(x2)), rtol=1e-6, atol=1e-6)
    # external tensors are bound by reference: a changed weight is seen
    w.mul_(-1)
    np.testing.assert_allclose(_np(t(x)), _np(f(x)), rtol=1e-6, atol=1e-6)


def test_graph_prints_one_line_per_node():
    x, w = rc.randn(4, 3), rc.randn(3, 5)
    g = rc.jit.trace(_f(w), x).graph
    text = str(g)
    lines = text.splitlines()
    assert re.fullmatch(r"%\d+ = input arg 0 : float32\[4, 3\]", lines[0])
    assert any(re.fullmatch(r"%\d+ = matmul\(%\d+, %\d+\) : float32\[4, 5\]", ln) for ln in lines)
    assert any(re.fullmatch(r"%\d+ = maximum\(%\d+, 0\.0\) : float32\[4, 5\]", ln) for ln in lines)
    assert lines[-1].startswith("return %")
    # the stride-0 broadcast of the sum is an explicit view node
    assert any(re.fullmatch(r"%\d+ = view\(%\d+, strides=\[0, 0\], offset=0\) : float32\[4, 5\]",
                            ln) for ln in lines)
    table = g.table()
    assert re.search(r"^matmul\s+1\s", table, re.M) and re.search(r"^total\s+5\s", table, re.M)
    dot = g.to_dot()
    assert dot.startswith("digraph") and "matmul" in dot


def test_render_writes_dot_source_without_graphviz(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: None)
    g = rc.jit.trace(_f(rc.randn(3, 5)), rc.randn(4, 3)).graph
    out = g.render(str(tmp_path / "g.svg"))
    assert out.endswith(".dot") and open(out).read() == g.to_dot()


def test_render_runs_graphviz_dot_with_the_format_of_the_path(tmp_path, monkeypatch):
    """With ``dot`` on PATH, render pipes the DOT source to ``dot -T<suffix> -o
    path``. (A stand-in ``dot`` records what it got: graphviz itself is not a
    dependency.)"""
    import os
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "dot"
    fake.write_text(f"#!{sys.executable}\n"
                    "import sys, json\n"
                    "src = sys.stdin.read()\n"
                    "out = sys.argv[sys.argv.index('-o') + 1]\n"
                    "open(out, 'w').write(json.dumps({'argv': sys.argv[1:], 'src': src}))\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    g = rc.jit.trace(_f(rc.randn(3, 5)), rc.randn(4, 3)).graph
    for name, fmt in (("g.png", "-Tpng"), ("g.svg", "-Tsvg")):
        path = str(tmp_path / name)
        assert g.render(path) == path
        got = json.loads(open(path).read())
        assert got["argv"] == [fmt, "-o", path] and got["src"] == g.to_dot()


def test_in_place_ops_are_nodes_writing_new_versions():
    x = rc.zeros(4, 4)

    def f(x):
        x[:, 1].add_(1.0)
        x.mul_(3.0)
        return x

    t = rc.jit.trace(f, rc.zeros(4, 4))
    text = str(t.graph)
    assert re.search(r"%\d+ = add\(%\d+, 1\.0\) -> %\d+ : float32\[4\]", text)
    assert "view(" in text and "strides=[4], offset=1" in text
    out = t(x)
    want = np.zeros((4, 4), np.float32)
    want[:, 1] = 3.0
    np.testing.assert_array_equal(_np(out), want)
    np.testing.assert_array_equal(_np(x), want)  # the argument itself was written


def _mlp_step(seed=0):
    rc.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = rc.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)

    step = clipped_step(m, opt)

    return m, step


def test_a_whole_training_step_is_one_graph(device):
    """forward, backward, gradient clipping and SGD's in-place updates, traced
    once (after a first eager step made the momentum buffers) and replayed: the
    same parameters as eager, step after step."""
    rng = np.random.default_rng(1)
    data = [(rc.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=device),
             rc.tensor(rng.integers(0, 3, 8), device=device)) for _ in range(5)]
    ma, sa = _mlp_step()
    mb, sb = _mlp_step()
    ma.to(device)
    mb.to(device)
    sa(*data[0])
    sb(*data[0])
    traced = rc.jit.trace(sb, *data[1])
    sa(*data[1])
    ops = {n.op for n in traced.graph.kernels()}
    assert {"matmul", "exp", "sqrt", "mul"} <= ops  # forward, backward, clip, SGD
    for x, y in data[2:]:
        la, lb = sa(x, y), traced(x, y)
        np.testing.assert_allclose(_np(lb), _np(la), rtol=1e-6)
    for (name, p), q in zip(ma.named_parameters(), mb.parameters()):
        np.testing.assert_allclose(_np(q), _np(p), rtol=1e-6, atol=1e-7, err_msg=name)
    names = {n.attrs.get("name") for n in traced.graph.inputs}
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= names or \
        len([n for n in traced.graph.inputs if n.attrs["kind"] == "external"]) >= 8


@pytest.mark.parametrize("optimized", [False, True])
def test_a_plan_computes_what_the_interpreter_computes(device, optimized):
    """A replay runs the graph as generated code (rtxcore.jit.plan); run_env
    interprets it node by node. Same kernels, same order: the same bits, on an
    attention block's forward (views, composites, reductions, broadcasts)."""
    from rtxcore.jit.passes import optimize

    rc.manual_seed(3)
    m = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                   batch_first=True).to(device)
    x = rc.randn(2, 5, 16, device=device)
    with rc.no_grad():
        t = rc.jit.trace(m, x)
        if optimized:
            t.graph = optimize(t.graph)
        x2 = rc.randn(2, 5, 16, device=device)
        planned = _np(t(x2))
        interpreted = _np(t.run_with_env(x2)[0])
        eager = _np(m(x2))
    np.testing.assert_array_equal(planned, interpreted)
    np.testing.assert_allclose(planned, eager, rtol=1e-5, atol=1e-5)
    assert t.graph.__dict__["_plans"]  # made once per device, kept on the graph
    assert "replay" in next(iter(t.graph._plans.values())).__globals__["__source__"]


def test_saved_on_cpu_runs_on_any_device(tmp_path, device):
    rc.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.LayerNorm(7), nn.Linear(7, 2))
    x = rc.randn(3, 5)
    with rc.no_grad():
        t = rc.jit.trace(m, x)
        want = _np(m(x))
    path = str(tmp_path / "m.rtxg")
    t.save(path)
    g = rc.jit.load(path)
    names = {n.attrs["name"] for n in g.graph.inputs if n.attrs["kind"] == "external"}
    assert names == {"0.weight", "0.bias", "2.weight", "2.bias", "3.weight", "3.bias"}
    out = g(x.to(device))
    assert out.device == rc.device(device)
    np.testing.assert_allclose(_np(out), want, rtol=1e-5, atol=1e-6)
    # external inputs by name replace the saved ones
    zeros = {n: rc.zeros_like(p).to(device) for n, p in m.named_parameters()}
    np.testing.assert_allclose(_np(g(x.to(device), externals=zeros)), 0.0, atol=1e-6)


def test_graph_files_that_are_not_right_are_refused(tmp_path):
    t = rc.jit.trace(_f(rc.randn(3, 5)), rc.randn(4, 3))
    path = tmp_path / "f.rtxg"
    t.save(str(path))
    raw = path.read_bytes()
    (tmp_path / "cut.rtxg").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable rtxcore graph"):
        rc.jit.load(str(tmp_path / "cut.rtxg"))

    from safetensors.numpy import save_file

    from rtxcore.jit.graph import dumps

    def variant(name, change):
        doc = json.loads(dumps(t.graph))
        change(doc)
        p = tmp_path / name
        data = {f"input/{n.attrs['name']}": np.zeros(tuple(t.graph.values[n.id]["shape"]),
                                                      np.float32)
                for n in t.graph.inputs if n.attrs["kind"] == "external"}
        save_file(data, str(p), metadata={"rtxcore.graph": json.dumps(doc)})
        return str(p)

    with pytest.raises(ValueError, match="newer than this rtxcore reads"):
        rc.jit.load(variant("new.rtxg", lambda d: d.update(version=99)))

    def unknown_op(d):
        next(n for n in d["nodes"] if n["op"] == "matmul")["op"] = "frobnicate"

    with pytest.raises(ValueError, match="unknown op 'frobnicate'"):
        rc.jit.load(variant("op.rtxg", unknown_op))
    save_file({"x": np.zeros(2, np.float32)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(ValueError, match="without an rtxcore graph"):
        rc.jit.load(str(tmp_path / "plain.safetensors"))


def test_host_reads_while_tracing_name_the_line():
    def f(x):
        if x.sum().item() > 0:  # a decision made from data
            return x * 2
        return x

    with pytest.raises(TraceError, match=r"test_jit\.py:\d+"):
        rc.jit.trace(f, rc.ones(3))


def test_replay_refuses_other_shapes_and_dtypes():
    t = rc.jit.trace(_f(rc.randn(3, 5)), rc.randn(4, 3))
    with pytest.raises(ValueError, match=r"traced with float32 \(4, 3\)"):
        t(rc.randn(5, 3))
    with pytest.raises(ValueError, match="traced with float32"):
        t(rc.randn(4, 3, dtype=rc.float64))
    with pytest.raises(TypeError, match="takes 1 arguments"):
        t(rc.randn(4, 3), rc.randn(4, 3))


def test_every_composite_has_a_decomposition_for_replay():
    from rtxcore.dispatch.ops import COMPOSITES
    from rtxcore.jit.decompose import DECOMPOSE

    assert set(COMPOSITES) <= set(DECOMPOSE), sorted(set(COMPOSITES) - set(DECOMPOSE))


def test_composites_traced_on_cpu_run_where_the_backend_lacks_them(tmp_path, device):
    """A cpu graph keeps cpu's composite kernels as single nodes; on a backend
    without one (prims has primitives only) the core's decomposition runs it."""
    import rtxcore.nn.functional as F

    def f(x, i):
        a = x.expm1() + x.log1p().nan_to_num() + x.abs().log2() + x.tan() + x.ceil() + \
            x.round() + x.trunc() + x.sigmoid() + x.erf() + (x // 0.3) + (x % 0.7)
        b = a.cumsum(1) + a.softmax(1) + a.log_softmax(1)
        p, _ = F.max_pool2d(b.reshape(1, 1, 4, 6), 2, return_indices=True)
        s, idx = b.sort(1, descending=True)
        c = b.clone()
        c[i] = 5.0
        return p, s, idx, c, rc.logical_xor(x > 0, x > 0.5), F.gelu(x, approximate="tanh")

    rng = np.random.default_rng(3)
    x = rc.tensor(rng.uniform(0.1, 2, (4, 6)).astype(np.float32))
    i = rc.tensor([0, 2])
    t = rc.jit.trace(f, x, i)
    ops = {n.op for n in t.graph.kernels()}
    assert {"expm1", "log1p", "tan", "erf", "cumsum", "softmax", "sort",
            "max_pool2d_tiled", "index_put", "gelu"} <= ops, sorted(ops)
    path = str(tmp_path / "c.rtxg")
    t.save(path)
    got = rc.jit.load(path)(x.to(device), i.to(device))
    for g, w in zip(got, f(x, i)):
        np.testing.assert_allclose(_np(g), _np(w), rtol=2e-5, atol=2e-5)


def _saved_runs_on(device, path, t, f, args):
    """Traced ``t`` of ``f``, saved to ``path`` and loaded, gives on ``device``
    what ``f`` gives on cpu."""
    t.save(str(path))
    got = rc.jit.load(str(path))(*(a.to(device) for a in args))
    for a, e in zip(got, f(*args)):
        assert a.shape == e.shape
        np.testing.assert_allclose(_np(a), _np(e), rtol=2e-5, atol=2e-5)


def test_layer_norm_backward_traced_on_cpu_runs_where_the_backend_lacks_it(tmp_path, device):
    """layer_norm's backward is one node on cpu (its kernel: with the parameters'
    rows, and without them for .sum()'s broadcast gradient); the graph, saved and
    loaded, runs it elsewhere as the core's decomposition."""
    import rtxcore.nn.functional as F

    def f(x, w, b, g):
        y = F.layer_norm(x, (3, 6), w, b)
        dx, dw, db = rc.autograd.grad(y, (x, w, b), g)
        x2 = x.detach().requires_grad_()
        (dx2,) = rc.autograd.grad(F.layer_norm(x2, (6,)).sum(), (x2,))
        return dx, dw, db, dx2

    rng = np.random.default_rng(4)
    x, w, b = (rc.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
               for s in ((5, 3, 6), (3, 6), (3, 6)))
    g = rc.tensor(rng.standard_normal((5, 3, 6)).astype(np.float32))
    t = rc.jit.trace(f, x, w, b, g)
    assert [n.op for n in t.graph.kernels()].count("layer_norm_backward") == 2
    _saved_runs_on(device, tmp_path / "ln.rtxg", t, f, (x, w, b, g))


def test_batch_norm_traced_on_cpu_runs_where_the_backend_lacks_it(tmp_path, device):
    """Training-mode batch_norm and its backward are one node each on cpu (its
    kernels); the graph, saved and loaded, runs them elsewhere as the core's
    decomposition."""
    import rtxcore.nn.functional as F

    def f(x, w, b, g):
        y = F.batch_norm(x, None, None, w, b, training=True)
        dx, dw, db = rc.autograd.grad(y, (x, w, b), g)
        return y.detach(), dx, dw, db

    rng = np.random.default_rng(5)
    x, w, b = (rc.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
               for s in ((4, 3, 5, 6), (3,), (3,)))
    g = rc.tensor(rng.standard_normal((4, 3, 5, 6)).astype(np.float32))
    t = rc.jit.trace(f, x, w, b, g)
    ops = [n.op for n in t.graph.kernels()]
    assert ops.count("batch_norm") == 1 and ops.count("batch_norm_backward") == 1
    _saved_runs_on(device, tmp_path / "bn.rtxg", t, f, (x, w, b, g))
