"""Elementwise kernels on OpenCL (op families, where, fills, copies, casts, random) and memory.

Each op turns its views into a layout (``launch.plan``), looks up the compiled
kernel for (op, dtypes, layout) in its device's cache, and enqueues it; the
unary, binary and cast ops of one signature compile as one program (a
family). Nothing here waits for the device except ``to_host``.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import View, contiguous_strides

from . import codegen as C
from . import launch as L
from . import runtime as R
from .runtime import Buffer


def elementwise(op: str, expr: str, out: View, ins: list[Any], in_dtypes: list[str],
                prologue: str = "", ct: str | None = None,
                extra: tuple[tuple[str, str], ...] = (), extra_args: tuple = (),
                out_dtype: str | None = None,
                family: tuple[str, str, dict[str, Member]] | None = None) -> None:
    """``out = expr(ins)``. ``ins`` are Views or scalars (already of their op's
    dtype); ``in_dtypes`` names each one's dtype, ``out_dtype`` out's if it is
    to be read as another (a bit copy). ``family``: (its name, this kernel's
    label in it, {label: Member}), kernels with this one's inputs and layout,
    compiled with it as one program (``launch.family_kernel``). ``extra_args``
    are the values of the ``extra`` parameters. The launch is prepared once per
    signature (op, dtypes, shapes, strides: ``launch.planned``)."""
    key = (_PLAN, op, out_dtype, out.dtype, out.shape, out.strides, *in_dtypes,
           *[v.strides if type(v) is View else None for v in ins])
    L.planned(out.buffer.dev, key, lambda: elementwise_plan(
        op, expr, out, ins, in_dtypes, prologue, ct, extra, len(extra_args), out_dtype,
        family))(out, *ins, *extra_args)


_PLAN = "elementwise plan"  # (the first item of a plan's key: never an op's name)


def elementwise_plan(op: str, expr: str, out: View, ins: list[Any], in_dtypes: list[str],
                     prologue: str = "", ct: str | None = None,
                     extra: tuple[tuple[str, str], ...] = (), n_extra: int = 0,
                     out_dtype: str | None = None,
                     family: tuple[str, str, dict[str, Member]] | None = None,
                     ) -> Callable[..., None]:
    """``elementwise``'s launcher for the signature of ``out`` and ``ins``: a
    function of (out, *ins, *extra values) for any operands of these dtypes,
    shapes and strides."""
    n = prod(out.shape)
    if n == 0:
        return L.noop
    dev = out.buffer.dev
    views = [v for v in ins if type(v) is View]
    lay, dims, sts = L.plan(out, views)
    if lay == "s":
        dims, sts = L.split_last(dims, sts)
    rank = len(dims)
    layouts = tuple("k" if type(v) is not View else lay for v in ins)
    odt = out_dtype or out.dtype.name
    # strided, rank 2+: launched as (last dim, rows) where the last dim makes a
    # work-group (L.row_ranges): the rows' index math once per group, not per element
    row_launch = L.row_ranges(dims, dev.max_work_group) if lay == "s" and rank >= 2 else None
    rows = row_launch is not None
    key = (op, odt, *in_dtypes, lay + "".join(layouts), rank if lay == "s" else 0) + \
        (("rows",) if rows else ())

    def make() -> tuple[str, list[str]]:
        return C.elementwise(op, expr, (odt, lay), list(zip(in_dtypes, layouts)),
                             rank if lay == "s" else 1, prologue, ct, extra, rows=rows)

    k = dev.programs.get(key)
    if k is None and family is None:
        k = L.kernel(dev, key, make)
    elif k is None:
        fname, label, members = family
        # (this op as called: its expression and prologue, whatever the family says)
        members = {**members, label: (op, expr, prologue, members[label][3])}

        def maker(m: Member) -> Callable[[str], tuple[str, list[str]]]:
            return lambda name: C.elementwise(m[0], m[1], (m[3] or odt, lay),
                                              list(zip(in_dtypes, layouts)),
                                              rank if lay == "s" else 1, m[2], ct, extra, name,
                                              rows=rows)

        # (the program's key: the family and everything of this key but op and out dtype)
        program = (fname, odt if members[label][3] is None else None, *key[2:])
        k = L.family_kernel(dev, key, label, program, {lb: maker(m) for lb, m in members.items()})
    # the arguments: out, then each input (a view, or a scalar), as operands 0, 1, ...
    args: list[Any] = [L.view(0)] + (sts[0] if lay == "s" else [])
    j = 1
    for i, v in enumerate(ins):
        if type(v) is View:
            args += [L.view(i + 1)] + (sts[j] if lay == "s" else [])
            j += 1
        else:
            args.append(L.value(i + 1))
    if lay == "s":
        args += dims[1:]
    args += [L.value(len(ins) + 1 + e) for e in range(n_extra)]
    if (lay == "c" and op in C.VECTOR_OPS and odt == "float32" and n >= C.WIDTH
            and not prologue and not extra and all(d == "float32" for d in in_dtypes)):
        # float32, contiguous: WIDTH elements a work-item on vector types, where
        # PoCL vectorises exp/tanh/...; the tail, one element at a time
        kv = L.kernel(dev, key + ("v",), lambda: C.elementwise_vector(op, expr, list(layouts)))
        m = n // C.WIDTH
        steps = [(kv, args, L.ranges(m))]
        if m * C.WIDTH < n:
            steps.append((k, args, L.ranges(n - m * C.WIDTH, m * C.WIDTH)))
        return L.prepare(dev, steps)
    return L.prepare(dev, [(k, args, row_launch or L.ranges(n))])


def _dtype_of(v: Any, other: Any) -> str:
    return (v if type(v) is View else other).dtype.name


# A kernel of a family: (op, expression, prologue, out dtype: None for the
# launch's own). The label names it in its family's program.
Member = tuple[str, str, str, "str | None"]
_FAMILIES: dict[tuple[str, str], dict[str, Member]] = {}


def _members(kind: str, dt: str) -> dict[str, Member]:
    """The ``unary`` or ``binary`` ops defined on ``dt`` (label: the op), or the
    casts from ``dt`` to every other dtype (``cast``; label: the target)."""
    members = _FAMILIES.get((kind, dt))
    if members is None:
        members = {}
        if kind == "cast":
            members = {odt: ("cast", "a", "", odt) for odt in C.CTYPE if odt != dt}
        table = C.UNARY if kind == "unary" else C.BINARY if kind == "binary" else {}
        for op, (fl, it) in table.items():
            # (the expression a kernel of its own would have: rtx_tanh, not tanh)
            expr = (C.expression(table, op, dt) if fl is not None else None) \
                if dt in C.FLOATS else it
            if expr is not None and op not in ("copy", "cast"):
                members[op] = (op, expr, _prologue(op, dt), None)
        _FAMILIES[(kind, dt)] = members
    return members


def _prologue(op: str, dt: str) -> str:
    """The helper code a binary op's kernel needs before it: integer pow's
    function, the float composites' macros, or nothing."""
    return C.INT_POW if op == "pow" and dt not in C.FLOATS else \
        C.FLOAT_DIVMOD if op in C.FLOAT_ONLY else ""


