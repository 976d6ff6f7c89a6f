"""Elementwise ops (unary, binary, comparisons, logical, in place) against NumPy.

Every expected value is computed by NumPy (or ``math`` for erf) from the same
input data; expected dtypes follow PyTorch's promotion rules.
"""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch import ops
from rtxcore.testing import assert_close

from .dtypes_table import ALL, need, npdt, rdt, torch_promote


INTS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float16", "float32", "float64"]
NONBOOL = INTS + FLOATS


def cat(name: str) -> int:
    return 0 if name == "bool" else 2 if name.startswith("float") else 1


def default_float() -> str:
    return rc.get_default_dtype().name


def floatish(name: str) -> str:
    """Result dtype of a float op (exp, sqrt, /) on an input of dtype ``name``."""
    return name if cat(name) == 2 else default_float()


def sample(name: str, shape=(3, 4), *, seed: int = 0, lo: float = -3.0, hi: float = 3.0,
           positive: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.random(shape) < 0.5
    if cat(name) == 1:
        ilo = 1 if positive else (0 if name == "uint8" else -10)
        return rng.integers(ilo, 11, shape).astype(name)
    if positive:
        lo = 0.1
    return rng.uniform(lo, hi, shape).astype(name)


def T(arr, device):
    """A tensor with exactly ``arr``'s dtype and values."""
    t = rc.tensor(np.asarray(arr), device=device)
    assert t.dtype is rdt(np.asarray(arr).dtype.name if np.asarray(arr).dtype != np.bool_ else "bool")
    return t


_verf = np.vectorize(math.erf, otypes=[np.float64])

# every op's facts (result kind, NumPy reference, in-place twin) from its OpSpec
SPECS = {**ops.PRIMITIVES, **ops.COMPOSITES}


def spec_ops(family: str, result: str) -> list[str]:
    return [n for n, s in SPECS.items() if s.family == family and s.result == result]


def float_result(op: str) -> bool:
    """Ints and bool promote to the default float (div, exp, ...)."""
    return SPECS[op].result == "float"


# -- unary --------------------------------------------------------------------------

# input options, where the reference needs them
_UNARY_OPTS = {"log": {"positive": True}, "log1p": {"positive": True}, "log2": {"positive": True},
               "sqrt": {"positive": True}, "rsqrt": {"positive": True},
               "tan": {"lo": -1.2, "hi": 1.2}, "reciprocal": {"lo": 0.5, "hi": 3.0}}

# name: (reference in float64, input options): the OpSpecs' float unary ops, and rsqrt
FLOAT_UNARY = {
    **{op: (ops.reference(SPECS[op]), _UNARY_OPTS.get(op, {})) for op in spec_ops("unary", "float")},
    "rsqrt": (lambda a: 1.0 / np.sqrt(a), _UNARY_OPTS["rsqrt"]),
}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
def test_float_unary(device, op, name):
    """exp, log, ... on every dtype: ints and bool compute in the default float."""
    need(device, name)
    ref, opts = FLOAT_UNARY[op]
    a = sample(name, **opts)
    out_name = floatish(name)
    need(device, out_name)
    with np.errstate(all="ignore"):
        expected = ref(a.astype(np.float64)).astype(out_name)
    x = T(a, device)
    tol = {"rtol": 1e-6, "atol": 1e-6} if op == "erf" and name != "float16" else {}
    assert_close(getattr(rc, op)(x), expected, **tol)
    assert_close(getattr(x, op)(), expected, **tol)
    assert_close(x, a)  # the input is untouched


ACTIVATIONS = {
    "gelu": lambda a: a * 0.5 * (1.0 + _verf(a / math.sqrt(2.0))),
    "silu": lambda a: a / (1.0 + np.exp(-a)),
    "softplus": lambda a: np.where(a > 20, a, np.log1p(np.exp(a))),
    "sigmoid": lambda a: 1.0 / (1.0 + np.exp(-a)),
}


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activations(device, op, name):
    need(device, name)
    a = sample(name, (4, 5), lo=-6, hi=6, seed=3)
    expected = ACTIVATIONS[op](a.astype(np.float64)).astype(name)
    tol = {"rtol": 1e-6, "atol": 1e-6} if name != "float16" else {}
    assert_close(getattr(rc, op)(T(a, device)), expected, **tol)


def test_gelu_tanh_approximation(device):
    need(device, "float64")
    a = np.linspace(-5, 5, 41)
    inner = math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)
    expected = (0.5 * a * (1 + np.tanh(inner))).astype(np.float32)
    assert_close(rc.gelu(rc.tensor(a, dtype=rc.float32, device=device), approximate="tanh"), expected)
    with pytest.raises(ValueError):
        rc.gelu(rc.tensor(a, device=device), approximate="bogus")


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 20.0), (0.5, 3.0)])
def test_softplus_beta_threshold(device, beta, threshold):
    need(device, "float64")
    a = np.linspace(-30, 30, 61)
    bx = a * beta
    expected = np.where(bx > threshold, a, np.log1p(np.exp(bx)) / beta)
    assert_close(rc.softplus(rc.tensor(a, dtype=rc.float64, device=device), beta=beta,
                             threshold=threshold), expected)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_erf_accuracy_over_range(device, name):
    """erf vs math.erf, tiny arguments included (relative error, not absolute)."""
    need(device, name)
    mags = np.concatenate([np.geomspace(1e-10, 6, 60), [0.0]])
    a = np.concatenate([mags, -mags]).astype(name)
    expected = _verf(a.astype(np.float64)).astype(name)
    assert_close(rc.erf(T(a, device)), expected, rtol=1e-6, atol=1e-30)


