"""rtx_cpu's ``batch_norm`` and ``batch_norm_backward`` kernels: a C loop per
channel (``ckernels``) with NumPy forms where it cannot run. Values against
NumPy in float64 and PyTorch, the same bits on any number of threads, gradients
against finite differences, and the core's composite where the kernel is
missing (other backends, ``create_graph``, a traced graph run elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.autograd.gradcheck import gradcheck
from rtxcore.ops.core import ready_device

pytest.importorskip("rtx_cpu")
from rtx_cpu import ckernels, norm_kernels  # noqa: E402

HAS_C = ckernels.function("bn_fwd", np.dtype(np.float32)) is not None

# (N, C), (N, C, L), (N, C, H, W): spatial runs shorter than a lane group, of a
# whole number of them, with a tail, and longer than a chunk
SHAPES = [(16, 10), (4, 3, 7), (32, 128, 4, 4), (8, 6, 5, 7), (4, 5, 17, 19), (2, 3, 300)]


def _reference(x, w, b, g, eps=1e-5):
    """Forward and gradients in float64 NumPy, the textbook formulas."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axes)
    var = x.var(axes)
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean.reshape(shape)) * rstd.reshape(shape)
    y = xhat * w.reshape(shape) + b.reshape(shape)
    gm = g.mean(axes).reshape(shape)
    gxm = (g * xhat).mean(axes).reshape(shape)
    dx = (g - gm - xhat * gxm) * (rstd * w).reshape(shape)
    return y, dx, (g * xhat).sum(axes), g.sum(axes), mean, var


def _inputs(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    c = shape[1]
    x = (r.standard_normal(shape) * 3 + 2).astype(dtype)
    w, b = r.standard_normal(c).astype(dtype), r.standard_normal(c).astype(dtype)
    return x, w, b, r.standard_normal(shape).astype(dtype)


def _run(x, w, b, g, momentum=0.1):
    c = x.shape[1]
    xt = rc.tensor(x, requires_grad=True)
    wt, bt = rc.tensor(w, requires_grad=True), rc.tensor(b, requires_grad=True)
    rm, rv = rc.zeros(c, dtype=xt.dtype), rc.ones(c, dtype=xt.dtype)
    y = F.batch_norm(xt, rm, rv, wt, bt, training=True, momentum=momentum)
    y.backward(rc.tensor(g))
    return [a.detach().numpy() for a in (y, xt.grad, wt.grad, bt.grad, rm, rv)]


@pytest.fixture
def without_kernels():
    """The cpu device without its batch_norm kernels: the core's composite."""
    dev = ready_device("cpu")
    saved = {k: dev.kernels.pop(k) for k in ("batch_norm", "batch_norm_backward")}
    yield
    dev.kernels.update(saved)


@pytest.fixture(params=["c", "numpy"])
def form(request, monkeypatch):
    """Either of the kernel's forms: the C loop, or the NumPy one it falls back to."""
    if request.param == "c":
        if not HAS_C:  # pragma: no cover - CI has a compiler
            pytest.skip("no C compiler")
    else:
        monkeypatch.setattr(ckernels, "function", lambda name, dtype: None)
    return request.param


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_forward_backward_and_running_stats_match_float64_numpy(form, shape, dtype, tol):
    x, w, b, g = _inputs(shape, dtype)
    y, dx, dw, db, rm, rv = _run(x, w, b, g)
    ry, rdx, rdw, rdb, mean, var = _reference(x, w.astype(np.float64), b.astype(np.float64), g)
    count = x.size // x.shape[1]
    for got, want, what in ((y, ry, "y"), (dx, rdx, "dx"), (dw, rdw, "dw"), (db, rdb, "db"),
                            (rm, 0.1 * mean, "running_mean"),
                            (rv, 0.9 + 0.1 * var * count / (count - 1), "running_var")):
        assert got.dtype == dtype, what
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale * 10, err_msg=what)


@pytest.mark.parametrize("shape", [(32, 64, 8, 8), (16, 10)])
def test_the_kernels_agree_with_the_core_composite(shape, without_kernels):
    x, w, b, g = _inputs(shape, np.float32, seed=3)
    dev = ready_device("cpu")
    assert "batch_norm" not in dev.kernels
    composite = _run(x, w, b, g)
    dev.kernels.update({"batch_norm": norm_kernels.batch_norm,
                        "batch_norm_backward": norm_kernels.batch_norm_backward})
    try:
        kernel = _run(x, w, b, g)
    finally:
        for k in ("batch_norm", "batch_norm_backward"):
            dev.kernels.pop(k)
    for got, want in zip(kernel, composite):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    x, w, b, g = _inputs((8, 6, 5, 7), np.float32, seed=5)
    got = _run(x, w, b, g)
    xt = torch.tensor(x, requires_grad=True)
    wt, bt = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    rm, rv = torch.zeros(6), torch.ones(6)
    y = torch.nn.functional.batch_norm(xt, rm, rv, wt, bt, training=True)
    y.backward(torch.tensor(g))
    for mine, theirs in zip(got, (y, xt.grad, wt.grad, bt.grad, rm, rv)):
        np.testing.assert_allclose(mine, theirs.detach().numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.skipif(not HAS_C, reason="no C compiler")
@pytest.mark.parametrize("shape", [(32, 32, 16, 16), (64, 16, 30, 30), (7, 40, 33)])
def test_the_same_bits_on_any_number_of_threads(shape):
    x, w, b, g = _inputs(shape, np.float32, seed=1)
    assert x.size >= ckernels.PARALLEL_MIN or shape == (7, 40, 33)  # (spread over threads)
    old = rc.get_num_threads()
    try:
        runs = {}
        for t in (1, 2, 4):
            rc.set_num_threads(t)
            runs[t] = _run(x, w, b, g)
    finally:
        rc.set_num_threads(old)
    for t in (2, 4):
        for a, c in zip(runs[1], runs[t]):
            assert np.array_equal(a, c), t


def test_without_weight_or_bias_and_on_a_non_contiguous_input(form):
    x, _, _, g = _inputs((6, 4, 5, 3), np.float32, seed=2)
    base = rc.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), requires_grad=True)
    t = base.permute(0, 3, 1, 2)  # (6, 4, 5, 3), channels last in memory
    assert not t.is_contiguous()
    y = F.batch_norm(t, None, None, training=True)
    y.backward(rc.tensor(g))
    ry, rdx, *_ = _reference(x, np.ones(4), np.zeros(4), g)
    np.testing.assert_allclose(y.detach().numpy(), ry, atol=2e-5)
    np.testing.assert_allclose(base.grad.numpy().transpose(0, 3, 1, 2), rdx, atol=2e-5)


