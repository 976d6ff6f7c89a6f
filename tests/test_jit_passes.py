"""rtxcore.jit.passes: each pass, and all of them, against the unoptimised graph
on random elementwise programs (broadcasting, views, in-place ops, constants)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import rtxcore as rc
from rtxcore.jit import passes as P

UNARY = ["neg", "abs", "exp", "tanh", "sin", "sqrt_abs", "sigmoid", "relu"]
BINARY = ["add", "sub", "mul", "div_safe", "maximum", "minimum", "where_gt"]


def _apply(op, a, b=None):
    if op == "sqrt_abs":
        return a.abs().sqrt()
    if op == "sigmoid":
        return a.sigmoid()
    if op == "relu":
        return a.relu()
    if op == "div_safe":
        return a / (b.abs() + 1)
    if op == "where_gt":
        return rc.where(a > b, a, b * 0.5)
    if b is None:
        return getattr(a, op)()
    return getattr(rc, op)(a, b)


step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(UNARY), st.integers(0, 99)),
    st.tuples(st.just("b"), st.sampled_from(BINARY), st.integers(0, 99), st.integers(0, 99)),
    st.tuples(st.just("k"), st.sampled_from(["add", "mul"]), st.integers(0, 99),
              st.sampled_from([0.5, -2.0, 3.0])),
    st.tuples(st.just("view"), st.sampled_from(["t", "slice", "row"]), st.integers(0, 99)),
    st.tuples(st.just("inplace"), st.sampled_from(["add_", "mul_"]), st.integers(0, 99),
              st.integers(0, 99)),
    # a one-element tensor broadcast (a step size, a clipping coefficient)
    st.tuples(st.just("sc"), st.sampled_from(["mul", "add_"]), st.integers(0, 99),
              st.integers(0, 99)),
    # in place into an argument: the caller sees it (an optimizer's update)
    st.tuples(st.just("arg_inplace"), st.sampled_from(["add_", "mul_", "sub_"]),
              st.integers(0, 2), st.integers(0, 99)),
    # a sum ending a group: over rows (kept as a column, or not) or everything
    st.tuples(st.just("red"), st.sampled_from(["rows", "rows_keep", "all"]), st.integers(0, 99)),
)


def _program(steps):
    """A function of (x (4, 4), r (1, 4), c (4, 1)) built from ``steps``."""
    def f(x, r, c):
        vals = [x, r, c, x * 1.0]
        for s in steps:
            kind = s[0]
            if kind == "u":
                vals.append(_apply(s[1], vals[s[2] % len(vals)]))
            elif kind == "b":
                a, b = vals[s[2] % len(vals)], vals[s[3] % len(vals)]
                try:
                    rc.broadcast_shapes(a.shape, b.shape)
                except RuntimeError:
                    continue
                vals.append(_apply(s[1], a, b))
            elif kind == "k":
                v = vals[s[2] % len(vals)]
                vals.append(v + s[3] if s[1] == "add" else v * s[3])
            elif kind == "sc":
                a, b = vals[s[2] % len(vals)], vals[s[3] % len(vals)]
                if s[1] == "mul":
                    vals.append(a * (b.sum() * 0.1))
                elif len(vals) > 3:
                    t = vals[3 + s[2] % (len(vals) - 3)]
                    if t._base is None:
                        t.add_(b.amax())
            elif kind == "red":
                v = vals[s[2] % len(vals)]
                vals.append(v.sum() if s[1] == "all" or v.ndim < 2 else
                            v.sum(-1, keepdim=s[1] == "rows_keep"))
            elif kind == "view":
                v = vals[s[2] % len(vals)]
                if v.ndim == 2 and v.shape[0] == 4 and v.shape[1] == 4:
                    vals.append(v.t() if s[1] == "t" else v[1:3] if s[1] == "slice" else v[2])
            else:  # in place, into a value the program made, or into an argument
                i = 3 + s[2] % (len(vals) - 3) if kind == "inplace" else s[2]
                t, o = vals[i], vals[s[3] % len(vals)]
                try:
                    rc.broadcast_shapes(t.shape, o.shape)
                    ok = rc.broadcast_shapes(t.shape, o.shape) == t.shape
                except RuntimeError:
                    ok = False
                if ok and t._base is None:
                    try:
                        getattr(t, s[1])(o)
                    except RuntimeError:  # o overlaps t: refused before anything ran
                        pass
        full = [v for v in vals[3:] if v.shape == (4, 4)]
        return tuple(vals[-3:]) + (sum(full[-3:], rc.zeros(4, 4, device=x.device)),)
    return f


def _inputs(seed, device):
    rng = np.random.default_rng(seed)
    return [rc.tensor(rng.uniform(-2, 2, s).astype(np.float32), device=device)
            for s in ((4, 4), (1, 4), (4, 1))]


@pytest.mark.parametrize("which", ["dead_code", "cse", "fold_constants", "fuse_elementwise",
                                   "plan_memory", "optimize"])
@pytest.mark.parametrize("dev", ["cpu", "opencl"])  # the fuse hooks of both; prims below
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=16), seed=st.integers(0, 3))
# found by this test: a fused where wrote its result into the slot of an operand
# it still had to read (rtx_cpu fills a where's output from y, then copies x over)
@example(steps=[("b", "where_gt", 3, 1), ("u", "neg", 0), ("u", "neg", 0), ("u", "neg", 1)],
         seed=0)
@example(steps=[*[("u", "neg", 0)] * 6, ("view", "t", 3), ("u", "neg", 9),
                ("k", "mul", 10, 0.5), ("b", "where_gt", 11, 4)], seed=1)
def test_a_pass_keeps_what_the_program_computes(which, dev, steps, seed):
    f = _program(steps)
    args = _inputs(seed, dev)
    traced = rc.jit.trace(f, *args)
    want_args, got_args, eager_args, ref_args = (_inputs(seed + 10, dev) for _ in range(4))
    want = traced(*want_args)
    ref = traced.run_with_env(*ref_args)[0]  # the node-by-node interpreter
    traced.graph = getattr(P, which)(traced.graph)
    got = traced(*got_args)
    eager = f(*eager_args)
    for g, w, e, r in zip(got + tuple(got_args), want + tuple(want_args),
                          eager + tuple(eager_args), ref + tuple(ref_args)):
        np.testing.assert_array_equal(w.cpu().numpy(), r.cpu().numpy())
        np.testing.assert_allclose(g.cpu().numpy(), w.cpu().numpy(), rtol=1e-6, atol=1e-6,
                                   equal_nan=True)
        np.testing.assert_allclose(g.cpu().numpy(), e.cpu().numpy(), rtol=1e-5, atol=1e-5,
                                   equal_nan=True)


def test_dead_code_and_cse_remove_what_they_should():
    def f(x):
        unused = x.exp() * 3  # noqa: F841  (nobody reads it)
        a = x.tanh() + 1
        b = x.tanh() + 1  # the same as a
        return a * b

    g = rc.jit.trace(f, rc.randn(8)).graph
    ops = [n.op for n in g.kernels()]
    assert ops.count("tanh") == 2 and "exp" in ops
    g2 = P.cse(P.dead_code(g))
    ops2 = [n.op for n in g2.kernels()]
    assert "exp" not in ops2 and ops2.count("tanh") == 1 and ops2.count("add") == 1


def test_fold_constants_and_fusion_shapes():
    def f(x):
        # only constants (made inside: a tensor from outside is an input, read each call)
        k = (rc.tensor([1.0, 2.0, 3.0, 4.0]) * 2).exp()
        return ((x + k).tanh() * 0.5 + 1).relu()

    t = rc.jit.trace(f, rc.randn(4))
    g = P.fold_constants(t.graph)
    assert "exp" not in [n.op for n in g.kernels()]
    fused = P.fuse_elementwise(g)
    ks = list(fused.kernels())
    assert [n.op for n in ks] == ["fused"] and len(ks[0].attrs["program"]["steps"]) == 5
    x = rc.randn(4)
    t.graph = fused
    np.testing.assert_allclose(t(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert "fused(" in str(fused)


def _reductions(g):
    return [n.attrs["program"].get("reduce") for n in g.kernels() if n.op == "fused"]


def test_a_sum_of_a_group_result_ends_the_group():
    x, w = rc.randn(6, 8), rc.randn(8)
    cases = [  # (function, the fused groups' reductions, whether a sum runs alone)
        (lambda x: (x * x).sum(), ["all"], False),                     # a squared norm
        (lambda x: ((x - 1) * w).exp().sum(-1), ["rows"], False),      # a row sum, a bias
        (lambda x: (x * 2).reshape(2, 3, 8).sum((1, 2)), ["rows"], False),  # rows of 24
        (lambda x: ((x * x).sum(-1, keepdim=True) + 1) * x, ["rows"], False),
        (lambda x: (x * 2 + 1).sum(0), [None], True),  # over the leading axis: apart
        (lambda x: x.exp().sum() + x.sum(), ["all"], True),  # a sum of an input: apart
        # the group reads a column of rows of 6, the sum is over rows of 8: apart
        (lambda x: (x.reshape(8, 6) * x.reshape(48)[:8].reshape(8, 1) + 1).reshape(6, 8).sum(-1),
         [None], True),
    ]
    for f, want, alone in cases:
        g = P.fuse_elementwise(rc.jit.trace(f, x).graph)
        assert _reductions(g) == want, g
        assert ("sum" in [n.op for n in g.kernels()]) == alone, g
        y = rc.randn(6, 8)
        t = rc.jit.trace(f, x)
        t.graph = g
        np.testing.assert_allclose(t(y).numpy(), f(y).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 1000), (700, 24), (300, 1001), (1 << 17,), (9, 8)])
def test_fused_sums_equal_eager_across_blocks(device, shape):
    """Sizes past one block of the cpu runner and odd row lengths (the opencl
    runner's scalar path): the fused sums match eager ones (another order of
    float additions: to float32 rounding)."""
    rng = np.random.default_rng(1)
    x = rc.tensor(rng.standard_normal(shape).astype(np.float32), device=device)
    w = rc.tensor(rng.standard_normal(shape[-1]).astype(np.float32), device=device)

    def f(x):
        h = (x - 0.5) * w
        return h.tanh().sum(-1), (h * h).mean(), h.exp()

    t = rc.jit.trace(f, x)
    t.graph = P.optimize(t.graph)
    assert len(_reductions(t.graph)) >= 1 and all(_reductions(t.graph))
    for got, want in zip(t(x), f(x)):
        g, e = got.cpu().numpy(), want.cpu().numpy()
        scale = 1e-6 * (np.sqrt(shape[-1]) + 1)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=scale)


def test_plan_memory_reuses_dead_buffers():
    def f(x):
        a = x.exp()
        b = a.sin()   # a dies here
        c = b.cos()   # b dies here: c can take a's memory
        return c.tanh()

    g = P.plan_memory(rc.jit.trace(f, rc.randn(64)).graph)
    reused = [n for n in g.nodes if n.op == "alloc" and "reuse" in n.attrs]
    assert reused
    t = rc.jit.trace(f, rc.randn(64))
    t.graph = g
    x = rc.randn(64)
    np.testing.assert_allclose(t(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_plan_memory_writes_in_place_only_where_nothing_reads_after(device):
    """``y = x * 2`` over a dying ``x`` takes ``x``'s memory; a fused group's
    output takes an input's only if no later step of the group reads it (a
    runner stores a step's result before the later steps run)."""
    def chain(x):
        a = x.exp()
        b = a * 2.0    # a dies here: b is written over it
        return b.sum()

    g = P.plan_memory(rc.jit.trace(chain, rc.randn(64)).graph)
    assert [n for n in g.nodes if n.op == "alloc" and "reuse" in n.attrs]

    w = rc.randn(8, 8, device=device)

    def group(x):
        t = x @ w          # a whole buffer, dying at the group
        y = t * 2.0        # output 0: t is read again below, so not over t
        z = (t + 1.0) * y  # the last step: may be written over t
        return y, z

    x = rc.randn(8, 8, device=device)
    traced = rc.jit.trace(group, x)
    traced.graph = P.optimize(traced.graph)
    fused = [n for n in traced.graph.nodes if n.op == "fused"]
    assert len(fused) == 1 and len(fused[0].writes) == 2
    got, want = traced(x), group(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.cpu().numpy(), b.cpu().numpy(), rtol=1e-6)
    reuse = {n.id: n.attrs["reuse"] for n in traced.graph.nodes if n.op == "alloc"
             and "reuse" in n.attrs}
    y_buf, z_buf = (region for region, _ in fused[0].writes)
    assert y_buf not in reuse and z_buf in reuse  # z over t; y in its own memory


