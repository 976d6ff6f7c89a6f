"""The next tier of PyTorch names: inverse trig/hyperbolic functions, erfc/erfinv,
fmod/hypot/logaddexp, integer bitwise ops, order statistics, scans, counting and
searching, matrix and shape helpers, random sampling, in-place variants, and the
process-wide switches (finfo/iinfo, threads, determinism, matmul precision).
Values are checked against NumPy (and torch where installed), gradients with
gradcheck (float64)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import gradcheck

RNG = np.random.default_rng(0)


def t64(a, device, grad=False):
    return rc.tensor(np.asarray(a, dtype=np.float64), device=device, requires_grad=grad)


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a.numpy() if isinstance(a, rc.Tensor) else a, dtype=np.float64),
                               np.asarray(b, dtype=np.float64), rtol=rtol, atol=atol, equal_nan=True)


# -- elementwise ------------------------------------------------------------------------------

X = np.array([-1e300, -7.5, -2.0, -1.0, -0.3, -0.0, 0.0, 0.2, 0.999, 1.0, 3.0, 50.0, np.inf, -np.inf, np.nan])
U = np.array([-0.9999, -0.7, -0.1, 0.0, 0.25, 0.6, 0.95, 0.999999])


@pytest.mark.parametrize("name,ref,data", [
    ("atan", np.arctan, X), ("arctan", np.arctan, X), ("asin", np.arcsin, U), ("acos", np.arccos, U),
    ("atanh", np.arctanh, U), ("asinh", np.arcsinh, X), ("acosh", np.arccosh, np.abs(X) + 1.0),
    ("sinh", np.sinh, X[1:-4]), ("cosh", np.cosh, X[1:-4]),
])
def test_inverse_and_hyperbolic_match_numpy(device, name, ref, data):
    x = t64(data, device)
    with np.errstate(all="ignore"):
        close(getattr(rc, name)(x), ref(data), rtol=1e-13, atol=1e-15)
    close(getattr(x, name)(), ref(data), rtol=1e-13, atol=1e-15)


def test_erfc_and_erfinv_match_scipy(device):
    sp = pytest.importorskip("scipy.special")
    xs = np.array([-3.0, -1.0, 0.0, 0.4, 1.9, 2.5, 6.0, 12.0, 26.0])
    close(rc.erfc(t64(xs, device)), sp.erfc(xs), rtol=1e-12, atol=0)
    close(rc.erfinv(t64(U, device)), sp.erfinv(U), rtol=1e-11)
    close(rc.erfinv(t64([-1.0, 1.0, 1.5], device)), [-np.inf, np.inf, np.nan])
    x32 = rc.tensor(U.astype(np.float32), device=device)
    r = rc.erfinv(x32)
    assert r.dtype is rc.float32
    close(r, sp.erfinv(U.astype(np.float32).astype(np.float64)), rtol=3e-6, atol=1e-6)


def test_atan2_quadrants_signed_zeros_and_infinities(device):
    y = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, -0.0, np.inf, np.inf, 2.0, 0.0, np.nan])
    x = np.array([1.0, -1.0, -1.0, 1.0, -1.0, -1.0, -0.0, 0.0, np.inf, -np.inf, 0.0, 0.0, 1.0])
    close(rc.atan2(t64(y, device), t64(x, device)), np.arctan2(y, x), rtol=1e-14, atol=0)
    close(t64(y, device).arctan2(t64(x, device)), np.arctan2(y, x), rtol=1e-14, atol=0)


def test_binary_float_functions(device):
    a = RNG.normal(size=(3, 4)) * 5
    b = RNG.normal(size=(4,)) * 3
    ta, tb = t64(a, device), t64(b, device)
    close(rc.hypot(ta, tb), np.hypot(a, b), rtol=1e-14)
    close(rc.logaddexp(ta, tb), np.logaddexp(a, b), rtol=1e-14)
    close(rc.logaddexp(t64([-np.inf, np.inf, 1000.0], device), t64([-np.inf, np.inf, 1000.0], device)),
          np.logaddexp([-np.inf, np.inf, 1000.0], [-np.inf, np.inf, 1000.0]))
    close(rc.fmod(ta, tb), np.fmod(a, b), rtol=1e-12, atol=1e-12)
    close(rc.fmod(ta, 1.5), np.fmod(a, 1.5), rtol=1e-12, atol=1e-12)
    ia = rc.tensor([-7, 7, -8, 5], device=device)
    assert rc.fmod(ia, 3).tolist() == np.fmod([-7, 7, -8, 5], 3).tolist()
    close(rc.frac(ta), a - np.trunc(a))
    p = RNG.uniform(0.01, 0.99, size=5)
    close(rc.logit(t64(p, device)), np.log(p / (1 - p)))
    close(rc.logit(t64([0.0, 1.0], device), eps=1e-3), np.log(np.array([1e-3, 0.999]) / (1 - np.array([1e-3, 0.999]))))
    close(rc.xlogy(t64([0.0, 2.0], device), t64([0.0, 3.0], device)), [0.0, 2 * np.log(3.0)])
    close(rc.clamp_min(ta, 0.5), np.maximum(a, 0.5))
    close(ta.clamp_max(-0.5), np.minimum(a, -0.5))
    h = rc.heaviside(t64([-1.0, 0.0, 2.0], device), t64([9.0], device))
    close(h, np.heaviside([-1.0, 0.0, 2.0], 9.0))
    with pytest.raises(RuntimeError, match="different dtypes"):
        rc.heaviside(t64([1.0], device), rc.tensor([1.0], device=device))
    with pytest.raises(RuntimeError, match="frac"):
        rc.frac(rc.tensor([1, 2], device=device))


@pytest.mark.parametrize("fn,args", [
    ("atan", 1), ("asin", 1), ("acos", 1), ("asinh", 1), ("atanh", 1), ("erfc", 1), ("erfinv", 1),
    ("sinh", 1), ("cosh", 1), ("logit", 1), ("atan2", 2), ("hypot", 2), ("logaddexp", 2), ("fmod", 2),
])
def test_elementwise_gradients(device, fn, args):
    xs = [t64(RNG.uniform(-0.9, 0.9, size=(2, 3)), device, grad=True)]
    if fn == "logit":
        xs = [t64(RNG.uniform(0.1, 0.9, size=(2, 3)), device, grad=True)]
    if args == 2:
        xs.append(t64(RNG.uniform(0.5, 2.0, size=(3,)), device, grad=True))
    assert gradcheck(getattr(rc, fn), xs)


def test_acosh_gradient(device):
    assert gradcheck(rc.acosh, [t64([1.5, 3.0, 40.0], device, grad=True)])


def test_bitwise_ops_bool_and_integers(device):
    a = np.array([0, 5, -3, 127, -128, 77], dtype=np.int16)
    b = np.array([3, -1, -6, 1, 64, -77], dtype=np.int16)
    ta, tb = rc.tensor(a, device=device), rc.tensor(b, device=device)
    assert rc.bitwise_and(ta, tb).tolist() == (a & b).tolist()
    assert rc.bitwise_or(ta, tb).tolist() == (a | b).tolist()
    assert ta.bitwise_xor(tb).tolist() == (a ^ b).tolist()
    a64 = a.astype(np.int64) * 1000003
    assert rc.bitwise_and(rc.tensor(a64, device=device), 6).tolist() == (a64 & 6).tolist()
    u = np.array([200, 15, 0], dtype=np.uint8)
    tu = rc.tensor(u, device=device)
    r = rc.bitwise_xor(tu, rc.tensor(np.array([255, 1, 7], dtype=np.uint8), device=device))
    assert r.dtype is rc.uint8 and r.tolist() == (u ^ np.array([255, 1, 7], dtype=np.uint8)).tolist()
    p = rc.tensor([True, False, True], device=device)
    q = rc.tensor([True, True, False], device=device)
    assert rc.bitwise_and(p, q).tolist() == [True, False, False]
    assert rc.bitwise_or(p, q).tolist() == [True, True, True]
    with pytest.raises(RuntimeError, match="bitwise_and"):
        rc.bitwise_and(t64([1.0], device), t64([1.0], device))


# -- scans and order statistics -----------------------------------------------------------------


def test_cummax_cummin_match_torch_rule(device):
    x = np.array([1.0, 3.0, 3.0, np.nan, 2.0, np.nan, 0.0])
    v, i = rc.cummax(t64(x, device), 0)
    close(v, [1, 3, 3, np.nan, np.nan, np.nan, np.nan])
    assert i.tolist() == [0, 1, 2, 3, 3, 5, 5]
    m = RNG.integers(0, 4, size=(3, 9)).astype(np.float64)
    v, i = t64(m, device).cummin(1)
    close(v, np.minimum.accumulate(m, axis=1))
    im = i.numpy()
    assert (np.take_along_axis(m, im, 1) == v.numpy()).all()
    # ties: the later index wins
    for r in range(3):
        for c in range(9):
            assert im[r, c] == max(j for j in range(c + 1) if m[r, j] == m[r, :c + 1].min())
    assert gradcheck(lambda t: rc.cummax(t, 1).values, [t64(RNG.normal(size=(2, 5)), device, grad=True)])


def test_median_kthvalue_mode(device):
    m = RNG.normal(size=(4, 6))
    tm = t64(m, device)
    srt = np.sort(m.ravel())
    close(rc.median(tm), srt[(srt.size - 1) // 2])
    v, i = rc.median(tm, 1)
    lower = np.sort(m, 1)[:, (6 - 1) // 2]
    close(v, lower)
    assert (m[np.arange(4), i.numpy()] == lower).all()
    v, i = tm.median(0, keepdim=True)
    assert v.shape == (1, 6)
    n = t64([[1.0, np.nan, 3.0, np.nan]], device)
    v, i = rc.median(n, 1)
    assert math.isnan(v.item()) and i.tolist() == [1]
    assert rc.nanmedian(n).item() == 1.0
    v, i = rc.kthvalue(tm, 2, 1)
    close(v, np.sort(m, 1)[:, 1])
    assert (m[np.arange(4), i.numpy()] == v.numpy()).all()
    with pytest.raises(RuntimeError, match="kthvalue"):
        rc.kthvalue(tm, 7, 1)
    x = rc.tensor([3, 1, 3, 1, 2], device=device)
    v, i = rc.mode(x)
    assert (v.item(), i.item()) == (1, 3)
    v, i = rc.tensor([[2.0, 5.0, 5.0, 2.0, 5.0], [4.0, 4.0, 1.0, 0.0, 0.0]], device=device).mode(1)
    assert v.tolist() == [5.0, 0.0] and i.tolist() == [4, 4]
    assert gradcheck(lambda t: rc.median(t, 1).values, [t64(m[:2, :3], device, grad=True)])
    assert gradcheck(lambda t: rc.kthvalue(t, 2, 0).values, [t64(m[:3, :2], device, grad=True)])


def test_order_statistics_against_torch(device):
    torch = pytest.importorskip("torch")
    m = RNG.integers(0, 5, size=(3, 7)).astype(np.float64)
    for dim in (0, 1):
        ours, theirs = rc.mode(t64(m, device), dim), torch.mode(torch.tensor(m), dim)
        assert ours.values.tolist() == theirs.values.tolist()
        assert ours.indices.tolist() == theirs.indices.tolist()
        ours, theirs = rc.median(t64(m, device), dim), torch.median(torch.tensor(m), dim)
        assert ours.values.tolist() == theirs.values.tolist()


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_numpy(device, interp):
    m = RNG.normal(size=(5, 6))
    q = np.array([0.0, 0.1, 0.5, 0.77, 1.0])
    tm = t64(m, device)
    close(rc.quantile(tm, 0.3, interpolation=interp), np.quantile(m, 0.3, method=interp))
    close(rc.quantile(tm, t64(q, device), dim=1, interpolation=interp), np.quantile(m, q, axis=1, method=interp))
    r = tm.quantile(t64(q, device), dim=0, keepdim=True, interpolation=interp)
    close(r, np.quantile(m, q, axis=0, keepdims=True, method=interp))
    mn = m.copy()
    mn[1, 2] = mn[3, 0] = np.nan
    close(rc.nanquantile(t64(mn, device), t64(q, device), dim=1, interpolation=interp),
          np.nanquantile(mn, q, axis=1, method=interp))
    close(rc.quantile(t64(mn, device), 0.5, dim=1, interpolation=interp), np.quantile(mn, 0.5, axis=1, method=interp))


def test_quantile_errors_and_gradient(device):
    x = t64([1.0, 2.0, 4.0], device)
    with pytest.raises(RuntimeError, match="range"):
        rc.quantile(x, 1.5)
    with pytest.raises(RuntimeError, match="float or double"):
        rc.quantile(rc.tensor([1, 2], device=device), 0.5)
    with pytest.raises(ValueError, match="interpolation"):
        rc.quantile(x, 0.5, interpolation="cubic")
    assert gradcheck(lambda t: rc.quantile(t, 0.3, dim=1), [t64(RNG.normal(size=(2, 5)), device, grad=True)])


def test_nansum_nanmean(device):
    m = RNG.normal(size=(3, 4))
    m[0, 1] = m[2, 3] = np.nan
    tm = t64(m, device)
    close(rc.nansum(tm), np.nansum(m))
    close(tm.nanmean(1), np.nanmean(m, 1))
    with pytest.raises(RuntimeError, match="nanmean"):
        rc.nanmean(rc.tensor([1, 2], device=device))


# -- counting, searching -------------------------------------------------------------------------


def test_bincount_histc_searchsorted(device):
    x = np.array([0, 3, 3, 1, 7, 3])
    tx = rc.tensor(x, device=device)
    assert rc.bincount(tx).tolist() == np.bincount(x).tolist()
    assert rc.bincount(tx, minlength=10).tolist() == np.bincount(x, minlength=10).tolist()
    w = RNG.normal(size=6)
    close(rc.bincount(tx, t64(w, device)), np.bincount(x, w))
    with pytest.raises(RuntimeError, match="non-negative"):
        rc.bincount(rc.tensor([-1, 2], device=device))
    d = RNG.normal(size=50)
    close(rc.histc(t64(d, device), bins=7), np.histogram(d, bins=7)[0])
    close(rc.histc(t64(d, device), bins=4, min=-1, max=1), np.histogram(d[(d >= -1) & (d <= 1)], 4, (-1, 1))[0])
    seq = np.array([1.0, 3.0, 3.0, 5.0, 9.0])
    v = np.array([[0.0, 3.0, 4.0], [9.0, 10.0, 1.0]])
    for right in (False, True):
        side = "right" if right else "left"
        r = rc.searchsorted(t64(seq, device), t64(v, device), right=right)
        assert r.tolist() == np.searchsorted(seq, v, side=side).tolist() and r.dtype is rc.int64
        assert rc.bucketize(t64(v, device), t64(seq, device), right=right, out_int32=True).dtype is rc.int32
    s2 = np.sort(RNG.normal(size=(2, 6)), 1)
    v2 = RNG.normal(size=(2, 3))
    r = rc.searchsorted(t64(s2, device), t64(v2, device), side="right")
    assert r.tolist() == [np.searchsorted(s2[i], v2[i], side="right").tolist() for i in range(2)]
    assert rc.searchsorted(t64(seq, device), 4.0).item() == 3


def test_tri_indices(device):
    for r, c, off in [(4, 3, 0), (3, 5, 1), (5, 5, -2)]:
        assert rc.triu_indices(r, c, off, device=device).tolist() == [list(a) for a in np.triu_indices(r, off, c)]
        assert rc.tril_indices(r, c, off, device=device).tolist() == [list(a) for a in np.tril_indices(r, off, c)]


# -- shapes and matrices ---------------------------------------------------------------------------


def test_shape_helpers(device):
    a = t64(RNG.normal(size=(2, 3)), device)
    b = t64(RNG.normal(size=(3,)), device)
    ba, bb = rc.broadcast_tensors(a, b)
    assert ba.shape == bb.shape == (2, 3)
    s = rc.tensor(1.0, device=device)
    assert rc.atleast_1d(s).shape == (1,)
    assert [t.shape for t in rc.atleast_2d(s, b)] == [(1, 1), (1, 3)]
    assert [t.shape for t in rc.atleast_3d([s, b, a])] == [np.atleast_3d(np.ones(q)).shape
                                                          for q in [(), (3,), (2, 3)]]
    an, bn = a.numpy(), b.numpy()
    close(rc.dstack([a, a]), np.dstack([an, an]))
    close(rc.column_stack([b, b]), np.column_stack([bn, bn]))
    close(rc.block_diag(a, b, s), _block_diag_np([an, bn[None], np.ones((1, 1))]))
    close(rc.take(a, rc.tensor([[0, -1], [4, 2]], device=device)), np.take(an, [[0, -1], [4, 2]]))
    with pytest.raises(IndexError, match="out of range"):
        rc.take(a, rc.tensor([6], device=device))
    close(rc.fliplr(a), np.fliplr(an))
    close(a.flipud(), np.flipud(an))
    c = RNG.normal(size=(2, 3, 4))
    for k in (-1, 0, 1, 2, 3, 5):
        close(rc.rot90(t64(c, device), k, [1, 2]), np.rot90(c, k, (1, 2)))
    with pytest.raises(RuntimeError, match="2-d"):
        rc.fliplr(b)
    assert rc.select(a, 1, -1).tolist() == an[:, -1].tolist()
    assert gradcheck(lambda u, v: rc.block_diag(u, v), [t64(an, device, grad=True), t64(bn, device, grad=True)])


def _block_diag_np(blocks):
    rows = sum(b.shape[0] for b in blocks)
    cols = sum(b.shape[1] for b in blocks)
    out = np.zeros((rows, cols))
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def test_matrix_helpers(device):
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))
    i, v = RNG.normal(size=(3, 2)), RNG.normal(size=4)
    ta, tb, ti, tv = (t64(q, device) for q in (a, b, i, v))
    close(rc.trace(t64(a[:, :3], device)), np.trace(a[:, :3]))
    with pytest.raises(RuntimeError, match="trace"):
        rc.trace(t64(np.ones((2, 2, 2)), device))
    close(rc.addmm(ti, ta, tb, beta=0.5, alpha=2.0), 0.5 * i + 2.0 * a @ b)
    close(rc.addmm(t64([np.nan], device), ta, tb, beta=0), a @ b)
    close(rc.addmv(t64(i[:, 0], device), ta, tv, alpha=-1), i[:, 0] - a @ v)
    bb1, bb2 = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(5, 4, 2))
    close(rc.baddbmm(t64(i, device), t64(bb1, device), t64(bb2, device), beta=2), 2 * i + bb1 @ bb2)
    close(ti.addbmm(t64(bb1, device), t64(bb2, device)), i + (bb1 @ bb2).sum(0))
    p, q = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    close(rc.cross(t64(p, device), t64(q, device), dim=1), np.cross(p, q, axis=1))
    close(rc.cross(t64(p.T, device), t64(q.T, device)), np.cross(p.T, q.T, axis=0))
    close(rc.kron(ta, tb), np.kron(a, b))
    close(rc.kron(tv, ta), np.kron(v, a))
    for pp in (1, 2, 3, math.inf, 0):
        close(rc.dist(ta, ti[:, :1], pp), np.linalg.norm((a - i[:, :1]).ravel(), pp))
    d = RNG.normal(size=(3, 6))
    close(rc.diff(t64(d, device)), np.diff(d))
    close(t64(d, device).diff(n=2, dim=0), np.diff(d, 2, 0))
    close(rc.diff(t64(d, device), prepend=t64(d[:, :2], device), append=t64(d[:, :1], device)),
          np.diff(d, prepend=d[:, :2], append=d[:, :1]))
    assert rc.diff(rc.tensor([True, True, False], device=device)).tolist() == [False, True]
    y, x = RNG.normal(size=(3, 5)), np.sort(RNG.normal(size=5))
    close(rc.trapezoid(t64(y, device), t64(x, device)), np.trapezoid(y, x) if hasattr(np, "trapezoid") else np.trapz(y, x))
    close(rc.trapz(t64(y, device), dx=0.5, dim=0), (y[1:] + y[:-1]).sum(0) * 0.25)
    assert gradcheck(lambda u, w: rc.cross(u, w, dim=1), [t64(p, device, grad=True), t64(q, device, grad=True)])
    assert gradcheck(rc.kron, [t64(a[:2, :2], device, grad=True), t64(b[:2], device, grad=True)])
    assert gradcheck(lambda u, w, z: rc.addmm(u, w, z, beta=0.3, alpha=1.7),
                     [t64(i, device, grad=True), t64(a, device, grad=True), t64(b, device, grad=True)])
    assert gradcheck(lambda u: rc.diff(u, 2), [t64(d, device, grad=True)])


def test_cosine_similarity_and_pairwise_distance(device):
    import rtxcore.nn.functional as F

    a, b = RNG.normal(size=(4, 5)), RNG.normal(size=(4, 5))
    ta, tb = t64(a, device), t64(b, device)
    want = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    close(F.cosine_similarity(ta, tb), want)
    close(F.pairwise_distance(ta, tb), np.linalg.norm(a - b + 1e-6, axis=1))
    assert gradcheck(lambda u, v: F.cosine_similarity(u, v, dim=0), [t64(a, device, grad=True), t64(b, device, grad=True)])
    torch = pytest.importorskip("torch")
    z = np.zeros((1, 5))
    close(F.cosine_similarity(t64(z, device), tb[:1]), torch.nn.functional.cosine_similarity(torch.tensor(z), torch.tensor(b[:1])).numpy())


# -- random ---------------------------------------------------------------------------------------------


def test_random_sampling_laws_and_seeding(device):
    rc.manual_seed(3)
    x = rc.empty(20000, dtype=rc.float64, device=device)
    e = x.clone().exponential_(2.0).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02
    g = x.clone().geometric_(0.25).numpy()
    assert g.min() >= 1 and (g == np.round(g)).all() and abs(g.mean() - 4.0) < 0.15
    ln = x.clone().log_normal_(0.0, 0.5).numpy()
    assert abs(np.median(np.log(ln))) < 0.03 and abs(np.log(ln).std() - 0.5) < 0.02
    c = x.clone().cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(c) - 1.0) < 0.1
    b = x.clone().bernoulli_(0.3).numpy()
    assert set(np.unique(b).tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02
    r = rc.empty(5000, dtype=rc.int64, device=device).random_(3, 7).numpy()
    assert set(np.unique(r).tolist()) == {3, 4, 5, 6}
    assert set(np.unique(rc.zeros(500, device=device).random_(4).numpy()).tolist()) == {0, 1, 2, 3}
    rc.manual_seed(7)
    a1 = rc.zeros(10, device=device).exponential_()
    rc.manual_seed(7)
    assert rc.zeros(10, device=device).exponential_().tolist() == a1.tolist()
    p = rc.tensor([0.0, 1.0, 0.0, 1.0], device=device)
    assert rc.bernoulli(p).tolist() == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(RuntimeError):
        rc.bernoulli(rc.tensor([2.0], device=device))
    n = rc.normal(t64(np.full(20000, 3.0), device), 2.0).numpy()
    assert abs(n.mean() - 3.0) < 0.06 and abs(n.std() - 2.0) < 0.06
    n2 = rc.normal(0.0, t64([1.0, 2.0], device))
    assert n2.shape == (2,)
    assert rc.normal(1.0, 2.0, size=(3, 4), device=device).shape == (3, 4)
    with pytest.raises(RuntimeError, match="std"):
        rc.normal(t64([0.0], device), t64([-1.0], device))
    with pytest.raises(RuntimeError, match="leaf"):
        t64([1.0], device, grad=True).exponential_()


# -- in-place variants ------------------------------------------------------------------------------------


def test_index_copy_fill_masked_scatter_put(device):
    a = RNG.normal(size=(4, 3))
    src = RNG.normal(size=(4, 2))
    idx = rc.tensor([2, 0], device=device)
    want = a.copy()
    want[:, [2, 0]] = src
    close(rc.index_copy(t64(a, device), 1, idx, t64(src, device)), want)
    t = t64(a, device)
    assert t.index_copy_(1, idx, t64(src, device)) is t
    close(t, want)
    want = a.copy()
    want[[3, 1]] = -1.5
    close(t64(a, device).index_fill_(0, rc.tensor([3, 1], device=device), -1.5), want)
    close(rc.index_fill(t64(a, device), 0, rc.tensor([3, 1], device=device), rc.tensor(-1.5, dtype=rc.float64, device=device)), want)
    mask = a > 0
    s = RNG.normal(size=12)
    want = a.copy()
    want[mask] = s[:mask.sum()]
    close(t64(a, device).masked_scatter_(rc.tensor(mask, device=device), t64(s, device)), want)
    with pytest.raises(RuntimeError, match="source"):
        rc.masked_scatter(t64(a, device), rc.tensor(np.ones((4, 3), bool), device=device), t64(s[:3], device))
    want = a.copy().ravel()
    want[[5, 0, -1]] = [1.0, 2.0, 3.0]
    close(t64(a, device).put_(rc.tensor([5, 0, -1], device=device), t64([1.0, 2.0, 3.0], device)), want.reshape(4, 3))
    want = a.copy().ravel()
    np.add.at(want, [1, 1, 2], [1.0, 2.0, 3.0])
    close(t64(a, device).put_(rc.tensor([1, 1, 2], device=device), t64([1.0, 2.0, 3.0], device), accumulate=True),
          want.reshape(4, 3))
    # gradients flow to the source through index_copy and masked_scatter
    assert gradcheck(lambda u, v: rc.index_copy(u, 1, idx, v), [t64(a, device, grad=True), t64(src, device, grad=True)])
    m = rc.tensor(mask, device=device)
    assert gradcheck(lambda u, v: rc.masked_scatter(u, m, v), [t64(a, device, grad=True), t64(s, device, grad=True)])


def test_fill_diagonal_tri_and_relayout(device):
    for shape, wrap in [((3, 3), False), ((7, 3), True), ((7, 3), False), ((2, 5), False)]:
        want = np.zeros(shape)
        np.fill_diagonal(want, 4.0, wrap=wrap)
        close(rc.zeros(*shape, dtype=rc.float64, device=device).fill_diagonal_(4.0, wrap=wrap), want)
    cube = rc.zeros(3, 3, 3, device=device).fill_diagonal_(1.0).numpy()
    assert cube.sum() == 3 and cube[1, 1, 1] == 1
    a = RNG.normal(size=(3, 4))
    close(t64(a, device).tril_(-1), np.tril(a, -1))
    close(t64(a, device).triu_(1), np.triu(a, 1))
    t = t64(a, device)
    assert t.t_() is t and t.shape == (4, 3)
    close(t, a.T)
    assert t.unsqueeze_(0).shape == (1, 4, 3) and t.squeeze_().shape == (4, 3)
    assert t.transpose_(0, 1).shape == (3, 4)
    close(t, a)
    leaf = t64(a, device, grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.t_()
    y = leaf * 2
    y.t_()
    (y * t64(a.T, device)).sum().backward()
    close(leaf.grad, 2 * a)
    assert t.ndimension() == 2 and t.is_cuda is False
    assert t.share_memory_() is t and not t.is_pinned()
    if t.device.type == "cpu":
        assert t.pin_memory() is t
    else:
        with pytest.raises(RuntimeError, match="pin"):
            t.pin_memory()


# -- process-wide switches -----------------------------------------------------------------------------------


def test_finfo_iinfo():
    for dt, npdt in [(rc.float32, np.float32), (rc.float64, np.float64), (rc.float16, np.float16)]:
        f, n = rc.finfo(dt), np.finfo(npdt)
        assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution) == \
            (n.bits, float(n.eps), float(n.max), float(n.min), float(n.tiny), float(n.smallest_normal), 10.0 ** -n.precision)
        assert f.dtype == dt.name
    assert rc.finfo().dtype == rc.get_default_dtype().name
    i = rc.iinfo(rc.int8)
    assert (i.bits, i.min, i.max) == (8, -128, 127)
    assert rc.iinfo(rc.uint8).max == 255 and rc.iinfo(rc.int64).min == -2 ** 63
    with pytest.raises(TypeError):
        rc.finfo(rc.int32)
    with pytest.raises(TypeError):
        rc.iinfo(rc.float32)
    with pytest.raises(TypeError):
        rc.iinfo(rc.bool)
    torch = pytest.importorskip("torch")
    assert rc.finfo(torch.float32).max == torch.finfo(torch.float32).max
    assert rc.finfo(rc.float16).resolution == torch.finfo(torch.float16).resolution


def test_global_switches():
    n = rc.get_num_threads()
    assert n >= 1
    rc.set_num_threads(1)
    assert rc.get_num_threads() == 1
    rc.set_num_threads(n)
    with pytest.raises(RuntimeError):
        rc.set_num_threads(0)
    assert rc.are_deterministic_algorithms_enabled() is False
    rc.use_deterministic_algorithms(True)
    assert rc.are_deterministic_algorithms_enabled() is True
    rc.use_deterministic_algorithms(False)
    assert rc.get_float32_matmul_precision() == "highest"
    rc.set_float32_matmul_precision("high")
    assert rc.get_float32_matmul_precision() == "high"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rc.set_float32_matmul_precision("bogus")
    assert w and rc.get_float32_matmul_precision() == "high"
    rc.set_float32_matmul_precision("highest")
    assert rc.get_autocast_gpu_dtype() is rc.float16
