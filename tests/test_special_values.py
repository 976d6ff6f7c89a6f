"""Special values through every elementwise op and reduction, against NumPy.

Each op is fed ±0, NaN, ±inf, exact halves (0.5, 1.5, 2.5 and their negatives,
where rounding modes differ) and the dtype's extremes (largest, most negative,
smallest normal), on every device. The NaN positions must match, infinities
must match with their sign, and where the reference result is a zero whose sign
IEEE arithmetic defines (``-0.0 * 1``, ``ceil(-0.5)``, ``1 / -inf``) its sign
must match too. Reduced-precision accumulation is checked separately: float16
reductions over every axis and layout against a float64 sum rounded once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc

from .dtypes_table import need, npdt, rdt

FLOATS = ["float16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]

# relative tolerance per float dtype: a few units in the last place, wide enough
# for two correctly rounded libms (and float16 computed in float32, rounded once)
RTOL = {"float16": 1e-3, "float32": 4e-6, "float64": 1e-12}


def specials(name: str) -> np.ndarray:
    """The special inputs of dtype ``name``."""
    if name == "bool":
        return np.array([False, True])
    if name in INTS:
        ii = np.iinfo(name)
        vals = [0, 1, 2, 3, ii.max, ii.max - 1, ii.min, ii.min + 1]
        if ii.min < 0:
            vals += [-1, -2, -3]
        return np.array(vals, name)
    fi = np.finfo(name)
    return np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5,
                     1.0, -1.0, 3.0, fi.max, fi.min, fi.tiny, -fi.tiny], name)


def on(arr: np.ndarray, device: str) -> rc.Tensor:
    t = rc.tensor(arr, device=device)
    assert t.dtype is rdt("bool" if arr.dtype == np.bool_ else arr.dtype.name)
    return t


def check(what: str, got: rc.Tensor, expected: np.ndarray, inputs: tuple[np.ndarray, ...], *,
          zero_sign: bool = True, rtol: float | None = None, atol: float = 0.0) -> None:
    """``got`` equals ``expected``: same dtype and shape, NaN exactly where the
    reference has NaN, infinities equal, finite values within ``rtol`` (the
    dtype's default), and the sign of a zero result where ``zero_sign``."""
    g = np.asarray(got.cpu().numpy())
    e = np.asarray(expected)
    assert g.dtype == e.dtype, f"{what}: dtype {g.dtype}, expected {e.dtype}"
    assert g.shape == e.shape, f"{what}: shape {g.shape}, expected {e.shape}"
    flat_in = [np.broadcast_to(a, e.shape).reshape(-1) for a in inputs]

    def where(mask: np.ndarray, msg: str) -> None:
        if mask.any():
            i = int(np.flatnonzero(mask.reshape(-1))[0])
            args = ", ".join(repr(a[i].item()) for a in flat_in)
            raise AssertionError(f"{what}({args}) = {g.reshape(-1)[i].item()!r}, expected "
                                 f"{e.reshape(-1)[i].item()!r} ({int(mask.sum())} of {e.size} "
                                 f"elements: {msg})")

    if e.dtype.kind != "f":
        where(g != e, "not equal")
        return
    tol = RTOL[e.dtype.name] if rtol is None else rtol
    g64, e64 = g.astype(np.float64), e.astype(np.float64)
    where(np.isnan(g64) != np.isnan(e64), "NaN where the reference has none, or none where it has")
    both = ~np.isnan(e64)
    inf = both & (np.isinf(e64) | np.isinf(g64))
    where(inf & (g64 != e64), "infinity differs")
    fin = both & ~inf
    with np.errstate(all="ignore"):
        off = np.abs(g64 - e64) > tol * np.abs(e64) + atol
    where(fin & off, f"beyond rtol={tol}, atol={atol}")
    if zero_sign:
        where(fin & (e64 == 0) & (g64 == 0) & (np.signbit(g64) != np.signbit(e64)),
              "zero of the wrong sign")


def ref(fn, *arrays: np.ndarray, out: str | None = None) -> np.ndarray:
    """``fn`` computed in float64 (ints in int64) and rounded once to ``out``
    (the first input's dtype by default)."""
    dt = out or arrays[0].dtype.name
    wide = [a.astype(np.float64 if a.dtype.kind == "f" else a.dtype) for a in arrays]
    with np.errstate(all="ignore"):
        return np.asarray(fn(*wide)).astype(dt)


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


# -- unary ------------------------------------------------------------------------------

# name: (NumPy reference, the sign of a zero result is defined)
UNARY = {
    "neg": (np.negative, True),
    "abs": (np.abs, True),
    "sign": (np.sign, True),
    "exp": (np.exp, True),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "rsqrt": (lambda a: 1.0 / np.sqrt(a), True),
    "sin": (np.sin, True),
    "cos": (np.cos, True),
    "tan": (np.tan, True),
    "tanh": (np.tanh, True),
    "sigmoid": (_sigmoid, True),
    "reciprocal": (np.reciprocal, True),
    "square": (np.square, True),
    "floor": (np.floor, True),
    "ceil": (np.ceil, True),
    "trunc": (np.trunc, True),
    "round": (np.rint, True),  # halves to even, as PyTorch
    "frac": (lambda a: a - np.trunc(a), True),
    "log2": (np.log2, True),
    "log10": (np.log10, True),
    "log1p": (np.log1p, True),
    "expm1": (np.expm1, True),
    # PyTorch's relu(-0.0) is -0.0 (max(x, 0) keeps x on a tie); NumPy's maximum
    # gives 0.0: either is a zero
    "relu": (lambda a: np.where(np.isnan(a), a, np.maximum(a, 0)), False),
}
# Where the core's decomposition (the path of a backend without its own kernel)
# is wrong today: strict, so a fix shows up as an XPASS to remove the entry.
DECOMPOSITION_BUGS: dict[str, str] = {}  # ops whose decomposition is known wrong here


def decomposed(device: str, op: str, name: str) -> bool:
    """Whether ``op`` on ``device`` runs as the core's decomposition (the
    backend supplies no kernel of its own for it on dtype ``name``)."""
    from rtxcore.ops.core import own_kernel

    rc.zeros(1, device=device)  # (the device's kernel table is built on first use)
    return own_kernel(rc.device(device), op, rdt(name)) is None


def mark_decomposition_bug(request: pytest.FixtureRequest, device: str, op: str) -> None:
    if op in DECOMPOSITION_BUGS and decomposed(device, op, "float32"):
        request.applymarker(pytest.mark.xfail(strict=True, reason=DECOMPOSITION_BUGS[op]))


# the trigonometric functions' huge arguments need a full-range reduction:
# compared within a wider tolerance, as the libms differ by more than an ulp
TRIG = {"sin", "cos", "tan"}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_special_values(request, device, op):
    mark_decomposition_bug(request, device, op)
    fn, zero_sign = UNARY[op]
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name)
        tol = {"atol": 8 * float(np.finfo(name).eps)} if op in TRIG else {}
        check(f"{op}[{name}]", getattr(rc, op)(on(a, device)), ref(fn, a), (a,),
              zero_sign=zero_sign, **tol)
        if op not in TRIG and hasattr(rc.Tensor, op + "_"):  # the in-place twin too
            x = on(a, device)
            assert getattr(x, op + "_")() is x
            check(f"{op}_[{name}]", x, ref(fn, a), (a,), zero_sign=zero_sign)


