"""Every kernel a device supplies, on every dtype it claims and every layout a
kernel must handle, each op in isolation.

A row calls one kernel and nothing else: its inputs are NumPy arrays, copied to
the device (``from_host``) and laid out there with views (no kernels); its
outputs are allocated with ``empty`` and read back with ``to_host``. So a
missing or wrong kernel fails its own row and no other. Elementwise ops,
reductions, scans and indexing are compared with the NumPy reference their
``OpSpec`` names (``rtxcore.dispatch.ops``) on the values the layout holds;
the memory ops, whose front-ends call just their kernel, with the same calls
on ``cpu``; the composites without a NumPy reference with the core's own
decomposition on ``cpu``. Input sets include the special values (see
:func:`values`). Layouts:

    contiguous   a fresh tensor
    transposed   .t() of a contiguous one (strides reversed)
    sliced       every other column of a wider tensor (a step in the strides)
    offset       rows 1.. of a taller tensor (a storage offset)
    broadcast    one row expanded to all (a stride-0 dimension)
    empty        zero rows
    scalar       a 0-d tensor

Elementwise rows also pass Python scalars as operands and run in place (the
target, possibly strided, as both ``out`` and ``x``).
"""

from __future__ import annotations

import contextlib
import math
import zlib
from typing import Any, Callable, Iterator

import numpy as np

from ..dispatch import ops as OPS

LAYOUTS = ("contiguous", "transposed", "sliced", "offset", "broadcast", "empty", "scalar")
SHAPE = (4, 6)
# per-element tolerance: |got - want| <= RTOL * max(1, |want|)
RTOL = {"float16": 2e-3, "float32": 2e-5, "float64": 1e-12}
# transcendental kernels are allowed a few ulps more (OpenCL's limits are 3-4 ulp)
LOOSE = {"float16": 4e-3, "float32": 1e-4, "float64": 1e-9}
_LOOSE_OPS = {"exp", "log", "sin", "cos", "tanh", "expm1", "log1p", "log2", "tan",
              "sigmoid", "erf", "pow", "softmax", "log_softmax", "gelu", "gelu_backward",
              "layer_norm", "layer_norm_backward"}

# sums over many products: the core's own conv2d rounds each of its kh*kw col2im
# adds in float16, a kernel may accumulate in float32 and round once (as PyTorch's)
SUMS = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
_SUM_OPS = {"conv2d", "conv2d_input_grad", "conv2d_weight_grad"}

NA = object()  # the layout does not apply to this case (said by the case, never guessed)


def _rc() -> Any:
    import rtxcore

    return rtxcore


def stable_seed(name: str) -> int:
    """A seed from a name, the same in every process (``hash`` is salted)."""
    return zlib.crc32(name.encode())


def claimed_dtypes(device: str, op: str) -> list[Any]:
    """The dtypes ``device`` claims for ``op``: its dtypes, narrowed by the
    backend's per-op limits and by the dtypes the core ever sends that kernel."""
    from ..ops.core import ready_device

    dev = ready_device(device)
    names = {d.name for d in dev._dtypes}
    limit = dev._limits.get(op)  # (normalised when the device was bound)
    if limit is not None:
        names &= limit
    s = OPS.PRIMITIVES.get(op) or OPS.COMPOSITES.get(op)
    if s is not None:
        names &= set(OPS.kernel_dtypes(s))
    return [dtype_named(n) for n in OPS.DOMAINS["all"] if n in names]


def dtype_named(name: str) -> Any:
    from ..dtype import BY_NAME

    return BY_NAME[name]


def special_values(dtype: Any) -> list[Any]:
    """±0, nan, ±inf, exact halves, the dtype's extremes (float max and tiny,
    int min and max)."""
    if dtype.name == "bool":
        return [False, True]
    if dtype.kind == "f":
        fi = np.finfo(dtype.numpy)
        return [0.0, -0.0, math.nan, math.inf, -math.inf, 0.5, 2.5, -1.5,
                float(fi.max), -float(fi.max), float(fi.tiny), -float(fi.tiny)]
    ii = np.iinfo(dtype.numpy)
    return [0, 1, int(ii.max), int(ii.min)] + ([] if dtype.kind == "u" else [-1])


def values(dtype: Any, seed: int | str, shape: tuple[int, ...] = SHAPE, positive: bool = False,
           special: bool = False, exclude: tuple[Any, ...] = ()) -> np.ndarray:
    """Seeded test values of ``dtype``: floats in (-3, 3) (or (0.1, 3)), small
    integers, random bools; with ``special``, the special values at seeded places
    (first those in ``exclude`` left out, compared by value)."""
    rng = np.random.default_rng(stable_seed(seed) if isinstance(seed, str) else seed)
    if dtype.name == "bool":
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        lo = 0.1 if positive else -3.0
        a = rng.uniform(lo, 3.0, shape).astype(dtype.numpy)
    else:
        lo = 1 if positive else (0 if dtype.kind == "u" else -5)
        a = rng.integers(lo, 6, shape).astype(dtype.numpy)
    if special and a.size:
        sv = [v for v in special_values(dtype)
              if not any(v == e or (v != v and e != e) for e in exclude)]
        flat = a.reshape(-1)
        for pos, v in zip(rng.permutation(flat.size), sv):
            flat[pos] = v
    return a


