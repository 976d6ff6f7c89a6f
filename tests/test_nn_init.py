"""``rtxcore.nn.init``: every initialiser's statistics or exact values, its
in-place, unrecorded write, PyTorch's errors, and the deprecated spellings."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import nn
from rtxcore.nn import init


def A(t):
    return np.asarray(t.detach().cpu().numpy())


def test_calculate_gain():
    assert init.calculate_gain("conv_transpose2d") == 1.0
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 3, 2, 2)])
def test_orthogonal(device, shape):
    rc.manual_seed(0)
    w = nn.Parameter(rc.empty(shape, device=device))
    out = init.orthogonal_(w, gain=2.0)
    assert out is w and w.requires_grad and w.grad_fn is None
    m = A(w).reshape(shape[0], -1).astype(np.float64)
    rows, cols = m.shape
    gram = m @ m.T if rows <= cols else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(rows, cols)), atol=1e-5)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        init.orthogonal_(rc.empty(3, device=device))


def test_orthogonal_is_seeded():
    rc.manual_seed(3)
    a = A(init.orthogonal_(rc.empty(4, 4)))
    rc.manual_seed(3)
    b = A(init.orthogonal_(rc.empty(4, 4)))
    np.testing.assert_array_equal(a, b)


# -- statistics: both bounds and the spread, with tolerances from the sample size ----------
#
# For n independent draws, the sample mean's standard error is sd / sqrt(n) and
# the sample std's is sd * sqrt((kurtosis - 1) / (4 n)) (0.2 / n for a uniform,
# 0.5 / n for a normal; a truncated normal lies between). Every check allows
# Z = 6 standard errors, so a correct initialiser fails about once in 10**9, while a
# missing sqrt(3) (the std 42% off) or a wrong gain misses by hundreds of them.

Z = 6.0


def check_uniform(x: np.ndarray, lo: float, hi: float, what: str) -> None:
    """Draws of U(lo, hi): inside both bounds, reaching near both (the largest
    gap at an end of n draws exceeds width * 20 / n with probability e**-20),
    and with U's mean and std."""
    x = x.astype(np.float64).reshape(-1)
    n, width = x.size, hi - lo
    eps = 4 * np.finfo(np.float32).eps * max(abs(lo), abs(hi))  # the bounds rounded to float32
    assert x.min() >= lo - eps and x.max() <= hi + eps, (
        f"{what}: draws in [{x.min()}, {x.max()}], outside [{lo}, {hi}]")
    slack = width * 20 / n
    assert x.min() <= lo + slack and x.max() >= hi - slack, (
        f"{what}: draws in [{x.min()}, {x.max()}] don't reach the bounds [{lo}, {hi}]")
    sd = width / math.sqrt(12)
    assert abs(x.mean() - (lo + hi) / 2) <= Z * sd / math.sqrt(n), f"{what}: mean {x.mean()}"
    assert abs(x.std() - sd) <= Z * sd * math.sqrt(0.2 / n), (
        f"{what}: std {x.std()}, expected {sd} +- {Z * sd * math.sqrt(0.2 / n)}")


def check_normal(x: np.ndarray, mean: float, sd: float, what: str) -> None:
    """Draws of N(mean, sd**2): mean, std, and the share within one sd of the
    mean (0.6827; a binomial proportion's standard error)."""
    x = x.astype(np.float64).reshape(-1)
    n = x.size
    assert abs(x.mean() - mean) <= Z * sd / math.sqrt(n), f"{what}: mean {x.mean()}, not {mean}"
    assert abs(x.std() - sd) <= Z * sd * math.sqrt(0.5 / n), (
        f"{what}: std {x.std()}, expected {sd} +- {Z * sd * math.sqrt(0.5 / n)}")
    p = math.erf(1 / math.sqrt(2))
    inside = float(np.mean(np.abs(x - mean) <= sd))
    assert abs(inside - p) <= Z * math.sqrt(p * (1 - p) / n), f"{what}: {inside} within one sd"


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) by PyTorch's definition: dims 1 and 0 times the receptive field."""
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


SHAPE = (160, 120, 3)  # fan_in 360, fan_out 480; 57,600 draws


