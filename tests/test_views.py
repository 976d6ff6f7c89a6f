"""View ops against NumPy: values, and the layout PyTorch would report (shape,
strides in elements, storage offset, contiguity). Views share storage, so writes
through any view are seen by its base; ``reshape`` copies only when no view can
show the result. Hypothesis drives random chains of views and broadcasting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import rtxcore as rc
from rtxcore.testing import assert_close, to_numpy

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- helpers -----------------------------------------------------------------------


def base(shape, device, dtype=np.float64):
    """A tensor holding 0, 1, 2, ... (every element distinct) and its NumPy twin."""
    n = int(np.prod(shape)) if shape else 1
    arr = np.arange(n, dtype=dtype).reshape(shape)
    return rc.tensor(arr, device=device), arr


def np_strides(a: np.ndarray) -> tuple[int, ...]:
    return tuple(s // a.itemsize for s in a.strides)


def np_offset(view: np.ndarray, root: np.ndarray) -> int:
    """Element offset of ``view``'s first element inside ``root``'s buffer."""
    return (view.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // root.itemsize


def strides_match(t, a: np.ndarray) -> None:
    """Compare strides on the dims where they are meaningful (size > 1); for
    size-1 dims PyTorch and NumPy pick different (irrelevant) strides."""
    assert tuple(t.shape) == a.shape
    if a.size == 0:
        return
    for i, (n, s_t, s_a) in enumerate(zip(a.shape, t.stride(), np_strides(a))):
        if n > 1:
            assert s_t == s_a, f"dim {i}: stride {t.stride()} vs numpy {np_strides(a)} (shape {a.shape})"


def same_storage(view, root) -> bool:
    """Whether ``view`` shares ``root``'s memory, checked by writing through the view."""
    if view.numel() == 0:
        return True
    before = to_numpy(root)
    idx = (0,) * view.ndim
    old = view[idx].item() if view.ndim else view.item()
    view[idx] = old + 1000
    changed = not np.array_equal(to_numpy(root), before)
    view[idx] = old
    return changed


# -- Shape and metadata --------------------------------------------------------------


def test_shape_is_tuple_subclass(device):
    x = rc.zeros(2, 3, device=device)
    s = x.shape
    assert isinstance(s, tuple) and isinstance(s, rc.Shape)
    assert s == (2, 3) and tuple(s) == (2, 3)
    assert repr(s) == "rtxcore.Shape([2, 3])"
    assert repr(rc.zeros((), device=device).shape) == "rtxcore.Shape([])"
    assert x.size() == (2, 3) and x.size(1) == 3 and x.size(-2) == 2
    assert s.numel() == 6
    assert rc.Size is rc.Shape


@pytest.mark.parametrize("dtype,size", [(np.float32, 4), (np.float64, 8), (np.int64, 8),
                                        (np.int32, 4), (np.int16, 2), (np.uint8, 1),
                                        (np.bool_, 1)])
def test_element_size(device, dtype, size):
    if not rc.device(device).supports(rc.dtype._BY_NUMPY[np.dtype(dtype)]):
        pytest.skip("dtype not supported on this device")
    x = rc.tensor(np.zeros((2, 3), dtype=dtype), device=device)
    assert x.element_size() == size == np.dtype(dtype).itemsize
    assert x.dtype.itemsize == size


@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (2, 1, 4), (0, 3), (3, 0, 2)])
def test_metadata_contiguous(device, shape):
    x, a = base(shape, device)
    assert x.numel() == a.size
    assert x.dim() == x.ndim == a.ndim
    assert x.stride() == np_strides(a)
    assert x.storage_offset() == 0
    assert x.is_contiguous()
    if x.ndim:
        assert x.stride(-1) == np_strides(a)[-1]


def test_is_contiguous_and_contiguous(device):
    x, a = base((3, 4, 5), device)
    for v, av in [(x.transpose(0, 1), a.transpose(1, 0, 2)),
                  (x[:, ::2], a[:, ::2]),
                  (x.permute(2, 0, 1), a.transpose(2, 0, 1)),
                  (x[:, :, 1:3], a[:, :, 1:3])]:
        assert not v.is_contiguous()
        c = v.contiguous()
        assert c.is_contiguous()
        assert c.stride() == np_strides(np.ascontiguousarray(av))
        assert_close(c, av)
        assert not same_storage(c, x)
    # contiguous of a contiguous tensor is the tensor itself
    assert x.contiguous() is x
    # narrowing the leading dim keeps contiguity (offset only)
    v = x[1:]
    assert v.is_contiguous() and v.storage_offset() == 20
    # size-1 dims don't break contiguity, whatever their stride
    y = x[:, 1:2, :]
    assert not y.is_contiguous()
    z = x[1:2]
    assert z.is_contiguous()
    assert x.unsqueeze(1).is_contiguous()
    assert x.expand(2, 3, 4, 5).is_contiguous() is False


