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
inside an autocast region: the check they make first, ``regions[0]``, is one
list read (cheaper than a thread-local), so ops cost nothing measurable outside
autocast. The state itself is per thread; contexts nest, and ``enabled=False``
turns autocast off inside an enabled region.

Casts are ordinary recorded ``to`` ops, so gradients flow back to float32
parameters in float32. Within a region the float16 copy of a leaf tensor that
requires grad (a parameter) is made once and reused (``cache_enabled``), and
dropped when the outermost region ends or the parameter is written in place.
"""

from __future__ import annotations

import functools
import threading
import warnings
from typing import Any, Callable

from .. import dtype as D
from ..dispatch.types import DType

__all__ = ["autocast", "autocast_inputs", "get_autocast_dtype", "is_autocast_available",
           "is_autocast_enabled"]


class _State(threading.local):
    # device type -> low dtype for the device types autocast is on for; None when
    # it is on for none (the one attribute op front-ends read)
    active: dict[str, DType] | None = None
    cache_enabled = True
    depth = 0  # nesting of autocast regions (enabled or not)
    cache: dict[tuple[int, bool], tuple[Any, int, Any]] | None = None


_state = _State()
# how many autocast regions are open, in all threads: front-ends call
# autocast_inputs only when this is nonzero
regions = [0]
_regions_lock = threading.Lock()

# what each kind of op computes in: "low" (the autocast dtype) or "fp32"
LOW_KINDS = frozenset({"matmul", "mm", "bmm", "mv", "linear", "addmm", "baddbmm", "conv1d",
                       "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                       "conv_transpose3d", "scaled_dot_product_attention"})
FP32_KINDS = frozenset({"softmax", "log_softmax", "softmin", "layer_norm", "group_norm",
                        "batch_norm", "loss", "sum", "prod", "mean", "cumsum", "cumprod", "norm",
                        "logsumexp"})

_to: Callable[..., Any] | None = None  # ops.creation.to, bound on first cast


def autocast_inputs(kind: str, *args: Any) -> tuple[Any, ...]:
    """``args`` as an op of ``kind`` computes them under the current autocast
    state: floating tensors on a device type autocast is on for cast to the low
    dtype (``kind`` in ``LOW_KINDS``) or float16 ones up to float32 (``kind`` in
    ``FP32_KINDS``); everything else as given. Front-ends call it only when
    ``regions[0]`` is nonzero."""
    active = _state.active
    if active is None:
        return args
    if kind in LOW_KINDS:
        low = True
    elif kind in FP32_KINDS:
        low = False
    else:
        raise ValueError(f"autocast_inputs(): unknown op kind {kind!r}; expected one of "
                         f"{', '.join(sorted(LOW_KINDS | FP32_KINDS))}")
    global _to
    if _to is None:
        from ..ops.creation import to as _to_op

        _to = _to_op
    out = []
    for a in args:
        dt = getattr(a, "_dtype", None)
        if dt is None or dt.kind != "f" or dt is D.float64:
            out.append(a)
            continue
        target = active.get(a._device.type)
        if target is None:
            out.append(a)
        elif low:
            out.append(a if dt is target else _cached_cast(a, target))
        else:
            out.append(_to(a, D.float32) if dt is D.float16 else a)
    return tuple(out)


def _cached_cast(t: Any, dtype: DType) -> Any:
    """``t.to(dtype)``; for a leaf that requires grad, made once per region."""
    m = t._ag
    if not (_state.cache_enabled and m is not None and m.requires_grad and m.grad_fn is None):
        return _to(t, dtype)  # type: ignore[misc]
    from ..autograd.grad_mode import _state as grad

    cache = _state.cache
    if cache is None:
        cache = _state.cache = {}
    key = (id(t), grad.enabled)
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._storage.version and hit[2]._dtype is dtype:
        return hit[2]
    out = _to(t, dtype)  # type: ignore[misc]
    cache[key] = (t, t._storage.version, out)
    return out


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
        st = _state
        self._prev = (st.active, st.cache_enabled)
        active = dict(st.active or {})
        if self._enabled:
            active[self.device] = self.fast_dtype
        else:
            active.pop(self.device, None)
        st.active = active or None
        st.cache_enabled = self._cache_enabled
        st.depth += 1
        with _regions_lock:
            regions[0] += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        st = _state
        st.active, st.cache_enabled = self._prev
        st.depth -= 1
        with _regions_lock:
            regions[0] -= 1
        if st.depth == 0:
            st.cache = None

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        args = (self.device, self.fast_dtype, self._enabled, self._cache_enabled)

        @functools.wraps(fn)
        def wrapper(*a: Any, **kw: Any) -> Any:
            with autocast(*args):
                return fn(*a, **kw)

        return wrapper
