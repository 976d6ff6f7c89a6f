"""Tracing at the dispatch layer: run a function once, recording every kernel it
calls (and every native view it makes).

Every op of the core ends in a device's kernels, so what is recorded is exactly
what ran: the forward, the autograd engine's backward, an optimizer's in-place
updates. Kernels see native views; the tracer knows which buffer each view
shows from the views it watched being made and, for tensors that existed
before the trace, from one scan of the live tensors at its start.

Tracing is per thread. While any thread traces, each ready device's kernel
table holds *routing* kernels (and its ``view`` a routing function): each asks
the calling thread's tracer, if it has one, to record the call, and otherwise
calls the backend's kernel. Other threads run eagerly meanwhile (at the cost of
one more call per kernel), and the last trace to finish puts the backend's own
table back, whatever happened (an exception included). The default random
generator's ``take`` and the optimizers' ``step`` are watched the same way.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

from .. import dtype as D
from .._tracing import _tls, is_tracing  # noqa: F401  (is_tracing: rtxcore.jit.trace.is_tracing)
from ..dispatch.types import contiguous_strides
from ..tensor import Tensor
from .graph import Graph, Node, Ref, rename_outputs

# kernels that write more than their first argument, and those that read what
# they write (accumulate into out) -- the rest write arg 0 and don't read it
OUTPUTS = {"max_pool2d_tiled": 2, "sort": 2, "layer_norm": 3, "batch_norm": 4,
           "batch_norm_backward": 2, "conv2d": 2, "lstm_cell": 3,
           "lstm_cell_backward": 2, "gru_cell": 2, "gru_cell_backward": 3}
READS_OUT = {"scatter_add", "index_put"}
# the core's functions whose host reads validate indices (bounds; whether any is
# negative): allowed while tracing; the graph keeps what they found
CHECKS = {"_index_bounds", "_prepare_advanced", "_check_index", "check_range"}


def _in_check(f: Any, depth: int = 6) -> bool:
    while f is not None and depth:
        if f.f_code.co_name in CHECKS:
            return True
        f, depth = f.f_back, depth - 1
    return False


class TraceError(RuntimeError):
    """The traced function did something a graph can't hold (a host read of a
    tensor's value, an unknown kernel argument)."""


# -- routing: installed while any thread traces -------------------------------------

_lock = threading.Lock()
_traces = 0  # traces running now, in all threads
_routed: dict[Any, tuple[dict[str, Any], dict[str, Any], Any, Any]] = {}
# ^ device -> (routed table, backend table, routed view, backend view)
_patched: list[tuple[Any, str, Any]] = []  # (owner, attribute, original) to put back


def _route_kernel(op: str, k: Callable[..., Any]) -> Callable[..., Any]:
    def routed(*args: Any) -> Any:
        tr = _tls.tracer
        if tr is None:
            return k(*args)
        return tr.call(op, k, args)

    routed._rtx_raw = k  # type: ignore[attr-defined]
    return routed


def _route_view(v: Callable[..., Any]) -> Callable[..., Any]:
    def routed(buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
               dtype: D.DType) -> Any:
        h = v(buffer, shape, strides, offset, dtype)
        tr = _tls.tracer
        if tr is not None:
            tr.saw_view(h, buffer, shape, strides, offset, dtype)
        return h

    routed._rtx_raw = v  # type: ignore[attr-defined]
    return routed


def _route_method(cls: type, name: str, hook: str) -> None:
    """``cls.name`` calls ``tracer.<hook>(self, *args)`` first in a tracing thread."""
    orig = vars(cls)[name]
    if getattr(orig, "_rtx_routed", False):
        return

    def routed(self: Any, *a: Any, **kw: Any) -> Any:
        tr = _tls.tracer
        if tr is not None:
            getattr(tr, hook)(self, *a)
        return orig(self, *a, **kw)

    routed._rtx_routed = True  # type: ignore[attr-defined]
    routed.__wrapped__ = orig  # type: ignore[attr-defined]
    routed.__name__, routed.__doc__ = orig.__name__, orig.__doc__
    _patched.append((cls, name, orig))
    setattr(cls, name, routed)


