"""rtx_cpu's GELU and its gradient as C loops (``erf_kernels``): the same bits
as the NumPy forms they replace (every step but NumPy's exp and tanh is an IEEE
operation on float32, done in C in the same order), special values included,
on any number of threads, and for float16 and non-contiguous operands."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc

pytest.importorskip("rtx_cpu")
from rtx_cpu import erf_kernels as E  # noqa: E402

if E._c("gelu_erf") is None:  # pragma: no cover - CI has a compiler
    pytest.skip("no C compiler: the NumPy forms run", allow_module_level=True)

SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-38, -1e-40, 1e-31, -1e-29, 5.0, -5.0,
           4 * 1.41421356, -4 * 1.41421356, 3.9, 1e4, -1e4, 3e38, -3e38]


def _inputs(n, dtype, seed=0):
    r = np.random.default_rng(seed)
    x = (r.standard_normal(n) * 3).astype(dtype)
    with np.errstate(over="ignore"):  # (float16: the largest become inf)
        x[:len(SPECIAL)] = np.array(SPECIAL).astype(dtype)
    g = r.standard_normal(n).astype(dtype)
    return x, g


def _numpy_forms(x, g, approximate):
    y, d = np.empty_like(x), np.empty_like(x)
    tanh = approximate == "tanh"
    E._blockwise(E._gelu_tanh if tanh else E._gelu_erf, "fff", y, x)
    E._blockwise(E._gelu_tanh_grad if tanh else E._gelu_erf_grad, "ffb", d, g, x, y)
    return y, d


def _on_threads(fn):
    old = rc.get_num_threads()
    try:
        out = {}
        for t in (1, 2, 4):
            rc.set_num_threads(t)
            out[t] = fn()
        return out
    finally:
        rc.set_num_threads(old)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("n", [37, 1 << 16, 300_001])  # one call; blocks on the C threads
def test_c_loops_give_the_numpy_forms_bits_on_any_number_of_threads(approximate, n):
    x, g = _inputs(n, np.float32)
    want_y, want_d = _numpy_forms(x, g, approximate)

    def run():
        y, d = np.empty_like(x), np.empty_like(x)
        E.gelu(y, x, approximate)
        E.gelu_backward(d, g, x, want_y, approximate)
        return y, d

    for t, (y, d) in _on_threads(run).items():
        np.testing.assert_array_equal(y, want_y, err_msg=f"gelu, {t} threads")
        np.testing.assert_array_equal(d, want_d, err_msg=f"gelu_backward, {t} threads")


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float16_and_strided_operands(approximate):
    x, g = _inputs(70_000, np.float16, seed=1)
    wide_y, _ = _numpy_forms(x.astype(np.float32), g.astype(np.float32), approximate)
    y = np.empty_like(x)
    E.gelu(y, x, approximate)
    np.testing.assert_array_equal(y, wide_y.astype(np.float16))  # one rounding
    x32, g32 = _inputs(2 * 70_000, np.float32, seed=2)
    xs, gs = x32[::2], g32[::2]  # every other element
    want_y, want_d = _numpy_forms(np.ascontiguousarray(xs), np.ascontiguousarray(gs),
                                  approximate)
    out = np.empty(2 * xs.size, np.float32)[::2]  # a strided output too
    E.gelu(out, xs, approximate)
    np.testing.assert_array_equal(out, want_y)
    d = np.empty_like(xs)
    E.gelu_backward(d, gs, xs, want_y, approximate)
    np.testing.assert_array_equal(d, want_d)


def test_the_front_end_gelu_matches_torch():
    torch = pytest.importorskip("torch")
    x, g = _inputs(100_000, np.float32, seed=3)
    x = x[len(SPECIAL):]  # finite values
    g = g[len(SPECIAL):]
    for approximate in ("none", "tanh"):
        t = rc.tensor(x, requires_grad=True)
        y = rc.nn.functional.gelu(t, approximate=approximate)
        y.backward(rc.tensor(g))
        tt = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.gelu(tt, approximate=approximate)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=2e-5, atol=2e-5)
