"""rtx_opencl's conv2d kernels (``conv_kernels``): the three composites run (no
core decomposition), forward and both gradients equal rtx_cpu's to rounding for
strides, paddings, dilations, kernel sizes larger than the stride (overlapping
windows), strided inputs and float64; a transposed convolution through them;
the im2col reads nothing outside the image (the zero padding is not memory) and
col2im writes nothing outside the gradient."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F

R = pytest.importorskip("rtx_opencl.runtime")
pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")

CASES = [  # n, c, h, w, oc, k, stride, padding, dilation
    (2, 3, 9, 8, 4, 3, 1, 1, 1),
    (2, 3, 9, 8, 5, 3, 2, 0, 1),
    (1, 2, 10, 10, 3, 4, 2, 1, 1),
    (2, 2, 11, 9, 3, 3, 1, 2, 2),
    (3, 2, 16, 14, 16, 5, 1, 2, 1),
    (2, 4, 7, 7, 2, 1, 3, 0, 1),
]


def _run(dev, x, w, b, g, **kw):
    X = rc.tensor(x, device=dev, requires_grad=True)
    W = rc.tensor(w, device=dev, requires_grad=True)
    B = rc.tensor(b, device=dev, requires_grad=True)
    y = F.conv2d(X, W, B, **kw)
    y.backward(rc.tensor(g, device=dev))
    return [t.detach().cpu().numpy() for t in (y, X.grad, W.grad, B.grad)]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_and_its_gradients_equal_the_cpu_backend(case, dtype, opencl_calls):
    n, c, h, w, oc, k, s, p, d = case
    calls = [opencl_calls(op) for op in ("conv2d", "conv2d_input_grad", "conv2d_weight_grad")]
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((oc, c, k, k)).astype(dtype)
    b = rng.standard_normal(oc).astype(dtype)
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    g = rng.standard_normal((n, oc, oh, ow)).astype(dtype)
    want = _run("cpu", x, wt, b, g, stride=s, padding=p, dilation=d)
    got = _run("opencl", x, wt, b, g, stride=s, padding=p, dilation=d)
    assert all(len(cs) == 1 for cs in calls), calls
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, e in zip(got, want):
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max()))


def test_a_strided_input_and_a_transposed_convolution():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    wt = rng.standard_normal((4, 3, 4, 4)).astype(np.float32)
    got, want = {}, {}
    for dev, out in (("opencl", got), ("cpu", want)):
        X = rc.tensor(x.transpose(0, 1, 3, 2).copy(), device=dev).transpose(2, 3).requires_grad_()
        W = rc.tensor(wt, device=dev, requires_grad=True)
        y = F.conv_transpose2d(X, W, stride=2, padding=1)
        y.square().sum().backward()
        out["y"], out["dx"], out["dw"] = (t.detach().cpu().numpy() for t in (y, X.grad, W.grad))
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-4)


def test_im2col_and_col2im_stay_inside_their_tensors():
    from rtx_opencl import conv_kernels as K

    from rtxcore.ops.core import view_of

    # x the middle rows of a larger buffer of 99s: padding read from memory
    # would show as 99s in the columns
    big = rc.tensor(np.full((3, 2, 5, 5), 99.0, np.float32), device="opencl")
    big[1] = rc.tensor(np.arange(50.0, dtype=np.float32).reshape(2, 5, 5), device="opencl")
    x = big[1:2]
    cols = rc.empty(2 * 9, 5 * 5, device="opencl")
    out = rc.empty(1, 1, 5, 5, device="opencl")
    wt = rc.ones(1, 2, 3, 3, device="opencl")
    K.conv2d(view_of(out), view_of(cols), view_of(x), view_of(wt), None, (1, 1), (1, 1, 1, 1),
             (1, 1))
    assert not (cols.cpu().numpy() == 99.0).any()
    ref = F.conv2d(rc.tensor(np.arange(50.0, dtype=np.float32).reshape(1, 2, 5, 5)),
                   rc.ones(1, 2, 3, 3), padding=1).numpy()
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6)
    # dx the middle of a larger buffer: its neighbours keep their 7s
    guard = rc.full((3, 2, 5, 5), 7.0, device="opencl")
    K.conv2d_input_grad(view_of(guard[1:2]), view_of(rc.ones(1, 1, 5, 5, device="opencl")),
                        view_of(wt), (1, 1), (1, 1, 1, 1), (1, 1))
    gb = guard.cpu().numpy()
    assert (gb[0] == 7.0).all() and (gb[2] == 7.0).all()
    assert gb[1].max() == 9.0 and gb[1].min() == 4.0  # a corner pixel is in 4 windows


def test_geometry_that_does_not_fit_is_refused():
    from rtx_opencl import conv_kernels as K

    from rtxcore.ops.core import view_of

    x = rc.ones(1, 2, 5, 5, device="opencl")
    wt = rc.ones(3, 2, 3, 3, device="opencl")
    out = rc.empty(1, 3, 9, 9, device="opencl")  # not what a 3x3 over 5x5 gives
    cols = rc.empty(18, 81, device="opencl")
    with pytest.raises(ValueError, match="do not fit together"):
        K.conv2d(view_of(out), view_of(cols), view_of(x), view_of(wt), None, (1, 1),
                 (1, 1, 1, 1), (1, 1))
    with pytest.raises(ValueError, match="do not fit together"):
        K.conv2d_input_grad(view_of(x), view_of(rc.ones(1, 3, 5, 5, device="opencl")),
                            view_of(wt), (1, 1), (-1, 0, 0, 0), (1, 1))
