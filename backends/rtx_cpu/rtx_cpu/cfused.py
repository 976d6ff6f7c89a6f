"""Fused elementwise groups as one C loop, where a C compiler is at hand.

The NumPy runner (``fused.py``) still makes one pass over memory per step of a
group, block by block. A group of IEEE-exact steps -- ``+ - * /``, ``sqrt``,
``abs``, negation, ``floor``, reciprocal, comparisons, ``where``, logic and
float casts -- computes the same values as one loop in C doing every step per
element (no fast-math, no contraction into fused multiply-adds, the step's own
float type; only a NaN's sign and payload may differ, as C may compute
``-0.0 - x`` as ``-x``), so such a group is compiled once per program into a
small shared library and called through ctypes, which lets go of the GIL: its
blocks run on the backend's threads in parallel. An optimizer's update, a
ReLU's backward become one pass.

Everything else -- transcendental steps (NumPy's SIMD ``exp``/``tanh`` are not
libm's), ``maximum``/``minimum`` (which zero NumPy returns for ``+0``/``-0``
depends on its loop), NaN constants, integer dtypes, groups ending in a sum,
groups under ``C_MIN``
elements, a machine without a compiler, a compile that fails -- stays with the
NumPy runner. ``RTX_CPU_CC=0`` turns this off; ``RTX_CPU_CC=gcc`` (a command)
picks the compiler (default: ``cc``).

The C source is made only from the closed tables below, from ints, and from
float constants written exactly (``float.hex``); a program comes from the
graph passes or from a graph file the loader validated. Libraries are written
to a directory of this process's own (``tempfile.mkdtemp``: mode 0700) and
never read from anywhere else.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import math
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from typing import Any, Callable

import numpy as np
from rtxcore.dispatch.fused import elementwise_steps, input_kinds, input_sizes, output_sizes

C_MIN = 1 << 15  # elements: smaller groups stay with NumPy (a call costs ~10 us)
# (compiled on the machine that runs it, for its own vector instructions)
FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math",
         "-fno-math-errno"]

_C_TYPE = {"float32": "float", "float64": "double", "bool": "unsigned char"}
_NP_TYPE = {"float32": np.float32, "float64": np.float64, "bool": np.bool_}
# (not maximum/minimum: which of +0 and -0 NumPy returns for equal operands
# depends on its loop -- SIMD or scalar, an array or a scalar operand)
_BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
           "div": "({a} / {b})"}
_COMPARE = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
_LOGIC = {"logical_and": "&&", "logical_or": "||"}
_UNARY = {"neg": "(-{a})", "sqrt": "sqrt{f}({a})", "abs": "fabs{f}({a})",
          "floor": "floor{f}({a})", "reciprocal": "(({t})1 / {a})", "copy": "{a}",
          "cast": "{a}"}
OPS = set(_BINARY) | set(_COMPARE) | set(_LOGIC) | set(_UNARY) | {"where", "logical_not"}


def _compiler() -> str | None:
    cc = os.environ.get("RTX_CPU_CC", "cc")
    if cc in ("0", "", "off", "false"):
        return None
    return shutil.which(cc)


def eligible(program: dict[str, Any]) -> bool:
    """Whether ``program`` compiles to a C loop with NumPy's values."""
    # (the contract's check of its form comes first: the loop indexes raw memory
    # with its numbers, and each input's checked size is the size it reads)
    if elementwise_steps(program) is None or program.get("reduce") or program["n"] < C_MIN:
        return False
    if any(dt not in _C_TYPE for dt in program["inputs"]):
        return False
    dtypes: list[str] = []
    for op, dt, operands in program["steps"]:
        if op not in OPS or dt not in _C_TYPE:
            return False
        # (a NaN constant's sign and payload would not survive as C's NAN)
        if any(kind == "const" and (not isinstance(v, (bool, int, float)) or v != v)
               for kind, v in operands):
            return False
        kinds = [_operand_dtype(program, dtypes, kind, v) for kind, v in operands]
        if op in _BINARY or op in _UNARY and op != "cast":
            # the core promotes first: every tensor operand has the step's dtype
            if dt == "bool" or any(k not in (dt, None) for k in kinds):
                return False
        elif op == "cast":
            if kinds[0] is None:
                return False
        elif op in _COMPARE:
            known = {k for k in kinds if k is not None}
            if dt != "bool" or len(known) != 1 or "bool" in known:
                return False
        elif op in _LOGIC or op == "logical_not":
            if dt != "bool" or any(k not in ("bool", None) for k in kinds):
                return False
        elif op == "where":
            if kinds[0] != "bool" or dt == "bool" or any(k not in (dt, None) for k in kinds[1:]):
                return False
        dtypes.append(dt)
    return True


