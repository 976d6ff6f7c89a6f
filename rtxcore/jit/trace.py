"""Tracing at the dispatch layer: run a function once with every device's kernels
(and its ``view`` and allocation functions) swapped for recording versions.

Every op of the core ends in these kernels, so what is recorded is exactly what
ran: the forward, the autograd engine's backward, an optimizer's in-place
updates. Kernels see native views; the tracer knows which buffer each view
shows from the views it watched being made and, for tensors that existed
before the trace, from one scan of the live tensors at its start.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any, Callable

from .. import dtype as D
from ..dispatch.types import contiguous_strides
from ..tensor import Tensor
from .graph import Graph, Node, Ref

# kernels that write more than their first argument, and those that read what
# they write (accumulate into out) -- the rest write arg 0 and don't read it
OUTPUTS = {"max_pool2d_tiled": 2, "sort": 2, "layer_norm": 3, "conv2d": 2}
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


_active = threading.local()


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


class _Tracer:
    def __init__(self, args: tuple[Any, ...], names: dict[int, str]) -> None:
        self.g = Graph()
        self.views: dict[int, tuple[Any, Any, tuple[int, ...], tuple[int, ...], int, D.DType]] = {}
        self.bufs: dict[int, dict[str, Any]] = {}  # id(buffer) -> state
        self.view_nodes: dict[tuple[Any, ...], int] = {}
        self.keep: list[Any] = []  # what the maps key by id() stays alive
        self.externals: dict[int, Tensor] = {}  # input node id -> the tensor it reads
        self.names = names  # id(storage buffer) -> name (module parameters)
        self.arg_bufs: dict[int, int] = {}  # id(buffer) -> argument position
        self.known: dict[int, Tensor] = {}  # id(buffer) -> a tensor showing it
        self.extent: dict[int, int] = {}
        self.host_reads: list[str] = []
        self.problems: list[str] = []  # what the graph could not hold (besides host reads)
        self.rng: list[int] = []  # sizes taken from the default generator, not yet used
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                self.arg_bufs.setdefault(id(a._storage.buffer), i)
        # the tensors alive now: their cached views, and each buffer's extent
        for obj in gc.get_objects():
            if issubclass(type(obj), Tensor):  # type(): no __class__ lookups on proxies
                try:
                    buf = obj._storage.buffer
                except AttributeError:
                    continue
                self._note_tensor(obj, buf)

    def _note_tensor(self, t: Tensor, buf: Any) -> None:
        k = id(buf)
        span = t._offset + sum((n - 1) * s for n, s in zip(t._shape, t._strides)) + 1 \
            if 0 not in t._shape else 0
        if span > self.extent.get(k, 0):
            self.extent[k] = span
        prev = self.known.get(k)
        if prev is None or (t._offset == 0 and t._strides == contiguous_strides(t._shape)
                            and not (prev._offset == 0 and
                                     prev._strides == contiguous_strides(prev._shape)
                                     and prev.numel() >= t.numel())):
            self.known[k] = t
        if t._h is not None:
            off = t._offset if 0 not in t._shape else 0
            self.views[id(t._h)] = (t._h, buf, t._shape, t._strides, off, t._dtype)
            self.keep.append(t._h)

    # -- values -----------------------------------------------------------------------

    def _value(self, shape: tuple[int, ...], dtype: D.DType, **extra: Any) -> int:
        vid = self.g.new_id()
        self.g.values[vid] = {"dtype": dtype.name, "shape": list(shape), **extra}
        return vid

    def _buffer(self, buf: Any, dtype: D.DType) -> dict[str, Any]:
        """The state of ``buf``; a buffer first seen here existed before the trace:
        an input (argument or external tensor)."""
        st = self.bufs.get(id(buf))
        if st is not None:
            return st
        k = id(buf)
        t = self.known.get(k)
        extent = self.extent.get(k, 0)
        if t is not None and t._offset == 0 and t._strides == contiguous_strides(t._shape) \
                and t.numel() == extent:
            shape = t._shape
        else:
            shape = (extent,)
        vid = self._value(shape, dtype)
        if k in self.arg_bufs:
            attrs = {"kind": "arg", "index": self.arg_bufs[k]}
        else:
            name = self.names.get(k) or f"ext{sum(1 for n in self.g.inputs if n.attrs['kind'] == 'external')}"
            attrs = {"kind": "external", "name": name}
        self.g.add(Node(vid, "input", [], attrs))
        if t is not None:
            self.externals[vid] = t
        self.keep.append(buf)
        st = self.bufs[k] = {"version": vid, "shape": shape, "dtype": dtype}
        return st

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
        if shape == tuple(st["shape"]) and off == 0 and strides == contiguous_strides(shape) \
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

    # -- the swapped-in functions ----------------------------------------------------

    def kernel(self, op: str, k: Callable[..., Any]) -> Callable[..., Any]:
        n_out = OUTPUTS.get(op, 1)
        reads_out = op in READS_OUT

        def traced(*args: Any) -> Any:
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
            outs, rest = args[:n_out], args[n_out:]
            regions = [self._region(o) for o in outs]
            read = [Ref(r) for _, r in regions] if reads_out else []
            node_args = read + [self._arg(a) for a in rest]
            k(*args)
            writes = []
            for st, region in regions:
                new = self._value(st["shape"], st["dtype"])
                writes.append((region, new))
                st["version"] = new
            attrs = {}
            if op in ("uniform", "normal") and self.rng:
                attrs["rng"] = self.rng.pop(0)  # numbers drawn anew on each replay
            self.g.add(Node(writes[0][1] if writes else -1, op, node_args, attrs, writes))

        return traced

    def view(self, v: Callable[..., Any]) -> Callable[..., Any]:
        def traced(buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
                   dtype: D.DType) -> Any:
            h = v(buffer, shape, strides, offset, dtype)
            self.views[id(h)] = (h, buffer, tuple(shape), tuple(strides), offset, dtype)
            self.keep.append(h)
            return h

        return traced

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
               names: dict[int, str]) -> tuple[Graph, Any, _Tracer]:
    """Run ``fn(*args, **kwargs)`` recording every kernel; returns (graph, result, tracer)."""
    from ..device import Device

    if getattr(_active, "on", False):
        raise TraceError("rtxcore.jit.trace can't be nested")
    tr = _Tracer(args, names)
    from .. import random as R

    take = R.Generator.take

    def recording_take(gen: Any, n: int) -> tuple[int, int]:
        if gen is R.default_generator:
            tr.rng.append(n)
        else:
            tr.problems.append(f"a random op with its own generator at {_user_line()}")
        return take(gen, n)

    swapped = []
    for dev in list(Device._interned.values()):
        if not dev._ready:
            continue
        swapped.append((dev, dev.kernels, dev.view))
        dev.kernels = {op: tr.kernel(op, k) for op, k in dev.kernels.items()}
        dev.view = tr.view(dev.view)
    _active.on = True
    R.Generator.take = recording_take  # type: ignore[method-assign]
    try:
        result = fn(*args, **kwargs)
        tr.g.outputs = tr.output(result)
    finally:
        _active.on = False
        R.Generator.take = take  # type: ignore[method-assign]
        for dev, kernels, view in swapped:
            dev.kernels, dev.view = kernels, view
    return tr.g, result, tr
