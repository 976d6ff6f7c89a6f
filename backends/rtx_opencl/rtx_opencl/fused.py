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

import numpy as np
from rtxcore.dispatch.cexpr import COMPARISONS
from rtxcore.dispatch.fused import elementwise_steps

from . import codegen as C
from . import launch as L

_TOKEN = re.compile(r"\b([abc])\b")


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
    steps = elementwise_steps(program) or []
    return (all(dt == "float32" for dt in program["inputs"])
            and all(op in _VECTOR_OPS and dt == "float32" for op, dt, _ in steps)
            and all(dt == "float32" for _, dt, _ in program["steps"])
            and program.get("cols", 0) % WIDTH == 0)  # a vector's elements share a row


def source(program: dict[str, Any], width: int = 1) -> tuple[str, list[str]]:
    """(OpenCL C source, argument kinds) of kernel ``k`` running ``program``; with
    ``width`` > 1 (a vectorizable program) each work-item does ``width``
    consecutive elements on vector types."""
    ins, steps, outs = program["inputs"], program["steps"], program["outputs"]
    reduce = program.get("reduce")
    if reduce:  # the last step is the sum: not an elementwise expression
        steps = steps[:-1]
    dtypes = set(ins) | {dt for _, dt, _ in steps}
    params, kinds = [], []
    for j, k in enumerate(outs):
        dt = program["steps"][k][1]
        params += [f"__global {C.CTYPE[dt][0]} *o{j}", f"long o{j}_o"]
        kinds += ["buf", "long"]
    for i, dt in enumerate(ins):
        params += [f"__global const {C.CTYPE[dt][0]} *p{i}", f"long p{i}_o"]
        kinds += ["buf", "long"]
    body = [] if reduce else ["const long i = get_global_id(0);"]
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
        elif op in COMPARISONS:
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
        if k == len(steps):
            continue  # the sum: stored once the loop is done
        if vec:
            body.append(f"vstore{width}(s{k}, 0, o{j} + o{j}_o + i * {width});")
        else:
            body.append(C.store(steps[k][1], f"o{j}", f"o{j}_o + i", f"s{k}"))
    if reduce:
        return _reducing(program, width, params, kinds, body, dtypes)
    src = (C.header(dtypes) + "#define CT float\n"
           + "__kernel void k(" + ", ".join(params) + ")\n{\n    "
           + "\n    ".join(body) + "\n}\n")
    return src, kinds


PARTS = 4096  # most work-items (partial sums) of a sum over everything
CHUNK = 32  # fewest elements (vectors) a work-item sums there


def _hsum(acc: str, width: int) -> tuple[list[str], str]:
    """(statements, expression): the sum of a float``width``'s lanes, pairwise."""
    lines = []
    lanes = "0123456789abcdef"
    while width > 1:
        half = width // 2
        t = f"h{half}"
        typ = f"float{half}" if half > 1 else "float"
        lines.append(f"const {typ} {t} = {acc}.s{lanes[:half]} + {acc}.s{lanes[half:width]};")
        acc, width = t, half
    return lines, acc


