"""The training step the jit and compile tests trace: forward, cross-entropy,
backward, gradient clipping and the optimizer's step, as one function."""

from __future__ import annotations

from typing import Any, Callable

import rtxcore.nn as nn


def clipped_step(model: Any, opt: Any) -> Callable[[Any, Any], Any]:
    """``step(x, y)``: one step of ``opt`` on ``model``'s cross-entropy for
    ``(x, y)``, gradients clipped to norm 1; returns the loss, detached."""

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()

    return step