def test_float_unary_special_values(device):
    need(device, "float64")
    f = rc.float64
    x = rc.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-300, -1e-300, 710.0, -1000.0],
                  dtype=f, device=device)
    a = x.numpy().copy()
    with np.errstate(all="ignore"):
        for op, ref in [("exp", np.exp), ("expm1", np.expm1), ("log", np.log), ("log1p", np.log1p),
                        ("log2", np.log2), ("sqrt", np.sqrt), ("tanh", np.tanh),
                        ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
                        ("sin", np.sin), ("cos", np.cos)]:
            got = getattr(rc, op)(x)
            assert_close(got, ref(a)), op


def test_expm1_log1p_small_arguments_keep_precision(device):
    need(device, "float64")
    a = np.array([1e-12, -1e-12, 1e-8, 3e-5, -3e-5])
    x = rc.tensor(a, dtype=rc.float64, device=device)
    assert_close(rc.expm1(x), np.expm1(a), rtol=1e-12, atol=0)
    assert_close(rc.log1p(x), np.log1p(a), rtol=1e-12, atol=0)


def test_sigmoid_softplus_silu_extremes_are_finite(device):
    need(device, "float64")
    a = np.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0])
    for name in ("float32", "float64"):
        x = rc.tensor(a, dtype=rdt(name), device=device)
        with np.errstate(over="ignore"):
            assert_close(rc.sigmoid(x), (1 / (1 + np.exp(-a))).astype(name))
            assert_close(rc.softplus(x), np.where(a > 20, a, np.log1p(np.exp(a))).astype(name))
            assert_close(rc.silu(x), (a / (1 + np.exp(-a))).astype(name))
        assert not rc.isnan(rc.sigmoid(x)).any().item()
        assert not rc.isnan(rc.silu(x)).any().item()


# ops that keep the input dtype: the OpSpecs' (neg, abs, sign, floor, ceil, round,
# trunc), and relu
SAME_UNARY = {
    **{op: ops.reference(SPECS[op]) for op in spec_ops("unary", "same")},
    "relu": lambda a: np.maximum(a, np.zeros((), a.dtype)),
}


@pytest.mark.parametrize("name", NONBOOL)
@pytest.mark.parametrize("op", sorted(SAME_UNARY))
def test_same_dtype_unary(device, op, name):
    need(device, name)
    a = sample(name, lo=-4, hi=4)
    if op in ("floor", "ceil", "round", "trunc") and cat(name) == 2:
        a[0, :4] = np.array([0.5, 1.5, -2.5, -0.5], dtype=name)  # exact halves
    if cat(name) == 1:
        expected = SAME_UNARY[op](a).astype(name)  # integers: in the dtype (wrapping)
    else:
        expected = SAME_UNARY[op](a.astype(np.float64)).astype(name)
    x = T(a, device)
    assert_close(getattr(rc, op)(x), expected)
    assert_close(getattr(x, op)(), expected)


def test_operators_neg_abs_pos(device):
    a = sample("float32")
    x = T(a, device)
    assert_close(-x, -a)
    assert_close(abs(x), np.abs(a))
    assert_close(+x, a)


def test_neg_of_bool_raises(device):
    x = rc.tensor([True, False], device=device)
    with pytest.raises(RuntimeError):
        -x
    with pytest.raises(RuntimeError):
        rc.neg(x)


def test_sign_of_bool_is_identity(device):
    # PyTorch: sign of a bool tensor is the tensor itself (bool)
    a = np.array([True, False, True])
    assert_close(rc.sign(rc.tensor(a, device=device)), a)


def test_uint8_neg_wraps(device):
    a = np.array([0, 1, 200, 255], dtype=np.uint8)
    assert_close(-T(a, device), np.negative(a))


@pytest.mark.parametrize("decimals", [1, 2, -1])
def test_round_decimals(device, decimals):
    need(device, "float64")
    a = np.array([1.2345, -2.5551, 125.0, 0.0049, 31.5, -77.77])
    x = rc.tensor(a, dtype=rc.float64, device=device)
    assert_close(rc.round(x, decimals=decimals), np.round(a, decimals))


def test_round_half_to_even(device):
    a = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999, 2.5001], dtype=np.float32)
    assert_close(rc.round(T(a, device)), np.round(a))


@pytest.mark.parametrize("name", FLOATS)
def test_square_reciprocal_log10(device, name):
    need(device, name)
    a = sample(name, positive=True)
    a64 = a.astype(np.float64)
    x = T(a, device)
    assert_close(rc.square(x), (a64 * a64).astype(name))
    assert_close(rc.reciprocal(x), (1 / a64).astype(name))
    assert_close(rc.log10(x), np.log10(a64).astype(name))


# -- binary -----------------------------------------------------------------------------

BINARY_FN = {
    "add": (rc.add, operator.add),
    "sub": (rc.sub, operator.sub),
    "mul": (rc.mul, operator.mul),
    "div": (rc.div, operator.truediv),
    "floor_divide": (rc.floor_divide, operator.floordiv),
    "remainder": (rc.remainder, operator.mod),
    "pow": (rc.pow, operator.pow),
    "maximum": (rc.maximum, None),
    "minimum": (rc.minimum, None),
}


def np_binary(op: str, a: np.ndarray, b: np.ndarray, res: str) -> np.ndarray:
    """NumPy reference for ``a op b`` with result dtype ``res``; ``a`` and ``b`` are
    already in the promoted dtype. Integers are computed in their dtype (wrapping,
    floor semantics), floats in float64 then rounded."""
    if npdt(res).kind == "f" or float_result(op):
        a, b = a.astype(np.float64), b.astype(np.float64)
    fn = ops.reference(SPECS[op])  # (on bool, numpy's add is or, multiply is and)
    with np.errstate(all="ignore"):
        return fn(a, b).astype(res)