@pytest.mark.parametrize("op", ["neg", "abs", "sign", "square"])
def test_unary_integer_extremes(device, op):
    """Integers wrap as in C (``abs(int8 -128)`` is -128), as NumPy and PyTorch."""
    fn = UNARY[op][0]
    for name in INTS + ["bool"]:
        if name == "bool" and op != "abs" or name == "uint8" and op == "neg":
            continue  # (PyTorch refuses neg of bool, and -uint8 is a wrap NumPy warns on)
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name)
        with np.errstate(all="ignore"):
            expected = fn(a).astype(a.dtype)
        check(f"{op}[{name}]", getattr(rc, op)(on(a, device)), expected, (a,))


def test_reciprocal_square_nan_to_num_against_numpy(device):
    """The in-place ops whose only other check compared them with rtxcore's own
    out-of-place ops: against NumPy, on special values and every float dtype."""
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name)
        fi = np.finfo(name)
        for op, expected in (("reciprocal", ref(np.reciprocal, a)), ("square", ref(np.square, a)),
                             ("nan_to_num", np.nan_to_num(a))):
            check(f"{op}[{name}]", getattr(rc, op)(on(a, device)), expected, (a,))
            x = on(a, device)
            assert getattr(x, op + "_")() is x
            check(f"{op}_[{name}]", x, expected, (a,))
        # nan_to_num's replacements
        expected = np.nan_to_num(a, nan=1.5, posinf=2.0, neginf=-3.0)
        check(f"nan_to_num[{name}](1.5, 2.0, -3.0)",
              rc.nan_to_num(on(a, device), nan=1.5, posinf=2.0, neginf=-3.0), expected, (a,))
        x = on(a, device)
        x.nan_to_num_(nan=0.25, neginf=float(fi.min))
        check(f"nan_to_num_[{name}]", x, np.nan_to_num(a, nan=0.25, neginf=fi.min), (a,))