def _operand_dtype(program: dict[str, Any], dtypes: list[str], kind: str, v: Any) -> str | None:
    if kind == "step":
        return dtypes[v]
    if kind == "const":
        return None
    return program["inputs"][v]


def _literal(v: Any, dt: str) -> str:
    """A C literal of Python number ``v`` as the step's type takes it (NumPy
    casts a Python scalar to the array's dtype first)."""
    if dt == "bool":
        return "1" if v else "0"
    x = float(v)
    t = _C_TYPE[dt]
    if math.isnan(x):
        return f"(({t})NAN)"
    if math.isinf(x):
        return f"(({t})({'-' if x < 0 else ''}INFINITY))"
    return f"(({t}){x.hex()})"  # exact; (float) of it rounds as np.float32(v)


def source(program: dict[str, Any]) -> str:
    """The C source of ``program``: ``run(outs, ins, lo, hi)`` over elements
    (rows, with row/column operands) ``lo`` to ``hi``."""
    n, cols = program["n"], program.get("cols", 0)
    read = {int(v) for _, _, operands in program["steps"] for kind, v in operands
            if kind in ("in", "scalar", "row", "col")}
    kinds = {v: k for v, k in enumerate(input_kinds(program)) if v in read}
    index = {"in": "i", "scalar": "0", "row": "c", "col": "r"}
    dtypes: list[str] = []
    body: list[str] = []
    for k, (op, dt, operands) in enumerate(program["steps"]):
        t = _C_TYPE[dt]

        def arg(kind: str, v: Any, want: str) -> str:
            if kind == "const":
                return _literal(v, want)
            if kind == "step":
                return f"s{int(v)}"
            return f"x{int(v)}"  # loaded up front: a select then needs no branch

        odt = [_operand_dtype(program, dtypes, kind, v) for kind, v in operands]
        if op in _BINARY:
            a, b = (arg(kind, v, dt) for kind, v in operands)
            expr = _BINARY[op].format(a=a, b=b)
        elif op in _COMPARE:
            want = next(d for d in odt if d is not None)
            a, b = (arg(kind, v, want) for kind, v in operands)
            expr = f"({a} {_COMPARE[op]} {b})"
        elif op in _LOGIC:
            a, b = (arg(kind, v, "bool") for kind, v in operands)
            expr = f"({a} {_LOGIC[op]} {b})"
        elif op == "logical_not":
            expr = f"(!{arg(*operands[0], 'bool')})"
        elif op == "where":
            c, a, b = (arg(kind, v, "bool" if j == 0 else dt)
                       for j, (kind, v) in enumerate(operands))
            expr = f"({c} ? {a} : {b})"
        elif op == "cast":
            a = arg(*operands[0], odt[0] or dt)
            expr = f"({a} != 0)" if dt == "bool" else f"(({t}){a})"
        else:
            f = "f" if dt == "float32" else ""
            expr = _UNARY[op].format(a=arg(*operands[0], dt), f=f, t=t)
        body.append(f"{t} s{k} = ({t}){expr};")
        dtypes.append(dt)
    stores = [f"O{j}[i] = s{int(k)};" for j, k in enumerate(program["outputs"])]
    loads = [f"{_C_TYPE[program['inputs'][v]]} x{v} = I{v}[{index[kind]}];"
             for v, kind in sorted(kinds.items())]
    lines = ["#include <math.h>", "#include <stdint.h>",
             # no iteration depends on another (an output is at most its own
             # element's input): the loop may be vectorised without alias checks
             "#if defined(__clang__)",
             '#define RTX_IVDEP _Pragma("clang loop vectorize(assume_safety)")',
             "#elif defined(__GNUC__)",
             '#define RTX_IVDEP _Pragma("GCC ivdep")',
             "#else",
             "#define RTX_IVDEP",
             "#endif",
             "void run(void **outs, void **ins, int64_t lo, int64_t hi) {"]
    for v in sorted(kinds):
        lines.append(f"    const {_C_TYPE[program['inputs'][v]]} *I{v} = ins[{v}];")
    for j, k in enumerate(program["outputs"]):
        lines.append(f"    {_C_TYPE[program['steps'][int(k)][1]]} *O{j} = outs[{j}];")
    # every step of element i is computed before any output of it is stored: an
    # output may be an input's memory (in place)
    inner = ["        " + x for x in loads + body + stores]
    if cols:
        lines += [f"    for (int64_t r = lo; r < hi; r++) {{",
                  "        RTX_IVDEP",
                  f"        for (int64_t c = 0; c < {int(cols)}; c++) {{",
                  f"            int64_t i = r * {int(cols)} + c;",
                  *["    " + x for x in inner], "        }", "    }"]
    else:
        lines += ["    RTX_IVDEP", "    for (int64_t i = lo; i < hi; i++) {", *inner, "    }"]
    lines.append("}")
    return "\n".join(lines) + "\n"