def test_float16_computes_in_float32():
    x, w, b, g = _inputs((4, 3, 6, 6), np.float16, seed=4)
    y, dx, dw, db, _, _ = _run(x, w, b, g)
    ry, rdx, rdw, rdb, _, _ = _reference(x, w.astype(np.float64), b.astype(np.float64), g)
    for got, want in ((y, ry), (dx, rdx), (dw, rdw), (db, rdb)):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, atol=2e-2)


def test_gradcheck_float64(form):
    r = np.random.default_rng(6)
    x = rc.tensor(r.standard_normal((3, 4, 2, 5)), requires_grad=True)
    w = rc.tensor(r.standard_normal(4), requires_grad=True)
    b = rc.tensor(r.standard_normal(4), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                     (x, w, b))


def test_create_graph_differentiates_the_backward_again():
    r = np.random.default_rng(7)
    x = rc.tensor(r.standard_normal((4, 3, 5)), requires_grad=True)
    w = rc.tensor(r.standard_normal(3), requires_grad=True)
    y = F.batch_norm(x, None, None, w, None, training=True)
    (gx,) = rc.autograd.grad((y * y * y).sum(), x, create_graph=True)
    (gg,) = rc.autograd.grad(gx.sum(), w)  # through the composite backward
    assert gg is not None and np.isfinite(gg.numpy()).all() and np.abs(gg.numpy()).max() > 0


def test_a_compiled_batch_norm_net_trains_as_eager():
    def make():
        rc.manual_seed(0)
        return rc.nn.Sequential(rc.nn.Conv2d(2, 4, 3), rc.nn.BatchNorm2d(4), rc.nn.ReLU(),
                                rc.nn.Flatten(), rc.nn.Linear(4 * 6 * 6, 3))

    x = rc.tensor(np.random.default_rng(8).standard_normal((5, 2, 8, 8)).astype(np.float32))
    y = rc.tensor([0, 1, 2, 1, 0])
    losses = []
    for compiled in (False, True):
        net = make()
        opt = rc.optim.SGD(net.parameters(), lr=0.1)
        fwd = rc.compile(net) if compiled else net
        run = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(fwd(x), y)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_the_decomposition_of_a_traced_kernel_matches_numpy():
    """What a graph's batch_norm node runs on a backend without the kernel."""
    from rtxcore.jit.decompose import DECOMPOSE

    x, w, b, g = _inputs((4, 3, 5), np.float32, seed=9)
    out = rc.empty(x.shape)
    mean, var, rstd = (rc.empty(3) for _ in range(3))
    DECOMPOSE["batch_norm"](out, mean, var, rstd, rc.tensor(x), rc.tensor(w), rc.tensor(b), 1e-5)
    ry, rdx, rdw, rdb, rmean, rvar = _reference(x, w.astype(np.float64), b.astype(np.float64), g)
    np.testing.assert_allclose(out.numpy(), ry, atol=2e-5)
    np.testing.assert_allclose(mean.numpy(), rmean, atol=1e-5)
    np.testing.assert_allclose(var.numpy(), rvar, atol=1e-4)
    np.testing.assert_allclose(rstd.numpy(), 1 / np.sqrt(rvar + 1e-5), rtol=1e-5)
    dx, sums = rc.empty(x.shape), rc.empty((2, 3))
    DECOMPOSE["batch_norm_backward"](dx, sums, rc.tensor(g), rc.tensor(x), mean, rstd,
                                     rc.tensor(w))
    np.testing.assert_allclose(dx.numpy(), rdx, atol=2e-5)
    np.testing.assert_allclose(sums.numpy(), np.stack([rdw, rdb]), atol=5e-5)


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 3, 0)])
def test_an_empty_batch_gives_what_numpy_gives(shape):
    """No elements per channel: the C loops decline (their rstd would be nan), the
    NumPy forms and the decomposition give sums of nothing, 0."""
    from rtxcore.jit.decompose import DECOMPOSE

    x = np.zeros(shape, np.float32)
    assert not ckernels.batch_norm(np.empty_like(x), *(np.empty(3, np.float32) for _ in range(3)),
                                   x, None, None, 1e-5)
    dx, sums = np.empty_like(x), np.full((2, 3), 7.0, np.float32)
    mean, rstd = np.zeros(3, np.float32), np.ones(3, np.float32)
    norm_kernels.batch_norm_backward(dx, sums, x, x, mean, rstd, None)
    np.testing.assert_array_equal(sums, 0)
    t = rc.tensor(x)
    dxt, st = rc.empty(shape), rc.full((2, 3), 7.0)
    DECOMPOSE["batch_norm_backward"](dxt, st, t, t, rc.tensor(mean), rc.tensor(rstd), None)
    np.testing.assert_array_equal(st.numpy(), 0)