# -- view / reshape ------------------------------------------------------------------


@pytest.mark.parametrize("src,dst", [((2, 3, 4), (6, 4)), ((2, 3, 4), (24,)), ((2, 3, 4), (4, 3, 2)),
                                     ((6,), (1, 6, 1)), ((2, 3, 4), (2, -1)), ((2, 3, 4), (-1, 2, 2)),
                                     ((), (1,)), ((1,), ()), ((0, 4), (2, -1, 4)), ((0, 4), (4, 0))])
def test_view_contiguous(device, src, dst):
    x, a = base(src, device)
    v = x.view(dst)
    av = a.reshape(dst)
    assert_close(v, av)
    assert v.stride() == np_strides(av) or av.size == 0
    assert v.is_contiguous()
    v2 = x.view(*dst) if dst else x.view(())
    assert v2.shape == av.shape
    if v.numel():
        assert same_storage(v, x)


def test_view_of_noncontiguous_when_strides_allow(device):
    x, a = base((4, 6, 5), device)
    # splitting / merging within a contiguous chunk works on a permuted tensor
    v = x.permute(2, 0, 1)  # (5, 4, 6), strides (1, 30, 5): dims 1, 2 form one chunk
    w = v.view(5, 24)
    aw = a.transpose(2, 0, 1).reshape(5, 24)
    assert np.shares_memory(aw, a)
    assert_close(w, aw)
    assert w.stride() == np_strides(aw) == (1, 5)
    assert same_storage(w, x)
    s = x[:, ::2]  # (4, 3, 5) strides (30, 10, 1)
    w = s.view(4, 3, 5, 1).view(12, 5)
    assert_close(w, a[:, ::2].reshape(12, 5))
    assert w.stride() == (10, 1)
    assert same_storage(w, x)
    u = x.transpose(0, 2).view(5, 6, 2, 2)  # splits a dim of stride 30
    assert u.stride() == (1, 5, 60, 30)
    assert_close(u, a.transpose(2, 1, 0).reshape(5, 6, 2, 2))


@pytest.mark.parametrize("make,shape", [(lambda x: x.t(), (12,)), (lambda x: x[:, :2], (6,)),
                                        (lambda x: x.t(), (2, 6))])
def test_view_impossible_raises(device, make, shape):
    x, _ = base((3, 4), device)
    v = make(x)
    with pytest.raises(RuntimeError, match="reshape"):
        v.view(shape)
    # and reshape does it with a copy
    r = v.reshape(shape)
    assert_close(r, to_numpy(v).reshape(shape))
    assert r.is_contiguous()


def test_view_expanded_impossible(device):
    x, _ = base((3, 1), device)
    e = x.expand(3, 4)
    with pytest.raises(RuntimeError, match="reshape"):
        e.view(12)
    assert_close(e.reshape(12), np.repeat(np.arange(3.0), 4))


def test_reshape_views_when_possible(device):
    x, a = base((4, 6), device)
    r = x.reshape(2, 2, 6)
    assert same_storage(r, x)
    r[1, 0, 3] = -7.0
    a[2, 3] = -7.0
    assert_close(x, a)
    # a permuted tensor can be split without a copy
    p = x.t().reshape(3, 2, 4)
    assert same_storage(p, x)
    assert_close(p, a.T.reshape(3, 2, 4))
    # a sliced tensor whose rows stay whole: merge needs a copy, split doesn't
    s = x[::2]
    assert same_storage(s.reshape(2, 2, 3), x)
    m = s.reshape(12)
    assert not same_storage(m, x)
    assert_close(m, a[::2].reshape(12))
    m[0] = 99.0  # writes to the copy don't reach the base
    assert_close(x, a)


def test_reshape_copy_when_needed(device):
    x, a = base((3, 4), device)
    r = x.t().reshape(-1)
    assert_close(r, a.T.reshape(-1))
    assert not same_storage(r, x)
    assert r.is_contiguous() and r.stride() == (1,)


@pytest.mark.parametrize("src,dst", [((2, 3, 4), (-1,)), ((2, 3, 4), (3, -1)), ((2, 3, 4), (-1, 3, 2)),
                                     ((2, 3, 4), (2, 1, -1, 1)), ((5,), (-1, 1)), ((0, 3), (-1, 3)),
                                     ((0, 3), (3, -1))])
def test_reshape_infers_minus_one(device, src, dst):
    x, a = base(src, device)
    assert_close(x.reshape(dst), a.reshape(dst))
    assert_close(rc.reshape(x, dst), a.reshape(dst))
    assert_close(x.view(dst), a.reshape(dst))


@pytest.mark.parametrize("op", ["view", "reshape"])
@pytest.mark.parametrize("dst", [(-1, -1), (5, 5), (7,), (5, -1), (0, -1), (2, -1, -1)])
def test_reshape_bad_target_names_both_shapes(device, op, dst):
    x, _ = base((2, 3, 4), device)
    with pytest.raises(RuntimeError) as ei:
        getattr(x, op)(dst)
    msg = str(ei.value)
    assert str((2, 3, 4)) in msg or "24" in msg
    assert str(dst) in msg


