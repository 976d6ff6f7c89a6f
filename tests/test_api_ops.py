"""PyTorch functions programs call beyond the core: multinomial, isclose/allclose/
equal, repeat_interleave, unique, diag/diag_embed, meshgrid/cartesian_prod, cdist,
rtxcore.linalg norms, index_add/index_put, addcmul/addcdiv, out= and keyword
forms of the factories. Values are checked against NumPy, gradients with
gradcheck (float64), and, where torch is installed, against torch."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import gradcheck
from rtxcore.testing import assert_close

F64 = rc.float64
RNG = np.random.default_rng(0)


def t64(a, device, grad=False):
    return rc.tensor(np.asarray(a, dtype=np.float64), device=device, requires_grad=grad)


# -- multinomial -------------------------------------------------------------------------


def test_multinomial_without_replacement_never_repeats_and_skips_zeros(device):
    w = rc.tensor([[1.0, 0.0, 3.0, 2.0, 0.5], [0.0, 1.0, 1.0, 0.0, 1.0]], device=device)
    for seed in range(3):
        rc.manual_seed(seed)
        s = rc.multinomial(w, 3).numpy()
        assert s.shape == (2, 3) and s.dtype == np.int64
        for row, wrow in zip(s, w.numpy()):
            assert len(set(row.tolist())) == 3
            assert all(wrow[i] > 0 for i in row)
    # asking for every category: the zero-weight ones come last
    full = rc.multinomial(w[0], 5).numpy()
    assert sorted(full.tolist()) == [0, 1, 2, 3, 4]
    assert full[-1] == 1


def test_multinomial_without_replacement_draws_heavier_first_in_proportion(device):
    # weights [0.9, 0.1], both drawn: index 0 comes first 90% of the time
    rc.manual_seed(3)
    w = rc.tensor([[0.9, 0.1]], device=device).expand(4000, 2)
    first = rc.multinomial(w, 2).numpy()[:, 0]
    assert 0.87 < (first == 0).mean() < 0.93, (first == 0).mean()
    # three categories, the first of two draws: P(first = i) = w_i
    p = np.array([0.5, 0.3, 0.2])
    s = rc.multinomial(rc.tensor(p, device=device).expand(4000, 3), 2).numpy()
    assert np.allclose(np.bincount(s[:, 0], minlength=3) / 4000, p, atol=0.03)


def test_multinomial_with_replacement_frequencies(device):
    p = np.array([0.1, 0.0, 0.6, 0.3])
    rc.manual_seed(1)
    s = rc.multinomial(rc.tensor(p * 7, device=device), 4000, replacement=True).numpy()
    assert s.shape == (4000,)
    freq = np.bincount(s, minlength=4) / 4000
    assert freq[1] == 0
    assert np.allclose(freq, p, atol=0.03), freq


def test_multinomial_is_seeded(device):
    w = rc.rand(3, 6, device=device)
    rc.manual_seed(7)
    a = rc.multinomial(w, 4, True).numpy()
    b = w.multinomial(4).numpy()
    rc.manual_seed(7)
    assert np.array_equal(a, rc.multinomial(w, 4, True).numpy())
    assert np.array_equal(b, w.multinomial(4).numpy())
    g = rc.Generator().manual_seed(3)
    c = rc.multinomial(w, 4, generator=g).numpy()
    assert np.array_equal(c, rc.multinomial(w, 4, generator=rc.Generator().manual_seed(3)).numpy())


@pytest.mark.parametrize("weights, n, repl, match", [
    ([1.0, -1.0], 1, True, "element < 0"),
    ([1.0, math.nan], 1, False, "nan"),
    ([1.0, math.inf], 1, True, "inf"),
    ([0.0, 0.0], 1, True, "sum of probabilities <= 0"),
    ([1.0, 1.0], 3, False, "without replacement"),
    ([1.0, 1.0], 0, True, "n_sample <= 0"),
])
def test_multinomial_errors(device, weights, n, repl, match):
    with pytest.raises(RuntimeError, match=match):
        rc.multinomial(rc.tensor(weights, device=device), n, repl)


def test_multinomial_bad_inputs(device):
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        rc.multinomial(rc.ones(2, 2, 2, device=device), 1)
    with pytest.raises(RuntimeError, match="floating-point"):
        rc.multinomial(rc.tensor([1, 2], device=device), 1)


# -- isclose / allclose / equal ------------------------------------------------------------


def test_isclose_allclose_equal(device):
    a = np.array([1.0, 2.0, math.inf, -math.inf, math.nan, 1.0, 1e-9, 1.0])
    b = np.array([1.0 + 1e-6, 2.1, math.inf, math.inf, math.nan, math.inf, 0.0, 1.0 + 2e-5])
    x, y = rc.tensor(a, device=device), rc.tensor(b, device=device)
    for kw in ({}, {"rtol": 0.1}, {"atol": 1e-3, "rtol": 0.0}, {"equal_nan": True}):
        with np.errstate(invalid="ignore"):
            expected = np.isclose(a, b, **kw)
        assert_close(rc.isclose(x, y, **kw), expected)
        assert_close(x.isclose(y, **kw), expected)
    assert rc.allclose(x[:2], y[:2], rtol=0.1) is True
    assert x[:2].allclose(y[:2]) is False
    assert rc.allclose(x, x, equal_nan=True) and not rc.allclose(x, x)
    i = rc.tensor([1, 2, 3], device=device)
    assert_close(rc.isclose(i, rc.tensor([1, 3, 3], device=device)), np.array([True, False, True]))
    assert rc.equal(x[:2], x[:2].clone()) is True
    assert x.equal(y) is False
    assert rc.equal(i, i[:2]) is False  # shapes differ
    with pytest.raises(RuntimeError, match="did not match"):
        rc.isclose(x, rc.ones(8, dtype=rc.int64, device=device))
    with pytest.raises(RuntimeError, match="rtol"):
        rc.isclose(x, y, rtol=-1.0)


# -- repeat_interleave -------------------------------------------------------------------------


def test_repeat_interleave_values(device):
    a = np.arange(6.0).reshape(2, 3)
    x = rc.tensor(a, device=device)
    assert_close(rc.repeat_interleave(x, 2), np.repeat(a, 2))
    assert_close(x.repeat_interleave(3, dim=1), np.repeat(a, 3, axis=1))
    r = [2, 0, 1]
    assert_close(rc.repeat_interleave(x, rc.tensor(r, device=device), dim=1), np.repeat(a, r, axis=1))
    assert_close(rc.repeat_interleave(x, rc.tensor([1, 3], device=device), dim=0, output_size=4),
                 np.repeat(a, [1, 3], axis=0))
    assert_close(rc.repeat_interleave(rc.tensor([3, 0, 2], device=device)), np.repeat([0, 1, 2], [3, 0, 2]))
    assert_close(rc.repeat_interleave(x, rc.tensor(2, device=device), dim=0), np.repeat(a, 2, axis=0))
    assert rc.repeat_interleave(x, 0).shape == (0,)


def test_repeat_interleave_errors(device):
    x = rc.ones(3, device=device)
    with pytest.raises(RuntimeError, match="same size"):
        rc.repeat_interleave(x, rc.tensor([1, 2], device=device))
    with pytest.raises(RuntimeError, match="negative"):
        rc.repeat_interleave(x, rc.tensor([1, -2, 1], device=device))
    with pytest.raises(RuntimeError, match="non-negative"):
        rc.repeat_interleave(x, -1)


def test_repeat_interleave_grad(device):
    x = t64(RNG.standard_normal((2, 3)), device, True)
    reps = rc.tensor([1, 3, 2], device=device)
    assert gradcheck(lambda v: rc.repeat_interleave(v, reps, dim=1), (x,))
    assert gradcheck(lambda v: v.repeat_interleave(2), (x,))


# -- unique ---------------------------------------------------------------------------------


def test_unique_flat(device):
    a = np.array([[3, 1, 3], [2, 7, 1]])
    x = rc.tensor(a, device=device)
    u, inv, cnt = np.unique(a, return_inverse=True, return_counts=True)
    assert_close(rc.unique(x), u)
    got = x.unique(return_inverse=True, return_counts=True)
    assert_close(got[0], u)
    assert_close(got[1], inv.reshape(a.shape))
    assert_close(got[2], cnt)
    f = rc.tensor([2.5, -1.0, 2.5], device=device)
    assert_close(rc.unique(f, sorted=False), np.array([-1.0, 2.5], dtype=np.float32))
    assert rc.unique(rc.tensor([], dtype=rc.int64, device=device)).shape == (0,)


def test_unique_dim(device):
    a = np.array([[1, 2], [0, 5], [1, 2], [0, 3]])
    x = rc.tensor(a, device=device)
    u, inv, cnt = np.unique(a, axis=0, return_inverse=True, return_counts=True)
    vals, ginv, gcnt = rc.unique(x, dim=0, return_inverse=True, return_counts=True)
    assert_close(vals, u)
    assert_close(ginv, inv.reshape(-1))
    assert_close(gcnt, cnt)
    assert_close(rc.unique(x.t(), dim=1), np.unique(a.T, axis=1))


def test_unique_consecutive(device):
    a = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    vals, inv, cnt = rc.unique_consecutive(rc.tensor(a, device=device), return_inverse=True,
                                           return_counts=True)
    change = np.concatenate([[True], a[1:] != a[:-1]])
    assert_close(vals, a[change])
    assert_close(inv, np.cumsum(change) - 1)
    assert_close(cnt, np.diff(np.append(np.flatnonzero(change), len(a))))


# -- diag, diag_embed, meshgrid, cartesian_prod ------------------------------------------------


@pytest.mark.parametrize("k", [-2, 0, 1])
def test_diag(device, k):
    v = np.array([1.0, 2.0, 3.0])
    m = np.arange(12.0).reshape(3, 4)
    assert_close(rc.diag(t64(v, device), k), np.diag(v, k))
    assert_close(t64(m, device).diag(k), np.diag(m, k))
    x = t64(v, device, True)
    assert gradcheck(lambda a: rc.diag(a, k), (x,))
    y = t64(m, device, True)
    assert gradcheck(lambda a: rc.diag(a, k), (y,))
    with pytest.raises(RuntimeError, match="1D or 2D"):
        rc.diag(rc.ones(2, 2, 2, device=device))


def test_diag_embed(device):
    a = RNG.standard_normal((2, 3))
    x = t64(a, device, True)
    expected = np.stack([np.diag(r, 1) for r in a])
    assert_close(rc.diag_embed(x, 1), expected)
    assert_close(x.diag_embed(-1, 0, 2), np.stack([np.diag(r, -1) for r in a]).transpose(1, 0, 2))
    assert gradcheck(lambda v: rc.diag_embed(v, -1, 0, 2), (x,))


def test_meshgrid_and_cartesian_prod(device):
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0])
    x, y = t64(a, device, True), t64(b, device)
    with pytest.warns(UserWarning, match="indexing"):
        gx, gy = rc.meshgrid(x, y)
    ex, ey = np.meshgrid(a, b, indexing="ij")
    assert_close(gx, ex)
    assert_close(gy, ey)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hx, hy = rc.meshgrid([x, y], indexing="xy")
    ex, ey = np.meshgrid(a, b, indexing="xy")
    assert_close(hx, ex)
    assert_close(hy, ey)
    assert gradcheck(lambda v: rc.meshgrid(v, y, indexing="xy")[0] * 2.0, (x,))
    expected = np.array([[p, q] for p in a for q in b])
    assert_close(rc.cartesian_prod(x, y), expected)


# -- cdist and linalg norms ----------------------------------------------------------------------


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
def test_cdist(device, p):
    a = RNG.standard_normal((2, 4, 3))
    b = RNG.standard_normal((2, 5, 3))
    x, y = t64(a, device, True), t64(b, device, True)
    d = a[:, :, None, :] - b[:, None, :, :]
    expected = np.max(np.abs(d), -1) if p == math.inf else np.sum(np.abs(d) ** p, -1) ** (1 / p)
    assert_close(rc.cdist(x, y, p), expected)
    assert gradcheck(lambda u, v: rc.cdist(u, v, p), (x, y))


def test_cdist_zero_distance_gradient_and_errors(device):
    x = t64([[0.0, 1.0], [2.0, 3.0]], device, True)
    rc.cdist(x, x.detach()).sum().backward()
    assert np.all(np.isfinite(x.grad.numpy()))
    with pytest.raises(RuntimeError, match="at least 2D"):
        rc.cdist(rc.ones(3, device=device), rc.ones(3, device=device))
    with pytest.raises(RuntimeError, match="same number of columns"):
        rc.cdist(rc.ones(2, 3, device=device), rc.ones(2, 4, device=device))


@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, math.inf, -math.inf])
def test_vector_norm(device, ord):
    a = RNG.standard_normal((3, 4))
    x = t64(a, device, True)
    assert_close(rc.linalg.vector_norm(x, ord), np.linalg.norm(a.reshape(-1), ord))
    assert_close(rc.linalg.vector_norm(x, ord, dim=1, keepdim=True),
                 np.linalg.norm(a, ord, axis=1, keepdims=True))
    if ord != 0:
        assert gradcheck(lambda v: rc.linalg.vector_norm(v, ord, dim=(0, 1)), (x,))
        assert gradcheck(lambda v: rc.linalg.norm(v, ord, dim=0), (x,))


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf])
def test_matrix_norm(device, ord):
    a = RNG.standard_normal((2, 3, 4))
    x = t64(a, device, True)
    expected = np.stack([np.linalg.norm(m, ord) for m in a])
    assert_close(rc.linalg.matrix_norm(x, ord), expected)
    assert_close(rc.linalg.matrix_norm(x, ord, dim=(0, 2), keepdim=True),
                 np.linalg.norm(a, ord, axis=(0, 2), keepdims=True))
    assert_close(rc.linalg.norm(x[0], ord), np.linalg.norm(a[0], ord))
    assert gradcheck(lambda v: rc.linalg.matrix_norm(v, ord), (x,))


def test_linalg_norm_defaults_and_errors(device):
    a = RNG.standard_normal((2, 3, 4))
    x = t64(a, device)
    assert_close(rc.linalg.norm(x), np.linalg.norm(a.reshape(-1)))
    assert_close(rc.linalg.norm(x, dim=(1, 2)), np.linalg.norm(a, axis=(1, 2)))
    assert_close(rc.norm(x), np.linalg.norm(a.reshape(-1)))  # the old entry point still works
    assert_close(rc.linalg.vector_norm(x.float(), dtype=F64), np.linalg.norm(a.astype(np.float32).astype(np.float64).reshape(-1)),
                 rtol=1e-6)
    z = t64(np.zeros(3), device, True)
    rc.linalg.vector_norm(z).backward()
    assert_close(z.grad, np.zeros(3))
    with pytest.raises(RuntimeError, match="1D or 2D"):
        rc.linalg.norm(x, 1)
    with pytest.raises(NotImplementedError, match="SVD"):
        rc.linalg.matrix_norm(x, "nuc")
    with pytest.raises(RuntimeError, match="not supported"):
        rc.linalg.matrix_norm(x, 3)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        rc.linalg.matrix_norm(x[0, 0])
    with pytest.raises(RuntimeError, match="floating point"):
        rc.linalg.vector_norm(rc.tensor([1, 2], device=device))


# -- index_add / index_put / addcmul / addcdiv ---------------------------------------------------


def test_index_add(device):
    a = RNG.standard_normal((4, 3))
    s = RNG.standard_normal((3, 3))
    idx = np.array([0, 2, 0])
    expected = a.copy()
    np.add.at(expected, idx, 2.0 * s)
    x = t64(a, device)
    assert_close(rc.index_add(x, 0, rc.tensor(idx, device=device), t64(s, device), alpha=2.0), expected)
    y = x.clone()
    assert y.index_add_(0, rc.tensor(idx, dtype=rc.int32, device=device), t64(s, device), alpha=2.0) is y
    assert_close(y, expected)
    s1 = RNG.standard_normal((4, 3))
    expected1 = a.copy()
    np.add.at(expected1.T, [2, 1, 2], s1.T)
    assert_close(x.index_add(1, rc.tensor([2, 1, 2], device=device), t64(s1, device)), expected1)
    with pytest.raises(RuntimeError, match="Number of indices"):
        x.index_add_(0, rc.tensor([0], device=device), t64(s, device))
    with pytest.raises(RuntimeError, match="int32/int64"):
        x.index_add_(0, rc.tensor([0.0], device=device), t64(s[:1], device))
    with pytest.raises(IndexError, match="out of range"):
        x.index_add(0, rc.tensor([-1], device=device), t64(s[:1], device))


def test_index_add_grad(device):
    x = t64(RNG.standard_normal((4, 3)), device, True)
    s = t64(RNG.standard_normal((4, 5)), device, True)
    idx = rc.tensor([2, 0, 2, 1, 0], device=device)
    assert gradcheck(lambda a, b: rc.index_add(a, 1, idx[:3], b[:, :3], alpha=-1.5), (x, s))
    assert gradcheck(lambda a, b: (a * 1.0).index_add_(1, idx[:3], b[:, :3]), (x, s))


def test_index_put(device):
    a = np.zeros((3, 4))
    rows, cols = np.array([0, 2, 0]), np.array([1, 3, 1])
    vals = np.array([1.0, 2.0, 3.0])
    x = t64(a, device)
    key = (rc.tensor(rows, device=device), rc.tensor(cols, device=device))
    acc = a.copy()
    np.add.at(acc, (rows, cols), vals)
    assert_close(x.index_put(key, t64(vals, device), accumulate=True), acc)
    y = x.clone()
    assert y.index_put_(key, t64(vals, device), accumulate=True) is y
    assert_close(y, acc)
    plain = a.copy()
    plain[rows[1:], cols[1:]] = vals[1:]
    assert_close(rc.index_put(x, (key[0][1:], key[1][1:]), t64(vals[1:], device)), plain)
    # accumulate over whole rows, and with a bool mask
    racc = a.copy()
    np.add.at(racc, [1, 1], np.ones(4))
    assert_close(x.index_put((rc.tensor([1, 1], device=device),), t64(np.ones(4), device), accumulate=True), racc)
    mask = np.array([True, False, True])
    macc = a.copy()
    macc[mask] += 5.0
    assert_close(x.index_put((rc.tensor(mask, device=device),), t64(5.0, device), True), macc)


def test_index_put_grad(device):
    x = t64(RNG.standard_normal((3, 4)), device, True)
    v = t64(RNG.standard_normal(3), device, True)
    key = (rc.tensor([0, 2, 0], device=device), rc.tensor([1, 3, 1], device=device))
    assert gradcheck(lambda a, b: rc.index_put(a, key, b, accumulate=True), (x, v))
    assert gradcheck(lambda a, b: (a * 1.0).index_put_(key, b, accumulate=True), (x, v))
    assert gradcheck(lambda a, b: (a * 1.0).index_put_((key[0][1:], key[1][1:]), b[1:]), (x, v))


def test_addcmul_addcdiv(device):
    a, b, c = (RNG.standard_normal((2, 3)) for _ in range(3))
    c = np.abs(c) + 0.5
    x, y, z = (t64(v, device, True) for v in (a, b, c))
    assert_close(rc.addcmul(x, y, z, value=0.5), a + 0.5 * b * c)
    assert_close(x.addcdiv(y, z, value=-2.0), a - 2.0 * b / c)
    w = x.detach().clone()
    assert w.addcmul_(y.detach(), z.detach(), value=3) is w
    assert_close(w, a + 3 * b * c)
    w.addcdiv_(y.detach(), z.detach())
    assert_close(w, a + 3 * b * c + b / c)
    assert gradcheck(lambda p, q, r: rc.addcmul(p, q, r, value=0.5), (x, y, z))
    assert gradcheck(lambda p, q, r: rc.addcdiv(p, q, r, value=0.5), (x, y, z))
    assert gradcheck(lambda p, q, r: (p * 1.0).addcdiv_(q, r, value=2.0).addcmul_(q, r), (x, y, z))
    with pytest.raises(RuntimeError, match=r"addcmul_: output with shape \[2, 3\]"):
        w.addcmul_(y.detach()[None], z.detach())
    with pytest.raises(RuntimeError, match="Integer division"):
        rc.addcdiv(rc.ones(2, dtype=rc.int64, device=device), rc.ones(2, dtype=rc.int64, device=device),
                   rc.ones(2, dtype=rc.int64, device=device))


# -- out= ------------------------------------------------------------------------------------------


def test_out_writes_and_returns_out(device):
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    x = rc.tensor(a, device=device)
    out = rc.empty(2, 3, device=device)
    assert rc.add(x, x, out=out) is out
    assert_close(out, a + a)
    assert rc.mul(x, 2.0, out=out) is out and np.allclose(out.numpy(), a * 2)
    o = rc.empty(0, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty out is resized silently
        rc.matmul(x, x.t(), out=o)
    assert_close(o, a @ a.T, rtol=1e-5, atol=1e-5)
    o2 = rc.empty(5, device=device)
    with pytest.warns(UserWarning, match="resized"):
        rc.sum(x, 1, out=o2)
    assert_close(o2, a.sum(1), rtol=1e-5, atol=1e-5)
    # into a wider dtype is fine; float into int is refused
    d = rc.empty(2, 3, dtype=F64, device=device)
    rc.exp(x, out=d)
    assert_close(d, np.exp(a.astype(np.float64)), rtol=1e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        rc.sub(x, x, out=rc.empty(2, 3, dtype=rc.int64, device=device))
    s = rc.empty(0, dtype=rc.int64, device=device)
    rc.sum(rc.tensor([[1.5, 2.5], [3.0, 0.5]], device=device), 1, out=s)  # sums in out's dtype
    assert_close(s, np.array([3, 3]))
    vals, idx = rc.empty(0, device=device), rc.empty(0, dtype=rc.int64, device=device)
    r = rc.max(x, 1, out=(vals, idx))
    assert r.values is vals and r.indices is idx
    assert_close(vals, a.max(1))
    assert_close(idx, a.argmax(1))
    c = rc.empty(0, device=device)
    rc.cat([x, x], 0, out=c)
    assert_close(c, np.concatenate([a, a]))
    with pytest.warns(UserWarning, match="resized"):
        rc.where(x > 0, x, 0.0, out=c)
    assert_close(c, np.where(a > 0, a, 0))
    rc.clamp(x, -0.1, 0.1, out=c)
    assert_close(c, np.clip(a, -0.1, 0.1))


def test_out_factories_take_out_dtype(device):
    f = rc.empty(0, dtype=F64, device=device)
    assert rc.arange(5, out=f) is f and f.dtype == F64
    assert_close(f, np.arange(5.0))
    i = rc.empty(3, dtype=rc.int64, device=device)
    with pytest.warns(UserWarning, match="resized"):
        rc.zeros(2, 2, out=i)
    assert_close(i, np.zeros((2, 2), dtype=np.int64))
    with pytest.warns(UserWarning, match="resized"):
        rc.full((3,), 7, out=i)
    assert_close(i, np.full(3, 7))
    r = rc.empty(0, device=device)
    rc.manual_seed(0)
    rc.randn(4, out=r)
    rc.manual_seed(0)
    assert_close(r, rc.randn(4, device=device).numpy())
    with pytest.warns(UserWarning, match="resized"):
        rc.ones(size=(2,), out=r)
    assert_close(r, np.ones(2, dtype=np.float32))


def test_out_refuses_autograd(device):
    x = rc.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"add\(\): functions with out=\.\.\. arguments don't support"):
        rc.add(x, x, out=rc.empty(2, device=device))
    with pytest.raises(RuntimeError, match="out="):
        rc.zeros(2, device=device, out=x)
    with pytest.raises(RuntimeError, match="out="):
        rc.cat([x, x], out=rc.empty(0, device=device))
    with rc.no_grad():
        o = rc.empty(2, device=device)
        rc.add(x, x, out=o)
    assert_close(o, np.full(2, 2.0, dtype=np.float32))


# -- keyword forms -----------------------------------------------------------------------------------


def test_factory_keyword_forms(device):
    assert rc.zeros(size=(2, 3), device=device).shape == (2, 3)
    assert rc.ones(size=[4], device=device).shape == (4,)
    assert rc.empty(size=(1, 2), device=device).shape == (1, 2)
    assert rc.rand(size=(3,), device=device).shape == (3,)
    assert rc.randn(size=(2, 2), device=device).shape == (2, 2)
    assert_close(rc.full(size=(2,), fill_value=3.0, device=device), np.full(2, 3.0, dtype=np.float32))
    assert_close(rc.arange(start=1, end=7, step=2, device=device), np.arange(1, 7, 2))
    assert_close(rc.arange(end=4, device=device), np.arange(4))
    with pytest.raises(TypeError, match="size"):
        rc.zeros(2, size=(2,))
    for r, lo, hi, shape in ((rc.randint(high=10, size=(50,), device=device), 0, 10, (50,)),
                             (rc.randint(3, 10, (2, 25), device=device), 3, 10, (2, 25)),
                             (rc.randint(10, size=(50,), device=device), 0, 10, (50,)),
                             (rc.randint(5, (50,), device=device), 0, 5, (50,))):
        v = r.numpy()
        assert v.shape == shape and v.dtype == np.int64 and v.min() >= lo and v.max() < hi
    x = rc.ones(2, dtype=F64, device=device)
    assert x.new_zeros((3,)).dtype == F64 and x.new_full((2,), 4.0).numpy().tolist() == [4.0, 4.0]
    assert x.new_ones(size=(2, 1)).shape == (2, 1) and x.new_empty(size=[3]).dtype == F64
    assert_close(x.new_zeros(2, 2), np.zeros((2, 2)))
    assert_close(x.new_tensor([1, 2]), np.array([1.0, 2.0]))


# -- against torch -----------------------------------------------------------------------------------


def test_matches_torch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((3, 4))
    x, tx = rc.tensor(a), torch.tensor(a)
    assert_close(rc.cdist(x[None], x[None] * 2), torch.cdist(tx[None], tx[None] * 2).numpy())
    for ord in ("fro", 1, -1, math.inf):
        assert_close(rc.linalg.matrix_norm(x, ord), torch.linalg.matrix_norm(tx, ord).numpy())
    assert_close(rc.linalg.norm(x, 3, dim=1), torch.linalg.norm(tx, 3, dim=1).numpy())
    i = np.array([[1, 2], [1, 2], [0, 1]])
    for got, exp in zip(rc.unique(rc.tensor(i), dim=0, return_inverse=True, return_counts=True),
                        torch.unique(torch.tensor(i), dim=0, return_inverse=True, return_counts=True)):
        assert_close(got, exp.numpy())
    assert_close(rc.repeat_interleave(x, rc.tensor([0, 1, 2, 1]), dim=1),
                 torch.repeat_interleave(tx, torch.tensor([0, 1, 2, 1]), dim=1).numpy())
    assert_close(rc.diag_embed(x, 1, 0, 2), torch.diag_embed(tx, 1, 0, 2).numpy())
    idx = np.array([2, 0, 2])
    s = RNG.standard_normal((3, 3))
    assert_close(rc.index_add(x, 1, rc.tensor(idx), rc.tensor(s), alpha=2),
                 tx.index_add(1, torch.tensor(idx), torch.tensor(s), alpha=2).numpy())


def test_norms_of_half_tensors_accumulate_in_float32_as_pytorch():
    # 300**2 overflows float16: a norm summed in half would be inf
    x = rc.full((4,), 300.0, dtype=rc.float16, requires_grad=True)
    for n, want in [(x.norm(), 600.0), (rc.linalg.vector_norm(x), 600.0),
                    (rc.linalg.vector_norm(x, 3), 300.0 * 4 ** (1 / 3)),
                    (rc.linalg.matrix_norm(x.reshape(2, 2)), 600.0)]:
        assert n.dtype is rc.float16
        np.testing.assert_allclose(float(n), want, rtol=1e-3)
    rc.linalg.vector_norm(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 0.5), rtol=1e-3)
    p = rc.nn.Parameter(rc.ones(4, dtype=rc.float16))
    p.grad = rc.full((4,), 300.0, dtype=rc.float16)
    total = rc.nn.utils.clip_grad_norm_([p], 1.0)
    assert total.dtype is rc.float16 and float(total) == 600.0
    np.testing.assert_allclose(p.grad.numpy(), np.full(4, 0.5), rtol=1e-3)


def test_clip_grad_norm_of_order_zero_counts_nonzero_gradients_as_pytorch():
    a, b = rc.nn.Parameter(rc.ones(2)), rc.nn.Parameter(rc.ones(1, 2))
    a.grad, b.grad = rc.tensor([1.0, 1.0]), rc.tensor([[2.0, 4.0]])
    # PyTorch: the 0-"norm" of the per-tensor 0-norms (2 and 2) is 2, not 4
    assert float(rc.nn.utils.clip_grad_norm_([a, b], 1.0, norm_type=0)) == 2.0
    np.testing.assert_allclose(a.grad.numpy(), [0.5, 0.5], rtol=1e-5)