@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite", "logical_not"])
def test_predicates_special_values(device, op):
    fn = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
          "logical_not": np.logical_not}[op]
    for name in FLOATS + INTS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name)
        check(f"{op}[{name}]", getattr(rc, op)(on(a, device)), fn(a), (a,))


# -- binary -----------------------------------------------------------------------------


def pairs(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every special value against every other (a 2-D grid)."""
    v = specials(name)
    x, y = np.meshgrid(v, v, indexing="ij")
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


# name: (NumPy reference, zero sign defined)
BINARY = {
    "add": (np.add, True),
    "sub": (np.subtract, True),
    "mul": (np.multiply, True),
    "div": (np.divide, True),
    "pow": (np.power, True),
    "maximum": (np.maximum, False),  # max(-0.0, 0.0): either zero
    "minimum": (np.minimum, False),
    "atan2": (np.arctan2, True),
    "fmod": (np.fmod, True),
    # PyTorch's remainder of a zero takes the dividend's sign, NumPy's the divisor's
    "remainder": (np.remainder, False),
    "floor_divide": (np.floor_divide, True),
}
# The core's decomposition of //, % and fmod computes through floor(a / b)
# (README, differences from PyTorch), so those are compared where that is
# exact: a / b neither underflows nor reaches 2**(mantissa bits + 1) (where
# float spacing passes 1), a finite divisor, and for // a finite dividend
# (inf // y is nan in NumPy and PyTorch, inf through floor(a / b)); NaN
# operands everywhere.
THROUGH_DIV = {"fmod", "remainder", "floor_divide"}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_special_values(device, op):
    fn, zero_sign = BINARY[op]
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        x, y = pairs(name)
        if op in THROUGH_DIV:
            fi = np.finfo(name)
            with np.errstate(all="ignore"):
                q = np.abs(x.astype(np.float64) / y.astype(np.float64))
            exact = (x == 0) | (q >= fi.tiny) & (q <= 2.0 ** (fi.nmant + 1))
            inf_ok = np.isinf(x) if op != "floor_divide" else np.zeros_like(exact)
            keep = np.isfinite(y) & (exact | inf_ok) | np.isnan(x) | np.isnan(y)
            x, y = x[keep], y[keep]
        got = getattr(rc, op)(on(x, device), on(y, device))
        check(f"{op}[{name}]", got, ref(fn, x, y), (x, y), zero_sign=zero_sign)


def test_binary_through_div_exact(device):
    """fmod, remainder and // on every special pair where the quotient is exact:
    signs of the result (C's fmod: the dividend's; Python's %: the divisor's)."""
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1.0, -1.0, 3.0, -3.0, 7.0], name)
        x, y = np.meshgrid(v, v, indexing="ij")
        for op, fn in (("fmod", np.fmod), ("remainder", np.remainder),
                       ("floor_divide", np.floor_divide)):
            got = getattr(rc, op)(on(x, device), on(y, device))
            check(f"{op}[{name}]", got, ref(fn, x, y), (x, y), zero_sign=op != "remainder")


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum", "floor_divide",
                                "remainder"])
def test_binary_integer_extremes(device, op):
    """Integer wrap-around and floor semantics at the dtype's ends (no zero
    divisor, and no -1 divisor: min // -1 overflows in C)."""
    fn = BINARY[op][0]
    for name in INTS:
        if not rc.device(device).supports(rdt(name)):
            continue
        x, y = pairs(name)
        if op in ("floor_divide", "remainder"):
            keep = (y != 0) & (y != -1) if name != "uint8" else y != 0
            x, y = x[keep], y[keep]
        with np.errstate(all="ignore"):
            expected = fn(x, y).astype(name)
        check(f"{op}[{name}]", getattr(rc, op)(on(x, device), on(y, device)), expected, (x, y))


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_special_values(device, op):
    """NaN compares unequal to everything (ne: True), -0.0 == 0.0, the extremes order."""
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}[op]
    for name in FLOATS + INTS:
        if not rc.device(device).supports(rdt(name)):
            continue
        x, y = pairs(name)
        check(f"{op}[{name}]", getattr(rc, op)(on(x, device), on(y, device)), fn(x, y), (x, y))
        if name not in ("float16", "float64", "int64"):
            continue
        # against a Python scalar operand too (a kernel's scalar path)
        for s in (0.0, -0.0, float("nan"), float("inf")) if name in FLOATS else (0, 1):
            got = getattr(rc, op)(on(x, device), s)
            check(f"{op}[{name}](x, {s})", got, fn(x, np.asarray(s, name)), (x,))


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_special_values(device, op):
    """NaN and -0.0 as truth values: NaN is true, -0.0 false."""
    fn = getattr(np, op)
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        x, y = pairs(name)
        check(f"{op}[{name}]", getattr(rc, op)(on(x, device), on(y, device)), fn(x, y), (x, y))


