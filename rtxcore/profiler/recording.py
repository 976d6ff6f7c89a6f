"""Recording while a profile runs: the events of each thread as they open and
close, the recording versions of kernels, op front-ends, the backward engine's
node runner and optimizer steps, and swapping them in for the profile and the
originals back after it.
"""

from __future__ import annotations

import functools
import threading
import time
import types
from typing import Any, Callable

from ..tensor import Tensor

_clock = time.perf_counter_ns
_get_ident = threading.get_ident


_active: Any = None  # the profile recording now, one at a time (set by profile.start/stop)
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


# While open, an event is a plain list (cheapest to make; its parent the open
# parent's list, whose children's time it adds to); FunctionEvents are built
# from them when the profile stops. A closed event is put in ``events`` as a
# tuple of plain values (its parent by index, shapes as tuples, the device as a
# str), which the garbage collector stops tracking: hundreds of thousands of
# lists made every full collection (each a few ms) slower, and the collections
# landed in whatever ran, as its self time (an AdamW step shown at 10x its time).
_NAME, _KIND, _DEV, _SHAPES, _PARENT, _TID, _START, _END, _CHILDREN, _INDEX = range(10)


def _position(events: list[Any], ev: list[Any]) -> int:
    for i in range(len(events) - 1, -1, -1):
        if events[i] is ev:
            return i
    raise AssertionError("a recorded event is missing from its list")  # pragma: no cover


def _frozen(shapes: Any) -> Any:
    return None if shapes is None else tuple(
        tuple(tuple(d) if isinstance(d, list) else d for d in s) for s in shapes)


class _Recorder:
    """The events of one profile, and each thread's currently open ones."""

    def __init__(self, record_shapes: bool) -> None:
        self.record_shapes = record_shapes
        self.events: list[Any] = []  # open events' lists, closed events' tuples
        self.open: dict[int, list[list[Any]]] = {}  # thread id -> its open events
        self._names: dict[Any, str] = {}  # device -> its name

    def begin(self, name: str, kind: str, device: Any, args: tuple[Any, ...]) -> list[Any]:
        tid = _get_ident()
        st = self.open.get(tid)
        if st is None:
            st = self.open[tid] = []
        ev = [name, kind, device, [_shape_of(a) for a in args] if self.record_shapes else None,
              st[-1] if st else None, tid, 0, 0, 0, 0]
        st.append(ev)
        events = self.events
        events.append(ev)
        ev[_INDEX] = i = len(events) - 1
        if events[i] is not ev:  # (another thread appended in between: find it)
            ev[_INDEX] = _position(events, ev)
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
        dev = ev[_DEV]
        if type(dev) is not str:
            name = self._names.get(dev)
            if name is None:
                name = self._names[dev] = str(dev)
            dev = name
        self.events[ev[_INDEX]] = (ev[_NAME], ev[_KIND], dev, _frozen(ev[_SHAPES]),
                                   None if p is None else p[_INDEX], ev[_TID], ev[_START], t,
                                   ev[_CHILDREN])

    def current(self) -> list[Any] | None:
        st = self.open.get(_get_ident())
        return st[-1] if st else None


def _current_tag() -> Any:
    """The innermost open event on this thread (what a backend tags a kernel with)."""
    p = _active
    return None if p is None or p._rec is None else p._rec.current()


# -- recording versions of what runs ------------------------------------------------------


def _recording_op(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` recorded as an op front-end, on the device of its first tensor."""
    return _recording(name, "op", None, fn)


def _recording_kernel(name: str, device: str, k: Callable[..., Any]) -> Callable[..., Any]:
    """Kernel ``k`` of ``device``, recorded."""
    return _recording(name, "kernel", device, k)


def _recording(name: str, kind: str, device: str | None,
               fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        p = _active
        rec = None if p is None else p._rec
        if rec is None:
            return fn(*args, **kwargs)
        ev = rec.begin(name, kind, _device_of(args) if device is None else device, args)
        try:
            return fn(*args, **kwargs)
        finally:
            rec.end(ev)

    return run


def _recording_apply(apply: Callable[..., Any]) -> Callable[..., Any]:
    def run(node: Any, grads: Any, *args: Any) -> Any:
        rec = _active._rec if _active is not None else None
        if rec is None:
            return apply(node, grads, *args)
        ev = rec.begin(node.name(), "backward", _device_of(tuple(grads)), tuple(grads))
        try:
            return apply(node, grads, *args)
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

    def slot(self, obj: Any, name: str, new: Any) -> None:
        """An attribute of a slotted object (a Device's), always present."""
        old = getattr(obj, name)
        setattr(obj, name, new)

        def undo() -> None:
            if getattr(obj, name) is new:
                setattr(obj, name, old)

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
    from ..autograd import engine, tape
    from ..device import Device
    from ..dispatch.registry import registry

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
    # a backend's functional kernels bypass the table: while profiling, every op
    # runs its (recorded) destination form
    for dev in list(Device._interned.values()):
        if dev.functional:
            swaps.slot(dev, "functional", {})

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

    # and through each family module's own namespace, so that one function
    # calling another (relu6 -> hardtanh, adaptive_avg_pool2d -> avg_pool2d)
    # records the inner call as its own row too
    F = sys.modules.get("rtxcore.nn.functional")
    if F is not None:
        families = [m for n, m in list(sys.modules.items())
                    if n.startswith("rtxcore.nn.functional.") and m is not None]
        for name in getattr(F, "__all__", ()):
            fn = getattr(F, name, None)
            if (isinstance(fn, types.FunctionType) and fn.__module__.startswith("rtxcore.nn")
                    and name not in names and not hasattr(fn, "raw")):
                rec = functools.wraps(fn)(_recording_op(f"rtxcore::{name}", fn))
                swaps.setattr(F, name, rec)
                for module in families:
                    if vars(module).get(name) is fn:
                        swaps.setattr(module, name, rec)

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
    from ..device import Device

    for dev in list(Device._interned.values()):
        table = dev.kernels
        for op, k in list(table.items()):
            pair = wrapped.get(id(k))
            if pair is not None and pair[0] is k:
                table[op] = pair[1]
