"""Autocast state the op front-ends read, and the casts they ask it for.

This is the core's half of ``rtxcore.autocast`` (rtxcore/amp/autocast_mode.py
opens and closes the regions and holds the public names): which device types
autocast is on for in this thread and in what low dtype, how many regions are
open in all threads, the cast policy (which kinds of op run in the low dtype,
which in float32) and ``autocast_inputs``, the one call a front-end makes.

Front-ends check ``regions[0]`` first, one list read (cheaper than a
thread-local), and call ``autocast_inputs(kind, *args)`` only when it is
nonzero, so ops cost nothing measurable outside autocast. Casts are the
tensors' own (recorded) ``to``, so gradients flow back to float32 parameters.
"""

from __future__ import annotations

import threading
from typing import Any

from . import dtype as D
from .dispatch.types import DType


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
            out.append(a.to(D.float32) if dt is D.float16 else a)
    return tuple(out)


def _cached_cast(t: Any, dtype: DType) -> Any:
    """``t.to(dtype)``; for a leaf that requires grad, made once per region."""
    m = t._ag
    if not (_state.cache_enabled and m is not None and m.requires_grad and m.grad_fn is None):
        return t.to(dtype)
    from .autograd.grad_mode import _state as grad

    cache = _state.cache
    if cache is None:
        cache = _state.cache = {}
    key = (id(t), grad.enabled)
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._storage.version and hit[2]._dtype is dtype:
        return hit[2]
    out = t.to(dtype)
    cache[key] = (t, t._storage.version, out)
    return out


def enter_region(device_type: str, dtype: DType, enabled: bool, cache_enabled: bool) -> tuple[Any, Any]:
    """Open a region in this thread (autocast on, or with ``enabled=False`` off,
    for ``device_type``); returns what ``exit_region`` restores."""
    st = _state
    prev = (st.active, st.cache_enabled)
    active = dict(st.active or {})
    if enabled:
        active[device_type] = dtype
    else:
        active.pop(device_type, None)
    st.active = active or None
    st.cache_enabled = cache_enabled
    st.depth += 1
    with _regions_lock:
        regions[0] += 1
    return prev


def exit_region(prev: tuple[Any, Any]) -> None:
    """Close the innermost region; the parameter casts go with the outermost."""
    st = _state
    st.active, st.cache_enabled = prev
    st.depth -= 1
    with _regions_lock:
        regions[0] -= 1
    if st.depth == 0:
        st.cache = None