def _reducing(program: dict[str, Any], width: int, params: list[str], kinds: list[str],
              body: list[str], dtypes: set[str]) -> tuple[str, list[str]]:
    """The kernel of a group ending in a sum. ``"rows"``: work-item ``r`` runs
    the elements of row ``r`` in order (``width`` at a time), adding up the
    summed step, and stores the row's sum. ``"all"``: work-item ``q`` runs
    ``chunk`` consecutive elements (vectors) and stores its partial sum into
    ``part[q]``; a second kernel ``k2`` adds the partials in order into the
    output (two launches, no atomics)."""
    steps, outs = program["steps"], program["outputs"]
    (_, src), = steps[-1][2]
    dt = steps[-1][1]
    ct = C.CTYPE[dt][1]
    acc_t = f"float{width}" if width > 1 else ct
    j = outs.index(len(steps) - 1)
    n = program["n"] // width  # elements (vectors) in all
    loop = "\n        ".join(body + [f"acc += s{src};"])
    fold, total = _hsum("acc", width)
    if program["reduce"] == "rows":
        per = program["cols"] // width
        head = ["const long r = get_global_id(0);", f"{acc_t} acc = ({acc_t})(0);",
                f"for (long i = r * {per}; i < (r + 1) * {per}; i++) {{"]
        tail = ["}", *fold, C.store(dt, f"o{j}", f"o{j}_o + r", total)]
        extra = ""
    else:
        params = params + [f"__global {ct} *part", "long chunk"]
        kinds = kinds + ["buf", "long"]
        head = ["const long q = get_global_id(0);", f"{acc_t} acc = ({acc_t})(0);",
                f"const long end = min((q + 1) * chunk, (long){n});",
                "for (long i = q * chunk; i < end; i++) {"]
        tail = ["}", *fold, f"part[q] = {total};"]
        extra = (f"__kernel void k2(__global {C.CTYPE[dt][0]} *o, long o_o, "
                 f"__global const {ct} *part, long parts)\n{{\n"
                 f"    {ct} acc = 0;\n    for (long q = 0; q < parts; q++) acc += part[q];\n"
                 f"    {C.store(dt, 'o', 'o_o', 'acc')}\n}}\n")
    src = (C.header(dtypes | {dt}) + "#define CT float\n"
           + "__kernel void k(" + ", ".join(params) + ")\n{\n    "
           + "\n    ".join(head) + "\n        " + loop + "\n    "
           + "\n    ".join(tail) + "\n}\n" + extra)
    return src, kinds


def runner(program: dict[str, Any]) -> Callable[..., None] | None:
    steps = elementwise_steps(program)
    if steps is None:
        return None
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
    if program.get("reduce"):
        return _reduce_runner(program, key, vector and n % WIDTH == 0)

    if n == 0:
        return lambda outs, ins: None

    def plan(dev: Any, count: int) -> Any:
        """The launcher of (*outs, *ins) for ``count`` operands, prepared once per thread."""
        args = [L.view(j) for j in range(count)]
        steps = []
        done = 0
        if vector:
            kv = L.kernel(dev, key + (WIDTH,), lambda: source(program, WIDTH))
            m = n // WIDTH
            steps.append((kv, args, L.ranges(m)))
            done = m * WIDTH
        if done < n:  # the tail (or all of it) one element per work-item
            k = L.kernel(dev, key, lambda: source(program))
            steps.append((k, args, L.ranges(n - done, done)))
        return L.prepare(dev, steps)

    pkey = ("fused plan",) + key[1:]

    def run(outs: list[Any], ins: list[Any]) -> None:
        dev = outs[0].buffer.dev
        p = dev.programs.get(pkey)
        if p is None:
            p = L.planned(dev, pkey, lambda: plan(dev, len(outs) + len(ins)))
        p(*outs, *ins)

    return run


def _args(outs: list[Any], ins: list[Any]) -> list[Any]:
    """A fused kernel's arguments: each output's and input's buffer and offset."""
    args: list[Any] = []
    for v in list(outs) + list(ins):
        args += [v.buffer.mem, v.offset]
    return args


def _reduce_runner(program: dict[str, Any], key: tuple, vector: bool) -> Callable[..., None]:
    width = WIDTH if vector else 1
    key = key + (width,)
    n = program["n"] // width
    dt = program["steps"][-1][1]
    item = np.dtype(dt).itemsize
    if program["reduce"] == "rows":
        rows = program["n"] // program["cols"]

        def run(outs: list[Any], ins: list[Any]) -> None:
            dev = outs[0].buffer.dev
            args = _args(outs, ins)
            L.enqueue(dev, L.kernel(dev, key, lambda: source(program, width)), rows, args)

        return run
    chunk = max(CHUNK, -(-n // PARTS))
    parts = -(-n // chunk)

    def run_all(outs: list[Any], ins: list[Any]) -> None:
        dev = outs[0].buffer.dev
        j = program["outputs"].index(len(program["steps"]) - 1)
        part = dev.alloc(parts * item, f"{parts} x {dt}")
        args = _args(outs, ins)
        L.enqueue(dev, L.kernel(dev, key, lambda: source(program, width)), parts,
                  args + [part.mem, chunk])
        k2 = L.kernel(dev, key + ("k2",), lambda: (source(program, width)[0],
                                                   ["buf", "long", "buf", "long"]), "k2")
        k2(dev.queue, (1,), (1,), outs[j].buffer.mem, outs[j].offset, part.mem, parts)

    return run_all
