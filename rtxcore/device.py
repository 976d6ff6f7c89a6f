"""Devices: value objects naming one device of one backend, and the default device."""

from __future__ import annotations

import os
import threading
from typing import Any

from . import dtype as _dt
from .dispatch import _listeners, ops as _ops
from .dispatch.registry import KNOWN_BACKENDS, registry

__all__ = ["device", "Device", "get_default_device", "set_default_device"]


class Device:
    """``rtxcore.device("opencl:1")``. One object per (type, index): compare with ``==``
    or ``is``. Also a context manager that makes it the default device."""

    __slots__ = ("type", "index", "_ready", "kernels", "backend", "_dtypes", "view", "_limits",
                 "_raw_to_host", "_pending_checks", "functional", "adopt", "storage_type",
                 "__weakref__")

    _interned: dict[tuple[str, int], "Device"] = {}
    _lock = threading.Lock()

    type: str
    index: int

    def __new__(cls, spec: Any = None, index: int | None = None) -> "Device":
        if isinstance(spec, Device):
            if index is not None and index != spec.index:
                return cls(spec.type, index)
            return spec
        if spec is None:
            return get_default_device()
        if not isinstance(spec, str):
            raise TypeError(f"device must be a string or a Device, got {type(spec).__name__}")
        dtype, sep, idx = spec.strip().partition(":")
        if sep:
            if not (idx.isascii() and idx.isdigit()):
                raise RuntimeError(f"invalid device string {spec!r}: the index after ':' must be a non-negative integer")
            if index is not None and index != int(idx):
                raise RuntimeError(f"device {spec!r} given with a different index {index}")
            index = int(idx)
        if index is not None and (not hasattr(index, "__index__") or isinstance(index, bool)):
            raise TypeError(f"device(): the index must be an int, got {type(index).__name__}")
        index = 0 if index is None else index.__index__()
        if index < 0:
            raise RuntimeError(f"device index must be non-negative, got {index}")
        key = (dtype, index)
        dev = cls._interned.get(key)
        if dev is not None:
            return dev
        registry.ensure_loaded()
        if dtype not in registry.backends and dtype not in KNOWN_BACKENDS:
            raise RuntimeError(registry.missing_backend_message(dtype))
        with cls._lock:
            dev = cls._interned.get(key)
            if dev is None:
                dev = object.__new__(cls)
                dev.type, dev.index = dtype, index
                dev._ready = False
                dev.kernels = {}
                dev._limits = {}
                dev.backend = None
                dev._dtypes = frozenset()
                dev.view = None
                dev.functional = {}
                dev.adopt = None
                dev.storage_type = None
                cls._interned[key] = dev
        return dev

    def _resolve(self) -> "Device":
        """Bind to the backend: check it is installed, available and has this index."""
        entry = registry.entry(self.type)
        registry.warn_conflicts(self.type)
        b = entry.backend
        if not b.is_available():
            reason = b.unavailable_reason() or "no reason given"
            raise RuntimeError(f"device {self} is not available: {reason}")
        n = b.device_count()
        if self.index >= n:
            raise RuntimeError(
                f"device {self.type}:{self.index} does not exist; "
                f"{self.type} has {n} device{'s' if n != 1 else ''}"
            )
        table = registry.table(self.type)  # (the plugins' rtx_kernels: first use only)
        lacking = [op for op in _ops.REQUIRED if op not in table]
        if lacking:
            raise RuntimeError(
                f"device {self} can't be used: its backend (plugin {entry.plugin!r}) has no "
                f"kernel for {', '.join(lacking)}, which every backend must supply"
            )
        self.backend = b
        self.kernels = self._table(b)
        self._pending_checks: list[Any] = []
        if getattr(b, "async_errors", False):  # index checks queued on the device
            self.kernels = self._checked_reads(self.kernels)
        self._dtypes = frozenset(_dt.BY_NAME[n] for n in b.dtypes(self.index))
        self.view = b.view
        # functional kernels (dispatch.functional): what the fresh-result paths call
        self.functional = {op: k.functional for op, k in self.kernels.items()
                           if getattr(k, "functional", None) is not None}
        self.adopt = b.adopt
        from .storage import ReleasedStorage, Storage

        # buffers whose backend wants to hear when they die (Backend.release)
        self.storage_type = ReleasedStorage if getattr(b, "release", None) is not None \
            else Storage
        self._ready = True
        return self

    def _checked_reads(self, table: dict[str, Any]) -> dict[str, Any]:
        """``table`` with ``to_host`` raising a pending index check's error first
        (``rtxcore.ops.checks``: the host waits for the device there anyway)."""
        from ._native import raise_pending

        raw = self._raw_to_host = table["to_host"]

        def to_host(x: Any) -> Any:
            if self._pending_checks:
                raise_pending(self)
            return raw(x)

        return {**table, "to_host": to_host}

    def _table(self, b: Any) -> dict[str, Any]:
        """The kernel table this device uses: its backend's, shared by all its
        devices, or with per-op dtype limits its own copy, the limited ops'
        kernels behind a dtype guard."""
        table = registry.table(self.type)
        limits = {}
        for op, names in (b.op_dtypes(self.index) or {}).items():
            try:
                limits[op] = frozenset(_dt.as_dtype(n).name for n in names)
            except (TypeError, ValueError, KeyError) as exc:
                raise RuntimeError(f"device {self}: its backend's op_dtypes() for {op!r} names "
                                   f"an unknown dtype ({exc})") from None
        self._limits = limits
        if not limits:
            return table
        from .dispatch import fallback

        table = dict(table)
        for op, allowed in limits.items():
            if op in table:
                table[op] = fallback.limited(self, op, table[op], allowed)
        return table

    def supports(self, dtype: Any) -> bool:
        if not self._ready:
            self._resolve()
        return _dt.as_dtype(dtype) in self._dtypes

    def __repr__(self) -> str:
        if self.type == "cpu" and self.index == 0:
            return "device(type='cpu')"
        return f"device(type={self.type!r}, index={self.index})"

    def __str__(self) -> str:
        if self.type == "cpu" and self.index == 0:
            return "cpu"
        return f"{self.type}:{self.index}"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except RuntimeError:
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (str(self),))

    # `with rtxcore.device("opencl"):` makes factories land there.
    def __enter__(self) -> "Device":
        _local_stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _local_stack().pop()