def test_reshape_wrong_count_message(device):
    x, _ = base((2, 3), device)
    with pytest.raises(RuntimeError) as ei:
        x.reshape(4, 2)
    assert "(2, 3)" in str(ei.value) and "(4, 2)" in str(ei.value)
    with pytest.raises(RuntimeError) as ei:
        x.reshape(-1, -1)
    assert "(2, 3)" in str(ei.value) and "(-1, -1)" in str(ei.value)


def test_view_as_reshape_as_flatten_ravel(device):
    x, a = base((2, 3, 4), device)
    other = rc.zeros(6, 4, device=device)
    assert_close(x.view_as(other), a.reshape(6, 4))
    assert_close(x.transpose(0, 2).reshape_as(other), a.transpose(2, 1, 0).reshape(6, 4))
    assert_close(x.flatten(), a.reshape(-1))
    assert_close(x.flatten(1), a.reshape(2, 12))
    assert_close(x.flatten(0, 1), a.reshape(6, 4))
    assert_close(x.flatten(-2, -1), a.reshape(2, 12))
    assert_close(x.flatten(1, 1), a)
    assert_close(rc.flatten(x.transpose(0, 1)), a.transpose(1, 0, 2).reshape(-1))
    assert_close(x.ravel(), a.ravel())
    s, sa = base((), device)
    assert_close(s.flatten(), sa.reshape(1))
    assert same_storage(x.flatten(), x)
    with pytest.raises(RuntimeError):
        x.flatten(2, 0)


def test_unflatten(device):
    x, a = base((2, 12, 3), device)
    assert_close(x.unflatten(1, (3, 4)), a.reshape(2, 3, 4, 3))
    assert_close(x.unflatten(1, (-1, 2)), a.reshape(2, 6, 2, 3))
    assert_close(x.unflatten(-1, (3, 1)), a.reshape(2, 12, 3, 1))
    assert same_storage(x.unflatten(1, (3, 4)), x)
    with pytest.raises(RuntimeError):
        x.unflatten(1, (5, 2))


# -- permute / transpose / t / T / mT -------------------------------------------------


@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (1, 2, 0), (2, 0, 1), (-1, 0, -2)])
def test_permute(device, perm):
    x, a = base((2, 3, 4), device)
    p = x.permute(perm)
    ap = np.transpose(a, perm)
    assert_close(p, ap)
    assert p.stride() == np_strides(ap)
    assert p.storage_offset() == 0
    assert_close(x.permute(*perm), ap)
    assert_close(rc.permute(x, perm), ap)
    assert same_storage(p, x)


def test_permute_errors(device):
    x, _ = base((2, 3, 4), device)
    with pytest.raises(RuntimeError):
        x.permute(0, 1)
    with pytest.raises(RuntimeError):
        x.permute(0, 1, 1)
    with pytest.raises(IndexError):
        x.permute(0, 1, 3)


@pytest.mark.parametrize("d0,d1", [(0, 1), (1, 0), (0, 2), (-1, -2), (1, 1), (2, -3)])
def test_transpose(device, d0, d1):
    x, a = base((2, 3, 4), device)
    t = x.transpose(d0, d1)
    at = np.swapaxes(a, d0, d1)
    assert_close(t, at)
    assert t.stride() == np_strides(at)
    assert_close(rc.transpose(x, d0, d1), at)
    assert_close(x.swapaxes(d0, d1), at)
    assert_close(x.swapdims(d0, d1), at)
    assert same_storage(t, x)


def test_t_T_mT(device):
    m, am = base((3, 4), device)
    assert_close(m.t(), am.T)
    assert m.t().stride() == np_strides(am.T)
    assert_close(rc.t(m), am.T)
    v, av = base((5,), device)
    assert_close(v.t(), av)
    s, as_ = base((), device)
    assert_close(s.t(), as_)
    with pytest.raises(RuntimeError):
        base((2, 3, 4), device)[0].t()
    x, a = base((2, 3, 4), device)
    assert_close(x.T, a.T)
    assert x.T.stride() == np_strides(a.T)
    assert_close(m.T, am.T)
    assert_close(x.mT, np.swapaxes(a, -1, -2))
    assert x.mT.stride() == np_strides(np.swapaxes(a, -1, -2))
    assert_close(m.mT, am.T)
    with pytest.raises(RuntimeError):
        v.mT
    assert same_storage(x.T, x) and same_storage(x.mT, x) and same_storage(m.t(), m)


@pytest.mark.parametrize("src,dst", [(0, 2), (2, 0), (-1, 0), ((0, 1), (2, 0)), ([0, 2], [1, 0]),
                                     ((0, 1, 2), (2, 1, 0))])
