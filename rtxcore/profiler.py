"""Find where a program's time goes, op by op, in the spirit of ``torch.profiler``.

    with rtxcore.profiler.profile(record_shapes=True) as prof:
        loss = model(x).sum()
        loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")   # chrome://tracing or ui.perfetto.dev

What is recorded, each as one event with its start, end and the events inside it:

- ``rtxcore::<op>``: every op front-end a program calls (``add``, ``matmul``,
  ``sum``, ..., the in-place ``add_``, and the composites of
  ``rtxcore.nn.functional`` such as ``layer_norm`` and ``cross_entropy``);
- ``<device type>::<op>``: every kernel those run (``cpu::add``, ``opencl::matmul``);
  a backend that times its kernels on the device (rtx_opencl, through OpenCL
  profiling events) fills the device-time columns;
- the backward of each graph node under its node name (``MulBackward0``), and
  ``AccumulateGrad`` for the leaves;
- ``Optimizer.step#Adam.step`` and ``Optimizer.zero_grad#Adam.zero_grad``;
- user ranges: ``with rtxcore.profiler.record_function("data"):``.

Nothing costs anything when no profile runs: the profile swaps recording
versions in at its start (the kernels in the devices' tables, the function each
front-end wraps, the backward engine's node runner, ``Optimizer.step``) and puts
the originals back at its end, also when the body raises.

Accepted for PyTorch compatibility: ``activities`` (kept; device timings are
collected when it names a device activity, as the default does),
``profile_memory``, ``with_stack``, ``with_flops``, ``with_modules`` (all
ignored: no memory, stack, FLOP or module records).
"""

from __future__ import annotations

import enum
import functools
import json
import os
import threading
import time
import types
from typing import Any, Callable, Iterable

from .tensor import Tensor

__all__ = ["profile", "record_function", "ProfilerActivity", "EventList", "FunctionEvent",
           "FunctionEventAvg"]

_clock = time.perf_counter_ns
_get_ident = threading.get_ident


class ProfilerActivity(enum.Enum):
    """What to record: host ops (``CPU``) and kernel times on devices that measure
    them (``OPENCL``; ``CUDA`` and ``XPU`` are taken as any device)."""

    CPU = "cpu"
    OPENCL = "opencl"
    CUDA = "cuda"
    XPU = "xpu"


def supported_activities() -> set[ProfilerActivity]:
    return set(ProfilerActivity)


# -- events ---------------------------------------------------------------------------


class FunctionEvent:
    """One recorded range. Times are in microseconds, as in PyTorch."""

    __slots__ = ("name", "kind", "device", "input_shapes", "start_ns", "end_ns", "children_ns",
                 "parent", "thread", "device_ns", "device_total_ns", "device_spans", "id")

    def __init__(self, name: str, kind: str, device: str, input_shapes: Any,
                 parent: "FunctionEvent | None", thread: int) -> None:
        self.name = name
        self.kind = kind  # "op", "kernel", "backward", "optimizer", "user"
        self.device = device
        self.input_shapes = input_shapes
        self.parent = parent
        self.thread = thread
        self.start_ns = 0
        self.end_ns = 0
        self.children_ns = 0  # host time of the events directly inside this one
        self.device_ns = 0  # device time of the kernels this event launched itself
        self.device_total_ns = 0  # ... and of those launched by events inside it
        self.device_spans: list[tuple[str, int, int]] | None = None
        self.id = 0

    key = property(lambda self: self.name)
    count = property(lambda self: 1)
    cpu_time_total = property(lambda self: (self.end_ns - self.start_ns) / 1e3)
    self_cpu_time_total = property(lambda self: (self.end_ns - self.start_ns - self.children_ns) / 1e3)
    cpu_time = cpu_time_total
    self_cpu_time = self_cpu_time_total
    device_time_total = property(lambda self: self.device_total_ns / 1e3)
    self_device_time_total = property(lambda self: self.device_ns / 1e3)
    device_time = device_time_total

    @property
    def time_range(self) -> tuple[float, float]:
        return self.start_ns / 1e3, self.end_ns / 1e3

    def __repr__(self) -> str:
        return (f"<FunctionEvent {self.name} device={self.device} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


class FunctionEventAvg:
    """The events of one key (name, and input shapes when grouped by them) added up."""

    def __init__(self, key: str, input_shapes: Any = None) -> None:
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.devices: set[str] = set()

    def add(self, ev: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        self.device_time_total += ev.device_time_total
        self.self_device_time_total += ev.self_device_time_total
        if ev.device:
            self.devices.add(ev.device)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    @property
    def self_device_time(self) -> float:
        return self.self_device_time_total / self.count if self.count else 0.0

    # PyTorch's older CUDA-named spellings of the device times
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us>")


_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count",
              "device_time_total", "self_device_time_total", "device_time", "self_device_time",
              "cuda_time_total", "self_cuda_time_total", "cuda_time")


class EventList(list):
    """A list of events (or of averages, from ``key_averages``) that prints as a table."""

    def __init__(self, items: Iterable[Any] = (), device_label: str = "") -> None:
        super().__init__(items)
        self._device_label = device_label

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80,
              header: str | None = None, top_level_events_only: bool = False) -> str:
        """The rows as text, like PyTorch's ``key_averages().table()``: sorted by
        ``sort_by`` (largest first; None keeps the order), at most ``row_limit``
        rows (``<= 0``: all), percentages of the total self time."""
        return _table(self, sort_by, row_limit, max_name_column_width, max_shapes_column_width,
                      header, self._device_label, top_level_events_only)

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for e in self:
            total.count += e.count
            total.cpu_time_total += e.cpu_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
            total.device_time_total += e.device_time_total
            total.self_device_time_total += e.self_device_time_total
        return total

    def __str__(self) -> str:
        return self.table()


