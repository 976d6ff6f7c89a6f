"""rtx_cpu's blocked composites over threads: softmax / log_softmax and their backwards
(``softmax_kernels``), GELU in both forms and its backward, and erf (``erf_kernels``).

Each kernel gives the same bits on 1, 2 and 4 threads and in any blocks (the thresholds
are made small here, so that small inputs take every path of a large one), equals the
whole-array steps it replaces bit for bit, and agrees with float64 NumPy references,
``gradcheck`` in float64 and PyTorch where it is importable."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck

pytest.importorskip("rtx_cpu")
from rtx_cpu import erf_kernels as EK  # noqa: E402
from rtx_cpu import softmax_kernels as SK  # noqa: E402

from .test_cpu_threads import THREADS, _on_threads, _same_bits  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)
# rows shorter and longer than _SM_UNBUFFERED_MIN (the small-buffer steps), one of a
# block and a partial one, a 3-d input seen as rows
SHAPES = [(203, 96), (37, 600), (3, 5000), (6, 7, 40)]


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few rows (or 1000 elements), threads from 4096 elements."""
    monkeypatch.setattr(SK, "_SM_BLOCK", 8 * 96 + 50)  # 8 rows of 96
    monkeypatch.setattr(SK, "_SM_SMALL", 1000)
    monkeypatch.setattr(SK, "_SM_PARALLEL_MIN", 4096)
    monkeypatch.setattr(SK, "_SM_BACKWARD_PARALLEL_MIN", 4096)
    monkeypatch.setattr(EK, "_EW_BLOCK", 1000)
    monkeypatch.setattr(EK, "_EW_PARALLEL_MIN", 4096)


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of 2 rows of 10 (or 16 elements), threads from 32 elements: gradcheck's
    small inputs (an evaluation per element) take every path of a large one."""
    monkeypatch.setattr(SK, "_SM_BLOCK", 25)
    monkeypatch.setattr(SK, "_SM_SMALL", 20)
    monkeypatch.setattr(SK, "_SM_PARALLEL_MIN", 32)
    monkeypatch.setattr(SK, "_SM_BACKWARD_PARALLEL_MIN", 32)
    monkeypatch.setattr(EK, "_EW_BLOCK", 16)
    monkeypatch.setattr(EK, "_EW_PARALLEL_MIN", 32)


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    return x, g


def _softmax_args(name, shape, dtype, seed=0):
    """The kernel's inputs: x for the forwards, (g, y) for the backwards."""
    x, g = _data(shape, dtype, seed)
    if name == "softmax_backward":
        y = np.empty_like(x)
        SK._XP["softmax"](y, x, x.ndim - 1)
        return g, y
    if name == "log_softmax_backward":
        y = np.empty_like(x)
        SK._XP["log_softmax"](y, x, x.ndim - 1)
        return g, y
    return (x,)


def _whole_array(name, *args):
    """The steps the kernels replace, on whole arrays: the array-module table's
    forwards, the core's backward rules (sums along the last axis)."""
    if name in ("softmax", "log_softmax"):
        out = np.empty_like(args[0])
        SK._XP[name](out, args[0], args[0].ndim - 1)
        return out
    g, y = args
    if name == "softmax_backward":
        return y * (g - (g * y).sum(-1, keepdims=True))
    return g - np.exp(y) * g.sum(-1, keepdims=True)


SOFTMAX_KERNELS = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward"]


# -- softmax family ----------------------------------------------------------------------


