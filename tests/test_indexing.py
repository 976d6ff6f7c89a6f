"""Indexing, joining and sorting against NumPy references.

rtxcore follows PyTorch's indexing rule, which differs from NumPy's in one
place: an int in a key is *basic* indexing (a select), so ``x[0, :, [1, 2]]`` has
shape ``(n1, 2)`` in PyTorch but ``(2, n1)`` in NumPy. The reference
``torch_index`` below applies the basic part of a key first (ints, slices,
None, ...) and then the advanced part (int arrays, lists, bool masks) with only
slices around it, where NumPy and PyTorch agree.

The primitive-only decompositions (the bitonic ``sort`` and ``_index_put``
without a backend kernel) are checked against the kernels by taking the kernel
out of the device's table for the duration of a test.
"""

from __future__ import annotations

import contextlib
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import rtxcore as rc
from rtxcore.testing import raise_device_errors
from rtxcore.ops import sorting
from rtxcore.testing import assert_close, to_numpy

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- helpers -------------------------------------------------------------------------


def base(shape, device, dtype=np.float64):
    n = int(np.prod(shape)) if shape else 1
    arr = np.arange(n).astype(dtype).reshape(shape)
    return rc.tensor(arr, device=device), arr


def _is_adv(k) -> bool:
    return isinstance(k, (list, np.ndarray))


def _nd_of(k) -> int:
    """Dims of the indexed tensor a key entry consumes."""
    if k is None or k is Ellipsis:
        return 0
    if _is_adv(k) and np.asarray(k).dtype == bool:
        return np.asarray(k).ndim
    return 1


def split_key(ndim: int, key):
    """PyTorch's rule as two NumPy keys: the basic part (ints, slices, None; the
    advanced entries replaced by full slices) and the advanced part applied to
    the basic view (advanced entries, full slices elsewhere)."""
    if not isinstance(key, tuple):
        key = (key,)
    used = sum(_nd_of(k) for k in key)
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (ndim - used)
    basic, adv, out_dim = [], [], 0
    for k in key:
        if k is None:
            basic.append(None)
            out_dim += 1
        elif isinstance(k, (int, np.integer)):
            basic.append(k)
        elif isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
            basic.append(int(k))  # a 0-d integer index is an int in PyTorch (a view)
        elif isinstance(k, slice):
            basic.append(k)
            out_dim += 1
        else:
            nd = _nd_of(k)
            basic += [slice(None)] * nd
            adv.append((out_dim, nd, k))
            out_dim += nd
    if not adv:
        return tuple(basic), None
    second, d, j = [], 0, 0
    while d < out_dim:
        if j < len(adv) and adv[j][0] == d:
            second.append(np.asarray(adv[j][2]))
            d += adv[j][1]
            j += 1
        else:
            second.append(slice(None))
            d += 1
    return tuple(basic), tuple(second)


def torch_index(a: np.ndarray, key) -> np.ndarray:
    first, second = split_key(a.ndim, key)
    v = a[first]
    return v if second is None else v[second]


def torch_setitem(a: np.ndarray, key, value) -> None:
    first, second = split_key(a.ndim, key)
    if second is None:
        a[first] = value
    else:
        a[first][second] = value  # a[first] is basic indexing: a view of ``a``


def to_rc_key(key, device):
    """The same key for rtxcore: NumPy index arrays become tensors on ``device``."""
    def conv(k):
        return rc.tensor(k, device=device) if isinstance(k, np.ndarray) else k

    return tuple(conv(k) for k in key) if isinstance(key, tuple) else conv(key)


@contextlib.contextmanager
def without_kernel(device, *ops):
    """Run with ``ops`` removed from the device's kernel table (restored after)."""
    dev = rc.device(device)
    dev.supports(rc.float32)  # bind the device to its backend: ``kernels`` is then its table
    table = dev.kernels
    saved = {op: table.pop(op) for op in ops if op in table}
    try:
        yield
    finally:
        table.update(saved)


# -- __getitem__: basic ---------------------------------------------------------------


@pytest.mark.parametrize("key", [0, -1, 2, (1, 2), (-2, -1, 0), (0, slice(None), 1), (slice(1, 3), -1),
                                 (Ellipsis, 1), (None, 0), (0, None, slice(None, None, 2)),
                                 (slice(None, None, 3), Ellipsis, None), Ellipsis, None, (None, None),
                                 (1, Ellipsis, 2, None), slice(5, 1), (slice(None), slice(0, 0))])
def test_getitem_basic(device, key):
    x, a = base((3, 4, 5), device)
    v = x[key]
    assert_close(v, a[key])
    # basic indexing is a view: a write through it reaches x
    if v.numel():
        idx = (0,) * v.ndim
        v[idx] = -1.0
        av = a[key]
        if isinstance(av, np.ndarray):  # a view of a
            av[idx] = -1.0
        else:  # NumPy gives a scalar for a full int key
            a[key] = -1.0
        assert_close(x, a)


def test_getitem_ints_give_0d_views(device):
    x, a = base((3, 4), device)
    s = x[1, -1]
    assert s.shape == () and s.item() == a[1, -1]
    s.fill_(100.0)
    assert x[1, 3].item() == 100.0


def test_getitem_scalar_tensor(device):
    s, _ = base((), device)
    assert_close(s[None], np.array([0.0]))
    assert_close(s[...], np.array(0.0))
    with pytest.raises(IndexError):
        s[0]