def binary_operands(op: str, name: str, shape_a=(3, 4), shape_b=(3, 4), seed: int = 0):
    rng = np.random.default_rng(seed)
    a = sample(name, shape_a, seed=seed)
    b = sample(name, shape_b, seed=seed + 1)
    if op in ("floor_divide", "remainder", "div") and name != "bool":
        if cat(name) == 1:  # nonzero integer divisors of both signs
            mag = rng.integers(1, 6, shape_b)
            b = (mag if name == "uint8" else mag * rng.choice([-1, 1], shape_b)).astype(name)
        else:
            b = (rng.uniform(0.5, 2.0, shape_b) * rng.choice([-1, 1], shape_b)).astype(name)
    if op == "pow":
        if cat(name) == 1:
            a = rng.integers(0 if name == "uint8" else -3, 4, shape_a).astype(name)
            b = rng.integers(0, 4, shape_b).astype(name)
        else:
            a = rng.uniform(0.2, 3.0, shape_a).astype(name)
            b = rng.uniform(-2.0, 2.0, shape_b).astype(name)
    return a, b


def _binary_cases():
    for op in BINARY_FN:
        for name in ALL:
            if name == "bool" and not float_result(op) and name not in ops.kernel_dtypes(SPECS[op]):
                continue  # (refused for bool: tested separately)
            for form in ("function", "method", "operator"):
                if form == "operator" and BINARY_FN[op][1] is None:
                    continue
                yield op, name, form


@pytest.mark.parametrize("op,name,form", list(_binary_cases()))
def test_binary_same_dtype(device, op, name, form):
    need(device, name)
    fn, sym = BINARY_FN[op]
    a, b = binary_operands(op, name)
    res = floatish(name) if float_result(op) else name
    need(device, res)
    x, y = T(a, device), T(b, device)
    got = {"function": lambda: fn(x, y), "method": lambda: getattr(x, op)(y),
           "operator": lambda: sym(x, y)}[form]()
    assert_close(got, np_binary(op, a, b, res))
    assert_close(x, a)
    assert_close(y, b)


def test_sub_of_bool_raises(device):
    x = rc.tensor([True, False], device=device)
    with pytest.raises(RuntimeError):
        x - x
    with pytest.raises(RuntimeError):
        rc.sub(x, True)


def test_add_sub_alpha(device):
    need(device, "float64")
    a, b = sample("float64"), sample("float64", seed=5)
    x, y = T(a, device), T(b, device)
    assert_close(rc.add(x, y, alpha=2.5), a + 2.5 * b)
    assert_close(x.sub(y, alpha=-3), a + 3 * b)
    assert_close(rc.add(T(np.arange(4), device), T(np.arange(4), device), alpha=3), np.arange(4) * 4)


def test_aliases(device):
    a, b = sample("float32"), sample("float32", seed=2) + np.float32(4)
    x, y = T(a, device), T(b, device)
    for fn in (rc.true_divide, rc.divide):
        assert_close(fn(x, y), (a.astype(np.float64) / b).astype(np.float32))
    assert_close(rc.multiply(x, y), a * b)
    assert_close(rc.subtract(x, y), a - b)
    assert_close(rc.clip(x, -1, 1), np.clip(a, -1, 1))
    assert_close(rc.fix(x), np.trunc(a))


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("name", ["int32", "int64", "float32", "float64"])
def test_div_rounding_mode(device, mode, name):
    need(device, name)
    a, b = binary_operands("div", name, seed=4)
    x, y = T(a, device), T(b, device)
    q = a.astype(np.float64) / b.astype(np.float64)
    expected = (np.floor(q) if mode == "floor" else np.trunc(q)).astype(name)
    assert_close(rc.div(x, y, rounding_mode=mode), expected)
    assert_close(x.div(y, rounding_mode=mode), expected)
    with pytest.raises(ValueError):
        rc.div(x, y, rounding_mode="bogus")


@pytest.mark.parametrize("name", INTS)
def test_true_division_of_ints_is_default_float(device, name):
    need(device, name)
    a, b = binary_operands("div", name)
    got = T(a, device) / T(b, device)
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, (a.astype(np.float64) / b).astype(default_float()))


def test_float_division_by_zero(device):
    need(device, "float64")
    a = np.array([1.0, -1.0, 0.0])
    z = np.zeros(3)
    with np.errstate(all="ignore"):
        assert_close(rc.tensor(a, device=device) / rc.tensor(z, device=device), a / z)
        assert_close(rc.tensor(a, dtype=rc.float32, device=device) / 0, (a / 0.0).astype(np.float32))
        ai = np.array([1, -1, 0])
        assert_close(rc.tensor(ai, device=device) / 0, (ai / 0.0).astype(np.float32))


def test_integer_pow_negative_exponent_raises(device):
    x = rc.tensor([1, 2, 3], device=device)
    with pytest.raises(RuntimeError):
        x ** -1
    with pytest.raises(RuntimeError):
        rc.pow(x, -2)
    assert_close(x ** 0, np.ones(3, dtype=np.int64))
    assert_close(rc.tensor([1.0, 2.0, 4.0], device=device) ** -1, np.array([1.0, 0.5, 0.25], np.float32))


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 0.5, -1.0, 2.0])
def test_pow_scalar_exponents(device, exponent):
    need(device, "float64")
    a = sample("float64", positive=True)
    assert_close(T(a, device) ** exponent, np.power(a, exponent))
    ai = sample("int32", positive=True)
    if isinstance(exponent, int):
        assert_close(T(ai, device) ** exponent, np.power(ai, exponent).astype(np.int32))
    else:
        assert_close(T(ai, device) ** exponent, np.power(ai.astype(np.float64), exponent).astype(np.float32))


