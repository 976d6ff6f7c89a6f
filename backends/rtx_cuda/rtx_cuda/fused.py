"""Fused elementwise groups as one generated CUDA kernel.

A group's steps become one C++ expression each, evaluated in registers one
after the other by a grid-stride loop; only the group's outputs are stored. One
launch and one pass over device memory replace one launch and one full read and
write per op. ``source(program)`` is plain CUDA C (no headers), so NVRTC
compiles it without a GPU: the tests check that it compiles for every
architecture the backend targets. CuPy's ``RawKernel`` compiles it on first use
and keeps the binary in its kernel cache.

Not fused here (``runner`` returns None and the core runs the steps one by
one): float16 (it needs ``cuda_fp16.h``), integer ``pow`` (C's semantics need
a loop), and any op outside the table below.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable

import numpy as np
from rtxcore.dispatch import cexpr as CX
from rtxcore.dispatch.fused import elementwise_steps

from . import runtime as R

# NVRTC's options: by default it contracts a * b + c into an FMA, one rounding
# where the steps run one by one round twice -- a compiled group would not give
# the eager ops' values
FLAGS = ("--fmad=false",)

# dtype name -> C++ type (the storage type; bool is one byte, as CuPy's)
CTYPE = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
         "int64": "long long", "uint8": "unsigned char", "float32": "float",
         "float64": "double"}
FLOATS = ("float32", "float64")

# op -> (expression on floats, on integers or bool): the contract's C expressions
# (``CT`` the operands' C type, ``ISNAN`` C's isnan: both replaced per step)
UNARY, BINARY, TERNARY = dict(CX.UNARY), dict(CX.BINARY), dict(CX.TERNARY)
_TOKEN = re.compile(r"\b(a|b|c|CT|ISNAN)\b")
BLOCK = 256
MAX_BLOCKS = 4096  # a grid-stride loop past this: ~1M threads fill any current GPU


def _literal(v: Any, dtype: str) -> str:
    if isinstance(v, bool) or dtype == "bool":
        return "true" if v else "false"
    if dtype in FLOATS:
        f = float(v)
        single = dtype == "float32"
        if math.isnan(f):  # (NVRTC has no math.h macros: the bits)
            return "__int_as_float(0x7fc00000)" if single else \
                "__longlong_as_double(0x7ff8000000000000LL)"
        if math.isinf(f):
            bits = ("0x7f800000" if f > 0 else "0xff800000") if single else \
                ("0x7ff0000000000000LL" if f > 0 else "0xfff0000000000000LL")
            return f"__int_as_float({bits})" if single else f"__longlong_as_double({bits})"
        # hex: exactly the value the cpu kernels use (a decimal rounded straight to
        # float could differ from NumPy's double-then-float rounding)
        return f"{float(np.float32(f)).hex()}f" if single else f.hex()
    return f"(({CTYPE[dtype]}){int(v)}LL)"


# unsigned and bool operands: no comparisons with zero (NVRTC warns they're pointless)
_UNSIGNED = {"abs": "a", "sign": "(CT)(a != 0)"}


def _expression(op: str, dtype: str) -> str:
    if dtype in ("uint8", "bool") and op in _UNSIGNED:
        return _UNSIGNED[op]
    table = UNARY if op in UNARY else BINARY if op in BINARY else TERNARY
    return CX.pick(table, op, dtype, dtype in FLOATS, "cuda fused")


def supported(program: dict[str, Any]) -> bool:
    """Whether ``runner`` makes a kernel of ``program``: a program of the
    contract's form (``rtxcore.dispatch.fused``) whose steps are all in the
    tables, on dtypes with a C type here."""
    steps = elementwise_steps(program)
    if steps is None:
        return False
    dtypes = set(program["inputs"]) | {dt for _, dt, _ in program["steps"]}
    if not dtypes <= set(CTYPE):
        return False  # float16, complex, ...
    for op, dt, _ in steps:
        if op not in UNARY and op not in BINARY and op not in TERNARY:
            return False
        if op == "pow" and dt not in FLOATS:
            return False
    return True


def source(program: dict[str, Any], name: str = "fused") -> str:
    """The CUDA C of kernel ``name`` running ``program``: ``name(o0, ..., x0,
    ..., n)``, each output and input a pointer to ``n`` contiguous elements.

    A group ending in a sum (``"reduce"``): for ``"rows"`` each thread runs
    the elements of its rows in order and stores each row's sum (one thread a
    row: simple, and uncoalesced where rows are long); for ``"all"`` each
    thread adds up the elements of its grid-stride loop into ``part[thread]``
    (one more parameter), which the runner then sums."""
    ins, steps, outs = program["inputs"], program["steps"], program["outputs"]
    reduce = program.get("reduce")
    params = [f"{CTYPE[steps[k][1]]}* o{j}" for j, k in enumerate(outs)]
    if reduce:
        (_, src), = steps[-1][2]
        red_t, red_j = CTYPE[steps[-1][1]], outs.index(len(steps) - 1)
        steps = steps[:-1]
    params += [f"const {CTYPE[dt]}* x{i}" for i, dt in enumerate(ins)]
    params.append("const long long n")
    read = {v for _, _, operands in steps for kind, v in operands if kind == "in"}
    scalars = {v for _, _, operands in steps for kind, v in operands if kind == "scalar"}
    cols = program.get("cols", 0)
    at = {v: f"i % {cols}" if kind == "row" else f"i / {cols}"
          for _, _, operands in steps for kind, v in operands if kind in ("row", "col")}
    body = [f"const {CTYPE[dt]} p{i} = x{i}[i];" for i, dt in enumerate(ins) if i in read]
    body += [f"const {CTYPE[dt]} p{i} = x{i}[{at[i]}];" for i, dt in enumerate(ins) if i in at]
    # a scalar input: one element, the same for every thread (read before the loop)
    head = "".join(f"    const {CTYPE[dt]} p{i} = x{i}[0];\n" for i, dt in enumerate(ins)
                   if i in scalars)
    step_dt = [dt for _, dt, _ in steps]
    for k, (op, dt, operands) in enumerate(steps):
        known = [ins[v] if kind in ("in", "scalar", "row", "col") else
                 step_dt[v] if kind == "step" else None for kind, v in operands]
        # the type the op computes in: its operands' (comparisons, logical ops,
        # cast) or its result's
        if op in CX.COMPARISONS or op in ("cast", "logical_not"):
            opnd = next((d for d in known if d is not None), dt)
        else:
            opnd = dt
        names = []
        for j, ((kind, v), d) in enumerate(zip(operands, known)):
            if kind in ("in", "scalar", "row", "col"):
                names.append(f"p{v}")
            elif kind == "step":
                names.append(f"s{v}")
            else:
                names.append(_literal(v, "bool" if op == "where" and j == 0 else opnd))
        sub = {**{v: f"({x})" for v, x in zip("abc", names)}, "CT": CTYPE[opnd], "ISNAN": "isnan"}
        expr = _TOKEN.sub(lambda m: sub[m.group(1)], _expression(op, opnd))
        body.append(f"const {CTYPE[dt]} s{k} = ({CTYPE[dt]})({expr});")
    body += [f"o{j}[i] = s{k};" for j, k in enumerate(outs) if k < len(steps)]
    if reduce == "rows":
        cols = program["cols"]
        body.append(f"acc += s{src};")
        loop = "\n            ".join(body)
        return (f'extern "C" __global__ void {name}({", ".join(params)})\n{{\n'
                f"{head}"
                "    const long long stride = (long long)blockDim.x * gridDim.x;\n"
                f"    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; "
                f"r < n / {cols}; r += stride) {{\n"
                f"        {red_t} acc = 0;\n"
                f"        for (long long i = r * {cols}; i < (r + 1) * {cols}; i++) {{\n"
                f"            {loop}\n        }}\n"
                f"        o{red_j}[r] = acc;\n    }}\n}}\n")
    if reduce == "all":
        params.insert(-1, f"{red_t}* part")
        body.append(f"acc += s{src};")
        loop = "\n        ".join(body)
        return (f'extern "C" __global__ void {name}({", ".join(params)})\n{{\n'
                f"{head}"
                "    const long long stride = (long long)blockDim.x * gridDim.x;\n"
                "    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                f"    {red_t} acc = 0;\n"
                "    for (long long i = t; i < n; i += stride) {\n"
                f"        {loop}\n    }}\n"
                "    part[t] = acc;\n}\n")
    loop = "\n        ".join(body)
    return (f'extern "C" __global__ void {name}({", ".join(params)})\n{{\n'
            f"{head}"
            "    const long long stride = (long long)blockDim.x * gridDim.x;\n"
            "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
            "i += stride) {\n"
            f"        {loop}\n    }}\n}}\n")


_compiled: dict[tuple[str, int], Any] = {}


def runner(program: dict[str, Any]) -> Callable[[list[Any], list[Any]], None] | None:
    if not supported(program):
        return None
    try:
        code = source(program)
    except TypeError:
        return None  # an op not defined for a dtype: the core runs the steps one by one
    key = json.dumps(program, sort_keys=True, default=str)
    n = program["n"]
    reduce = program.get("reduce")
    work = n // program["cols"] if reduce == "rows" else n  # threads' items: rows or elements
    blocks = min((work + BLOCK - 1) // BLOCK, MAX_BLOCKS)

    def run(outs: list[Any], ins: list[Any]) -> None:
        if n == 0:
            return
        cp = R.cp
        dev = outs[0].device
        with dev:
            k = _compiled.get((key, dev.id))
            if k is None:
                # (no contraction into FMAs: a step rounds as its own kernel does)
                k = _compiled[(key, dev.id)] = cp.RawKernel(code, "fused", options=FLAGS)
            if reduce == "all":  # each thread's sum, then theirs
                j = program["outputs"].index(len(program["steps"]) - 1)
                part = cp.empty(blocks * BLOCK, outs[j].dtype)
                k((blocks,), (BLOCK,), (*outs, *ins, part, cp.int64(n)))
                cp.sum(part, keepdims=True, out=outs[j].reshape(1))
            else:
                k((blocks,), (BLOCK,), (*outs, *ins, cp.int64(n)))

    return run