def test_clamp_special_values(device):
    """clamp propagates NaN (PyTorch), keeps infinities inside infinite bounds,
    and accepts bounds given as tensors."""
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name)
        for lo, hi in ((-1.0, 1.0), (-0.5, 2.5), (None, 0.0), (0.0, None), (-np.inf, np.inf)):
            got = rc.clamp(on(a, device), lo, hi)
            e = a.astype(np.float64)
            if lo is not None:
                e = np.where(e < lo, lo, e)
            if hi is not None:
                e = np.where(e > hi, hi, e)
            check(f"clamp[{name}]({lo}, {hi})", got, e.astype(name), (a,), zero_sign=False)
        lo_t, hi_t = on(np.full_like(a, -1.5), device), on(np.full_like(a, 0.5), device)
        e = np.where(np.isnan(a), a, np.minimum(np.maximum(a, -1.5), 0.5)).astype(name)
        check(f"clamp[{name}](tensors)", rc.clamp(on(a, device), lo_t, hi_t), e, (a,),
              zero_sign=False)


def test_where_keeps_special_values(device):
    """where copies NaN payloads, infinities and -0.0 unchanged."""
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name)
        b = a[::-1].copy()
        c = np.arange(a.size) % 2 == 0
        got = rc.where(on(c, device), on(a, device), on(b, device))
        check(f"where[{name}]", got, np.where(c, a, b), (c, a, b))
        got = rc.where(on(c, device), on(a, device), -0.0)
        check(f"where[{name}](c, x, -0.0)", got, np.where(c, a, np.asarray(-0.0, name)), (c, a))


# -- reductions -------------------------------------------------------------------------


