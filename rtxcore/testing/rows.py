"""Each op's conformance row: for one op, dtype and layout, the kernel calls and
their NumPy results (``ROWS``; ``COMPOSITE_ROWS`` for the composites with a
NumPy reference), and the memory ops' cases, run on the device and on cpu
alike (``CASES``). Every primitive has one or the other (checked on import).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..dispatch import ops as OPS
from .arrays import (_LOOSE_OPS, NA, SHAPE, _np, _rc, _scalar, claimed_dtypes, dtype_named,
                     laid_out, logical, special_values, stable_seed, values)
from .calls import Arr, Call, _Batch

Row = Callable[[str, Any, str], Any]  # (op, dtype, layout) -> list[Call] | NA



class WithInputs(tuple):
    """A case's results, with the host inputs they came from (``[(name, array)]``):
    a failing comparison shows the inputs at the first difference."""

    def __new__(cls, results: Any, inputs: list[tuple[str, Any]]) -> "WithInputs":
        self = super().__new__(cls, results)
        self.inputs = inputs
        return self

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
    return WithInputs((x.clone(), into.copy_(x), strided.copy_(x)), [("x", x)])


def _cast(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    # what the cast spec leaves unspecified is not checked (rtxcore/dispatch/ops.py):
    # float -> int of nan, inf or out of range, negative floats to unsigned types,
    # int -> int narrowing
    a = values(dtype, 13, special=True)
    if dtype.kind == "f":
        a = np.where(np.isfinite(a) & (np.abs(a) < 100), a, 1.5).astype(a.dtype)
    x = laid_out(device, a, layout, dtype)
    nonneg = laid_out(device, np.abs(a), layout, dtype) if dtype.kind == "f" else x
    targets = [t for t in claimed_dtypes(tested or device, "cast") if t is not dtype]
    out = []
    for t in targets:
        src = nonneg if t.kind == "u" else x
        if dtype.kind in "iu" and t.kind in "iu" and t.itemsize < dtype.itemsize:
            continue
        if dtype.kind in "iu" and t.name == "float16" and dtype.itemsize > 1:
            continue  # (int extremes overflow float16)
        out.append(src.to(t))
    shown = [("x", x)] + ([("|x| (given to unsigned targets)", nonneg)] if nonneg is not x else [])
    return WithInputs(out, shown)


def _transfer(device: str, dtype: Any, layout: str, tested: str = "") -> Any:
    # from_host, then to_host of a view of it (compared through .cpu())
    x = laid_out(device, values(dtype, 14, special=True), layout, dtype)
    return WithInputs((x,), [("x", x)])


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
