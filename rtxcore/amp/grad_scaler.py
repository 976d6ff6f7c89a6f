"""``rtxcore.amp.GradScaler``: loss scaling for float16 training, PyTorch's
algorithm and API.

``scale(loss)`` multiplies the loss by the scale so small float16 gradients
don't flush to zero; ``unscale_(optimizer)`` divides the optimizer's gradients
by it and notes whether any is inf or nan; ``step(optimizer)`` unscales if that
wasn't done and skips ``optimizer.step()`` when a gradient was not finite;
``update()`` then backs the scale off (after a skipped step) or grows it (after
``growth_interval`` finite steps in a row).

The scale is kept as a Python float: it is a power of two times the growth and
backoff factors, the same float32 values PyTorch's scale tensor holds for the
default factors, and ``scale(loss)`` multiplies by it as a 0-dim float32 tensor
on the loss's device, so results (and their dtypes) match PyTorch's.
"""

from __future__ import annotations

import warnings
from enum import Enum
from typing import Any

from .. import dtype as D

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _f32(v: float) -> float:
    """``v`` rounded to float32, as PyTorch's float32 scale tensor holds it."""
    import numpy as np

    return float(np.float32(v))


class GradScaler:
    """``GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)``.

    With ``enabled=False`` (or on a device type that is not available, with a
    warning, as PyTorch) every method passes through: ``scale`` returns its
    argument, ``step`` just steps, ``update`` does nothing.
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        from ..device import Device

        self._device = str(device)
        dev_type = Device(device).type if enabled else self._device.partition(":")[0]
        self._enabled = bool(enabled)
        if self._enabled:
            from .autocast_mode import _unavailable_reason

            reason = _unavailable_reason(dev_type)
            if reason is not None:
                warnings.warn(f"rtxcore.amp.GradScaler is enabled, but {dev_type} is not "
                              f"available ({reason}). Disabling.", stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError(f"GradScaler(): growth_factor should be > 1, got {growth_factor}")
            if not 0.0 < backoff_factor < 1.0:
                raise ValueError(f"GradScaler(): backoff_factor should be in (0, 1), got {backoff_factor}")
            if int(growth_interval) != growth_interval or growth_interval <= 0:
                raise ValueError(f"GradScaler(): growth_interval should be a positive int, got "
                                 f"{growth_interval}")
        self._init_scale = _f32(init_scale)
        self._scale: float | None = None  # set on first use, as PyTorch's lazy tensor
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._growth_tracker = 0
        self._per_optimizer_states: dict[int, dict[str, Any]] = {}

    # -- scaling ---------------------------------------------------------------------

    def _ensure_scale(self) -> float:
        if self._scale is None:
            self._scale = self._init_scale
            self._growth_tracker = self._init_growth_tracker
        return self._scale

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer_states.setdefault(
            id(optimizer), {"stage": OptState.READY, "found_inf": False})

    def scale(self, outputs: Any) -> Any:
        """``outputs`` times the scale: a tensor, or tensors in lists / tuples
        (nested), each multiplied by a 0-dim float32 scale on its own device."""
        if not self._enabled:
            return outputs
        from ..ops.creation import tensor
        from ..tensor import Tensor

        s = self._ensure_scale()

        def apply(v: Any) -> Any:
            if isinstance(v, Tensor):
                return v * tensor(s, dtype=D.float32, device=v.device)
            if isinstance(v, (list, tuple)):
                out = [apply(x) for x in v]
                return type(v)(out) if isinstance(v, list) else tuple(out)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _params_with_grad(self, optimizer: Any) -> list[Any]:
        return [p for group in optimizer.param_groups for p in group["params"]
                if getattr(p, "grad", None) is not None]

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale in place, noting whether
        any is inf or nan. At most once per optimizer between ``update()`` calls."""
        if not self._enabled:
            return
        if self._scale is None:
            raise RuntimeError("unscale_(): the scale has not been set yet: call scale(loss) first")
        st = self._state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        st["found_inf"] = self._unscale_grads(optimizer, _f32(1.0 / self._scale))
        st["stage"] = OptState.UNSCALED

    def _unscale_grads(self, optimizer: Any, inv_scale: float) -> bool:
        from ..ops.elementwise import isfinite

        params = self._params_with_grad(optimizer)
        if not params:
            raise AssertionError("No inf checks were recorded for this optimizer "
                                 "(none of its parameters has a gradient).")
        from ..ops.indexing import stack

        finite: dict[Any, list[Any]] = {}  # device -> one "all finite" flag per gradient
        for p in params:
            g = p.grad
            if g.dtype is D.float16:
                raise ValueError("Attempting to unscale FP16 gradients.")
            g.mul_(inv_scale)
            finite.setdefault(g.device, []).append(isfinite(g).all())
        # one read to the host per device, not one per gradient
        return not all(bool(stack(flags).all().item()) for flags in finite.values())

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)`` on unscaled gradients, unless one of
        them is inf or nan (then nothing is done and None returned)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        if self._scale is None:
            raise RuntimeError("step(): the scale has not been set yet: call scale(loss) first")
        st = self._state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        result = None if st["found_inf"] else optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale: Any = None) -> None:
        """Back the scale off if any optimizer stepped over inf/nan gradients since
        the last update, else count a good step and grow it every
        ``growth_interval`` of them. ``new_scale`` (a float or a one-element
        tensor) sets the scale directly instead."""
        if not self._enabled:
            return
        if self._scale is None:
            raise RuntimeError("update(): the scale has not been set yet: call scale(loss) first")
        if new_scale is not None:
            if hasattr(new_scale, "item"):
                if new_scale.numel() != 1:
                    raise AssertionError("new_scale should be a float or a 1-element tensor")
                if getattr(new_scale, "requires_grad", False):
                    raise AssertionError("new_scale should not require grad")
                new_scale = new_scale.item()
            self._scale = _f32(new_scale)
        else:
            if not self._per_optimizer_states:
                raise AssertionError("No inf checks were recorded prior to update.")
            found_inf = any(st["found_inf"] for st in self._per_optimizer_states.values())
            if found_inf:
                self._scale = _f32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale = _f32(self._scale * self._growth_factor)
                    self._growth_tracker = 0
        self._per_optimizer_states = {}

    # -- accessors -----------------------------------------------------------------------

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self) -> int:
        if self._scale is None:
            return self._init_growth_tracker
        return self._growth_tracker

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` (PyTorch's keys); empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = _f32(state_dict["scale"])
        if self._scale is not None:
            self._scale = self._init_scale
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            self._growth_tracker = self._init_growth_tracker

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_per_optimizer_states"] = {}
        return state
