"""``rtxcore.jit``: trace a function into a graph of primitive ops, read it, save
it, and run it again on any device.

    step = rtxcore.jit.trace(f, x)       # runs f(x) once, recording every kernel
    print(step.graph)                    # %7 = mul(%3, %5) : float32[64, 128]
    y = step(x2)                         # replays the graph (same shapes as traced)
    step.save("f.rtxg")                  # JSON graph + safetensors data, no pickle
    g = rtxcore.jit.load("f.rtxg")       # runs on the device of its arguments
    y = g(x2.to("opencl"))

What a graph holds: the kernels that ran (primitives, and the composites a
backend supplies as single nodes), the views they read and wrote, constants made
from host data, and the tensors the function read from outside -- module
parameters, optimizer state -- as named inputs, bound by reference while the
traced function lives and saved by value in a file. A forward, the autograd
engine's backward and an optimizer's in-place updates all run kernels, so a
whole training step traces into one graph.

What it does not hold: Python. Control flow is fixed to the path the example
took, Python numbers are constants (an optimizer's step count too), and random
ops replay the numbers drawn while tracing. Reading a tensor's value on the host
(``.item()``, ``bool(t)``, printing) while tracing is an error naming the line.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from ..tensor import Tensor
from .graph import FORMAT, VERSION, Graph, Node, Ref, dumps
from .trace import TraceError, run_traced
from .compile import CompiledFunction, compile  # noqa: E402  (after run_traced)

__all__ = ["trace", "load", "compile", "Graph", "Node", "Ref", "TracedFunction", "LoadedGraph",
           "CompiledFunction", "TraceError"]

_GRAPH_KEY = "rtxcore.graph"


def _module_names(fn: Any) -> dict[int, str]:
    """id(storage buffer) -> name, for a module's (or a bound method's module's)
    parameters and buffers."""
    from ..nn import Module

    mod = fn if isinstance(fn, Module) else getattr(fn, "__self__", None)
    names: dict[int, str] = {}
    if isinstance(mod, Module):
        for n, t in list(mod.named_parameters()) + list(mod.named_buffers()):
            names.setdefault(id(t._storage.buffer), n)
    return names


def trace(fn: Callable[..., Any], *example_inputs: Any, **kwargs: Any) -> "TracedFunction":
    """Run ``fn(*example_inputs, **kwargs)`` once and record it as a ``Graph``.
    ``example_inputs`` may also be one tuple, as ``torch.jit.trace`` takes it."""
    if len(example_inputs) == 1 and isinstance(example_inputs[0], tuple):
        example_inputs = example_inputs[0]
    for a in example_inputs:
        if isinstance(a, Tensor) and not a._device._ready:
            a._device._resolve()
    graph, _, tr = run_traced(fn, tuple(example_inputs), kwargs, _module_names(fn))
    why = _unrecordable(tr)
    if why:
        raise TraceError(why)
    args = [a if isinstance(a, Tensor) else None for a in example_inputs]
    return TracedFunction(graph, tr.externals, args)


def _unrecordable(tr: Any) -> str | None:
    """Why the trace can't be one graph (None when it can)."""
    if tr.host_reads:
        return ("the traced function reads tensor values on the host (.item(), bool(t), "
                f"nonzero, printing, .numpy()) at {', '.join(dict.fromkeys(tr.host_reads))}: a "
                "graph can't hold a decision made from data; trace the part before or after it")
    if tr.problems:
        return f"the trace can't hold {'; '.join(dict.fromkeys(tr.problems))}"
    return None


def _check_args(graph: Graph, args: tuple[Any, ...], n_traced: int) -> None:
    if len(args) != n_traced:
        raise TypeError(f"the traced function takes {n_traced} arguments, got {len(args)}")


