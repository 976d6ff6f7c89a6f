"""``rtxcore.accelerator``: PyTorch's device-generic accelerator queries, answered
from the plugin registry.

The accelerator is the first available backend, other than cpu, that has a
kernel for every primitive and a device that is not the host CPU
(``Backend.is_accelerator``): cuda when it is available, else the others in
name order (opencl with a GPU, ...). An OpenCL driver for the CPU (PoCL) is
not an accelerator: a script asking for one runs on cpu there. Backends that
only run with the CPU fallback (templates) are not accelerators. The current index is per accelerator type and process-wide
(``set_device_index``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available",
           "set_device_index", "synchronize"]

from .device import current_index as _current  # device type -> current index


def _usable(name: str) -> int:
    """How many devices the backend ``name`` has, 0 when it is missing, unavailable,
    incomplete or fails to answer."""
    from .dispatch import ops as OPS
    from .dispatch.registry import registry

    registry.ensure_loaded()
    entry = registry.backends.get(name)
    if entry is None:
        return 0
    try:
        if not entry.backend.is_available():
            return 0
        if any(op not in entry.kernels for op in OPS.PRIMITIVES):
            return 0
        n = int(entry.backend.device_count())
        if not any(entry.backend.is_accelerator(i) for i in range(n)):
            return 0
        return n
    except Exception:
        return 0


def _accelerator_type() -> str | None:
    from .dispatch.registry import registry

    registry.ensure_loaded()
    names = sorted((n for n in registry.backends if n != "cpu"), key=lambda n: (n != "cuda", n))
    for name in names:
        if _usable(name):
            return name
    return None


def is_available() -> bool:
    """Whether an accelerator (a non-cpu device that runs every op) can be used."""
    return _accelerator_type() is not None


def current_accelerator(check_available: bool = False) -> Any:
    """The current accelerator as a device (``device(type='cuda', index=0)``), or None."""
    from .device import Device

    name = _accelerator_type()
    if name is None:
        return None
    return Device(name, _current.get(name, _first_accelerator(name)))


def _first_accelerator(name: str) -> int:
    from .dispatch.registry import registry

    b = registry.backends[name].backend
    return next(i for i in range(b.device_count()) if b.is_accelerator(i))


def device_count() -> int:
    """How many devices the accelerator has (0 without one)."""
    name = _accelerator_type()
    return 0 if name is None else _usable(name)


def current_device_index() -> int:
    """Index of the current accelerator device (-1 without an accelerator)."""
    name = _accelerator_type()
    return -1 if name is None else _current.get(name, _first_accelerator(name))


def set_device_index(device: Any) -> None:
    """Make ``device`` (an index, ``'cuda:1'`` or a device) the current one."""
    from .device import Device

    name = _accelerator_type()
    if name is None:
        raise RuntimeError("accelerator.set_device_index(): no accelerator is available "
                           "(rtx info lists the installed backends and why each is unavailable)")
    index = Device(device).index if isinstance(device, (str, Device)) else int(device)
    if isinstance(device, (str, Device)) and Device(device).type != name:
        raise ValueError(f"accelerator.set_device_index(): {device} is not a {name} device")
    n = _usable(name)
    if not 0 <= index < n:
        raise RuntimeError(f"accelerator.set_device_index(): invalid device index {index}; "
                           f"{name} has {n} device{'s' if n != 1 else ''}")
    _current[name] = index


def synchronize(device: Any = None) -> None:
    """Wait for the accelerator's queued work (a backend that queues work offers
    ``synchronize(index)``; reading a result to the host always waits anyway)."""
    from .device import Device
    from .dispatch.registry import registry

    name = _accelerator_type()
    if name is None:
        raise RuntimeError("accelerator.synchronize(): no accelerator is available")
    index = _current.get(name, _first_accelerator(name)) if device is None else (
        Device(device).index if isinstance(device, (str, Device)) else int(device))
    sync = getattr(registry.backends[name].backend, "synchronize", None)
    if sync is not None:
        sync(index)
    from .ops.checks import raise_pending

    raise_pending(Device(f"{name}:{index}"))  # an index check the device failed meanwhile
