"""The "bad input" table: each mistake raises the exception a PyTorch user
expects, with a message naming what it must name (shapes, dims, devices, the
fix). Mixed devices, unsupported dtypes and broken plugins are covered with a
fake backend in test_registry.py."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import raise_device_errors
from rtxcore.testing import assert_close


def arange(shape, device, dtype=np.float32):
    return rc.tensor(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape), device=device)


# -- shapes that don't broadcast ------------------------------------------------------------


@pytest.mark.parametrize("sa,sb", [((2, 3), (4,)), ((3,), (4,)), ((2, 3, 4), (3, 3, 4)), ((5, 1), (2, 4, 2)),
                                   ((0,), (2,))])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "lt", "where", "maximum"])
def test_broadcast_mismatch_names_both_shapes(device, sa, sb, op):
    a, b = arange(sa, device), arange(sb, device)
    fn = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
          "lt": lambda: a < b, "where": lambda: rc.where(a > 1, a, b),
          "maximum": lambda: rc.maximum(a, b)}[op]
    with pytest.raises(RuntimeError) as ei:
        fn()
    msg = str(ei.value)
    assert str(sa) in msg and str(sb) in msg, msg
    with pytest.raises(ValueError):  # NumPy agrees these don't broadcast
        np.broadcast_shapes(sa, sb)


def test_inplace_broadcast_to_other_shape(device):
    a, b = arange((3,), device), arange((2, 3), device)
    with pytest.raises(RuntimeError) as ei:
        a.add_(b)
    assert "(3,)" in str(ei.value) and "(2, 3)" in str(ei.value)
    assert_close(a, np.arange(3, dtype=np.float32))


# -- view / reshape -------------------------------------------------------------------------


@pytest.mark.parametrize("make,shape", [(lambda x: x.t(), (12,)), (lambda x: x[:, :2], (6,)),
                                        (lambda x: x.permute(1, 0), (2, 6)),
                                        (lambda x: x[:, :1].expand(3, 4), (12,))])
def test_view_needs_reshape(device, make, shape):
    v = make(arange((3, 4), device))
    with pytest.raises(RuntimeError) as ei:
        v.view(shape)
    assert "reshape" in str(ei.value)
    assert_close(v.reshape(shape), np.asarray(v).reshape(shape))


@pytest.mark.parametrize("target", [(5,), (4, 4), (2, -1, 5), (-1, -1), (3, -1, -1), (0,), (7, -1)])
@pytest.mark.parametrize("op", ["reshape", "view"])
def test_reshape_bad_target(device, target, op):
    x = arange((3, 4), device)
    with pytest.raises(RuntimeError) as ei:
        getattr(x, op)(target)
    msg = str(ei.value)
    assert "(3, 4)" in msg and str(target) in msg, msg


# -- matmul -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sa,sb", [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)), ((4,), (3, 4)),
                                   ((5, 2, 3), (5, 4, 3)), ((2, 3), (7, 4, 2))])
def test_matmul_inner_mismatch(device, sa, sb):
    a, b = arange(sa, device), arange(sb, device)
    for fn in (lambda: a @ b, lambda: rc.matmul(a, b)):
        with pytest.raises(RuntimeError) as ei:
            fn()
        msg = str(ei.value)
        assert str(sa) in msg and str(sb) in msg, msg


# -- indexing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("key,dim,size,index", [
    (3, 0, 3, 3), (-4, 0, 3, -4), ((0, 4), 1, 4, 4), ((slice(None), -5), 1, 4, -5), ((Ellipsis, 9), 2, 2, 9),
    ((1, 1, 2), 2, 2, 2),
])
def test_index_out_of_range(device, key, dim, size, index):
    x = arange((3, 4, 2), device)
    with pytest.raises(IndexError) as ei:
        x[key]
    msg = str(ei.value)
    assert f"index {index}" in msg and f"dimension {dim}" in msg and f"size {size}" in msg, msg
    with pytest.raises(IndexError):
        x[key] = 0.0


@pytest.mark.parametrize("key", [[0, 3], (slice(None), [4]), (slice(None), slice(None), [-3])])
def test_advanced_index_out_of_range(device, key):
    x = arange((3, 4, 2), device)
    with pytest.raises(IndexError) as ei:
        x[key]
        raise_device_errors()  # a queued device (cuda) raises at its next read
    bad = (key if isinstance(key, list) else key[-1])[-1]
    size = {0: 3, 1: 4, 2: 2}[0 if isinstance(key, list) else len(key) - 1]
    msg = str(ei.value)
    assert str(bad) in msg and f"size {size}" in msg and "dimension" in msg, msg


def test_too_many_indices(device):
    x = arange((3, 4), device)
    for key in [(0, 0, 0), (slice(None), 0, 1), (Ellipsis, 0, 0, 0)]:
        with pytest.raises(IndexError) as ei:
            x[key]
        msg = str(ei.value)
        assert "too many indices" in msg and "2" in msg and "3" in msg, msg
    s = rc.tensor(1.0, device=device)
    with pytest.raises(IndexError):
        s[0]


def test_dim_out_of_range(device):
    x = arange((3, 4), device)
    for fn in (lambda: x.sum(2), lambda: x.transpose(0, 2), lambda: x.unsqueeze(3),
               lambda: x.squeeze(-3), lambda: x.size(2), lambda: x.stride(5)):
        with pytest.raises(IndexError) as ei:
            fn()
        assert "range" in str(ei.value)


# -- devices --------------------------------------------------------------------------------------


def test_unknown_device_lists_known_types():
    with pytest.raises(RuntimeError) as ei:
        rc.zeros(2, device="cpux")
    msg = str(ei.value)
    assert "cpux" in msg and "cpu" in msg.replace("cpux", "")
    for known in ("opencl", "cuda"):
        assert known in msg
    with pytest.raises(RuntimeError):
        rc.device("cpux")


def test_backend_not_installed_says_how_to_install(monkeypatch):
    from rtxcore.dispatch import registry as reg

    reg.registry.ensure_loaded()
    missing = [name for name in reg.KNOWN_BACKENDS if name not in reg.registry.backends]
    if not missing:  # every known backend installed here: test with one more known name
        monkeypatch.setitem(reg.KNOWN_BACKENDS, "rtxtest", "pip install rtx-rtxtest")
        missing = ["rtxtest"]
    name = missing[0]
    with pytest.raises(RuntimeError) as ei:
        rc.zeros(2, device=name)
    msg = str(ei.value)
    assert "pip install" in msg and f"rtx-{name}" in msg, msg


# -- scalars from tensors ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2,), (2, 3), (0,), (1, 2)])
def test_bool_of_multi_element_tensor(device, shape):
    x = rc.ones(shape, device=device)
    with pytest.raises(RuntimeError) as ei:
        bool(x)
    assert str(shape) in str(ei.value)
    with pytest.raises(RuntimeError):
        if x > 0:
            pass
    with pytest.raises(ValueError):  # PyTorch's type for float()/int()
        float(x)
    with pytest.raises(RuntimeError):
        x.item()


def test_bool_of_one_element_tensor_works(device):
    assert bool(rc.tensor([1.0], device=device)) is True
    assert bool(rc.tensor([[0]], device=device)) is False
    assert bool(rc.tensor(2, device=device)) is True


# -- in-place ops can't change the dtype --------------------------------------------------------------


@pytest.mark.parametrize("dtype", [rc.int64, rc.int32, rc.uint8, rc.bool_])
def test_int_inplace_with_float_raises_and_leaves_tensor(device, dtype):
    a = np.array([1, 0, 3])
    x = rc.tensor(a, dtype=dtype, device=device)
    before = np.asarray(x).copy()
    with pytest.raises(RuntimeError) as ei:
        x.add_(0.5)
    msg = str(ei.value)
    assert "float" in msg.lower() and dtype.name in msg, msg
    assert_close(x, before)
    with pytest.raises(RuntimeError):
        x.mul_(rc.tensor([0.5, 1.5, 2.5], device=device))
    assert_close(x, before)
    with pytest.raises(RuntimeError):
        x += 1.5
    assert_close(x, before)


def test_int_inplace_with_int_works(device):
    x = rc.tensor([1, 2, 3], device=device)
    x.add_(2)
    assert_close(x, np.array([3, 4, 5]))
    f = rc.tensor([1.0, 2.0], device=device)
    f.add_(rc.tensor([1, 2], device=device))  # int into float: fine
    assert_close(f, np.array([2.0, 4.0], np.float32))