class TracedFunction:
    """A traced function: call it to replay its graph (inputs shaped as traced),
    ``.graph`` to read it, ``.save(path)`` to keep it."""

    def __init__(self, graph: Graph, externals: dict[int, Tensor],
                 example: list[Tensor | None]) -> None:
        self.graph = graph
        self._externals = externals
        self._layouts = [(a._shape, a._strides, a._offset, a._dtype) if a is not None else None
                         for a in example]

    def __call__(self, *args: Any) -> Any:
        from .run import run

        return run(self.graph, *self._bind(args))

    def run_with_env(self, *args: Any) -> tuple[Any, dict[int, Tensor]]:
        """Replay through the node-by-node interpreter; also returns every graph
        value's tensor by id."""
        from .run import run_env

        return run_env(self.graph, *self._bind(args))

    def _bind(self, args: tuple[Any, ...]) -> tuple[dict[int, Tensor], Any]:
        from .run import bind_input

        _check_args(self.graph, args, len(self._layouts))
        for i, (a, lay) in enumerate(zip(args, self._layouts)):
            if lay is not None and (not isinstance(a, Tensor) or
                                    (a._shape, a._strides, a._offset, a._dtype) != lay):
                got = (f"{a._dtype.name} {tuple(a._shape)} strides {a._strides} offset "
                       f"{a._offset}" if isinstance(a, Tensor) else type(a).__name__)
                raise ValueError(f"argument {i}: traced with {lay[3].name} {tuple(lay[0])} "
                                 f"strides {lay[1]} offset {lay[2]}, got {got}; trace again "
                                 "for other shapes")
        dev = next((a._device for a in args if isinstance(a, Tensor)),
                   next(iter(self._externals.values()))._device if self._externals else None)
        inputs = {}
        g = self.graph
        nodes = g.__dict__.get("_input_nodes")  # a graph isn't edited once it runs
        if nodes is None:
            nodes = g.__dict__["_input_nodes"] = g.inputs
        for n in nodes:
            v = g.values[n.id]
            if n.attrs["kind"] == "arg":
                inputs[n.id] = bind_input(n.attrs["index"], args[n.attrs["index"]], v, dev)
            else:
                inputs[n.id] = bind_input(n.id, self._externals[n.id], v, dev)
        return inputs, dev

    def save(self, path: str) -> None:
        """One safetensors file: the constants, each external input's current value
        (under its name) and the graph as JSON in the header's metadata."""
        from ..ops.core import kernel, view_of

        data: dict[str, np.ndarray] = {f"const/{k}": np.ascontiguousarray(v)
                                       for k, v in self.graph.constants.items()}
        for n in self.graph.inputs:
            if n.attrs["kind"] == "external":
                t = self._externals[n.id]
                shape = tuple(self.graph.values[n.id]["shape"])
                from .run import bind_input

                whole = bind_input(n.id, t, self.graph.values[n.id], t._device)
                arr = kernel(t._device, "to_host")(view_of(whole))
                data[f"input/{n.attrs['name']}"] = np.array(arr, copy=True).reshape(shape)
        _save(path, self.graph, data)