def _install() -> None:
    """Route every ready device's kernels and views, the default generator's
    draws and every optimizer's ``step`` through the calling thread's tracer.
    (Called under ``_lock``; again by each trace: devices readied or optimizer
    classes defined since are routed too.)"""
    from ..device import Device
    from .. import random as R
    from ..optim.optimizer import Optimizer

    for dev in list(Device._interned.values()):
        if not dev._ready:
            continue
        cur = _routed.get(dev)
        if cur is not None and dev.kernels is cur[0] and dev.view is cur[2]:
            continue
        table, view = dev.kernels, dev.view
        routed = {op: _route_kernel(op, k) for op, k in table.items()}
        rview = _route_view(view)
        _routed[dev] = (routed, table, rview, view, dev.functional)
        dev.kernels, dev.view = routed, rview
        # a backend's functional kernels bypass the table: while anything traces,
        # every op goes through the (routed) destination forms instead
        dev.functional = {}
    _route_method(R.Generator, "take", "on_take")
    _watch_slot("_storage")
    _watch_slot("_h")
    _watch_grads()
    for cls in [Optimizer, *_subclasses(Optimizer)]:
        if "step" in vars(cls):
            _route_method(cls, "step", "on_step")


def _uninstall() -> None:
    """Put back what ``_install`` replaced (a table the registry rebuilt since
    is the registry's: left alone)."""
    for dev, (routed, table, rview, view, functional) in _routed.items():
        if dev.kernels is routed:
            dev.kernels = table
            dev.functional = functional
        if dev.view is rview:
            dev.view = view
    _routed.clear()
    for owner, name, orig in reversed(_patched):
        setattr(owner, name, orig)
    _patched.clear()


def _subclasses(cls: type) -> list[type]:
    out = []
    for c in cls.__subclasses__():
        out.append(c)
        out.extend(_subclasses(c))
    return out


def untraced(k: Any) -> Any:
    """The backend's own kernel (or view function) behind a routing one."""
    return getattr(k, "_rtx_raw", k)


def _user_line() -> str:
    """``file:line`` of the innermost frame outside rtxcore (the user's code)."""
    f = sys._getframe(1)
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(root + os.sep):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


# Tensors that existed before a trace reach its kernels as native views made
# earlier (``t._h``) and as buffers (``t._storage.buffer``). While any thread
# traces, Tensor's ``_storage`` and ``_h`` slots are read through properties
# that show the reading thread's tracer each tensor as it is used -- no scan of
# the heap (``gc.get_objects()`` holds references to objects other threads are
# still building, which breaks them), and other threads pay one Python call
# per read meanwhile.
_RAW_STORAGE = Tensor.__dict__["_storage"].__get__
_RAW_H = Tensor.__dict__["_h"].__get__


def _watch_slot(name: str) -> None:
    desc = Tensor.__dict__[name]
    if isinstance(desc, property):
        return
    get, put = desc.__get__, desc.__set__

    def fget(t: Tensor) -> Any:
        tr = _tls.tracer
        if tr is not None and id(t) not in tr.noted:
            tr.note(t)
        return get(t)

    _patched.append((Tensor, name, desc))
    setattr(Tensor, name, property(fget, put))


def _watch_grads() -> None:
    """While any thread traces, an assignment of a tensor's ``.grad`` (by the
    user, ``zero_grad`` or the autograd engine: all set ``Meta.grad``) is shown
    to the assigning thread's tracer: a replay must make the same assignment."""
    from ..autograd import engine
    from ..autograd.tape import Meta

    desc = Meta.__dict__["grad"]
    if isinstance(desc, property):
        return
    get, put = desc.__get__, desc.__set__
    store = engine._store.__code__  # the engine's: it assigns only where .grad is None

    def first(tr: Any, m: Any) -> None:
        # the .grad a Meta had as the trace first touched it, and whether that
        # was the engine (which assigns where it finds None, else adds)
        if id(m) not in tr.grad_before:
            try:
                tr.grad_before[id(m)] = (m, get(m))
            except AttributeError:  # (a Meta being made: no .grad yet)
                tr.grad_before[id(m)] = (m, None)
            if sys._getframe(2).f_code is store:
                tr.grad_by_engine.add(id(m))

    def fget(m: Any) -> Any:
        tr = _tls.tracer
        if tr is not None:
            first(tr, m)
        return get(m)

    def fset(m: Any, value: Any) -> None:
        tr = _tls.tracer
        if tr is not None:
            first(tr, m)
            tr.grad_sets[id(m)] = (m, value)
        put(m, value)

    _patched.append((Meta, "grad", desc))
    setattr(Meta, "grad", property(fget, fset))