def logical(a: np.ndarray, layout: str) -> np.ndarray:
    """The values a tensor laid out by :func:`laid_out` holds."""
    if layout == "broadcast":
        return np.broadcast_to(a[:1], a.shape).copy()
    if layout == "empty":
        return a[:0]
    if layout == "scalar":
        return a[0, 0].copy() if a.ndim == 2 else a.reshape(-1)[0].copy()
    return a


def laid_out(device: str, a: np.ndarray, layout: str, dtype: Any) -> Any:
    """``a`` (2-D) on ``device`` in ``layout``: a tensor whose values are those
    of ``a`` (or its first row, first element, no rows) with that layout. Only
    ``from_host`` runs on the device: the rest are views."""
    rc = _rc()
    if layout == "contiguous":
        return rc.tensor(a, dtype=dtype, device=device)
    if layout == "transposed":
        return rc.tensor(np.ascontiguousarray(a.T), dtype=dtype, device=device).t()
    if layout == "sliced":
        wide = np.zeros((a.shape[0], a.shape[1] * 2), a.dtype)
        wide[:, ::2] = a
        return rc.tensor(wide, dtype=dtype, device=device)[:, ::2]
    if layout == "offset":
        tall = np.zeros((a.shape[0] + 1, a.shape[1]), a.dtype)
        tall[1:] = a
        return rc.tensor(tall, dtype=dtype, device=device)[1:]
    if layout == "broadcast":
        return rc.tensor(a[:1], dtype=dtype, device=device).expand(*a.shape)
    if layout == "empty":
        return rc.tensor(a[:0], dtype=dtype, device=device)
    if layout == "scalar":
        return rc.tensor(a[0, 0], dtype=dtype, device=device)
    raise ValueError(f"unknown layout {layout!r}")


# -- calling one kernel ---------------------------------------------------------------------


class Arr:
    """A kernel input: ``a`` laid out on the device (``layout``) as ``dtype``."""

    def __init__(self, a: np.ndarray, layout: str = "contiguous", dtype: Any = None) -> None:
        self.a, self.layout = np.asarray(a), layout
        self.dtype = dtype

    @property
    def value(self) -> np.ndarray:
        return logical(self.a, self.layout) if self.a.ndim == 2 else self.a


class Call:
    """One kernel call: outputs (shape, dtype) to allocate -- or ``inplace``, an
    input index whose view is also the output -- the inputs, and the expected
    results (NumPy arrays, one per output)."""

    def __init__(self, label: str, outs: list[tuple[tuple[int, ...], Any]], args: list[Any],
                 want: Any, inplace: int | None = None, loose: bool = False,
                 target_only: bool = False) -> None:
        self.label, self.outs, self.args, self.want = label, outs, args, want
        self.inplace, self.loose = inplace, loose
        self.target_only = target_only  # the kernel takes the target once (scatter_add)


def _dev_arg(device: str, a: Any, keep: list[Any]) -> Any:
    from ..ops.core import view_of

    rc = _rc()
    if isinstance(a, Arr):
        dt = a.dtype or dtype_named("bool" if a.a.dtype == np.bool_ else a.a.dtype.name)
        t = laid_out(device, a.a, a.layout, dt) if a.a.ndim == 2 else rc.tensor(a.a, dtype=dt, device=device)
        keep.append(t)
        return view_of(t)
    if isinstance(a, tuple):
        return tuple(_dev_arg(device, e, keep) for e in a)
    return a


def run_call(device: str, op: str, call: Call) -> tuple[np.ndarray, ...]:
    """Run ``op``'s kernel on ``device`` for ``call``; the outputs, on the host."""
    from ..ops import core

    dev = core.ready_device(device)
    k = core.kernel(dev, op)  # (the CPU fallback's when allowed; else it raises, naming op)
    keep: list[Any] = []
    args = [_dev_arg(device, a, keep) for a in call.args]
    with np.errstate(all="ignore"):  # (special values overflow on purpose)
        if call.inplace is not None:
            target = keep[sum(isinstance(a, Arr) for a in call.args[:call.inplace])]
            k(*args) if call.target_only else k(args[call.inplace], *args)
            return (target.cpu().numpy(),)
        outs = [core.empty(tuple(shape), dtype_named(dt) if isinstance(dt, str) else dt, dev)
                for shape, dt in call.outs]
        k(*[core.view_of(o) for o in outs], *args)
    return tuple(o.cpu().numpy() for o in outs)


def _np(dtype: Any) -> Any:
    return np.bool_ if dtype.name == "bool" else dtype.numpy


