"""rtx_cpu's ``pow`` fast paths (``rtx_cpu.pow_kernels``) against NumPy's ``np.power``.

A scalar exponent that is a small integer or a half-integer is computed with
products, ``sqrt`` and division, any other finite one as ``pow(|x|, e)`` with
the sign or NaN of a negative base put back. Checked here: every exponent of
each path on the special inputs (negative bases, -0.0, 0, inf, -inf, NaN,
subnormals, the dtype's extremes) and random values, float32 and float64 --
NaN and infinities exactly where NumPy has them, zeros with NumPy's sign,
finite values within 2 ulps (bit for bit where the path is NumPy's own or a
single correctly rounded operation) -- float16 on all 65536 inputs bit for bit,
integers exactly (wrapping as NumPy does); the ways an exponent reaches the
kernel (a Python number, a 0-d tensor, in place, a strided view, a fused
group's constant or scalar input, ``rc.compile``); that forward and backward
of the usual powers never reach ``np.power``; gradients by gradcheck in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
pytest.importorskip("rtx_cpu", reason="rtx_cpu (the NumPy backend) is not installed")
from rtx_cpu import fused as CF
from rtx_cpu.kernels import KERNELS
from rtx_cpu.pow_kernels import FLOAT_EXPONENTS, HALF_EXPONENTS, INT_EXPONENTS
from rtxcore.autograd import gradcheck

POW = KERNELS["pow"]
OTHER = (2.5, 7.0, -3.0, 5.0, -5.0, 6.0, 0.3, -1.7, 10.0)  # pow(|x|, e), sign put back
# exact: NumPy's own path or one correctly rounded operation (0 ulps)
EXACT = {0.0, 1.0, 2.0, -1.0, 0.5}


def specials(dt: type) -> np.ndarray:
    fi = np.finfo(dt)
    base = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0,
            fi.max, fi.min, fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
            1e-30, -1e-30, 1e30, -1e30, 1e19, -1e19, 3e-20, -3e-20, 1e-10, 1e10, -7.0]
    rng = np.random.default_rng(0)
    rand = rng.standard_normal(4000) * 3
    return np.concatenate([np.array(base, dt), rand.astype(dt), -np.abs(rand).astype(dt)])


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    it = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    m = np.iinfo(it).max
    ia, ib = (v.view(it).astype(np.int64) for v in (a, b))
    ia, ib = (np.where(v < 0, -(v & m), v) for v in (ia, ib))
    return np.abs(ia - ib)


def assert_like_numpy(got: np.ndarray, want: np.ndarray, max_ulps: int, what: str) -> None:
    """NaN where NumPy has NaN; infinities and zeros (with their sign) equal;
    finite values within ``max_ulps``."""
    assert got.dtype == want.dtype, what
    gn, wn = np.isnan(got), np.isnan(want)
    assert np.array_equal(gn, wn), f"{what}: NaN at {np.flatnonzero(gn != wn)[:5]}"
    g, w = got[~wn], want[~wn]
    special = np.isinf(w) | (w == 0)
    bad = special & ~((g == w) & (np.signbit(g) == np.signbit(w)))
    assert not bad.any(), f"{what}: {g[bad][:5]} where NumPy has {w[bad][:5]}"
    u = _ulps(g, w)
    assert u.max(initial=0) <= max_ulps, \
        f"{what}: {u.max()} ulps at {g[u.argmax()]!r} (NumPy {w[u.argmax()]!r})"


def _run(x: np.ndarray, e: float) -> np.ndarray:
    out = np.empty_like(x)
    POW(out, x, e)
    return out


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("e", sorted(FLOAT_EXPONENTS) + list(OTHER))
def test_float_exponents_against_numpy(dt, e):
    x = specials(dt)
    with np.errstate(all="ignore"):
        want = np.power(x, dt(e))
    got = _run(x, e)
    if e in FLOAT_EXPONENTS:
        assert_like_numpy(got, want, 0 if e in EXACT else 2, f"{dt.__name__} ** {e}")
    else:
        # NumPy's own bits for non-negative bases; +-(|x| ** e) for negative ones,
        # which NumPy computes on another path (libm's) within an ulp
        pos = ~np.signbit(x)
        assert_like_numpy(got[pos], want[pos], 0, f"{dt.__name__} ** {e}, x >= 0")
        assert_like_numpy(got[~pos], want[~pos], 1, f"{dt.__name__} ** {e}, x < 0")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("e", [2.5, 7.0, -3.0, 0.3, -1.7, 33.0, -40.5, 1000.0, 1e5])
def test_overflowing_and_underflowing_lanes_are_numpys(dt, e):
    """Lanes whose power is certainly inf or 0 skip the vector pow's scalar
    path: the same bits as np.power, on extreme inputs and densely around the
    bounds (and beyond them in the dtype's subnormals)."""
    fi = np.finfo(dt)
    rng = np.random.default_rng(6)
    z = rng.standard_normal(3000)
    over, under = (129.0, -152.0) if dt is np.float32 else (1025.0, -1076.0)
    near = [2.0 ** (k / e) * (1 + d) for k in (over - 1, over, under, under + 1)
            if abs(k / e) < 1000 for d in np.linspace(-0.02, 0.02, 401)]
    with np.errstate(all="ignore"):
        x = np.concatenate([z * 1e-40, z * 1e30, z * 1e-30, z * fi.max,
                            z * fi.smallest_subnormal * 8, np.array(near),
                            [0.0, np.inf, np.nan, fi.max, fi.smallest_subnormal]])
        x = np.abs(x).astype(dt)
        want = np.power(x, dt(e))
    assert_like_numpy(_run(x, e), want, 0, f"{dt.__name__} ** {e}")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_signs_of_zero_inf_and_nan_as_numpy(dt):
    """The cases where products, sqrt and 1/x differ from C's pow by more
    than rounding, spelled out."""
    x = np.array([-0.0, -np.inf, 0.0, np.inf, np.nan, -2.0], dt)
    nan = np.nan
    expect = {
        0.0: [1, 1, 1, 1, 1, 1], 1.0: [-0.0, -np.inf, 0, np.inf, nan, -2],
        3.0: [-0.0, -np.inf, 0, np.inf, nan, -8], 4.0: [0, np.inf, 0, np.inf, nan, 16],
        -1.0: [-np.inf, -0.0, np.inf, 0, nan, -0.5], -2.0: [np.inf, 0, np.inf, 0, nan, 0.25],
        0.5: [-0.0, nan, 0, np.inf, nan, nan],  # NumPy's scalar 0.5 is sqrt
        -0.5: [np.inf, 0, np.inf, 0, nan, nan], 1.5: [0, np.inf, 0, np.inf, nan, nan],
        -1.5: [np.inf, 0, np.inf, 0, nan, nan],
        2.5: [0, np.inf, 0, np.inf, nan, nan], 7.0: [-0.0, -np.inf, 0, np.inf, nan, -128],
        -3.0: [-np.inf, -0.0, np.inf, 0, nan, -0.125],
    }
    for e, want in expect.items():
        want = np.array(want, dt)
        with np.errstate(all="ignore"):
            # (the table is NumPy's)
            assert_like_numpy(np.power(x, dt(e)), want, 0, f"numpy ** {e}")
        assert_like_numpy(_run(x, e), want, 0, f"** {e}")


def test_float16_every_input_bit_for_bit():
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    # (pow(sNaN, 0) is NaN in NumPy's half loop; no arithmetic makes a signalling NaN)
    x = x[~(np.isnan(x) & ((x.view(np.uint16) & 0x200) == 0))]
    for e in sorted(HALF_EXPONENTS):
        with np.errstate(all="ignore"):
            want = np.power(x, np.float16(e))
        assert_like_numpy(_run(x, e), want, 0, f"float16 ** {e}")


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_integers_exact_with_wrap_around(name):
    ii = np.iinfo(name)
    x = np.concatenate([np.array([0, 1, 2, 3, ii.max, ii.min, ii.max - 1, ii.min + 1], name),
                        np.random.default_rng(1).integers(ii.min, ii.max, 500, dtype=name)])
    if ii.min < 0:
        x = np.concatenate([x, np.array([-1, -2, -3], name)])
    for e in sorted(INT_EXPONENTS) + [5, 7]:
        got = _run(x, e)
        assert np.array_equal(got, np.power(x, e)) and got.dtype == x.dtype, (name, e)
        t = rc.tensor(x) ** e
        assert np.array_equal(t.numpy(), np.power(x, e)), (name, e)


@pytest.mark.parametrize("e", [3.0, 0.5, -0.5, 1.5, -1.5, 4.0, -2.0, 2.5, 7.0])
def test_every_way_an_exponent_arrives(e):
    x = specials(np.float32)[:1200].reshape(40, 30)
    want = _run(x, e)
    t = rc.tensor(x)
    same = lambda a: np.testing.assert_array_equal(np.asarray(a.numpy()), want)  # noqa: E731
    same(t ** e)
    same(rc.pow(t, e))
    u = t.clone()
    u.pow_(e)  # in place: out is x
    same(u)
    strided = rc.tensor(np.ascontiguousarray(x.T)).t()
    same(strided ** e)
    view = np.empty((40, 60), np.float32)[:, ::2]
    POW(view, x, e)  # a strided output
    np.testing.assert_array_equal(view, want)
    # an exponent tensor, 0-d (a stride-0 broadcast) or full: NumPy's power with
    # an exponent array (0.5 is C's pow there, not sqrt: +0.0 for -0.0, inf for -inf)
    with np.errstate(all="ignore"):
        want_a = np.power(x, np.full_like(x, e))
    # (NumPy's array power is SVML's or libm's pow, within an ulp of sqrt)
    assert_like_numpy(rc.pow(t, rc.tensor(e)).numpy().ravel(), want_a.ravel(), 2,
                      f"** tensor({e})")
    full = rc.pow(t, rc.tensor(np.full_like(x, e))).numpy()
    np.testing.assert_array_equal(full, want_a)  # (the shared kernel: NumPy's bits)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int32])
def test_zero_dim_tensors(dt):
    exps = [0, 1, 2, 3, 4, 5] if dt is np.int32 else \
        sorted(HALF_EXPONENTS if dt is np.float16 else FLOAT_EXPONENTS) + list(OTHER)
    for v in ([-3, 0, 2] if dt is np.int32 else [-2.5, -0.0, 0.0, 3.0, np.nan, -np.inf]):
        for e in exps:
            a = np.array(v, dt)
            with np.errstate(all="ignore"):
                want = np.power(a.reshape(1), np.asarray(e, dt)).astype(dt)
            got = (rc.tensor(a) ** e).numpy().reshape(1)
            if dt is np.int32:
                assert np.array_equal(got, want), (v, e)
            else:
                assert_like_numpy(got, want, 2, f"tensor({v}) ** {e}")


@pytest.mark.parametrize("e", [3.0, 0.5, -1.0, 2.5])
@pytest.mark.parametrize("kind", ["const", "scalar"])
def test_a_fused_pow_step_gives_the_kernels_values(e, kind):
    """The NumPy fused runner calls the same kernel block by block: a constant
    exponent arrives as a Python number, a scalar input as a stride-0 view."""
    n = (1 << 17) + 5  # more than one block
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, -1e-30]
    exp = ["const", e] if kind == "const" else ["scalar", 1]
    prog = {"n": n, "inputs": ["float32"] + (["float32"] if kind == "scalar" else []),
            "steps": [["pow", "float32", [["in", 0], exp]],
                      ["mul", "float32", [["step", 0], ["const", 0.5]]]],
            "outputs": [0, 1]}
    run = CF.runner(prog, KERNELS)
    assert run is not None
    outs = [np.empty(n, np.float32), np.empty(n, np.float32)]
    run(outs, [x] + ([np.array([e], np.float32)] if kind == "scalar" else []))
    # (as eager: a 0-d exponent tensor is an array to NumPy, 0.5 C's pow there)
    want = _run(x, e if kind == "const" else np.array(e, np.float32))
    np.testing.assert_array_equal(outs[0], want)
    np.testing.assert_array_equal(outs[1], want * np.float32(0.5))