def test_movedim(device, src, dst):
    x, a = base((2, 3, 4), device)
    m = x.movedim(src, dst)
    am = np.moveaxis(a, src, dst)
    assert_close(m, am)
    assert m.stride() == np_strides(am)
    assert_close(rc.movedim(x, src, dst), am)
    assert_close(rc.moveaxis(x, src, dst), am)
    assert same_storage(m, x)


# -- expand ----------------------------------------------------------------------------


@pytest.mark.parametrize("src,dst", [((3, 1), (3, 4)), ((1,), (5,)), ((3, 1), (2, 3, 4)),
                                     ((3, 1), (-1, 4)), ((1, 3, 1), (2, -1, 5)), ((), (2, 3)),
                                     ((2, 3), (2, 3)), ((1, 3), (0, 3)), ((3, 1), (1, 2, 3, 1))])
def test_expand(device, src, dst):
    x, a = base(src, device)
    e = x.expand(dst)
    target = tuple(s if d == -1 else d for s, d in zip((1,) * (len(dst) - len(src)) + src, dst))
    ae = np.broadcast_to(a, target)
    assert_close(e, ae)
    strides_match(e, ae)
    assert_close(x.expand(*dst) if dst else x.expand(()), ae)
    assert_close(rc.broadcast_to(x, target), ae)
    assert_close(x.expand_as(rc.zeros(target, device=device)), ae)
    if e.numel():
        assert same_storage(e, x)


@pytest.mark.parametrize("src,dst", [((3, 2), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)),
                                     ((3, 1), (-1, 3, 4))])
def test_expand_errors(device, src, dst):
    x, _ = base(src, device)
    with pytest.raises(RuntimeError):
        x.expand(dst)


def test_expanded_write_reaches_base(device):
    x, a = base((3, 1), device)
    e = x.expand(3, 4)
    e[1, 2] = 50.0
    a[1, 0] = 50.0
    assert_close(x, a)
    assert_close(e, np.broadcast_to(a, (3, 4)))


# -- squeeze / unsqueeze ---------------------------------------------------------------


@pytest.mark.parametrize("dim", [None, 0, 2, -1, 1, (0, 2), (0, 1, 3)])
def test_squeeze(device, dim):
    x, a = base((1, 3, 1, 1), device)
    s = x.squeeze() if dim is None else x.squeeze(dim)
    if dim is None:
        as_ = np.squeeze(a)
    else:
        dims = (dim,) if isinstance(dim, int) else dim
        dims = tuple(d % 4 for d in dims if a.shape[d] == 1)  # PyTorch: non-1 dims are left alone
        as_ = np.squeeze(a, dims)
    assert_close(s, as_)
    strides_match(s, as_)
    assert_close(rc.squeeze(x, dim) if dim is not None else rc.squeeze(x), as_)
    assert same_storage(s, x)


def test_squeeze_edge(device):
    s, sa = base((), device)
    assert_close(s.squeeze(), sa)
    assert_close(s.squeeze(0), sa)
    assert_close(s.squeeze(-1), sa)
    x, a = base((2, 3), device)
    assert_close(x.squeeze(0), a)  # size 2: unchanged, as in PyTorch
    with pytest.raises(IndexError):
        x.squeeze(2)


@pytest.mark.parametrize("dim", [0, 1, 2, 3, -1, -2, -4])
def test_unsqueeze(device, dim):
    x, a = base((2, 1, 4), device)
    u = x.unsqueeze(dim)
    au = np.expand_dims(a, dim)
    assert_close(u, au)
    strides_match(u, au)
    # PyTorch: the new dim's stride is stride[d] * size[d], or 1 at the end
    d = dim % 4
    expected = x.stride(d) * x.shape[d] if d < 3 else 1
    assert u.stride(d) == expected
    assert u.is_contiguous()
    assert_close(rc.unsqueeze(x, dim), au)
    assert same_storage(u, x)
    with pytest.raises(IndexError):
        x.unsqueeze(4)
    with pytest.raises(IndexError):
        x.unsqueeze(-5)


def test_unsqueeze_scalar(device):
    s, sa = base((), device)
    assert_close(s.unsqueeze(0), sa.reshape(1))
    assert_close(s.unsqueeze(-1), sa.reshape(1))
    assert s.unsqueeze(0).stride() == (1,)


# -- narrow / split / chunk / unbind / diagonal ---------------------------------------


@pytest.mark.parametrize("dim,start,length", [(0, 0, 2), (0, 1, 3), (1, 2, 3), (-1, 0, 0), (1, -3, 2),
                                              (2, 3, 1)])
def test_narrow(device, dim, start, length):
    x, a = base((4, 5, 4), device)
    n = x.narrow(dim, start, length)
    d = dim % 3
    st = start % a.shape[d]
    key = [slice(None)] * 3
    key[d] = slice(st, st + length)
    an = a[tuple(key)]
    assert_close(n, an)
    assert n.stride() == np_strides(an) or an.size == 0
    if an.size:
        assert n.storage_offset() == np_offset(an, a)
        assert same_storage(n, x)
    assert_close(rc.narrow(x, dim, start, length), an)


