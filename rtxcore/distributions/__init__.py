"""Probability distributions, as ``torch.distributions``: ``Distribution`` (the
base), ``Normal``, ``Bernoulli`` and ``Categorical``, with ``sample``,
``rsample`` (Normal), ``log_prob``, ``entropy``, moments and PyTorch's argument
validation (``constraints``).

    dist = rtxcore.distributions.Categorical(logits=policy(obs))
    action = dist.sample()
    loss = -(dist.log_prob(action) * advantage).mean()
"""

from __future__ import annotations

from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .normal import Normal

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal", "constraints"]
