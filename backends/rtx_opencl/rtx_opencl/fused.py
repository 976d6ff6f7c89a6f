"""Fused elementwise groups as one generated OpenCL kernel.

The group's steps become one expression each, from the same expression table
the single-op kernels use, evaluated in registers one after the other; only the
group's outputs are stored. One launch and one pass over memory replace one
launch and one full read and write per op.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

from . import codegen as C
from . import kernels as K

_TOKEN = re.compile(r"\b([abc])\b")
_LOGICAL = {"logical_and", "logical_or", "logical_not"}


def _table(op: str) -> dict:
    if op in C.UNARY:
        return C.UNARY
    if op in C.BINARY:
        return C.BINARY
    return C.TERNARY


def _literal(v: Any, dtype: str) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if dtype in C.FLOATS:
        f = float(v)
        if math.isnan(f):
            return "(CT)NAN"
        if math.isinf(f):
            return "(CT)INFINITY" if f > 0 else "(CT)(-INFINITY)"
        return f"(CT){f!r}"
    return f"(CT){int(v)}L"


_VECTOR_OPS = C.VECTOR_OPS  # the same on vector types (no ?:, no comparisons)
WIDTH = C.WIDTH  # floats per work-item in the vector form: PoCL vectorises builtins on float8


def vectorizable(program: dict[str, Any]) -> bool:
    """float32 throughout and only ops whose expression reads the same on float8."""
    return (all(dt == "float32" for dt in program["inputs"])
            and all(op in _VECTOR_OPS and dt == "float32" for op, dt, _ in program["steps"])
            and program.get("cols", 0) % WIDTH == 0)  # a vector's elements share a row


def source(program: dict[str, Any], width: int = 1) -> tuple[str, list[str]]:
    """(OpenCL C source, argument kinds) of kernel ``k`` running ``program``; with
    ``width`` > 1 (a vectorizable program) each work-item does ``width``
    consecutive elements on vector types."""
    ins, steps, outs = program["inputs"], program["steps"], program["outputs"]
    dtypes = set(ins) | {dt for _, dt, _ in steps}
    params, kinds = [], []
    for j, k in enumerate(outs):
        params += [f"__global {C.CTYPE[steps[k][1]][0]} *o{j}", f"long o{j}_o"]
        kinds += ["buf", "long"]
    for i, dt in enumerate(ins):
        params += [f"__global const {C.CTYPE[dt][0]} *p{i}", f"long p{i}_o"]
        kinds += ["buf", "long"]
    body = ["const long i = get_global_id(0);"]
    vec = f"float{width}" if width > 1 else None
    how = {v: kind for _, _, operands in steps for kind, v in operands
           if kind in ("scalar", "row", "col")}
    cols = program.get("cols", 0)
    for i, dt in enumerate(ins):
        kind = how.get(i, "in")
        if kind in ("scalar", "col"):  # one element for the work-item's elements (a
            # vector's eight share a row: cols is a multiple of the width there)
            at = f"p{i}_o" if kind == "scalar" else \
                f"p{i}_o + (i * {width}) / {cols}" if vec else f"p{i}_o + i / {cols}"
            one = C.load(dt, f"p{i}", at)
            body.append(f"const {vec} x{i} = ({vec})({one});" if vec else
                        f"const {C.CTYPE[dt][1]} x{i} = {one};")
        elif kind == "row":  # the row vector at the element's column
            body.append(f"const {vec} x{i} = vload{width}(0, p{i} + p{i}_o + (i * {width}) % "
                        f"{cols});" if vec else
                        f"const {C.CTYPE[dt][1]} x{i} = {C.load(dt, f'p{i}', f'p{i}_o + i % {cols}')};")
        elif vec:
            body.append(f"const {vec} x{i} = vload{width}(0, p{i} + p{i}_o + i * {width});")
        else:
            body.append(f"const {C.CTYPE[dt][1]} x{i} = {C.load(dt, f'p{i}', f'p{i}_o + i')};")
    step_dt = [dt for _, dt, _ in steps]
    for k, (op, dt, operands) in enumerate(steps):
        def dtype_of(o: list[Any]) -> str | None:
            kind, v = o
            return ins[v] if kind in ("in", "scalar", "row", "col") else \
                step_dt[v] if kind == "step" else None

        known = [dtype_of(o) for o in operands]
        if op == "where":
            opnd = dt
        elif op in C.BINARY and (op in ("eq", "ne", "lt", "le", "gt", "ge") or op in _LOGICAL):
            opnd = next(d for d in known if d is not None)
        elif op in ("cast", "logical_not"):
            opnd = known[0] or dt
        else:
            opnd = dt
        expr = C.expression(_table(op), op, opnd)
        names = []
        for o, d in zip(operands, known):
            kind, v = o
            names.append(f"x{v}" if kind in ("in", "scalar", "row", "col") else f"s{v}"
                         if kind == "step"
                         else _literal(v, opnd if op != "where" or len(names) else "bool"))
        sub = dict(zip("abc", names))
        e = _TOKEN.sub(lambda m: f"({sub[m.group(1)]})", expr)
        ct, rt = (vec, vec) if vec else (C.CTYPE[opnd][1], C.CTYPE[dt][1])
        body.append(f"#undef CT\n#define CT {ct}")
        body.append(f"const {rt} s{k} = ({rt})({e});")
    for j, k in enumerate(outs):
        if vec:
            body.append(f"vstore{width}(s{k}, 0, o{j} + o{j}_o + i * {width});")
        else:
            body.append(C.store(steps[k][1], f"o{j}", f"o{j}_o + i", f"s{k}"))
    src = (C.header(dtypes) + "#define CT float\n"
           + "__kernel void k(" + ", ".join(params) + ")\n{\n    "
           + "\n    ".join(body) + "\n}\n")
    return src, kinds


def runner(program: dict[str, Any]) -> Callable[..., None] | None:
    steps = program["steps"]
    for op, dt, operands in steps:
        if op not in C.UNARY and op not in C.BINARY and op not in C.TERNARY:
            return None
        if op == "pow" and dt not in C.FLOATS:
            return None  # integer pow needs its helper function: run unfused
    try:
        source(program)
    except (TypeError, StopIteration):
        return None  # an op not defined for a dtype here: the core runs it op by op
    key = ("fused", json.dumps(program, sort_keys=True, default=str))
    n = program["n"]
    vector = vectorizable(program) and n >= WIDTH

    def run(outs: list[Any], ins: list[Any]) -> None:
        if n == 0:
            return
        dev = outs[0].buffer.dev
        args: list[Any] = []
        for v in list(outs) + list(ins):
            args += [v.buffer.mem, v.offset]
        done = 0
        if vector:
            kv = K._kernel(dev, key + (WIDTH,), lambda: source(program, WIDTH))
            m = n // WIDTH
            K._enqueue(dev, kv, m, args)
            done = m * WIDTH
        if done < n:  # the tail (or all of it) one element per work-item
            k = K._kernel(dev, key, lambda: source(program))
            if done:
                k(dev.queue, (n - done,), (1,), *args, global_offset=(done,))
            else:
                K._enqueue(dev, k, n, args)

    return run