def _save(path: str, graph: Graph, data: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    save_file(data, path, metadata={_GRAPH_KEY: dumps(graph)})


def _fits(what: str, t: Any, v: dict[str, Any]) -> None:
    """Tensor ``t`` can stand for graph input ``v``: its dtype, and storage for
    the elements the graph reads (the input's size from offset 0)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a Tensor, got {type(t).__name__}")
    need = int(np.prod(v["shape"], dtype=object))
    have = 0 if 0 in t._shape else \
        t._offset + sum((n - 1) * s for n, s in zip(t._shape, t._strides) if s > 0) + 1
    if t._dtype.name != v["dtype"] or have < need:
        raise ValueError(f"{what}: the graph reads {v['dtype']} {need} elements of its "
                         f"storage ({v['dtype']}{list(v['shape'])}); got a {t._dtype.name} "
                         f"tensor of shape {tuple(t._shape)} showing {have}")


class LoadedGraph:
    """A graph read from a file: call it with the traced function's arguments on
    any device; external inputs come from the file unless ``externals`` (by name)
    gives others."""

    def __init__(self, graph: Graph, data: dict[str, np.ndarray]) -> None:
        self.graph = graph
        self._data = data
        self.n_args = len([n for n in graph.inputs if n.attrs["kind"] == "arg"])

    def __call__(self, *args: Any, device: Any = None,
                 externals: dict[str, Tensor] | None = None) -> Any:
        from ..device import Device
        from ..ops.core import from_host, ready_device
        from .run import bind_input, run

        dev = next((a._device for a in args if isinstance(a, Tensor)), None)
        dev = ready_device(Device(device) if device is not None else dev)
        externals = externals or {}
        inputs = {}
        for n in self.graph.inputs:
            v = self.graph.values[n.id]
            if n.attrs["kind"] == "arg":
                i = n.attrs["index"]
                if i >= len(args):
                    raise TypeError(f"the graph takes argument {i}; got {len(args)} arguments")
                _fits(f"argument {i}", args[i], v)
                inputs[n.id] = bind_input(i, args[i], v, dev)
            else:
                name = n.attrs["name"]
                t = externals.get(name)
                if t is None:
                    t = from_host(np.ascontiguousarray(self._data[f"input/{name}"]), dev)
                else:
                    _fits(f"external input {name!r}", t, v)
                inputs[n.id] = bind_input(n.id, t, v, dev)
        return run(self.graph, inputs, dev)


def load(path: str) -> LoadedGraph:
    """Read a graph written by ``TracedFunction.save``. A file from anywhere is
    safe to load: every field of its graph is checked (``rtxcore.jit.validate``;
    docs/graph-file.md has the format and what a hostile file can and cannot
    do), and anything wrong -- a truncated or foreign file, a newer format
    version, an unknown op, a field out of range, a missing or mis-shaped
    tensor -- is a ValueError naming it. A replay checks the values of the
    graph's index tensors before each kernel reading them."""
    from contextlib import ExitStack

    from safetensors import safe_open

    from .validate import DTYPES

    with ExitStack() as stack:
        try:
            f = stack.enter_context(safe_open(path, framework="numpy"))
            meta = f.metadata() or {}
            keys = set(f.keys())
        except FileNotFoundError:
            raise
        except Exception as exc:  # OSError, safetensors' own error types, ...
            raise ValueError(f"{path}: not a readable rtxcore graph file ({exc})") from None
        if _GRAPH_KEY not in meta:
            raise ValueError(f"{path}: a safetensors file without an rtxcore graph in its metadata")
        try:
            graph = Graph.from_json(_strict_json(meta[_GRAPH_KEY]))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        data: dict[str, np.ndarray] = {}
        for n in graph.nodes:
            if n.op == "const":
                key, what = f"const/{n.attrs['name']}", f"constant {n.attrs['name']!r}"
            elif n.op == "input" and n.attrs["kind"] == "external":
                key, what = f"input/{n.attrs['name']}", f"external input {n.attrs['name']!r}"
            else:
                continue
            if key in data:
                raise ValueError(f"{path}: two nodes name {what}")
            if key not in keys:
                raise ValueError(f"{path}: {what} is missing (no tensor {key!r} in the file)")
            try:
                arr = f.get_tensor(key)
            except Exception as exc:
                raise ValueError(f"{path}: {what} can't be read ({exc})") from None
            v = graph.values[n.id]
            if arr.dtype != DTYPES[v["dtype"]].numpy or list(arr.shape) != v["shape"]:
                raise ValueError(f"{path}: {what} is {arr.dtype}{list(arr.shape)} in the file; "
                                 f"the graph says {v['dtype']}{v['shape']}")
            data[key] = arr
    for n in graph.nodes:
        if n.op == "const":
            graph.constants[n.attrs["name"]] = data[f"const/{n.attrs['name']}"]
    graph.__dict__["_from_file"] = True  # its plans check index tensors (plan.py)
    return LoadedGraph(graph, data)


def _strict_json(text: Any) -> Any:
    """JSON as the standard has it: no NaN or Infinity, no key twice in an object."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):  # (rare: find the key only then)
            seen: set[str] = set()
            for k, _ in items:
                if k in seen:
                    raise ValueError(f"the graph's JSON names {k!r} twice in one object")
                seen.add(k)
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"the graph's JSON has {name}, which JSON does not")

    if not isinstance(text, str):
        raise ValueError("the graph's metadata is not text")
    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except RecursionError:
        raise ValueError("the graph's JSON nests too deeply") from None
    except ValueError as exc:
        raise ValueError(f"the graph's JSON is malformed ({exc})") from None