@pytest.mark.parametrize("key", [3, -4, (0, 5), (0, -6), (slice(None), 5)])
def test_getitem_int_out_of_range(device, key):
    x, _ = base((3, 5), device)
    with pytest.raises(IndexError) as ei:
        x[key]
    msg = str(ei.value)
    bad = key if isinstance(key, int) else key[-1]
    d = 0 if isinstance(key, int) else 1
    assert str(bad) in msg and f"dimension {d}" in msg and f"size {x.shape[d]}" in msg


def test_getitem_too_many_indices(device):
    x, _ = base((3, 5), device)
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        x[..., 0, 0, 0]
    with pytest.raises(IndexError):
        x[..., 0, ...]


def test_getitem_bad_key_types(device):
    x, _ = base((3, 5), device)
    with pytest.raises(IndexError):
        x["a"]
    with pytest.raises(IndexError):
        x[rc.tensor([0.0, 1.0], device=device)]
    with pytest.raises(IndexError):
        x[1.5]


# -- __getitem__: advanced ------------------------------------------------------------


ADV_KEYS = [
    [0, 2],
    [[0, 1], [2, 0]],
    np.array([-1, 0, -3]),
    (np.array([0, 2]), np.array([1, 3])),                  # two index arrays, same shape
    (np.array([[0], [2]]), np.array([1, 3, 0])),           # broadcast to (2, 3)
    (slice(None), [1, 2]),                                 # advanced after a slice: stays in place
    (slice(None), np.array([[1], [2]]), np.array([0, 4])),  # adjacent pair, broadcast
    (np.array([0, 1]), slice(None), np.array([1, 2])),     # non-adjacent: result dims go first
    (0, slice(None), [1, 2]),                              # PyTorch: (4, 2); NumPy: (2, 4)
    (slice(None), 0, [1, 2]),
    ([1, 2], 0),
    (1, [0, 3], [4, 1]),
    (Ellipsis, [0, 4]),
    (None, [0, 2], None, slice(None), [1]),
    ([0, 2], None, [1, 3]),
    (slice(1, None), [1, 0], slice(None, None, 2)),
    np.array([True, False, True]),
    (slice(None), np.array([True, False, True, True])),
    (np.array([[True, False, True, False], [False, False, True, True], [True, True, True, False]]),),
    (np.array([True, False, True]), slice(None), [1, 2]),
    (np.array([True, False, True]), [0, 1]),
    (0, np.array([False, True, True, False]), 1),
    (np.array([], dtype=np.int64),),
    (slice(None), np.array([[1, 2], [3, 0]]), slice(None, 3)),
]


@pytest.mark.parametrize("key", ADV_KEYS, ids=[f"k{i}" for i in range(len(ADV_KEYS))])
def test_getitem_advanced(device, key):
    x, a = base((3, 4, 5), device)
    ref = torch_index(a, key)
    assert_close(x[to_rc_key(key, device)], ref)
    # advanced indexing copies: writing to the result leaves x alone
    r = x[to_rc_key(key, device)]
    if r.numel():
        r.fill_(-9.0)
        assert_close(x, a)


def test_pytorch_int_rule(device):
    """The example from the docs: ints are basic, as in PyTorch."""
    x, a = base((3, 4, 5), device)
    r = x[0, :, [1, 2]]
    assert r.shape == (4, 2)
    assert a[0, :, [1, 2]].shape == (2, 4)  # NumPy's rule differs
    assert_close(r, a[0][:, [1, 2]])
    y, b = base((2, 3, 4, 5), device)
    r = y[:, [0, 1], :, 0]
    assert r.shape == (2, 2, 4)
    assert_close(r, b[:, :, :, 0][:, [0, 1]])


def test_getitem_int_tensor_dtypes(device):
    x, a = base((5, 3), device)
    for dt in (rc.int64, rc.int32, rc.int16, rc.int8):
        if not rc.device(device).supports(dt):
            continue
        idx = rc.tensor([4, 0, -1], dtype=dt, device=device)
        assert_close(x[idx], a[[4, 0, -1]])
        assert_close(x[:, idx[1:]], a[:, [0, -1]])


def test_getitem_bool_tensor_mask(device):
    x, a = base((3, 4), device)
    m = x > 4.5
    assert_close(x[m], a[a > 4.5])
    assert_close(x[x > 100], a[a > 100])
    row = rc.tensor([True, False, True], device=device)
    assert_close(x[row], a[[True, False, True]])
    assert_close(x[row, 1:], a[np.array([True, False, True]), 1:])


def test_getitem_nested_bool_list(device):
    x, a = base((2, 3, 4), device)
    mask = [[True, False, True], [False, True, True]]
    assert_close(x[mask], a[np.array(mask)])
    assert_close(x[np.array(mask)], a[np.array(mask)])


@pytest.mark.parametrize("key", [[3], [0, -4], (slice(None), [0, 5]), (0, [5]), (slice(None), [-6])])
def test_getitem_advanced_out_of_range(device, key):
    x, _ = base((3, 5), device)
    with pytest.raises(IndexError) as ei:
        x[key]
        raise_device_errors()  # a queued device (cuda) raises at its next read
    bad = (key if isinstance(key, list) else key[-1])[-1]
    assert str(bad) in str(ei.value)