def test_fused_groups_run_on_backends_without_a_fuse_hook(device):
    """prims has no Backend.fuse: the core runs the group's steps one by one."""
    def f(x, y):
        return ((x * y + 1).tanh() - y).abs() > 0.5

    x, y = rc.randn(100, device=device), rc.randn(100, device=device)
    t = rc.jit.trace(f, x, y)
    t.graph = P.fuse_elementwise(t.graph)
    assert [n.op for n in t.graph.kernels()] == ["fused"]
    np.testing.assert_array_equal(t(x, y).cpu().numpy(), f(x, y).cpu().numpy())


def test_conformance_checks_backend_fuse(monkeypatch):
    """A backend whose fused runner is wrong fails its conformance rows."""
    from rtxcore.testing.conformance import fuse_entries

    dev = rc.device("cpu")
    assert all(status == "pass" for _, status, _, _ in fuse_entries("cpu"))

    def bad_fuse(program, index):
        def run(outs, ins):
            for o in outs:
                o[...] = 0
        return run

    monkeypatch.setattr(type(dev.backend), "fuse", lambda self, p, i: bad_fuse(p, i))
    rows = fuse_entries("cpu")
    assert rows and all(status == "fail" for _, status, _, _ in rows)
    assert "the steps give" in rows[0][3]
    monkeypatch.setattr(type(dev.backend), "fuse", lambda self, p, i: None)
    assert all(status == "missing" for _, status, _, _ in fuse_entries("cpu"))


