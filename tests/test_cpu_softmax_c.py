"""rtx_cpu's softmax and log_softmax (and their backwards) with the per-row work
as C loops (``softmax_kernels``): the bits of the NumPy steps they replace (the
sums are NumPy's pairwise summation, exp and log stay NumPy's), special values
included, for strided rows, on any number of threads; and the NumPy forms where
the loops don't apply."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc

pytest.importorskip("rtx_cpu")
from rtx_cpu import softmax_kernels as S  # noqa: E402
from rtxcore.dispatch import xp  # noqa: E402

if S._c("sm_shift", np.dtype(np.float32)) is None:  # pragma: no cover - CI has a compiler
    pytest.skip("no C compiler: the NumPy forms run", allow_module_level=True)

XP = xp.kernels(np)
# row lengths: below 8 (a plain sum), 8-128 (eight partial sums), halves above,
# the vector maxima's edges (16 and 8 lanes), and a row longer than NumPy's buffer
LENGTHS = [1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
           1000, 1024, 4099, 9000]
OPS = ["softmax", "log_softmax"]


def _numpy_backward(op, g, y):
    """The core's backward rules as whole-array NumPy steps."""
    if op == "softmax":
        return (g - np.add.reduce(g * y, axis=-1, keepdims=True)) * y
    return g - np.exp(y) * np.add.reduce(g, axis=-1, keepdims=True)


def _with_specials(x):
    x = x.copy()
    m, n = x.shape
    if n >= 3:
        x[0, 1] = -np.inf  # a masked position
    if m >= 3:
        x[1] = -np.inf  # a row wholly masked: nan, as NumPy's steps give
        x[2, n // 2] = np.nan
    if m >= 4:
        x[3, 0] = np.inf
        x[3, -1] = -0.0
    return x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", OPS)
def test_the_numpy_steps_bits_for_any_row_length(op, dtype, monkeypatch):
    monkeypatch.setattr(S, "_SM_FEW_ROWS", 0)  # the C loops for a few rows too
    rng = np.random.default_rng(0)
    for n in LENGTHS:
        for m in (1, 5, 37):
            x = _with_specials((rng.standard_normal((m, n)) * 4).astype(dtype))
            g = rng.standard_normal((m, n)).astype(dtype)
            y, want = np.empty_like(x), np.empty_like(x)
            getattr(S, op)(y, x, 1)
            XP[op](want, x, 1)
            np.testing.assert_array_equal(y, want, err_msg=f"{op} n={n} m={m}")
            d = np.empty_like(x)
            getattr(S, op + "_backward")(d, g, y, 1)
            np.testing.assert_array_equal(d, _numpy_backward(op, g, y),
                                          err_msg=f"{op} backward n={n} m={m}")


@pytest.mark.parametrize("op", OPS)
def test_strided_rows_and_a_batch_of_matrices(op, monkeypatch):
    monkeypatch.setattr(S, "_SM_FEW_ROWS", 0)
    rng = np.random.default_rng(1)
    wide = rng.standard_normal((40, 50)).astype(np.float32)
    x = wide[:, 3:36]  # rows 33 long, 50 apart
    g = rng.standard_normal((40, 50)).astype(np.float32)[:, 5:38]
    y, want = np.empty_like(x), np.empty_like(x)
    getattr(S, op)(y, x, 1)
    XP[op](want, np.ascontiguousarray(x), 1)
    np.testing.assert_array_equal(y, want)
    d = np.empty_like(x)
    getattr(S, op + "_backward")(d, g, y, 1)
    np.testing.assert_array_equal(d, _numpy_backward(op, g, y))
    x4 = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)  # attention's scores
    y4, want4 = np.empty_like(x4), np.empty_like(x4)
    getattr(S, op)(y4, x4, 3)
    XP[op](want4, x4, 3)
    np.testing.assert_array_equal(y4, want4)


