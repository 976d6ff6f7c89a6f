"""Learning-rate schedulers, as ``torch.optim.lr_scheduler``: ``LRScheduler``
(the base), ``LambdaLR``, ``MultiplicativeLR``, ``StepLR``, ``MultiStepLR``,
``ConstantLR``, ``LinearLR``, ``ExponentialLR``, ``PolynomialLR``,
``CosineAnnealingLR``, ``CosineAnnealingWarmRestarts``, ``CyclicLR``,
``OneCycleLR``, ``SequentialLR``, ``ChainedScheduler`` and ``ReduceLROnPlateau``.

Call ``scheduler.step()`` after ``optimizer.step()``, once per epoch (or per
iteration, as the schedule is meant). Each scheduler sets its groups' ``lr``
and remembers the starting one in ``group['initial_lr']``.

By family: ``base`` (``LRScheduler`` and what the schedulers share),
``closed_form`` (the lr a function of the epoch), ``cyclic`` (``CyclicLR``,
``OneCycleLR``), ``plateau`` (``ReduceLROnPlateau``, driven by a metric) and
``composite`` (``SequentialLR``, ``ChainedScheduler``).
"""

from .base import EPOCH_DEPRECATION_WARNING as EPOCH_DEPRECATION_WARNING  # as PyTorch's
from .base import LRScheduler
from .base import _LRScheduler as _LRScheduler  # the old name, as PyTorch keeps it
from .closed_form import (ConstantLR, CosineAnnealingLR, CosineAnnealingWarmRestarts,
                          ExponentialLR, LambdaLR, LinearLR, MultiplicativeLR, MultiStepLR,
                          PolynomialLR, StepLR)
from .composite import ChainedScheduler, SequentialLR
from .cyclic import CyclicLR, OneCycleLR
from .plateau import ReduceLROnPlateau

__all__ = ["ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
           "CyclicLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR",
           "MultiplicativeLR", "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR",
           "StepLR"]