@pytest.mark.parametrize("case", ["scalar", "row", "transpose", "reshape", "clone"])
def test_in_place_never_over_an_operand_read_another_way(device, case):
    """A result takes a dying buffer's memory only when its node reads that buffer
    once, whole and in order: not when it also reads x[0, 0], a row x[0], x.T or
    a second reshape of x; and never for copy (a copy engine refuses overlap)."""
    rng = np.random.default_rng(5)
    a = rc.tensor(rng.random((96, 64)).astype(np.float32), device=device)
    b = rc.tensor(rng.random((64, 64)).astype(np.float32), device=device)
    fs = {"scalar": lambda a, b: (a @ b) * (a @ b)[0, 0] + 1.0,
          "row": lambda a, b: ((a @ b) + (a @ b)[0]) * 2.0,
          "transpose": lambda a, b: (lambda x: x + x.T)(b @ b),
          "reshape": lambda a, b: (lambda x: (x * 2.0, x.reshape(-1) + 1.0))(a @ b),
          "clone": lambda a, b: (b @ b).clone()}

    def f(a, b):
        x = a @ b
        if case == "scalar":
            return x * x[0, 0] + 1.0
        return fs[case](a, b)

    traced = rc.jit.trace(f, a, b)
    traced.graph = P.optimize(traced.graph)
    got, want = traced(a, b), f(a, b)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.cpu().numpy(), w.cpu().numpy(), rtol=1e-6)