def test_pow_nan_propagation(device):
    need(device, "float64")
    a = np.array([math.nan, 1.0, 2.0, -8.0, 0.0])
    b = np.array([0.0, math.nan, math.inf, 1 / 3, -1.0])
    with np.errstate(all="ignore"):
        assert_close(rc.pow(rc.tensor(a, dtype=rc.float64, device=device),
                            rc.tensor(b, dtype=rc.float64, device=device)), np.power(a, b))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan(device, op):
    need(device, "float64")
    a = np.array([math.nan, 1.0, 2.0, math.nan])
    b = np.array([0.0, math.nan, 1.0, math.nan])
    assert_close(getattr(rc, op)(rc.tensor(a, device=device), rc.tensor(b, device=device)),
                 getattr(np, op)(a, b))


@pytest.mark.parametrize("op,na,nb", [
    (op, na, nb) for op in ["add", "mul", "div", "maximum", "sub"] for na in ALL for nb in ALL
    if not (op == "sub" and "bool" in (na, nb))  # bool subtraction raises (tested separately)
])
def test_binary_mixed_dtypes(device, op, na, nb):
    need(device, na, nb)
    a = sample(na, (2, 3), seed=1)
    b = sample(nb, (2, 3), seed=2)
    if op == "div" and nb != "bool":
        b = np.where(b == 0, np.ones((), b.dtype), b).astype(nb)
    pt = torch_promote(na, nb)
    res = floatish(pt) if float_result(op) else pt
    need(device, res)
    got = getattr(rc, op)(T(a, device), T(b, device))
    assert got.dtype is rdt(res)
    assert_close(got, np_binary(op, a.astype(pt), b.astype(pt), res))


BROADCAST_SHAPES = [
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (3, 1)),
    ((5,), (1,)),
    ((), (3,)),
    ((3,), ()),
    ((), ()),
    ((2, 1, 3), (4, 1)),
    ((0, 3), (1, 3)),
    ((3, 0), (3, 1)),
    ((1, 1, 1), (2, 3, 4)),
]


@pytest.mark.parametrize("sa,sb", BROADCAST_SHAPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "maximum", "remainder"])
def test_binary_broadcasting(device, op, sa, sb):
    a, b = binary_operands(op, "float32", sa, sb, seed=7)
    got = getattr(rc, op)(T(a, device), T(b, device))
    assert tuple(got.shape) == np.broadcast_shapes(sa, sb)
    assert_close(got, np_binary(op, a, b, "float32"))


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 3, 4), (2, 4))])
def test_broadcasting_incompatible_shapes_raise(device, sa, sb):
    x, y = rc.zeros(sa, device=device), rc.zeros(sb, device=device)
    with pytest.raises(RuntimeError):
        x + y


@pytest.mark.parametrize("op", ["add", "mul", "div", "maximum", "lt"])
def test_binary_non_contiguous_inputs(device, op):
    need(device, "float64")
    a = sample("float64", (4, 6), seed=1)
    b = sample("float64", (6, 4), seed=2) + 5.0
    x = T(a, device)[:, ::2]  # strided
    y = T(b, device).T[:, 1:4]  # transposed then sliced
    assert not x.is_contiguous() and not y.is_contiguous()
    an, bn = a[:, ::2], b.T[:, 1:4]
    got = getattr(rc, op)(x, y)
    if op == "lt":
        assert_close(got, an < bn)
    else:
        assert_close(got, np_binary(op, an, bn, "float64"))


# -- scalars on either side ---------------------------------------------------------------


def scalar_result(name: str, s) -> str:
    """PyTorch: a Python scalar counts only by category."""
    sc = 0 if isinstance(s, bool) else 2 if isinstance(s, float) else 1
    if sc > cat(name):
        return default_float() if sc == 2 else "int64"
    return name


SCALARS = [2, -3, 2.5, True]
SCALAR_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
              "//": operator.floordiv, "%": operator.mod, "**": operator.pow}
_NP_OP = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floor_divide",
          "%": "remainder", "**": "pow"}


def _scalar_case_ok(sym, name, s, reflected):
    if name == "bool" and sym in ("-", "//", "%", "**"):
        return False
    if isinstance(s, bool) and sym in ("-", "//", "%", "**", "/"):
        return False
    if sym == "**" and not reflected and s == -3:
        return False  # int ** negative int raises; float case covered elsewhere
    return True


@pytest.mark.parametrize("sym,name,s,reflected", [
    pytest.param(sym, name, s, refl, id=f"{'s' + sym + 'x' if refl else 'x' + sym + 's'}-{name}-{s!r}")
    for sym in SCALAR_OPS
    for name in ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]
    for s in SCALARS for refl in (False, True)
    if _scalar_case_ok(sym, name, s, refl)
])
def test_scalar_operands(device, sym, name, s, reflected):
    need(device, name)
    op = _NP_OP[sym]
    rng = np.random.default_rng(11)
    if name == "bool":
        a = rng.random((3, 4)) < 0.5
    elif cat(name) == 1:
        lo = 1 if (reflected and sym in ("/", "//", "%")) else 0
        a = rng.integers(lo, 5, (3, 4)).astype(name)
    else:
        a = rng.uniform(0.5, 3.0, (3, 4)).astype(name)  # ints above: non-negative exponents
    res = scalar_result(name, s)
    if float_result(op):
        res = floatish(res)
    need(device, res)
    # the compute dtype: true division converts both operands straight to the
    # float result (uint8 / -3 divides by -3.0, not by the wrapped 253)
    cdt = res if float_result(op) else scalar_result(name, s)
    an = a.astype(cdt)
    sn = np.broadcast_to(np.array(s).astype(cdt), an.shape)  # ints wrap, as in PyTorch
    x = T(a, device)
    if reflected:
        got = SCALAR_OPS[sym](s, x)
        expected = np_binary(op, sn, an, res)
    else:
        got = SCALAR_OPS[sym](x, s)
        expected = np_binary(op, an, sn, res)
    assert got.dtype is rdt(res)
    assert_close(got, expected)


