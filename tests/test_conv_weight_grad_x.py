"""conv2d's weight gradient from the input itself (``conv2d_weight_grad_x``):
with it the forward writes no im2col matrix. rtx_cpu's kernel gives the bits of
``conv2d_weight_grad`` of the forward's cols on any number of threads, conv2d
with ``cols=None`` writes the same output on every path, and the core's layers
train to the same bits either way. (Traced graphs keep the cols form, and a file
may hold the new node: tests/test_jit_file_safety.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore.nn.functional import convolution as CV

pytest.importorskip("rtx_cpu")
from rtx_cpu import cconv  # noqa: E402
from rtx_cpu import conv_kernels as C  # noqa: E402

# (N, C, H, W, OC, kh, kw, stride, padding (top, bottom, left, right), dilation)
GEOMETRIES = [
    (16, 64, 32, 32, 64, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),   # superres' 64-64 (tile, 1 image a chunk)
    (64, 16, 4, 4, 32, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # digits CNN (many images a chunk)
    (64, 1, 8, 8, 16, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),      # a first layer (few rows: NumPy's)
    (8, 32, 16, 16, 64, 4, 4, (2, 2), (1, 1, 1, 1), (1, 1)),    # DCGAN's stride 2
    (16, 32, 16, 16, 9, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),    # few output channels
    (8, 16, 12, 12, 3, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # 3: a vector mostly empty
    (3, 20, 11, 13, 33, 5, 3, (1, 2), (2, 1, 0, 2), (2, 1)),    # uneven everything
    (33, 16, 3, 3, 40, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # images a chunk not dividing N
    (2, 24, 9, 9, 48, 3, 3, (2, 2), (0, 0, 0, 0), (1, 1)),
]


def _out_hw(h, w, kh, kw, stride, padding, dilation):
    oh = (h + padding[0] + padding[1] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + padding[2] + padding[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    return oh, ow


def _case(geo, dtype, seed=0):
    n, c, h, w, oc, kh, kw, stride, padding, dilation = geo
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    weight = rng.standard_normal((oc, c, kh, kw)).astype(dtype)
    oh, ow = _out_hw(h, w, kh, kw, stride, padding, dilation)
    g = rng.standard_normal((n, oc, oh, ow)).astype(dtype)
    return x, weight, g, (oh, ow)


@pytest.fixture
def threads():
    old = rc.get_num_threads()
    yield rc.set_num_threads
    rc.set_num_threads(old)


# float32 (the C tile where it applies), float64 and float16 (the NumPy forms; the
# smaller geometries)
DTYPE_CASES = [(i, dt) for i in range(len(GEOMETRIES)) for dt in ("float32", "float64")] + \
    [(i, "float16") for i, g in enumerate(GEOMETRIES) if np.prod(g[:4]) <= 1 << 16]


@pytest.mark.parametrize("case", DTYPE_CASES, ids=[f"g{i}-{dt}" for i, dt in DTYPE_CASES])
def test_the_bits_of_the_weight_gradient_of_the_forwards_cols(case, threads):
    """conv2d_weight_grad_x(x) == conv2d_weight_grad(the cols conv2d wrote), bit for
    bit, on 1, 2 and 4 threads (the C tile's sums over the positions in order,
    whoever computes a row)."""
    geo, dtype = GEOMETRIES[case[0]], np.dtype(case[1])
    n, c, h, w, oc, kh, kw, stride, padding, dilation = geo
    x, weight, g, (oh, ow) = _case(geo, dtype)
    out = np.empty((n, oc, oh, ow), dtype)
    cols = np.empty((c * kh * kw, n * oh * ow), dtype)
    C.conv2d(out, cols, x, weight, None, stride, padding, dilation)
    want = np.empty_like(weight)
    C.conv2d_weight_grad(want, g, cols)
    for t in (1, 2, 4):
        threads(t)
        got = np.full_like(weight, np.nan)
        C.conv2d_weight_grad_x(got, g, x, stride, padding, dilation)
        np.testing.assert_array_equal(got, want, err_msg=f"{t} threads")


def test_an_empty_batch_gives_a_zero_gradient():
    x = np.zeros((0, 16, 8, 8), np.float32)
    g = np.zeros((0, 32, 8, 8), np.float32)
    dw = np.full((32, 16, 3, 3), np.nan, np.float32)
    C.conv2d_weight_grad_x(dw, g, x, (1, 1), (1, 1, 1, 1), (1, 1))
    assert not dw.any()


PATHS = {
    "auto": lambda out, cols, x, w, b, geo: C.conv2d(out, cols, x, w, b, *geo),
    "numpy cols": lambda out, cols, x, w, b, geo: C._conv2d_cols(out, cols, x, w, b, *geo),
    "numpy rows": lambda out, cols, x, w, b, geo: C._conv2d_rows(out, cols, x, w, b, *geo),
    "C im2col, W @ cols": lambda out, cols, x, w, b, geo: C._c_conv2d(out, cols, x, w, b, *geo,
                                                                      False),
    "C im2col, rows @ W": lambda out, cols, x, w, b, geo: C._c_conv2d(out, cols, x, w, b, *geo,
                                                                      True),
}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("geo", GEOMETRIES[1:], ids=[f"g{i}" for i in range(1, len(GEOMETRIES))])
def test_conv2d_without_cols_writes_the_same_output(geo, path):
    n, c, h, w, oc, kh, kw, stride, padding, dilation = geo
    if path.startswith("C") and not cconv.available(np.dtype(np.float32)):
        pytest.skip("no C compiler: the NumPy forms run")  # pragma: no cover - CI has one
    x, weight, _, (oh, ow) = _case(geo, np.float32, seed=1)
    bias = np.arange(oc, dtype=np.float32) / 7
    out, got = np.empty((2, n, oc, oh, ow), np.float32)
    cols = np.empty((c * kh * kw, n * oh * ow), np.float32)
    PATHS[path](out, cols, x, weight, bias, (stride, padding, dilation))
    PATHS[path](got, None, x, weight, bias, (stride, padding, dilation))
    np.testing.assert_array_equal(got, out)


def test_the_c_convolutions_without_cols():
    """The direct convolution and the implicit GEMM (AVX-512) without cols."""
    if not cconv.direct_available(np.dtype(np.float32)):
        pytest.skip("no AVX-512 here: conv2d takes the im2col forms")
    for geo in (GEOMETRIES[0], GEOMETRIES[3]):
        n, c, h, w, oc, kh, kw, stride, padding, dilation = geo
        x, weight, _, (oh, ow) = _case(geo, np.float32, seed=2)
        g = cconv.Geometry(c, h, w, kh, kw, oh, ow, stride, (padding[0], padding[2]), dilation)
        cols = np.empty((c * kh * kw, n * oh * ow), np.float32)
        for run in (C._c_direct, C._c_implicit):
            if run is C._c_direct and stride != (1, 1):
                continue
            out, got = np.empty((2, n, oc, oh, ow), np.float32)
            run(out, x, weight, None, g, cols)
            run(got, x, weight, None, g, None)
            np.testing.assert_array_equal(got, out)


def test_im2col_of_a_range_of_channels_is_those_rows():
    geo = GEOMETRIES[5]
    n, c, h, w, oc, kh, kw, stride, padding, dilation = geo
    if not cconv.available(np.dtype(np.float32)):
        pytest.skip("no C compiler")  # pragma: no cover - CI has one
    x, _, _, (oh, ow) = _case(geo, np.float32)
    g = cconv.Geometry(c, h, w, kh, kw, oh, ow, stride, (padding[0], padding[2]), dilation)
    full = np.empty((g.k, n * g.p), np.float32)
    cconv.im2col(full, x, 0, n, g)
    part = np.empty((7 * kh * kw, 2 * g.p), np.float32)
    cconv.im2col(part, x, 1, 3, g, channels=(5, 12))
    np.testing.assert_array_equal(part, full[5 * kh * kw:12 * kh * kw, g.p:3 * g.p])
    for bad in ((3, 3), (-1, 2), (5, c + 1)):
        with pytest.raises(ValueError, match="channels"):
            cconv.im2col(part, x, 1, 3, g, channels=bad)


def test_the_weight_gradient_kernels_refuse_ranges_off_their_arrays():
    if not cconv.direct_available(np.dtype(np.float32)):
        pytest.skip("no AVX-512 here")
    x, weight, g, (oh, ow) = _case(GEOMETRIES[1], np.float32)
    geo = cconv.Geometry(16, 4, 4, 3, 3, oh, ow, (1, 1), (1, 1), (1, 1))
    nv = cconv.vectors(32)
    dwt = np.empty((-(-32 // (16 * nv)), geo.k, 16 * nv), np.float32)
    for c0, c1 in ((4, 4), (-1, 3), (0, 17)):
        with pytest.raises(ValueError, match="do not fit"):
            cconv.implicit_weight_grad_x(dwt, g, x, nv, geo, c0, c1)
    cols = np.empty((geo.k, 64 * geo.p), np.float32)
    for k0, k1 in ((9, 3), (-1, 18), (0, geo.k + 1)):
        with pytest.raises(ValueError, match="do not fit"):
            cconv.implicit_weight_grad(dwt, g, cols, nv, k0, k1)


def _train(make, x, steps=3):
    """A few SGD steps of ``make()``'s model on x; its parameters and x's grad."""
    rc.manual_seed(0)
    model = make()
    opt = rc.optim.SGD(model.parameters(), lr=0.05)
    xs = x.detach().requires_grad_()
    for _ in range(steps):
        opt.zero_grad()
        (model(xs) ** 2).mean().backward()
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()] + [xs.grad.numpy().copy()]


MODELS = {
    "conv": lambda: nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(32, 20, 3, stride=2, padding=1)),
    "transpose": lambda: nn.Sequential(nn.ConvTranspose2d(16, 32, 4, stride=2, padding=1),
                                       nn.ReLU(), nn.ConvTranspose2d(32, 8, 3, padding=1)),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_layers_train_to_the_bits_of_the_cols_form(model, monkeypatch):
    x = rc.randn(6, 16, 8, 8)
    calls = []
    real = CV._weight_grad_x
    monkeypatch.setattr(CV, "_weight_grad_x", lambda t: calls.append(1) or real(t))
    got = _train(MODELS[model], x)
    assert calls, "the weight gradient from x was not asked for"
    monkeypatch.setattr(CV, "_weight_grad_x", lambda t: None)
    want = _train(MODELS[model], x)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_layers_against_torch(model):
    torch = pytest.importorskip("torch")
    rc.manual_seed(0)
    layer = MODELS[model]()[0]
    tcls = torch.nn.Conv2d if model == "conv" else torch.nn.ConvTranspose2d
    kw = dict(padding=1) if model == "conv" else dict(stride=2, padding=1)
    t = tcls(layer.in_channels, layer.out_channels, layer.kernel_size, **kw)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(layer.weight.detach().numpy()))
        t.bias.copy_(torch.from_numpy(layer.bias.detach().numpy()))
    x = np.random.default_rng(5).standard_normal((4, 16, 7, 7)).astype(np.float32)
    for need_x in (True, False):
        rx = rc.tensor(x, requires_grad=need_x)
        tx = torch.tensor(x, requires_grad=need_x)
        layer.zero_grad()
        t.zero_grad()
        (layer(rx) ** 2).sum().backward()
        (t(tx) ** 2).sum().backward()
        np.testing.assert_allclose(layer.weight.grad.numpy(), t.weight.grad.numpy(),
                                   rtol=1e-4, atol=1e-3)
        if need_x:
            np.testing.assert_allclose(rx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_inference_writes_no_cols(monkeypatch):
    """Outside autograd too: conv2d gets cols=None where the backend has the kernel."""
    dev = rc.zeros(1).device  # (resolved: its kernel table filled)
    seen = []
    real = dev.kernels["conv2d"]
    monkeypatch.setitem(dev.kernels, "conv2d", lambda out, cols, *a: seen.append(cols) or
                        real(out, cols, *a))
    conv = nn.Conv2d(3, 8, 3, padding=1)
    with rc.no_grad():
        y = conv(rc.randn(2, 3, 6, 6))
    assert seen == [None] and y.shape == (2, 8, 6, 6)


def test_a_kernel_gone_before_the_backward_leaves_the_core_s_im2col(monkeypatch):
    """The forward wrote no cols; if the backend's table lost the kernel since
    (fallback mode, a reload), the weight's gradient is conv2d_weight_grad of the
    core's im2col of x: the same values."""
    rc.manual_seed(0)
    conv = nn.Conv2d(16, 32, 3, padding=1)
    x = rc.randn(3, 16, 6, 6)
    conv(x).square().sum().backward()
    want = conv.weight.grad.numpy().copy()
    conv.weight.grad = None
    y = conv(x)
    monkeypatch.delitem(x.device.kernels, "conv2d_weight_grad_x")
    y.square().sum().backward()
    np.testing.assert_allclose(conv.weight.grad.numpy(), want, rtol=1e-5, atol=1e-4)


def test_only_small_index_grids_are_kept():
    from rtx_cpu import kernels as K

    K._GRIDS.clear()
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    small = np.zeros((3, 1), np.int64)
    K.gather(np.empty((3, 1), np.float32), x, 1, small)
    assert ((3, 1), 1) in K._GRIDS
    n = K._GRID_MAX + 1
    big = np.zeros((n, 1), np.int64)
    out = np.empty((n, 1), np.float32)
    K.gather(out, np.broadcast_to(x[:1], (n, 4)), 1, big)
    assert ((n, 1), 1) not in K._GRIDS and (out == 0).all()