def unary(op: str) -> Callable[..., None]:
    tag = f"{op} plan"

    def kernel(out: View, x: View) -> None:
        key = (tag, out.dtype, out.shape, out.strides, x.dtype, x.strides)
        p = out.buffer.dev.programs.get(key)
        if p is None:
            dt = x.dtype.name
            p = L.planned(out.buffer.dev, key, lambda: elementwise_plan(
                op, C.expression(C.UNARY, op, dt), out, [x], [dt],
                family=("unary", op, _members("unary", dt))))
        p(out, x)

    kernel.__name__ = op
    return kernel


def binary(op: str) -> Callable[..., None]:
    tag = f"{op} plan"

    def kernel(out: View, x: Any, y: Any) -> None:
        # (a scalar operand's key: None; its dtype is the other's)
        key = (tag, out.dtype, out.shape, out.strides,
               x.dtype if type(x) is View else y.dtype,
               x.strides if type(x) is View else None, y.strides if type(y) is View else None)
        p = out.buffer.dev.programs.get(key)
        if p is None:
            dt = _dtype_of(x, y)
            p = L.planned(out.buffer.dev, key, lambda: elementwise_plan(
                op, C.expression(C.BINARY, op, dt), out, [x, y], [dt, dt], _prologue(op, dt),
                family=("binary", op, _members("binary", dt))))
        p(out, x, y)

    kernel.__name__ = op
    return kernel


def gelu(out: View, x: View, approximate: str) -> None:
    """The ``gelu`` composite as one kernel (the core's form launches six)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")
    dt = x.dtype.name
    elementwise(f"gelu_{approximate}", C.gelu_expression(approximate, dt), out, [x], [dt],
                ct=C.CTYPE[dt][1])


def gelu_backward(out: View, g: View, x: View, y: View, approximate: str) -> None:
    """The ``gelu_backward`` composite (out = g * gelu'(x), y = gelu(x)) as one kernel."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu_backward: approximate must be 'none' or 'tanh', not "
                         f"{approximate!r}")
    dt = x.dtype.name
    prologue, expr = C.gelu_backward_source(approximate, dt)
    elementwise(f"gelu_backward_{approximate}", expr, out, [g, x, y], [dt, dt, dt], prologue,
                ct=C.CTYPE[dt][1])


def where(out: View, cond: View, x: Any, y: Any) -> None:
    dt = out.dtype.name
    elementwise("where", "a ? b : c", out, [cond, x, y], ["bool", dt, dt], ct=C.CTYPE[dt][1])


# -- memory -----------------------------------------------------------------------------


# (shape, dtype, device index) -> (device, bytes, contiguous strides) of an allocation
_EMPTY: dict[tuple[Any, ...], tuple[R.Device, int, tuple[int, ...]]] = {}