def test_scalar_zero_dim_tensor_operands(device):
    x = rc.tensor(3.0, device=device)
    assert x.ndim == 0
    assert_close(x + 2, np.array(5.0, dtype=np.float32))
    assert_close(2 - x, np.array(-1.0, dtype=np.float32))
    y = rc.tensor([1.0, 2.0], device=device)
    assert_close(y * x, np.array([3.0, 6.0], dtype=np.float32))


def test_unsupported_operand_raises_typeerror(device):
    x = rc.tensor([1.0, 2.0], device=device)
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        rc.mul(x, [object()])


# -- comparisons ------------------------------------------------------------------------

CMP = {"eq": (operator.eq, np.equal), "ne": (operator.ne, np.not_equal),
       "lt": (operator.lt, np.less), "le": (operator.le, np.less_equal),
       "gt": (operator.gt, np.greater), "ge": (operator.ge, np.greater_equal)}
CMP_ALIASES = {"less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
               "not_equal": "ne"}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("op", sorted(CMP))
def test_comparisons(device, op, name):
    need(device, name)
    rng = np.random.default_rng(5)
    if name == "bool":
        a, b = rng.random((3, 4)) < 0.5, rng.random((3, 4)) < 0.5
    else:
        # few distinct values, so equality happens
        a = rng.integers(0, 3, (3, 4)).astype(name)
        b = rng.integers(0, 3, (3, 4)).astype(name)
    sym, ref = CMP[op]
    x, y = T(a, device), T(b, device)
    expected = ref(a, b)
    assert_close(getattr(rc, op)(x, y), expected)
    assert_close(getattr(x, op)(y), expected)
    assert_close(sym(x, y), expected)
    # a scalar on either side: Python reflects `2 < x` to `x > 2`
    assert_close(sym(x, 1), ref(a, 1))
    assert_close(sym(1, x), ref(1, a))


@pytest.mark.parametrize("alias", sorted(CMP_ALIASES))
def test_comparison_aliases(device, alias):
    a, b = sample("int32"), sample("int32", seed=3)
    x, y = T(a, device), T(b, device)
    assert_close(getattr(rc, alias)(x, y), CMP[CMP_ALIASES[alias]][1](a, b))
    assert_close(getattr(x, alias)(y), CMP[CMP_ALIASES[alias]][1](a, b))


def test_comparisons_mixed_dtypes_and_broadcast(device):
    need(device, "float64")
    a = np.array([[1, 2, 3]], dtype=np.int32)
    b = np.array([[1.5], [2.0], [3.0]], dtype=np.float64)
    x, y = T(a, device), T(b, device)
    for op, (sym, ref) in CMP.items():
        assert_close(sym(x, y), ref(a, b))
    assert_close(x == 2.0, a == 2.0)
    assert_close(x < 2.5, a < 2.5)


def test_comparisons_with_nan(device):
    need(device, "float64")
    a = np.array([math.nan, 1.0, math.nan])
    b = np.array([math.nan, math.nan, 1.0])
    x, y = rc.tensor(a, device=device), rc.tensor(b, device=device)
    for op, (sym, ref) in CMP.items():
        assert_close(sym(x, y), ref(a, b))


# -- logical ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_binary(device, op, name):
    need(device, name)
    rng = np.random.default_rng(2)
    a = (rng.integers(0, 2, (3, 4)) * rng.integers(1, 3, (3, 4))).astype(name)
    b = (rng.integers(0, 2, (3, 4)) * rng.integers(1, 3, (3, 4))).astype(name)
    x, y = T(a, device), T(b, device)
    expected = getattr(np, op)(a, b)
    assert_close(getattr(rc, op)(x, y), expected)
    assert_close(getattr(x, op)(y), expected)


@pytest.mark.parametrize("name", ALL)
def test_logical_not(device, name):
    need(device, name)
    a = (np.arange(12).reshape(3, 4) % 3).astype(name)
    x = T(a, device)
    assert_close(rc.logical_not(x), np.logical_not(a))
    assert_close(x.logical_not(), np.logical_not(a))


def test_logical_mixed_dtypes_and_nan(device):
    need(device, "float64")
    a = np.array([0.0, math.nan, 2.0, 0.0])
    b = np.array([0, 0, 3, 1], dtype=np.int32)
    x, y = rc.tensor(a, device=device), T(b, device)
    for op in ("logical_and", "logical_or", "logical_xor"):
        assert_close(getattr(rc, op)(x, y), getattr(np, op)(a, b))
    assert_close(rc.logical_not(x), np.logical_not(a))
    assert_close(rc.logical_and(x, True), np.logical_and(a, True))


def test_bool_operators_and_or_xor_invert(device):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    x, y = T(a, device), T(b, device)
    assert_close(x & y, a & b)
    assert_close(x | y, a | b)
    assert_close(x ^ y, a ^ b)
    assert_close(~x, ~a)
    assert_close(x & True, a & True)
    assert_close(False | x, False | a)


# -- isnan / isinf / isfinite / nan_to_num -------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_isnan_isinf_isfinite(device, name):
    need(device, name)
    if cat(name) == 2:
        a = np.array([0.0, -1.5, math.nan, math.inf, -math.inf, 1e30 if name != "float16" else 6e4],
                     dtype=name)
    else:
        a = sample(name, (6,))
    x = T(a, device)
    for op in ("isnan", "isinf", "isfinite"):
        assert_close(getattr(rc, op)(x), getattr(np, op)(a))
        assert_close(getattr(x, op)(), getattr(np, op)(a))