# -- the running profile --------------------------------------------------------------

_active: "profile | None" = None  # the profile recording now (one at a time)
_start_lock = threading.Lock()


def _shape_of(v: Any) -> Any:
    if isinstance(v, Tensor):
        return list(v._shape)
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], Tensor):
        return [list(t._shape) if isinstance(t, Tensor) else [] for t in v]
    s = getattr(v, "shape", None)  # a kernel's native view
    return list(s) if isinstance(s, tuple) else []


def _device_of(args: tuple[Any, ...]) -> Any:
    """The device of the first tensor argument (a Device; made a str at the end)."""
    for a in args:
        if isinstance(a, Tensor):
            return a._device
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            return a[0]._device
    return "cpu"


# While recording, an event is a plain list (cheapest to make); FunctionEvents
# are built from them when the profile stops.
_NAME, _KIND, _DEV, _SHAPES, _PARENT, _TID, _START, _END, _CHILDREN = range(9)


class _Recorder:
    """The events of one profile, and each thread's currently open ones."""

    def __init__(self, record_shapes: bool) -> None:
        self.record_shapes = record_shapes
        self.events: list[list[Any]] = []
        self.open: dict[int, list[list[Any]]] = {}  # thread id -> its open events

    def begin(self, name: str, kind: str, device: Any, args: tuple[Any, ...]) -> list[Any]:
        tid = _get_ident()
        st = self.open.get(tid)
        if st is None:
            st = self.open[tid] = []
        ev = [name, kind, device, [_shape_of(a) for a in args] if self.record_shapes else None,
              st[-1] if st else None, tid, 0, 0, 0]
        st.append(ev)
        self.events.append(ev)
        ev[_START] = _clock()
        return ev

    def end(self, ev: list[Any]) -> None:
        t = ev[_END] = _clock()
        st = self.open.get(ev[_TID])
        if st and st[-1] is ev:
            st.pop()
        elif st:  # closed out of order (a generator's range): drop it wherever it is
            try:
                st.remove(ev)
            except ValueError:
                pass
        p = ev[_PARENT]
        if p is not None:
            p[_CHILDREN] += t - ev[_START]

    def current(self) -> list[Any] | None:
        st = self.open.get(_get_ident())
        return st[-1] if st else None


def _current_tag() -> Any:
    """The innermost open event on this thread (what a backend tags a kernel with)."""
    p = _active
    return None if p is None or p._rec is None else p._rec.current()


# -- recording versions of what runs ------------------------------------------------------