@pytest.mark.parametrize("name", SOFTMAX_KERNELS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_kernels_same_bits_on_any_thread_count(small_blocks, submitted, name, dtype):
    kernel = getattr(SK, name)
    cases = [_softmax_args(name, s, dtype, seed) for seed, s in enumerate(SHAPES)]

    def run():
        outs = []
        for args in cases:
            out = np.empty_like(args[0])
            kernel(out, *args, args[0].ndim - 1)
            outs.append(out)
        return outs

    results = _on_threads(run)
    assert any(lo > 0 for lo, _ in submitted)  # the threaded path ran
    for n in THREADS[1:]:
        for got, want in zip(results[n], results[1]):
            _same_bits(got, want)
    # the same steps as the whole arrays': equal bit for bit (sums along rows of 17 or
    # more elements: NumPy's pairwise sum of each row, in any block)
    for args, got in zip(cases, results[1]):
        _same_bits(got, _whole_array(name, *args))


def _ref64(name, *args):
    """float64 references of the kernels (from their float32 inputs)."""
    a = [np.asarray(v, np.float64) for v in args]
    if name == "softmax":
        e = np.exp(a[0] - a[0].max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    if name == "log_softmax":
        s = a[0] - a[0].max(-1, keepdims=True)
        return s - np.log(np.exp(s).sum(-1, keepdims=True))
    return _whole_array(name, *a)


@pytest.mark.parametrize("name", SOFTMAX_KERNELS)
def test_softmax_kernels_against_float64(small_blocks, name):
    for seed, shape in enumerate(SHAPES):
        args = _softmax_args(name, shape, np.float32, seed)
        out = np.empty_like(args[0])
        getattr(SK, name)(out, *args, len(shape) - 1)
        want = _ref64(name, *args)
        # a few roundings of each step (exp's 1 ulp, a row's sum of n terms)
        scale = np.abs(want).max(-1, keepdims=True)
        tol = 8 * EPS32 * max(1.0, np.log2(shape[-1])) * scale
        assert (np.abs(out - want) <= tol).all(), (shape, np.abs(out - want).max())


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_special_rows(small_blocks, name):
    # inf, -inf, nan and all -inf rows: the whole-array steps' values, bit for bit
    x = np.random.default_rng(1).standard_normal((40, 128)).astype(np.float32)
    x[1, 5] = np.inf
    x[2, :] = -np.inf
    x[3, 7] = np.nan
    x[4, ::2] = -np.inf
    x[5, :] = 1e30
    out = np.empty_like(x)
    getattr(SK, name)(out, x, 1)
    _same_bits(out, _whole_array(name, x))


@pytest.mark.parametrize("name", SOFTMAX_KERNELS)
def test_softmax_kernels_other_layouts_take_the_whole_array_steps(small_blocks, name):
    # another axis, strided rows, float16: the whole-array steps (values as the formulas)
    for dtype in (np.float16, np.float32):
        args = _softmax_args(name, (50, 80), dtype)
        for axis, views in ((0, args), (1, tuple(a.T.copy().T for a in args)),
                            (1, tuple(a[:, ::2] for a in args))):
            out = np.empty(views[0].shape, dtype)
            getattr(SK, name)(out, *views, axis)
            wide = [v.astype(np.float64) for v in views]
            want = _ref64(name, *(np.moveaxis(v, axis, -1) for v in wide))
            want = np.moveaxis(want, -1, axis)
            tol = (8e-3 if dtype == np.float16 else 1e-5) * max(1.0, np.abs(want).max())
            np.testing.assert_allclose(out, want, rtol=0, atol=tol)


@pytest.mark.parametrize("fn", [rc.softmax, rc.log_softmax])
def test_softmax_gradcheck_float64(tiny_blocks, submitted, fn):
    rng = np.random.default_rng(2)
    x = rc.tensor(rng.standard_normal((7, 10)), requires_grad=True)
    w = rc.tensor(rng.standard_normal((7, 10)))
    assert gradcheck(lambda a: fn(a, -1) * w, (x,))
    # and the kernel's backward agrees with the recorded formula (create_graph)
    y = fn(x, -1)
    (got,) = rc.autograd.grad(y, x, w)
    (want,) = rc.autograd.grad(fn(x, -1), x, w, create_graph=True)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert any(lo > 0 for lo, _ in submitted)  # (the blocks, over threads)


def test_cross_entropy_gradcheck_float64(tiny_blocks):
    rng = np.random.default_rng(3)
    x = rc.tensor(rng.standard_normal((6, 11)), requires_grad=True)
    t = rc.tensor(rng.integers(0, 11, 6))
    assert gradcheck(lambda a: F.cross_entropy(a, t), (x,))
    assert gradcheck(lambda a: F.cross_entropy(a, t, reduction="none"), (x,))


# -- GELU and erf ------------------------------------------------------------------------


def _gelu_inputs(dtype, n=30011, seed=4):
    x, g = _data((n,), dtype, seed)
    x[:9] = [0.0, -0.0, 1e-38, -1e-31, 7.0, -7.0, np.inf, -np.inf, np.nan]
    return x, g


def _erf_kernels():
    """(name, kernel(out, x, g, y_none, y_tanh)) of every threaded erf-family kernel."""
    return [
        ("erf", lambda o, x, g, yn, yt: EK.erf(o, x)),
        ("gelu", lambda o, x, g, yn, yt: EK.gelu(o, x, "none")),
        ("gelu tanh", lambda o, x, g, yn, yt: EK.gelu(o, x, "tanh")),
        ("gelu_backward", lambda o, x, g, yn, yt: EK.gelu_backward(o, g, x, yn, "none")),
        ("gelu_backward tanh", lambda o, x, g, yn, yt: EK.gelu_backward(o, g, x, yt, "tanh")),
    ]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_erf_family_same_bits_on_any_thread_count_and_block(small_blocks, submitted,
                                                            monkeypatch, dtype):
    x, g = _gelu_inputs(dtype)
    yn, yt = np.empty_like(x), np.empty_like(x)
    EK.gelu(yn, x, "none")
    EK.gelu(yt, x, "tanh")

    def run():
        outs = []
        for _, k in _erf_kernels():
            out = np.empty_like(x)
            k(out, x, g, yn, yt)
            outs.append(out)
        return outs

    results = _on_threads(run)
    if dtype != np.float64:  # (erf of float64 is one whole-array call)
        assert any(lo > 0 for lo, _ in submitted)
    for n in THREADS[1:]:
        for got, want in zip(results[n], results[1]):
            _same_bits(got, want)
    # one block for everything: the same bits
    monkeypatch.setattr(EK, "_EW_BLOCK", 1 << 20)
    for got, want in zip(run(), results[1]):
        _same_bits(got, want)


def _gelu_ref(x, approximate):
    from math import erf, pi, sqrt

    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


def _gelu_grad_ref(x, approximate):
    from math import erf, pi, sqrt

    if approximate == "tanh":
        c = sqrt(2 / pi)
        t = np.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    return 0.5 * (1 + np.vectorize(erf)(x / sqrt(2))) + x * np.exp(-x * x / 2) / sqrt(2 * pi)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_blocks_against_float64(small_blocks, approximate):
    x, g = _gelu_inputs(np.float32)
    x, g = x[9:], g[9:]  # (finite values)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    y = np.empty_like(x)
    EK.gelu(y, x, approximate)
    want = _gelu_ref(x64, approximate)
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=2e-6)
    d = np.empty_like(x)
    EK.gelu_backward(d, g, x, y, approximate)
    np.testing.assert_allclose(d, g64 * _gelu_grad_ref(x64, approximate), rtol=1e-5, atol=4e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck_float64_in_blocks(tiny_blocks, submitted, approximate):
    x = rc.tensor(np.random.default_rng(5).uniform(-4, 4, (5, 13)), requires_grad=True)
    assert gradcheck(lambda a: F.gelu(a, approximate=approximate), (x,))
    assert any(lo > 0 for lo, _ in submitted)


# -- against PyTorch ---------------------------------------------------------------------


def _torch_pairs():
    """(rtxcore fn, torch fn) of each composite, forward and backward."""
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    return torch, [
        (lambda a: F.softmax(a, -1), lambda a: TF.softmax(a, -1)),
        (lambda a: F.log_softmax(a, -1), lambda a: TF.log_softmax(a, -1)),
        (lambda a: F.gelu(a), lambda a: TF.gelu(a)),
        (lambda a: F.gelu(a, approximate="tanh"), lambda a: TF.gelu(a, approximate="tanh")),
    ]


def test_blocked_composites_against_pytorch(small_blocks):
    torch, pairs = _torch_pairs()
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((97, 600)) * 3).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    for ours, theirs in pairs:
        a = rc.from_numpy(x.copy()).requires_grad_()
        b = torch.from_numpy(x.copy()).requires_grad_()
        ya, yb = ours(a), theirs(b)
        ya.backward(rc.from_numpy(g))
        yb.backward(torch.from_numpy(g))
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-5,
                                   atol=2e-6)
        # (GELU's gradient reads Phi(x) off y / x: erf's float32 error, up to 4e-7
        # absolute, times |x g| where the gradient itself is about 0)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)
    t = rng.integers(0, 600, 97)
    a = rc.from_numpy(x.copy()).requires_grad_()
    b = torch.from_numpy(x.copy()).requires_grad_()
    la, lb = F.cross_entropy(a, rc.from_numpy(t)), torch.nn.functional.cross_entropy(
        b, torch.from_numpy(t))
    la.backward()
    lb.backward()
    np.testing.assert_allclose(la.item(), lb.item(), rtol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-8)
