"""``rtxcore.amp``: automatic mixed precision (PyTorch's ``torch.amp``).

    scaler = rtxcore.amp.GradScaler("opencl")
    with rtxcore.autocast("opencl"):
        loss = loss_fn(model(x), y)      # matmuls in float16, the loss in float32
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()

``autocast`` is also ``rtxcore.autocast``; ``rtxcore.cuda.amp`` has PyTorch's
older CUDA-only spellings. Op front-ends call ``autocast_inputs``. The op
modules import this package, so ``GradScaler`` loads on first use.
"""

from __future__ import annotations

from typing import Any

from .autocast_mode import (autocast, autocast_inputs, get_autocast_dtype, is_autocast_available,
                            is_autocast_enabled)

__all__ = ["GradScaler", "OptState", "autocast", "autocast_inputs", "get_autocast_dtype",
           "is_autocast_available", "is_autocast_enabled"]


def __getattr__(name: str) -> Any:
    if name in ("GradScaler", "OptState"):
        from . import grad_scaler

        return getattr(grad_scaler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
