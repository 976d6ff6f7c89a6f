"""Graph files: a traced graph as one safetensors file (the graph's JSON in
the header's metadata; its constants and external inputs as tensors), and
``load``, which reads one back -- every field checked (``validate``) -- as a
``LoadedGraph`` that runs on the device of its arguments."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

import numpy as np

from ..device import Device
from ..ops.core import from_host, ready_device
from ..tensor import Tensor
from .graph import Graph, dumps
from .run import bind_input, run
from .validate import DTYPES

_GRAPH_KEY = "rtxcore.graph"


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
    from safetensors import safe_open

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
