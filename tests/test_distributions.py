"""rtxcore.distributions: Normal, Categorical and Bernoulli against closed forms
computed here in NumPy (and torch.distributions when PyTorch imports): log_prob,
entropy, moments, sample moments under a fixed seed, shapes, gradients
(gradcheck in float64) and PyTorch's argument validation errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import gradcheck
from rtxcore.distributions import Bernoulli, Categorical, Distribution, Normal, constraints


@pytest.fixture(autouse=True)
def rng_state():
    state = rc.get_rng_state()
    yield
    rc.set_rng_state(state)


def supports64(device):
    return rc.device(device).supports(rc.float64)


def test_lazy_import():
    import subprocess
    import sys

    code = ("import sys, rtxcore; assert 'rtxcore.distributions' not in sys.modules; "
            "assert rtxcore.distributions.Normal.__name__ == 'Normal'")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- Normal ----------------------------------------------------------------------------------

LOC = np.array([0.0, 1.5, -2.0], np.float32)
SCALE = np.array([1.0, 0.5, 3.0], np.float32)


def test_normal_closed_forms(device):
    d = Normal(rc.tensor(LOC, device=device), rc.tensor(SCALE, device=device))
    assert d.batch_shape == (3,) and d.event_shape == () and d.has_rsample
    x = np.array([0.3, 1.0, 4.0], np.float32)
    lp = -((x - LOC) ** 2) / (2 * SCALE ** 2) - np.log(SCALE) - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(d.log_prob(rc.tensor(x, device=device)).numpy(), lp, rtol=1e-5)
    np.testing.assert_allclose(d.entropy().numpy(), 0.5 + 0.5 * np.log(2 * np.pi) + np.log(SCALE),
                               rtol=1e-6)
    cdf = [0.5 * (1 + math.erf((xi - m) / (s * math.sqrt(2)))) for xi, m, s in zip(x, LOC, SCALE)]
    np.testing.assert_allclose(d.cdf(rc.tensor(x, device=device)).numpy(), cdf, rtol=1e-5)
    np.testing.assert_allclose(d.mean.numpy(), LOC)
    np.testing.assert_allclose(d.mode.numpy(), LOC)
    np.testing.assert_allclose(d.stddev.numpy(), SCALE)
    np.testing.assert_allclose(d.variance.numpy(), SCALE ** 2, rtol=1e-6)
    # numbers broadcast with tensors; a number-only distribution is scalar
    d = Normal(0.0, rc.tensor([[1.0], [2.0]], device=device))
    assert d.batch_shape == (2, 1) and tuple(d.loc.shape) == (2, 1)
    assert Normal(1.0, 2.0).batch_shape == () and Normal(1.0, 2.0).loc.dtype == rc.float32


def test_normal_sample_moments_and_seed(device):
    d = Normal(rc.tensor(LOC, device=device), rc.tensor(SCALE, device=device))
    rc.manual_seed(0)
    s = d.sample((20000,))
    assert tuple(s.shape) == (20000, 3) and not s.requires_grad and s.device == d.loc.device
    arr = s.numpy().astype(np.float64)
    np.testing.assert_allclose(arr.mean(0), LOC, atol=5 * SCALE.max() / np.sqrt(20000))
    np.testing.assert_allclose(arr.std(0), SCALE, rtol=0.03)
    rc.manual_seed(0)
    np.testing.assert_array_equal(d.sample((20000,)).numpy(), s.numpy())
    assert tuple(d.sample().shape) == (3,) and tuple(d.sample(4).shape) == (4, 3)


def test_normal_rsample_gradients(device):
    loc = rc.tensor(LOC, device=device, requires_grad=True)
    scale = rc.tensor(SCALE, device=device, requires_grad=True)
    rc.manual_seed(1)
    x = Normal(loc, scale).rsample((5,))
    assert x.requires_grad
    x.sum().backward()
    eps = (x.detach().numpy() - LOC) / SCALE
    np.testing.assert_allclose(loc.grad.numpy(), np.full(3, 5.0))
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0), rtol=1e-4, atol=1e-5)
    assert not Normal(loc, scale).sample().requires_grad


def test_normal_gradcheck():
    loc = rc.tensor([0.2, -1.0], dtype=rc.float64, requires_grad=True)
    scale = rc.tensor([0.7, 1.9], dtype=rc.float64, requires_grad=True)
    x = rc.tensor([0.5, 0.1], dtype=rc.float64)
    assert gradcheck(lambda m, s: Normal(m, s).log_prob(x), (loc, scale))
    assert gradcheck(lambda m, s: Normal(m, s).entropy(), (loc, scale))

    def rsample(m, s):
        rc.manual_seed(3)
        return Normal(m, s).rsample((4,))

    assert gradcheck(rsample, (loc, scale))


# -- Categorical -----------------------------------------------------------------------------

LOGITS = np.array([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]], np.float32)


def np_log_softmax(z):
    z = z.astype(np.float64)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def test_categorical_closed_forms(device):
    d = Categorical(logits=rc.tensor(LOGITS, device=device))
    assert d.batch_shape == (2,) and d.event_shape == () and d.param_shape == (2, 4)
    logp = np_log_softmax(LOGITS)
    np.testing.assert_allclose(d.logits.numpy(), logp, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(d.probs.numpy(), np.exp(logp), rtol=1e-5)
    k = rc.tensor([2, 3], device=device)
    np.testing.assert_allclose(d.log_prob(k).numpy(), [logp[0, 2], logp[1, 3]], rtol=1e-5)
    # log_prob broadcasts a sample batch against the batch shape
    kk = rc.tensor([[0, 1], [3, 2], [1, 0]], device=device)
    np.testing.assert_allclose(d.log_prob(kk).numpy(), logp[[0, 1], kk.numpy()], rtol=1e-5)
    np.testing.assert_allclose(d.entropy().numpy(), -(np.exp(logp) * logp).sum(-1), rtol=1e-5)
    assert d.mode.tolist() == [2, 0]
    assert np.isnan(d.mean.numpy()).all() and tuple(d.variance.shape) == (2,)
    assert d.support.upper_bound == 3 and d.support.is_discrete
    assert d.enumerate_support().tolist() == [[0, 0], [1, 1], [2, 2], [3, 3]]
    # probs are normalised; logits derived from them
    p = np.array([1.0, 3.0, 0.0, 4.0], np.float32)
    d = Categorical(probs=rc.tensor(p, device=device))
    assert d.batch_shape == ()
    np.testing.assert_allclose(d.probs.numpy(), p / 8, rtol=1e-6)
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(d.logits.numpy(), np.log(np.clip(p / 8, eps, 1 - eps)), rtol=1e-5)
    ent = -(p[p > 0] / 8 * np.log(p[p > 0] / 8)).sum()
    np.testing.assert_allclose(float(d.entropy()), ent, rtol=1e-5)


def test_categorical_sample_frequencies(device):
    p = np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    d = Categorical(probs=rc.tensor(p, dtype=rc.float32, device=device))
    rc.manual_seed(0)
    s = d.sample((6000,))
    assert tuple(s.shape) == (6000, 2) and s.dtype == rc.int64
    arr = s.numpy()
    for row in range(2):
        freq = np.bincount(arr[:, row], minlength=3) / 6000
        np.testing.assert_allclose(freq, p[row], atol=5 * np.sqrt(0.25 / 6000))
    assert (arr[:, 1] != 1).all()
    rc.manual_seed(0)
    np.testing.assert_array_equal(d.sample((6000,)).numpy(), arr)
    assert tuple(d.sample().shape) == (2,) and tuple(d.sample((2, 3)).shape) == (2, 3, 2)


def test_categorical_gradcheck():
    logits = rc.tensor(LOGITS, dtype=rc.float64, requires_grad=True)
    k = rc.tensor([2, 0])
    assert gradcheck(lambda z: Categorical(logits=z).log_prob(k), (logits,))
    assert gradcheck(lambda z: Categorical(logits=z).entropy(), (logits,))
    probs = rc.tensor([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]], dtype=rc.float64, requires_grad=True)
    assert gradcheck(lambda q: Categorical(probs=q).log_prob(rc.tensor([1, 2])), (probs,))
    assert gradcheck(lambda q: Categorical(probs=q).entropy(), (probs,))


# -- Bernoulli -------------------------------------------------------------------------------


def test_bernoulli_closed_forms(device):
    p = np.array([0.2, 0.5, 0.9], np.float32)
    for d in (Bernoulli(probs=rc.tensor(p, device=device)),
              Bernoulli(logits=rc.tensor(np.log(p / (1 - p)), device=device))):
        assert d.batch_shape == (3,) and d.event_shape == ()
        x = np.array([1.0, 0.0, 0.0], np.float32)
        lp = x * np.log(p) + (1 - x) * np.log1p(-p)
        np.testing.assert_allclose(d.log_prob(rc.tensor(x, device=device)).numpy(), lp, rtol=1e-5)
        ent = -(p * np.log(p) + (1 - p) * np.log1p(-p))
        np.testing.assert_allclose(d.entropy().numpy(), ent, rtol=1e-5)
        np.testing.assert_allclose(d.mean.numpy(), p, rtol=1e-6)
        np.testing.assert_allclose(d.variance.numpy(), p * (1 - p), rtol=1e-5)
        np.testing.assert_allclose(d.probs.numpy(), p, rtol=1e-6)
        mode = d.mode.numpy()
        assert mode[0] == 0 and np.isnan(mode[1]) and mode[2] == 1
    assert d.enumerate_support().tolist() == [[0, 0, 0], [1, 1, 1]]
    assert Bernoulli(0.3).batch_shape == ()


def test_bernoulli_sample_frequencies(device):
    p = np.array([0.1, 0.5, 0.85], np.float32)
    d = Bernoulli(probs=rc.tensor(p, device=device))
    rc.manual_seed(2)
    s = d.sample((8000,))
    assert tuple(s.shape) == (8000, 3) and s.dtype == rc.float32
    arr = s.numpy()
    assert set(np.unique(arr)) <= {0.0, 1.0}
    np.testing.assert_allclose(arr.mean(0), p, atol=5 * np.sqrt(0.25 / 8000))


def test_bernoulli_gradcheck():
    probs = rc.tensor([0.2, 0.6, 0.7], dtype=rc.float64, requires_grad=True)
    logits = rc.tensor([-1.0, 0.3, 2.0], dtype=rc.float64, requires_grad=True)
    x = rc.tensor([1.0, 0.0, 1.0], dtype=rc.float64)
    assert gradcheck(lambda q: Bernoulli(probs=q).log_prob(x), (probs,))
    assert gradcheck(lambda q: Bernoulli(probs=q).entropy(), (probs,))
    assert gradcheck(lambda z: Bernoulli(logits=z).log_prob(x), (logits,))
    assert gradcheck(lambda z: Bernoulli(logits=z).entropy(), (logits,))


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("make,param,constraint", [
    (lambda: Normal(rc.tensor([0.0]), rc.tensor([-1.0])), "scale", "GreaterThan(lower_bound=0.0)"),
    (lambda: Normal(rc.tensor([float("nan")]), rc.tensor([1.0])), "loc", "Real()"),
    (lambda: Bernoulli(probs=rc.tensor([1.5])), "probs",
     "Interval(lower_bound=0.0, upper_bound=1.0)"),
    (lambda: Categorical(probs=rc.tensor([0.5, -0.1, 0.6])), "probs", "Simplex()"),
    (lambda: Categorical(logits=rc.tensor([0.0, float("nan")])), "logits",
     "IndependentConstraint(Real(), 1)"),
])
def test_parameter_validation(make, param, constraint):
    with pytest.raises(ValueError) as info:
        make()
    msg = str(info.value)
    assert msg.startswith(f"Expected parameter {param} (Tensor of shape")
    assert f"to satisfy the constraint {constraint}, but found invalid values" in msg


def test_value_validation_and_switches():
    with pytest.raises(ValueError, match=r"to be within the support \(IntegerInterval\("
                                         r"lower_bound=0, upper_bound=2\)\)"):
        Categorical(logits=rc.zeros(3)).log_prob(rc.tensor([3]))
    with pytest.raises(ValueError, match=r"support \(Boolean\(\)\)"):
        Bernoulli(probs=rc.tensor([0.3])).log_prob(rc.tensor([0.5]))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="not broadcastable"):
        Normal(rc.zeros(3), rc.ones(3)).log_prob(rc.zeros(2))
    with pytest.raises(ValueError,
                       match="Either `probs` or `logits` must be specified, but not both"):
        Categorical(probs=rc.ones(2), logits=rc.ones(2))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        Bernoulli()
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional"):
        Categorical(probs=rc.tensor(1.0))
    # validate_args=False skips the checks, per instance or by default
    assert float(Normal(0.0, -1.0, validate_args=False).scale) == -1.0
    Distribution.set_default_validate_args(False)
    try:
        assert float(Bernoulli(probs=rc.tensor(2.0)).probs) == 2.0
    finally:
        Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        Bernoulli(probs=rc.tensor(2.0))
    assert constraints.positive.check(rc.tensor([1.0, 0.0])).tolist() == [True, False]


def test_matches_torch():
    torch = pytest.importorskip("torch")
    td = torch.distributions
    x = np.array([0.3, 1.0, 4.0], np.float32)
    ours, theirs = Normal(rc.tensor(LOC), rc.tensor(SCALE)), td.Normal(torch.tensor(LOC),
                                                                       torch.tensor(SCALE))
    np.testing.assert_allclose(ours.log_prob(rc.tensor(x)).numpy(),
                               theirs.log_prob(torch.tensor(x)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.entropy().numpy(), theirs.entropy().numpy(), rtol=1e-6)
    ours, theirs = Categorical(logits=rc.tensor(LOGITS)), td.Categorical(
        logits=torch.tensor(LOGITS))
    k = np.array([[1, 3], [0, 0]])
    np.testing.assert_allclose(ours.log_prob(rc.tensor(k)).numpy(),
                               theirs.log_prob(torch.tensor(k)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.entropy().numpy(), theirs.entropy().numpy(), rtol=1e-6)
    p = np.array([0.2, 0.0, 1.0, 0.7], np.float32)
    ours, theirs = Bernoulli(probs=rc.tensor(p)), td.Bernoulli(probs=torch.tensor(p))
    b = np.array([1.0, 0.0, 1.0, 0.0], np.float32)
    np.testing.assert_allclose(ours.log_prob(rc.tensor(b)).numpy(),
                               theirs.log_prob(torch.tensor(b)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.entropy().numpy(), theirs.entropy().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(ours.logits.numpy(), theirs.logits.numpy(), rtol=1e-6)
    # the same validation messages, up to the tensors' printing
    for make in (lambda m: m.distributions.Normal(m.tensor([0.0]), m.tensor([-1.0])),
                 lambda m: m.distributions.Bernoulli(probs=m.tensor([1.5]))):
        with pytest.raises(ValueError) as a:
            make(rc)
        with pytest.raises(ValueError) as b:
            make(torch)
        head = str(b.value).split(" of distribution ")[0]
        tail = str(b.value).split("to satisfy the constraint ")[1].split(",")[0]
        assert str(a.value).startswith(head) and f"constraint {tail}," in str(a.value)