def reduction_rows(name: str) -> np.ndarray:
    """Rows of six, each a pattern of special values: plain, with NaN, with inf,
    with -inf, with both infinities, zeros of both signs, the extremes (whose
    sum overflows in any order), halves."""
    fi = np.finfo(name)
    nan, inf = np.nan, np.inf
    rows = [
        [1.5, -0.5, 2.5, 0.5, -2.5, 3.0],
        [1.0, nan, 2.0, -1.0, 0.5, 3.0],
        [1.0, inf, 2.0, -1.0, 0.5, 3.0],
        [1.0, -inf, 2.0, -1.0, 0.5, 3.0],
        [inf, -inf, 2.0, -1.0, 0.5, 3.0],
        [0.0, -0.0, 0.0, -0.0, -0.0, 0.0],
        [fi.max, fi.max, 1.0, 0.5, fi.tiny, -fi.tiny],
        [-0.5, 0.5, -1.5, 1.5, -2.5, 2.5],
        [nan, inf, -inf, 0.0, fi.max, fi.min],
        [-inf, -inf, -inf, -inf, -inf, -inf],
    ]
    return np.array(rows, name)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # an infinite max: the sum says inf or -inf
    return np.squeeze(np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m, axis)


def _acc(a: np.ndarray) -> np.ndarray:
    """``a`` in the dtype PyTorch accumulates it in: float32 for float16 and
    float32, float64 for float64 (where a sum overflows depends on it)."""
    return a.astype(np.float64 if a.dtype == np.float64 else np.float32)


def _moments(fn):
    """std/var in float64, and which rows to leave out: those whose variance
    overflows the accumulation dtype (NaN or inf, depending on the algorithm)."""
    def reference(a: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        v = np.var(a.astype(np.float64), axis=axis, ddof=1)
        over = np.isfinite(v) & (v > np.finfo(_acc(a[:0]).dtype).max)
        return fn(a.astype(np.float64), axis=axis, ddof=1), over
    return reference


# name: (NumPy reference over an axis -- the result, or (result, rows left out) --,
# result dtype (None: the input's))
REDUCTIONS = {
    "sum": (lambda a, axis: np.sum(_acc(a), axis=axis), None),
    "prod": (lambda a, axis: np.prod(_acc(a), axis=axis), None),
    "mean": (lambda a, axis: np.mean(_acc(a), axis=axis), None),
    "amax": (lambda a, axis: np.max(a, axis=axis), None),
    "amin": (lambda a, axis: np.min(a, axis=axis), None),
    "max": (lambda a, axis: np.max(a, axis=axis), None),
    "min": (lambda a, axis: np.min(a, axis=axis), None),
    # a NaN counts as the largest and the smallest: its first position wins (PyTorch, NumPy)
    "argmax": (lambda a, axis: np.argmax(a, axis=axis), "int64"),
    "argmin": (lambda a, axis: np.argmin(a, axis=axis), "int64"),
    "std": (_moments(np.std), None),
    "var": (_moments(np.var), None),
    "logsumexp": (lambda a, axis: _logsumexp(_acc(a), axis), None),
    "nansum": (lambda a, axis: np.nansum(_acc(a), axis=axis), None),
}


def _reduce(op: str, x: rc.Tensor, dim: int) -> rc.Tensor:
    r = getattr(rc, op)(x, dim)
    return r.values if op in ("max", "min") else r


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_reduction_special_values(device, op):
    """Each row reduced (dim=1), and the same rows as columns of the transposed
    matrix (dim=0, a non-innermost axis in memory)."""
    fn, out = REDUCTIONS[op]
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = reduction_rows(name)
        with np.errstate(all="ignore"):
            r = fn(a, 1)
            r, left_out = r if isinstance(r, tuple) else (r, np.zeros(a.shape[0], bool))
            expected = np.asarray(r).astype(out or name)
        keep = ~left_out
        # float16 is accumulated in float32 and rounded once: one float16 ulp
        tol = {"rtol": 2e-3} if name == "float16" else {}
        for how, t, dim in (("rows", on(a, device), 1),
                            ("columns", on(np.ascontiguousarray(a.T), device), 0),
                            ("transposed view", on(a, device).t(), 0)):
            got = _reduce(op, t, dim)
            kept = got[rc.tensor(keep, device=got.device)]
            check(f"{op}[{name}]({how})", kept, expected[keep], (), zero_sign=False, **tol)


def test_max_min_with_indices_special_values(device):
    """max/min(dim) return the index of the first NaN where a row has one, else
    of the first extreme, as PyTorch (values and indices agree)."""
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = reduction_rows(name)
        for op, np_arg in (("max", np.argmax), ("min", np.argmin)):
            r = getattr(rc, op)(on(a, device), 1)
            idx = np_arg(a, axis=1)
            check(f"{op}[{name}].indices", r.indices, idx.astype(np.int64), ())
            check(f"{op}[{name}].values", r.values, a[np.arange(a.shape[0]), idx], (),
                  zero_sign=False)


def test_cumsum_special_values(device):
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = reduction_rows(name)
        with np.errstate(all="ignore"):
            expected = np.cumsum(_acc(a), axis=1).astype(name)
        tol = {"rtol": 2e-3} if name == "float16" else {}
        check(f"cumsum[{name}]", rc.cumsum(on(a, device), 1), expected, (), zero_sign=False, **tol)
        check(f"cumsum[{name}](dim 0)", rc.cumsum(on(np.ascontiguousarray(a.T), device), 0),
              np.ascontiguousarray(expected.T), (), zero_sign=False, **tol)


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin"])
def test_integer_reductions_at_extremes(device, op):
    """Integer sums and products wrap as in C; int sums of small ints promote to
    int64, as PyTorch."""
    fn = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min}[op]
    for name in INTS:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = specials(name).reshape(1, -1)
        out = "int64" if op in ("sum", "prod") else name
        with np.errstate(all="ignore"):
            expected = fn(a.astype(out), axis=1)
        check(f"{op}[{name}]", getattr(rc, op)(on(a, device), 1), expected.astype(out), ())