@pytest.mark.parametrize("op", OPS)
def test_the_same_bits_on_any_number_of_threads(op, monkeypatch):
    # (split from 64K elements here, the backwards too: 288K rows of 48 in blocks)
    monkeypatch.setattr(S, "_SM_PARALLEL_MIN", 1 << 16)
    monkeypatch.setattr(S, "_SM_BACKWARD_PARALLEL_MIN", 1 << 16)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6000, 48)).astype(np.float32)  # 288K elements: split
    g = rng.standard_normal(x.shape).astype(np.float32)
    assert x.size >= S._SM_PARALLEL_MIN
    old = rc.get_num_threads()
    got = {}
    try:
        for t in (1, 2, 4):
            rc.set_num_threads(t)
            y, d = np.empty_like(x), np.empty_like(x)
            getattr(S, op)(y, x, 1)
            getattr(S, op + "_backward")(d, g, y, 1)
            got[t] = (y, d)
    finally:
        rc.set_num_threads(old)
    for t in (2, 4):
        for a, b in zip(got[1], got[t]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", OPS)
def test_other_layouts_and_dtypes_take_the_numpy_forms(op, monkeypatch):
    calls = []
    real = S._c

    def spy(name, dtype):
        calls.append(name)
        return real(name, dtype)

    monkeypatch.setattr(S, "_c", spy)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 30)).astype(np.float32)
    y, want = np.empty_like(x), np.empty_like(x)
    getattr(S, op)(y, x, 0)  # along the first axis
    XP[op](want, x, 0)
    np.testing.assert_array_equal(y, want)
    h = x.astype(np.float16)
    yh, wanth = np.empty_like(h), np.empty_like(h)
    getattr(S, op)(yh, h, 1)
    XP[op](wanth, h, 1)
    np.testing.assert_array_equal(yh, wanth)
    assert "sm_shift" not in calls


@pytest.mark.parametrize("op", OPS)
def test_a_few_rows_take_the_whole_array_steps(op, monkeypatch):
    """Up to _SM_FEW_ROWS rows of a small input: NumPy's whole-array steps (the
    C steps' fixed cost is more there); the same bits either way."""
    calls = []
    real = S._c
    monkeypatch.setattr(S, "_c", lambda name, dtype: calls.append(name) or real(name, dtype))
    rng = np.random.default_rng(4)
    few = S._SM_FEW_ROWS
    x = _with_specials(rng.standard_normal((few, 27)).astype(np.float32))
    g = rng.standard_normal(x.shape).astype(np.float32)
    y, d = np.empty_like(x), np.empty_like(x)
    getattr(S, op)(y, x, 1)
    getattr(S, op + "_backward")(d, g, y, 1)
    assert calls == []
    monkeypatch.setattr(S, "_SM_FEW_ROWS", 0)
    yc, dc = np.empty_like(x), np.empty_like(x)
    getattr(S, op)(yc, x, 1)
    getattr(S, op + "_backward")(dc, g, yc, 1)
    assert "sm_shift" in calls or "sm_sums" in calls or "smb" in calls
    np.testing.assert_array_equal(y, yc)
    np.testing.assert_array_equal(d, dc)
    x2 = rng.standard_normal((few + 1, 27)).astype(np.float32)
    calls.clear()
    monkeypatch.setattr(S, "_SM_FEW_ROWS", few)
    getattr(S, op)(np.empty_like(x2), x2, 1)
    assert "sm_shift" in calls  # one row more: the C steps


def test_through_the_front_end_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 4, 32, 32)).astype(np.float32)
    a[..., 20:] = -np.inf
    g = rng.standard_normal(a.shape).astype(np.float32)
    for fn in ("softmax", "log_softmax"):
        x = rc.tensor(a, requires_grad=True)
        getattr(rc, fn)(x, -1).backward(rc.tensor(g))
        t = torch.tensor(a, requires_grad=True)
        yt = getattr(torch, fn)(t, -1)
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(getattr(rc, fn)(rc.tensor(a), -1).numpy(), yt.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