def test_getitem_mask_shape_mismatch(device):
    x, _ = base((3, 5), device)
    with pytest.raises(IndexError):
        x[rc.tensor([True, False], device=device)]
    with pytest.raises(IndexError):
        x[rc.ones(3, 4, dtype=rc.bool_, device=device)]


def test_getitem_index_shapes_dont_broadcast(device):
    x, _ = base((3, 5), device)
    with pytest.raises(IndexError) as ei:
        x[[0, 1], [0, 1, 2]]
    assert "(2,)" in str(ei.value) and "(3,)" in str(ei.value)


# -- __setitem__ -------------------------------------------------------------------------


SET_CASES = [
    (1, 5.0), ((0, 2), -1.0), ((slice(None), 1), np.array([7.0, 8.0, 9.0, 10.0, 11.0])),
    ((Ellipsis, 0), np.arange(12.0).reshape(3, 4) * -1), ((slice(None, None, 2), slice(1, 3)), np.array([[1.0], [2.0]])),
    ((None, 1), np.arange(20.0).reshape(1, 4, 5)),
    ([0, 2], 3.0), ([2, 0], np.array([[1.0], [2.0]]).reshape(2, 1, 1)),
    ((slice(None), [1, 3]), np.arange(2.0 * 5).reshape(2, 5)),
    ((0, slice(None), [1, 2]), np.arange(8.0).reshape(4, 2)),      # PyTorch layout of the value
    ((np.array([0, 1]), slice(None), np.array([1, 2])), np.arange(8.0).reshape(2, 4)),
    ((slice(None), np.array([[1], [2]]), np.array([0, 4])), -2.0),
    ((slice(None), np.array([[1], [2]]), np.array([0, 4])), np.array([10.0, 20.0])),
    (np.array([True, False, True]), 0.5),
    (np.array([True, False, True]), np.arange(40.0).reshape(2, 4, 5)),
    ((slice(None), np.array([True, False, True, True])), np.array([1.0, 2.0, 3.0, 4.0, 5.0])),
    ((1, [0, 3], [4, 1]), np.array([100.0, 200.0])),
    ((Ellipsis, [0, 4]), np.array([-1.0, -2.0])),
]


REMOVED = {"kernel": (), "composite": ("index_put",), "composite-nosort": ("index_put", "sort")}


@pytest.mark.parametrize("key,value", SET_CASES, ids=[f"s{i}" for i in range(len(SET_CASES))])
@pytest.mark.parametrize("kernel", list(REMOVED))
def test_setitem(device, key, value, kernel):
    x, a = base((3, 4, 5), device)
    torch_setitem(a, key, value)
    v = rc.tensor(value, device=device) if isinstance(value, np.ndarray) else value
    with without_kernel(device, *REMOVED[kernel]):
        x[to_rc_key(key, device)] = v
    assert_close(x, a)


def test_setitem_bool_tensor_mask_and_dtype_cast(device):
    x, a = base((3, 4), device)
    x[x > 5] = 0.0
    a[a > 5] = 0.0
    assert_close(x, a)
    i, ai = base((3, 4), device, np.int64)
    i[0] = rc.tensor([1.9, -2.9, 3.2, 4.0], device=device)  # float values into ints: truncated
    ai[0] = np.trunc([1.9, -2.9, 3.2, 4.0]).astype(np.int64)
    assert_close(i, ai)
    i[[1, 2], 0] = 7
    ai[[1, 2], 0] = 7
    assert_close(i, ai)


def test_setitem_through_view_and_noncontiguous(device):
    x, a = base((4, 6), device)
    t = x.t()
    t[[0, 5], 1:3] = rc.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    a.T[[0, 5], 1:3] = [[1.0, 2.0], [3.0, 4.0]]
    assert_close(x, a)
    t[::2, 0] = rc.tensor([9.0, 8.0, 7.0], device=device).T
    a.T[::2, 0] = [9.0, 8.0, 7.0]
    assert_close(x, a)


def test_setitem_bad_value_shape(device):
    x, a = base((3, 4), device)
    with pytest.raises(RuntimeError):
        x[[0, 1]] = rc.zeros(3, device=device)
    with pytest.raises(RuntimeError):
        x[0] = rc.zeros(5, device=device)
    assert_close(x, a)


def test_setitem_duplicate_indices_same_value(device):
    """Repeated indices with one value: every write stores that value."""
    for k in REMOVED:
        x, a = base((4,), device)
        with without_kernel(device, *REMOVED[k]):
            x[[1, 1, 3, 1]] = 5.0
        a[[1, 1, 3, 1]] = 5.0
        assert_close(x, a)
        # with different values the kernels let the last write win; so does the composite
        y, b = base((2, 3), device)
        with without_kernel(device, *REMOVED[k]):
            y[[1, 0, 1]] = rc.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device)
        b[[1, 0, 1]] = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
        assert_close(y, b)


# -- gather / scatter ---------------------------------------------------------------------


def ref_gather(a, dim, idx):
    out = np.empty(idx.shape, a.dtype)
    for pos in np.ndindex(*idx.shape):
        src = list(pos)
        src[dim] = idx[pos]
        out[pos] = a[tuple(src)]
    return out


