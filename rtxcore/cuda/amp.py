"""``rtxcore.cuda.amp``: PyTorch's older spelling of ``rtxcore.amp`` for CUDA.
``autocast(...)`` is ``rtxcore.amp.autocast("cuda", ...)`` and ``GradScaler(...)``
is ``rtxcore.amp.GradScaler("cuda", ...)``; both warn as PyTorch's do."""

from __future__ import annotations

import warnings
from typing import Any

from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast
from ..dtype import float16

__all__ = ["GradScaler", "autocast"]


class autocast(_autocast):  # noqa: N801
    def __init__(self, enabled: bool = True, dtype: Any = float16, cache_enabled: bool = True) -> None:
        warnings.warn("`rtxcore.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`rtxcore.amp.autocast('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        warnings.warn("`rtxcore.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`rtxcore.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
