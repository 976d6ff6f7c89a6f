"""rtx_opencl's own kernels for float composites the core would otherwise build
from primitives (``erf``, ``expm1``, ``log1p``, ``log2``, ``tan``, ``sigmoid``,
``gelu``, ``gelu_backward``): used by the front-end, equal to the cpu backend's
values (rtx_cpu's kernels share the float erf's formula) on ordinary and special
inputs (NaN, +-inf, +-0, subnormal, beyond erf's clip at 4), float16 to float64,
contiguous and strided, and the GELU's gradient through gradcheck."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck

R = pytest.importorskip("rtx_opencl.runtime")
pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e-30, 3.99, 4.0, 4.5, -5.0,
           30.0, -30.0, 0.5, -0.7, 1.0, 2.5, 88.0, -88.0]


def _inputs(dtype, n=3000):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(n) * 3, SPECIAL]).astype(dtype)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", ["erf", "expm1", "log1p", "log2", "tan", "sigmoid"])
def test_float_composites_run_as_one_kernel_with_the_cpu_values(op, dtype, opencl_calls):
    calls = opencl_calls(op)
    x = _inputs(dtype)
    fn = getattr(rc, op)
    with np.errstate(all="ignore"):
        got = fn(rc.tensor(x, device="opencl")).numpy()
        want = fn(rc.tensor(x)).numpy()
    assert calls == [op]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    tol = {np.float16: 2e-3, np.float32: 4e-7, np.float64: 1e-14}[dtype]
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol * 8, atol=tol)
    if op == "erf":  # against the exact value too, and the signs of zeros and infinities
        exact = np.array([math.erf(float(v)) for v in x])
        fin = ~np.isnan(exact)
        np.testing.assert_allclose(got[fin].astype(np.float64), exact[fin], rtol=0,
                                   atol={np.float16: 1e-3, np.float32: 5e-7,
                                         np.float64: 2e-16}[dtype])
        z = x == 0
        np.testing.assert_array_equal(np.signbit(got[z]), np.signbit(x[z]))
        np.testing.assert_array_equal(got[np.isinf(x)], np.sign(x[np.isinf(x)]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_and_its_backward_are_one_kernel_each_with_the_cpu_values(approximate, dtype,
                                                                      opencl_calls):
    from rtxcore.ops.elementwise import gelu, gelu_backward

    calls = opencl_calls("gelu")
    calls_back = opencl_calls("gelu_backward")
    x = _inputs(dtype)
    g = np.random.default_rng(1).standard_normal(x.shape).astype(dtype)
    out = {}
    with np.errstate(all="ignore"), rc.no_grad():  # (the kernel: nothing records)
        for dev in ("opencl", "cpu"):
            xt, gt = rc.tensor(x, device=dev), rc.tensor(g, device=dev)
            y = gelu(xt, approximate)
            out[dev] = (y.numpy(), gelu_backward(gt, xt, approximate, y).numpy())
    assert calls == ["gelu"] and calls_back == ["gelu_backward"]
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}[dtype]
    # (the gradient's tail reads Phi(x) off y / x, where one ulp of tanh's -1 moves
    # it by ~40x that ulp times g: 3e-6 at x = -5.3 in float32, either side)
    for got, want, atol in zip(out["opencl"], out["cpu"], (tol, tol * 8)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=tol * 8, atol=atol)


def test_gelu_on_a_strided_input_and_its_gradient_through_gradcheck():
    rng = np.random.default_rng(2)
    base = rc.tensor(rng.standard_normal((6, 10)), device="opencl")
    x = base.t()  # strided
    for ap in ("none", "tanh"):
        np.testing.assert_allclose(F.gelu(x, approximate=ap).numpy(),
                                   F.gelu(rc.tensor(x.numpy()), approximate=ap).numpy(),
                                   rtol=1e-12, atol=1e-14)
        leaf = rc.tensor(rng.standard_normal((4, 5)), device="opencl", requires_grad=True)
        assert gradcheck(lambda t: F.gelu(t, approximate=ap), (leaf,))


def test_gelu_kernel_refuses_an_unknown_approximation():
    from rtx_opencl import kernels as K

    x = rc.ones(4, device="opencl")
    with pytest.raises(ValueError, match="approximate"):
        K.KERNELS["gelu"](rc.empty(4, device="opencl")._h, x._h, "fast")


@pytest.mark.parametrize("op", ["tanh", "erf", "sigmoid"])
def test_a_value_gets_the_same_bits_in_a_vector_lane_and_in_the_tail(op):
    # a contiguous float32 launch runs 8 elements a work-item and the rest one at
    # a time: both must be the same function (the tail once took the builtin
    # tanh, not rtx_tanh, and 88's GELU gradient came out 0.4% off). (PoCL's own
    # float8 exp, log and cos are not its scalar ones: within an ulp, not bits)
    x = _inputs(np.float32, 200)
    for v in x:
        got = getattr(rc, op)(rc.tensor(np.full(11, v, np.float32), device="opencl")).numpy()
        np.testing.assert_array_equal(got, np.full(11, got[0]), err_msg=f"{op}({v})")


# -- pow: the small integer exponents as products, rtx_cpu's bits --------------------

POW_X = np.array([-3.0, -0.5, -0.0, 0.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e-20, -1e-30,
                  1e20, 7.25, -1.1], np.float32)


@pytest.mark.parametrize("e", [0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_small_integer_exponents_are_cpus_bits(e, dtype):
    # products and a division where PoCL's pow is a ~190 ns library call; signed
    # zeros, inf, NaN, overflow and underflow as pow's
    x = POW_X.astype(dtype)
    want = (rc.tensor(x) ** e).numpy()
    for exponent in (e, rc.tensor(np.full(x.shape, e, dtype), device="opencl")):
        got = (rc.tensor(x, device="opencl") ** exponent).cpu().numpy()
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(want, np.power(x, dtype(e)), rtol=4e-7 if dtype is np.float32
                                   else 1e-15)


def test_pow_other_exponents_still_pow():
    x = np.abs(POW_X[np.isfinite(POW_X)]) + 0.25
    got = (rc.tensor(x, device="opencl") ** 2.7).cpu().numpy()
    np.testing.assert_allclose(got, np.power(x, np.float32(2.7)), rtol=2e-6)
