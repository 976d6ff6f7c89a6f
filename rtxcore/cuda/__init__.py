"""``rtxcore.cuda``: PyTorch's ``torch.cuda`` queries, answered truthfully from the
plugin registry (the ``rtx-cuda`` backend). Without a usable GPU every query
answers (``is_available()`` is False, ``device_count()`` is 0, memory counters
are 0) and what needs a device raises a RuntimeError that says why, in the
backend's words.

``set_device`` / ``with rtxcore.cuda.device(i)`` choose the device that
``Tensor.cuda()`` and ``current_device()`` use (process-wide, shared with
``rtxcore.accelerator``); ``rtxcore.device("cuda")`` always names ``cuda:0``.
Random numbers on every device come from one generator (``rtxcore.manual_seed``),
so ``manual_seed`` here seeds that one when CUDA is available and, as in
PyTorch without CUDA, does nothing otherwise.
"""

from __future__ import annotations

from typing import Any

from .._tensor_api import make_types
from ..device import current_index as _current

__all__ = ["amp", "current_device", "device", "device_count", "empty_cache", "get_device_name",
           "get_device_properties", "is_available", "is_bf16_supported", "manual_seed",
           "manual_seed_all", "max_memory_allocated", "memory_allocated", "memory_reserved",
           "reset_peak_memory_stats", "set_device", "synchronize"]

_TYPES = make_types("cuda")
(FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor,
 ByteTensor, BoolTensor) = (_TYPES[n] for n in (
    "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor"))


def _backend() -> Any:
    """The cuda backend object, or None when it isn't installed."""
    from ..dispatch.registry import registry

    registry.ensure_loaded()
    entry = registry.backends.get("cuda")
    return None if entry is None else entry.backend


def _why_not() -> str:
    """Why CUDA can't be used, in the registry's or the backend's words."""
    from ..dispatch.registry import registry

    b = _backend()
    if b is None:
        return registry.missing_backend_message("cuda")
    try:
        if not b.is_available():
            return b.unavailable_reason() or "the cuda backend reports no device"
        if b.device_count() == 0:
            return "the cuda backend found no device"
    except Exception as exc:  # a broken driver must not break a query
        return f"the cuda backend failed: {type(exc).__name__}: {exc}"
    return ""


def is_available() -> bool:
    """Whether a CUDA device can be used (never raises)."""
    try:
        return not _why_not()
    except Exception:
        return False


def _require(fn: str) -> Any:
    reason = _why_not()
    if reason:
        raise RuntimeError(f"rtxcore.cuda.{fn}(): CUDA is not available: {reason}")
    return _backend()


def device_count() -> int:
    """Number of CUDA devices (0 when CUDA is not available)."""
    return _backend().device_count() if is_available() else 0


def _index(device: Any, fn: str) -> int:
    from ..device import Device

    if device is None:
        return current_device()
    if isinstance(device, (str, Device)):
        d = Device(device)
        if d.type != "cuda":
            raise ValueError(f"rtxcore.cuda.{fn}(): expected a cuda device, got {d}")
        return d.index
    return device.__index__()


def current_device() -> int:
    """Index of the current CUDA device."""
    _require("current_device")
    return _current.get("cuda", 0)


def set_device(device: Any) -> None:
    """Make ``device`` (an index, ``'cuda:1'`` or a device) the current CUDA device."""
    b = _require("set_device")
    from ..device import Device

    index = Device(device).index if isinstance(device, (str, Device)) else device.__index__()
    if index < 0:  # PyTorch: a negative index is a no-op
        return
    n = b.device_count()
    if index >= n:
        raise RuntimeError(f"rtxcore.cuda.set_device(): invalid device ordinal {index}; "
                           f"there {'is' if n == 1 else 'are'} {n} CUDA device{'s' if n != 1 else ''}")
    _current["cuda"] = index


class device:  # noqa: N801  (PyTorch's name)
    """``with rtxcore.cuda.device(1):`` makes device 1 current inside the block.
    ``None`` or a negative index changes nothing."""

    def __init__(self, device: Any) -> None:
        from ..device import Device

        if device is None:
            self.idx = -1
        elif isinstance(device, (str, Device)):
            self.idx = Device(device).index
        else:
            self.idx = device.__index__()
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx < 0:
            return
        self.prev_idx = current_device()
        set_device(self.idx)

    def __exit__(self, *exc: Any) -> None:
        if self.prev_idx >= 0:
            _current["cuda"] = self.prev_idx


def get_device_name(device: Any = None) -> str:
    b = _require("get_device_name")
    return b.device_name(_index(device, "get_device_name"))


def get_device_properties(device: Any = None) -> dict[str, Any]:
    """What the backend reports about the device (a dict, as ``rtx info`` prints)."""
    b = _require("get_device_properties")
    return dict(b.properties(_index(device, "get_device_properties")))


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: rtxcore has no bfloat16 dtype (use float16)."""
    return False


def manual_seed(seed: int) -> None:
    """Seed the generator CUDA random numbers come from (rtxcore's one generator);
    nothing when CUDA is not available, as PyTorch."""
    if is_available():
        from ..random import manual_seed as seed_all

        seed_all(int(seed))


manual_seed_all = manual_seed


def synchronize(device: Any = None) -> None:
    """Wait for the device's queued work (reading a result to the host waits anyway)."""
    from ..device import Device
    from ..ops.checks import raise_pending

    b = _require("synchronize")
    index = _index(device, "synchronize")
    sync = getattr(b, "synchronize", None)
    if sync is not None:
        sync(index)
    raise_pending(Device(f"cuda:{index}"))  # an index check the device failed meanwhile


def empty_cache() -> None:
    """Return cached device memory to the driver, when the backend keeps a cache;
    nothing when CUDA is not available."""
    if is_available():
        release = getattr(_backend(), "empty_cache", None)
        if release is not None:
            release()


def _memory(what: str, device: Any) -> int:
    if not is_available():
        return 0
    ask = getattr(_backend(), what, None)
    return int(ask(_index(device, what))) if ask is not None else 0


def memory_allocated(device: Any = None) -> int:
    """Bytes held by tensors on the device, where the backend reports it; else 0."""
    return _memory("memory_allocated", device)


def max_memory_allocated(device: Any = None) -> int:
    """Peak of ``memory_allocated``, where the backend reports it; else 0."""
    return _memory("max_memory_allocated", device)


def memory_reserved(device: Any = None) -> int:
    """Bytes the backend's allocator holds, where it reports it; else 0."""
    return _memory("memory_reserved", device)


def reset_peak_memory_stats(device: Any = None) -> None:
    if is_available():
        reset = getattr(_backend(), "reset_peak_memory_stats", None)
        if reset is not None:
            reset(_index(device, "reset_peak_memory_stats"))


def __getattr__(name: str) -> Any:
    # rtxcore.cuda.amp loads on first use
    if name == "amp":
        import importlib

        return importlib.import_module(f"{__name__}.amp")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
