"""``rtxcore.jit.trace`` and what it returns: a ``TracedFunction``, called to
replay its graph, read through ``.graph``, kept with ``.save(path)``."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ops.core import kernel, view_of
from ..tensor import Tensor
from .graph import Graph
from .graph_file import _save
from .run import bind_input, run, run_env
from .trace import TraceError, run_traced


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
        return run(self.graph, *self._bind(args))

    def run_with_env(self, *args: Any) -> tuple[Any, dict[int, Tensor]]:
        """Replay through the node-by-node interpreter; also returns every graph
        value's tensor by id."""
        return run_env(self.graph, *self._bind(args))

    def _bind(self, args: tuple[Any, ...]) -> tuple[dict[int, Tensor], Any]:
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
        data: dict[str, np.ndarray] = {f"const/{k}": np.ascontiguousarray(v)
                                       for k, v in self.graph.constants.items()}
        for n in self.graph.inputs:
            if n.attrs["kind"] == "external":
                t = self._externals[n.id]
                shape = tuple(self.graph.values[n.id]["shape"])
                whole = bind_input(n.id, t, self.graph.values[n.id], t._device)
                arr = kernel(t._device, "to_host")(view_of(whole))
                data[f"input/{n.attrs['name']}"] = np.array(arr, copy=True).reshape(shape)
        _save(path, self.graph, data)