def test_uniform_and_normal_statistics(device):
    rc.manual_seed(2)
    u = A(init.uniform_(rc.empty(SHAPE, device=device), -2.0, 1.0))
    check_uniform(u, -2.0, 1.0, "uniform_")
    check_uniform(A(init.uniform_(rc.empty(SHAPE, device=device))), 0.0, 1.0, "uniform_ (defaults)")
    check_normal(A(init.normal_(rc.empty(SHAPE, device=device), 3.0, 0.5)), 3.0, 0.5, "normal_")
    check_normal(A(init.normal_(rc.empty(SHAPE, device=device))), 0.0, 1.0, "normal_ (defaults)")
    assert (A(init.constant_(rc.empty(3, device=device), 1.5)) == 1.5).all()
    assert (A(init.ones_(rc.empty(3, device=device))) == 1).all()
    assert (A(init.zeros_(rc.empty(3, device=device))) == 0).all()


@pytest.mark.parametrize("gain", [1.0, 2.0, 0.5])
def test_xavier_statistics(device, gain):
    """xavier_uniform_: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out));
    xavier_normal_: N(0, gain**2 * 2 / (fan_in + fan_out))."""
    rc.manual_seed(4)
    fan_in, fan_out = fans(SHAPE)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    w = rc.empty(SHAPE, device=device)
    check_uniform(A(init.xavier_uniform_(w, gain=gain)), -a, a, f"xavier_uniform_(gain={gain})")
    sd = gain * math.sqrt(2.0 / (fan_in + fan_out))
    check_normal(A(init.xavier_normal_(w, gain=gain)), 0.0, sd, f"xavier_normal_(gain={gain})")


@pytest.mark.parametrize("a,mode,nonlinearity", [
    (0.0, "fan_in", "leaky_relu"),  # the defaults: gain sqrt(2)
    (0.2, "fan_in", "leaky_relu"),
    (0.0, "fan_out", "relu"),
    (0.0, "fan_in", "tanh"),
    (0.0, "fan_out", "linear"),
    (math.sqrt(5), "fan_in", "leaky_relu"),  # nn.Linear's own initialisation
])
def test_kaiming_statistics(device, a, mode, nonlinearity):
    """kaiming_uniform_: U(-b, b), b = sqrt(3) * gain / sqrt(fan);
    kaiming_normal_: N(0, gain**2 / fan), gain from calculate_gain (written out
    here from PyTorch's table)."""
    rc.manual_seed(5)
    fan_in, fan_out = fans(SHAPE)
    fan = fan_in if mode == "fan_in" else fan_out
    gain = {"leaky_relu": math.sqrt(2.0 / (1 + a * a)), "relu": math.sqrt(2.0),
            "tanh": 5.0 / 3, "linear": 1.0}[nonlinearity]
    sd = gain / math.sqrt(fan)
    w = rc.empty(SHAPE, device=device)
    what = f"(a={a}, mode={mode}, nonlinearity={nonlinearity})"
    b = math.sqrt(3.0) * sd
    check_uniform(A(init.kaiming_uniform_(w, a=a, mode=mode, nonlinearity=nonlinearity)), -b, b,
                  "kaiming_uniform_" + what)
    check_normal(A(init.kaiming_normal_(w, a=a, mode=mode, nonlinearity=nonlinearity)), 0.0, sd,
                 "kaiming_normal_" + what)


def test_init_errors(device):
    w = rc.empty(4, 3, device=device)
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(w, mode="fan_avg")
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(w, mode="fan_avg")
    for fn in (init.xavier_uniform_, init.xavier_normal_, init.kaiming_uniform_,
               init.kaiming_normal_):
        with pytest.raises(ValueError, match="fewer than 2 dimensions"):
            fn(rc.empty(5, device=device))


@pytest.mark.parametrize("mean,std,a,b", [(0.5, 2.0, -1.0, 3.0), (0.0, 1.0, -2.0, 2.0),
                                          (0.0, 0.02, -0.04, 0.04)])
def test_trunc_normal_statistics(device, mean, std, a, b):
    """Inside [a, b] and reaching near both ends (a gap of t at an end has
    probability about exp(-n * pdf(end) * t)), with the truncated normal's mean
    and variance from the standard formulas."""
    rc.manual_seed(1)
    x = A(init.trunc_normal_(rc.empty(SHAPE, device=device), mean, std, a, b)).astype(np.float64)
    x = x.reshape(-1)
    n = x.size
    eps = 4 * np.finfo(np.float32).eps * max(abs(a), abs(b))
    assert x.min() >= a - eps and x.max() <= b + eps
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    al, be = (a - mean) / std, (b - mean) / std
    mass = cdf(be) - cdf(al)
    for end, z, got in ((a, al, x.min()), (b, be, x.max())):
        density = pdf(z) / (std * mass)
        assert abs(got - end) <= 20 / (n * density), f"draws stop at {got}, short of {end}"
    tmean = mean + std * (pdf(al) - pdf(be)) / mass
    shift = (pdf(al) - pdf(be)) / mass
    tsd = std * math.sqrt(1 + (al * pdf(al) - be * pdf(be)) / mass - shift ** 2)
    assert abs(x.mean() - tmean) <= Z * tsd / math.sqrt(n)
    assert abs(x.std() - tsd) <= Z * tsd * math.sqrt(0.5 / n), f"std {x.std()}, expected {tsd}"