@pytest.mark.parametrize("name", FLOATS)
def test_nan_to_num(device, name):
    need(device, name)
    a = np.array([math.nan, math.inf, -math.inf, 1.5, -2.0], dtype=name)
    x = T(a, device)
    assert_close(rc.nan_to_num(x), np.nan_to_num(a))
    assert_close(rc.nan_to_num(x, nan=7.0, posinf=100.0, neginf=-50.0),
                 np.nan_to_num(a, nan=7.0, posinf=100.0, neginf=-50.0))
    assert_close(x.nan_to_num(nan=-1.0), np.nan_to_num(a, nan=-1.0))


@pytest.mark.parametrize("name", INTS + ["bool"])
def test_nan_to_num_of_ints_is_a_copy(device, name):
    need(device, name)
    a = sample(name)
    x = T(a, device)
    y = rc.nan_to_num(x)
    assert_close(y, a)
    y.fill_(0) if name != "bool" else y.fill_(False)
    assert_close(x, a)


# -- clamp / where / lerp ----------------------------------------------------------------


@pytest.mark.parametrize("name", NONBOOL)
@pytest.mark.parametrize("lo,hi", [(-1, 2), (None, 1), (0, None), (3, 1)])
def test_clamp_scalars(device, name, lo, hi):
    need(device, name)
    if name == "uint8" and lo is not None and lo < 0:
        lo = 1  # PyTorch rejects bounds a uint8 can't hold (no wrapping to 255)
    a = sample(name, lo=-4, hi=4)
    x = T(a, device)
    expected = a.copy()
    if lo is not None:
        expected = np.maximum(expected, np.array(lo).astype(name))
    if hi is not None:
        expected = np.minimum(expected, np.array(hi).astype(name))
    assert_close(rc.clamp(x, lo, hi), expected)
    assert_close(x.clamp(min=lo, max=hi), expected)
    assert_close(rc.clip(x, lo, hi), expected)


def test_clamp_needs_a_bound(device):
    with pytest.raises(RuntimeError):
        rc.clamp(rc.zeros(3, device=device))


def test_clamp_tensor_bounds_broadcast(device):
    a = sample("float32", (3, 4))
    lo = np.array([-1.0, -0.5, 0.0, 0.5], dtype=np.float32)
    hi = np.array([[0.0], [1.0], [2.0]], dtype=np.float32)
    got = rc.clamp(T(a, device), T(lo, device), T(hi, device))
    assert_close(got, np.minimum(np.maximum(a, lo), hi))


def test_clamp_int_tensor_float_bounds_promotes(device):
    a = np.array([-3, 0, 1, 5], dtype=np.int32)
    got = rc.clamp(T(a, device), min=0.5, max=2.5)
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, np.clip(a.astype(np.float32), 0.5, 2.5))


def test_clamp_propagates_nan(device):
    need(device, "float64")
    a = np.array([math.nan, -5.0, 0.3, 7.0])
    assert_close(rc.clamp(rc.tensor(a, dtype=rc.float64, device=device), 0.0, 1.0),
                 np.minimum(np.maximum(a, 0.0), 1.0))


@pytest.mark.parametrize("na,nb", [("float32", "float32"), ("int32", "float64"), ("int64", "int32"),
                                   ("bool", "uint8"), ("float16", "float16"), ("int8", "int16")])
def test_where_tensors(device, na, nb):
    need(device, na, nb)
    rng = np.random.default_rng(0)
    c = rng.random((3, 4)) < 0.5
    a, b = sample(na, (3, 4), seed=1), sample(nb, (1, 4), seed=2)
    pt = torch_promote(na, nb)
    got = rc.where(T(c, device), T(a, device), T(b, device))
    assert_close(got, np.where(c, a.astype(pt), b.astype(pt)))


def test_where_scalars_and_broadcast(device):
    c = np.array([[True], [False]])
    a = np.arange(3, dtype=np.int32)
    x = T(a, device)
    got = rc.where(T(c, device), x, 0.5)
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, np.where(c, a.astype(np.float32), np.float32(0.5)))
    got = rc.where(T(c, device), 7, x)
    assert got.dtype is rc.int32
    assert_close(got, np.where(c, np.int32(7), a))
    h = rc.tensor([1.0, 2.0, 3.0], dtype=rc.float16, device=device)
    assert rc.where(T(c, device), h, 0.0).dtype is rc.float16
    # method form: x.where(cond, other)
    assert_close(x.where(T(c, device), -1), np.where(c, a, np.int32(-1)))


def test_where_single_argument_is_nonzero(device):
    c = np.array([[True, False, True], [False, False, True]])
    rows, cols = rc.where(T(c, device))
    er, ec = np.nonzero(c)
    assert_close(rows, er.astype(np.int64))
    assert_close(cols, ec.astype(np.int64))


@pytest.mark.parametrize("name", FLOATS)
def test_lerp(device, name):
    need(device, name)
    a, b = sample(name, seed=1), sample(name, seed=2)
    w = np.random.default_rng(3).random((3, 4)).astype(name)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    x, y = T(a, device), T(b, device)
    assert_close(rc.lerp(x, y, 0.25), (a64 + 0.25 * (b64 - a64)).astype(name))
    assert_close(x.lerp(y, T(w, device)), (a64 + w * (b64 - a64)).astype(name))
    assert_close(rc.lerp(x, y, 0.0), a)
    assert_close(rc.lerp(x, y, 1.0), b, rtol=2e-3 if name == "float16" else None)


# -- in place ----------------------------------------------------------------------------

