"""Impossible requests fail with PyTorch's error types and messages that name
the function and the size, not with NumPy's or Python's internals."""

from __future__ import annotations

import math

import pytest

import rtxcore as rc


def test_allocation_failure_is_a_runtime_error_naming_size_dtype_shape_device(device: str) -> None:
    n = 2 ** 40  # 4 TiB of float32: no machine here has it
    with pytest.raises(rc.OutOfMemoryError) as info:
        rc.empty(n, device=device)
    assert isinstance(info.value, RuntimeError)
    msg = str(info.value)
    assert device.split(":")[0] in msg and "out of memory" in msg
    assert "float32" in msg and (str(n) in msg or "GiB" in msg)


def test_arange_too_long_to_allocate_is_out_of_memory(device: str) -> None:
    with pytest.raises(rc.OutOfMemoryError, match="int64"):
        rc.arange(0, 2 ** 40, device=device)


@pytest.mark.parametrize("end", [math.inf, -math.inf, math.nan])
def test_arange_to_a_non_finite_bound_names_arange(end: float) -> None:
    with pytest.raises(RuntimeError, match=r"arange: unsupported range: 0 -> (-?inf|nan)"):
        rc.arange(0, end)
    with pytest.raises(RuntimeError, match="arange: unsupported range"):
        rc.arange(0, 5, end)


@pytest.mark.parametrize("spec", ["cpu:²", "cpu:-1", "cpu:x", "cpu:1.0"])
def test_malformed_device_strings_are_refused_with_the_string(spec: str) -> None:
    with pytest.raises(RuntimeError, match="invalid device string"):
        rc.device(spec)


def test_a_device_index_must_be_an_int() -> None:
    with pytest.raises(TypeError, match="index must be an int"):
        rc.device("cpu", 1.5)
    assert rc.device("cpu", 0) == rc.device("cpu:0")