class _Tracer:
    def __init__(self, args: tuple[Any, ...], names: dict[int, str]) -> None:
        self.g = Graph()
        self.views: dict[int, tuple[Any, Any, tuple[int, ...], tuple[int, ...], int, D.DType]] = {}
        self.bufs: dict[int, dict[str, Any]] = {}  # id(buffer) -> state
        self.view_nodes: dict[tuple[Any, ...], int] = {}
        self.keep: list[Any] = []  # what the maps key by id() stays alive
        self.externals: dict[int, Tensor] = {}  # input node id -> the tensor it reads
        self.input_bufs: dict[int, Any] = {}  # input node id -> its buffer
        self.names = names  # id(storage buffer) -> name (module parameters)
        self.arg_bufs: dict[int, int] = {}  # id(buffer) -> argument position
        self.known: dict[int, Tensor] = {}  # id(buffer) -> a tensor showing it
        self.extent: dict[int, int] = {}
        self.host_reads: list[str] = []
        self.problems: list[str] = []  # what the graph could not hold (besides host reads)
        self.rng: list[int] = []  # sizes taken from the default generator, not yet used
        self.step_hook: Callable[[Any], None] | None = None  # called as an optimizer steps
        self.grad_sets: dict[int, tuple[Any, Any]] = {}  # id(Meta) -> (Meta, last .grad set)
        self.grad_before: dict[int, Any] = {}  # id(Meta) -> (Meta, its .grad when first touched)
        self.grad_by_engine: set[int] = set()  # ids of the Metas the engine touched first
        self.noted: set[int] = set()  # ids of the tensors noted (kept alive in keep)
        self.finished = False
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                self.arg_bufs.setdefault(id(_RAW_STORAGE(a).buffer), i)
                self.note(a)

    def note(self, t: Tensor) -> None:
        """Learn tensor ``t``: how far into its buffer it reaches, its cached
        native view."""
        self.noted.add(id(t))
        self.keep.append(t)
        buf = _RAW_STORAGE(t).buffer
        k = id(buf)
        shape, strides, off = t._shape, t._strides, t._offset
        span = off + sum((n - 1) * s for n, s in zip(shape, strides)) + 1 if 0 not in shape else 0
        if span > self.extent.get(k, 0):
            self.extent[k] = span
        prev = self.known.get(k)
        if prev is None or (off == 0 and strides == contiguous_strides(shape)
                            and not (prev._offset == 0 and
                                     prev._strides == contiguous_strides(prev._shape)
                                     and prev.numel() >= t.numel())):
            self.known[k] = t
        h = _RAW_H(t)
        if h is not None and id(h) not in self.views:
            self.views[id(h)] = (h, buf, shape, strides, off if 0 not in shape else 0, t._dtype)
            self.keep.append(h)

    # -- values -----------------------------------------------------------------------

    def _value(self, shape: tuple[int, ...], dtype: D.DType, **extra: Any) -> int:
        vid = self.g.new_id()
        self.g.values[vid] = {"dtype": dtype.name, "shape": list(shape), **extra}
        return vid

    def _buffer(self, buf: Any, dtype: D.DType) -> dict[str, Any]:
        """The state of ``buf``; a buffer first seen here existed before the trace:
        an input (argument or external tensor). Its size is the furthest element
        any tensor or region of it reaches in the trace, known at its end
        (``finish``); until then its regions are view nodes."""
        st = self.bufs.get(id(buf))
        if st is not None:
            return st
        k = id(buf)
        vid = self._value((self.extent.get(k, 0),), dtype)
        if k in self.arg_bufs:
            attrs = {"kind": "arg", "index": self.arg_bufs[k]}
        else:
            name = self.names.get(k) or \
                f"ext{sum(1 for n in self.g.inputs if n.attrs['kind'] == 'external')}"
            attrs = {"kind": "external", "name": name}
        self.g.add(Node(vid, "input", [], attrs))
        self.input_bufs[vid] = buf
        self.keep.append(buf)
        st = self.bufs[k] = {"version": vid, "shape": (-1,), "dtype": dtype, "input": vid,
                             "versions": [vid]}
        return st

    def finish(self) -> None:
        """Fix each input buffer's size (the furthest element reached), bind it to
        a tensor showing it, and let regions that are a whole input version be
        that version (no view node)."""
        g = self.g
        self.finished = True
        rename: dict[int, int] = {}
        for k, st in self.bufs.items():
            vid = st.get("input")
            if vid is None:
                continue
            extent = self.extent.get(k, 0)
            t = self.known.get(k)
            if t is not None and t._offset == 0 and t._strides == contiguous_strides(t._shape) \
                    and t.numel() == extent:
                shape = list(t._shape)
            else:
                shape = [extent]
            for v in st["versions"]:
                g.values[v]["shape"] = list(shape)
            st["shape"] = tuple(shape)
            if t is not None:
                self.externals[vid] = t
            else:
                self.problems.append("a kernel reading memory that no tensor shows")
            whole = contiguous_strides(tuple(shape))
            versions = set(st["versions"])
            for (ver, vshape, vstrides, voff, vdt), view in self.view_nodes.items():
                if ver in versions and list(vshape) == shape and vstrides == whole \
                        and voff == 0 and vdt == st["dtype"].name:
                    rename[view] = ver
        if not rename:
            return

        def sub(a: Any) -> Any:
            if isinstance(a, Ref):
                return Ref(rename.get(a.id, a.id))
            if isinstance(a, (tuple, list)):
                return type(a)(sub(x) for x in a)
            return a

        nodes = []
        for n in g.nodes:
            if n.op == "view" and n.id in rename:
                del g.values[n.id]
                continue
            n.args = [sub(a) for a in n.args]
            n.writes = [(rename.get(r, r), new) for r, new in n.writes]
            nodes.append(n)
        g.nodes = nodes
        g.outputs = rename_outputs(g.outputs, rename)
        self.view_nodes = {k: v for k, v in self.view_nodes.items() if v not in rename}

    def _region(self, h: Any) -> tuple[dict[str, Any], int]:
        """The buffer state of native view ``h`` and the value id showing exactly
        that region of the buffer's current version (the version itself when the
        region is the whole buffer)."""
        info = self.views.get(id(h))
        if info is None or info[0] is not h:
            raise TraceError(f"a kernel got a {type(h).__name__} the trace did not see being "
                             f"made (at {_user_line()})")  # a bug of the tracer's: loud
        _, buf, shape, strides, off, dtype = info
        st = self._buffer(buf, dtype)
        ver = st["version"]
        if "input" in st and not self.finished:  # its size is not known yet
            if 0 not in shape:
                span = off + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
                if span > self.extent.get(id(buf), 0):
                    self.extent[id(buf)] = span
        elif shape == tuple(st["shape"]) and off == 0 and strides == contiguous_strides(shape) \
                and dtype is st["dtype"]:
            return st, ver
        key = (ver, shape, strides, off, dtype.name)
        vid = self.view_nodes.get(key)
        if vid is None:
            vid = self._value(shape, dtype)
            self.g.values[vid].update(strides=list(strides), offset=off, of=ver)
            self.g.add(Node(vid, "view", [Ref(ver)], {"strides": list(strides), "offset": off}))
            self.view_nodes[key] = vid
        return st, vid

    def _arg(self, a: Any) -> Any:
        if id(a) in self.views:
            return Ref(self._region(a)[1])
        if a is None or isinstance(a, (bool, int, float, str, D.DType)):
            return a
        if isinstance(a, (tuple, list)):
            return tuple(self._arg(x) for x in a) if isinstance(a, tuple) else [self._arg(x) for x in a]
        import numpy as np

        if isinstance(a, np.generic):
            return a.item()
        self.problems.append(f"a kernel argument of type {type(a).__name__} at {_user_line()}")
        return None

    # -- what the routing calls ----------------------------------------------------------

    def call(self, op: str, k: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Run kernel ``k`` (``op``) on ``args`` and record it."""
        if op == "empty":
            buf, h = k(*args)
            shape, dtype = tuple(args[0]), args[1]
            vid = self._value(shape, dtype)
            self.g.add(Node(vid, "alloc", [], {}))
            self.bufs[id(buf)] = {"version": vid, "shape": shape, "dtype": dtype}
            self.views[id(h)] = (h, buf, shape, contiguous_strides(shape), 0, dtype)
            self.keep += [buf, h]
            return buf, h
        if op == "from_host":
            import numpy as np

            buf, h = k(*args)
            arr, dtype = np.array(args[0], copy=True), args[1]
            shape = tuple(arr.shape)
            vid = self._value(shape, dtype)
            name = f"c{len(self.g.constants)}"
            self.g.constants[name] = arr
            self.g.add(Node(vid, "const", [], {"name": name}))
            self.bufs[id(buf)] = {"version": vid, "shape": shape, "dtype": dtype}
            self.views[id(h)] = (h, buf, shape, contiguous_strides(shape), 0, dtype)
            self.keep += [buf, h]
            return buf, h
        if op == "to_host":
            # a bounds check reads indices to raise on bad ones, not to decide
            # what runs: the graph keeps the check's outcome (it passed)
            if not _in_check(sys._getframe(1)):
                self.host_reads.append(_user_line())
            return k(*args)
        n_out = OUTPUTS.get(op, 1)
        outs, rest = args[:n_out], args[n_out:]
        regions = [self._region(o) for o in outs]
        read = [Ref(r) for _, r in regions] if op in READS_OUT else []
        node_args = read + [self._arg(a) for a in rest]
        k(*args)
        writes = []
        for st, region in regions:
            new = self._value(st["shape"], st["dtype"])
            writes.append((region, new))
            st["version"] = new
            if "input" in st:
                st["versions"].append(new)
        attrs = {}
        if op in ("uniform", "normal") and self.rng:
            attrs["rng"] = self.rng.pop(0)  # numbers drawn anew on each replay
        self.g.add(Node(writes[0][1] if writes else -1, op, node_args, attrs, writes))

    def saw_view(self, h: Any, buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...],
                 offset: int, dtype: D.DType) -> None:
        self.views[id(h)] = (h, buffer, tuple(shape), tuple(strides), offset, dtype)
        self.keep.append(h)

    def on_take(self, gen: Any, n: int, *rest: Any) -> None:
        from .. import random as R

        if gen is R.default_generator:
            self.rng.append(n)
        else:
            self.problems.append(f"a random op with its own generator at {_user_line()}")

    def on_step(self, opt: Any, *rest: Any) -> None:
        if self.step_hook is not None:
            self.step_hook(opt)

    # -- the result ---------------------------------------------------------------------

    def output(self, o: Any) -> Any:
        """The function's result as JSON: tensors as the value ids of their regions."""
        if isinstance(o, Tensor):
            if o._h is None or id(o._h) not in self.views:
                from ..ops.core import view_of

                view_of(o)
            return {"view": self._region(o._h)[1]}
        if isinstance(o, (tuple, list)):
            return {"seq": [self.output(x) for x in o], "type": type(o).__name__}
        if isinstance(o, dict):
            return {"map": [[k, self.output(v)] for k, v in o.items()]}
        if o is None or isinstance(o, (bool, int, float, str)):
            return {"lit": o}
        raise TraceError(f"can't return a {type(o).__name__} from a traced function")


def run_traced(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               names: dict[int, str], step_hook: Callable[[Any], None] | None = None
               ) -> tuple[Graph, Any, _Tracer]:
    """Run ``fn(*args, **kwargs)`` recording every kernel the calling thread
    runs; returns (graph, result, tracer). ``step_hook(optimizer)`` is called as
    each optimizer's ``step`` begins."""
    global _traces

    if _tls.tracer is not None:
        raise TraceError("rtxcore.jit.trace can't be nested")
    tr = _Tracer(args, names)
    tr.step_hook = step_hook
    with _lock:
        try:
            _install()
        except BaseException:
            if _traces == 0:
                _uninstall()
            raise
        _traces += 1
    try:
        _tls.tracer = tr
        result = fn(*args, **kwargs)
        tr.g.outputs = tr.output(result)
        tr.finish()
    finally:
        _tls.tracer = None
        with _lock:
            _traces -= 1
            if _traces == 0:
                _uninstall()
    return tr.g, result, tr