INPLACE = {
    "add_": ("add", operator.iadd),
    "sub_": ("sub", operator.isub),
    "mul_": ("mul", operator.imul),
    "div_": ("div", operator.itruediv),
    "floor_divide_": ("floor_divide", operator.ifloordiv),
    "remainder_": ("remainder", operator.imod),
    "pow_": ("pow", operator.ipow),
    "maximum_": ("maximum", None),
    "minimum_": ("minimum", None),
}


@pytest.mark.parametrize("method,name,form", [
    (m, name, form) for m in sorted(INPLACE)
    for name in ["uint8", "int32", "int64", "float16", "float32", "float64"]
    for form in ("method", "operator")
    if not (form == "operator" and INPLACE[m][1] is None)
    and not (m == "div_" and cat(name) != 2)  # int true division in place raises (tested below)
])
def test_inplace_binary(device, method, name, form):
    op, sym = INPLACE[method]
    need(device, name)
    a, b = binary_operands(op, name, seed=9)
    x, y = T(a, device), T(b, device)
    before = x
    if form == "method":
        r = getattr(x, method)(y)
        assert r is x
    else:
        x = sym(x, y)
        assert x is before
    assert x.dtype is rdt(name)
    assert_close(x, np_binary(op, a, b, name))
    assert_close(y, b)


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_"])
def test_inplace_broadcast_and_scalar(device, method):
    need(device, "float64")
    op = method[:-1]
    a = sample("float64", (3, 4))
    row = sample("float64", (4,), seed=2)
    x = T(a, device)
    getattr(x, method)(T(row, device))
    assert_close(x, np_binary(op, a, np.broadcast_to(row, a.shape), "float64"))
    getattr(x, method)(2)
    assert_close(x, np_binary(op, np_binary(op, a, np.broadcast_to(row, a.shape), "float64"),
                              np.full(a.shape, 2.0), "float64"))


def test_inplace_cannot_grow_the_target(device):
    x = rc.zeros(4, device=device)
    with pytest.raises(RuntimeError):
        x.add_(rc.ones(3, 4, device=device))
    assert_close(x, np.zeros(4, np.float32))


def test_inplace_same_category_downcasts(device):
    # int32 += int64 tensor and float32 *= float64 tensor: allowed, result in the target dtype
    need(device, "float64")
    a = np.array([1, 2, 3], dtype=np.int32)
    x = T(a, device)
    x.add_(T(np.array([10, 20, 30], dtype=np.int64), device))
    assert x.dtype is rc.int32
    assert_close(x, a + np.array([10, 20, 30], dtype=np.int32))
    f = np.array([1.5, 2.5], dtype=np.float32)
    y = T(f, device)
    y.mul_(T(np.array([2.0, 4.0]), device))
    assert_close(y, f * np.float32([2.0, 4.0]))
    # float target, int operand: fine
    y.add_(T(np.array([1, 2], dtype=np.int64), device))
    assert_close(y, f * np.float32([2.0, 4.0]) + np.float32([1, 2]))


@pytest.mark.parametrize("call", [
    lambda x, d: x.add_(0.5),
    lambda x, d: x.sub_(0.5),
    lambda x, d: x.mul_(rc.tensor([1.5, 2.0, 2.5], device=d)),
    lambda x, d: x.div_(2),
    lambda x, d: x.exp_(),
    lambda x, d: x.sqrt_(),
    lambda x, d: x.clamp_(min=0.5),
    lambda x, d: x.pow_(0.5),
    lambda x, d: x.__iadd__(0.5),
    lambda x, d: x.__itruediv__(2),
], ids=["add_", "sub_", "mul_", "div_", "exp_", "sqrt_", "clamp_", "pow_", "iadd", "itruediv"])
def test_int_inplace_with_float_result_raises_and_leaves_tensor(device, call):
    a = np.array([1, 2, 3], dtype=np.int64)
    x = T(a, device)
    with pytest.raises(RuntimeError):
        call(x, device)
    assert x.dtype is rc.int64
    assert_close(x, a)


def test_bool_inplace_with_int_result_raises(device):
    x = rc.tensor([True, False], device=device)
    with pytest.raises(RuntimeError):
        x.add_(1)
    assert_close(x, np.array([True, False]))


def test_zero_fill(device):
    for name in ["bool", "uint8", "int32", "float16", "float64"]:
        if not rc.device(device).supports(rdt(name)):
            continue
        a = sample(name)
        x = T(a, device)
        assert x.zero_() is x
        assert_close(x, np.zeros_like(a))
        assert x.fill_(1) is x
        assert_close(x, np.ones_like(a))
    x = rc.zeros(2, 3, device=device)
    x.fill_(2.5)
    assert_close(x, np.full((2, 3), 2.5, np.float32))
    x.fill_(rc.tensor(-4.0, device=device))
    assert_close(x, np.full((2, 3), -4.0, np.float32))
    i = rc.zeros(3, dtype=rc.int32, device=device)
    i.fill_(7)
    assert_close(i, np.full(3, 7, np.int32))


