"""Making tensors (from data, filled, ranges, random), converting them, and their repr."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close

from .dtypes_table import ALL, need, npdt, rdt

FLOATS = ["float16", "float32", "float64"]


@pytest.fixture
def rng_state():
    """Leave the default generator as the test found it."""
    state = rc.get_rng_state()
    yield
    rc.set_rng_state(state)


# -- tensor / as_tensor / from_numpy -------------------------------------------------------


@pytest.mark.parametrize("data,expected", [
    ([1, 2, 3], np.array([1, 2, 3], dtype=np.int64)),
    ([[1.5, 2.0], [3.0, 4.0]], np.array([[1.5, 2.0], [3.0, 4.0]], dtype=np.float32)),
    ([True, False], np.array([True, False])),
    ([1, 2.5], np.array([1.0, 2.5], dtype=np.float32)),  # mixed int/float: default float
    ([True, 2], np.array([1, 2], dtype=np.int64)),
    (7, np.array(7, dtype=np.int64)),
    (2.5, np.array(2.5, dtype=np.float32)),
    (False, np.array(False)),
    ([], np.zeros(0, dtype=np.float32)),
    ([[], []], np.zeros((2, 0), dtype=np.float32)),
    (np.array([1, 2], dtype=np.int16), np.array([1, 2], dtype=np.int16)),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0])),  # a float64 array stays float64
    (np.float32(2.5), np.array(2.5, dtype=np.float32)),
    (np.array(3), np.array(3, dtype=np.int64)),
], ids=lambda v: type(v).__name__ if not isinstance(v, (list, int, float)) else repr(v))
def test_tensor_dtype_inference(device, data, expected):
    need(device, expected.dtype.name)
    t = rc.tensor(data, device=device)
    assert t.device == rc.device(device)
    assert_close(t, expected)


@pytest.mark.parametrize("name", ALL)
def test_tensor_with_dtype(device, name):
    need(device, name)
    data = [[0, 1, 2], [3, 1, 0]]
    t = rc.tensor(data, dtype=rdt(name), device=device)
    assert t.dtype is rdt(name)
    assert_close(t, np.array(data).astype(npdt(name)))


def test_tensor_float_data_to_int_truncates(device):
    data = [1.7, -1.7, 2.5, -0.2]
    assert_close(rc.tensor(data, dtype=rc.int64, device=device), np.array(data).astype(np.int64))


def test_tensor_copies_its_data(device):
    need(device, "float64")
    a = np.arange(6.0).reshape(2, 3)
    t = rc.tensor(a, device=device)
    a[0, 0] = 100.0
    assert_close(t, np.arange(6.0).reshape(2, 3))
    s = rc.tensor(t, device=device)  # from a tensor: a copy too
    s.fill_(0)
    assert_close(t, np.arange(6.0).reshape(2, 3))


def test_tensor_from_non_contiguous_numpy(device):
    need(device, "float64")
    a = np.arange(24.0).reshape(4, 6)[::2, 1::2].T
    assert_close(rc.tensor(a, device=device), a)


def test_tensor_bad_data_raises(device):
    with pytest.raises(ValueError):
        rc.tensor([[1, 2], [3]], device=device)
    with pytest.raises(TypeError):
        rc.tensor(["a", "b"], device=device)
    with pytest.raises(TypeError):
        rc.tensor(np.zeros(2, dtype=np.complex64), device=device)


def test_from_numpy_is_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = rc.from_numpy(a)
    assert t.device == rc.device("cpu")
    assert t.dtype is rc.float32
    a[1, 2] = -7.0
    assert t[1, 2].item() == -7.0
    t.add_(1)  # and the other way
    assert_close(t, a)
    assert a[1, 2] == -6.0


@pytest.mark.parametrize("make", [
    lambda: np.arange(24.0).reshape(4, 6)[:, ::2],
    lambda: np.arange(24.0).reshape(4, 6).T,
    lambda: np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
    lambda: np.arange(60, dtype=np.int16).reshape(3, 4, 5)[1:, ::2, 1:4],
    lambda: np.broadcast_to(np.arange(3.0), (2, 3)),
], ids=["step", "transposed", "fortran", "3d-window", "broadcast"])
def test_from_numpy_non_contiguous_is_zero_copy(make):
    a = make()
    t = rc.from_numpy(a)
    assert tuple(t.shape) == a.shape
    assert_close(t, a)
    if not a.flags.writeable:  # broadcast views are read-only: sharing is all we can check
        assert np.shares_memory(t.numpy(), a)
        return
    a[(0,) * a.ndim] = 99
    a[(-1,) * a.ndim] = 42
    assert_close(t, a)
    t.mul_(2)
    assert_close(t, a)
    assert a[(0,) * a.ndim] == 198


@pytest.mark.parametrize("name", ALL)
def test_from_numpy_every_dtype(name):
    a = (np.arange(6) % 3).astype(npdt(name))
    t = rc.from_numpy(a)
    assert t.dtype is rdt(name)
    assert_close(t, a)


def test_from_numpy_rejects():
    with pytest.raises(ValueError):
        rc.from_numpy(np.arange(5)[::-1])  # negative strides
    with pytest.raises(TypeError):
        rc.from_numpy(np.zeros(2, dtype=np.complex128))
    with pytest.raises(TypeError):
        rc.from_numpy([1, 2])


def test_as_tensor(device):
    need(device, "float64")
    a = np.arange(4.0)
    t = rc.as_tensor(a, device=device)
    assert_close(t, a)
    a[0] = 50.0
    # memory is shared with NumPy exactly where the backend says its buffers are
    # host memory (cpu): as_tensor keeps the array, numpy() is a view
    shares = t.device.backend.shares_host_memory
    assert t[0].item() == (50.0 if shares else 0.0)
    n = t.numpy()
    n[3] = -7.0
    assert t[3].item() == (-7.0 if shares else 3.0)
    c = rc.as_tensor(a, dtype=rc.float32, device=device)  # a different dtype: a copy
    a[1] = -1.0
    last = -7.0 if shares else 3.0  # (numpy()'s write reached a through t where shared)
    assert_close(c, np.array([50.0, 1.0, 2.0, last], dtype=np.float32))
    assert rc.as_tensor(t) is t  # already right: itself
    assert_close(rc.as_tensor([1, 2], dtype=rc.float64, device=device), np.array([1.0, 2.0]))
    assert_close(rc.asarray([[1, 2]], device=device), np.array([[1, 2]]))


@pytest.fixture
def hostmem():
    """A second backend whose buffers are host memory (tests/host_backend.py)."""
    from .host_backend import HostMemPlugin

    name = rc.register_backend(HostMemPlugin(), name="hostmem-plugin")
    try:
        yield "hostmem"
    finally:
        rc.unregister_backend(name)


def test_host_memory_sharing_follows_the_flag(hostmem):
    """shares_host_memory, not the device's name, decides: on ``hostmem`` as on
    cpu, numpy() is a view and as_tensor keeps the array; on a backend without
    the flag both copy."""
    for device, shares in ((hostmem, True), ("cpu", True), ("prims", False)):
        a = np.arange(6.0).reshape(2, 3)
        t = rc.as_tensor(a, device=device)
        assert t.device == rc.device(device)
        assert t.device.backend.shares_host_memory is shares
        a[0, 1] = 40.0
        assert t[0, 1].item() == (40.0 if shares else 1.0), device
        n = t.numpy()
        assert np.shares_memory(n, a) is shares, device
        n[1, 2] = -3.0
        assert t[1, 2].item() == (-3.0 if shares else 5.0), device
        # numpy(force=True) always copies
        f = t.numpy(force=True)
        f[0, 0] = 99.0
        assert t[0, 0].item() == 0.0
        # a tensor made by an op owns fresh memory; numpy() still views it where shared
        u = t + 1
        un = u.numpy()
        un[0, 0] = 123.0
        assert u[0, 0].item() == (123.0 if shares else 1.0), device
    # moving between two host-memory backends copies (they never alias)
    src = rc.arange(4.0)
    moved = src.to(hostmem)
    moved.add_(1)
    assert src.tolist() == [0.0, 1.0, 2.0, 3.0] and moved.tolist() == [1.0, 2.0, 3.0, 4.0]


# -- filled ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_zeros_ones_full_empty(device, name):
    need(device, name)
    dt = rdt(name)
    assert_close(rc.zeros(2, 3, dtype=dt, device=device), np.zeros((2, 3), npdt(name)))
    assert_close(rc.zeros((2, 3), dtype=dt, device=device), np.zeros((2, 3), npdt(name)))
    assert_close(rc.ones([4], dtype=dt, device=device), np.ones(4, npdt(name)))
    assert_close(rc.full((2, 2), 1, dtype=dt, device=device), np.full((2, 2), 1, npdt(name)))
    e = rc.empty(3, 1, dtype=dt, device=device)
    assert tuple(e.shape) == (3, 1) and e.dtype is dt and e.device == rc.device(device)


def test_filled_defaults_and_inference(device):
    assert_close(rc.zeros(2, device=device), np.zeros(2, np.float32))
    assert_close(rc.ones((), device=device), np.ones((), np.float32))
    assert_close(rc.full((2,), 3, device=device), np.full(2, 3, np.int64))
    assert_close(rc.full((2,), 3.5, device=device), np.full(2, 3.5, np.float32))
    assert_close(rc.full((2,), True, device=device), np.full(2, True))
    assert_close(rc.full([2, 2], 1.5, dtype=rc.int32, device=device), np.full((2, 2), 1, np.int32))
    assert_close(rc.zeros(0, 3, device=device), np.zeros((0, 3), np.float32))
    with pytest.raises(RuntimeError):
        rc.zeros(-1, device=device)


@pytest.mark.parametrize("name", ["bool", "int32", "int64", "float16", "float64"])
def test_like_factories(device, name):
    need(device, "float64")
    need(device, name)
    src = rc.tensor(np.arange(6).reshape(2, 3) % 2, dtype=rdt(name), device=device)
    assert_close(rc.zeros_like(src), np.zeros((2, 3), npdt(name)))
    assert_close(rc.ones_like(src), np.ones((2, 3), npdt(name)))
    assert_close(rc.full_like(src, 1), np.full((2, 3), 1, npdt(name)))
    e = rc.empty_like(src)
    assert e.shape == src.shape and e.dtype is src.dtype and e.device == src.device
    assert_close(rc.zeros_like(src, dtype=rc.float32), np.zeros((2, 3), np.float32))
    r = rc.rand_like(src, dtype=rc.float32)
    assert r.shape == src.shape and r.dtype is rc.float32
    n = rc.randn_like(rc.zeros_like(src, dtype=rc.float64))
    assert n.shape == src.shape and n.dtype is rc.float64
    i = rc.randint_like(src, 0, 5, dtype=rc.int64)
    assert i.shape == src.shape and i.dtype is rc.int64
    v = i.numpy()
    assert v.min() >= 0 and v.max() < 5


# -- ranges ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args,expected", [
    ((5,), np.arange(5, dtype=np.int64)),
    ((2, 9), np.arange(2, 9, dtype=np.int64)),
    ((10, 0, -3), np.arange(10, 0, -3, dtype=np.int64)),
    ((1, 1), np.arange(1, 1, dtype=np.int64)),
    ((5.0,), np.arange(5.0, dtype=np.float32)),
    ((1, 2.5, 0.5), np.arange(1, 2.5, 0.5, dtype=np.float32)),
    ((0, 1, 0.1), np.arange(0, 1, 0.1).astype(np.float32)),
    ((0.0, 1.0, 0.3), np.arange(0.0, 1.0, 0.3).astype(np.float32)),
    ((-1, 1, 0.25), np.arange(-1, 1, 0.25).astype(np.float32)),
    ((3, -2, -0.5), np.arange(3, -2, -0.5).astype(np.float32)),
], ids=repr)
def test_arange(device, args, expected):
    assert_close(rc.arange(*args, device=device), expected)


@pytest.mark.parametrize("name", ["uint8", "int32", "int64", "float16", "float32", "float64"])
def test_arange_dtype(device, name):
    need(device, name)
    assert_close(rc.arange(0, 10, 2, dtype=rdt(name), device=device), np.arange(0, 10, 2).astype(npdt(name)))


def test_arange_errors(device):
    with pytest.raises(RuntimeError):
        rc.arange(0, 5, 0, device=device)
    with pytest.raises(RuntimeError):
        rc.arange(0, -1, device=device)


@pytest.mark.parametrize("start,end,steps", [(0, 1, 5), (-1, 1, 1), (0, 1, 0), (2, -3, 7), (0, 1, 2),
                                             (-10, 10, 101), (1, 1, 4)])
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_linspace(device, start, end, steps, name):
    need(device, name)
    expected = np.linspace(start, end, steps).astype(name)
    got = rc.linspace(start, end, steps, dtype=rdt(name), device=device)
    assert_close(got, expected)
    if steps > 1:  # both end points exact
        assert got[0].item() == np.float64(np.array(start, name)) and got[-1].item() == np.float64(np.array(end, name))


def test_linspace_default_dtype_and_ints(device):
    assert_close(rc.linspace(0, 1, 11, device=device), np.linspace(0, 1, 11).astype(np.float32))
    assert_close(rc.linspace(0, 10, 5, dtype=rc.int64, device=device),
                 np.linspace(0, 10, 5).astype(np.int64))
    with pytest.raises(RuntimeError):
        rc.linspace(0, 1, -1, device=device)


def test_logspace(device):
    need(device, "float64")
    assert_close(rc.logspace(0, 3, 4, dtype=rc.float64, device=device), np.logspace(0, 3, 4))
    assert_close(rc.logspace(0, 2, 3, base=2.0, dtype=rc.float64, device=device), np.logspace(0, 2, 3, base=2.0))


@pytest.mark.parametrize("n,m", [(3, None), (2, 4), (4, 2), (0, None), (1, 1)])
@pytest.mark.parametrize("name", ["float32", "int64", "bool"])
def test_eye(device, n, m, name):
    need(device, name)
    assert_close(rc.eye(n, m, dtype=rdt(name), device=device), np.eye(n, m, dtype=npdt(name)))


# -- random -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_manual_seed_reproducible(device, fn, rng_state):
    f = getattr(rc, fn)
    rc.manual_seed(1234)
    a1, a2 = f(3, 4, device=device).numpy().copy(), f(5, device=device).numpy().copy()
    rc.manual_seed(1234)
    b1, b2 = f(3, 4, device=device).numpy().copy(), f(5, device=device).numpy().copy()
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1.reshape(-1)[:5], a2)  # consecutive draws differ
    rc.manual_seed(1235)
    c1 = f(3, 4, device=device).numpy()
    assert not np.array_equal(a1, c1)
    assert rc.initial_seed() == 1235


def test_randint_randperm_reproducible(device, rng_state):
    rc.manual_seed(7)
    a = rc.randint(0, 1000, (50,), device=device).numpy().copy()
    p = rc.randperm(50, device=device).numpy().copy()
    rc.manual_seed(7)
    np.testing.assert_array_equal(rc.randint(0, 1000, (50,), device=device).numpy(), a)
    np.testing.assert_array_equal(rc.randperm(50, device=device).numpy(), p)
    rc.manual_seed(8)
    assert not np.array_equal(rc.randint(0, 1000, (50,), device=device).numpy(), a)


def test_rng_state_roundtrip(device, rng_state):
    rc.manual_seed(0)
    rc.rand(10, device=device)
    state = rc.get_rng_state()
    a = rc.rand(10, device=device).numpy().copy()
    rc.set_rng_state(state)
    np.testing.assert_array_equal(rc.rand(10, device=device).numpy(), a)


def test_generator_argument(device, rng_state):
    g1 = rc.Generator().manual_seed(42)
    g2 = rc.Generator().manual_seed(42)
    before = rc.get_rng_state()
    a = rc.rand(20, generator=g1, device=device).numpy().copy()
    b = rc.rand(20, generator=g2, device=device).numpy().copy()
    np.testing.assert_array_equal(a, b)
    assert rc.get_rng_state() == before  # the default generator did not move
    # the generator advances: its next draw differs
    assert not np.array_equal(rc.rand(20, generator=g1, device=device).numpy(), a)
    g3 = rc.Generator().manual_seed(43)
    assert not np.array_equal(rc.rand(20, generator=g3, device=device).numpy(), a)
    n1 = rc.randn(8, generator=rc.Generator().manual_seed(5), device=device).numpy().copy()
    n2 = rc.randn(8, generator=rc.Generator().manual_seed(5), device=device).numpy()
    np.testing.assert_array_equal(n1, n2)
    p1 = rc.randperm(30, generator=rc.Generator().manual_seed(5), device=device).numpy().copy()
    p2 = rc.randperm(30, generator=rc.Generator().manual_seed(5), device=device).numpy()
    np.testing.assert_array_equal(p1, p2)
    i1 = rc.randint(0, 9, (30,), generator=rc.Generator().manual_seed(5), device=device).numpy().copy()
    i2 = rc.randint(0, 9, (30,), generator=rc.Generator().manual_seed(5), device=device).numpy()
    np.testing.assert_array_equal(i1, i2)


@pytest.mark.parametrize("name", FLOATS)
def test_rand_in_unit_interval(device, name, rng_state):
    need(device, name)
    rc.manual_seed(0)
    x = rc.rand(100_000, dtype=rdt(name), device=device)
    assert x.dtype is rdt(name) and tuple(x.shape) == (100_000,)
    v = x.numpy().astype(np.float64)
    assert v.min() >= 0.0
    assert v.max() < 1.0
    assert abs(v.mean() - 0.5) < 0.01
    assert abs(v.std() - math.sqrt(1 / 12)) < 0.01
    # roughly uniform: every tenth of the interval gets its share
    counts = np.histogram(v, bins=10, range=(0, 1))[0]
    assert counts.min() > 9000 and counts.max() < 11000


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_randn_moments(device, name, rng_state):
    need(device, name)
    rc.manual_seed(0)
    x = rc.randn(100_000, dtype=rdt(name), device=device)
    v = x.numpy().astype(np.float64)
    assert x.dtype is rdt(name)
    assert abs(v.mean()) < 0.02
    assert abs(v.std() - 1.0) < 0.02
    assert abs(np.mean(np.abs(v) < 1.0) - 0.6827) < 0.01


def test_rand_shapes_and_dtype_errors(device):
    assert tuple(rc.rand(2, 3, device=device).shape) == (2, 3)
    assert tuple(rc.randn((4,), device=device).shape) == (4,)
    assert rc.rand(0, device=device).numel() == 0
    assert rc.rand(2, device=device).dtype is rc.get_default_dtype()
    with pytest.raises(TypeError):
        rc.rand(3, dtype=rc.int64, device=device)
    with pytest.raises(TypeError):
        rc.randn(3, dtype=rc.int32, device=device)


@pytest.mark.parametrize("low,high", [(0, 10), (-5, 5), (3, 4), (100, 110)])
def test_randint(device, low, high, rng_state):
    rc.manual_seed(3)
    x = rc.randint(low, high, (5000,), device=device)
    assert x.dtype is rc.int64
    v = x.numpy()
    assert v.min() >= low and v.max() < high
    assert set(np.unique(v)) == set(range(low, high))  # every value shows up in 5000 draws


def test_randint_forms(device, rng_state):
    x = rc.randint(5, (3, 4), device=device)
    assert tuple(x.shape) == (3, 4)
    assert x.numpy().min() >= 0 and x.numpy().max() < 5
    y = rc.randint(0, 3, (10,), dtype=rc.int32, device=device)
    assert y.dtype is rc.int32
    with pytest.raises(RuntimeError):
        rc.randint(5, 5, (2,), device=device)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_randperm_is_a_permutation(device, n, rng_state):
    p = rc.randperm(n, device=device)
    assert p.dtype is rc.int64
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(n))
    if n == 1000:
        assert not np.array_equal(p.numpy(), np.arange(n))
    assert rc.randperm(n, dtype=rc.int32, device=device).dtype is rc.int32


# -- conversion -------------------------------------------------------------------------------


@pytest.mark.parametrize("name,value,ptype", [("int64", 3, int), ("int32", -2, int), ("uint8", 200, int),
                                              ("float32", 2.5, float), ("float64", -1.25, float),
                                              ("float16", 0.5, float), ("bool", True, bool)])
def test_item(device, name, value, ptype):
    need(device, name)
    for shape in [(), (1,), (1, 1)]:
        t = rc.full(shape, value, dtype=rdt(name), device=device)
        v = t.item()
        assert type(v) is ptype and v == value


def test_item_of_many_raises(device):
    with pytest.raises(RuntimeError):
        rc.zeros(2, device=device).item()
    with pytest.raises(RuntimeError):
        rc.zeros(0, device=device).item()


def test_tolist(device):
    need(device, "float64")
    a = np.arange(6).reshape(2, 3)
    assert rc.tensor(a, device=device).tolist() == a.tolist()
    fl = rc.tensor([[1.5], [2.0]], dtype=rc.float64, device=device).tolist()
    assert fl == [[1.5], [2.0]] and type(fl[0][0]) is float
    b = rc.tensor([True, False], device=device).tolist()
    assert b == [True, False] and type(b[0]) is bool
    assert rc.tensor(3, device=device).tolist() == 3
    assert rc.tensor(np.arange(12).reshape(3, 4), device=device).T.tolist() == np.arange(12).reshape(3, 4).T.tolist()


def test_python_scalar_conversions(device):
    assert float(rc.tensor([2.5], device=device)) == 2.5
    assert type(float(rc.tensor(3, device=device))) is float
    assert int(rc.tensor([[7.9]], device=device)) == 7
    assert int(rc.tensor(-7.9, device=device)) == -7
    assert bool(rc.tensor([0.0], device=device)) is False
    assert bool(rc.tensor(3, device=device)) is True
    # PyTorch: ValueError for float()/int(), RuntimeError for bool()
    for f, err in ((float, ValueError), (int, ValueError), (bool, RuntimeError)):
        with pytest.raises(err, match="one"):
            f(rc.tensor([1, 2], device=device))


def test_numpy_shares_memory_on_cpu(device):
    need(device, "float64")
    t = rc.tensor(np.arange(12.0).reshape(3, 4), device=device)
    a = t.numpy()
    assert_close(t, a)
    if rc.device(device).type == "cpu":
        a[0, 1] = -3.0
        assert t[0, 1].item() == -3.0
        t.add_(1)
        assert a[0, 1] == -2.0
        v = t.T.numpy()  # a view's array is a view too
        assert v.shape == (4, 3) and np.shares_memory(v, a)
        v[2, 1] = 123.0
        assert t[1, 2].item() == 123.0
        a2 = np.asarray(t)  # __array__
        assert np.shares_memory(a2, a)
    else:
        a[0, 1] = -3.0
        assert t[0, 1].item() == 1.0


def test_numpy_of_views(device):
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = rc.tensor(base, device=device)
    for view, ref in [(t[1:3], base[1:3]), (t[:, ::2], base[:, ::2]), (t.T, base.T), (t[2], base[2]),
                      (t[1, 2], base[1, 2])]:
        np.testing.assert_array_equal(view.numpy(), ref)
        assert view.numpy().dtype == ref.dtype


def test_array_protocol(device):
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = rc.tensor(a, device=device)
    np.testing.assert_array_equal(np.asarray(t), a)
    assert np.asarray(t).dtype == np.int16
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), a.astype(np.float64))
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.add(t, 1), a + 1)


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_to_dtype(device, src, dst):
    need(device, src, dst)
    a = np.array([0.0, 1.0, 2.75, -1.5, 3.0])
    if "uint8" in (src, dst) or src == "bool":
        a = np.abs(a)  # negative floats to uint8 is undefined in C (and PyTorch)
    a = a.astype(npdt(src))
    t = rc.tensor(a, device=device)
    expected = a.astype(npdt(dst))  # floats to ints truncate toward zero
    got = t.to(rdt(dst))
    assert got.dtype is rdt(dst)
    assert_close(got, expected)
    assert_close(t.to(dtype=rdt(dst)), expected)
    if src == dst:
        assert got is t
    else:
        got.zero_() if dst != "bool" else got.fill_(False)
        assert_close(t, a)  # a copy, not a view


@pytest.mark.parametrize("method,name", [("float", "float32"), ("double", "float64"), ("half", "float16"),
                                         ("long", "int64"), ("int", "int32"), ("short", "int16"),
                                         ("char", "int8"), ("byte", "uint8"), ("bool", "bool")])
def test_conversion_methods(device, method, name):
    need(device, name)
    a = np.array([0.0, 1.5, -2.5, 3.0]) if name != "uint8" else np.array([0.0, 1.5, 2.5, 3.0])
    t = rc.tensor(a, dtype=rc.float32, device=device)  # the values are exact in float32
    got = getattr(t, method)()
    assert got.dtype is rdt(name)
    assert_close(got, a.astype(npdt(name)))


def test_to_device_and_other(device):
    need(device, "float64")
    t = rc.tensor([1.0, 2.0], device=device)
    assert t.to(device) is t
    assert t.to(rc.device(device)) is t
    c = t.to(device, copy=True)
    assert c is not t
    c.fill_(0)
    assert_close(t, np.array([1.0, 2.0], np.float32))
    d = t.to(device, rc.float64)
    assert d.dtype is rc.float64 and d.device == rc.device(device)
    assert_close(d, np.array([1.0, 2.0]))
    other = rc.zeros(1, dtype=rc.int32, device=device)
    e = t.to(other)
    assert e.dtype is rc.int32 and e.device == other.device
    cpu = t.cpu()
    assert cpu.device == rc.device("cpu")
    assert_close(cpu, np.array([1.0, 2.0], np.float32))
    if rc.device(device).type == "cpu":
        assert cpu is t
    back = cpu.to(device)
    assert back.device == rc.device(device)
    assert_close(back, np.array([1.0, 2.0], np.float32))
    assert_close(t.to("cpu", dtype=rc.int64), np.array([1, 2]))
    with pytest.raises(TypeError):
        t.to(device, bogus=True)


def test_clone(device):
    need(device, "float64")
    a = np.arange(12.0).reshape(3, 4)
    t = rc.tensor(a, device=device)
    c = t.clone()
    assert c.dtype is t.dtype and c.device == t.device
    assert_close(c, a)
    c.fill_(0)
    assert_close(t, a)
    v = t.T[1:].clone()  # of a non-contiguous view
    assert_close(v, a.T[1:])
    v.add_(1)
    assert_close(t, a)
    assert_close(rc.clone(t), a)


# -- repr -------------------------------------------------------------------------------------


@pytest.mark.parametrize("make,text", [
    (lambda d: rc.tensor([[1.0, 2.0]], device=d), "tensor([[1., 2.]])"),
    (lambda d: rc.tensor([1, 2], device=d), "tensor([1, 2])"),
    (lambda d: rc.tensor([1, 2], dtype=rc.int32, device=d), "tensor([1, 2], dtype=rtxcore.int32)"),
    (lambda d: rc.tensor([1, 2], dtype=rc.uint8, device=d), "tensor([1, 2], dtype=rtxcore.uint8)"),
    (lambda d: rc.tensor([1.0, 2.0], dtype=rc.float64, device=d), "tensor([1., 2.], dtype=rtxcore.float64)"),
    (lambda d: rc.tensor([1.0, 2.0], dtype=rc.float16, device=d), "tensor([1., 2.], dtype=rtxcore.float16)"),
    (lambda d: rc.tensor([1.5, 2.0], device=d), "tensor([1.5000, 2.0000])"),
    (lambda d: rc.tensor([1.5, -2.25], device=d), "tensor([ 1.5000, -2.2500])"),
    (lambda d: rc.tensor([True, False], device=d), "tensor([ True, False])"),
    (lambda d: rc.tensor(2.5, device=d), "tensor(2.5000)"),
    (lambda d: rc.tensor(3, device=d), "tensor(3)"),
    (lambda d: rc.tensor(7, dtype=rc.int16, device=d), "tensor(7, dtype=rtxcore.int16)"),
    (lambda d: rc.tensor([], device=d), "tensor([])"),
    (lambda d: rc.zeros(0, 3, device=d), "tensor([], size=(0, 3))"),
    (lambda d: rc.tensor([[1, -2], [3, 4]], device=d), "tensor([[ 1, -2],\n        [ 3,  4]])"),
    (lambda d: rc.tensor([math.nan, math.inf, 1.0], device=d), "tensor([nan, inf, 1.])"),
    (lambda d: rc.tensor([1e-5, 1.0], device=d), "tensor([1.0000e-05, 1.0000e+00])"),
    (lambda d: rc.tensor([0.001, 2.0], device=d), "tensor([1.0000e-03, 2.0000e+00])"),
    (lambda d: rc.tensor([1.0, 2000.0], device=d), "tensor([1.0000e+00, 2.0000e+03])"),
    (lambda d: rc.tensor([1e9], device=d), "tensor([1.0000e+09])"),
    (lambda d: rc.tensor([1.0, 20.0], device=d), "tensor([ 1., 20.])"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_repr_like_pytorch(device, make, text):
    need(device, *[n for n in ALL if f"rtxcore.{n}" in text])
    dev = rc.device(device)
    if not (dev.type == "cpu" and dev.index == 0):  # PyTorch names the device first
        cut = min([i for i in (text.find(", dtype="), text.find(", size=")) if i >= 0] or [len(text) - 1])
        text = f"{text[:cut]}, device='{dev}'{text[cut:]}"
    assert repr(make(device)) == text
    assert str(make(device)) == text


def test_repr_summarizes_large_tensors(device):
    r = repr(rc.arange(5000, device=device))
    assert r.startswith("tensor([   0,    1,    2,") and "4997, 4998, 4999]" in r
    assert "..." in r and len(r) < 200


def test_repr_shows_float32_dtype_when_default_changes(device):
    need(device, "float64")
    old = rc.get_default_dtype()
    try:
        rc.set_default_dtype(rc.float64)
        assert repr(rc.tensor([1.0, 2.0], dtype=rc.float64, device=device)).startswith("tensor([1., 2.]")
        assert "dtype" not in repr(rc.tensor([1.0, 2.0], dtype=rc.float64, device=device))
        assert "dtype=rtxcore.float32" in repr(rc.tensor([1.0, 2.0], dtype=rc.float32, device=device))
    finally:
        rc.set_default_dtype(old)


def test_repr_of_non_cpu_device_names_it(device):
    t = rc.tensor([1, 2], device=device)
    if rc.device(device).type == "cpu" and rc.device(device).index == 0:
        assert "device=" not in repr(t)
    else:
        assert f"device='{rc.device(device)}'" in repr(t)
