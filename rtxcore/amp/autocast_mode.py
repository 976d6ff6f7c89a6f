"""``rtxcore.autocast``: automatic mixed precision, PyTorch's cast policy.

Inside ``with rtxcore.autocast("cuda"):`` (or any device type), ops on tensors of
that device type choose their compute dtype:

- matrix products (``matmul`` / ``mm`` / ``bmm`` / ``@``, ``linear``, the
  convolutions) run in the low dtype (float16): their float32 inputs are cast
  down;
- ops that need range or accumulate (``softmax``, ``log_softmax``,
  ``layer_norm``, the losses, sum-type reductions) run in float32: float16
  inputs are cast up;
- everything else runs in the dtype of its inputs.

float64 tensors are never cast, as in PyTorch. Op front-ends ask
``autocast_inputs(kind, *args)`` for their arguments only while some thread is
inside an autocast region; that state and the cast policy live in the core
(rtxcore/_autocast.py), which the front-ends read without importing this
namespace. The state is per thread; contexts nest, and ``enabled=False`` turns
autocast off inside an enabled region.

Casts are ordinary recorded ``to`` ops, so gradients flow back to float32
parameters in float32. Within a region the float16 copy of a leaf tensor that
requires grad (a parameter) is made once and reused (``cache_enabled``), and
dropped when the outermost region ends or the parameter is written in place.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from .. import dtype as D
from .._autocast import (FP32_KINDS, LOW_KINDS, _state, autocast_inputs,  # noqa: F401
                         enter_region, exit_region, regions)
from ..dispatch.types import DType

__all__ = ["autocast", "autocast_inputs", "get_autocast_dtype", "is_autocast_available",
           "is_autocast_enabled"]


def _known_type(device_type: str) -> bool:
    from ..dispatch.registry import KNOWN_BACKENDS, registry

    registry.ensure_loaded()
    return device_type in registry.backends or device_type in KNOWN_BACKENDS


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can be asked for ``device_type`` (any device type rtxcore
    knows; it is turned off, with a warning, where the device is unavailable)."""
    return isinstance(device_type, str) and _known_type(device_type)


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on in this thread for ``device_type`` (default ``'cuda'``)."""
    active = _state.active
    return active is not None and ("cuda" if device_type is None else device_type) in active


def get_autocast_dtype(device_type: str) -> DType:
    """The low dtype autocast uses for ``device_type``: the active region's, else
    float16 (the only one rtxcore has)."""
    active = _state.active
    if active is not None and device_type in active:
        return active[device_type]
    return D.float16


def _unavailable_reason(device_type: str) -> str | None:
    """Why devices of this type can't be used, or None when they can."""
    from ..dispatch.registry import registry

    entry = registry.backends.get(device_type)
    if entry is None:
        return registry.missing_backend_message(device_type)
    try:
        if not entry.backend.is_available():
            return entry.backend.unavailable_reason() or "no reason given"
        if entry.backend.device_count() == 0:
            return "its backend has no device"
    except Exception as exc:
        return f"its backend failed: {type(exc).__name__}: {exc}"
    return None


class autocast:  # noqa: N801  (PyTorch's name)
    """``with rtxcore.autocast("cuda"):`` / ``@rtxcore.autocast("opencl")``: run
    matrix products in float16 and precision-sensitive ops in float32 on that
    device type (see the module docstring for the policy).

    dtype: the low dtype, float16 (the default everywhere but cpu, where
    PyTorch's default is bfloat16, which rtxcore lacks: pass
    ``dtype=rtxcore.float16`` there). enabled: False makes the region turn
    autocast off. cache_enabled: reuse the low copy of each parameter within
    the region (default True).
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"autocast(): expected `device_type` of type `str` (like 'cuda' or "
                             f"'cpu'), got `{type(device_type).__name__}`")
        if not _known_type(device_type):
            from ..dispatch.registry import registry

            raise RuntimeError(f"autocast(): unsupported device_type {device_type!r}: "
                               f"{registry.missing_backend_message(device_type)}")
        self.device = device_type
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if not enabled:
            # a region that turns autocast off: any dtype is fine (PyTorch doesn't
            # look at it either), so `autocast(..., dtype=bfloat16, enabled=False)` runs
            self.fast_dtype = dtype if isinstance(dtype, DType) else D.float16
            self._enabled = False
            return
        if dtype is None:
            if device_type == "cpu":
                raise RuntimeError(
                    "autocast('cpu'): the default autocast dtype on cpu is bfloat16, which "
                    "rtxcore does not have; pass dtype=rtxcore.float16")
            dtype = D.float16
        elif not isinstance(dtype, DType):
            name = getattr(dtype, "name", None) or str(dtype)
            if name == "bfloat16":
                raise RuntimeError(f"autocast({device_type!r}): dtype bfloat16 is not available "
                                   "in rtxcore; pass dtype=rtxcore.float16")
            dtype = D.as_dtype(dtype)
        if dtype is not D.float16:
            raise RuntimeError(f"autocast({device_type!r}): dtype {dtype.name} is not supported; "
                               "autocast runs in float16 (dtype=rtxcore.float16)")
        self.fast_dtype = dtype
        if enabled:
            reason = _unavailable_reason(device_type)
            if reason is not None:
                warnings.warn(f"User provided device_type of {device_type!r}, but {device_type} "
                              f"is not available ({reason}). Disabling autocast.", stacklevel=2)
                enabled = False
            else:
                self._check_float16(device_type)
        self._enabled = enabled

    @staticmethod
    def _check_float16(device_type: str) -> None:
        from ..dispatch.registry import registry

        b = registry.backends[device_type].backend
        for i in range(b.device_count()):
            have = b.dtypes(i)
            if "float16" not in have:
                raise RuntimeError(
                    f"autocast({device_type!r}): device {device_type}:{i} does not compute "
                    f"float16 (it supports: {', '.join(sorted(have))}); autocast can't be used "
                    "on it")

    def __enter__(self) -> "autocast":
        self._prev = enter_region(self.device, self.fast_dtype, self._enabled, self._cache_enabled)
        return self

    def __exit__(self, *exc: Any) -> None:
        exit_region(self._prev)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        args = (self.device, self.fast_dtype, self._enabled, self._cache_enabled)

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with autocast(*args):
                return fn(*a, **kw)

        return wrapper
