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
from typing import Any, Callable, Iterable

from . import recording as _rec
from .events import EventList, FunctionEvent, FunctionEventAvg
from .recording import (_CHILDREN, _DEV, _END, _INDEX, _KIND, _NAME, _PARENT, _SHAPES, _START, _TID,
                        _clock, _current_tag, _install, _Recorder, _restore_leftovers, _start_lock,
                        _Swaps)

__all__ = ["profile", "record_function", "ProfilerActivity", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class ProfilerActivity(enum.Enum):
    """What to record: host ops (``CPU``) and kernel times on devices that measure
    them (``OPENCL``; ``CUDA`` and ``XPU`` are taken as any device)."""

    CPU = "cpu"
    OPENCL = "opencl"
    CUDA = "cuda"
    XPU = "xpu"


def supported_activities() -> set[ProfilerActivity]:
    return set(ProfilerActivity)


# -- the public API ---------------------------------------------------------------------


def _listed(d: Any) -> Any:
    """A recorded shape's entry as recorded: a tuple (a list's shape) back to a list."""
    return list(d) if isinstance(d, tuple) else d


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
        with _start_lock:
            if _rec._active is not None:
                raise RuntimeError("profile(): another profile is already running; "
                                   "profiles can't be nested")
            from ..dispatch.registry import registry

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
            _rec._active = self

    def stop(self) -> None:
        if _rec._active is not self:
            return
        self._t1 = _clock()
        timings: list[tuple[Any, str, int, int]] = []
        try:
            for b in self._timed:
                timings.extend(b.profiling_stop())
        finally:
            _rec._active = None
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

    def _finish(self, raw: list[Any], timings: list[tuple[Any, str, int, int]]) -> None:
        """Build the FunctionEvents from the recorded events (closed ones' tuples,
        open ones' lists), with device times."""
        events: list[FunctionEvent] = []
        for i, r in enumerate(raw):
            p = r[_PARENT]
            if isinstance(p, list):  # (an open event's parent: its list)
                p = p[_INDEX]
            dev = r[_DEV]
            shapes = r[_SHAPES]
            ev = FunctionEvent(r[_NAME], r[_KIND], dev if type(dev) is str else str(dev),
                               None if shapes is None else [list(map(_listed, s)) for s in shapes],
                               None if p is None else events[p], r[_TID])
            ev.start_ns = r[_START]
            # (an event still open when the profile stopped, on another thread, ends there)
            ev.end_ns = r[_END] or self._t1
            ev.children_ns = r[_CHILDREN]
            ev.id = i
            events.append(ev)
        self._events = events
        for tag, kname, start, end in timings:
            # (a kernel's tag: the list its event was while open)
            tag = events[tag[_INDEX]] if isinstance(tag, list) else None
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
        if _rec._active is self:
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
        p = _rec._active
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