# -- float16 accumulation over every axis and layout -------------------------------------

LONG = 2100  # past 2048, where float16's spacing becomes 2: adding ~1 there loses it all


def _f16_cases(axis: int) -> list[tuple[str, np.ndarray, object]]:
    """(layout, host array, how to make the device tensor from the host array)
    for a 3-D float16 tensor whose ``axis`` is LONG long."""
    rng = np.random.default_rng(axis)
    shape = [3, 4, 2]
    shape[axis] = LONG
    base = rng.uniform(0.5, 1.5, shape).astype(np.float16)
    cases: list[tuple[str, np.ndarray, object]] = [("contiguous", base, lambda t: t)]
    # transposed: the host holds the permuted array contiguously; the device
    # tensor is a permuted view of it, so ``axis`` lies elsewhere in memory
    perm = (2, 0, 1)
    inv = tuple(int(i) for i in np.argsort(perm))
    held = np.ascontiguousarray(base.transpose(inv))
    cases.append(("transposed", held, lambda t: t.permute(*perm)))
    # sliced with a step along the long axis
    big = np.repeat(base, 2, axis=axis)
    big[tuple(slice(1, None, 2) if d == axis else slice(None) for d in range(3))] = 1000
    cases.append(("stepped", big, lambda t: t[tuple(slice(None, None, 2) if d == axis
                                                    else slice(None) for d in range(3))]))
    return cases