def test_narrow_errors(device):
    x, _ = base((4, 5), device)
    with pytest.raises((IndexError, RuntimeError)):
        x.narrow(0, 2, 3)
    with pytest.raises((IndexError, RuntimeError)):
        x.narrow(1, 6, 0)
    with pytest.raises(IndexError):
        x.narrow(2, 0, 1)


@pytest.mark.parametrize("size,dim", [(2, 0), (3, 1), (1, 1), (7, 0), (5, 1), (4, -1)])
def test_split_int(device, size, dim):
    x, a = base((7, 5), device)
    parts = x.split(size, dim)
    d = dim % 2
    n = a.shape[d]
    bounds = list(range(size, n, size))
    ref = np.split(a, bounds, axis=d)
    assert len(parts) == len(ref)
    for p, r in zip(parts, ref):
        assert_close(p, r)
        assert p.stride() == np_strides(r) or r.size == 0
        assert p.storage_offset() == np_offset(r, a)
        assert same_storage(p, x)
    assert len(rc.split(x, size, dim)) == len(ref)


@pytest.mark.parametrize("sizes,dim", [([2, 5], 0), ([1, 1, 3], 1), ([0, 7], 0), ([7], 0)])
def test_split_sections(device, sizes, dim):
    x, a = base((7, 5), device)
    parts = x.split(sizes, dim)
    ref = np.split(a, np.cumsum(sizes)[:-1], axis=dim)
    assert len(parts) == len(ref)
    for p, r in zip(parts, ref):
        assert_close(p, r)
    with pytest.raises(RuntimeError):
        x.split([2, 2], 0)
    with pytest.raises(RuntimeError):
        x.split(0, 0)


@pytest.mark.parametrize("n,chunks,dim", [(6, 3, 0), (7, 3, 0), (5, 2, 1), (3, 5, 0), (5, 5, 1), (4, 1, 0)])
def test_chunk(device, n, chunks, dim):
    shape = (n, 5) if dim == 0 else (4, n)
    x, a = base(shape, device)
    parts = x.chunk(chunks, dim)
    # PyTorch: chunks of ceil(n / chunks), the last one smaller, maybe fewer chunks
    step = -(-a.shape[dim] // chunks)
    ref = np.split(a, list(range(step, a.shape[dim], step)), axis=dim)
    assert len(parts) == len(ref) <= chunks
    for p, r in zip(parts, ref):
        assert_close(p, r)
        assert same_storage(p, x)
    assert len(rc.chunk(x, chunks, dim)) == len(ref)
    with pytest.raises(RuntimeError):
        x.chunk(0)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_unbind(device, dim):
    x, a = base((2, 3, 4), device)
    parts = x.unbind(dim)
    assert len(parts) == a.shape[dim]
    for i, p in enumerate(parts):
        r = np.moveaxis(a, dim, 0)[i]
        assert_close(p, r)
        assert p.stride() == np_strides(r)
        assert p.storage_offset() == np_offset(r, a)
        assert same_storage(p, x)
    assert len(rc.unbind(x, dim)) == a.shape[dim]
    assert [tuple(p.shape) for p in x] == [a[i].shape for i in range(2)]


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
@pytest.mark.parametrize("offset", [0, 1, 2, -1, -2, 4, -5])
def test_diagonal_2d(device, shape, offset):
    x, a = base(shape, device)
    d = x.diagonal(offset)
    ad = np.diagonal(a, offset)
    assert_close(d, ad)
    if ad.size > 1:
        assert d.stride() == (shape[1] + 1,)
    if ad.size:
        assert d.storage_offset() == int(ad[0])  # base holds 0, 1, 2, ...: value == offset
        assert same_storage(d, x)
    assert_close(rc.diagonal(x, offset), ad)


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 2), (-1, 1, 2), (0, 2, 0), (2, -1, -3),
                                          (-1, 2, 1)])
def test_diagonal_dims(device, offset, d1, d2):
    x, a = base((3, 4, 5), device)
    d = x.diagonal(offset, d1, d2)
    ad = np.diagonal(a, offset, d1, d2)
    assert_close(d, ad)
    strides_match(d, ad)
    if ad.size:
        assert d.storage_offset() == np_offset(ad, a)
        assert same_storage(d, x)
    assert_close(rc.diagonal(x, offset=offset, dim1=d1, dim2=d2), ad)


def test_diagonal_errors(device):
    x, _ = base((3,), device)
    with pytest.raises(RuntimeError):
        x.diagonal()
    y, _ = base((3, 3), device)
    with pytest.raises(RuntimeError):
        y.diagonal(0, 1, 1)