def test_compiled_pow_equals_eager():
    def f(x):
        return 0.5 * x * (1 + rc.tanh(0.7978845608 * (x + 0.044715 * rc.pow(x, 3.0))))

    x = rc.tensor((np.random.default_rng(3).standard_normal((64, 256)) * 3).astype(np.float32))
    eager = f(x).numpy()
    cf = rc.compile(f)
    for _ in range(2):
        np.testing.assert_array_equal(cf(x).numpy(), eager)


@pytest.mark.parametrize("dt", [rc.float32, rc.float64])
@pytest.mark.parametrize("e", [2, 3, 4, 3.0, -1.0, 0.5, 1.5, -0.5])
def test_forward_and_backward_never_call_np_power(monkeypatch, dt, e):
    """x ** 3's backward is 3 * x ** 2 (a product), x ** 0.5's x ** -0.5,
    x ** -0.5's x ** -1.5, ... all fast paths: np.power is not called, for
    negative bases either."""
    x = rc.tensor(np.linspace(-3, 3, 64, dtype=np.float32), dtype=dt, requires_grad=True)
    if e % 1:
        x = rc.tensor(np.linspace(0.1, 3, 64, dtype=np.float32), dtype=dt, requires_grad=True)

    def refuse(*a, **k):
        raise AssertionError("np.power called")

    monkeypatch.setattr(np, "power", refuse)
    y = x ** e
    (g,) = rc.autograd.grad(y.sum(), x)
    monkeypatch.undo()
    xn = x.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(g.numpy(), e * xn ** (e - 1), rtol=1e-5)


@pytest.mark.parametrize("e", [3, 3.0, 0.5, -1.0, -0.5, 1.5, -1.5, 4.0, -2.0, 2.5, 7.0, -3.0])
def test_gradcheck_float64(e):
    rng = np.random.default_rng(4)
    if e % 1:
        vals = rng.uniform(0.2, 3.0, (3, 4))
    else:
        vals = rng.uniform(0.3, 2.0, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))
    x = rc.tensor(vals, dtype=rc.float64, requires_grad=True)
    assert gradcheck(lambda a: a ** e, (x,))
    assert gradcheck(lambda a: rc.pow(a, rc.tensor(float(e), dtype=rc.float64)), (x,))


def test_gradcheck_through_a_compiled_pow():
    x = rc.tensor(np.random.default_rng(5).uniform(-2, 2, (4, 5)), dtype=rc.float64,
                  requires_grad=True)
    cf = rc.compile(lambda a: (0.044715 * a ** 3 + a).tanh())
    assert gradcheck(cf, (x,))