def ref_scatter(a, dim, idx, src, add=False):
    out = a.copy()
    for pos in np.ndindex(*idx.shape):
        dst = list(pos)
        dst[dim] = idx[pos]
        v = src if np.isscalar(src) else src[pos]
        if add:
            out[tuple(dst)] += v
        else:
            out[tuple(dst)] = v
    return out


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("ishape", [(3, 4, 5), (2, 3, 2), (1, 1, 1), (3, 4, 7), (0, 2, 2)])
def test_gather(device, dim, ishape):
    x, a = base((3, 4, 5), device)
    d = dim % 3
    rng = np.random.default_rng(0)
    ishape = tuple(min(n, a.shape[i]) if i != d else n for i, n in enumerate(ishape))
    idx = rng.integers(0, a.shape[d], ishape)
    out = x.gather(dim, rc.tensor(idx, device=device))
    assert_close(out, ref_gather(a, d, idx))
    assert_close(rc.gather(x, dim, rc.tensor(idx, device=device)), ref_gather(a, d, idx))
    assert_close(rc.take_along_dim(x, rc.tensor(idx, device=device), dim), ref_gather(a, d, idx))


def test_gather_noncontiguous_input(device):
    x, a = base((4, 6), device)
    idx = np.array([[0, 3], [1, 1], [3, 2]])
    assert_close(x.t().gather(1, rc.tensor(idx, device=device)), ref_gather(a.T, 1, idx))
    idx2 = np.array([[3, 0, 1], [2, 2, 0]])
    assert_close(x[:, ::2].gather(0, rc.tensor(idx2, device=device)), ref_gather(a[:, ::2], 0, idx2))


def test_gather_errors(device):
    x, _ = base((3, 4), device)
    with pytest.raises(IndexError):
        x.gather(1, rc.tensor([[4]], device=device))
        raise_device_errors()
    with pytest.raises(IndexError):
        x.gather(1, rc.tensor([[-1]], device=device))
        raise_device_errors()
    with pytest.raises(RuntimeError):
        x.gather(1, rc.tensor([0, 1], device=device))            # ndim mismatch
    with pytest.raises(RuntimeError):
        x.gather(1, rc.zeros(4, 1, dtype=rc.int64, device=device))  # 4 > 3 in dim 0
    with pytest.raises(RuntimeError):
        x.gather(1, rc.tensor([[0]], dtype=rc.int32, device=device))
    with pytest.raises(IndexError):
        x.gather(2, rc.tensor([[0]], device=device))


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("kernel", ["kernel", "composite"])
def test_scatter_src(device, dim, kernel):
    x, a = base((4, 5), device)
    d = dim % 2
    # each row of the index a permutation (no repeats along dim): deterministic
    rng = np.random.default_rng(1)
    n = a.shape[d]
    if d == 0:
        idx = np.stack([rng.permutation(n)[:3] for _ in range(4)], 1)  # (3, 4)
    else:
        idx = np.stack([rng.permutation(n)[:3] for _ in range(3)], 0)  # (3, 3)
    src = np.arange(100.0, 100.0 + 30).reshape(5, 6)  # bigger than the index: the top-left part is used
    ti, ts = rc.tensor(idx, device=device), rc.tensor(src, device=device)
    with (without_kernel(device, "index_put") if kernel == "composite" else contextlib.nullcontext()):
        out = x.scatter(dim, ti, ts)
        assert_close(out, ref_scatter(a, d, idx, src))
        assert_close(x, a)  # out of place
        assert_close(rc.scatter(x, dim, ti, ts), ref_scatter(a, d, idx, src))
        y = x.clone()
        assert y.scatter_(dim, ti, ts) is y
        assert_close(y, ref_scatter(a, d, idx, src))


@pytest.mark.parametrize("kernel", ["kernel", "composite"])
def test_scatter_value(device, kernel):
    x, a = base((3, 4), device)
    idx = np.array([[0, 1, 2, 0], [2, 2, 2, 2]])  # repeats: all write the same value
    with (without_kernel(device, "index_put") if kernel == "composite" else contextlib.nullcontext()):
        out = x.scatter(0, rc.tensor(idx, device=device), value=-3.0)
    assert_close(out, ref_scatter(a, 0, idx, -3.0))
    i, ai = base((3, 4), device, np.int64)
    assert_close(i.scatter(1, rc.tensor([[3], [0], [1]], device=device), value=9),
                 ref_scatter(ai, 1, np.array([[3], [0], [1]]), 9))


def test_scatter_reduce_add(device):
    x, a = base((3, 4), device)
    idx = np.array([[0, 0, 2, 0], [0, 1, 2, 0]])
    src = np.ones((2, 4))
    out = x.scatter(0, rc.tensor(idx, device=device), rc.tensor(src, device=device), reduce="add")
    assert_close(out, ref_scatter(a, 0, idx, src, add=True))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add(device, dim):
    x, a = base((4, 5), device)
    d = dim % 2
    rng = np.random.default_rng(2)
    idx = rng.integers(0, a.shape[d], (6, 5) if d == 0 else (4, 7))  # repeats accumulate
    src = rng.standard_normal((7, 8))
    out = x.scatter_add(dim, rc.tensor(idx, device=device), rc.tensor(src, device=device))
    assert_close(out, ref_scatter(a, d, idx, src, add=True))
    assert_close(x, a)
    assert_close(rc.scatter_add(x, dim, rc.tensor(idx, device=device), rc.tensor(src, device=device)),
                 ref_scatter(a, d, idx, src, add=True))
    y = x.clone()
    y.scatter_add_(dim, rc.tensor(idx, device=device), rc.tensor(src, device=device))
    assert_close(y, ref_scatter(a, d, idx, src, add=True))