device = Device


def _reset_devices() -> None:
    for d in list(Device._interned.values()):
        d._ready = False
        if d.backend is None:
            continue  # never bound: its first use binds it
        # the table (and per-op limits) may have changed with the plugins: the
        # fast paths use d.kernels without rebinding, so rebuild it now
        entry = registry.backends.get(d.type)
        d.functional = {}  # (the new table's functional kernels are collected at _resolve)
        try:
            d.kernels = d._table(entry.backend) if entry else registry.tables.get(d.type, {})
        except Exception:  # the descriptor fails now: the next use reports it
            d.kernels, d._limits = {}, {}


_listeners.append(_reset_devices)

_tls = threading.local()
current_index: dict[str, int] = {}
# ^ device type -> its current index (``rtxcore.cuda.set_device``,
#   ``rtxcore.accelerator.set_device_index``); read by ``Tensor.cuda()``
_global_default: list[Device | None] = [None]


def _local_stack() -> list[Device]:
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
    return st


_default_reason: list[str] = [""]


def set_default_device(dev: Any) -> None:
    """Where factories (``zeros``, ``tensor``, ...) put tensors when no ``device=`` is
    given. ``None`` goes back to the choice from what is installed (see
    ``default_device_reason``)."""
    _global_default[0] = None if dev is None else Device(dev)
    _default_reason[0] = "" if dev is None else "set by rtxcore.set_default_device"


def get_default_device() -> Device:
    st = getattr(_tls, "stack", None)
    if st:
        return st[-1]
    d = _global_default[0]
    if d is None:
        spec, why = _choose_default()
        d = Device(spec)
        _global_default[0] = d
        _default_reason[0] = why
    return d


def default_device_reason() -> tuple[Device, str]:
    """The default device (outside any ``with rtxcore.device(...)``) and why it is
    the one: ``RTX_DEVICE``, ``set_default_device``, or what is installed."""
    st = getattr(_tls, "stack", None)
    if st:
        return st[-1], "chosen by an enclosing `with rtxcore.device(...)`"
    d = get_default_device()
    return d, _default_reason[0]


def _choose_default() -> tuple[str, str]:
    """The default device when none was set: ``RTX_DEVICE``; else cpu when its
    backend is installed (nothing else is asked then); else the first accelerator
    device of the first available backend that has every primitive (cuda first,
    then by name: ``rtxcore.accelerator``'s choice); else such a backend's first
    device; else the first installed backend (its first use says why it can't
    run); else cpu, whose first use says how to install a backend. Without cpu,
    knowing which backends have every primitive builds their kernel tables (a
    template backend with a dozen kernels must not become the default)."""
    env = os.environ.get("RTX_DEVICE")
    if env:
        return env, f"set by RTX_DEVICE={env!r}"
    registry.ensure_loaded()
    if "cpu" in registry.backends:
        return "cpu", "the cpu backend is installed"
    no_cpu = ("the cpu backend is disabled by RTX_DISABLE_BACKENDS" if "cpu" in registry.blocked
              else "the cpu backend failed to load" if "cpu" in registry.failed
              else "the cpu backend is not installed")
    names = sorted(registry.backends, key=lambda n: (n != "cuda", n))
    if not names:
        return "cpu", "no backend is installed"
    usable = [n for n in names if _usable_any(n)]
    for name in usable:  # (as rtxcore.accelerator chooses; here: the core imports no namespace)
        b = registry.backends[name].backend
        try:
            acc = next((i for i in range(b.device_count()) if b.is_accelerator(i)), None)
        except Exception:
            acc = None
        if acc is not None:
            return f"{name}:{acc}", f"{no_cpu}; {name} is the first available accelerator"
    if usable:
        return f"{usable[0]}:0", f"{no_cpu}; {usable[0]} is the first available backend"
    return f"{names[0]}:0", (f"{no_cpu}, and no installed backend ({', '.join(names)}) can "
                             "run every op here")


def _usable_any(name: str) -> bool:
    """Whether backend ``name`` is available, has a device and every primitive."""
    entry = registry.backends.get(name)
    if entry is None:
        return False
    try:
        return bool(entry.backend.is_available() and entry.backend.device_count() > 0
                    and all(op in entry.kernels for op in _ops.PRIMITIVES))
    except Exception:
        return False


def host_device() -> Device:
    """Where host-side work (``from_numpy``, data loading's shuffles, checkpoints
    saved on cpu) puts tensors: cpu when its backend is installed, else the
    default device, so that any one backend is a working install."""
    registry.ensure_loaded()
    if "cpu" in registry.backends:
        return Device("cpu")
    return get_default_device()
