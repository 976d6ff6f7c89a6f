"""Running a Graph: its nodes in order, each kernel from the device the inputs are
on -- through the graph's plan (``plan``), or node by node (``run_env``, the
reference a plan is tested against)."""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from .._tracing import is_tracing
from ..autograd.grad_mode import no_grad
from ..device import Device
from ..dispatch.ops import COMPOSITES
from ..dispatch.fused import input_kinds, input_sizes, output_sizes  # noqa: F401  (run.input_sizes, ...)
from ..dispatch.types import contiguous_strides
from ..ops.core import as_view, empty, from_host, kernel, own_kernel, ready_device, view_of
from ..tensor import Tensor
from .decompose import DECOMPOSE
from .fused import fused_runner, run_fused, run_steps  # noqa: F401  (run.fused_runner, ...)
from .graph import Graph, Ref, buffer_roots
from .trace import READS_OUT
from .validate import check_indices, index_operands


def _layout_error(i: int, t: Tensor, v: dict[str, Any]) -> ValueError:
    return ValueError(f"argument {i}: expected a tensor like the traced one ({v['dtype']}, "
                      f"{v['shape']} elements of storage), got {t._dtype.name} of shape "
                      f"{tuple(t._shape)}")


def bind_input(i: int, t: Any, v: dict[str, Any], dev: Device) -> Tensor:
    """The buffer of input ``i``: tensor ``t`` seen with the traced natural shape
    (the whole storage from offset 0)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"argument {i}: expected a Tensor, got {type(t).__name__}")
    if t._dtype.name != v["dtype"]:
        raise _layout_error(i, t, v)
    if t._device is not dev:
        raise RuntimeError(f"argument {i} is on {t._device}, the others on {dev}: a graph runs "
                           "on one device")
    shape = tuple(v["shape"])
    if t._shape == shape and t._offset == 0 and t._strides == contiguous_strides(shape):
        return t
    return as_view(t, shape, contiguous_strides(shape), 0)


def run(graph: Graph, inputs: dict[int, Tensor], dev: Device) -> Any:
    """Execute ``graph`` on ``dev``; ``inputs`` maps each input node's id to its
    bound buffer tensor. Returns the outputs, tensors rebuilt as views. Runs the
    graph's plan for ``dev`` (``rtxcore.jit.plan``: made on first use)."""
    from .plan import plan_for

    dev = ready_device(dev)
    if is_tracing():  # inside another trace: node by node, so that it is recorded
        return run_env(graph, inputs, dev)[0]
    return plan_for(graph, dev)(inputs)


def run_env(graph: Graph, inputs: dict[int, Tensor], dev: Device) -> tuple[Any, dict[int, Tensor]]:
    """``run`` by interpreting the graph node by node, also returning every
    value's tensor by id (the reference a plan is tested against)."""
    dev = ready_device(dev)
    env: dict[int, Tensor] = dict(inputs)
    vals = graph.values
    roots = buffer_roots(graph)
    from_file = graph.__dict__.get("_from_file")  # index tensors checked (see plan.py)
    for n in graph.nodes:
        op = n.op
        if op == "input":
            if n.id not in env:
                raise ValueError(f"graph input %{n.id} ({n.attrs}) was not given")
        elif op == "alloc":
            v = vals[n.id]
            shape = tuple(v["shape"])
            home = n.attrs.get("reuse")
            env[n.id] = empty(shape, D.BY_NAME[v["dtype"]], dev) if home is None else \
                as_view(env[home], shape, contiguous_strides(shape), 0)
        elif op == "fused":
            run_fused(n, env, dev)
            for region, new in n.writes:  # fused outputs are whole buffers
                env[new] = _buffer_of(region, env, vals)
        elif op == "const":
            env[n.id] = from_host(graph.constants[n.attrs["name"]], dev)
        elif op == "view":  # of the buffer: a view is layout, whichever version it shows
            v = vals[n.id]
            env[n.id] = as_view(env[roots[n.args[0].id]], tuple(v["shape"]),
                                tuple(v["strides"]), v["offset"])
        else:
            read = len(n.writes) if op in READS_OUT else 0
            if from_file:
                for vid, bound, what in index_operands(graph, n):
                    check_indices(env[vid], bound, what)
            node_args = n.args
            rng = n.attrs.get("rng")
            if rng is not None:  # fresh numbers each run, drawn as the eager op draws
                from ..random import default_generator

                seed, off = default_generator.take(rng)
                node_args = list(n.args)
                node_args[-2:] = [seed, off]
            k = dev.kernels.get(op) if op not in COMPOSITES else \
                own_kernel(dev, op, lambda: env[n.writes[0][0]]._dtype)
            if k is None and op in DECOMPOSE:  # a composite this backend lacks
                with no_grad():
                    DECOMPOSE[op](*(env[r] for r, _ in n.writes),
                                  *(_tensor_arg(a, env) for a in node_args[read:]))
            else:
                k = k or kernel(dev, op)
                k(*(view_of(env[r]) for r, _ in n.writes),
                  *(_arg(a, env) for a in node_args[read:]))
            for region, new in n.writes:
                base = env[region]
                # the new version is the whole buffer the region belongs to
                env[new] = base if region not in vals or "of" not in vals[region] \
                    else _buffer_of(region, env, vals)
    return _outputs(graph.outputs, env), env


def _buffer_of(vid: int, env: dict[int, Tensor], vals: dict[int, dict[str, Any]]) -> Tensor:
    while "of" in vals[vid]:
        vid = vals[vid]["of"]
    return env[vid]


def _arg(a: Any, env: dict[int, Tensor]) -> Any:
    if isinstance(a, Ref):
        return view_of(env[a.id])
    if isinstance(a, tuple):
        return tuple(_arg(x, env) for x in a)
    if isinstance(a, list):
        return [_arg(x, env) for x in a]
    return a


def _tensor_arg(a: Any, env: dict[int, Tensor]) -> Any:
    if isinstance(a, Ref):
        return env[a.id]
    if isinstance(a, (tuple, list)):
        return type(a)(_tensor_arg(x, env) for x in a)
    return a


def _outputs(o: Any, env: dict[int, Tensor]) -> Any:
    if "view" in o:
        t = env[o["view"]]
        # a fresh tensor object (no autograd history) over the same memory
        return as_view(t, t._shape, t._strides, t._offset)
    if "seq" in o:
        seq = [_outputs(x, env) for x in o["seq"]]
        return tuple(seq) if o.get("type") == "tuple" else seq
    if "map" in o:
        return {k: _outputs(v, env) for k, v in o["map"]}
    return o["lit"]