def test_scatter_add_int(device):
    x, a = base((5,), device, np.int64)
    idx = np.array([0, 0, 4, 4, 4])
    src = np.array([1, 2, 3, 4, 5])
    out = x.scatter_add(0, rc.tensor(idx, device=device), rc.tensor(src, device=device))
    assert_close(out, ref_scatter(a, 0, idx, src, add=True))


def test_scatter_errors(device):
    x, _ = base((3, 4), device)
    with pytest.raises(IndexError):
        x.scatter(0, rc.tensor([[3]], device=device), value=1.0)
        raise_device_errors()
    with pytest.raises(IndexError):
        x.scatter_add(1, rc.tensor([[4]], device=device), rc.ones(1, 1, device=device, dtype=rc.float64))
        raise_device_errors()
    with pytest.raises(RuntimeError):
        x.scatter(0, rc.tensor([0], device=device), value=1.0)


# -- index_select / masked_fill / masked_select / nonzero ---------------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_index_select(device, dim):
    x, a = base((3, 4, 5), device)
    idx = np.array([2, 0, 2, -1 + a.shape[dim]])
    out = x.index_select(dim, rc.tensor(idx, device=device))
    assert_close(out, np.take(a, idx, axis=dim))
    assert_close(rc.index_select(x, dim, rc.tensor(idx, device=device)), np.take(a, idx, axis=dim))
    assert_close(x.index_select(dim, rc.tensor([], dtype=rc.int64, device=device)),
                 np.take(a, np.array([], np.int64), axis=dim))
    with pytest.raises(IndexError):
        x.index_select(dim, rc.tensor([[0]], device=device))
    with pytest.raises(IndexError):
        x.index_select(dim, rc.tensor([a.shape[dim]], device=device))
        raise_device_errors()


@pytest.mark.parametrize("mshape", [(3, 4), (4,), (3, 1), (1, 1), ()])
def test_masked_fill(device, mshape):
    x, a = base((3, 4), device)
    rng = np.random.default_rng(3)
    m = rng.random(mshape) > 0.5
    tm = rc.tensor(m, device=device)
    assert_close(x.masked_fill(tm, -1.5), np.where(m, -1.5, a))
    assert_close(rc.masked_fill(x, tm, rc.tensor(2.5, dtype=rc.float64, device=device)), np.where(m, 2.5, a))
    i, ai = base((3, 4), device, np.int32)
    assert_close(i.masked_fill(tm, 7), np.where(m, 7, ai).astype(np.int32))
    y = x.clone()
    assert y.masked_fill_(tm, 0.0) is y
    assert_close(y, np.where(m, 0.0, a))
    assert_close(x, a)


def test_masked_fill_errors(device):
    x, a = base((3, 4), device)
    with pytest.raises(RuntimeError):
        x.masked_fill(rc.ones(3, 4, device=device), 0.0)  # not bool
    with pytest.raises(RuntimeError):
        x.masked_fill(rc.ones(2, 4, dtype=rc.bool_, device=device), 0.0)
    with pytest.raises(RuntimeError):
        x.masked_fill(rc.ones(3, 4, dtype=rc.bool_, device=device), rc.zeros(2, device=device))


@pytest.mark.parametrize("xshape,mshape", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (3, 4)),
                                           ((3, 4), ()), ((2, 3, 4), (3, 1)), ((0, 4), (4,))])
def test_masked_select(device, xshape, mshape):
    x, a = base(xshape, device)
    rng = np.random.default_rng(4)
    m = rng.random(mshape) > 0.4
    ab, mb = np.broadcast_arrays(a, m)
    assert_close(x.masked_select(rc.tensor(m, device=device)), ab[mb])
    assert_close(rc.masked_select(x, rc.tensor(m, device=device)), ab[mb])
    with pytest.raises(RuntimeError):
        x.masked_select(rc.ones(mshape, device=device))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (3, 0), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.bool_])
def test_nonzero(device, shape, dtype):
    rng = np.random.default_rng(5)
    a = (rng.integers(0, 3, shape) * (rng.random(shape) > 0.3)).astype(dtype)
    x = rc.tensor(a, device=device)
    assert_close(x.nonzero(), np.argwhere(a))
    assert_close(rc.nonzero(x), np.argwhere(a))
    assert_close(rc.argwhere(x), np.argwhere(a))
    tup = x.nonzero(as_tuple=True)
    assert isinstance(tup, tuple) and len(tup) == a.ndim
    for t, r in zip(tup, np.nonzero(a)):
        assert_close(t, r)
    # as_tuple indexes back what it found
    assert_close(x[tup], a[np.nonzero(a)])


def test_nonzero_0d(device):
    for v in (0.0, 3.0):
        x = rc.tensor(v, device=device)
        assert_close(x.nonzero(), np.argwhere(np.array(v)))
        (t,) = x.nonzero(as_tuple=True)
        assert_close(t, np.array([0] if v else [], dtype=np.int64))


def test_nonzero_noncontiguous(device):
    a = np.array([[0, 1, 0], [2, 0, 3]])
    x = rc.tensor(a, device=device).t()
    assert_close(x.nonzero(), np.argwhere(a.T))


# -- sort / argsort / topk ---------------------------------------------------------------


