"""flip, roll, tril/triu, repeat/tile, new_* factories, and ndarray operands."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("dims", [0, 1, -1, (0, 2), (0, 1, 2)])
def test_flip(device, dims):
    x = rc.tensor(A, device=device)
    assert_close(rc.flip(x, dims), np.flip(A, dims))
    assert_close(x.transpose(0, 2).flip(dims), np.flip(A.transpose(2, 1, 0), dims))


@pytest.mark.parametrize("shifts, dims", [(1, 0), (-2, 2), ((1, 2), (0, 1)), (5, None), (0, 1), (7, 2)])
def test_roll(device, shifts, dims):
    x = rc.tensor(A, device=device)
    assert_close(rc.roll(x, shifts, dims), np.roll(A, shifts, dims))


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_tril_triu(device, k):
    m = np.arange(20, dtype=np.float64).reshape(4, 5) + 1
    x = rc.tensor(m, device=device)
    assert_close(rc.tril(x, k), np.tril(m, k))
    assert_close(x.triu(k), np.triu(m, k))
    b = rc.tensor(A, device=device)
    assert_close(rc.triu(b, k), np.triu(A, k))


@pytest.mark.parametrize("reps", [(2, 1, 1), (1, 2, 3), (2, 1, 1, 2)])
def test_repeat_and_tile(device, reps):
    x = rc.tensor(A, device=device)
    assert_close(x.repeat(*reps), np.tile(A, reps))
    assert_close(rc.tile(x, reps[-2:]), np.tile(A, reps[-2:]))
    with pytest.raises(RuntimeError, match="can not be smaller"):
        x.repeat(2, 2)


def test_new_factories(device):
    x = rc.tensor(A, dtype=rc.float64, device=device)
    z = x.new_zeros(2, 2)
    assert z.dtype == rc.float64 and z.device == x.device and z.tolist() == [[0, 0], [0, 0]]
    assert x.new_ones((3,)).tolist() == [1, 1, 1]
    assert_close(x.new_full((2,), 7.5), np.full(2, 7.5))
    assert_close(x.new_tensor([1, 2]), np.array([1, 2], np.float64))
    assert x.new_empty(4, dtype=rc.int32).dtype == rc.int32


def test_ndarray_operands_give_tensors(device):
    x = rc.tensor([1.0, 2.0], device=device)
    r = np.array([10.0, 20.0], np.float32) + x
    assert isinstance(r, rc.Tensor) and r.device == x.device
    assert_close(r, np.float32([11, 22]))
    assert_close(x * np.arange(2), np.float32([0, 2]))
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "a"


@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_raises(device, op):
    x = rc.tensor([3, 4], device=device)
    fn = getattr(rc, op)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(x, 0)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(x, rc.tensor([1, 0], device=device))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        x.div(0, rounding_mode="trunc")
    # floats divide by zero into inf/nan, as in PyTorch
    with np.errstate(all="ignore"):
        expected = getattr(np, op)(np.float32([3, -4]), np.float32(0))
    assert_close(fn(rc.tensor([3.0, -4.0], device=device), 0.0), expected)