def _recording_op(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        p = _active
        rec = None if p is None else p._rec
        if rec is None:
            return fn(*args, **kwargs)
        ev = rec.begin(name, "op", _device_of(args), args)
        try:
            return fn(*args, **kwargs)
        finally:
            rec.end(ev)

    return run


def _recording_kernel(name: str, device: str, k: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        p = _active
        rec = None if p is None else p._rec
        if rec is None:
            return k(*args, **kwargs)
        ev = rec.begin(name, "kernel", device, args)
        try:
            return k(*args, **kwargs)
        finally:
            rec.end(ev)

    return run


def _recording_apply(apply: Callable[..., Any]) -> Callable[..., Any]:
    def run(node: Any, grads: Any) -> Any:
        rec = _active._rec if _active is not None else None
        if rec is None:
            return apply(node, grads)
        ev = rec.begin(node.name(), "backward", _device_of(tuple(grads)), tuple(grads))
        try:
            return apply(node, grads)
        finally:
            rec.end(ev)

    return run


def _recording_accumulate(acc: Callable[..., Any]) -> Callable[..., Any]:
    def run(node: Any, g: Any, *args: Any) -> Any:
        rec = _active._rec if _active is not None else None
        if rec is None:
            return acc(node, g, *args)
        ev = rec.begin("AccumulateGrad", "backward", _device_of((g,)), (g,))
        try:
            return acc(node, g, *args)
        finally:
            rec.end(ev)

    return run


def _recording_method(what: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _active._rec if _active is not None else None
        if rec is None:
            return method(self, *args, **kwargs)
        name = f"Optimizer.{what}#{type(self).__name__}.{what}"
        cur = rec.current()
        if cur is not None and cur[_NAME] == name:  # step -> _run_step: one row
            return method(self, *args, **kwargs)
        ev = rec.begin(name, "optimizer", "", ())
        try:
            return method(self, *args, **kwargs)
        finally:
            rec.end(ev)

    return run


class _Swaps:
    """Undoable replacements: each entry puts one original back."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setitem(self, d: dict[str, Any], key: str, new: Any) -> None:
        old = d[key]
        d[key] = new

        def undo() -> None:
            if d.get(key) is new:  # a table rebuilt meanwhile keeps its new kernel
                d[key] = old

        self._undo.append(undo)

    def setattr(self, obj: Any, name: str, new: Any) -> None:
        had = name in vars(obj)
        old = vars(obj).get(name)
        setattr(obj, name, new)

        def undo() -> None:
            if had:
                setattr(obj, name, old)
            else:
                delattr(obj, name)

        self._undo.append(undo)

    def cell(self, c: Any, new: Any) -> None:
        old = c.cell_contents
        c.cell_contents = new

        def undo() -> None:
            c.cell_contents = old

        self._undo.append(undo)

    def undo_all(self) -> None:
        while self._undo:
            self._undo.pop()()


def _install(swaps: _Swaps) -> dict[int, tuple[Callable[..., Any], Callable[..., Any]]]:
    """Swap recording versions in; returns {id(recording kernel): (it, original)}."""
    from .autograd import engine, tape
    from .device import Device
    from .dispatch.registry import registry

    # kernels: every table a device reads (the registry's shared ones, and a
    # device's own copy when its backend limits some ops' dtypes)
    wrapped: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}
    tables: dict[int, tuple[str, dict[str, Any]]] = {}
    for dev_type, table in registry.tables.items():
        tables[id(table)] = (dev_type, table)
    for dev in list(Device._interned.values()):
        if dev.kernels:
            tables.setdefault(id(dev.kernels), (dev.type, dev.kernels))
    for dev_type, table in tables.values():
        for op, k in list(table.items()):
            w = _recording_kernel(f"{dev_type}::{op}", dev_type, k)
            wrapped[id(w)] = (w, k)
            swaps.setitem(table, op, w)

    # front-ends: the function each @differentiable / @inplace wrapper calls
    names = set()
    for op in tape.FRONTENDS:
        raw = op.raw  # type: ignore[attr-defined]
        code = op.__code__
        # an op's row is named by its backward rule's name ("where" for
        # ``_where``); an in-place op's by its own ("add_")
        if "name" in code.co_freevars:
            name = op.__closure__[code.co_freevars.index("name")].cell_contents
        else:
            name = op.__globals__.get("name") if op.__globals__ is not vars(tape) else None
        if not isinstance(name, str):
            name = op.__name__
        rec = _recording_op(f"rtxcore::{name}", raw)
        names.update((name, op.__name__))
        if "fn" in code.co_freevars:
            swaps.cell(op.__closure__[code.co_freevars.index("fn")], rec)
        elif op.__globals__.get("fn") is raw and op.__globals__ is not vars(tape):
            swaps.setitem(op.__globals__, "fn", rec)  # a generated wrapper's own namespace

    # composites of nn.functional, through the module (layers call F.<name>)
    import sys

    F = sys.modules.get("rtxcore.nn.functional")
    if F is not None:
        for name in getattr(F, "__all__", ()):
            fn = getattr(F, name, None)
            if (isinstance(fn, types.FunctionType) and fn.__module__.startswith("rtxcore.nn")
                    and name not in names and not hasattr(fn, "raw")):
                swaps.setattr(F, name, functools.wraps(fn)(_recording_op(f"rtxcore::{name}", fn)))

    # backward: the engine runs each node's rule through _apply
    swaps.setattr(engine, "_apply", _recording_apply(engine._apply))
    swaps.setattr(engine, "_accumulate_leaf", _recording_accumulate(engine._accumulate_leaf))

    # optimizers: step and zero_grad of the base class and of every subclass
    # that defines its own; and the base's _run_step, which every step runs
    # through, for a step wrapped per instance before the profile (an LR
    # scheduler keeps the original step function)
    optim = sys.modules.get("rtxcore.optim.optimizer")
    if optim is not None:
        seen = [optim.Optimizer]
        i = 0
        while i < len(seen):
            cls = seen[i]
            i += 1
            seen.extend(c for c in cls.__subclasses__() if c not in seen)
            for what, attr in (("step", "step"), ("zero_grad", "zero_grad"), ("step", "_run_step")):
                m = vars(cls).get(attr)
                if isinstance(m, types.FunctionType):
                    swaps.setattr(cls, attr, _recording_method(what, m))
    return wrapped


def _restore_leftovers(wrapped: dict[int, tuple[Callable[..., Any], Callable[..., Any]]]) -> None:
    """A device bound during the profile copied recording kernels into its own
    table: give it the originals too."""
    from .device import Device

    for dev in list(Device._interned.values()):
        table = dev.kernels
        for op, k in list(table.items()):
            pair = wrapped.get(id(k))
            if pair is not None and pair[0] is k:
                table[op] = pair[1]


# -- the public API ---------------------------------------------------------------------


class profile:
    """Record the ops, kernels, backward nodes and optimizer steps run inside
    ``with profile() as prof:``; then ``prof.key_averages().table()``,
    ``prof.events()`` and ``prof.export_chrome_trace(path)``."""

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Any = None, on_trace_ready: Callable[..., Any] | None = None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False) -> None:
        if schedule is not None:
            raise NotImplementedError("profile(): schedule= is not supported; profile the "
                                      "steps you want inside the with-block")
        acts = set(supported_activities() if activities is None else activities)
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile(): activities must hold ProfilerActivity values, "
                                f"got {a!r}")
        self.activities = acts
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)  # accepted, not recorded
        self.with_stack = bool(with_stack)  # accepted, not recorded
        self.with_flops = bool(with_flops)
        self.with_modules = bool(with_modules)
        self._rec: _Recorder | None = None
        self._events: list[FunctionEvent] = []
        self._swaps: _Swaps | None = None
        self._wrapped: dict[int, tuple[Callable[..., Any], Callable[..., Any]]] = {}
        self._timed: list[Any] = []  # backends timing kernels on their devices
        self._t0 = 0
        self._t1 = 0

    # -- starting and stopping --

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        global _active
        with _start_lock:
            if _active is not None:
                raise RuntimeError("profile(): another profile is already running; "
                                   "profiles can't be nested")
            from .dispatch.registry import registry

            registry.build_all()  # (tables build lazily; a profile wraps every one)
            self._rec = _Recorder(self.record_shapes)
            self._events = []
            swaps = _Swaps()
            try:
                self._wrapped = _install(swaps)
            except BaseException:
                swaps.undo_all()
                raise
            self._swaps = swaps
            self._timed = []
            if self.activities - {ProfilerActivity.CPU}:
                for entry in list(registry.backends.values()):
                    try:
                        if entry.backend.profiling_start(_current_tag):
                            self._timed.append(entry.backend)
                    except Exception:  # a backend that can't time just gives host times
                        continue
            self._t0 = _clock()
            _active = self

    def stop(self) -> None:
        global _active
        if _active is not self:
            return
        self._t1 = _clock()
        timings: list[tuple[Any, str, int, int]] = []
        try:
            for b in self._timed:
                timings.extend(b.profiling_stop())
        finally:
            _active = None
            self._timed = []
            if self._swaps is not None:
                self._swaps.undo_all()
                self._swaps = None
            _restore_leftovers(self._wrapped)
            self._wrapped = {}
        rec = self._rec
        self._rec = None
        self._finish(rec.events if rec is not None else [], timings)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _finish(self, raw: list[list[Any]], timings: list[tuple[Any, str, int, int]]) -> None:
        """Build the FunctionEvents from the recorded lists, with device times."""
        events: list[FunctionEvent] = []
        made: dict[int, FunctionEvent] = {}  # id(recorded list) -> its event
        for i, r in enumerate(raw):
            p = r[_PARENT]
            dev = r[_DEV]
            ev = FunctionEvent(r[_NAME], r[_KIND], dev if type(dev) is str else str(dev),
                               r[_SHAPES], None if p is None else made[id(p)], r[_TID])
            ev.start_ns = r[_START]
            # (an event still open when the profile stopped, on another thread, ends there)
            ev.end_ns = r[_END] or self._t1
            ev.children_ns = r[_CHILDREN]
            ev.id = i
            made[id(r)] = ev
            events.append(ev)
        self._events = events
        for tag, kname, start, end in timings:
            tag = made.get(id(tag)) if isinstance(tag, list) else None
            if tag is not None:
                tag.device_ns += max(0, end - start)
                if tag.device_spans is None:
                    tag.device_spans = []
                tag.device_spans.append((kname, start, end))
        # device totals: children are recorded after their parents
        for ev in events:
            ev.device_total_ns = ev.device_ns
        for ev in reversed(events):
            if ev.parent is not None:
                ev.parent.device_total_ns += ev.device_total_ns

    def step(self) -> None:
        """Accepted for PyTorch compatibility (no schedule to advance)."""

    # -- results --

    def _device_label(self) -> str:
        kinds = {ev.device.split(":")[0] for ev in self._events if ev.device_ns}
        if not kinds:
            return ""
        return kinds.pop().upper() if len(kinds) == 1 else "Device"

    def events(self) -> EventList:
        """Every recorded event, in the order they started."""
        self._check_done("events")
        return EventList(self._events, self._device_label())

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        """One row per event name (and per list of input shapes when
        ``group_by_input_shape``, which needs ``record_shapes=True``), in order of
        first appearance. ``group_by_stack_n`` is accepted and ignored."""
        self._check_done("key_averages")
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(): group_by_input_shape=True needs the profile "
                               "to be made with record_shapes=True")
        rows: dict[Any, FunctionEventAvg] = {}
        for ev in self._events:
            key: Any = ev.name
            if group_by_input_shape:
                key = (ev.name, repr(ev.input_shapes))
            row = rows.get(key)
            if row is None:
                row = rows[key] = FunctionEventAvg(
                    ev.name, ev.input_shapes if group_by_input_shape else None)
            row.add(ev)
        return EventList(rows.values(), self._device_label())

    def table(self, sort_by: str | None = None, row_limit: int = 100, **kwargs: Any) -> str:
        """``self.key_averages().table(...)``."""
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the events as a Chrome trace (JSON, "X" complete events, times in
        microseconds); open it in chrome://tracing or https://ui.perfetto.dev."""
        self._check_done("export_chrome_trace")
        with open(path, "w") as f:
            json.dump(self._trace(), f)

    def _trace(self) -> dict[str, Any]:
        pid = os.getpid()
        t0 = self._t0
        cat = {"op": "cpu_op", "kernel": "cpu_op", "backward": "cpu_op",
               "optimizer": "user_annotation", "user": "user_annotation"}
        out: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "host"}},
        ]
        device_pids: dict[str, int] = {}
        for ev in self._events:
            args: dict[str, Any] = {"device": ev.device} if ev.device else {}
            if ev.input_shapes is not None:
                args["Input Dims"] = ev.input_shapes
            out.append({"ph": "X", "cat": cat.get(ev.kind, "cpu_op"), "name": ev.name,
                        "pid": pid, "tid": ev.thread, "ts": (ev.start_ns - t0) / 1e3,
                        "dur": (ev.end_ns - ev.start_ns) / 1e3, "args": args})
            for kname, start, end in ev.device_spans or ():
                dpid = device_pids.get(ev.device)
                if dpid is None:
                    dpid = device_pids[ev.device] = pid + 1 + len(device_pids)
                    out.append({"ph": "M", "name": "process_name", "pid": dpid, "tid": 0,
                                "args": {"name": ev.device}})
                out.append({"ph": "X", "cat": "kernel", "name": kname, "pid": dpid, "tid": 0,
                            "ts": (start - t0) / 1e3, "dur": (end - start) / 1e3,
                            "args": {"op": ev.name, "device": ev.device}})
        return {"traceEvents": out, "displayTimeUnit": "ms"}

    def _check_done(self, what: str) -> None:
        if _active is self:
            raise RuntimeError(f"profile.{what}(): the profile is still running; call it "
                               "after the with-block")