def ref_sort(a, dim, descending):
    """Stable sort along ``dim``; equal elements keep their order either way."""
    m = np.moveaxis(a, dim, -1)
    idx = np.empty(m.shape, np.int64)
    for pos in np.ndindex(*m.shape[:-1]):
        row = m[pos]
        idx[pos] = sorted(range(len(row)), key=lambda i: row[i], reverse=descending)
    vals = np.take_along_axis(m, idx, -1)
    return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)


SORT_DATA = {
    "float_ties": lambda rng, s: rng.integers(0, 4, s).astype(np.float64),
    "float_unique": lambda rng, s: rng.permutation(int(np.prod(s))).reshape(s).astype(np.float32) / 7,
    "int_ties": lambda rng, s: rng.integers(-3, 3, s).astype(np.int64),
    "int_extremes": lambda rng, s: rng.choice(np.array([np.iinfo(np.int32).min, -1, 0, 5, np.iinfo(np.int32).max],
                                                       np.int32), s),
    "float_inf": lambda rng, s: rng.choice(np.array([-np.inf, -1.0, 0.5, np.inf]), s),
    "bool": lambda rng, s: rng.random(s) > 0.5,
    "uint8": lambda rng, s: rng.integers(0, 256, s).astype(np.uint8),
}


@pytest.mark.parametrize("data", list(SORT_DATA))
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 6, 3), 1), ((4, 1), 1),
                                       ((0, 3), 1), ((5, 9), 1)])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kernel", ["kernel", "composite"])
def test_sort(device, data, shape, dim, descending, kernel):
    rng = np.random.default_rng(zlib.crc32(repr((data, shape, dim)).encode()))
    a = SORT_DATA[data](rng, shape)
    x = rc.tensor(a, device=device)
    ev, ei = ref_sort(a, dim, descending)
    with (without_kernel(device, "sort") if kernel == "composite" else contextlib.nullcontext()):
        res = x.sort(dim, descending=descending, stable=True)
        assert_close(res.values, ev)
        assert_close(res.indices, ei)
        values, indices = rc.sort(x, dim=dim, descending=descending)
        assert_close(values, ev)
        assert_close(indices, ei)
        assert_close(x.argsort(dim, descending=descending), ei)
        assert_close(rc.argsort(x, dim, descending), ei)
    assert_close(x, a)  # sort is out of place


def test_sort_composite_direct(device):
    """_bitonic_sort called directly gives what the kernel gives (non-power-of-2
    lengths, non-contiguous input)."""
    rng = np.random.default_rng(6)
    a = rng.integers(0, 5, (6, 11)).astype(np.float64)
    x = rc.tensor(a, device=device).t()  # (11, 6), non-contiguous
    for d in (0, 1):
        for desc in (False, True):
            v, i = sorting._bitonic_sort(x, d, desc)
            kv, ki = x.sort(d, descending=desc)
            assert_close(v, to_numpy(kv))
            assert_close(i, to_numpy(ki))
            ev, ei = ref_sort(a.T, d, desc)
            assert_close(v, ev)
            assert_close(i, ei)


