"""The memory a tensor views: a backend buffer on one device, shared by the tensor
and all its views. Imports nothing of rtxcore (the device reads it too)."""

from __future__ import annotations

from typing import Any


class Storage:
    """A backend buffer on one device. Views share it; ``version`` counts
    in-place writes (autograd checks it)."""

    __slots__ = ("buffer", "device", "version", "__weakref__")

    def __init__(self, buffer: Any, device: Any) -> None:
        self.buffer = buffer
        self.device = device
        self.version = 0


class ReleasedStorage(Storage):
    """A Storage whose backend asked to hear when its buffer is dead
    (``Backend.release``): told once, when no tensor or view holds it any more."""

    __slots__ = ()

    def __del__(self) -> None:
        try:
            self.device.backend.release(self.buffer)
        except Exception:  # (a release hook must not raise; never from a finalizer)
            pass