def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[Buffer, View]:
    e = _EMPTY.get((shape, dtype, index))
    if e is None:
        if len(_EMPTY) >= 4096:
            _EMPTY.clear()
        e = _EMPTY[shape, dtype, index] = (R.device(index), prod(shape) * dtype.itemsize,
                                           contiguous_strides(shape))
    dev, nbytes, strides = e
    buf = dev.alloc(nbytes, dtype)
    return buf, View(buf, shape, strides, 0, dtype)


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[Buffer, View]:
    buf, view = empty(arr.shape, dtype, index)
    R.write(buf, np.ascontiguousarray(arr, dtype.numpy))
    return buf, view


def to_host(x: View) -> np.ndarray:
    out = np.empty(x.shape, x.dtype.numpy)
    if out.size == 0:
        return out
    if not x.is_contiguous():
        _, tmp = empty(x.shape, x.dtype, x.buffer.dev.index)
        copy(tmp, x)
        x = tmp
    R.read(out, x.buffer, x.offset * x.dtype.itemsize)
    return out


def full(out: View, value: Any) -> None:
    dt = out.dtype.name
    elementwise("full", "a", out, [value], [dt])


def copy(out: View, x: View) -> None:
    n = prod(out.shape)
    if n and out.is_contiguous() and x.is_contiguous():
        isz = x.dtype.itemsize
        # (what cl.enqueue_copy calls for buffer to buffer, without its dispatch)
        R.cl._cl._enqueue_copy_buffer(out.buffer.dev.queue, x.buffer.mem, out.buffer.mem,
                                      n * isz, x.offset * isz, out.offset * isz)
        return
    # copied as bits: same-size integers (a float16 NaN keeps its payload)
    bits = _BITS.get(x.dtype.name, x.dtype.name)
    elementwise("copy", "a", out, [x], [bits], out_dtype=bits)


_BITS = {"float16": "int16", "float32": "int32", "float64": "int64"}


def cast(out: View, x: View) -> None:
    if out.dtype is x.dtype:
        return copy(out, x)
    idt = x.dtype.name
    elementwise("cast", "a", out, [x], [idt],
                family=("cast", out.dtype.name, _members("cast", idt)))


def arange(out: View, start: Any, step: Any) -> None:
    dev = out.buffer.dev
    dt = out.dtype.name
    if dt in C.FLOATS or not (isinstance(start, int) and isinstance(step, int)):
        wide = "float64" if dev.fp64 else "float32"  # (then truncated to an int dtype)
    else:
        wide = "int64"
    elementwise("arange", "a + (CT)i * b", out, [start, step], [wide, wide],
                ct=C.CTYPE[wide][1])


# counter-based random numbers: Philox4x32-10, one counter per element
PHILOX = """
uint4 philox(ulong ctr, ulong key) {
    uint4 c = (uint4)((uint)ctr, (uint)(ctr >> 32), 0u, 0u);
    uint2 k = (uint2)((uint)key, (uint)(key >> 32));
    for (int r = 0; r < 10; r++) {
        uint hi0 = mul_hi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        uint hi1 = mul_hi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += (uint2)(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}
"""

# uniform in [0, 1) from the draw `r`, exactly representable in each dtype
_UNIT = {
    "float16": "(float)(r.x >> 21) * 0x1.0p-11f",
    "float32": "(float)(r.x >> 8) * 0x1.0p-24f",
    "float64": "((double)(r.x >> 5) * 67108864.0 + (double)(r.y >> 6)) * 0x1.0p-53",
}
# a standard normal by Box-Muller (u1 in (0, 1], so the log is finite)
_NORMAL = {
    "float16": "sqrt(-2.0f * log(((float)(r.x >> 8) + 1.0f) * 0x1.0p-24f)) "
               "* cospi(2.0f * (float)(r.y >> 8) * 0x1.0p-24f)",
    "float32": "sqrt(-2.0f * log(((float)(r.x >> 8) + 1.0f) * 0x1.0p-24f)) "
               "* cospi(2.0f * (float)(r.y >> 8) * 0x1.0p-24f)",
    "float64": "sqrt(-2.0 * log(((double)(r.x >> 5) * 67108864.0 + (double)(r.y >> 6) + 1.0) "
               "* 0x1.0p-53)) * cospi(2.0 * ((double)(r.z >> 5) * 67108864.0 "
               "+ (double)(r.w >> 6)) * 0x1.0p-53)",
}


def _random(op: str, draw: str, out: View, a: float, b: float, seed: int, offset: int) -> None:
    dt = out.dtype.name
    ct = C.CTYPE[dt][1]
    pro = PHILOX + f"CT draw(ulong ctr, ulong key) {{ uint4 r = philox(ctr, key); return {draw}; }}\n"
    elementwise(op, "a + draw(ctr + i, key) * b", out, [a, b], [dt, dt], pro, ct,
                extra=(("ulong key", "ulong"), ("ulong ctr", "ulong")),
                extra_args=(seed & 0xFFFFFFFFFFFFFFFF, offset & 0xFFFFFFFFFFFFFFFF))


def uniform(out: View, low: float, high: float, seed: int, offset: int) -> None:
    _random("uniform", _UNIT[out.dtype.name], out, low, high - low, seed, offset)


def normal(out: View, mean: float, std: float, seed: int, offset: int) -> None:
    _random("normal", _NORMAL[out.dtype.name], out, mean, std, seed, offset)
