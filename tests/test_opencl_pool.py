"""rtx_opencl's tiled max pool kernels (``pool_kernels``): the front-end runs them
(one launch each way), values and indices equal rtx_cpu's on ties, NaN and
strided inputs, every dtype the pool takes, and an index outside its plane is
never written (the kernel trusts no index). The values against NumPy on every
device are in test_pool_speed_paths.py."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F

R = pytest.importorskip("rtx_opencl.runtime")
pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,k", [((2, 3, 8, 8), 2), ((1, 2, 9, 7), 3), ((3, 1, 6, 6), 1)])
def test_tiled_pool_on_opencl_equals_the_cpu_backend(dtype, shape, k, opencl_calls):
    fwd = opencl_calls("max_pool2d_tiled")
    bwd = opencl_calls("max_pool2d_tiled_backward")
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 3, (shape[0], shape[1], shape[3], shape[2])).astype(dtype)
    a.reshape(-1)[::11] = np.nan
    a = a.transpose(0, 1, 3, 2)  # strided
    g = rng.standard_normal((shape[0], shape[1], shape[2] // k, shape[3] // k)).astype(dtype)
    got, want = {}, {}
    for dev, out in (("opencl", got), ("cpu", want)):
        # x strided: the (N, C, W, H) array's transpose
        x = rc.tensor(np.ascontiguousarray(a.transpose(0, 1, 3, 2)), device=dev).transpose(2, 3)
        x = x.detach().requires_grad_()
        assert not x.is_contiguous()
        v, i = F.max_pool2d(x, k, return_indices=True)
        v.backward(rc.tensor(g, device=dev))
        out.update(v=v.detach().numpy(), i=i.numpy(), dx=x.grad.numpy())
    assert fwd == ["max_pool2d_tiled"] and bwd == ["max_pool2d_tiled_backward"]
    for key in ("v", "i", "dx"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_the_backward_kernel_writes_nothing_outside_the_plane():
    from rtx_opencl import kernels as K

    out = rc.full((1, 2, 4, 4), 7.0, device="opencl")
    g = rc.ones((1, 2, 2, 2), device="opencl")
    idx = np.zeros((1, 2, 2, 2), np.int64)
    idx[0, 0] = [[0, 2], [8, 10]]
    idx[0, 1] = [[16, -1], [1 << 40, 15]]  # three outside the 4x4 plane
    guard = rc.full((64,), 5.0, device="opencl")  # (memory beside out stays as it was)
    K.KERNELS["max_pool2d_tiled_backward"](out._h, g._h, rc.tensor(idx, device="opencl")._h)
    o = out.numpy()
    assert o[0, 0].sum() == 4 and o[0, 0, 0, 0] == o[0, 0, 0, 2] == o[0, 0, 2, 0] == 1
    assert o[0, 1].sum() == 1 and o[0, 1, 3, 3] == 1
    np.testing.assert_array_equal(guard.numpy(), 5.0)


def test_the_kernels_refuse_shapes_that_do_not_fit():
    from rtx_opencl import kernels as K

    x = rc.ones((1, 1, 4, 4), device="opencl")
    v = rc.empty((1, 1, 3, 3), device="opencl")
    i = rc.empty((1, 1, 3, 3), dtype=rc.int64, device="opencl")
    with pytest.raises(ValueError, match="max_pool2d_tiled"):
        K.KERNELS["max_pool2d_tiled"](v._h, i._h, x._h, 2, 2)
    with pytest.raises(ValueError, match="max_pool2d_tiled_backward"):
        K.KERNELS["max_pool2d_tiled_backward"](x._h, rc.ones((1, 2, 2, 2), device="opencl")._h,
                                               rc.zeros((1, 2, 2, 2), dtype=rc.int64,
                                                        device="opencl")._h)
