"""A fused node's program in a graph file checked in full: its steps, operands
and dtypes as the kernel contract states them, and the node's args and writes
against the program's inputs and outputs.
"""

from __future__ import annotations

from typing import Any

from ..dispatch.types import contiguous_strides
from .fields import DTYPES, _Bad, _fail, _int, _is_scalar, _numel, _scalar_fits, _show, decode_arg
from .ir import Ref
from .kernel_checks import BINARY_OPS, ELEMENTWISE, _bool_result, _domain

_OPERAND_KINDS = ("in", "scalar", "row", "col", "step", "const")
_PROGRAM_KEYS = {"n", "inputs", "steps", "outputs"}


def _arity(op: str) -> int:
    if op == "where":
        return 3
    return 2 if op in BINARY_OPS else 1


def _program(p: Any, where: str, nodes: Any, args: list[Any], outs: list[int]) -> None:
    """A fused node's program: what ``rtxcore.jit.passes.fuse_elementwise`` makes
    and the backends' ``fuse`` (cpu, opencl, cuda) turn into code: ``n`` elements,
    ``inputs`` (dtype names, one per arg), ``steps`` (``[op, dtype, operands]``,
    an elementwise op; a ``"sum"`` of an earlier step only as the last step of a
    reducing program), ``outputs`` (the steps stored, ascending), and optionally
    ``cols`` (the row length of "row"/"col" operands and of a "rows" sum; it
    divides ``n``) and ``reduce`` ("rows" or "all"). Operands: ``["in", i]``
    (input i, whole), ``["scalar", i]``, ``["row", i]``, ``["col", i]``
    (input i broadcast), ``["step", k]`` (an earlier step's result),
    ``["const", number]``. The node's args are the inputs (refs, their dtypes
    the program's), its writes the outputs (whole buffers of the outputs' sizes)."""
    w = f"{where}: attrs.program"
    if not isinstance(p, dict):
        raise _fail(where, "attrs.program", "an object", p)
    if not _PROGRAM_KEYS <= set(p) <= _PROGRAM_KEYS | {"cols", "reduce"}:
        raise _Bad(f"{w}: keys must be {sorted(_PROGRAM_KEYS)} and optionally 'cols' and "
                   f"'reduce', got {sorted(map(str, p))}")
    lim = nodes.limits
    n = _int(p["n"], w, "n", 0, lim.numel)
    inputs = p["inputs"]
    if not isinstance(inputs, list) or len(inputs) > lim.fused_inputs or \
            not all(type(d) is str and d in DTYPES for d in inputs):
        raise _fail(w, "inputs", f"a list of at most {lim.fused_inputs} dtype names", inputs)
    reduce = p.get("reduce")
    if "reduce" in p and (type(reduce) is not str or reduce not in ("rows", "all")):
        raise _fail(w, "reduce", "'rows' or 'all'", reduce)
    cols = 0
    if "cols" in p:
        cols = _int(p["cols"], w, "cols", 1, lim.numel)
        if n % cols:
            raise _fail(w, "cols", f"a divisor of n ({n})", cols)
    if reduce == "rows" and not cols:
        raise _Bad(f"{w}: a program reducing rows needs 'cols'")
    if reduce and n < 2:
        raise _fail(w, "n", "at least 2 in a reducing program", n)
    steps = p["steps"]
    if not isinstance(steps, list) or not 1 <= len(steps) <= lim.fused_steps:
        raise _fail(w, "steps", f"a list of 1 to {lim.fused_steps} steps", steps)
    kinds: dict[int, str] = {}
    step_dt: list[str] = []
    for k, s in enumerate(steps):
        ws = f"{w}.steps[{k}]"
        if not isinstance(s, list) or len(s) != 3:
            raise _fail(ws, "a step", "[op, dtype, operands]", s)
        op, dt, operands = s
        last_sum = reduce is not None and k == len(steps) - 1
        if last_sum:
            if op != "sum":
                raise _fail(ws, "op", "'sum' (the last step of a reducing program)", op)
        elif type(op) is not str or op not in ELEMENTWISE:
            raise _fail(ws, "op", "an elementwise op (a unary, binary or comparison "
                        "primitive, where, cast or copy)"
                        + ("; 'sum' only ends a reducing program" if op == "sum" else ""), op)
        if type(dt) is not str or dt not in DTYPES:
            raise _fail(ws, "dtype", f"one of {', '.join(DTYPES)}", dt)
        if not isinstance(operands, list) or len(operands) != (1 if last_sum else _arity(op)):
            raise _fail(ws, "operands", f"a list of {1 if last_sum else _arity(op)} operands",
                        operands)
        known: list[str | None] = []
        for j, o in enumerate(operands):
            wo = f"{ws}.operands[{j}]"
            if not isinstance(o, list) or len(o) != 2 or type(o[0]) is not str or \
                    o[0] not in _OPERAND_KINDS:
                raise _fail(wo, "an operand", f"[kind, value] with kind one of "
                            f"{', '.join(_OPERAND_KINDS)}", o)
            kind, v = o
            if last_sum and kind != "step":
                raise _fail(wo, "the sum's operand", "['step', k]", o)
            if kind == "const":
                if isinstance(v, dict) and set(v) == {"float"}:
                    v = decode_arg(v, wo, limits=lim)
                if not _is_scalar(v):
                    raise _fail(wo, "a const", "a bool, an int or a float", v)
                known.append(None)
            elif kind == "step":
                if type(v) is not int or not 0 <= v < k:
                    raise _fail(wo, "a step operand", f"the index of an earlier step (below {k})",
                                v)
                known.append(step_dt[v])
            else:
                if type(v) is not int or not 0 <= v < len(inputs):
                    raise _fail(wo, f"an {kind!r} operand", f"the index of a program input "
                                f"(below {len(inputs)})", v)
                if kinds.setdefault(v, kind) != kind:
                    raise _Bad(f"{wo}: input {v} is read as {kinds[v]!r} and as {kind!r}: "
                               "a program reads each input one way")
                if kind in ("row", "col") and not cols:
                    raise _Bad(f"{wo}: a {kind!r} operand needs the program's 'cols'")
                known.append(inputs[v])
        _step_dtypes(ws, op, dt, operands, known, last_sum)
        step_dt.append(dt)
    outputs = p["outputs"]
    if not isinstance(outputs, list) or not outputs or \
            not all(type(k) is int and 0 <= k < len(steps) for k in outputs) or \
            any(a >= b for a, b in zip(outputs, outputs[1:])):
        raise _fail(w, "outputs", f"a non-empty ascending list of step indices below "
                    f"{len(steps)}", outputs)
    if reduce and outputs[-1] != len(steps) - 1:
        raise _Bad(f"{w}: the sum ending a reducing program must be an output")
    unused = [i for i in range(len(inputs)) if i not in kinds]
    if unused:
        raise _Bad(f"{w}: inputs {unused} are read by no step")
    # the node around it: args are the inputs, writes the outputs
    if len(args) != len(inputs) or not all(isinstance(a, Ref) for a in args) or \
            len({a.id for a in args}) != len(args):
        raise _Bad(f"{where}: args must be {len(inputs)} distinct refs, one per program input")
    if len(outs) != len(outputs):
        raise _Bad(f"{where}: writes must be {len(outputs)}, one per program output")
    vals, rows = nodes.values, (n // cols if cols else n)
    for j, (r, k) in enumerate(zip(outs, outputs)):
        size = (rows if reduce == "rows" else 1) if reduce and k == len(steps) - 1 else n
        v, root = vals[r], vals[nodes.root[r]]
        if _numel(v["shape"]) != size or not _whole(v, root) or v["dtype"] != steps[k][1]:
            raise _Bad(f"{where}: writes[{j}] (value {r}) must be a whole {steps[k][1]} buffer "
                       f"of {size} elements (program output {j}), got {v['dtype']} "
                       f"{v['shape']}" + ("" if _whole(v, root) else " (a part of a buffer)"))
    for i, a in enumerate(args):
        v, root = vals[a.id], vals[nodes.root[a.id]]
        kind = kinds[i]
        if v["dtype"] != inputs[i]:
            raise _Bad(f"{where}: args[{i}] (value {a.id}) must be {inputs[i]} (program input "
                       f"{i}), got {v['dtype']}")
        if _numel(v["shape"]) != n:
            raise _Bad(f"{where}: args[{i}] (value {a.id}) must have n = {n} elements, got "
                       f"shape {v['shape']}")
        if kind == "in":
            if not _whole(v, root):
                raise _Bad(f"{where}: args[{i}] (value {a.id}), an 'in' operand, must be a "
                           "whole buffer")
            continue
        size = {"scalar": 1, "row": cols, "col": rows}[kind]
        off = v.get("offset", 0) if n else 0
        if off + size > _numel(root["shape"]):
            raise _Bad(f"{where}: args[{i}] (value {a.id}), a {kind!r} operand, reads "
                       f"{size} elements from {off}, past its buffer's "
                       f"{_numel(root['shape'])}")


def _step_dtypes(ws: str, op: str, dt: str, operands: list[Any], known: list[str | None],
                 last_sum: bool) -> None:
    """A step's dtypes as the kernel contract states them for its op."""
    def bad(msg: str) -> _Bad:
        return _Bad(f"{ws}: {msg}")

    if last_sum:
        if dt not in ("float32", "float64") or known[0] != dt:
            raise bad(f"the sum must be of a float32 or float64 step, in its dtype; got "
                      f"{known[0]} summed as {dt}")
        return
    if op == "cast":
        if known[0] is None:
            raise bad("cast's operand must be an input or a step")
        return
    if op == "where":
        if known[0] != "bool":
            raise bad(f"where's condition must be a bool input or step, got "
                      f"{known[0] or 'a const'}")
        for j in (1, 2):
            if known[j] is None:
                if not _scalar_fits(_const(operands[j][1]), dt):
                    raise bad(f"operand {j} must be a {dt} const, got {_show(operands[j][1])}")
            elif known[j] != dt:
                raise bad(f"operand {j} must be {dt}, got {known[j]}")
        return
    refs = [d for d in known if d is not None]
    if not refs:
        raise bad(f"{op} needs an input or step operand, got only consts")
    od = refs[0]
    if any(d != od for d in refs):
        raise bad(f"{op}'s operands must share one dtype, got {known}")
    if op != "copy" and od not in _domain(op):
        raise bad(f"{op} is not defined for {od}")
    want = "bool" if op != "copy" and _bool_result(op) else od
    if dt != want:
        raise bad(f"{op} of {od} gives {want}, the step says {dt}")
    for j, d in enumerate(known):
        if d is None and not _scalar_fits(_const(operands[j][1]), od):
            raise bad(f"operand {j} must be a {od} const, got {_show(operands[j][1])}")


def _whole(v: dict[str, Any], root: dict[str, Any]) -> bool:
    """A buffer version, or a view showing all of its buffer in order."""
    if "of" not in v:
        return True
    return (v["offset"] == 0 and tuple(v["strides"]) == contiguous_strides(tuple(v["shape"]))
            and _numel(v["shape"]) == _numel(root["shape"]))



def _copy_program(p: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy of a checked program (plain lists, floats decoded)."""
    out: dict[str, Any] = {"n": p["n"], "inputs": list(p["inputs"]),
                           "steps": [[op, dt, [[k, _const(v) if k == "const" else v]
                                               for k, v in operands]]
                                     for op, dt, operands in p["steps"]],
                           "outputs": list(p["outputs"])}
    for k in ("cols", "reduce"):
        if k in p:
            out[k] = p[k]
    return out


def _const(v: Any) -> Any:
    if isinstance(v, dict):  # {"float": text}: a non-finite float (JSON has none)
        return float(v["float"])
    return v
