"""matmul / @ in every case PyTorch defines, its relatives (mm, bmm, mv, dot,
outer) and einsum, against np.matmul / np.einsum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import rtxcore as rc
from rtxcore.testing import assert_close

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def rand(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed + len(shape) * 31 + sum(shape))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def T(a, device):
    return rc.tensor(a, device=device)


MATMUL_SHAPES = [
    ((4,), (4,)),                    # 1-D . 1-D -> 0-d
    ((3, 4), (4,)),                  # 2-D . 1-D -> (3,)
    ((4,), (4, 5)),                  # 1-D . 2-D -> (5,)
    ((3, 4), (4, 5)),                # 2-D . 2-D
    ((1, 1), (1, 1)),
    ((2, 3, 4), (2, 4, 5)),          # batched
    ((2, 3, 4), (4, 5)),             # batched . matrix (broadcast): one 2-D product
    ((3, 1, 2, 4), (4, 5)),          # ... over merged rows, a size-1 dim among them
    ((3, 4), (2, 4, 5)),             # matrix . batched
    ((2, 1, 3, 4), (5, 4, 2)),       # batch dims broadcast: (2, 5)
    ((1, 3, 4), (6, 4, 2)),
    ((2, 3, 4), (4,)),               # batched . 1-D
    ((4,), (2, 3, 4, 5)),            # 1-D . batched
    ((7, 2, 3, 4), (7, 1, 4, 3)),
    ((0, 4), (4, 3)),                # empty
    ((3, 0), (0, 2)),                # empty inner dim: zeros
    ((2, 0, 3), (3, 4)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul(device, sa, sb, dtype):
    a, b = rand(sa, dtype, 1), rand(sb, dtype, 2)
    ta, tb = T(a, device), T(b, device)
    expected = np.matmul(a, b)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {}
    assert_close(rc.matmul(ta, tb), expected, **tol)
    assert_close(ta @ tb, expected, **tol)
    assert_close(ta.matmul(tb), expected, **tol)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4, 3)), ((3, 4), (4,))])
def test_matmul_noncontiguous(device, sa, sb):
    a, b = rand(sa, seed=3), rand(sb, seed=4)
    # operands stored transposed (and one with a step) and viewed back
    ta = T(np.ascontiguousarray(np.swapaxes(a, -1, 0)), device).transpose(-1, 0)
    tb = T(np.repeat(b, 2, axis=-1), device)[..., ::2]
    assert not tb.is_contiguous()
    assert_close(ta @ tb, np.matmul(a, b))
    # an expanded (stride-0) operand
    e = T(a[..., :1, :], device).expand(*a.shape) if a.ndim >= 2 else T(a, device)
    ae = np.broadcast_to(a[..., :1, :], a.shape) if a.ndim >= 2 else a
    assert_close(e @ tb, np.matmul(ae, b))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.uint8])
def test_matmul_int(device, dtype):
    if not rc.device(device).supports(rc.dtype._BY_NUMPY[np.dtype(dtype)]):
        pytest.skip("dtype not supported on this device")
    for sa, sb in [((3, 4), (4, 2)), ((2, 3, 4), (4,)), ((4,), (4,)), ((2, 1, 2, 3), (4, 3, 2))]:
        a = np.abs(rand(sa, dtype, 5)) if dtype == np.uint8 else rand(sa, dtype, 5)
        b = np.abs(rand(sb, dtype, 6)) if dtype == np.uint8 else rand(sb, dtype, 6)
        out = T(a, device) @ T(b, device)
        assert_close(out, np.matmul(a, b))


def test_matmul_promotes(device):
    a = rand((3, 4), np.int64, 7)
    b = rand((4, 2), np.float32, 8)
    out = T(a, device) @ T(b, device)
    assert out.dtype == rc.float32
    assert_close(out, np.matmul(a.astype(np.float32), b), rtol=1e-5, atol=1e-5)
    c = rand((4, 2), np.float64, 9)
    assert_close(T(b.T.copy(), device) @ T(c, device), np.matmul(b.T.astype(np.float64), c))


@pytest.mark.parametrize("sa,sb", [((3, 4), (5, 6)), ((4,), (3,)), ((3, 4), (3,)), ((5,), (4, 5)),
                                   ((2, 3, 4), (2, 5, 6)), ((2, 3, 4), (3, 4, 5))])
def test_matmul_mismatch_names_both_shapes(device, sa, sb):
    ta, tb = T(rand(sa), device), T(rand(sb), device)
    with pytest.raises(RuntimeError) as ei:
        ta @ tb
    msg = str(ei.value)
    assert str(sa) in msg and str(sb) in msg, msg


def test_matmul_0d_raises(device):
    with pytest.raises(RuntimeError):
        rc.tensor(2.0, device=device) @ rc.ones(2, device=device)
    with pytest.raises(RuntimeError):
        rc.ones(2, device=device) @ rc.tensor(2.0, device=device)


# -- mm / bmm / mv / dot / outer ----------------------------------------------------------


def test_mm(device):
    a, b = rand((3, 4), seed=10), rand((4, 5), seed=11)
    assert_close(rc.mm(T(a, device), T(b, device)), a @ b)
    assert_close(T(a, device).mm(T(b, device)), a @ b)
    with pytest.raises(RuntimeError):
        rc.mm(T(a, device), T(b[0], device))
    with pytest.raises(RuntimeError):
        rc.mm(T(rand((2, 3, 4)), device), T(b, device))
    with pytest.raises(RuntimeError) as ei:
        rc.mm(T(a, device), T(a, device))
    assert "(3, 4)" in str(ei.value)


def test_bmm(device):
    a, b = rand((2, 3, 4), seed=12), rand((2, 4, 5), seed=13)
    assert_close(rc.bmm(T(a, device), T(b, device)), np.matmul(a, b))
    assert_close(T(a, device).bmm(T(b, device)), np.matmul(a, b))
    with pytest.raises(RuntimeError):
        rc.bmm(T(a, device), T(b[0], device))   # no broadcasting in bmm
    with pytest.raises(RuntimeError):
        rc.bmm(T(a, device), T(rand((3, 4, 5)), device))  # batch sizes differ
    with pytest.raises(RuntimeError):
        rc.bmm(T(a, device), T(rand((2, 5, 4)), device))  # inner dims differ


def test_mv(device):
    a, v = rand((3, 4), seed=14), rand((4,), seed=15)
    assert_close(rc.mv(T(a, device), T(v, device)), a @ v)
    assert_close(T(a, device).mv(T(v, device)), a @ v)
    assert_close(T(a.T.copy(), device).t().mv(T(v, device)), a @ v)
    with pytest.raises(RuntimeError):
        rc.mv(T(a, device), T(a, device))
    with pytest.raises(RuntimeError):
        rc.mv(T(a, device), T(rand((3,)), device))


def test_dot_inner(device):
    a, b = rand((5,), seed=16), rand((5,), seed=17)
    out = rc.dot(T(a, device), T(b, device))
    assert out.shape == ()
    assert_close(out, np.dot(a, b))
    assert_close(T(a, device).dot(T(b, device)), np.dot(a, b))
    assert_close(rc.inner(T(a, device), T(b, device)), np.inner(a, b))
    ia, ib = rand((6,), np.int64, 1), rand((6,), np.int64, 2)
    assert_close(rc.dot(T(ia, device), T(ib, device)), np.dot(ia, ib))
    # strided vectors
    assert_close(rc.dot(T(rand((10,), seed=1), device)[::2], T(b, device)), np.dot(rand((10,), seed=1)[::2], b))
    with pytest.raises(RuntimeError):
        rc.dot(T(a, device), T(rand((4,)), device))
    with pytest.raises(RuntimeError):
        rc.dot(T(rand((2, 5)), device), T(b, device))
    with pytest.raises(RuntimeError):
        rc.dot(T(a, device), T(b.astype(np.float32), device))  # dtypes must match, as in PyTorch


def test_outer(device):
    a, b = rand((3,), seed=18), rand((4,), seed=19)
    assert_close(rc.outer(T(a, device), T(b, device)), np.outer(a, b))
    assert_close(T(a, device).outer(T(b, device)), np.outer(a, b))
    ia, ib = rand((3,), np.int64, 3), rand((2,), np.int64, 4)
    assert_close(rc.outer(T(ia, device), T(ib, device)), np.outer(ia, ib))
    with pytest.raises(RuntimeError):
        rc.outer(T(rand((2, 2)), device), T(b, device))


# -- einsum ----------------------------------------------------------------------------------


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ii->", [(4, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij,jk->...ik", [(3, 4), (4, 2)]),
    ("ij,jk", [(3, 4), (4, 5)]),      # implicit output: letters seen once, sorted
    ("ba,ac", [(3, 4), (4, 2)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("i,ij->j", [(3,), (3, 4)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
    ("ij,k->ijk", [(2, 3), (4,)]),
    ("...i->...", [(2, 3, 4)]),
    ("i j , j k -> i k", [(3, 4), (4, 5)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum(device, eq, shapes):
    arrays = [rand(s, seed=20 + i) for i, s in enumerate(shapes)]
    expected = np.einsum(eq.replace(" ", ""), *arrays)
    out = rc.einsum(eq, *[T(a, device) for a in arrays])
    assert_close(out, expected)
    # operands as one list, as PyTorch also accepts
    assert_close(rc.einsum(eq, [T(a, device) for a in arrays]), expected)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]), ("i,i->", [(5,), (5,)]),
                                       ("ii->i", [(3, 3)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)])])
def test_einsum_int(device, eq, shapes):
    arrays = [rand(s, np.int64, seed=30 + i) for i, s in enumerate(shapes)]
    assert_close(rc.einsum(eq, *[T(a, device) for a in arrays]), np.einsum(eq, *arrays))


def test_einsum_noncontiguous(device):
    a, b = rand((4, 3), seed=40), rand((5, 4), seed=41)
    ta, tb = T(a, device).t(), T(b, device).t()   # (3, 4), (4, 5), both transposed views
    assert_close(rc.einsum("ij,jk->ik", ta, tb), np.einsum("ij,jk->ik", a.T, b.T))
    assert_close(rc.einsum("ii->i", T(rand((4, 4), seed=42), device).t()), np.einsum("ii->i", rand((4, 4), seed=42).T))


def test_einsum_errors(device):
    a = T(rand((3, 4)), device)
    with pytest.raises((RuntimeError, ValueError)):
        rc.einsum("ij,jk->ik", a)            # operand count
    with pytest.raises(RuntimeError):
        rc.einsum("ijk->i", a)               # subscript count vs ndim
    with pytest.raises(RuntimeError):
        rc.einsum("ij,jk->ik", a, T(rand((5, 2)), device))  # j: 4 vs 5
    with pytest.raises(RuntimeError):
        rc.einsum("ij->iz", a)               # output letter not in inputs


# -- hypothesis: matmul with broadcast batch dims --------------------------------------------


@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    nb = draw(st.integers(0, 3))
    batch = [draw(st.integers(1, 3)) for _ in range(nb)]

    def side(core):
        kk = draw(st.integers(0, nb))
        return tuple(draw(st.sampled_from([b, 1])) for b in batch[nb - kk:]) + core

    a_vec, b_vec = draw(st.booleans()), draw(st.booleans())
    sa = (k,) if a_vec else side((n, k))
    sb = (k,) if b_vec else side((k, m))
    return sa, sb


@SETTINGS
@given(shapes=matmul_shapes(), bad=st.booleans())
def test_matmul_matches_numpy(device, shapes, bad):
    sa, sb = shapes
    if bad:  # change the inner dim of b: must raise, naming both shapes
        sb = sb[:-1] + (sb[-1] + 1,) if len(sb) == 1 else sb[:-2] + (sb[-2] + 1, sb[-1])
    a, b = rand(sa, seed=50), rand(sb, seed=51)
    try:
        expected = np.matmul(a, b)
    except ValueError:
        with pytest.raises(RuntimeError) as ei:
            T(a, device) @ T(b, device)
        assert str(sa) in str(ei.value) and str(sb) in str(ei.value)
        return
    assert_close(T(a, device) @ T(b, device), expected)