@pytest.mark.parametrize("kernel", ["kernel", "composite"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan_is_largest(device, kernel, descending):
    """PyTorch orders NaN above every number: last ascending, first descending."""
    a = np.array([3.0, np.nan, -1.0, np.inf, np.nan, 0.0])
    x = rc.tensor(a, device=device)
    with (without_kernel(device, "sort") if kernel == "composite" else contextlib.nullcontext()):
        v, i = x.sort(descending=descending)
    order = [2, 5, 0, 3, 1, 4]
    if descending:
        order = [1, 4, 3, 0, 5, 2]
    assert_close(i, np.array(order))
    assert_close(v, a[order])


def test_sort_scalar(device):
    x = rc.tensor(2.5, device=device)
    v, i = x.sort()
    assert_close(v, np.array(2.5, np.float32))
    assert_close(i, np.array(0))


@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("kernel", ["kernel", "composite"])
def test_topk(device, k, largest, dim, kernel):
    rng = np.random.default_rng(7)
    a = rng.permutation(6 * 6).reshape(6, 6).astype(np.float64)  # distinct values
    x = rc.tensor(a, device=device)
    order = np.argsort(-a if largest else a, axis=dim, kind="stable")
    ei = np.take(order, np.arange(k), axis=dim)
    ev = np.take_along_axis(a, ei, dim)
    with (without_kernel(device, "sort") if kernel == "composite" else contextlib.nullcontext()):
        res = x.topk(k, dim, largest=largest)
        assert_close(res.values, ev)
        assert_close(res.indices, ei)
        values, indices = rc.topk(x, k, dim=dim, largest=largest)
        assert_close(values, ev)


def test_topk_ties_and_errors(device):
    a = np.array([[1, 3, 3, 2], [5, 5, 5, 0]], dtype=np.int64)
    x = rc.tensor(a, device=device)
    v, i = x.topk(2)
    assert_close(v, np.array([[3, 3], [5, 5]]))
    assert_close(x.gather(1, i), to_numpy(v))  # indices point at the values
    assert all(len(set(row)) == 2 for row in i.tolist())
    with pytest.raises(RuntimeError):
        x.topk(5)
    with pytest.raises(RuntimeError):
        x.topk(-1)


# -- cat / stack ------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_cat(device, dim):
    a = np.arange(24.0).reshape(2, 3, 4)
    b = -np.arange(2.0 * 3 * 4 * 2).reshape(2, 3, 4, 2)
    d = dim % 3
    if d == 0:
        parts = [a, b[..., 0][:1], b[..., 1]]
    elif d == 1:
        parts = [a, b[..., 0][:, :2], b[..., 1][:, :1]]
    else:
        parts = [a, b[..., 0][:, :, :1], b[..., 1]]
    ts = [rc.tensor(p, device=device) for p in parts]
    assert_close(rc.cat(ts, dim), np.concatenate(parts, dim))
    assert_close(rc.cat(ts, dim=dim), np.concatenate(parts, dim))
    assert_close(rc.concat(tuple(ts), dim), np.concatenate(parts, dim))
    assert_close(rc.concatenate(ts, dim), np.concatenate(parts, dim))
    # non-contiguous inputs
    tt = [t.transpose(0, 2).contiguous().transpose(0, 2) for t in ts]
    assert_close(rc.cat(tt, dim), np.concatenate(parts, dim))


def test_cat_single_and_empty(device):
    a = np.arange(6.0).reshape(2, 3)
    t = rc.tensor(a, device=device)
    out = rc.cat([t])
    assert_close(out, a)
    out.fill_(0.0)
    assert_close(t, a)  # cat copies
    # legacy: 1-D empty tensors are skipped whatever their dim
    e = rc.zeros(0, dtype=rc.float64, device=device)
    assert_close(rc.cat([e, t, e], 1), a)
    assert_close(rc.cat([t, rc.zeros(0, 3, dtype=rc.float64, device=device)]), a)


@pytest.mark.parametrize("da,db,expected", [(np.int64, np.float32, np.float32), (np.int32, np.int64, np.int64),
                                            (np.bool_, np.int32, np.int32), (np.float32, np.float64, np.float64),
                                            (np.uint8, np.int8, np.int16)])
def test_cat_promotes(device, da, db, expected):
    a = np.array([[1, 0]], dtype=da)
    b = np.array([[2, 3]], dtype=db)
    out = rc.cat([rc.tensor(a, device=device), rc.tensor(b, device=device)])
    assert_close(out, np.concatenate([a, b]).astype(expected))


def test_cat_errors(device):
    a = rc.zeros(2, 3, device=device)
    with pytest.raises(RuntimeError):
        rc.cat([])
    with pytest.raises(RuntimeError) as ei:
        rc.cat([a, rc.zeros(2, 4, device=device)], 0)
    assert "(2, 3)" in str(ei.value) and "(2, 4)" in str(ei.value)
    with pytest.raises(RuntimeError):
        rc.cat([a, rc.zeros(2, 3, 1, device=device)])
    with pytest.raises(RuntimeError):
        rc.cat([rc.tensor(1.0, device=device), rc.tensor(2.0, device=device)])
    with pytest.raises(IndexError):
        rc.cat([a, a], 2)
    with pytest.raises(TypeError):
        rc.cat([a, 1.0])


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(device, dim):
    parts = [np.arange(6.0).reshape(2, 3) + 10 * i for i in range(4)]
    ts = [rc.tensor(p, device=device) for p in parts]
    assert_close(rc.stack(ts, dim), np.stack(parts, dim))
    assert_close(rc.stack(tuple(t.t() for t in ts), dim), np.stack([p.T for p in parts], dim))
    s = [rc.tensor(float(i), dtype=rc.float64, device=device) for i in range(3)]
    if dim in (0, -1):
        assert_close(rc.stack(s, dim), np.arange(3.0))


def test_stack_hstack_vstack(device):
    p = [np.arange(3.0), np.arange(3.0) + 5]
    ts = [rc.tensor(x, device=device) for x in p]
    assert_close(rc.hstack(ts), np.hstack(p))
    assert_close(rc.vstack(ts), np.vstack(p))
    q = [np.ones((2, 2)), np.zeros((2, 3))]
    assert_close(rc.hstack([rc.tensor(x, device=device) for x in q]), np.hstack(q))


def test_stack_errors(device):
    with pytest.raises(RuntimeError):
        rc.stack([])
    with pytest.raises(RuntimeError) as ei:
        rc.stack([rc.zeros(2, 3, device=device), rc.zeros(3, 2, device=device)])
    assert "(2, 3)" in str(ei.value) and "(3, 2)" in str(ei.value)
    with pytest.raises(IndexError):
        rc.stack([rc.zeros(2, device=device)] * 2, 2)


# -- hypothesis: indexing vs NumPy ----------------------------------------------------------


@st.composite
def index_cases(draw, allow_bool=True):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    # the broadcast shape every int-array index in this key is drawn against
    ishape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    key = []
    d = 0
    used_bool = False
    used_ellipsis = False
    while d < ndim:
        choices = ["int", "slice", "array", "list", "none", "stop"]
        if allow_bool and not used_bool:
            choices.append("bool")
        if not used_ellipsis:
            choices.append("ellipsis")
        kind = draw(st.sampled_from(choices))
        n = shape[d]
        if kind == "stop":
            break
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
            d += 1
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            key.append(slice(start, stop, step))
            d += 1
        elif kind == "array":
            # a shape that broadcasts to ishape: a suffix, with some dims set to 1
            k = draw(st.integers(0, len(ishape)))
            s = tuple(draw(st.sampled_from([m, 1])) for m in ishape[len(ishape) - k:])
            key.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(s)),
                                              max_size=int(np.prod(s))))).reshape(s).astype(np.int64))
            d += 1
        elif kind == "list":
            m = ishape[-1] if ishape else 1
            key.append(draw(st.lists(st.integers(-n, n - 1), min_size=m, max_size=m)) if ishape else
                       [draw(st.integers(-n, n - 1))])
            d += 1
        elif kind == "bool":
            k = draw(st.integers(1, min(2, ndim - d)))
            mshape = shape[d:d + k]
            key.append(np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(mshape)),
                                              max_size=int(np.prod(mshape))))).reshape(mshape))
            used_bool = True
            d += k
        elif kind == "none":
            key.append(None)
        elif kind == "ellipsis":
            key.append(Ellipsis)
            used_ellipsis = True
            # the Ellipsis stands for some dims; jump over a random number of them
            d += draw(st.integers(0, ndim - d))
    return shape, tuple(key)