class record_function:
    """A named range of your own in the profile: ``with record_function("data"):``
    or ``@record_function("train_step")``. Does nothing when no profile runs."""

    def __init__(self, name: str, args: str | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"record_function(): name must be a str, got {type(name).__name__}")
        self.name = name
        self.args = args
        self._ev: list[Any] | None = None
        self._rec: _Recorder | None = None

    def __enter__(self) -> "record_function":
        p = _active
        rec = None if p is None else p._rec
        if rec is not None:
            self._rec = rec
            self._ev = rec.begin(self.name, "user", "", ())
        return self

    def __exit__(self, *exc: Any) -> None:
        ev, rec = self._ev, self._rec
        if ev is not None and rec is not None:
            rec.end(ev)
        self._ev = self._rec = None

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = self.name

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with record_function(name):
                return fn(*args, **kwargs)

        return run


# -- the table ---------------------------------------------------------------------------


def _fmt_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"


def _table(rows: list[Any], sort_by: str | None, row_limit: int, name_width: int,
           shapes_width: int, header: str | None, device_label: str,
           top_level_only: bool) -> str:
    if sort_by is not None and sort_by not in _SORT_KEYS:
        raise ValueError(f"table(): sort_by={sort_by!r} is not a column; use one of "
                         + ", ".join(_SORT_KEYS))
    if top_level_only:
        rows = [r for r in rows if getattr(r, "parent", None) is None]
    self_cpu_total = sum(r.self_cpu_time_total for r in rows)
    self_dev_total = sum(r.self_device_time_total for r in rows)
    if sort_by is not None:
        rows = sorted(rows, key=lambda r: getattr(r, sort_by), reverse=True)
    if row_limit > 0:
        rows = rows[:row_limit]
    shapes = any(r.input_shapes is not None for r in rows)
    dev = bool(device_label)
    name_w = min(max([len("Name")] + [len(r.key) for r in rows]) + 2, max(name_width, 8))
    cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if dev:
        cols += [f"Self {device_label}", f"Self {device_label} %", f"{device_label} total",
                 f"{device_label} time avg"]
    cols.append("# of Calls")
    widths = [name_w] + [max(12, len(c) + 2) for c in cols]
    heads = ["Name"] + cols
    if shapes:
        widths.append(min(shapes_width, max([len("Input Shapes")] +
                                            [len(str(r.input_shapes)) for r in rows])))
        heads.append("Input Shapes")
    sep = "  ".join("-" * n for n in widths)

    def line(cells: list[str]) -> str:
        parts = [cells[0][:name_w - 3] + "..." if len(cells[0]) > name_w else cells[0]]
        parts[0] = parts[0].ljust(name_w)
        for c, n in zip(cells[1:], widths[1:]):
            parts.append((c[:n - 3] + "..." if len(c) > n else c).rjust(n))
        return "  ".join(parts)

    out = []
    if header:
        out.append("-" * len(sep))
        out.append(header)
    out += [sep, line(heads), sep]
    for r in rows:
        cells = [r.key, _fmt_pct(r.self_cpu_time_total, self_cpu_total),
                 _fmt_time(r.self_cpu_time_total), _fmt_pct(r.cpu_time_total, self_cpu_total),
                 _fmt_time(r.cpu_time_total), _fmt_time(r.cpu_time_total / max(r.count, 1))]
        if dev:
            cells += [_fmt_time(r.self_device_time_total),
                      _fmt_pct(r.self_device_time_total, self_dev_total),
                      _fmt_time(r.device_time_total),
                      _fmt_time(r.device_time_total / max(r.count, 1))]
        cells.append(str(r.count))
        if shapes:
            cells.append(str(r.input_shapes))
        out.append(line(cells))
    out.append(sep)
    out.append(f"Self CPU time total: {_fmt_time(self_cpu_total)}")
    if dev:
        out.append(f"Self {device_label} time total: {_fmt_time(self_dev_total)}")
    return "\n".join(out) + "\n"