def test_cpu_fused_groups_split_over_threads_give_the_one_thread_result(monkeypatch):
    """rtx_cpu runs a large group's blocks on several threads: the same bits as
    on one (each element in one block, a total adds its blocks' sums in order)."""
    from rtx_cpu import fused as CF
    from rtxcore.jit import fused as JF

    monkeypatch.setattr(CF, "PARALLEL_MIN", 1 << 16)
    monkeypatch.setattr(JF, "_FUSED", {})  # runners made afresh, through the spy
    used = []
    real = CF._parallel

    def spy(*a, **k):
        call = real(*a, **k)

        def wrapped(outs, ins):
            used.append(min(CF.threads(), a[4] // 2))
            call(outs, ins)
        return wrapped

    monkeypatch.setattr(CF, "_parallel", spy)
    rng = np.random.default_rng(2)
    x = rc.tensor(rng.standard_normal((1000, 300)).astype(np.float32))

    def f(x):
        h = (x * 0.5 + 1).tanh()
        return h, (h * h).sum(), (h - 1).exp().sum(-1)

    results = {}
    old = rc.get_num_threads()
    try:
        for n in (1, 2, 3):
            rc.set_num_threads(n)
            t = rc.jit.trace(f, x)
            t.graph = P.optimize(t.graph)
            results[n] = [r.numpy().copy() for r in t(x)]
    finally:
        rc.set_num_threads(old)
    assert max(used) >= 2  # the threaded path ran
    for n in (2, 3):
        for a, b in zip(results[n], results[1]):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(results[1], f(x)):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-4)


PARTIAL_WRITES = {
    "index": lambda a: a.__setitem__(1, 5.0),
    "slice_copy": lambda a: a[2:4].copy_(rc.full((2,), -3.0)),
    "index_put": lambda a: a.index_put_((rc.tensor([0, 5]),), rc.tensor([7.0, 8.0])),
    "scatter": lambda a: a.scatter_add_(0, rc.tensor([3, 3]), rc.tensor([1.0, 2.0])),
}


@pytest.mark.parametrize("write", sorted(PARTIAL_WRITES))
def test_a_partial_write_into_a_buffer_an_open_group_reads_closes_the_group(write):
    """A group waits to run where its first dependent appears; a node writing
    *part* of a buffer the group reads must close it first, or the group would
    read the new values."""
    def f(x, y):
        b = x.exp() + y  # a group reading x...
        PARTIAL_WRITES[write](x)  # ...then part of x written...
        c = b * 2 - 1  # ...and the group going on after it
        return c

    def args():
        return (rc.tensor(np.linspace(-1, 1, 8, dtype=np.float32)),
                rc.tensor(np.linspace(0, 2, 8, dtype=np.float32)))

    traced = rc.jit.trace(f, *args())
    traced.graph = P.optimize(traced.graph)
    assert any(n.op == "fused" for n in traced.graph.nodes)
    got_args, want_args = args(), args()
    np.testing.assert_allclose(traced(*got_args).numpy(), f(*want_args).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(got_args[0].numpy(), want_args[0].numpy())


def test_cpu_in_place_fused_groups_split_over_threads_give_eagers_result(monkeypatch):
    """An optimizer-like update written in place (p -= lr * m; m = 0.9 m + g) as one
    fused group over 1M elements on 1, 2 and 4 threads: each element updated
    once, the eager bits whatever the count."""
    from rtx_cpu import fused as CF
    from rtxcore.jit import fused as JF

    monkeypatch.setattr(JF, "_FUSED", {})
    rng = np.random.default_rng(5)
    n = 1 << 20
    assert n >= CF.PARALLEL_MIN
    data = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]

    def step(p, m, g):
        m.mul_(0.9).add_(g)
        p.sub_(m * 0.01)
        return p.sum()

    want = [rc.tensor(d.copy()) for d in data]
    step(*want)
    old = rc.get_num_threads()
    try:
        for threads in (1, 2, 4):
            rc.set_num_threads(threads)
            args = [rc.tensor(d.copy()) for d in data]
            t = rc.jit.trace(step, *[rc.tensor(d.copy()) for d in data])
            t.graph = P.optimize(t.graph)
            fused = [nd for nd in t.graph.nodes if nd.op == "fused"]
            inputs = {nd.id for nd in t.graph.inputs}
            assert fused and any(P._root(t.graph, r) in inputs for r, _ in fused[0].writes)
            t(*args)
            for a, w in zip(args, want):
                np.testing.assert_array_equal(a.numpy(), w.numpy())
    finally:
        rc.set_num_threads(old)
