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


def test_float16_reductions_accumulate_in_float32(device):
    if not rc.device(device).supports(rc.float16):
        pytest.skip(f"{device} has no float16")
    big = rc.tensor([60000.0, 60000.0], dtype=rc.float16, device=device)
    assert big.mean().item() == 60000.0 and big.mean().dtype == rc.float16
    v = rc.tensor([1000, 1000, 1000, 1001.0], dtype=rc.float16, device=device).var()
    assert v.dtype == rc.float16 and v.item() == 0.25
    c = rc.full((3000,), 1, dtype=rc.float16, device=device).cumsum(0)
    assert c[-1].item() == 3000.0


def test_erf_is_accurate_in_float64(device):
    import math

    xs = np.linspace(-6, 6, 2001)
    ref = np.array([math.erf(v) for v in xs])
    assert_close(rc.erf(rc.tensor(xs, dtype=rc.float64, device=device)), ref, rtol=0, atol=5e-15)


def test_integer_pow_with_negative_tensor_exponents(device):
    x = rc.tensor([2, -1, 1, 3, -1], device=device)
    y = rc.tensor([-1, -3, -2, 2, -2], device=device)
    assert (x ** y).tolist() == [0, -1, 1, 9, 1]
    with pytest.raises(RuntimeError, match="negative integer powers"):
        x ** -1


def test_inplace_refuses_overlapping_writes(device):
    a = rc.arange(5.0, device=device)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        a[1:].add_(a[:-1])
    assert a.tolist() == [0, 1, 2, 3, 4]  # nothing written
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        rc.zeros(1, device=device).expand(3).add_(1)
    with pytest.raises(RuntimeError, match="more than one element"):
        rc.zeros(1, device=device).expand(3).copy_(rc.ones(3, device=device))
    b = rc.arange(4.0, device=device)
    b.add_(b)  # exact overlap is fine
    b[::2].mul_(b[1::2])  # disjoint strided views are fine
    assert b.tolist() == [0, 2, 24, 6]
    m = rc.arange(4.0, device=device).reshape(2, 2)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        m.add_(m.t())  # a permuted view of itself: partial overlap
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        m.view(-1)[:3].copy_(m.view(-1)[1:])
    with pytest.raises(RuntimeError, match="more than one element"):
        rc.zeros(1, 3, device=device).expand(2, 3).scatter_add_(
            0, rc.zeros(1, 3, dtype=rc.int64, device=device), rc.ones(1, 3, device=device))
    assert m.tolist() == [[0, 1], [2, 3]]
    # as in PyTorch, filling an expanded tensor is allowed (every write agrees)
    e = rc.zeros(1, device=device).expand(3)
    e.fill_(2.0)
    assert e.tolist() == [2.0, 2.0, 2.0]