def test_trunc_normal_default_float64(device):
    """The default: N(0, 1) on [-2, 2], in float64 too."""
    if not rc.device(device).supports(rc.float64):
        pytest.skip(f"{device} has no float64")
    rc.manual_seed(6)
    y = A(init.trunc_normal_(rc.empty(40_000, dtype=rc.float64, device=device)))
    assert y.dtype == np.float64 and y.min() >= -2 and y.max() <= 2
    assert y.min() < -1.98 and y.max() > 1.98
    mass = math.erf(2 / math.sqrt(2))
    tsd = math.sqrt(1 - 2 * 2 * math.exp(-2) / math.sqrt(2 * math.pi) / mass)
    assert abs(y.mean()) <= Z * tsd / math.sqrt(y.size)
    assert abs(y.std() - tsd) <= Z * tsd * math.sqrt(0.5 / y.size)


def test_eye_and_dirac(device):
    np.testing.assert_array_equal(A(init.eye_(rc.empty(3, 5, device=device))), np.eye(3, 5))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(rc.empty(2, 2, 2, device=device))
    w = init.dirac_(rc.empty(4, 2, 3, 3, device=device), groups=2)
    expected = np.zeros((4, 2, 3, 3))
    for o, i in ((0, 0), (1, 1), (2, 0), (3, 1)):
        expected[o, i, 1, 1] = 1
    np.testing.assert_array_equal(A(w), expected)
    # a conv with the dirac weight passes its input through
    x = rc.randn(1, 3, 5, device=device)
    w1 = init.dirac_(rc.empty(3, 3, 3, device=device))
    np.testing.assert_allclose(A(nn.functional.conv1d(x, w1, padding=1)), A(x), atol=1e-6)
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        init.dirac_(rc.empty(3, 2, 3, device=device), groups=2)
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        init.dirac_(rc.empty(3, 3, device=device))


def test_eye_and_dirac_match_torch():
    torch = pytest.importorskip("torch")
    for shape, groups in (((6, 2, 3, 2), 3), ((2, 4, 3), 1), ((4, 2, 3, 3, 3), 2)):
        ours = A(init.dirac_(rc.empty(shape), groups))
        theirs = torch.nn.init.dirac_(torch.empty(shape), groups).numpy()
        np.testing.assert_array_equal(ours, theirs)


def test_sparse(device):
    rc.manual_seed(5)
    w = A(init.sparse_(rc.empty(10, 40, device=device), sparsity=0.25, std=0.5))
    zeros_per_col = (w == 0).sum(0)
    assert (zeros_per_col == 3).all()  # ceil(0.25 * 10)
    nz = w[w != 0].astype(np.float64)
    # N(0, 0.25) on the kept entries (the zeros are exact: a draw is never 0)
    assert abs(nz.mean()) <= Z * 0.5 / math.sqrt(nz.size)
    assert abs(nz.std() - 0.5) <= Z * 0.5 * math.sqrt(0.5 / nz.size)
    big = A(init.sparse_(rc.empty(300, 200, device=device), sparsity=0.1, std=2.0))
    assert ((big == 0).sum(0) == 30).all()
    check_normal(big[big != 0], 0.0, 2.0, "sparse_(std=2.0)")
    # different rows are zeroed in different columns
    assert len({tuple(np.flatnonzero(w[:, j] == 0)) for j in range(40)}) > 5
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(rc.empty(2, 2, 2, device=device), 0.5)


def test_init_does_not_record():
    w = nn.Parameter(rc.ones(3, 3))
    for fn in (init.orthogonal_, init.eye_, init.xavier_uniform_, init.trunc_normal_,
               lambda t: init.sparse_(t, 0.3)):
        out = fn(w)
        assert out is w and w.is_leaf and w.grad_fn is None


def test_deprecated_spellings():
    with pytest.warns(FutureWarning, match=r"`nn.init.orthogonal` is now deprecated in favor of "
                                           r"`nn.init.orthogonal_`"):
        w = init.orthogonal(rc.empty(3, 3))
    m = A(w)
    np.testing.assert_allclose(m @ m.T, np.eye(3), atol=1e-5)
    with pytest.warns(FutureWarning, match="nn.init.normal"):
        init.normal(rc.empty(2))