def _ref_or_error(a, key):
    try:
        return torch_index(a, key), None
    except IndexError as e:
        return None, e


@SETTINGS
@given(case=index_cases())
def test_getitem_matches_numpy(device, case):
    shape, key = case
    x, a = base(shape, device)
    ref, err = _ref_or_error(a, key)
    if err is not None:  # e.g. a bool mask's nonzero count doesn't broadcast with the others
        with pytest.raises(IndexError):
            x[to_rc_key(key, device)]
            raise_device_errors()
        return
    out = x[to_rc_key(key, device)]
    assert_close(out, ref)


@SETTINGS
@given(case=index_cases(), scalar=st.booleans(), kernel=st.sampled_from(["kernel", "composite"]))
def test_setitem_matches_numpy(device, case, scalar, kernel):
    shape, key = case
    x, a = base(shape, device)
    pos, err = _ref_or_error(np.arange(a.size).reshape(shape), key)
    if err is not None:
        return
    if pos.size != np.unique(pos).size:
        scalar = True  # repeated positions: only a single value is well defined
    value = -7.5 if scalar else -np.arange(1.0, pos.size + 1).reshape(pos.shape)
    torch_setitem(a, key, value)
    v = value if scalar else rc.tensor(value, device=device)
    with (without_kernel(device, "index_put") if kernel == "composite" else contextlib.nullcontext()):
        x[to_rc_key(key, device)] = v
    assert_close(x, a)


@SETTINGS
@given(case=index_cases(allow_bool=False))
def test_setitem_broadcast_value_matches_numpy(device, case):
    shape, key = case
    x, a = base(shape, device)
    pos, err = _ref_or_error(np.arange(a.size).reshape(shape), key)
    if err is not None or pos.ndim == 0 or pos.size != np.unique(pos).size:
        return
    # a value holding only the trailing dim of the result: broadcast over the rest
    value = np.arange(100.0, 100.0 + pos.shape[-1])
    torch_setitem(a, key, value)
    x[to_rc_key(key, device)] = rc.tensor(value, device=device)
    assert_close(x, a)


@SETTINGS
@given(data=st.data())
def test_gather_scatter_matches_reference(device, data):
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    dim = data.draw(st.integers(-ndim, ndim - 1))
    d = dim % ndim
    ishape = tuple(data.draw(st.integers(1, 5)) if i == d else data.draw(st.integers(1, shape[i]))
                   for i in range(ndim))
    n = int(np.prod(ishape))
    idx = np.array(data.draw(st.lists(st.integers(0, shape[d] - 1), min_size=n, max_size=n))).reshape(ishape)
    x, a = base(shape, device)
    src = np.arange(1000.0, 1000.0 + n).reshape(ishape)
    ti, ts = rc.tensor(idx, device=device), rc.tensor(src, device=device)
    assert_close(x.gather(dim, ti), ref_gather(a, d, idx))
    assert_close(x.scatter_add(dim, ti, ts), ref_scatter(a, d, idx, src, add=True))
    assert_close(x.scatter(dim, ti, value=2.0), ref_scatter(a, d, idx, 2.0))


def test_zero_dim_integer_indices_give_views(device):
    """x[np.int64(i)], x[np.array(i)] and x[tensor(i)] index like x[i]: a view."""
    x = rc.zeros(3, 2, device=device)
    for i in np.arange(3):
        x[i].add_(1)
        x[i][0] = 5
    x[rc.tensor(2, device=device)].fill_(9)
    x[np.array(1)][1] = 4
    assert_close(x, np.array([[5, 1], [5, 4], [9, 9]], np.float32))


def test_scatter_checks_src_against_index(device):
    with pytest.raises(RuntimeError, match=r"index \(5,\).*src \(2,\)"):
        rc.zeros(5, device=device).scatter_add_(0, rc.arange(5, device=device), rc.arange(10.0, device=device)[:2])
    with pytest.raises(RuntimeError, match="src"):
        rc.zeros(5, device=device).scatter(0, rc.arange(5, device=device), rc.ones(2, device=device))


def test_python_bool_keys_and_setitem_with_extra_leading_ones(device):
    x = rc.arange(6, device=device).reshape(3, 2)
    a = np.arange(6).reshape(3, 2)
    assert_close(x[True], a[True])
    assert_close(x[False], a[False])
    assert_close(x[0, True], a[0, True])
    y = rc.zeros(3, 4, device=device)
    y[0] = rc.ones(1, 4, device=device)  # PyTorch drops the value's leading 1s
    y[[1, 2]] = rc.full((1, 1, 4), 2.0, device=device)
    assert_close(y, np.array([[1] * 4, [2] * 4, [2] * 4], np.float32))