# -- slicing ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", [
    (slice(None, None, 2),), (slice(1, None, 3), slice(None, None, 2)),
    (slice(-3, None), slice(1, -1, 2)), (slice(2, 1),), (slice(None), slice(5, 100)),
    (Ellipsis, slice(None, None, 4)), (slice(1, 4, 2), None, slice(0, 5, 3)),
    (None, Ellipsis, None), (slice(100, None),),
])
def test_slicing_steps(device, key):
    x, a = base((5, 6), device)
    v = x[key]
    av = a[key]
    assert_close(v, av)
    strides_match(v, av)
    if av.size:
        assert v.storage_offset() == np_offset(av, a)
        assert same_storage(v, x)


def test_slice_of_slice(device):
    x, a = base((10, 8), device)
    v = x[1::2][1:, ::3][::2]
    av = a[1::2][1:, ::3][::2]
    assert_close(v, av)
    assert v.stride() == np_strides(av)
    assert v.storage_offset() == np_offset(av, a)


def test_negative_step_rejected(device):
    x, _ = base((5,), device)
    with pytest.raises(ValueError):
        x[::-1]
    with pytest.raises(ValueError):
        x[::0]


# -- writes through views ------------------------------------------------------------


VIEW_MAKERS = {  # name: (rtxcore view, the same view in NumPy)
    "view": (lambda t: t.view(4, 6), lambda a: a.reshape(4, 6)),
    "reshape": (lambda t: t.reshape(6, 4), lambda a: a.reshape(6, 4)),
    "permute": (lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    "transpose": (lambda t: t.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    "T": (lambda t: t.T, lambda a: a.T),
    "mT": (lambda t: t.mT, lambda a: a.swapaxes(-1, -2)),
    "unsqueeze": (lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    "squeeze": (lambda t: t[:, :1].squeeze(1), lambda a: a[:, 0]),
    "flatten": (lambda t: t.flatten(), lambda a: a.reshape(-1)),
    "unflatten": (lambda t: t.unflatten(2, (2, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    "narrow": (lambda t: t.narrow(1, 1, 2), lambda a: a[:, 1:3]),
    "split": (lambda t: t.split(2, 1)[1], lambda a: a[:, 2:]),
    "chunk": (lambda t: t.chunk(2, 2)[1], lambda a: a[:, :, 2:]),
    "unbind": (lambda t: t.unbind(1)[2], lambda a: a[:, 2]),
    "diagonal": (lambda t: t.diagonal(1, 1, 2), lambda a: np.diagonal(a, 1, 1, 2)),
    "movedim": (lambda t: t.movedim(0, 2), lambda a: np.moveaxis(a, 0, 2)),
    "slice": (lambda t: t[1:, ::2, 1::2], lambda a: a[1:, ::2, 1::2]),
    "select": (lambda t: t[1], lambda a: a[1]),
    "none_ellipsis": (lambda t: t[None, ..., 2], lambda a: a[None, ..., 2]),
    "expand": (lambda t: t[:, :, :1].expand(2, 3, 5),
               lambda a: np.broadcast_to(a[:, :, :1], (2, 3, 5))),
    "detach": (lambda t: t.detach(), lambda a: a),
    "chain": (lambda t: t.transpose(0, 1)[::2].reshape(2, 2, 4).permute(2, 1, 0)[1:],
              lambda a: a.swapaxes(0, 1)[::2].reshape(2, 2, 4).transpose(2, 1, 0)[1:]),
}


@pytest.mark.parametrize("name", list(VIEW_MAKERS))
def test_writes_through_view_reach_base(device, name):
    make, make_np = VIEW_MAKERS[name]
    x, a = base((2, 3, 4), device)
    v = make(x)
    pos = make_np(np.arange(24).reshape(2, 3, 4))  # which base element each view element is
    assert_close(v, make_np(a))
    # 1) __setitem__ on the view
    first = (0,) * v.ndim
    v[first] = -1.0
    a.reshape(-1)[pos[first]] = -1.0
    assert_close(x, a)
    # 2) an in-place op on the view moves every element it shows, and nothing else
    if name != "expand":  # (PyTorch refuses in-place ops on overlapping views)
        v.mul_(2.0)
        a.reshape(-1)[pos.reshape(-1)] *= 2.0
        assert_close(x, a)
    # 3) writes to the base show in the view
    x.fill_(3.0)
    assert_close(v, np.full(pos.shape, 3.0))
    x[1] = 7.0
    a[...] = 3.0
    a[1] = 7.0
    assert_close(v, make_np(a))


# -- hypothesis: random chains of views ---------------------------------------------------


@st.composite
def view_chains(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    steps = []
    cur = list(shape)
    for _ in range(draw(st.integers(1, 6))):
        kinds = ["permute", "slice", "expand", "reshape", "transpose", "unsqueeze", "squeeze"]
        if len(cur) >= 5:
            kinds.remove("unsqueeze")
            kinds.remove("expand")
        kind = draw(st.sampled_from(kinds))
        n = len(cur)
        if kind == "permute":
            perm = draw(st.permutations(range(n)))
            steps.append(("permute", tuple(perm)))
            cur = [cur[p] for p in perm]
        elif kind == "transpose":
            if n == 0:
                continue
            d0, d1 = draw(st.integers(-n, n - 1)), draw(st.integers(-n, n - 1))
            steps.append(("transpose", (d0, d1)))
            cur[d0], cur[d1] = cur[d1], cur[d0]
        elif kind == "slice":
            key = []
            new = []
            for s in cur:
                start = draw(st.integers(-s - 1, s + 1))
                stop = draw(st.one_of(st.none(), st.integers(-s - 1, s + 1)))
                step = draw(st.integers(1, 3))
                key.append(slice(start, stop, step))
                new.append(len(range(*slice(start, stop, step).indices(s))))
            steps.append(("slice", tuple(key)))
            cur = new
        elif kind == "expand":
            lead = draw(st.integers(0, 1))
            target = [draw(st.integers(1, 3))] * lead
            for s in cur:
                if s == 1:
                    target.append(draw(st.sampled_from([1, 2, 3, -1])))
                else:
                    target.append(draw(st.sampled_from([s, -1])))
            steps.append(("expand", tuple(target)))
            cur = [c for c in target[:lead]] + [s if t == -1 else t for s, t in zip(cur, target[lead:])]
        elif kind == "reshape":
            total = int(np.prod(cur)) if cur else 1
            if total == 0:
                continue
            # a random factorisation of the element count, maybe with a -1
            factors = []
            rest = total
            for p in (2, 3, 5, 7):
                while rest % p == 0:
                    factors.append(p)
                    rest //= p
            factors.append(rest) if rest > 1 else None
            factors = draw(st.permutations(factors)) if factors else []
            new = []
            for f in factors:
                if new and draw(st.booleans()):
                    new[-1] *= f
                else:
                    new.append(f)
            for _ in range(draw(st.integers(0, 1))):
                new.insert(draw(st.integers(0, len(new))), 1)
            tgt = list(new)
            if tgt and draw(st.booleans()):
                tgt[draw(st.integers(0, len(tgt) - 1))] = -1
            steps.append(("reshape", tuple(tgt)))
            cur = new
        elif kind == "unsqueeze":
            d = draw(st.integers(-n - 1, n))
            steps.append(("unsqueeze", d))
            cur.insert(d % (n + 1), 1)
        elif kind == "squeeze":
            if n == 0:
                continue
            d = draw(st.integers(-n, n - 1))
            steps.append(("squeeze", d))
            if cur[d] == 1:
                cur.pop(d)
    return shape, steps


def apply_np(a, step):
    kind, arg = step
    if kind == "permute":
        return np.transpose(a, arg)
    if kind == "transpose":
        return np.swapaxes(a, *arg)
    if kind == "slice":
        return a[arg + (Ellipsis,)]  # (a 0-d array's a[()] would be a scalar, not a view)
    if kind == "expand":
        lead = len(arg) - a.ndim
        tgt = tuple(arg[:lead]) + tuple(s if t == -1 else t for s, t in zip(a.shape, arg[lead:]))
        return np.broadcast_to(a, tgt)
    if kind == "reshape":
        return a.reshape(arg)
    if kind == "unsqueeze":
        return np.expand_dims(a, arg)
    if kind == "squeeze":
        return np.squeeze(a, arg) if a.shape[arg] == 1 else a
    raise AssertionError(kind)


def apply_rc(t, step):
    kind, arg = step
    if kind == "permute":
        return t.permute(*arg)
    if kind == "transpose":
        return t.transpose(*arg)
    if kind == "slice":
        return t[arg]
    if kind == "expand":
        return t.expand(*arg)
    if kind == "reshape":
        return t.reshape(arg)
    if kind == "unsqueeze":
        return t.unsqueeze(arg)
    if kind == "squeeze":
        return t.squeeze(arg)
    raise AssertionError(kind)


@SETTINGS
@given(chain=view_chains())
def test_view_chain_matches_numpy(device, chain):
    shape, steps = chain
    x, a = base(shape, device)
    t, v = x, a
    for step in steps:
        if step[0] == "reshape" and v.size:
            # view() works exactly when NumPy can reshape without a copy
            nv = apply_np(v, step)
            if np.shares_memory(nv, v):
                assert_close(t.view(step[1]), nv)
            else:
                with pytest.raises(RuntimeError, match="reshape"):
                    t.view(step[1])
        t = apply_rc(t, step)
        v = apply_np(v, step)
        assert tuple(t.shape) == v.shape, step
        assert_close(t, v)
        if np.shares_memory(v, a) and v.size:
            # both are views over the base: same layout, same first element
            strides_match(t, v)
            assert t.storage_offset() == np_offset(v, a), step
        assert t.is_contiguous() == (v.size == 0 or v.flags.c_contiguous), step
    assert t.numel() == v.size and t.dim() == v.ndim


@SETTINGS
@given(chain=view_chains())
def test_view_chain_write_through(device, chain):
    """After a chain of views, a write through the result reaches the base exactly
    where NumPy's view of the same chain points (when NumPy made no copy)."""
    shape, steps = chain
    x, a = base(shape, device)
    a_before = a.copy()
    t, v = x, a
    for step in steps:
        t = apply_rc(t, step)
        v = apply_np(v, step)
    if v.size == 0 or not np.shares_memory(v, a):
        return
    idx = tuple(np.random.default_rng(len(steps)).integers(0, n) for n in v.shape)
    t[idx] = -5.0
    w = a_before.copy()
    pos = np_offset(v[idx + (Ellipsis,)], a)
    w.reshape(-1)[pos] = -5.0
    assert_close(x, w)


# -- hypothesis: broadcasting -----------------------------------------------------------


@st.composite
def shape_pairs(draw):
    n = draw(st.integers(0, 4))
    full = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))

    def variant():
        k = draw(st.integers(0, n))
        out = []
        for s in full[n - k:]:
            out.append(draw(st.sampled_from([s, 1, s, draw(st.integers(0, 4))])))
        return tuple(out)

    return variant(), variant()


@SETTINGS
@given(shapes=shape_pairs(), op=st.sampled_from(["add", "mul", "sub", "maximum", "eq"]))
def test_broadcasting_matches_numpy(device, shapes, op):
    sa, sb = shapes
    a = np.arange(int(np.prod(sa)), dtype=np.float64).reshape(sa) + 1
    b = np.arange(int(np.prod(sb)), dtype=np.float64).reshape(sb) * 2 - 3
    ta, tb = rc.tensor(a, device=device), rc.tensor(b, device=device)
    np_fn = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "maximum": np.maximum,
             "eq": np.equal}[op]
    rc_fn = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "sub": lambda x, y: x - y,
             "maximum": rc.maximum, "eq": lambda x, y: x == y}[op]
    try:
        expected = np_fn(a, b)
    except ValueError:
        with pytest.raises(RuntimeError) as ei:
            rc_fn(ta, tb)
        msg = str(ei.value)
        assert str(sa) in msg and str(sb) in msg, msg
        with pytest.raises(RuntimeError):
            rc.broadcast_shapes(sa, sb)
        return
    assert_close(rc_fn(ta, tb), expected)
    assert rc.broadcast_shapes(sa, sb) == np.broadcast_shapes(sa, sb)
    # the same with non-contiguous operands (a transposed copy, transposed back)
    na = rc.tensor(np.array(a.T, order="C"), device=device).permute(*reversed(range(a.ndim)))
    nb = rc.tensor(np.array(b.T, order="C"), device=device).permute(*reversed(range(b.ndim)))
    assert_close(rc_fn(na, nb), expected)


@SETTINGS
@given(shapes=shape_pairs())
def test_inplace_broadcast(device, shapes):
    sa, sb = shapes
    a = np.arange(int(np.prod(sa)), dtype=np.float64).reshape(sa)
    b = np.arange(int(np.prod(sb)), dtype=np.float64).reshape(sb) + 0.5
    ta, tb = rc.tensor(a, device=device), rc.tensor(b, device=device)
    try:
        out = np.broadcast_shapes(sa, sb)
    except ValueError:
        out = None
    if out != sa:
        with pytest.raises(RuntimeError):
            ta.add_(tb)
        assert_close(ta, a)
        return
    ta.add_(tb)
    assert_close(ta, a + b)


@pytest.mark.parametrize("make,make_np", [
    (lambda t: t.unbind(1)[2], lambda a: a[:, 2]), (lambda t: t.narrow(1, 2, 1), lambda a: a[:, 2:3]),
    (lambda t: t[:, 2], lambda a: a[:, 2]), (lambda t: t.split(1, 1)[2], lambda a: a[:, 2:]),
    (lambda t: t[:, 1:], lambda a: a[:, 1:]), (lambda t: t.t()[1:], lambda a: a.T[1:]),
    (lambda t: t.t().diagonal(1), lambda a: np.diagonal(a.T, 1)),
])
def test_empty_views_with_offset_usable(device, make, make_np):
    """An empty view's storage offset may lie past its (empty) storage, as in
    PyTorch; ops on it must still work."""
    x = rc.zeros(0, 3, dtype=rc.float64, device=device)
    v = make(x)
    a = make_np(np.zeros((0, 3)))
    assert v.shape == a.shape
    assert_close(v + 1, a + 1)
    assert_close(v.clone(), a)
    assert_close(v.sum(), np.float64(0.0))
    assert_close(v.expand(2, *v.shape), np.broadcast_to(a, (2, *a.shape)))