@pytest.mark.parametrize("op", ["sum", "mean", "cumsum", "nansum"])
def test_float16_accumulation_every_axis_and_layout(device, op):
    """float16 sums accumulate in float32 (as PyTorch's) and round once: along
    every axis, on contiguous, transposed and stepped views, the result is the
    float64 sum rounded once (or the float16 next to it). Accumulating in
    float16 is off by hundreds past 2048."""
    need(device, "float16")
    for axis in range(3):
        for layout, held, make in _f16_cases(axis):
            x = make(on(held, device))
            # the same view on the host
            ref_in = np.asarray(make(rc.tensor(held)).numpy(), np.float64)
            dims: list[object] = [axis] if op == "cumsum" else [axis, (axis, (axis + 1) % 3), None]
            for dim in dims:
                if op == "cumsum":
                    e = np.cumsum(ref_in, axis=dim)
                    got = rc.cumsum(x, dim)
                else:
                    np_fn = np.mean if op == "mean" else np.sum
                    e = np_fn(ref_in, axis=dim if dim is not None else None)
                    got = getattr(rc, op)(x) if dim is None else getattr(rc, op)(x, dim)
                expected = np.asarray(e).astype(np.float16)
                g = got.cpu().numpy().astype(np.float64)
                assert got.dtype is rc.float16
                # one float16 spacing at the result's magnitude
                ulp = np.spacing(np.abs(expected)).astype(np.float64)
                err = np.abs(g - expected.astype(np.float64))
                assert (err <= ulp).all(), (
                    f"{op} of float16 over dim {dim}, {layout}: worst error "
                    f"{err.max()} (> one float16 ulp {ulp.reshape(-1)[np.argmax(err)]}): "
                    f"got {g.reshape(-1)[np.argmax(err)]}, expected "
                    f"{expected.reshape(-1)[np.argmax(err)]}")


def test_float16_prod_and_var_accumulate_wide(device):
    """prod's partial products and var's squares stay in float32: a float16
    product overflowing midway ends finite, and var of values near 60 (squares
    past 65504 in float16) is finite."""
    need(device, "float16")
    a = np.array([[300.0, 300.0, 1 / 256, 1 / 256]] * 3, np.float16)
    expected = np.prod(a.astype(np.float64), axis=1).astype(np.float16)
    check("prod[float16]", rc.prod(on(a, device), 1), expected, ())
    check("prod[float16](columns)", rc.prod(on(np.ascontiguousarray(a.T), device), 0), expected, ())
    b = (np.arange(40) % 5 + 300).astype(np.float16).reshape(4, 10)
    expected = np.var(b.astype(np.float64), axis=1, ddof=1).astype(np.float16)
    check("var[float16]", rc.var(on(b, device), 1), expected, (), rtol=2e-3)
    assert math.isfinite(float(rc.var(on(b, device)).item()))


def test_floor_divide_and_remainder_next_to_multiples(device):
    """Where floor(a / b) goes wrong: 1.0 // 0.1 is 9 and 1.0 % 0.1 is 0.0999...
    (a / b rounds up to 10), 5 % inf is 5 and -5 % inf is inf, -5 // inf is -1 —
    as PyTorch and NumPy. rtxcore's own backends (cpu, opencl, cuda) and any with
    kernels of their own for these ops are held to that; the core's composite
    from primitives (what a backend without them gets, the ``prims`` test device)
    computes floor(a / b) (README: differences from PyTorch), and is checked to
    be exactly that."""
    from rtxcore.ops.core import own_kernel, ready_device

    dev = ready_device(rc.device(device))
    inf = float("inf")
    a = [1.0, 1.0, 5.0, -5.0, 5.0, -5.0, 2.0, -7.5, 0.3, -0.7]
    b = [0.1, -0.1, inf, inf, -inf, -inf, 0.2, 2.0, 0.1, 0.1]
    for name in FLOATS:
        if not rc.device(device).supports(rdt(name)):
            continue
        x, y = np.array(a, name), np.array(b, name)
        for op, fn in (("floor_divide", np.floor_divide), ("remainder", np.remainder)):
            got = getattr(rc, op)(on(x, device), on(y, device)).cpu().numpy()
            if own_kernel(dev, op, rdt(name)) is not None or dev.type in ("cpu", "opencl", "cuda"):
                with np.errstate(all="ignore"):
                    want = fn(x, y)
            else:
                with np.errstate(all="ignore"):
                    q = np.floor(x / y)
                    want = q if op == "floor_divide" else (x - q * y).astype(name)
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=RTOL[name], atol=0, err_msg=f"{op} {name} on {device}")
