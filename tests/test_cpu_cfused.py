"""rtx_cpu's compiled fused groups (``cfused``): one C loop computes NumPy's
runner's bits, on random programs of every step kind it takes, with every
operand kind (whole, scalar, row, column), outputs written over inputs, NaN,
infinities and signed zeros; and groups it can't take stay with NumPy."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("rtx_cpu", reason="rtx_cpu (the NumPy backend) is not installed")
from rtx_cpu import cfused
from rtx_cpu import fused as CF
from rtx_cpu.kernels import KERNELS
from rtxcore.dispatch.fused import input_kinds

pytestmark = pytest.mark.skipif(cfused._compiler() is None, reason="no C compiler")

FLOAT_BIN = ["add", "sub", "mul", "div"]
FLOAT_UN = ["neg", "sqrt", "abs", "floor", "reciprocal", "copy"]
CMP = ["gt", "ge", "lt", "le", "eq", "ne"]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 1e-30, 1e30]
CONSTS = [v for v in SPECIAL if v == v]  # (a NaN constant keeps a group on NumPy)


@st.composite
def programs(draw):
    dt = draw(st.sampled_from(["float32", "float64"]))
    cols = draw(st.sampled_from([0, 8]))
    rows = 6
    n = rows * 8 if cols else 48
    inputs, kinds = [], []
    for _ in range(draw(st.integers(1, 4))):
        inputs.append(dt)
        kinds.append(draw(st.sampled_from(["in", "in", "scalar"] + (["row", "col"] if cols else []))))
    if "in" not in kinds:
        kinds[0] = "in"
    steps, sdt = [], []

    def operand(want):
        cands = [["step", k] for k, d in enumerate(sdt) if d == want]
        cands += [[kinds[i], i] for i, d in enumerate(inputs) if d == want]
        if want != "bool":
            cands.append(["const", draw(st.sampled_from(CONSTS + [2, 0.1]))])
        return draw(st.sampled_from(cands)) if cands else None

    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["bin", "un", "cmp", "where", "cast", "logic"]))
        if kind == "bin":
            a, b = operand(dt), operand(dt)
            if a[0] == "const" and b[0] == "const":
                continue
            steps.append([draw(st.sampled_from(FLOAT_BIN)), dt, [a, b]]); sdt.append(dt)
        elif kind == "un":
            a = operand(dt)
            if a[0] == "const":
                continue
            steps.append([draw(st.sampled_from(FLOAT_UN)), dt, [a]]); sdt.append(dt)
        elif kind == "cmp":
            a, b = operand(dt), operand(dt)
            if a[0] == "const" and b[0] == "const":
                continue
            steps.append([draw(st.sampled_from(CMP)), "bool", [a, b]]); sdt.append("bool")
        elif kind == "where":
            c = operand("bool")
            if c is None:
                continue
            a, b = operand(dt), operand(dt)
            steps.append(["where", dt, [c, a, b]]); sdt.append(dt)
        elif kind == "logic":
            a, b = operand("bool"), operand("bool")
            if a is None:
                continue
            if draw(st.booleans()) or b is None:
                steps.append(["logical_not", "bool", [a]])
            else:
                steps.append([draw(st.sampled_from(["logical_and", "logical_or"])), "bool", [a, b]])
            sdt.append("bool")
        else:  # cast between the float types, or a bool to the float type
            a = operand(draw(st.sampled_from([dt, "bool"])))
            if a is None or a[0] == "const":
                continue
            other = "float64" if dt == "float32" else "float32"
            src = sdt[a[1]] if a[0] == "step" else inputs[a[1]]
            steps.append(["cast", dt if src == "bool" else other, [a]])
            sdt.append(steps[-1][1])
    if not steps:
        steps.append(["neg", dt, [["in", kinds.index("in")]]]); sdt.append(dt)
    outputs = sorted(set(draw(st.lists(st.integers(0, len(steps) - 1), min_size=1, max_size=3))))
    prog = {"n": n, "inputs": inputs, "steps": steps, "outputs": outputs}
    if cols:
        prog["cols"] = cols
    return prog, kinds


def _arrays(prog, kinds, seed):
    kinds = input_kinds(prog)  # (an input no step reads is read whole)
    rng = np.random.default_rng(seed)
    n, cols = prog["n"], prog.get("cols", 0)
    size = {"in": n, "scalar": 1, "row": cols, "col": n // cols if cols else 0}
    ins = []
    for dt, k in zip(prog["inputs"], kinds):
        a = rng.standard_normal(size[k]) * 3
        pick = rng.random(size[k]) < 0.2
        a[pick] = rng.choice(SPECIAL, pick.sum())
        ins.append(a.astype(dt))
    outs = [np.full(n, 7, np.dtype(prog["steps"][k][1] if prog["steps"][k][1] != "bool"
                                   else np.bool_)) for k in prog["outputs"]]
    return outs, ins


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pk=programs(), seed=st.integers(0, 3), in_place=st.booleans())
def test_a_compiled_group_computes_numpys_bits(monkeypatch, pk, seed, in_place):
    prog, kinds = pk
    monkeypatch.setattr(cfused, "C_MIN", 0)
    assert cfused.eligible(prog), prog
    c_run = cfused.runner(prog, lambda: 1, CF.pool, 1 << 40)
    monkeypatch.setattr(cfused, "C_MIN", 1 << 60)
    np_run = CF.runner(prog, KERNELS)
    assert c_run is not None and np_run is not None
    results = []
    for run in (c_run, np_run):
        outs, ins = _arrays(prog, kinds, seed)
        if in_place:  # output 0 written over a whole input of its dtype, as
            # plan_memory allows it: no later step reads that input (nor the
            # writing step, for a where, copy or cast)
            k0 = prog["outputs"][0]
            late = {v for _, _, ops in prog["steps"][k0 + 1:] for kind, v in ops if kind == "in"}
            if prog["steps"][k0][0] in ("where", "copy", "cast"):
                late |= {v for kind, v in prog["steps"][k0][2] if kind == "in"}
            j = next((i for i, (d, k) in enumerate(zip(prog["inputs"],
                                                       input_kinds(prog)))
                      if k == "in" and np.dtype(d) == outs[0].dtype and i not in late), None)
            if j is not None:
                outs[0] = ins[j]
        run(outs, ins)
        results.append([o.copy() for o in outs])
    for got, want in zip(*results):
        # the same values, zeros' signs included; a NaN's own sign may differ
        np.testing.assert_array_equal(got, want, err_msg=cfused.source(prog))
        if got.dtype.kind == "f":
            keep = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]),
                                          err_msg=cfused.source(prog))


def test_a_large_group_split_over_threads_gives_one_threads_bits(monkeypatch):
    prog = {"n": 1 << 18, "inputs": ["float32", "float32", "float32"],
            "steps": [["mul", "float32", [["in", 0], ["const", 0.9]]],
                      ["add", "float32", [["step", 0], ["in", 1]]],
                      ["sqrt", "float32", [["in", 2]]],
                      ["div", "float32", [["step", 1], ["step", 2]]]],
            "outputs": [1, 3]}
    rng = np.random.default_rng(0)
    res = []
    for threads in (1, 2, 3):
        ins = [np.abs(rng.standard_normal(prog["n"])).astype(np.float32) for _ in range(3)]
        rng = np.random.default_rng(0)
        outs = [np.empty(prog["n"], np.float32) for _ in range(2)]
        cfused.runner(prog, lambda t=threads: t, CF.pool, 0)(outs, ins)
        res.append(outs)
    for outs in res[1:]:
        for a, b in zip(outs, res[0]):
            np.testing.assert_array_equal(a, b)


def test_groups_it_cannot_take_stay_with_numpy(monkeypatch):
    base = {"n": 1 << 16, "inputs": ["float32"], "outputs": [0]}
    assert cfused.eligible({**base, "steps": [["neg", "float32", [["in", 0]]]]})
    for steps in ([["exp", "float32", [["in", 0]]]],  # NumPy's SIMD exp is not libm's
                  [["add", "int32", [["in", 0], ["const", 1]]]]):
        assert not cfused.eligible({**base, "steps": steps})
    assert not cfused.eligible({**base, "n": 100, "steps": [["neg", "float32", [["in", 0]]]]})
    assert not cfused.eligible({**base, "steps": [["neg", "float32", [["in", 0]]],
                                                  ["sum", "float32", [["step", 0]]]],
                                "reduce": "all"})
    # maximum's zero sign is NumPy's loop's choice; a NaN constant's sign is lost
    assert not cfused.eligible({**base, "steps": [["maximum", "float32",
                                                   [["in", 0], ["const", 0.0]]]]})
    assert not cfused.eligible({**base, "steps": [["add", "float32",
                                                   [["in", 0], ["const", float("nan")]]]]})
    # an input read two ways, an index out of range: the sizes checked would not
    # be the sizes read
    two = {**base, "inputs": ["float32"], "steps": [["add", "float32",
                                                     [["scalar", 0], ["in", 0]]]]}
    assert not cfused.eligible(two)
    assert not cfused.eligible({**base, "steps": [["neg", "float32", [["in", 1]]]]})
    assert not cfused.eligible({**base, "steps": [["neg", "float32", [["step", 0]]]]})
    monkeypatch.setenv("RTX_CPU_CC", "0")
    assert cfused.runner({**base, "steps": [["neg", "float32", [["in", 0]]]]},
                         lambda: 1, CF.pool, 1 << 40) is None


def test_operands_of_the_wrong_size_or_type_are_refused_not_read():
    prog = {"n": 1 << 16, "inputs": ["float32"], "outputs": [0],
            "steps": [["neg", "float32", [["in", 0]]]]}
    run = cfused.runner(prog, lambda: 1, CF.pool, 1 << 40)
    out = np.empty(1 << 16, np.float32)
    with pytest.raises(ValueError, match="operand"):
        run([out], [np.zeros(10, np.float32)])
    with pytest.raises(ValueError, match="operand"):
        run([out], [np.zeros(1 << 16, np.float64)])
    ro = np.frombuffer(bytes(4 << 16), np.float32)  # read-only memory is not written
    with pytest.raises(ValueError, match="operand"):
        run([ro], [np.zeros(1 << 16, np.float32)])