_lock = threading.Lock()
_dir: str | None = None
_libs: dict[str, Any] = {}  # source digest -> the loaded library (None: failed)
_warned = False


def library(src: str, what: str, extra: tuple[str, ...] = ()) -> Any:
    """The shared library compiled from C source ``src``, once per process (None
    where there is no compiler or the compile failed: the caller runs NumPy's
    form; ``what`` names the caller in the one warning a failure gives; ``extra``:
    more flags, such as ``-pthread``)."""
    global _dir, _warned
    key = hashlib.sha256(src.encode()).hexdigest()[:32]
    with _lock:
        if key in _libs:
            return _libs[key]
        cc = _compiler()
        lib = None
        if cc is not None:
            if _dir is None:
                _dir = tempfile.mkdtemp(prefix="rtx-cpu-fused-")
                atexit.register(shutil.rmtree, _dir, True)  # (a loaded library stays mapped)
            c_path, so_path = os.path.join(_dir, key + ".c"), os.path.join(_dir, key + ".so")
            with open(c_path, "w") as f:
                f.write(src)
            for flags in (FLAGS, [f for f in FLAGS if f != "-march=native"]):
                r = subprocess.run([cc, *flags, *extra, "-o", so_path, c_path, "-lm"],
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    break
            if r.returncode == 0:
                lib = ctypes.CDLL(so_path)
            elif not _warned:
                _warned = True
                warnings.warn(f"rtx_cpu: compiling {what} with {cc} failed; they run on NumPy "
                              f"instead ({r.stderr.strip()[:300]})", stacklevel=3)
        _libs[key] = lib
        return lib


# the float types of the fixed C sources (ckernels, cconv): dtype -> (function
# name suffix, C type); their templates are written once per entry
FLOAT_TYPES = {np.dtype(np.float32): ("f32", "float"), np.dtype(np.float64): ("f64", "double")}


def typed_functions(lib: Any, signatures: dict[str, tuple[list[Any], Any]]
                    ) -> dict[tuple[str, np.dtype], Any]:
    """{(name, dtype): function} of ``lib`` for every ``name`` in ``signatures``
    ((argtypes, restype)) and every float type: ``<name>_f32``, ``<name>_f64``."""
    funcs: dict[tuple[str, np.dtype], Any] = {}
    for dt, (suffix, _) in FLOAT_TYPES.items():
        for name, (args, res) in signatures.items():
            fn = getattr(lib, f"{name}_{suffix}")
            fn.argtypes, fn.restype = args, res
            funcs[name, dt] = fn
    return funcs


def _build(src: str) -> Any:
    """The ``run`` function of a fused group's source, compiled once per process."""
    lib = library(src, "a fused group")
    if lib is None:
        return None
    fn = lib.run
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    fn.restype = None
    return fn


def _address(a: np.ndarray) -> int:
    """The address of ``a``'s first element: through the buffer protocol where
    ``a`` (or ``a.T``, the same first element) is C-contiguous and writable
    (``a.ctypes`` costs ~1-2 us an operand), else ``a.ctypes``."""
    for v in (a, a.T):
        if v.flags.c_contiguous:
            try:
                return ctypes.addressof(ctypes.c_char.from_buffer(v))
            except (TypeError, ValueError, BufferError):  # read-only, or empty
                break
    return a.ctypes.data


def typed(src: str, what: str, signatures: dict[str, tuple[list[Any], Any]]
          ) -> dict[tuple[str, np.dtype], Any]:
    """``typed_functions`` of the library compiled from ``src`` ({} where there is
    no compiler now -- ``RTX_CPU_CC=0`` set after an earlier compile too -- or the
    compile failed)."""
    lib = None if _compiler() is None else library(src, what)
    return {} if lib is None else typed_functions(lib, signatures)


class TypedLoops:
    """A module's fixed C loops, compiled on first use (``typed``): called as
    ``loops(name, dtype)``, the function ``<name>_f32``/``<name>_f64`` or None
    (no compiler, or the compile failed). ``source`` is the text, or a function
    making it. ``reset()`` forgets them: the next call looks for a compiler again."""

    def __init__(self, source: str | Callable[[], str], what: str,
                 signatures: dict[str, tuple[list[Any], Any]]) -> None:
        self._source, self._what, self._signatures = source, what, signatures
        self._funcs: dict[tuple[str, np.dtype], Any] | None = None
        self._lock = threading.Lock()

    def __call__(self, name: str, dtype: np.dtype) -> Any:
        funcs = self._funcs
        if funcs is None:
            with self._lock:
                if self._funcs is None:
                    src = self._source if isinstance(self._source, str) else self._source()
                    self._funcs = typed(src, self._what, self._signatures)
                funcs = self._funcs
        return funcs.get((name, dtype))

    def reset(self) -> None:
        with self._lock:
            self._funcs = None


def runner(program: dict[str, Any], threads: Callable[[], int], pool: Callable[[], Any],
           parallel_min: int) -> Callable[..., None] | None:
    """A runner ``(outs, ins)`` of ``program`` as compiled C, or None (NumPy's)."""
    if not eligible(program) or _compiler() is None:
        return None
    fn = _build(source(program))
    if fn is None:
        return None
    n, cols = program["n"], program.get("cols", 0)
    total = n // cols if cols else n  # rows, or elements
    n_in, n_out = len(program["inputs"]), len(program["outputs"])
    in_t, out_t = ctypes.c_void_p * max(1, n_in), ctypes.c_void_p * max(1, n_out)
    unit = max(1, 4096 // cols) if cols else 4096  # a thread's share: whole units of these

    sizes = output_sizes(program), input_sizes(program)
    dts = ([np.dtype(_NP_TYPE[program["steps"][int(k)][1]]) for k in program["outputs"]],
           [np.dtype(_NP_TYPE[d]) for d in program["inputs"]])

    def check(arrays: list[Any], which: int) -> None:
        # the loop trusts sizes and types: a mismatch is an error here, not a read
        # outside an array
        for a, size, dt in zip(arrays, sizes[which], dts[which]):
            if a.size != size or a.dtype != dt or not a.flags.c_contiguous or \
                    (which == 0 and not a.flags.writeable):
                raise ValueError(f"fused group: an operand of {a.size} {a.dtype} elements "
                                 f"where the program takes {size} {dt}")
        if len(arrays) != len(sizes[which]):
            raise ValueError("fused group: wrong number of operands")

    def call(outs: list[Any], ins: list[Any]) -> None:
        check(outs, 0)
        check(ins, 1)
        o = out_t(*[_address(a) for a in outs])
        i = in_t(*[_address(a) for a in ins])
        parts = min(threads(), -(-total // unit)) if n >= parallel_min else 1
        if parts <= 1 or threading.current_thread().name.startswith("rtx-cpu-fused"):
            fn(o, i, 0, total)
            return
        step = -(-total // parts)
        futures = []
        try:  # (every piece handed out is waited for, whatever fails: it writes
            for lo in range(step, total, step):  # through raw pointers)
                futures.append(pool().submit(fn, o, i, lo, min(lo + step, total)))
            fn(o, i, 0, min(step, total))
        finally:
            for f in futures:
                f.result()

    return call
