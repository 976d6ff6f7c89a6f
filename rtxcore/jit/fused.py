"""Running a fused group: the backend's runner for its program (kept per
device and program), or its steps one by one through the device's kernels.
"""

from __future__ import annotations

import json
from typing import Any

from .. import dtype as D
from .._tracing import is_tracing
from ..device import Device
from ..dispatch.fused import input_kinds, input_sizes, output_sizes
from ..ops.core import as_view, cstrides, empty, kernel, view_of
from ..tensor import Tensor

_FUSED: dict[tuple[Any, str], Any] = {}  # (device, program) -> runner or None


def fused_runner(prog: dict[str, Any], dev: Device) -> Any:
    """The backend's runner for a fused program on ``dev`` (None: it has none)."""
    key = (dev, json.dumps(prog, sort_keys=True, default=str))
    fn = _FUSED.get(key, False)
    if fn is False:
        fn = dev.backend.fuse(prog, dev.index)
        if len(_FUSED) > 1024:
            _FUSED.clear()
        _FUSED[key] = fn
    return fn


def run_fused(n: Any, env: dict[int, Tensor], dev: Device) -> None:
    """A fused group: the backend's runner for it, else its steps one by one."""
    prog = n.attrs["program"]
    # (inside a trace, step by step through the device's kernels: recorded)
    fn = fused_runner(prog, dev) if not is_tracing() else None
    sizes = input_sizes(prog)

    def flat_view(t: Tensor, shape: tuple[int, ...]) -> Tensor:
        return as_view(t, shape, (1,), t._offset) if t._shape != shape else t

    outs = [flat_view(env[r], (m,)) for (r, _), m in zip(n.writes, output_sizes(prog))]
    ins = [flat_view(env[a.id], (sizes[i],)) for i, a in enumerate(n.args)]
    if fn is not None:
        fn([view_of(t) for t in outs], [view_of(t) for t in ins])
        return
    run_steps(prog, outs, ins, dev)


def run_steps(prog: dict[str, Any], outs: list[Tensor], ins: list[Tensor], dev: Device) -> None:
    """A fused program's steps one by one through ``dev``'s kernels (what a
    backend without ``Backend.fuse`` gets, and the conformance suite's reference):
    ``outs`` are tensors of ``prog["n"]`` contiguous elements, ``ins`` of
    ``input_sizes(prog)``. With row or column operands the steps run on
    (rows, cols) views, the broadcasts as 0-stride views, as the kernels get
    them from the core. A reducing program's last step is the device's sum
    kernel over the rows (its output ``(rows, 1)``) or over everything."""
    where = {k: j for j, k in enumerate(prog["outputs"])}
    count = prog["n"]
    cols = prog.get("cols", 0)
    shape = (count // cols, cols) if cols else (count,)
    full = cstrides(shape)
    bcast = {"in": full, "scalar": (0,) * len(shape), "row": (0, 1), "col": (1, 0)}
    kinds = input_kinds(prog)
    ins = [as_view(t, shape, bcast[k], t._offset) for t, k in zip(ins, kinds)]
    outs = [as_view(t, shape, full, t._offset) if k != len(prog["steps"]) - 1 or
            not prog.get("reduce") else t for t, k in zip(outs, prog["outputs"])]
    vals: list[Tensor] = []
    steps = prog["steps"]
    if prog.get("reduce"):
        steps = steps[:-1]
        op, dt, [(_, src)] = prog["steps"][-1]
    for k, (op, dt, operands) in enumerate(steps):
        o = outs[where[k]] if k in where else empty(shape, D.BY_NAME[dt], dev)
        args = [view_of(ins[v]) if kind in ("in", "scalar", "row", "col") else
                view_of(vals[v]) if kind == "step" else v for kind, v in operands]
        kernel(dev, op)(view_of(o), *args)
        vals.append(o)
    if prog.get("reduce"):
        o = outs[where[len(steps)]]
        axes = tuple(range(len(shape))) if prog["reduce"] == "all" else (len(shape) - 1,)
        oshape = tuple(1 if d in axes else s for d, s in enumerate(shape))
        o = as_view(o, oshape, cstrides(oshape), o._offset)
        kernel(dev, prog["steps"][-1][0])(view_of(o), view_of(vals[src]), axes)
