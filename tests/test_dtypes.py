"""PyTorch's type promotion: the dtype table, Python scalars (by category only),
0-dim tensors (ranked below dimensioned ones) and the default float dtype.

The expected table (tests/dtypes_table.py) is written out from PyTorch's documented rules
(torch.promote_types), not computed by the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close

from .dtypes_table import ALL, need, npdt, rdt, torch_promote


def expected_promote(a: str, b: str) -> str:
    return torch_promote(a, b)


@pytest.fixture
def default_float64():
    old = rc.get_default_dtype()
    try:
        rc.set_default_dtype(rc.float64)
        yield
    finally:
        rc.set_default_dtype(old)


def test_table_is_symmetric():
    # a check on the expected table itself
    for a in ALL:
        for b in ALL:
            assert expected_promote(a, b) == expected_promote(b, a)


@pytest.mark.parametrize("b", ALL)
@pytest.mark.parametrize("a", ALL)
def test_promote_types(a, b):
    assert rc.promote_types(rdt(a), rdt(b)) is rdt(expected_promote(a, b))


def test_promote_types_aliases():
    assert rc.promote_types(rc.half, rc.long) is rc.float16
    assert rc.promote_types(rc.int, rc.short) is rc.int32
    assert rc.promote_types(rc.float, rc.double) is rc.float64
    assert rc.promote_types(rc.uint8, rc.int8) is rc.int16


def _values(name: str, shape=(3,)) -> np.ndarray:
    return (np.arange(int(np.prod(shape))).reshape(shape) % 2 + (0 if name == "bool" else 1)).astype(npdt(name))


@pytest.mark.parametrize("b", ALL)
@pytest.mark.parametrize("a", ALL)
def test_tensor_tensor_ops_follow_the_table(device, a, b):
    need(device, a, b)
    res = expected_promote(a, b)
    need(device, res)
    x, y = rc.tensor(_values(a), device=device), rc.tensor(_values(b), device=device)
    s = x + y
    assert s.dtype is rdt(res)
    ra, rb = _values(a).astype(npdt(res)), _values(b).astype(npdt(res))
    assert_close(s, np.logical_or(ra, rb) if res == "bool" else ra + rb)
    assert (x * y).dtype is rdt(res)
    assert rc.maximum(x, y).dtype is rdt(res)
    assert rc.result_type(x, y) is rdt(res)
    assert (x == y).dtype is rc.bool_


# -- Python scalars -------------------------------------------------------------------------


def scalar_expected(name: str, s) -> str:
    """Written from PyTorch's rule, case by case: a scalar of a higher category
    gives int64 (int) or the default float (float); otherwise the tensor wins."""
    if isinstance(s, bool):
        return name
    if isinstance(s, int):
        return "int64" if name == "bool" else name
    return name if name.startswith("float") else rc.get_default_dtype().name


@pytest.mark.parametrize("s", [True, 2, -3, 2.5], ids=repr)
@pytest.mark.parametrize("name", ALL)
def test_python_scalar_counts_by_category(device, name, s):
    need(device, name)
    res = scalar_expected(name, s)
    need(device, res)
    x = rc.tensor(_values(name), device=device)
    for got in (x + s, s + x, x * s, s * x, rc.add(x, s), rc.mul(s, x)):
        assert got.dtype is rdt(res)
    expected = _values(name).astype(npdt(res)) * np.array(s).astype(npdt(res))
    if res == "bool":
        expected = np.logical_and(_values(name), s)
    assert_close(x * s, expected)
    assert rc.result_type(x, s) is rdt(res)


@pytest.mark.parametrize("case,expected", [
    (lambda d: rc.ones(3, dtype=rc.int32, device=d) + 2, "int32"),
    (lambda d: rc.ones(3, dtype=rc.int32, device=d) + 2.5, "float32"),
    (lambda d: rc.ones(3, dtype=rc.float16, device=d) + 2.5, "float16"),
    (lambda d: rc.ones(3, dtype=rc.float16, device=d) * 1000, "float16"),
    (lambda d: rc.ones(3, dtype=rc.bool_, device=d) + 1, "int64"),
    (lambda d: rc.ones(3, dtype=rc.bool_, device=d) + 1.0, "float32"),
    (lambda d: rc.ones(3, dtype=rc.bool_, device=d) & True, "bool"),
    (lambda d: rc.ones(3, dtype=rc.uint8, device=d) + 1000, "uint8"),
    (lambda d: rc.ones(3, dtype=rc.int8, device=d) - 2, "int8"),
    (lambda d: 2 ** rc.ones(3, dtype=rc.int16, device=d), "int16"),
    (lambda d: 2.0 ** rc.ones(3, dtype=rc.int16, device=d), "float32"),
    (lambda d: rc.ones(3, dtype=rc.int32, device=d) ** 2.0, "float32"),
    (lambda d: rc.ones(3, dtype=rc.int64, device=d) // 2, "int64"),
    (lambda d: rc.ones(3, dtype=rc.int64, device=d) % 2.5, "float32"),
], ids=["int32+2", "int32+2.5", "f16+2.5", "f16*1000", "bool+1", "bool+1.0", "bool&True", "u8+1000",
        "i8-2", "2**i16", "2.0**i16", "i32**2.0", "i64//2", "i64%2.5"])
def test_documented_scalar_examples(device, case, expected):
    need(device, expected, "float16", "uint8", "int8", "int16")
    assert case(device).dtype is rdt(expected)


def test_scalar_is_converted_to_the_result_dtype(device):
    # uint8 + 1000 wraps in uint8 (1000 -> 232), as in PyTorch
    x = rc.tensor(np.array([1, 2, 30], dtype=np.uint8), device=device)
    assert_close(x + 1000, np.array([1, 2, 30], dtype=np.uint8) + np.array(1000).astype(np.uint8))
    # a float scalar makes an int tensor compute in float: 2.5 is not truncated to 2
    i = rc.tensor([1, 2, 3], dtype=rc.int32, device=device)
    assert_close(i < 2.5, np.array([1, 2, 3]) < 2.5)
    assert_close(i == 2.0, np.array([1, 2, 3]) == 2.0)
    assert_close(i * 0.5, (np.array([1, 2, 3]) * 0.5).astype(np.float32))
    assert_close(i > 1.5, np.array([1, 2, 3]) > 1.5)


# -- 0-dim tensors --------------------------------------------------------------------------


@pytest.mark.parametrize("dims,zero,expected", [
    ("int32", "int64", "int32"),
    ("int32", "float64", "float64"),
    ("int32", "float16", "float16"),
    ("float16", "float64", "float16"),
    ("float32", "float64", "float32"),
    ("uint8", "int8", "uint8"),
    ("int8", "int64", "int8"),
    ("bool", "int64", "int64"),
    ("bool", "int8", "int8"),
    ("bool", "float64", "float64"),
    ("int64", "bool", "int64"),
    ("float16", "int64", "float16"),
    ("uint8", "float32", "float32"),
])
def test_zero_dim_tensors_rank_below_dimensioned(device, dims, zero, expected):
    need(device, dims, zero, expected)
    x = rc.tensor(_values(dims), device=device)
    z = rc.tensor(np.array(1).astype(npdt(zero)), device=device)
    assert z.ndim == 0
    for got in (x + z, z + x, x * z, rc.maximum(z, x)):
        assert got.dtype is rdt(expected)
    assert rc.result_type(x, z) is rdt(expected)
    ra = _values(dims).astype(npdt(expected))
    if expected == "bool":
        assert_close(x * z, np.logical_and(ra, True))
    else:
        assert_close(x * z, ra * np.array(1).astype(npdt(expected)))


@pytest.mark.parametrize("a,b", [("int32", "int64"), ("float16", "float64"), ("uint8", "int8"),
                                 ("bool", "float32"), ("int64", "float16")])
def test_zero_dim_with_zero_dim_uses_the_table(device, a, b):
    need(device, a, b)
    x = rc.tensor(np.array(1).astype(npdt(a)), device=device)
    y = rc.tensor(np.array(1).astype(npdt(b)), device=device)
    assert (x + y).dtype is rdt(expected_promote(a, b))


def test_zero_dim_with_python_scalar(device):
    assert (rc.tensor(3, dtype=rc.int32, device=device) + 2).dtype is rc.int32
    assert (rc.tensor(3, dtype=rc.int32, device=device) + 2.5).dtype is rc.float32
    assert (rc.tensor(3.0, dtype=rc.float16, device=device) + 2.5).dtype is rc.float16
    assert (rc.tensor(True, device=device) + 2).dtype is rc.int64


def test_one_element_dimensioned_tensor_is_not_zero_dim(device):
    # shape (1,) counts as dimensioned: the table applies
    x = rc.tensor([1], dtype=rc.int32, device=device)
    y = rc.tensor([1], dtype=rc.int64, device=device)
    assert (x + y).dtype is rc.int64


# -- default dtype ----------------------------------------------------------------------------


def test_default_dtype_is_float32():
    assert rc.get_default_dtype() is rc.float32


def test_set_default_dtype_float64(device, default_float64):
    need(device, "float64")
    assert rc.get_default_dtype() is rc.float64
    assert rc.tensor([1.5], device=device).dtype is rc.float64
    assert rc.tensor(2.5, device=device).dtype is rc.float64
    assert rc.tensor([1, 2], device=device).dtype is rc.int64
    assert rc.zeros(2, device=device).dtype is rc.float64
    assert rc.full((2,), 1.5, device=device).dtype is rc.float64
    assert rc.arange(3.0, device=device).dtype is rc.float64
    assert rc.arange(3, device=device).dtype is rc.int64
    assert rc.rand(2, device=device).dtype is rc.float64
    i = rc.tensor([1, 2, 3], dtype=rc.int32, device=device)
    assert (i + 2.5).dtype is rc.float64
    assert (i / 2).dtype is rc.float64
    assert rc.exp(i).dtype is rc.float64
    assert rc.sqrt(rc.tensor([4], device=device)).dtype is rc.float64
    assert (rc.ones(2, dtype=rc.float32, device=device) + 2.5).dtype is rc.float32  # tensor wins
    assert_close(i / 3, np.array([1, 2, 3]) / 3)


def test_set_default_dtype_float16(device):
    need(device, "float16")
    old = rc.get_default_dtype()
    try:
        rc.set_default_dtype(rc.float16)
        assert rc.tensor([1.5], device=device).dtype is rc.float16
        assert (rc.tensor([1, 2], device=device) / 2).dtype is rc.float16
    finally:
        rc.set_default_dtype(old)
    assert rc.get_default_dtype() is old


@pytest.mark.parametrize("bad", [rc.int64, rc.int32, rc.bool_, rc.uint8])
def test_set_default_dtype_rejects_non_float(bad):
    old = rc.get_default_dtype()
    try:
        with pytest.raises(TypeError):
            rc.set_default_dtype(bad)
        assert rc.get_default_dtype() is old
    finally:
        rc.set_default_dtype(old)


# -- true division ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int16", "int32", "int64"])
def test_true_division_of_ints_gives_default_float(device, name):
    need(device, name)
    a = (np.arange(1, 7) % 4 + (0 if name == "bool" else 1)).astype(npdt(name))
    b = (np.arange(6) % 3 + 1).astype(npdt(name)) if name != "bool" else np.ones(6, bool)
    x, y = rc.tensor(a, device=device), rc.tensor(b, device=device)
    expected = (a.astype(np.float64) / b.astype(np.float64)).astype(np.float32)
    for got in (x / y, rc.div(x, y), rc.true_divide(x, y), x.div(y)):
        assert got.dtype is rc.float32
        assert_close(got, expected)
    if name != "bool":
        assert_close(x / 2, (a / 2).astype(np.float32))
        assert_close(6 / y, (6 / b).astype(np.float32))


def test_true_division_of_ints_with_float64_default(device, default_float64):
    need(device, "float64")
    x = rc.tensor([1, 2, 3], device=device)
    got = x / 3
    assert got.dtype is rc.float64
    assert_close(got, np.array([1, 2, 3]) / 3)


def test_true_division_keeps_float_dtypes(device):
    need(device, "float64")
    need(device, "float16")
    assert (rc.ones(2, dtype=rc.float16, device=device) / 3).dtype is rc.float16
    assert (rc.ones(2, dtype=rc.float16, device=device) / rc.ones(2, dtype=rc.int64, device=device)).dtype is rc.float16
    assert (rc.ones(2, dtype=rc.float64, device=device) / rc.ones(2, dtype=rc.float32, device=device)).dtype is rc.float64