def _scalar(v: Any, dtype: Any) -> Any:
    """A Python scalar already converted to ``dtype`` (the kernel convention)."""
    if dtype.name == "bool":
        return bool(v)
    return float(v) if dtype.kind == "f" else int(v)


# -- rows: one op, one dtype, one layout -> calls -------------------------------------------

Row = Callable[[str, Any, str], Any]  # (op, dtype, layout) -> list[Call] | NA


def _ref(op: str) -> Callable[..., Any]:
    ref = OPS.reference(OPS.spec(op))
    assert ref is not None, f"{op} has no NumPy reference in rtxcore/dispatch/ops.py"
    return ref


def _out_dtype(op: str, dtype: Any) -> Any:
    return dtype_named("bool") if OPS.spec(op).result == "bool" else dtype


def _apply(op: str, dtype: Any, *xs: Any, **kw: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        r = np.asarray(_ref(op)(*xs, **kw))
    return r.astype(_np(_out_dtype(op, dtype)))


def _unary_row(op: str, dtype: Any, layout: str) -> list[Call]:
    a = values(dtype, op, special=True)
    x = Arr(a, layout, dtype)
    want = _apply(op, dtype, x.value)
    calls = [Call(layout, [(want.shape, _out_dtype(op, dtype))], [x], want)]
    if layout in ("contiguous", "transposed", "offset") and OPS.spec(op).result in ("same", "float"):
        calls.append(Call(f"{layout}, in place", [], [Arr(a, layout, dtype)], want, inplace=0))
    return calls


def _binary_operands(op: str, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    x = values(dtype, op + ":x", special=True)
    if op == "pow" and dtype.kind in "iu":
        # small exponents (a kernel may loop over them), negative ones too
        y = np.random.default_rng(stable_seed(op)).integers(-2 if dtype.kind == "i" else 0, 4, SHAPE)
        return x, y.astype(dtype.numpy)
    if op in ("floor_divide", "remainder") and dtype.kind in "iu":
        y = values(dtype, op + ":y", special=True)
        return x, np.where(y == 0, 3, y).astype(dtype.numpy)  # (the core refuses 0)
    return x, values(dtype, op + ":y", special=True)


def _binary_row(op: str, dtype: Any, layout: str) -> list[Call]:
    xa, ya = _binary_operands(op, dtype)
    x, y = Arr(xa, layout, dtype), Arr(ya, layout, dtype)
    odt = _out_dtype(op, dtype)
    want = _apply(op, dtype, x.value, y.value)
    calls = [Call(layout, [(want.shape, odt)], [x, y], want)]
    if layout == "contiguous":
        # a Python scalar (already of the op's dtype) on either side
        s = ya.reshape(-1)[1]
        if not (op in ("floor_divide", "remainder") and dtype.kind in "iu" and xa.reshape(-1)[1] == 0):
            s2 = xa.reshape(-1)[1]
            calls.append(Call("scalar x", [(want.shape, odt)], [_scalar(s2, dtype), y],
                              _apply(op, dtype, np.asarray(s2, _np(dtype)), ya)))
        calls.append(Call("scalar y", [(want.shape, odt)], [x, _scalar(s, dtype)],
                          _apply(op, dtype, xa, np.asarray(s, _np(dtype)))))
    if layout in ("contiguous", "transposed", "sliced") and OPS.spec(op).result != "bool":
        calls.append(Call(f"{layout}, in place", [], [Arr(xa, layout, dtype), Arr(ya, layout, dtype)],
                          want, inplace=0))
    return calls


def _where_row(op: str, dtype: Any, layout: str) -> list[Call]:
    c = Arr(values(dtype_named("bool"), "where:c"), layout, dtype_named("bool"))
    x = Arr(values(dtype, "where:x", special=True), layout, dtype)
    y = Arr(values(dtype, "where:y", special=True), layout, dtype)
    want = _apply(op, dtype, c.value, x.value, y.value)
    calls = [Call(layout, [(want.shape, dtype)], [c, x, y], want)]
    if layout == "contiguous":
        s = _scalar(special_values(dtype)[-1], dtype)
        calls.append(Call("scalar y", [(want.shape, dtype)], [c, x, s],
                          _apply(op, dtype, c.value, x.value, np.asarray(s, _np(dtype)))))
    return calls


def _reduce_values(op: str, dtype: Any) -> np.ndarray:
    # ±max in one slice would make a float sum's or product's result depend on the
    # order of accumulation (fmax + fmax - fmax): they go to max/min only
    exclude: tuple[Any, ...] = ()
    if op in ("sum", "prod") and dtype.kind == "f":
        fmax = float(np.finfo(dtype.numpy).max)
        exclude = (fmax, -fmax, math.inf, -math.inf) if op == "prod" else (fmax, -fmax)
    a = values(dtype, op, special=True, exclude=exclude)
    if op == "prod" and dtype.kind == "f":
        a = np.where(np.abs(a) > 4, 0.5, a).astype(a.dtype)  # no overflow, order-dependent in float
    return a


def _reduce_row(op: str, dtype: Any, layout: str) -> Any:
    if layout == "scalar":
        return NA
    a = _reduce_values(op, dtype)
    x = Arr(a, layout, dtype)
    xv = x.value
    calls = []
    for axes in ((0,), (1,), (0, 1)):
        if op in ("max", "min") and any(xv.shape[d] == 0 for d in axes):
            continue  # (the core refuses: max of nothing)
        want = _apply(op, dtype, xv, axis=axes, keepdims=True)
        calls.append(Call(f"{layout}, axes {axes}", [(want.shape, dtype)], [x, axes], want))
    return calls + _accumulation(op, dtype, layout)


def _accumulation(op: str, dtype: Any, layout: str) -> list[Call]:
    """float16 sums and products accumulate in float32, along every axis: long
    rows and long columns, where float16 accumulation would stall (1 + 2048 is
    2048 in float16) or drift."""
    if op not in ("sum", "prod") or dtype.name != "float16" or layout in ("empty", "scalar"):
        return []
    rng = np.random.default_rng(stable_seed(op + ":acc"))
    calls = []
    for shape in ((2100, 3), (3, 2100)):
        if op == "sum":
            a = rng.choice(np.float16([1.0, 0.5, 0.25, 1.25]), shape)
        else:
            a = rng.choice(np.float16([1 + 2**-9, 1 - 2**-10, 1 + 2**-8, 1.0]), shape)
        x = Arr(a, layout, dtype)
        for axes in ((0,), (1,), (0, 1)):
            want = _apply(op, dtype, x.value, axis=axes, keepdims=True)
            calls.append(Call(f"{layout}, float16 accumulation {shape} axes {axes}",
                              [(want.shape, dtype)], [x, axes], want))
    return calls


def _arg_row(op: str, dtype: Any, layout: str) -> Any:
    if layout in ("scalar", "empty"):
        return NA
    a = values(dtype, op, special=True, exclude=(math.nan,))
    if dtype.kind == "f":
        # one nan, in row 0 (so broadcast has it too) where no other special value is:
        # it is the extreme (PyTorch), in its slices only
        sv = special_values(dtype)
        flat = a.reshape(-1)
        row0 = [i for i in range(a.shape[1]) if not any(flat[i] == v for v in sv)]
        flat[row0[0] if row0 else a.shape[1] - 1] = math.nan
    x = Arr(a, layout, dtype)
    xv = x.value
    calls = []
    for axis in (0, 1):
        want = _ref(op)(xv, axis=axis) if dtype.kind != "f" else _nan_arg(op, xv, axis)
        calls.append(Call(f"{layout}, axis {axis}", [(want.shape, "int64")], [x, axis], want))
    return calls


def _nan_arg(op: str, xv: np.ndarray, axis: int) -> np.ndarray:
    """argmax/argmin where a nan is the extreme (PyTorch's rule), first one wins."""
    want = _ref(op)(np.where(np.isnan(xv), 0, xv), axis=axis)
    first_nan = np.argmax(np.isnan(xv), axis=axis)
    has_nan = np.isnan(xv).any(axis=axis)
    return np.where(np.expand_dims(has_nan, axis), np.expand_dims(first_nan, axis), want).astype(np.int64)


def _matmul_row(op: str, dtype: Any, layout: str) -> Any:
    if layout == "scalar":
        return NA
    a = values(dtype, "matmul:a")
    b = values(dtype, "matmul:b", (6, 5))
    x = Arr(a, layout, dtype)
    wide = np.float64 if dtype.kind == "f" else a.dtype
    want = (x.value.astype(wide) @ b.astype(wide)).astype(a.dtype)
    calls = [Call(layout, [(want.shape, dtype)], [x, Arr(b, "contiguous", dtype)], want)]
    if layout == "contiguous":
        calls.append(Call("b transposed", [(want.shape, dtype)], [x, Arr(b, "transposed", dtype)], want))
        bb = np.stack([b, b[::-1]])  # a batch, a broadcast over it (stride 0)
        wb = (x.value.astype(wide) @ bb.astype(wide)).astype(a.dtype)
        calls.append(Call("batch", [(wb.shape, dtype)], [_Batch(a, dtype), Arr(bb, "contiguous", dtype)], wb))
    return calls


class _Batch(Arr):
    """``a`` expanded to a batch of 2 with a stride-0 batch dimension."""

    def __init__(self, a: np.ndarray, dtype: Any) -> None:
        super().__init__(a, "contiguous", dtype)


def _gather_row(op: str, dtype: Any, layout: str) -> Any:
    if layout == "scalar":
        return NA
    x = Arr(values(dtype, op, special=True), layout, dtype)
    xv = x.value
    idx = np.random.default_rng(stable_seed(op)).integers(0, SHAPE[1], (xv.shape[0], 3))
    want = np.take_along_axis(xv, idx, 1)
    return [Call(layout, [(want.shape, dtype)], [x, 1, Arr(idx, "contiguous", dtype_named("int64"))], want)]


def _scatter_add_row(op: str, dtype: Any, layout: str) -> Any:
    if layout in ("scalar", "broadcast"):
        return NA  # (the target is written: no stride-0 dims)
    base = values(dtype, op, special=dtype.kind != "f")
    src = values(dtype, op + ":src", (2, SHAPE[1]))
    rows = logical(base, layout).shape[0]
    if rows == 0:
        return NA
    idx = np.random.default_rng(stable_seed(op)).integers(0, rows, (2, SHAPE[1]))
    idx[1, :2] = idx[0, :2]  # repeats accumulate
    # (float16 sums in float32, rounded once)
    acc = np.float32 if dtype.name == "float16" else base.dtype
    want = logical(base, layout).astype(acc)
    with np.errstate(all="ignore"):
        np.add.at(want, (idx, np.arange(SHAPE[1])[None]), src.astype(acc))
    want = want.astype(base.dtype)
    return [Call(layout, [], [Arr(base, layout, dtype), 0, Arr(idx, "contiguous", dtype_named("int64")),
                              Arr(src, "contiguous", dtype)], want, inplace=0, target_only=True)]


def _index_row(op: str, dtype: Any, layout: str) -> Any:
    if layout == "scalar":
        return NA
    x = Arr(values(dtype, op, special=True), layout, dtype)
    xv = x.value
    if xv.shape[0] == 0:
        return NA
    rng = np.random.default_rng(stable_seed(op))
    i0 = rng.integers(0, xv.shape[0], (5,))
    i1 = rng.integers(0, xv.shape[1], (5,))
    i64 = dtype_named("int64")
    return [Call(f"{layout}, one index", [((5, xv.shape[1]), dtype)], [x, (Arr(i0, "contiguous", i64),)], xv[i0]),
            Call(f"{layout}, two indices", [((5,), dtype)], [x, (Arr(i0, "contiguous", i64), Arr(i1, "contiguous", i64))],
                 xv[i0, i1])]


def _masked_select_row(op: str, dtype: Any, layout: str) -> Any:
    x = Arr(values(dtype, op, special=True), layout, dtype)
    m = Arr(values(dtype_named("bool"), op + ":mask"), layout, dtype_named("bool"))
    want = np.asarray(x.value)[np.asarray(m.value)].reshape(-1)
    return [Call(layout, [(want.shape, dtype)], [x, m], want)]


def _scan_row(op: str, dtype: Any, layout: str) -> Any:
    if layout in ("scalar", "empty"):
        return NA  # (the core answers those itself: softmax of nothing is nothing)
    special = op == "cumsum"
    a = values(dtype, op, special=special, exclude=(
        (float(np.finfo(dtype.numpy).max), -float(np.finfo(dtype.numpy).max)) if dtype.kind == "f" else ()))
    x = Arr(a, layout, dtype)
    calls = []
    for axis in (0, 1):
        with np.errstate(all="ignore"):
            want = np.asarray(_ref(op)(x.value, axis)).astype(a.dtype)
        calls.append(Call(f"{layout}, axis {axis}", [(want.shape, dtype)], [x, axis], want,
                          loose=op in _LOOSE_OPS))
    return calls


def _elementwise(op: str) -> Row:
    fam = OPS.spec(op).family
    return {"unary": _unary_row, "binary": _binary_row, "compare": _binary_row}[fam]


ROWS: dict[str, Row] = {}
for _name, _spec in OPS.PRIMITIVES.items():
    if _spec.family in ("unary", "binary", "compare"):
        ROWS[_name] = _elementwise(_name)
ROWS.update(sum=_reduce_row, prod=_reduce_row, max=_reduce_row, min=_reduce_row,
            argmax=_arg_row, argmin=_arg_row, where=_where_row, matmul=_matmul_row,
            gather=_gather_row, scatter_add=_scatter_add_row, index=_index_row,
            masked_select=_masked_select_row)

# composites a backend may supply: those with a NumPy reference get kernel-level rows
COMPOSITE_ROWS: dict[str, Row] = {}
for _name, _spec in OPS.COMPOSITES.items():
    if _spec.family in ("unary", "binary"):
        COMPOSITE_ROWS[_name] = _elementwise(_name)
    elif _spec.family == "scan" and _spec.ref is not None:
        COMPOSITE_ROWS[_name] = _scan_row


# -- the memory ops: their front-ends call just their kernel; compared with cpu --------------

# case(device, dtype, layout, tested): tested is the device under test (the
# reference runs on cpu with the same arguments)
Case = Callable[..., Any]


def _full(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    if layout == "broadcast":
        return NA  # (a write through a stride-0 dim: the core refuses it)
    x = laid_out(device, values(dtype, 11), layout, dtype)
    out = [x.fill_(1)]
    for v in special_values(dtype)[:6]:
        out.append(laid_out(device, values(dtype, 11), layout, dtype).fill_(v))
    return tuple(out)


def _arange(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    if layout != "contiguous" or dtype.name == "bool":
        return NA
    rc = _rc()
    return rc.arange(0, 5, dtype=dtype, device=device), rc.arange(5, 0, -2, dtype=dtype, device=device)


def _copy(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    rc = _rc()
    x = laid_out(device, values(dtype, 12, special=True), layout, dtype)
    into = rc.tensor(np.zeros(tuple(x.shape), _np(dtype)), device=device)  # (no full kernel)
    strided = rc.tensor(np.zeros(tuple(x.shape)[::-1], _np(dtype)), device=device).t() if x.dim() == 2 else into
    return x.clone(), into.copy_(x), strided.copy_(x)


def _cast(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    a = values(dtype, 13, special=True)
    if dtype.kind == "f":
        # float -> int of nan, inf or out of range is undefined in C (and differs by backend)
        a = np.where(np.isfinite(a) & (np.abs(a) < 100), a, 1.5).astype(a.dtype)
    x = laid_out(device, a, layout, dtype)
    targets = [t for t in claimed_dtypes(tested or device, "cast") if t is not dtype]
    out = []
    for t in targets:
        src = x
        if dtype.kind in "iu" and t.kind in "iu" and t.itemsize < dtype.itemsize:
            continue  # (narrowing integers wraps in C; PyTorch says nothing)
        if dtype.kind in "iu" and t.name == "float16" and dtype.itemsize > 1:
            continue  # (int extremes overflow float16)
        out.append(src.to(t))
    return tuple(out)


def _transfer(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    # from_host, then to_host of a view of it (compared through .cpu())
    return laid_out(device, values(dtype, 14, special=True), layout, dtype)


def _empty(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    if layout != "contiguous":
        return NA
    rc = _rc()
    t = rc.empty(2, 3, dtype=dtype, device=device)
    return ("shape", tuple(t.shape), t.dtype.name, t.device == rc.device(device), t.is_contiguous())


def _random(op: str) -> Case:
    def case(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
        if layout != "contiguous" or dtype.kind != "f":
            return NA
        rc = _rc()
        make = rc.rand if op == "uniform" else rc.randn
        a = make(20000, dtype=dtype, generator=rc.Generator().manual_seed(3), device=device)
        b = make(20000, dtype=dtype, generator=rc.Generator().manual_seed(3), device=device)
        an = a.cpu().numpy().astype(np.float64)
        same = bool(np.array_equal(an, b.cpu().numpy().astype(np.float64)))
        # statistics, not values: generators may differ between backends
        if op == "uniform":
            ok = an.min() >= 0 and an.max() < 1 and abs(an.mean() - 0.5) < 0.02
        else:
            ok = abs(an.mean()) < 0.04 and abs(an.std() - 1) < 0.04
        return ("stats", same, bool(ok))

    return case


CASES: dict[str, Case] = dict(full=_full, arange=_arange, copy=_copy, cast=_cast,
                              from_host=_transfer, to_host=_transfer, empty=_empty,
                              uniform=_random("uniform"), normal=_random("normal"))

_missing = set(OPS.PRIMITIVES) - set(CASES) - set(ROWS)
assert not _missing, f"primitives without a conformance row: {sorted(_missing)}"


# -- comparing ---------------------------------------------------------------------------------


def host_values(r: Any) -> Any:
    """A case's result(s) as NumPy arrays (metadata and statistics as they are)."""
    if isinstance(r, tuple) and r and isinstance(r[0], str):
        return r  # metadata or statistics: compared as they are
    if isinstance(r, (tuple, list)):
        return tuple(host_values(e) for e in r)
    return r.cpu().numpy()


def compare(got: Any, want: Any, loose: bool = False,
            tols: dict[str, float] | None = None) -> tuple[bool, float, str]:
    """(ok, worst difference relative to max(1, |want|), what differs); ``tols``
    (per dtype name) overrides the tolerance."""
    if isinstance(want, tuple) and want and isinstance(want[0], str):
        if want[0] == "stats":
            ok = got[1] and got[2]
            return ok, 0.0, "" if ok else f"random numbers: same seed repeats={got[1]}, statistics ok={got[2]}"
        return got == want, 0.0, "" if got == want else f"got {got}, want {want}"
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return False, float("inf"), "different number of results"
        worst, ok, what = 0.0, True, ""
        for g, w in zip(got, want):
            o, d, m = compare(g, w, loose, tols)
            worst = max(worst, d)
            if not o and ok:
                ok, what = False, m
        return ok, worst, what
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, float("inf"), f"got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    if want.size == 0:
        return True, 0.0, ""
    if want.dtype.kind == "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        fin = ~nan_w & ~nan_g
        inf_bad = fin & (np.isinf(g) | np.isinf(w)) & (g != w)
        finite = fin & ~np.isinf(g) & ~np.isinf(w)
        rel = np.zeros(w.shape)
        rel[finite] = np.abs(g[finite] - w[finite]) / np.maximum(1.0, np.abs(w[finite]))
        err = float(rel.max(initial=0.0))
        tol = (tols or (LOOSE if loose else RTOL)).get(want.dtype.name, 2e-5)
        bad = (nan_g != nan_w) | inf_bad | (rel > tol)
        if not bad.any():
            return True, err, ""
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        what = f"worst difference {err:.3g} > {tol:.2g}" if (rel > tol).any() else "nan/inf in different places"
        return False, (float("inf") if not (rel > tol).any() else err), (
            f"{what}: {int(bad.sum())} of {w.size} differ; first at {i}: got {g[i]!r}, want {w[i]!r}")
    diff = got.astype(np.int64) != want.astype(np.int64) if want.dtype.kind in "biu" else got != want
    if not diff.any():
        return True, 0.0, ""
    i = tuple(int(v) for v in np.argwhere(diff)[0])
    return False, float("inf"), f"{int(diff.sum())} of {want.size} differ (exact expected); first at {i}: got {got[i]!r}, want {want[i]!r}"


def calls_for(op: str, dtype: Any, layout: str) -> Any:
    """The kernel calls of ``op``'s row (or NA)."""
    row = ROWS.get(op) or COMPOSITE_ROWS[op]
    return row(op, dtype, layout)


def check(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    """("pass" | "fail" | "n/a", worst difference, detail) of one op, dtype, layout."""
    if op in CASES:
        return _check_case(device, op, dtype, layout)
    try:
        calls = calls_for(op, dtype, layout)
    except Exception as exc:  # the reference itself: a bug in the suite, said loudly
        return "fail", float("inf"), f"the reference raised {type(exc).__name__}: {exc}".splitlines()[0][:160]
    if calls is NA:
        return "n/a", 0.0, ""
    worst = 0.0
    for call in calls:
        try:
            got = _run(device, op, call)
        except Exception as exc:
            return "fail", float("inf"), f"{call.label}: {type(exc).__name__}: {exc}".splitlines()[0][:160]
        want = call.want if isinstance(call.want, tuple) else (call.want,)
        ok, w, what = compare(got, tuple(np.asarray(e) for e in want), call.loose or op in _LOOSE_OPS)
        worst = max(worst, w)
        if not ok:
            return "fail", w, f"{call.label}: {what}"
    return "pass", worst, ""


def _run(device: str, op: str, call: Call) -> tuple[np.ndarray, ...]:
    if any(isinstance(a, _Batch) for a in call.args):
        return _run_batch(device, op, call)
    return run_call(device, op, call)


def _run_batch(device: str, op: str, call: Call) -> tuple[np.ndarray, ...]:
    from ..ops import core

    dev = core.ready_device(device)
    k = core.kernel(dev, op)
    keep: list[Any] = []
    args = []
    for a in call.args:
        if isinstance(a, _Batch):
            t = _rc().tensor(a.a, dtype=a.dtype, device=device)
            keep.append(t)
            args.append(core.view_of(t.expand(2, *a.a.shape)))
        else:
            args.append(_dev_arg(device, a, keep))
    outs = [core.empty(tuple(s), dtype_named(d) if isinstance(d, str) else d, dev) for s, d in call.outs]
    with np.errstate(all="ignore"):
        k(*[core.view_of(o) for o in outs], *args)
    return tuple(o.cpu().numpy() for o in outs)


def _check_case(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    case = CASES[op]
    try:
        want = case("cpu", dtype, layout, device)
        if want is not NA:
            want = host_values(want)
    except Exception as exc:
        # never "not applicable" by accident: a case says NA itself
        return "fail", float("inf"), f"the cpu reference raised {type(exc).__name__}: {exc}".splitlines()[0][:160]
    if want is NA:
        return "n/a", 0.0, ""
    try:
        got = host_values(case(device, dtype, layout, device))
    except Exception as exc:
        return "fail", float("inf"), f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    ok, worst, what = compare(got, want)
    return ("pass" if ok else "fail"), worst, what


# -- composites a backend supplies, without a NumPy reference: against the core's own ------
# decomposition on cpu (the cpu backend's kernel for the op set aside)


@contextlib.contextmanager
def decomposed_on_cpu(op: str) -> Iterator[None]:
    """The cpu device without its kernel for composite ``op``: the core decomposes it."""
    from ..ops.core import ready_device

    dev = ready_device("cpu")
    k = dev.kernels.pop(op, None)
    try:
        yield
    finally:
        if k is not None:
            dev.kernels[op] = k


def _put(x: Any, idx: Any, value: Any) -> Any:
    x[idx] = value
    return x


def _front(op: str) -> Callable[[str, Any], Any]:
    """The front-end call that reaches composite ``op``'s kernel, on device."""
    rc = _rc()

    def run(device: str, dtype: Any) -> Any:
        a = values(dtype, op, (4, 6))
        x = rc.tensor(a, dtype=dtype, device=device)
        if op == "gelu":
            return rc.nn.functional.gelu(x), rc.nn.functional.gelu(x, approximate="tanh")
        if op == "gelu_backward":
            from ..ops.elementwise import gelu, gelu_backward

            g = rc.tensor(values(dtype, "g", (4, 6)), dtype=dtype, device=device)
            return tuple(gelu_backward(g, x, ap, gelu(x, ap)) for ap in ("none", "tanh"))
        if op == "layer_norm":
            w = rc.tensor(values(dtype, "w", (6,)), dtype=dtype, device=device)
            b = rc.tensor(values(dtype, "b", (6,)), dtype=dtype, device=device)
            return rc.nn.functional.layer_norm(x, (6,), w, b), rc.nn.functional.layer_norm(x, (6,))
        if op == "layer_norm_backward":
            # with weight and bias; without; with weight alone, for .sum()'s broadcast g
            f = rc.nn.functional
            g = rc.tensor(values(dtype, "g", (4, 6)), dtype=dtype, device=device)
            xs = [rc.tensor(a, dtype=dtype, device=device, requires_grad=True) for _ in range(3)]
            w, b = (rc.tensor(values(dtype, s, (6,)), dtype=dtype, device=device,
                              requires_grad=True) for s in ("w", "b"))
            f.layer_norm(xs[0], (6,), w, b).backward(g)
            f.layer_norm(xs[1], (6,)).backward(g)
            dw, db = w.grad, b.grad
            w.grad = None
            f.layer_norm(xs[2], (6,), w).sum().backward()
            return xs[0].grad, dw, db, xs[1].grad, xs[2].grad, w.grad
        if op == "max_pool2d_tiled":
            x4 = rc.tensor(values(dtype, op, (2, 3, 4, 6)), dtype=dtype, device=device)
            return rc.nn.functional.max_pool2d(x4, 2)
        if op == "max_pool2d_tiled_backward":
            x4 = rc.tensor(values(dtype, op, (2, 3, 4, 6)), dtype=dtype, device=device, requires_grad=True)
            rc.nn.functional.max_pool2d(x4, 2).sum().backward()
            return x4.grad
        if op in ("conv2d", "conv2d_input_grad", "conv2d_weight_grad"):
            # three geometries: padded; strided and dilated; 'same' with a 3x2 kernel
            # (uneven padding: one column more on the right)
            f = rc.nn.functional
            x4 = rc.tensor(values(dtype, "x", (2, 3, 6, 7)), dtype=dtype, device=device,
                           requires_grad=True)
            w4 = rc.tensor(values(dtype, "w", (4, 3, 3, 2)), dtype=dtype, device=device,
                           requires_grad=True)
            b = rc.tensor(values(dtype, "b", (4,)), dtype=dtype, device=device)
            ys = (f.conv2d(x4, w4, b, padding=1),
                  f.conv2d(x4, w4, None, stride=(2, 1), padding=(0, 2), dilation=(1, 2)),
                  f.conv2d(x4, w4, b, padding="same"))
            if op == "conv2d":
                return tuple(y.detach() for y in ys)
            wrt = x4 if op == "conv2d_input_grad" else w4
            return tuple(rc.autograd.grad(y, wrt, rc.tensor(values(dtype, f"g{i}", tuple(y.shape)),
                                                            dtype=dtype, device=device))[0]
                         for i, y in enumerate(ys))
        if op == "sort":
            s = x.sort(1, descending=True)
            s0 = x.sort(0, stable=True)
            return s.values, s.indices, s0.values, s0.indices
        if op == "index_put":
            return _put(x.clone(), rc.tensor([0, 2, 0], device=device), 7)
        raise KeyError(op)

    return run


def check_composite_front(device: str, op: str, dtype: Any) -> tuple[str, float, str]:
    """A composite without a NumPy reference: the device's kernel (through its
    front-end) against the core's decomposition on cpu."""
    run = _front(op)
    try:
        with decomposed_on_cpu(op):
            want = host_values(run("cpu", dtype))
    except Exception as exc:
        return "fail", float("inf"), f"the cpu reference raised {type(exc).__name__}: {exc}".splitlines()[0][:160]
    try:
        got = host_values(run(device, dtype))
    except Exception as exc:
        return "fail", float("inf"), f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    ok, worst, what = compare(got, want, loose=True, tols=SUMS if op in _SUM_OPS else None)
    return ("pass" if ok else "fail"), worst, what


def composite_check(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    """One composite kernel a device supplies, one dtype, one layout."""
    if op in COMPOSITE_ROWS:
        return check(device, op, dtype, layout)
    if layout != "contiguous":
        return "n/a", 0.0, ""
    return check_composite_front(device, op, dtype)