def test_copy_(device):
    need(device, "float64")
    x = rc.zeros(2, 3, device=device)
    src = sample("float64", (2, 3))
    assert x.copy_(T(src, device)) is x
    assert x.dtype is rc.float32
    assert_close(x, src.astype(np.float32))
    # broadcast
    row = sample("float32", (3,), seed=4)
    x.copy_(T(row, device))
    assert_close(x, np.broadcast_to(row, (2, 3)))
    # float -> int casts (truncation toward zero, as PyTorch)
    i = rc.zeros(4, dtype=rc.int32, device=device)
    f = np.array([1.7, -1.7, 2.5, -0.2])
    i.copy_(T(f, device))
    assert_close(i, f.astype(np.int32))
    # from a list / number
    x.copy_([[1, 2, 3], [4, 5, 6]])
    assert_close(x, np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    with pytest.raises(RuntimeError):
        x.copy_(rc.ones(4, device=device))


# the unary OpSpecs with an in-place twin, and the ops built without a kernel
UNARY_INPLACE = [*(n for n, s in SPECS.items() if s.family == "unary" and s.inplace and s.result != "bool"),
                 "rsqrt", "relu", "nan_to_num", "square"]
# references for the ops the OpSpecs don't cover
_EXTRA_REF = {"nan_to_num": np.nan_to_num, "square": np.square}


@pytest.mark.parametrize("op", UNARY_INPLACE)
def test_unary_inplace(device, op):
    need(device, "float64")
    a = sample("float64", (3, 4), lo=-1.2, hi=1.2, positive=op in ("log", "log1p", "log2", "sqrt", "rsqrt"))
    expected = getattr(rc, op)(T(a, device)).numpy().copy()
    x = T(a, device)
    r = getattr(x, op + "_")()
    assert r is x
    assert_close(x, expected)
    # the values themselves (not just self-consistency) for the plain ones
    if op in FLOAT_UNARY:
        assert_close(x, FLOAT_UNARY[op][0](a), rtol=1e-6 if op == "erf" else None,
                     atol=1e-6 if op == "erf" else None)
    elif op in SAME_UNARY:
        assert_close(x, SAME_UNARY[op](a))
    else:
        assert_close(x, _EXTRA_REF[op](a))


def test_unary_inplace_int_keeps_dtype(device):
    a = np.array([-3, 0, 4], dtype=np.int32)
    x = T(a, device)
    x.neg_()
    assert_close(x, -a)
    x.abs_()
    assert_close(x, np.abs(a))
    x.clamp_(0, 3)
    assert_close(x, np.clip(np.abs(a), 0, 3))


def test_clamp_inplace(device):
    a = sample("float32", (3, 4))
    x = T(a, device)
    assert x.clamp_(-1, 1) is x
    assert_close(x, np.clip(a, -1, 1))
    x.clamp_(max=0.0)
    assert_close(x, np.minimum(np.clip(a, -1, 1), 0))
    x.clip_(min=-0.5)
    assert_close(x, np.maximum(np.minimum(np.clip(a, -1, 1), 0), -0.5))


def test_logical_inplace(device):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    for op in ("logical_and", "logical_or", "logical_xor"):
        x = T(a, device)
        getattr(x, op + "_")(T(b, device))
        assert_close(x, getattr(np, op)(a, b))
    x = T(a, device)
    x.logical_not_()
    assert_close(x, ~a)


def test_lerp_inplace(device):
    need(device, "float64")
    a, b = sample("float64", seed=1), sample("float64", seed=2)
    x = T(a, device)
    x.lerp_(T(b, device), 0.3)
    assert_close(x, a + 0.3 * (b - a))


def test_inplace_writes_through_views(device):
    need(device, "float64")
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    base = T(a, device)
    expected = a.copy()

    base[1:3, 2:5].add_(100)  # a sliced window
    expected[1:3, 2:5] += 100
    assert_close(base, expected)

    base.T.mul_(2)  # transposed: every element
    expected *= 2
    assert_close(base, expected)

    base[:, ::2].sub_(T(np.arange(3, dtype=np.float64), device))  # strided, broadcast operand
    expected[:, ::2] -= np.arange(3)
    assert_close(base, expected)

    base[0].zero_()
    expected[0] = 0
    assert_close(base, expected)

    base[3, 1:].fill_(-1)
    expected[3, 1:] = -1
    assert_close(base, expected)

    base[2].copy_(T(np.full(6, 9.0), device))
    expected[2] = 9
    assert_close(base, expected)

    base[:, 0].clamp_(0, 50)
    expected[:, 0] = np.clip(expected[:, 0], 0, 50)
    assert_close(base, expected)

    base[1:, 1:].abs_()
    expected[1:, 1:] = np.abs(expected[1:, 1:])
    assert_close(base, expected)

    base[::3, ::5].exp_()
    expected[::3, ::5] = np.exp(expected[::3, ::5])
    assert_close(base, expected)

    v = base.reshape(24)[5:10]  # view of a view
    v += 1
    flat = expected.reshape(24)
    flat[5:10] += 1
    assert_close(base, expected)

    base[2:, :3].div_(4)
    expected[2:, :3] /= 4
    assert_close(base, expected)


def test_inplace_view_failure_leaves_base_untouched(device):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    base = T(a, device)
    with pytest.raises(RuntimeError):
        base[1:].add_(0.5)
    assert_close(base, a)


def test_add_and_sub_scale_a_python_number_by_alpha(device):
    a = rc.ones(2, device=device)
    np.testing.assert_array_equal(rc.add(a, 1, alpha=2).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(rc.sub(a, 1, alpha=2).numpy(), [-1.0, -1.0])
    np.testing.assert_array_equal(a.clone().add_(1, alpha=2).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(rc.add(a, 2.0, alpha=0.5).numpy(), [2.0, 2.0])


def test_pow_of_bool(device):
    """As in PyTorch: bool ** bool tensor raises, bool ** a Python bool is x or
    all True; no bool kernel is ever asked for a power."""
    x = rc.tensor([True, False], device=device)
    with pytest.raises(RuntimeError, match="pow"):
        rc.pow(x, x)
    with pytest.raises(RuntimeError, match="pow"):
        True ** x
    assert (x ** True).tolist() == [True, False] and (x ** True).dtype is rc.bool_
    assert (x ** False).tolist() == [True, True]
    torch = pytest.importorskip("torch")
    t = torch.tensor([True, False])
    assert (t ** True).tolist() == (x ** True).tolist() and (t ** False).tolist() == (x ** False).tolist()
    with pytest.raises(RuntimeError, match="pow"):
        torch.pow(t, t)
