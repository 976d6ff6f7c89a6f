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


def test_trunc_normal_statistics(device):
    rc.manual_seed(1)
    mean, std, a, b = 0.5, 2.0, -1.0, 3.0
    x = A(init.trunc_normal_(rc.empty(100_000, device=device), mean, std, a, b)).astype(np.float64)
    assert x.min() >= a and x.max() <= b
    # the truncated normal's mean and variance, from the standard formulas
    al, be = (a - mean) / std, (b - mean) / std
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    zmass = cdf(be) - cdf(al)
    tmean = mean + std * (pdf(al) - pdf(be)) / zmass
    shift = (pdf(al) - pdf(be)) / zmass
    tvar = std ** 2 * (1 + (al * pdf(al) - be * pdf(be)) / zmass - shift ** 2)
    assert abs(x.mean() - tmean) < 0.02
    assert abs(x.var() - tvar) < 0.03
    # the default: N(0, 1) on [-2, 2]
    y = A(init.trunc_normal_(rc.empty(20_000, dtype=rc.float64, device=device)))
    assert y.min() >= -2 and y.max() <= 2 and abs(y.mean()) < 0.03


def test_uniform_normal_constant(device):
    rc.manual_seed(2)
    u = A(init.uniform_(rc.empty(50_000, device=device), -2.0, 1.0))
    assert u.min() >= -2 and u.max() <= 1 and abs(u.mean() + 0.5) < 0.02
    n = A(init.normal_(rc.empty(50_000, device=device), 3.0, 0.5))
    assert abs(n.mean() - 3.0) < 0.01 and abs(n.std() - 0.5) < 0.01
    assert (A(init.constant_(rc.empty(3, device=device), 1.5)) == 1.5).all()
    assert (A(init.ones_(rc.empty(3, device=device))) == 1).all()
    assert (A(init.zeros_(rc.empty(3, device=device))) == 0).all()


def test_xavier_and_kaiming_statistics(device):
    rc.manual_seed(4)
    w = rc.empty(200, 100, 3, device=device)  # fan_in 300, fan_out 600
    xu = A(init.xavier_uniform_(w, gain=2.0))
    a = 2.0 * math.sqrt(6.0 / 900)
    assert np.abs(xu).max() <= a and abs(xu.std() - a / math.sqrt(3)) < 0.01 * a
    xn = A(init.xavier_normal_(w))
    assert abs(xn.std() - math.sqrt(2.0 / 900)) < 0.01 * math.sqrt(2.0 / 900)
    ku = A(init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu"))
    bound = math.sqrt(2.0) * math.sqrt(3.0 / 600)
    assert np.abs(ku).max() <= bound and abs(ku.std() - bound / math.sqrt(3)) < 0.01 * bound
    kn = A(init.kaiming_normal_(w, a=0.1))
    std = math.sqrt(2.0 / (1 + 0.01)) / math.sqrt(300)
    assert abs(kn.std() - std) < 0.01 * std
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(w, mode="fan_avg")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(rc.empty(5, device=device))


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
    nz = w[w != 0]
    assert abs(nz.std() - 0.5) < 0.08
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
