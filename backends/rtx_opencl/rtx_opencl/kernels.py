"""The Python side of every kernel: plan the launch, compile once, enqueue.

Each op turns its views into a layout (see ``_plan``), looks up the compiled
kernel for (op, dtypes, layout) in its device's cache, and enqueues it. Nothing
here waits for the device except ``to_host``.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import DType, View, contiguous_strides

from . import blas as BLAS
from . import codegen as C
from . import matmul as MM
from . import runtime as R
from .runtime import Buffer

LOCAL = 256  # work-group size of elementwise launches; the tail runs in groups of 1

_ARG = {"bool": np.uint8, "uint8": np.uint8, "int8": np.int8, "int16": np.int16,
        "int32": np.int32, "int64": np.int64, "float16": np.float32,
        "float32": np.float32, "float64": np.float64, "long": np.int64,
        "ulong": np.uint64, "buf": None}


# -- compiling and launching ------------------------------------------------------------


def _kernel(dev: R.Device, key: tuple, make: Callable[[], tuple[str, list[str]]],
            name: str = "k") -> Any:
    """The compiled kernel for ``key`` on ``dev``, built by ``make()`` on first use."""
    k = dev.programs.get(key)
    if k is None:
        def build() -> tuple[Any, list[str]]:
            src, kinds = make()
            return dev.build(src, _describe(key)), kinds

        def bind(built: tuple[Any, list[str]]) -> Any:
            prg, kinds = built
            k = R.cl.Kernel(prg, name)
            k.set_scalar_arg_dtypes([_ARG[a] for a in kinds])
            return k

        k = dev.launcher(key, build, bind)
    return k


def _family_kernel(dev: R.Device, key: tuple, member: str, program: tuple,
                   makers: dict[str, Callable[[str], tuple[str, list[str]]]]) -> Any:
    """The kernel ``k_<member>`` for ``key``, from a program that holds one
    kernel per entry of ``makers`` (``makers[m](name)`` gives its source and
    argument kinds): the first use of any of them compiles all of them at once,
    and each later one is a lookup. PoCL's cost per compile is mostly fixed, so
    a family of ~15 kernels compiles in about the time of one. (The compiler's
    per-kernel code generation still happens at each kernel's first launch.)
    Should the family fail to build, ``member`` is built alone."""
    k = dev.programs.get(key)
    if k is not None:
        return k

    def build() -> tuple[Any, dict[str, list[str]]]:
        sources, kinds = [], {}
        for m, make in makers.items():
            src, kinds[m] = make(f"k_{m}")
            sources.append(src)
        try:
            return dev.build("\n".join(sources), _describe(program)), kinds
        except RuntimeError:
            src, kinds = makers[member](f"k_{member}")
            return dev.build(src, _describe(key)), {member: kinds}

    def bind(built: tuple[Any, dict[str, list[str]]]) -> Any:
        prg, kinds = built
        k = R.cl.Kernel(prg, f"k_{member}")
        k.set_scalar_arg_dtypes([_ARG[a] for a in kinds[member]])
        return k

    return dev.launcher(key, build, bind, program)


def _describe(key: tuple) -> str:
    op, *rest = key
    return f"{op} ({', '.join(str(r) for r in rest)})"


def _enqueue(dev: R.Device, k: Any, n: int, args: list[Any]) -> None:
    """Run ``k`` once per element id 0..n-1: full work-groups of LOCAL, then the
    remainder in groups of one (a bounds check in the kernel would cost more)."""
    q = dev.queue
    main = n - n % LOCAL
    if main:
        k(q, (main,), (LOCAL,), *args)
    if not main:  # (a small op: no offset to pass, which saves ~1 us a launch)
        k(q, (n,), (1,), *args)
    elif main != n:
        k(q, (n - main,), (1,), *args, global_offset=(main,))


# -- layouts ----------------------------------------------------------------------------


def coalesce(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that every operand walks as one.
    Keeps the row-major order of elements; returns at least one dim."""
    dims: list[int] = []
    sts: list[list[int]] = [[] for _ in strides]
    for d in range(len(shape) - 1, -1, -1):  # innermost first
        n = shape[d]
        if n == 1:
            continue
        if dims and all(s[d] == acc[-1] * dims[-1] for s, acc in zip(strides, sts)):
            dims[-1] *= n
            continue
        dims.append(n)
        for s, acc in zip(strides, sts):
            acc.append(s[d])
    if not dims:
        return [1], [[1] for _ in strides]
    dims.reverse()
    for acc in sts:
        acc.reverse()
    return dims, sts


def _plan(out: View, views: list[View]) -> tuple[str, list[int], list[list[int]]]:
    """("c", [n], ...) when every operand is contiguous, else ("s", dims, strides)."""
    dims, sts = coalesce(out.shape, [out.strides] + [v.strides for v in views])
    if len(dims) == 1 and all(s[0] == 1 for s in sts):
        return "c", dims, sts
    return "s", dims, sts


def elementwise(op: str, expr: str, out: View, ins: list[Any], in_dtypes: list[str],
                prologue: str = "", ct: str | None = None,
                extra: tuple[tuple[str, str], ...] = (), extra_args: tuple = (),
                out_dtype: str | None = None,
                family: tuple[str, str, dict[str, Member]] | None = None) -> None:
    """``out = expr(ins)``. ``ins`` are Views or scalars (already of their op's
    dtype); ``in_dtypes`` names each one's dtype, ``out_dtype`` out's if it is
    to be read as another (a bit copy). ``family``: (its name, this kernel's
    label in it, {label: Member}), kernels with this one's inputs and layout,
    compiled with it as one program (``_family_kernel``)."""
    n = prod(out.shape)
    if n == 0:
        return
    dev = out.buffer.dev
    views = [v for v in ins if type(v) is View]
    lay, dims, sts = _plan(out, views)
    rank = len(dims)
    layouts = tuple("k" if type(v) is not View else lay for v in ins)
    odt = out_dtype or out.dtype.name
    key = (op, odt, *in_dtypes, lay + "".join(layouts), rank if lay == "s" else 0)

    def make() -> tuple[str, list[str]]:
        return C.elementwise(op, expr, (odt, lay), list(zip(in_dtypes, layouts)),
                             rank if lay == "s" else 1, prologue, ct, extra)

    k = dev.programs.get(key)
    if k is None and family is None:
        k = _kernel(dev, key, make)
    elif k is None:
        fname, label, members = family
        # (this op as called: its expression and prologue, whatever the family says)
        members = {**members, label: (op, expr, prologue, members[label][3])}

        def maker(m: Member) -> Callable[[str], tuple[str, list[str]]]:
            return lambda name: C.elementwise(m[0], m[1], (m[3] or odt, lay),
                                              list(zip(in_dtypes, layouts)),
                                              rank if lay == "s" else 1, m[2], ct, extra, name)

        # (the program's key: the family and everything of this key but op and out dtype)
        program = (fname, odt if members[label][3] is None else None, *key[2:])
        k = _family_kernel(dev, key, label, program, {lb: maker(m) for lb, m in members.items()})
    if (lay == "c" and op in C.VECTOR_OPS and odt == "float32" and n >= C.WIDTH
            and not prologue and not extra and all(d == "float32" for d in in_dtypes)):
        # float32, contiguous: WIDTH elements a work-item on vector types, where
        # PoCL vectorises exp/tanh/...; the tail below, one element at a time
        kv = _kernel(dev, key + ("v",), lambda: C.elementwise_vector(op, expr, list(layouts)))
        args = [out.buffer.mem, out.offset]
        for v in ins:
            args += [v.buffer.mem, v.offset] if type(v) is View else [v]
        m = n // C.WIDTH
        _enqueue(dev, kv, m, args)
        if m * C.WIDTH < n:
            k(dev.queue, (n - m * C.WIDTH,), (1,), *args, global_offset=(m * C.WIDTH,))
        return
    args: list[Any] = [out.buffer.mem, out.offset]
    if lay == "s":
        args += sts[0]
    j = 1
    for v in ins:
        if type(v) is View:
            args += [v.buffer.mem, v.offset]
            if lay == "s":
                args += sts[j]
            j += 1
        else:
            args.append(v)
    if lay == "s":
        args += dims[1:]
    args += extra_args
    _enqueue(dev, k, n, args)


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
        for op, (fl, it) in (C.UNARY if kind == "unary" else
                             C.BINARY if kind == "binary" else {}).items():
            expr = fl if dt in C.FLOATS else it
            if expr is not None and op not in ("copy", "cast"):
                pro = C.INT_POW if op == "pow" and dt not in C.FLOATS else \
            C.FLOAT_DIVMOD if op in C.FLOAT_ONLY else ""
                members[op] = (op, expr, pro, None)
        _FAMILIES[(kind, dt)] = members
    return members


def unary(op: str) -> Callable[..., None]:
    def kernel(out: View, x: View) -> None:
        dt = x.dtype.name
        elementwise(op, C.expression(C.UNARY, op, dt), out, [x], [dt],
                    family=("unary", op, _members("unary", dt)))

    kernel.__name__ = op
    return kernel


def binary(op: str) -> Callable[..., None]:
    def kernel(out: View, x: Any, y: Any) -> None:
        dt = _dtype_of(x, y)
        pro = C.INT_POW if op == "pow" and dt not in C.FLOATS else \
            C.FLOAT_DIVMOD if op in C.FLOAT_ONLY else ""
        elementwise(op, C.expression(C.BINARY, op, dt), out, [x, y], [dt, dt], pro,
                    family=("binary", op, _members("binary", dt)))

    kernel.__name__ = op
    return kernel


def where(out: View, cond: View, x: Any, y: Any) -> None:
    dt = out.dtype.name
    elementwise("where", "a ? b : c", out, [cond, x, y], ["bool", dt, dt], ct=C.CTYPE[dt][1])


# -- memory -----------------------------------------------------------------------------


def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[Buffer, View]:
    n = prod(shape)
    buf = R.device(index).alloc(n * dtype.itemsize, f"{n} x {dtype.name}")
    return buf, View(buf, shape, contiguous_strides(shape), 0, dtype)


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
        R.cl.enqueue_copy(out.buffer.dev.queue, out.buffer.mem, x.buffer.mem,
                          byte_count=n * isz, src_offset=x.offset * isz,
                          dst_offset=out.offset * isz)
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


# -- reductions -------------------------------------------------------------------------

_AT_DTYPE = {"float": "float32", "double": "float64", "long": "int64", "int": "int32",
             "short": "int16", "char": "int8", "uchar": "uint8"}


def _reduction_kernel(dev: R.Device, op: str, xdt: str, odt: str, ro: int, ri: int, mode: str,
                      arg: bool = False) -> Any:
    """``C.reduction``'s kernel, compiled with its family (sum, prod, max, min;
    or argmax, argmin) of the same dtypes and layout as one program."""
    ops = ("argmax", "argmin") if arg else tuple(C.REDUCE)
    makers = {o: (lambda name, o=o: C.reduction(o, xdt, odt, ro, ri, mode, arg, name)) for o in ops}
    return _family_kernel(dev, (op, xdt, odt, ro, ri, mode), op,
                          ("reduce", xdt, odt, ro, ri, mode, arg), makers)


def _reduction_vec_kernel(dev: R.Device, op: str, xdt: str, ro: int, mode: str) -> Any:
    """``C.reduction_vec``'s kernel, compiled with its family as one program."""
    makers = {o: (lambda name, o=o: C.reduction_vec(o, xdt, ro, mode, name)) for o in C.REDUCE}
    return _family_kernel(dev, (op, xdt, ro, mode), op, ("reduce_vec", xdt, ro, mode), makers)


def _reduce(op: str, out: View, x: View, axes: tuple[int, ...], arg: bool = False) -> None:
    """Reduce ``x`` over ``axes`` into ``out`` (``x``'s shape with those axes 1)."""
    M = prod(out.shape)
    if M == 0:
        return
    dev = x.buffer.dev
    keep = [d for d in range(len(x.shape)) if d not in axes]
    oshape, (ost, xst) = coalesce(tuple(x.shape[d] for d in keep),
                                  [tuple(out.strides[d] for d in keep),
                                   tuple(x.strides[d] for d in keep)])
    ishape, (ist,) = coalesce(tuple(x.shape[d] for d in axes), [tuple(x.strides[d] for d in axes)])
    K = prod(ishape)
    ro, ri = len(oshape), len(ishape)
    xdt, odt = x.dtype.name, out.dtype.name
    vec = not arg and xdt == odt and xdt != "float16"
    # Column sums (outputs side by side in x): 8 outputs per work item.
    if vec and ri == 1 and xst[-1] == 1 and ist[-1] != 1 and oshape[-1] >= 8:
        nl = oshape[-1]
        cmode, W = ("cols64", 64) if nl >= 64 else ("cols", 8)
        k = _reduction_vec_kernel(dev, op, xdt, ro, cmode)
        items = (M // nl) * -(-nl // W)
        _enqueue(dev, k, items, [out.buffer.mem, out.offset, *ost, x.buffer.mem, x.offset, *xst,
                                 ist[0], *oshape[1:], K, 1, K, nl])
        return
    # One work item per output when the reduction is short, or when outputs sit
    # side by side in x and the reduced elements don't. Otherwise a work-group
    # per output (or per part of one, for few long reductions).
    if K <= 16 or (ist[-1] != 1 and xst[-1] == 1 and M >= 64):
        mode = "serial"
    else:
        mode = "tree"
    L = C.REDUCE_LOCAL
    parts = 1
    if mode == "tree":
        want = 4 * dev.compute_units
        if M < want and K > 8 * L and not arg:  # (an index can't be split)
            parts = min(-(-want // M), -(-K // (4 * L)))
    chunk = -(-K // parts)
    if mode == "tree" and vec and ri == 1 and ist[0] == 1:
        # contiguous rows: each work item folds its share 8 elements at a time
        rmode = "rows" if parts == 1 else "rows_partial"
        k = _reduction_vec_kernel(dev, op, xdt, ro, rmode)
        xargs = [x.buffer.mem, x.offset, *xst, 1, *oshape[1:], K, parts, chunk]
        if parts == 1:
            k(dev.queue, (M * L,), (L,), out.buffer.mem, out.offset, *ost, *xargs)
            return
        tmp = dev.alloc(M * parts * x.dtype.itemsize, "reduction partials")
        k(dev.queue, (M * parts * L,), (L,), tmp.mem, 0, *ost, *xargs)
        _reduce_partials(op, dev, out, ost, oshape, tmp, xdt, parts)
        return
    args = [x.buffer.mem, x.offset, *xst, *ist, *oshape[1:], *ishape[1:], K, parts, chunk]
    if parts == 1:
        k = _reduction_kernel(dev, op, xdt, odt, ro, ri, mode, arg)
        if mode == "serial":
            _enqueue(dev, k, M, [out.buffer.mem, out.offset, *ost, *args])
        else:
            k(dev.queue, (M * L,), (L,), out.buffer.mem, out.offset, *ost, *args)
        return
    # two launches: `parts` partial results per output into tmp, then reduce those
    at = C.CTYPE[odt][1]
    tdt = _AT_DTYPE[at]
    tmp = dev.alloc(M * parts * np.dtype(_ARG[tdt]).itemsize, "reduction partials")
    k = _reduction_kernel(dev, op, xdt, odt, ro, ri, "partial")
    k(dev.queue, (M * parts * L,), (L,), tmp.mem, 0, *ost, *args)
    _reduce_partials(op, dev, out, ost, oshape, tmp, tdt, parts)


def _reduce_partials(op: str, dev: R.Device, out: View, ost: list[int], oshape: list[int],
                     tmp: Buffer, tdt: str, parts: int) -> None:
    """Second launch of a split reduction: output o folds tmp[o*parts : (o+1)*parts]."""
    odt, ro, L = out.dtype.name, len(oshape), C.REDUCE_LOCAL
    k = _reduction_kernel(dev, op, tdt, odt, ro, 1, "tree")
    tst = [parts * prod(oshape[d + 1:]) for d in range(ro)]
    k(dev.queue, (prod(oshape) * L,), (L,), out.buffer.mem, out.offset, *ost, tmp.mem, 0, *tst, 1,
      *oshape[1:], parts, 1, parts)


def reduction(op: str) -> Callable[..., None]:
    def kernel(out: View, x: View, axes: tuple[int, ...]) -> None:
        _reduce(op, out, x, axes)

    kernel.__name__ = op
    return kernel


def argreduction(op: str) -> Callable[..., None]:
    def kernel(out: View, x: View, axis: int) -> None:
        _reduce(op, out, x, (axis,), arg=True)

    kernel.__name__ = op
    return kernel


# -- indexing ---------------------------------------------------------------------------


def gather(out: View, x: View, dim: int, index: View) -> None:
    n = prod(out.shape)
    if n == 0:
        return
    dev = out.buffer.dev
    xst = list(x.strides)
    xsd, xst[dim] = xst[dim], 0
    dims, (ost, ist, xs) = coalesce(out.shape, [out.strides, index.strides, tuple(xst)])
    dt, rank = out.dtype.name, len(dims)
    k = _kernel(dev, ("gather", dt, rank), lambda: C.gather(dt, rank))
    _enqueue(dev, k, n, [out.buffer.mem, out.offset, *ost, index.buffer.mem, index.offset, *ist,
                         x.buffer.mem, x.offset, *xs, xsd, *dims[1:]])


def index(out: View, x: View, indices: tuple[View, ...]) -> None:
    n = prod(out.shape)
    if n == 0:
        return
    dev = out.buffer.dev
    nidx = len(indices)
    tail = len(x.shape) - nidx  # x's dims after the indexed ones
    lead = len(out.shape) - tail
    strides = [out.strides]
    for v in indices:  # each has the leading shape; it doesn't vary along x's tail
        strides.append(tuple(v.strides) + (0,) * tail)
    strides.append((0,) * lead + tuple(x.strides[nidx:]))
    dims, sts = coalesce(out.shape, strides)
    dt, rank = out.dtype.name, len(dims)
    k = _kernel(dev, ("index", dt, rank, nidx), lambda: C.index(dt, rank, nidx))
    args: list[Any] = [out.buffer.mem, out.offset, *sts[0]]
    for j, v in enumerate(indices):
        args += [v.buffer.mem, v.offset, *sts[1 + j]]
    args += [x.buffer.mem, x.offset, *sts[-1], *(x.strides[j] for j in range(nidx)), *dims[1:]]
    _enqueue(dev, k, n, args)


# float16 scatters run on float32 copies: the sums never round to float16 midway
# (which stops at 2048 when adding ones), only the result, once per element
_F32 = DType("float32", "f", np.float32)


def scatter_add(out: View, dim: int, index: View, src: View) -> None:
    length = index.shape[dim] if index.shape else 1
    cols = prod(index.shape) // length if length else 0
    if cols == 0:
        return
    dev = out.buffer.dev
    if out.dtype.name == "float16":
        _, wide_out = empty(out.shape, _F32, dev.index)
        _, wide_src = empty(src.shape, _F32, dev.index)
        cast(wide_out, out)
        cast(wide_src, src)
        scatter_add(wide_out, dim, index, wide_src)
        cast(out, wide_out)
        return

    def drop(t: tuple[int, ...]) -> tuple[int, ...]:
        return t[:dim] + t[dim + 1:]

    along = (out.strides[dim], index.strides[dim], src.strides[dim]) if index.shape else (0, 0, 0)
    dims, (ost, ist, sst) = coalesce(drop(index.shape),
                                     [drop(out.strides), drop(index.strides), drop(src.strides)])
    dt, rank = out.dtype.name, len(dims)
    k = _kernel(dev, ("scatter_add", dt, rank), lambda: C.scatter_add(dt, rank))
    _enqueue(dev, k, cols, [out.buffer.mem, out.offset, *ost, index.buffer.mem, index.offset, *ist,
                            src.buffer.mem, src.offset, *sst, *along, length, *dims[1:]])


def masked_select(out: View, x: View, mask: View) -> None:
    n = prod(x.shape)
    if n == 0 or prod(out.shape) == 0:
        return
    dev = out.buffer.dev
    dims, (xst, mst) = coalesce(x.shape, [x.strides, mask.strides])
    dt, rank = x.dtype.name, len(dims)
    key = ("masked_select", dt, rank)
    prg = dev.programs.get(key)
    if prg is None:
        def bind(built: Any) -> tuple[Any, Any, Any]:
            sizes = [np.int64] * (rank + 1)  # n1.., n, chunk
            walked = [None, np.int64] + [np.int64] * rank
            ks = tuple(R.cl.Kernel(built, name) for name in ("count", "scan", "pack"))
            ks[0].set_scalar_arg_dtypes([None, *walked, *sizes])
            ks[1].set_scalar_arg_dtypes([None, np.int64])
            ks[2].set_scalar_arg_dtypes([None, np.int64, None, *walked, *walked, *sizes])
            return ks

        prg = dev.launcher(key, lambda: dev.build(C.masked_select(dt, rank), _describe(key)), bind)
    count, scan, pack = prg
    chunk = max(1024, -(-n // 256))
    groups = -(-n // chunk)
    counts = dev.alloc(groups * 8, "masked_select counts")
    q = dev.queue
    m_args = [mask.buffer.mem, mask.offset, *mst, *dims[1:], n, chunk]
    count(q, (groups,), (1,), counts.mem, *m_args)
    scan(q, (1,), (1,), counts.mem, groups)
    pack(q, (groups,), (1,), out.buffer.mem, out.offset, counts.mem,
         x.buffer.mem, x.offset, *xst, *m_args)


# -- matmul -----------------------------------------------------------------------------


def _matmul_simple(out: View, a: View, b: View) -> None:
    *batch, n, m = out.shape
    dev = out.buffer.dev
    nb = len(batch)
    # the output's index space (batch..., n, m); a doesn't vary along m, b along n
    sa = tuple(a.strides[:nb]) + (a.strides[-2], 0)
    sb = tuple(b.strides[:nb]) + (0, b.strides[-1])
    dims, (ost, ast, bst) = coalesce(out.shape, [out.strides, sa, sb])
    dt, rank = out.dtype.name, len(dims)
    k = _kernel(dev, ("matmul_simple", dt, rank), lambda: C.matmul_simple(dt, rank))
    _enqueue(dev, k, prod(out.shape), [out.buffer.mem, out.offset, *ost, a.buffer.mem, a.offset,
                                       *ast, b.buffer.mem, b.offset, *bst, a.strides[-1],
                                       b.strides[-2], a.shape[-1], *dims[1:]])


def _matmul_kernels(dev: R.Device, dt: str) -> dict[str, Any]:
    key = ("matmul", dt)
    ks = dev.programs.get(key)
    if ks is None:
        def bind(prg: Any) -> dict[str, Any]:
            ks = {}
            for name, arg_dtypes in MM.ARG_DTYPES.items():
                ks[name] = R.cl.Kernel(prg, name)
                ks[name].set_scalar_arg_dtypes(arg_dtypes)
            return ks

        ct = C.CTYPE[dt][1]
        ks = dev.launcher(key, lambda: dev.build(MM.source(ct, ct), f"matmul ({dt})"), bind)
    return ks


def matmul(out: View, a: View, b: View) -> None:
    *batch, n, m = out.shape
    K = a.shape[-1]
    if prod(out.shape) == 0:
        return
    if K == 0:
        return full(out, 0)
    dt = out.dtype.name
    if dt in ("bool", "float16"):  # (bool: logical; half: accumulates in float)
        return _matmul_simple(out, a, b)
    if BLAS.enabled() and BLAS.gemm(out, a, b):
        return
    dev = out.buffer.dev
    nb = len(batch)
    if nb:
        bdims, (obs, abs_, bbs) = coalesce(tuple(batch), [out.strides[:nb], a.strides[:nb],
                                                          b.strides[:nb]])
    else:
        bdims, (obs, abs_, bbs) = [1], ([0], [0], [0])
    ks = _matmul_kernels(dev, dt)
    isz = out.dtype.itemsize
    # the kernels take one batch dim; further (rare: non-mergeable) ones loop here
    for idx in np.ndindex(*bdims[:-1]):
        oo = out.offset + sum(i * s for i, s in zip(idx, obs))
        ao = a.offset + sum(i * s for i, s in zip(idx, abs_))
        bo = b.offset + sum(i * s for i, s in zip(idx, bbs))
        MM.launch(dev, ks, isz,
                  (out.buffer.mem, oo, (obs[-1], out.strides[-2], out.strides[-1])),
                  (a.buffer.mem, ao, (abs_[-1], a.strides[-2], a.strides[-1])),
                  (b.buffer.mem, bo, (bbs[-1], b.strides[-2], b.strides[-1])),
                  bdims[-1], n, K, m)


KERNELS: dict[str, Callable[..., Any]] = {
    "empty": empty, "from_host": from_host, "to_host": to_host, "full": full,
    "arange": arange, "copy": copy, "cast": cast, "uniform": uniform, "normal": normal,
    "where": where,
}
KERNELS.update({op: unary(op) for op in C.UNARY if op not in ("copy", "cast")})
KERNELS.update({op: binary(op) for op in C.BINARY})
KERNELS.update({op: reduction(op) for op in C.REDUCE})
KERNELS.update(argmax=argreduction("argmax"), argmin=argreduction("argmin"))
KERNELS.update(gather=gather, index=index, scatter_add=scatter_add, masked_select=masked_select)
KERNELS["matmul"] = matmul
