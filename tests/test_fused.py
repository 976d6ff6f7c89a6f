"""Fused kernels and fast paths that real models lean on: the vectorised ``erf``,
scatter-add with heavy repeats (embedding and indexing backward), ``gelu`` /
``gelu_backward``, ``layer_norm`` as one node, and the view-copy backward of
slicing. Values against NumPy / ``math.erf``; gradients by ``gradcheck`` on
every device (the ``prims`` device runs the decompositions)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck, gradgradcheck
from rtxcore.dispatch import ops as O
from rtxcore.ops import elementwise as E
from rtxcore.testing import assert_close

from .dtypes_table import need

_verf = np.vectorize(math.erf, otypes=[np.float64])


def _wide_range() -> np.ndarray:
    mags = np.concatenate([np.geomspace(1e-30, 8.0, 3000), np.linspace(0.0, 7.0, 3001)])
    return np.concatenate([mags, -mags])


# -- erf ---------------------------------------------------------------------------------


def test_cpu_erf_float64_within_an_ulp_of_math_erf():
    from rtx_cpu.kernels import erf

    x = np.concatenate([_wide_range(), [0.0, -0.0, 5e-324, 1e-300, 27.0, -30.0]])
    out = np.empty_like(x)
    erf(out, x)
    ref = _verf(x)
    assert np.all(np.abs(out - ref) <= np.spacing(np.abs(ref)) + 1e-323)
    assert np.signbit(out[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


def test_cpu_erf_float32_and_float16_accuracy():
    from rtx_cpu.kernels import erf

    x32 = _wide_range().astype(np.float32)
    out = np.empty_like(x32)
    erf(out, x32)
    ref = _verf(x32.astype(np.float64))
    rel = np.abs(out - ref) / np.maximum(np.abs(ref), np.finfo(np.float32).tiny)
    assert rel.max() < 5e-7  # about 4 float32 ulps at worst (near |x| = 3.3)
    x16 = x32.astype(np.float16)
    out16 = np.empty_like(x16)
    erf(out16, x16)
    ref16 = _verf(x16.astype(np.float64))
    assert np.all(np.abs(out16.astype(np.float64) - ref16)
                  <= np.spacing(np.abs(ref16).astype(np.float16)).astype(np.float64))


def test_cpu_erf_special_values_and_strided_input():
    from rtx_cpu.kernels import erf

    for dt in (np.float32, np.float64):
        x = np.array([np.inf, -np.inf, np.nan, 10.0, -10.0], dt)
        out = np.empty_like(x)
        erf(out, x)
        assert out[0] == 1 and out[1] == -1 and np.isnan(out[2]) and out[3] == 1 and out[4] == -1
        base = np.linspace(-3, 3, 40, dtype=dt).reshape(5, 8)
        view = base.T[::2]
        out = np.empty(view.shape, dt)
        erf(out, view)
        assert_close(out, _verf(view.astype(np.float64)).astype(dt), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_erf_large_tensor_every_device(device, name):
    need(device, name)
    x = np.random.default_rng(0).standard_normal(20000).astype(name) * 2
    got = rc.erf(rc.tensor(x, device=device)).cpu().numpy()
    tol = {"float32": 1e-6, "float64": 5e-15}[name]
    assert_close(got, _verf(x.astype(np.float64)).astype(name), rtol=tol, atol=tol)


# -- scatter_add ---------------------------------------------------------------------------


def _rows_index(rng, n_out, shape, dim):
    v = rng.integers(0, n_out, shape[dim])
    sh = [1] * len(shape)
    sh[dim] = shape[dim]
    return np.broadcast_to(v.reshape(sh), shape)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
@pytest.mark.parametrize("case", [
    ((65, 8), (1000, 8), 0, True),      # embedding backward: rows, few targets
    ((7, 300, 4), (3, 900, 2), 1, True),  # rows along a middle dim, index smaller off dim
    ((65, 8), (1000, 8), 0, False),
    ((5, 300, 4), (5, 900, 3), 1, False),
    ((50,), (4000,), 0, False),         # flat gradient of a picking op
    ((200000,), (600,), 0, False),      # a few sources into a big target
    ((300, 8), (1000, 8), 0, True),     # rows with many targets
])
def test_cpu_scatter_add_matches_add_at_with_repeats(dtype, case):
    from rtx_cpu.kernels import scatter_add
    from rtxcore.dispatch import xp

    _xp_scatter_add = xp.kernels(np)["scatter_add"]

    rng = np.random.default_rng(3)
    out_shape, idx_shape, dim, rows = case
    idx = (_rows_index(rng, out_shape[dim], idx_shape, dim) if rows
           else rng.integers(0, out_shape[dim], idx_shape))
    src = (rng.standard_normal(idx_shape) * 4).astype(dtype)
    out0 = (rng.standard_normal(out_shape) * 4).astype(dtype)
    got = out0.copy()
    scatter_add(got, dim, idx, src)
    wide = np.float64 if dtype != "int64" else np.int64
    ref = out0.astype(wide)
    _xp_scatter_add(ref, dim, idx, src.astype(wide))  # np.add.at, exact in float64
    if dtype == "int64":
        assert np.array_equal(got, ref)
    else:
        tol = {"float16": 4e-3, "float32": 1e-5, "float64": 1e-12}[dtype]
        assert_close(got.astype(np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_cpu_scatter_add_into_a_strided_target():
    from rtx_cpu.kernels import scatter_add

    rng = np.random.default_rng(4)
    base = np.zeros((6, 10))
    out = base.T  # (10, 6), not C-contiguous
    idx = rng.integers(0, 10, (500, 6))
    src = rng.standard_normal((500, 6))
    scatter_add(out, 0, idx, src)
    ref = np.zeros((10, 6))
    np.add.at(ref, (idx, np.arange(6)[None, :]), src)
    assert_close(base.T, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_scatter_add_heavy_repeats_every_device(device, name):
    need(device, name)
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 4, (300, 5))
    src = rng.standard_normal((300, 5)).astype(name)
    x = rng.standard_normal((4, 5)).astype(name)
    got = rc.tensor(x, device=device).scatter_add(0, rc.tensor(idx, device=device),
                                                   rc.tensor(src, device=device))
    ref = x.astype(np.float64)
    np.add.at(ref, (idx, np.arange(5)[None, :]), src.astype(np.float64))
    assert_close(got.cpu().numpy(), ref.astype(name), rtol=1e-5, atol=1e-5)


def test_embedding_backward_with_repeated_indices(device):
    need(device, "float64")
    rng = np.random.default_rng(6)
    w = rng.standard_normal((11, 6))
    idx = rng.integers(0, 11, (40, 8))
    g = rng.standard_normal((40, 8, 6))
    W = rc.tensor(w, device=device, requires_grad=True)
    out = F.embedding(rc.tensor(idx, device=device), W)
    out.backward(rc.tensor(g, device=device))
    ref = np.zeros_like(w)
    np.add.at(ref, idx.reshape(-1), g.reshape(-1, 6))
    assert_close(out.detach().cpu().numpy(), w[idx])
    assert_close(W.grad.cpu().numpy(), ref, rtol=1e-12, atol=1e-12)


# -- gelu ----------------------------------------------------------------------------------


def _gelu_ref(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _verf(x / math.sqrt(2)))


def _gelu_grad_ref(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        t = np.tanh(k * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)
    return 0.5 * (1 + _verf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_values_and_gradient(device, approximate):
    need(device, "float64")
    x = np.linspace(-6, 6, 61)
    t = rc.tensor(x, device=device, requires_grad=True)
    y = F.gelu(t, approximate=approximate)
    y.backward(rc.ones_like(y))
    assert_close(y.detach().cpu().numpy(), _gelu_ref(x, approximate), rtol=1e-12, atol=1e-14)
    assert_close(t.grad.cpu().numpy(), _gelu_grad_ref(x, approximate), rtol=1e-12, atol=1e-14)
    x32 = rc.tensor(x.astype(np.float32), device=device, requires_grad=True)
    y32 = F.gelu(x32, approximate=approximate)
    y32.backward(rc.ones_like(y32))
    assert_close(y32.detach().cpu().numpy(), _gelu_ref(x, approximate).astype(np.float32),
                 rtol=2e-6, atol=2e-6)
    assert_close(x32.grad.cpu().numpy(), _gelu_grad_ref(x, approximate).astype(np.float32),
                 rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck_twice(device, approximate):
    need(device, "float64")
    x = rc.tensor(np.random.default_rng(7).uniform(-3, 3, (3, 4)), device=device,
                  requires_grad=True)
    assert gradcheck(lambda a: F.gelu(a, approximate=approximate), (x,))
    assert gradgradcheck(lambda a: F.gelu(a, approximate=approximate), (x,))


def test_gelu_backward_kernel_matches_decomposition(device):
    need(device, "float64")
    rng = np.random.default_rng(8)
    xs = np.concatenate([rng.uniform(-6, 6, 30), [0.0, -0.0, 1e-300, -1e-40, 1e-20, -30.0, 30.0]])
    x = rc.tensor(xs, device=device)
    g = rc.tensor(rng.standard_normal(xs.shape), device=device)
    for approximate in ("none", "tanh"):
        with rc.no_grad():  # the backend's kernel, where it has one (reads Phi off y)
            fused = E.gelu_backward(g, x, approximate, F.gelu(x, approximate=approximate))
        with rc.enable_grad():  # recorded ops of x: the decomposition
            decomposed = E.gelu_backward(g, x.requires_grad_(), approximate)
        x.requires_grad_(False)
        got = fused.cpu().numpy()
        assert np.isfinite(got).all()
        assert_close(got, decomposed.detach().cpu().numpy(), rtol=1e-12, atol=1e-14)
        assert_close(got, g.cpu().numpy() * _gelu_grad_ref(xs, approximate), rtol=1e-12,
                     atol=1e-14)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="gelu: approximate"):
        F.gelu(rc.ones(2), approximate="fast")


# -- layer_norm ----------------------------------------------------------------------------


def _ln_ref(x, k, w, b, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_values_and_gradcheck(device, affine):
    need(device, "float64")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 5))
    w = rng.standard_normal((4, 5)) if affine else None
    b = rng.standard_normal((4, 5)) if affine else None
    X = rc.tensor(x, device=device, requires_grad=True)
    args = [X]
    if affine:
        args += [rc.tensor(a, device=device, requires_grad=True) for a in (w, b)]

    def f(*ts):
        return F.layer_norm(ts[0], (4, 5), *ts[1:])

    assert_close(f(*args).detach().cpu().numpy(), _ln_ref(x, 2, w, b), rtol=1e-12, atol=1e-12)
    assert gradcheck(f, tuple(args))
    assert gradgradcheck(f, tuple(args))


def test_layer_norm_float32_and_gradients_match_torch(device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    x = rng.standard_normal((6, 16)).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    g = rng.standard_normal((6, 16)).astype(np.float32)
    ts = [rc.tensor(a, device=device, requires_grad=True) for a in (x, w, b)]
    tt = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.layer_norm(ts[0], (16,), ts[1], ts[2])
    ty = torch.nn.functional.layer_norm(tt[0], (16,), tt[1], tt[2])
    y.backward(rc.tensor(g, device=device))
    ty.backward(torch.tensor(g))
    assert_close(y.detach().cpu().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, ta in zip(ts, tt):
        assert_close(a.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_layer_norm_module_records_one_node():
    ln = rc.nn.LayerNorm(8)
    y = ln(rc.randn(2, 8, requires_grad=True))
    # every edge out of the output's node goes straight to a leaf
    nexts = [e[0] for e in y.grad_fn.next_functions if e is not None and e[0] is not None]
    assert len(nexts) == 3
    assert all("AccumulateGrad" in type(f).__name__ for f in nexts), nexts


# -- composites list and the backward of views -----------------------------------------------


def test_new_composites_are_declared():
    for op in ("gelu", "gelu_backward", "layer_norm"):
        assert O.is_known_op(op) and op in O.COMPOSITES


@pytest.mark.parametrize("pick", [
    lambda t: t.split(2, dim=1)[1],
    lambda t: t.narrow(0, 1, 2),
    lambda t: t.select(1, 3),
    lambda t: t[1:, ::2],
    lambda t: t[..., 2],
    lambda t: t.diagonal(),
    lambda t: t[[0, 2, 2]],  # advanced: the scatter path, repeats accumulate
])
def test_backward_of_picking_ops(device, pick):
    need(device, "float64")
    x = np.arange(20.0).reshape(4, 5)
    t = rc.tensor(x, device=device, requires_grad=True)
    y = pick(t)
    g = np.random.default_rng(11).standard_normal(tuple(y.shape))
    y.backward(rc.tensor(g, device=device))
    # expected: the same pick on an index grid says where each gradient lands
    pos = pick(rc.tensor(np.arange(20).reshape(4, 5), device=device)).cpu().numpy()
    ref = np.zeros(20)
    np.add.at(ref, pos.reshape(-1), g.reshape(-1))
    assert_close(t.grad.cpu().numpy(), ref.reshape(4, 5), rtol=1e-12, atol=1e-12)
    assert gradgradcheck(lambda a: pick(a) * pick(a), (rc.tensor(x, device=device,
                                                                  requires_grad=True),))


# -- reductions over small windows (pooling) --------------------------------------------------


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_cpu_window_reductions_fold_like_numpy(op):
    from rtx_cpu.kernels import KERNELS

    rng = np.random.default_rng(12)
    x = rng.standard_normal((16, 8, 8, 8)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    s = x.strides
    win = np.lib.stride_tricks.as_strided(
        x, (16, 8, 4, 4, 2, 2), (s[0], s[1], 2 * s[2], 2 * s[3], s[2], s[3]))  # 2x2 windows
    out = np.empty((16, 8, 4, 4, 1, 1), np.float32)
    KERNELS[op](out, win, (4, 5))
    ref = getattr(np, op)(win.astype(np.float64), axis=(4, 5), keepdims=True)
    assert np.isnan(out[0, 0, 0, 0]).all()
    assert_close(out, ref.astype(np.float32), rtol=1e-5, atol=1e-6, equal_nan=True)
    ints = rng.integers(-3, 4, (40, 50, 3))
    iout = np.empty((40, 50, 1), np.int64)
    KERNELS[op](iout, ints, (2,))
    assert np.array_equal(iout, getattr(np, op)(ints, axis=2, keepdims=True))
