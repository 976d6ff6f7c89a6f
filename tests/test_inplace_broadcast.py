"""In-place binary ops with a broadcast operand (``x += bias``): NumPy's values,
the version counter, and the same errors as before for every case the direct
path does not take."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize("yshape", [(256,), (1, 256), (64, 1), (1, 1)])
def test_broadcast_operand_matches_numpy(op, yshape):
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((64, 256)).astype(np.float32)
    ya = (rng.random(yshape) + 0.5).astype(np.float32)
    x, y = rc.tensor(xa), rc.tensor(ya)
    v = x._storage.version
    r = getattr(x, op)(y)
    assert r is x and x._storage.version == v + 1
    want = getattr(np, {"add_": "add", "sub_": "subtract", "mul_": "multiply",
                        "div_": "divide"}[op])(xa, ya)
    np.testing.assert_array_equal(x.numpy(), want)


def test_a_result_larger_than_the_target_is_refused():
    x = rc.zeros(4, 1)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.add_(rc.ones(3))


def test_shapes_that_do_not_broadcast_are_refused():
    x = rc.zeros(4, 5)
    with pytest.raises(RuntimeError):
        x.add_(rc.ones(3))


def test_an_operand_on_the_targets_memory_takes_the_checked_path():
    base = rc.arange(12.0).reshape(3, 4)
    row = base[0]  # a view of base: its values are read before they are written
    with pytest.raises(RuntimeError, match="single memory location"):
        base.add_(row)


def test_other_dtype_or_device_operands_promote_as_before():
    x = rc.ones(2, 3, dtype=rc.float64)
    x.add_(rc.ones(3, dtype=rc.float32))
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 2.0))
    i = rc.ones(2, 3, dtype=rc.int64)
    with pytest.raises(RuntimeError):
        i.add_(rc.ones(3) * 0.5)
