"""rtxcore.profiler: what it records, how it adds up, and that it leaves nothing behind."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rtxcore
from rtxcore import nn
from rtxcore.autograd import engine, tape
from rtxcore.device import Device
from rtxcore.dispatch.registry import registry
from rtxcore.optim.optimizer import Optimizer
from rtxcore.profiler import ProfilerActivity, profile, record_function


def _rows(prof: profile, **kw: object) -> dict[str, object]:
    return {r.key: r for r in prof.key_averages(**kw)}


def _tensor(device: str, *shape: int, grad: bool = False) -> rtxcore.Tensor:
    rng = np.random.default_rng(sum(shape))
    return rtxcore.tensor(rng.standard_normal(shape).astype(np.float32), device=device,
                          requires_grad=grad)


def _table_snapshot() -> list[tuple[dict, dict]]:
    """Every kernel table a device reads, with a copy of its entries."""
    tables = {id(t): t for t in registry.tables.values()}
    for d in Device._interned.values():
        tables.setdefault(id(d.kernels), d.kernels)
    return [(t, dict(t)) for t in tables.values()]


def _raw_bindings() -> list[object]:
    """What each @differentiable / @inplace front-end calls now."""
    out = []
    for op in tape.FRONTENDS:
        code = op.__code__
        if "fn" in code.co_freevars:
            out.append(op.__closure__[code.co_freevars.index("fn")].cell_contents)
        else:
            out.append(op.__globals__.get("fn"))
    return out


def test_ops_and_kernels_counted_exactly(device: str) -> None:
    x, y = _tensor(device, 4, 5), _tensor(device, 4, 5)
    w = _tensor(device, 5, 3)
    x + y  # before the profile: not recorded
    with profile() as prof:
        a = x + y
        b = rtxcore.add(a, y)
        c = a.add(b)
        d = c * x
        e = rtxcore.mul(d, 2.0)
        f = e @ w
        f.sum()
    x + y  # after: not recorded either
    rows = _rows(prof)
    dev = rtxcore.device(device).type
    assert rows["rtxcore::add"].count == 3
    assert rows["rtxcore::mul"].count == 2
    assert rows["rtxcore::matmul"].count == 1
    assert rows["rtxcore::sum"].count == 1
    assert rows[f"{dev}::add"].count == 3  # the kernel each add ran
    assert rows[f"{dev}::mul"].count == 2
    for r in rows.values():
        assert r.device_time_total >= r.self_device_time_total >= 0
        assert r.cpu_time_total >= r.self_cpu_time_total >= 0
    # an op's time holds its kernel's
    assert rows["rtxcore::add"].cpu_time_total >= rows[f"{dev}::add"].cpu_time_total
    # self times add up to the time of the outermost events, which fits in the profile
    events = prof.events()
    top = sum(e.cpu_time_total for e in events if e.parent is None)
    total_self = sum(r.self_cpu_time_total for r in rows.values())
    assert total_self == pytest.approx(top, rel=1e-9)
    assert top <= (prof._t1 - prof._t0) / 1e3
    assert all(e.device == str(rtxcore.device(device)) for e in events if e.kind == "op")


def test_self_time_is_total_minus_children() -> None:
    x = _tensor("cpu", 8, 8)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                x.exp().sum()
            x.neg()
    events = prof.events()
    by_parent: dict[int, list] = {}
    for e in events:
        if e.parent is not None:
            by_parent.setdefault(e.parent.id, []).append(e)
    for e in events:
        kids = by_parent.get(e.id, [])
        assert e.self_cpu_time_total == pytest.approx(
            e.cpu_time_total - sum(k.cpu_time_total for k in kids), abs=1e-6)
        assert all(k.start_ns >= e.start_ns and k.end_ns <= e.end_ns for k in kids)
    outer = next(e for e in events if e.name == "outer")
    assert [k.name for k in by_parent[outer.id]] == ["inner", "rtxcore::neg"]
    inner = next(e for e in events if e.name == "inner")
    assert [k.name for k in by_parent[inner.id]] == ["rtxcore::exp", "rtxcore::sum"]


def test_table_sort_and_row_limit() -> None:
    x = _tensor("cpu", 3, 3)
    with profile() as prof:
        for _ in range(4):
            x = x + 1.0
        x.relu()
    text = prof.key_averages().table(sort_by="count", row_limit=3)
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Name"))
    body = lines[head + 2:-2]
    assert len(body) == 3
    counts = [int(ln.split()[-1]) for ln in body]
    assert counts == sorted(counts, reverse=True)
    assert body[0].split()[0] in ("rtxcore::add", "cpu::add", "cpu::empty")
    assert "Self CPU time total:" in lines[-1]
    # PyTorch's columns, in PyTorch's order
    assert [c.strip() for c in lines[head].split("  ") if c.strip()] == [
        "Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    assert "OPENCL" not in text  # no device times on cpu
    # by self time, largest first; the percentages add up to 100
    rows = sorted(prof.key_averages(), key=lambda r: r.self_cpu_time_total, reverse=True)
    full = prof.table(sort_by="self_cpu_time_total", row_limit=0).splitlines()
    names = [ln.split()[0] for ln in full[3:-2]]
    assert names == [r.key for r in rows]
    pct = sum(float(ln.split()[1].rstrip("%")) for ln in full[3:-2])
    assert pct == pytest.approx(100.0, abs=0.05 * len(names))
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nonsense")


def test_backward_nodes_and_leaves_are_rows(device: str) -> None:
    x = _tensor(device, 4, 3, grad=True)
    w = _tensor(device, 3, 2, grad=True)
    with profile() as prof:
        loss = (x @ w).tanh().sum()
        loss.backward()
    rows = _rows(prof)
    names = [loss.grad_fn.name()]
    node = loss.grad_fn
    while node.next_functions and node.next_functions[0] is not None:
        node = node.next_functions[0][0]
        if type(node).__name__ != "AccumulateGrad":
            names.append(node.name())
    assert len(names) == 3
    for n in names:
        assert rows[n].count == 1
        assert rows[n].cpu_time_total > 0
    assert rows["AccumulateGrad"].count == 2
    assert x.grad is not None and w.grad is not None


def test_optimizer_step_row() -> None:
    model = nn.Linear(3, 2)
    opt = rtxcore.optim.SGD(model.parameters(), lr=0.1)
    step, zero_grad = vars(Optimizer)["step"], vars(Optimizer)["zero_grad"]
    x = _tensor("cpu", 5, 3)
    with profile() as prof:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    rows = _rows(prof)
    assert rows["Optimizer.step#SGD.step"].count == 1
    assert rows["Optimizer.zero_grad#SGD.zero_grad"].count == 1
    # the update's ops ran inside the step
    ev = next(e for e in prof.events() if e.name == "Optimizer.step#SGD.step")
    assert any(e.parent is ev for e in prof.events())
    assert vars(Optimizer)["step"] is step and vars(Optimizer)["zero_grad"] is zero_grad
    # a scheduler wraps the instance's step with the class's function, before the profile
    rtxcore.optim.lr_scheduler.StepLR(opt, step_size=1)
    with profile() as later:
        opt.step()
        opt.step()
    assert _rows(later)["Optimizer.step#SGD.step"].count == 2


def test_record_function_context_and_decorator() -> None:
    @record_function("my_block")
    def block(t: rtxcore.Tensor) -> rtxcore.Tensor:
        return t * 3.0

    x = _tensor("cpu", 2, 2)
    np.testing.assert_allclose(block(x).numpy(), x.numpy() * 3.0)  # no profile: plain call
    with record_function("nobody_listens"):
        pass
    with profile() as prof:
        with record_function("data"):
            x.abs()
        block(x)
        block(x)
    rows = _rows(prof)
    assert rows["data"].count == 1
    assert rows["my_block"].count == 2
    assert "nobody_listens" not in rows
    assert rows["my_block"].cpu_time_total >= rows["rtxcore::mul"].cpu_time_total
    with pytest.raises(TypeError, match="record_function"):
        record_function(3)  # type: ignore[arg-type]


def test_nn_functional_composites_recorded() -> None:
    F = nn.functional
    before = F.layer_norm
    x = _tensor("cpu", 4, 6)
    target = rtxcore.tensor([0, 1, 2, 3])
    with profile() as prof:
        F.layer_norm(x, (6,))
        F.cross_entropy(x, target)
    rows = _rows(prof)
    assert rows["rtxcore::layer_norm"].count == 1
    assert rows["rtxcore::cross_entropy"].count == 1
    assert F.layer_norm is before


def test_a_functional_calling_another_records_both() -> None:
    # relu6 is hardtanh(0, 6) inside nn.functional's activations module: the
    # inner call is a row of its own, as it is when called from outside
    from rtxcore.nn.functional import activations

    before = activations.hardtanh
    x = _tensor("cpu", 4, 6)
    with profile() as prof:
        nn.functional.relu6(x)
    rows = _rows(prof)
    assert rows["rtxcore::relu6"].count == 1
    assert rows["rtxcore::hardtanh"].count == 1
    assert activations.hardtanh is before  # put back on exit


def test_record_shapes_and_grouping() -> None:
    a, b = _tensor("cpu", 2, 3), _tensor("cpu", 4, 5)
    with profile(record_shapes=True) as prof:
        a + a
        b + b
        b + b
    grouped = [r for r in prof.key_averages(group_by_input_shape=True) if r.key == "rtxcore::add"]
    assert sorted((r.count, r.input_shapes) for r in grouped) == [
        (1, [[2, 3], [2, 3]]), (2, [[4, 5], [4, 5]])]
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()
    assert _rows(prof)["rtxcore::add"].count == 3
    with profile() as plain:
        a + a
    with pytest.raises(RuntimeError, match="record_shapes"):
        plain.key_averages(group_by_input_shape=True)
    assert plain.events()[0].input_shapes is None


def test_chrome_trace(tmp_path: object) -> None:
    x = _tensor("cpu", 3, 4)
    with profile(record_shapes=True) as prof:
        with record_function("range"):
            (x * x).sum()
    path = tmp_path / "trace.json"  # type: ignore[operator]
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0 and isinstance(e["pid"], int) and isinstance(e["tid"], int)
    by_name = {e["name"]: e for e in complete}
    assert by_name["rtxcore::mul"]["args"]["Input Dims"] == [[3, 4], [3, 4]]
    rng, mul = by_name["range"], by_name["rtxcore::mul"]
    assert rng["ts"] <= mul["ts"] and mul["ts"] + mul["dur"] <= rng["ts"] + rng["dur"] + 1e-3
    ev = next(e for e in prof.events() if e.name == "rtxcore::mul")
    assert mul["dur"] == pytest.approx(ev.cpu_time_total)


def test_everything_restored_after_exit_and_after_raise() -> None:
    x = _tensor("cpu", 2, 2)
    rtxcore.device("cpu")
    tables = _table_snapshot()
    raw = _raw_bindings()
    apply, acc = engine._apply, engine._accumulate_leaf
    step, run_step = vars(Optimizer)["step"], vars(Optimizer)["_run_step"]
    F = nn.functional
    ln = F.layer_norm

    def unchanged() -> None:
        for table, copy in tables:
            assert table.keys() == copy.keys()
            assert all(table[k] is copy[k] for k in copy)
        assert all(a is b for a, b in zip(_raw_bindings(), raw))
        assert engine._apply is apply and engine._accumulate_leaf is acc
        assert vars(Optimizer)["step"] is step and vars(Optimizer)["_run_step"] is run_step
        assert F.layer_norm is ln

    with profile() as prof:
        x + x
    unchanged()
    with pytest.raises(ZeroDivisionError):
        with profile() as failed:
            x * x
            1 / 0
    unchanged()
    assert _rows(failed)["rtxcore::mul"].count == 1  # what ran before the error is kept
    # nothing recorded afterwards, and the next profile starts empty
    n = len(prof.events())
    x + x
    assert len(prof.events()) == n
    with profile() as again:
        pass
    assert len(again.events()) == 0


def test_profile_arguments_and_misuse() -> None:
    p = profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
                with_stack=True)
    assert p.activities == {ProfilerActivity.CPU}
    with pytest.raises(TypeError, match="activities"):
        profile(activities=["cpu"])  # type: ignore[list-item]
    with p:
        with pytest.raises(RuntimeError, match="already running"):
            profile().start()
        with pytest.raises(RuntimeError, match="still running"):
            p.key_averages()
    assert rtxcore.profiler is __import__("rtxcore.profiler").profiler


def _opencl() -> str:
    from rtxcore.testing import available_devices

    for d in available_devices(complete=True):
        if d.startswith("opencl"):
            return d
    pytest.skip("no OpenCL device")


def test_opencl_device_times() -> None:
    dev = _opencl()
    import pyopencl

    from rtx_opencl import runtime

    x, y = _tensor(dev, 64, 64), _tensor(dev, 64, 64)
    (x + y).numpy()  # compile outside the profile
    (x @ y).numpy()
    d = runtime.device(rtxcore.device(dev).index)
    queue = d.queue
    enqueue = pyopencl._cl.enqueue_nd_range_kernel
    with profile() as prof:
        z = (x + y) @ y
        z.numpy()
    rows = _rows(prof)
    assert rows["opencl::add"].count == 1 and rows["opencl::matmul"].count == 1
    for name in ("opencl::add", "opencl::matmul"):
        assert rows[name].self_device_time_total > 0
        assert rows[name].self_device_time_total == rows[name].device_time_total
    # the front-end holds its kernel's device time; its own is zero
    assert rows["rtxcore::add"].device_time_total == rows["opencl::add"].device_time_total
    assert rows["rtxcore::add"].self_device_time_total == 0
    # and every range above it: a record_function two levels up holds it too
    with profile() as nested:
        with record_function("outer"):
            (x + y).numpy()
    rows = _rows(nested)
    assert rows["opencl::add"].device_time_total > 0
    assert rows["outer"].device_time_total == rows["opencl::add"].device_time_total
    assert rows["rtxcore::add"].device_time_total == rows["opencl::add"].device_time_total
    assert rows["outer"].self_device_time_total == 0
    text = prof.table(sort_by="self_device_time_total")
    assert "Self OPENCL" in text and "Self OPENCL time total" in text
    # profiling is off again: the plain queue and enqueue are back
    assert runtime._profiling is None
    assert d.queue is queue and pyopencl._cl.enqueue_nd_range_kernel is enqueue
    np.testing.assert_allclose(z.numpy(), (x.numpy() + y.numpy()) @ y.numpy(), rtol=1e-4, atol=1e-4)
    trace = prof._trace()["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert len(kernels) >= 2 and all(e["dur"] > 0 for e in kernels)
    # a profile of host work only collects no device times
    with profile(activities=[ProfilerActivity.CPU]) as host:
        (x + y).numpy()
    assert _rows(host)["opencl::add"].self_device_time_total == 0


def test_train_digits_profile_option(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "train_digits.py"
    spec = importlib.util.spec_from_file_location("train_digits_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    trace = tmp_path / "trace.json"  # type: ignore[operator]
    rc = example.main(["--profile", "2", "--max-steps", "4", "--no-progress", "--device", "cpu",
                       "--trace", str(trace),
                       "--checkpoint", str(tmp_path / "w.safetensors")])  # type: ignore[operator]
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "profile of 2 training steps:" in out and "Self CPU time total:" in out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith(("rtxcore::", "cpu::"))]
    assert len(rows) >= 10 and all(row[-1].isdigit() for row in rows)
    assert "reloaded: accuracy identical" in out  # the rest of the example still runs
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    names = [e["name"] for e in events]
    assert names.count("Optimizer.step#Adam.step") == 2  # one per profiled step
    assert names.count("rtxcore::cross_entropy") == 2
    assert names.count("rtxcore::linear") == 6  # three layers


def test_closed_events_leave_the_garbage_collectors_work_alone() -> None:
    """Closed events are kept as tuples of plain values, which the collector stops
    tracking: a profile of many ops doesn't make each full collection slower (a
    full collection's time used to land in whatever ran: an optimizer step shown
    at 10x its time)."""
    import gc

    import rtxcore as rc
    from rtxcore.profiler import profile

    x = rc.ones(4)
    with profile(record_shapes=True) as prof:
        for _ in range(2000):
            x = x + 1
        for _ in range(3):  # (a collection untracks one level of nested tuples)
            gc.collect()
        rec = prof._rec
        closed = [e for e in rec.events if isinstance(e, tuple)]
        assert len(closed) >= 4000  # (each add: the op and its kernel)
        assert not any(gc.is_tracked(e) for e in closed)
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["rtxcore::add"].count == 2000 and rows["cpu::add"].count == 2000
    assert [list(s) for s in prof.events()[0].input_shapes] == [[4], []]
