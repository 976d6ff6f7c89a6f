"""Reductions against NumPy: every dim form (int, negative int, tuple, None) and
keepdim, PyTorch's result dtypes, and the empty-tensor edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close

from .dtypes_table import ALL, need, rdt

# NumPy's ddof warning comes from the reference computation, not from rtxcore.
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:numpy")]

FLOATS = ["float16", "float32", "float64"]
SHAPE = (2, 3, 4)
DIMS = [None, 0, 1, -1, -2, (0, 2), (-1, 0), (0, 1, 2)]
INT_DIMS = [None, 0, 2, -1, -3]


def sample(name: str, shape=SHAPE, seed: int = 0, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.random(shape) < 0.5
    if name.startswith("float"):
        return rng.uniform(lo, hi, shape).astype(name)
    low = 0 if name == "uint8" else -5
    return rng.integers(low, 6, shape).astype(name)


def distinct(name: str, shape=SHAPE, seed: int = 0) -> np.ndarray:
    """Values without ties (so argmax/argmin indices are unambiguous)."""
    n = int(np.prod(shape))
    perm = np.random.default_rng(seed).permutation(n)
    if name == "uint8" or name == "int8":
        perm = perm % 120
        return perm.reshape(shape).astype(name)
    if name.startswith("float"):
        return (perm.reshape(shape) / 4.0 - n / 8.0).astype(name)
    return (perm.reshape(shape) - n // 2).astype(name)


def T(a: np.ndarray, device) -> rc.Tensor:
    return rc.tensor(a, device=device)


def sum_dtype(name: str) -> str:
    return "int64" if name == "bool" or not name.startswith("float") else name


# -- sum / mean / prod ---------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("name", ALL)
def test_sum(device, name, dim, keepdim):
    need(device, name)
    a = sample(name)
    x = T(a, device)
    res = sum_dtype(name)
    wide = np.float64 if res.startswith("float") else np.int64
    expected = np.sum(a.astype(wide), axis=dim, keepdims=keepdim).astype(res)
    got = rc.sum(x, dim, keepdim)
    assert got.dtype is rdt(res)
    assert_close(got, expected)
    assert_close(x.sum(dim=dim, keepdim=keepdim), expected)


def test_sum_of_int8_does_not_overflow(device):
    a = np.full((100,), 100, dtype=np.int8)
    got = T(a, device).sum()
    assert got.dtype is rc.int64
    assert got.item() == 100 * 100
    assert_close(got, np.sum(a.astype(np.int64)))


def test_sum_dtype_argument(device):
    need(device, "float64")
    a = sample("int32")
    got = T(a, device).sum(1, dtype=rc.float64)
    assert_close(got, np.sum(a.astype(np.float64), axis=1))
    f = sample("float32")
    assert_close(rc.sum(T(f, device), dtype=rc.float64), np.sum(f.astype(np.float64)))


def test_sum_float16_accumulates_wide(device):
    need(device, "float16")
    a = np.full(4096, 1.0, dtype=np.float16)  # float16 sums stall at 2048 when accumulated in place
    assert_close(T(a, device).sum(), np.float16(np.sum(a.astype(np.float64))))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("name", FLOATS)
def test_mean(device, name, dim, keepdim):
    need(device, name)
    a = sample(name)
    expected = np.mean(a.astype(np.float64), axis=dim, keepdims=keepdim).astype(name)
    assert_close(rc.mean(T(a, device), dim, keepdim), expected)
    assert_close(T(a, device).mean(dim=dim, keepdim=keepdim), expected)


def test_mean_of_ints_raises_unless_dtype(device):
    need(device, "float64")
    a = sample("int64")
    x = T(a, device)
    with pytest.raises(RuntimeError):
        x.mean()
    assert_close(x.mean(dtype=rc.float64), np.mean(a.astype(np.float64)))
    assert_close(rc.mean(x, 1, dtype=rc.float32), np.mean(a, axis=1).astype(np.float32))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", INT_DIMS, ids=repr)
@pytest.mark.parametrize("name", ALL)
def test_prod(device, name, dim, keepdim):
    need(device, name)
    rng = np.random.default_rng(1)
    if name.startswith("float"):
        a = rng.uniform(0.5, 1.5, SHAPE).astype(name)
    elif name == "bool":
        a = rng.random(SHAPE) < 0.8
    else:
        a = rng.integers(-2 if name != "uint8" else 0, 3, SHAPE).astype(name)
    res = sum_dtype(name)
    wide = np.float64 if res.startswith("float") else np.int64
    if dim is None and keepdim:
        expected = np.prod(a.astype(wide), keepdims=True).astype(res)
    else:
        expected = np.prod(a.astype(wide), axis=dim, keepdims=keepdim).astype(res)
    got = rc.prod(T(a, device), dim, keepdim)
    assert got.dtype is rdt(res)
    assert_close(got, expected)
    assert_close(T(a, device).prod(dim, keepdim), expected)


# -- amax / amin / max / min / argmax / argmin -------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_amin(device, op, name, dim, keepdim):
    need(device, name)
    a = sample(name)
    ref = np.max if op == "amax" else np.min
    expected = ref(a, axis=dim, keepdims=keepdim)
    x = T(a, device)
    if dim is None:
        got = getattr(rc, op)(x, keepdim=keepdim)
    else:
        got = getattr(rc, op)(x, dim, keepdim)
    assert_close(got, expected)
    if dim is None and not keepdim:
        assert_close(getattr(x, op)(), expected)
        assert_close(getattr(rc, op[1:])(x), expected)  # max(x) / min(x): the whole tensor


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("name", ["uint8", "int8", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_dim(device, op, name, dim, keepdim):
    need(device, name)
    a = distinct(name)
    x = T(a, device)
    vals_ref = (np.max if op == "max" else np.min)(a, axis=dim, keepdims=keepdim)
    idx_ref = (np.argmax if op == "max" else np.argmin)(a, axis=dim, keepdims=keepdim).astype(np.int64)
    r = getattr(rc, op)(x, dim, keepdim)
    assert_close(r.values, vals_ref)
    assert_close(r.indices, idx_ref)
    v, i = r  # a (values, indices) tuple
    assert_close(v, vals_ref)
    assert_close(i, idx_ref)
    assert_close(r[0], vals_ref)
    r2 = getattr(x, op)(dim=dim, keepdim=keepdim)
    assert_close(r2.values, vals_ref)
    assert_close(r2.indices, idx_ref)


def test_max_min_with_tensor_is_elementwise(device):
    a, b = sample("float32", seed=1), sample("float32", seed=2)
    assert_close(rc.max(T(a, device), T(b, device)), np.maximum(a, b))
    assert_close(T(a, device).min(T(b, device)), np.minimum(a, b))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", INT_DIMS, ids=repr)
@pytest.mark.parametrize("name", ["uint8", "int16", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(device, op, name, dim, keepdim):
    need(device, name)
    a = distinct(name, seed=3)
    ref = getattr(np, op)
    if dim is None:
        expected = np.array(ref(a), dtype=np.int64)
        if keepdim:
            expected = expected.reshape((1,) * a.ndim)
    else:
        expected = ref(a, axis=dim, keepdims=keepdim).astype(np.int64)
    got = getattr(rc, op)(T(a, device), dim, keepdim)
    assert got.dtype is rc.int64
    assert_close(got, expected)
    assert_close(getattr(T(a, device), op)(dim=dim, keepdim=keepdim), expected)


def test_argmax_non_contiguous(device):
    a = distinct("float32", (4, 6), seed=5)
    x = T(a, device).T[1:]
    assert_close(x.argmax(), np.array(np.argmax(a.T[1:]), dtype=np.int64))
    assert_close(x.argmin(1), np.argmin(a.T[1:], axis=1).astype(np.int64))


def test_max_nan_propagates(device):
    need(device, "float64")
    a = np.array([[1.0, math.nan, 3.0], [4.0, 5.0, 6.0]])
    x = T(a, device)
    assert_close(x.amax(1), np.max(a, axis=1))
    assert_close(x.amin(1), np.min(a, axis=1))
    assert_close(x.max(), np.max(a))


# -- var / std -----------------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std_correction(device, op, correction, dim, keepdim):
    need(device, "float64")
    a = sample("float64", seed=4)
    ref = getattr(np, op)
    expected = ref(a, axis=dim, ddof=correction, keepdims=keepdim)
    assert_close(getattr(rc, op)(T(a, device), dim, keepdim=keepdim, correction=correction), expected)
    assert_close(getattr(T(a, device), op)(dim, keepdim=keepdim, correction=correction), expected)


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("name", FLOATS)
def test_var_std_unbiased(device, op, unbiased, name):
    need(device, name)
    a = sample(name, seed=6)
    ref = getattr(np, op)
    a64 = a.astype(np.float64)
    ddof = 1 if unbiased else 0
    assert_close(getattr(rc, op)(T(a, device), unbiased=unbiased), ref(a64, ddof=ddof).astype(name))
    assert_close(getattr(T(a, device), op)(1, unbiased), ref(a64, axis=1, ddof=ddof).astype(name))
    assert_close(getattr(T(a, device), op)(), ref(a64, ddof=1).astype(name))  # default: unbiased


def test_var_of_ints_is_default_float(device):
    a = sample("int32")
    got = rc.var(T(a, device), 1)
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, np.var(a.astype(np.float64), axis=1, ddof=1).astype(np.float32))


def test_var_large_offset_is_accurate(device):
    # a two-pass variance survives a large common offset
    need(device, "float64")
    a = 1e8 + np.random.default_rng(0).standard_normal(1000)
    assert_close(rc.var(T(a, device)), np.var(a, ddof=1), rtol=1e-6)


def test_var_mean(device):
    need(device, "float64")
    a = sample("float64")
    v, m = rc.var_mean(T(a, device), 1)
    assert_close(v, np.var(a, axis=1, ddof=1))
    assert_close(m, np.mean(a, axis=1))


# -- all / any ----------------------------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", INT_DIMS, ids=repr)
@pytest.mark.parametrize("name", ["bool", "int32", "float32", "float64"])
@pytest.mark.parametrize("op", ["all", "any"])
def test_all_any(device, op, name, dim, keepdim):
    need(device, name)
    rng = np.random.default_rng(8)
    a = (rng.random(SHAPE) < 0.8).astype(name) * (2 if name != "bool" else True)
    a = a.astype(name)
    a[0, 0] = 1 if name != "bool" else True  # not uniform anywhere by chance
    if name == "float64":
        a[1, 2, 3] = math.nan  # nan is truthy
    ref = getattr(np, op)
    expected = np.asarray(ref(a, axis=dim, keepdims=keepdim))
    got = getattr(rc, op)(T(a, device), dim, keepdim)
    assert got.dtype is rc.bool_
    assert_close(got, expected)
    assert_close(getattr(T(a, device), op)(dim, keepdim), expected)


def test_all_any_extremes(device):
    t = rc.ones(2, 3, dtype=rc.bool_, device=device)
    assert rc.all(t).item() is True
    f = rc.zeros(2, 3, dtype=rc.bool_, device=device)
    assert rc.any(f).item() is False
    assert rc.all(f).item() is False
    assert rc.any(t).item() is True


# -- logsumexp ----------------------------------------------------------------------------


def np_logsumexp(a, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    s = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    if not keepdims:
        s = np.squeeze(s, axis=axis)
    return s


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1, (0, 2), (0, 1, 2)], ids=repr)
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_logsumexp(device, name, dim, keepdim):
    need(device, name)
    a = sample(name, seed=9)
    a64 = a.astype(np.float64)
    expected = np_logsumexp(a64, dim, keepdim).astype(name)
    assert_close(rc.logsumexp(T(a, device), dim, keepdim), expected)
    assert_close(T(a, device).logsumexp(dim, keepdim=keepdim), expected)


def test_logsumexp_stable_and_special(device):
    need(device, "float64")
    a = np.array([[1e4, 1e4 - 1, -1e4], [-1e4, -1e4, -1e4], [-math.inf, -math.inf, -math.inf],
                  [math.inf, 0.0, 1.0]])
    got = rc.logsumexp(T(a, device), 1)
    with np.errstate(all="ignore"):
        expected = np_logsumexp(a, 1, False)
    assert_close(got, expected)
    assert np.isfinite(got.numpy()[:2]).all()


def test_logsumexp_of_ints_is_float(device):
    a = sample("int64")
    got = rc.logsumexp(T(a, device), 1)
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, np_logsumexp(a.astype(np.float64), 1, False).astype(np.float32))


# -- cumsum -----------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"])
def test_cumsum(device, name, dim):
    need(device, name)
    a = sample(name, seed=10)
    res = sum_dtype(name)
    wide = np.float64 if res.startswith("float") else np.int64
    expected = np.cumsum(a.astype(wide), axis=dim).astype(res)
    got = rc.cumsum(T(a, device), dim)
    assert got.dtype is rdt(res)
    assert_close(got, expected, rtol=2e-3 if name == "float16" else None,
                 atol=1e-2 if name == "float16" else None)
    assert_close(T(a, device).cumsum(dim), expected, rtol=2e-3 if name == "float16" else None,
                 atol=1e-2 if name == "float16" else None)


def test_cumsum_non_contiguous_and_dtype(device):
    need(device, "float64")
    a = sample("float64", (5, 4), seed=2)
    x = T(a, device).T
    assert_close(x.cumsum(1), np.cumsum(a.T, axis=1))
    assert_close(T(sample("int32"), device).cumsum(0, dtype=rc.float64),
                 np.cumsum(sample("int32").astype(np.float64), axis=0))


def test_cumprod(device):
    need(device, "float64")
    a = np.random.default_rng(0).uniform(0.5, 1.5, (3, 5))
    assert_close(rc.cumprod(T(a, device), 1), np.cumprod(a, axis=1))
    ai = np.array([1, 2, 3, 4, 5], dtype=np.int32)
    got = T(ai, device).cumprod(0)
    assert got.dtype is rc.int64
    assert_close(got, np.cumprod(ai.astype(np.int64)))


# -- norm ----------------------------------------------------------------------------------


def np_norm(a, p, dim, keepdim):
    ab = np.abs(a)
    if p == math.inf:
        return np.max(ab, axis=dim, keepdims=keepdim)
    if p == -math.inf:
        return np.min(ab, axis=dim, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=dim, keepdims=keepdim).astype(a.dtype)
    return np.sum(ab ** p, axis=dim, keepdims=keepdim) ** (1.0 / p)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 1, -1, (0, 2)], ids=repr)
@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, 0, 3, 2.5], ids=repr)
def test_norm(device, p, dim, keepdim):
    need(device, "float64")
    a = sample("float64", seed=12)
    a[0, 1, 2] = 0.0
    expected = np_norm(a, p, dim, keepdim)
    got = rc.norm(T(a, device), p, dim, keepdim)
    assert_close(got, expected)
    assert_close(T(a, device).norm(p=p, dim=dim, keepdim=keepdim), expected)


def test_norm_default_and_float32_and_ints(device):
    a = sample("float32", seed=13)
    assert_close(rc.norm(T(a, device)), np.float32(np.sqrt(np.sum(a.astype(np.float64) ** 2))))
    ai = sample("int64", seed=14)
    got = rc.norm(T(ai, device))
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, np.float32(np.sqrt(np.sum(ai.astype(np.float64) ** 2))))


# -- softmax / log_softmax ------------------------------------------------------------------


def np_softmax(a, axis):
    e = np.exp(a - np.max(a, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(a, axis):
    s = a - np.max(a, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(device, op, name, dim):
    need(device, name)
    a = sample(name, seed=15)
    ref = np_softmax if op == "softmax" else np_log_softmax
    expected = ref(a.astype(np.float64), dim).astype(name)
    tol = {"rtol": 2e-3, "atol": 2e-3} if name == "float16" else {}
    assert_close(getattr(rc, op)(T(a, device), dim), expected, **tol)
    assert_close(getattr(T(a, device), op)(dim), expected, **tol)
    if op == "softmax":
        assert_close(getattr(rc, op)(T(a, device), dim).sum(dim),
                     np.ones(np.delete(SHAPE, dim % 3), dtype=name), **tol)


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_stable_for_huge_inputs(device, op, name):
    need(device, name)
    a = np.array([[1e4, -1e4, 0.0, 1e4 - 2], [-1e4, -1e4, -1e4, -1e4], [1e4, 1e4, 1e4, 1e4]],
                 dtype=name)
    got = getattr(rc, op)(T(a, device), 1)
    g = got.numpy()
    assert not np.isnan(g).any() and not np.isinf(g).any()
    ref = np_softmax if op == "softmax" else np_log_softmax
    assert_close(got, ref(a.astype(np.float64), 1).astype(name))


def test_softmax_of_ints_and_dtype(device):
    need(device, "float64")
    a = sample("int64", seed=3)
    got = rc.softmax(T(a, device), 1)
    assert got.dtype is rc.get_default_dtype()
    assert_close(got, np_softmax(a.astype(np.float64), 1).astype(np.float32))
    f = sample("float32", seed=3)
    assert_close(rc.log_softmax(T(f, device), -1, dtype=rc.float64), np_log_softmax(f.astype(np.float64), -1))


# -- 0-d and empty tensors -------------------------------------------------------------------


def test_zero_dim_reductions(device):
    x = rc.tensor(2.5, device=device)
    for dim in (None, 0, -1):
        assert_close(x.sum(dim) if dim is not None else x.sum(), np.array(2.5, np.float32))
    assert_close(x.amax(0), np.array(2.5, np.float32))
    r = x.max(0)
    assert_close(r.values, np.array(2.5, np.float32))
    assert_close(r.indices, np.array(0, np.int64))
    assert_close(x.argmax(), np.array(0, np.int64))
    assert_close(x.mean(), np.array(2.5, np.float32))
    assert_close(rc.softmax(x, 0), np.array(1.0, np.float32))
    assert_close(x.cumsum(0), np.array(2.5, np.float32))


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)], ids=repr)
def test_empty_whole_reductions(device, shape):
    a = np.zeros(shape, dtype=np.float32)
    x = T(a, device)
    assert_close(x.sum(), np.float32(0.0))
    assert_close(x.prod(), np.float32(1.0))
    assert_close(T(np.zeros(shape, np.int32), device).sum(), np.int64(0))
    assert_close(x.mean(), np.float32(math.nan))
    assert_close(x.var(), np.float32(math.nan))
    assert_close(x.norm(), np.float32(0.0))
    assert rc.all(x).item() is True
    assert rc.any(x).item() is False
    assert_close(rc.logsumexp(x, tuple(range(len(shape)))), np.float32(-math.inf))
    # PyTorch's error types: RuntimeError for amax/amin/max, IndexError for argmax/argmin
    for op, err in (("amax", RuntimeError), ("amin", RuntimeError), ("argmax", IndexError),
                    ("argmin", IndexError), ("max", RuntimeError), ("min", RuntimeError)):
        with pytest.raises(err, match="numel"):
            getattr(x, op)()


def test_empty_along_a_dim(device):
    a = np.zeros((0, 3), dtype=np.float32)
    x = T(a, device)
    assert_close(x.sum(0), np.zeros(3, np.float32))
    assert_close(x.sum(1), np.zeros(0, np.float32))
    assert_close(x.sum(0, keepdim=True), np.zeros((1, 3), np.float32))
    assert_close(x.prod(0), np.ones(3, np.float32))
    assert_close(x.mean(0), np.full(3, math.nan, np.float32))
    assert_close(x.std(0), np.full(3, math.nan, np.float32))
    assert_close(x.amax(1), np.zeros(0, np.float32))  # reducing a non-empty dim is fine
    r = x.max(1)
    assert_close(r.values, np.zeros(0, np.float32))
    assert_close(r.indices, np.zeros(0, np.int64))
    assert_close(rc.all(x, 0), np.ones(3, bool))
    assert_close(rc.any(x, 0), np.zeros(3, bool))
    assert_close(x.norm(dim=0), np.zeros(3, np.float32))
    assert_close(rc.logsumexp(x, 0), np.full(3, -math.inf, np.float32))
    assert_close(rc.logsumexp(x, 1), np.zeros(0, np.float32))
    assert_close(x.cumsum(0), a)
    assert_close(x.cumsum(1), a)
    for op in ("softmax", "log_softmax"):
        assert_close(getattr(rc, op)(x, 0), a)
        assert_close(getattr(rc, op)(x, 1), a)
    # PyTorch: IndexError naming the zero-size dim
    for op in ("amax", "amin", "argmax", "argmin", "max", "min"):
        with pytest.raises(IndexError, match="dim 0"):
            getattr(x, op)(0)


def test_bad_dims_raise(device):
    x = rc.zeros(2, 3, device=device)
    with pytest.raises(IndexError):
        x.sum(2)
    with pytest.raises(IndexError):
        x.amax(-3)
    with pytest.raises(RuntimeError):
        x.sum((0, 0))
