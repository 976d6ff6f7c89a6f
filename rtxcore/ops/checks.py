"""Index bounds checks, on devices that wait and on devices that don't.

An index tensor must be in range before a gather, a scatter or ``x[idx]`` reads
or writes with it. On a device whose work runs where the host is (cpu), the
core reads the index's smallest and largest value and raises ``IndexError``
before the kernel runs, as PyTorch does on the CPU.

On a device that queues its work (a backend with ``async_errors = True``: CUDA,
OpenCL),
reading two numbers back would stop the host and drain the queue on every
embedding lookup, gather and loss. There the check is a kernel: one boolean
flag on the device, queued with the op, read when the host next waits for the
device anyway (a ``to_host``: ``.item()``, ``.numpy()``, printing, ``.cpu()``;
or ``synchronize()``). A bad index then raises the same ``IndexError`` there --
later, as PyTorch's CUDA device-side assert does. The kernels themselves never
touch memory out of range (CuPy's indexing wraps indices around, rtx_opencl's
index kernels clamp them), so a late error has only wrong values behind it,
which the error says not to use.
"""

from __future__ import annotations

from typing import Any, Callable

from .._native import raise_pending  # noqa: F401  (where device and cuda reach it)
from ..tensor import Tensor

# a device's pending checks (Device._pending_checks): (flag, the error made from
# a read of the tensors it names, when the flag is set)
MAX_PENDING = 256  # beyond this many unchecked flags, the next check waits and reads them


def deferred(dev: Any) -> bool:
    """Whether ``dev`` checks indices on the device (its backend's ``async_errors``)."""
    return bool(getattr(dev.backend, "async_errors", False))


def check_range(t: Tensor, low: int, high: int,
                error: Callable[[int], Exception]) -> tuple[int, int] | None:
    """Raise ``error(bad)`` unless every element of integer tensor ``t`` is in
    ``[low, high)``; on an ``async_errors`` device, when the host next waits.
    Returns ``t``'s (smallest, largest) where they were read, else None."""
    if not t.numel():
        return None
    dev = t._device
    if not deferred(dev) or high <= low:  # (no index fits a dim of size 0: say so now)
        from .core import kernel, view_of

        arr = kernel(dev, "to_host")(view_of(t))
        lo, hi = int(arr.min()), int(arr.max())
        if lo < low or hi >= high:
            raise error(hi if hi >= high else lo)
        return lo, hi
    from . import elementwise as E
    from .core import reduce as reduce_

    flag = reduce_("max", E.logical_or(E.lt(t, low), E.ge(t, high)), tuple(range(t.ndim)),
                   False)

    def make_error(read: Callable[[Tensor], Any]) -> Exception:
        # (the index is read now: written over since the op ran, it may no
        # longer hold the value that failed)
        arr = read(t)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < low or hi >= high:
            return error(hi if hi >= high else lo)
        return error("(a value the index tensor, changed since, no longer holds)")

    queue_check(dev, flag, make_error)
    return None


def queue_check(dev: Any, flag: Tensor, make_error: Callable[[Any], Exception]) -> None:
    """On an ``async_errors`` device: raise ``make_error(read)`` at the next read
    back if the one-element ``flag`` is then set (``read(t)`` gives a tensor's
    values on the host, to name what was wrong)."""
    pending = dev._pending_checks
    pending.append((flag, make_error))
    if len(pending) > MAX_PENDING:
        raise_pending(dev)


def wrap_negative(t: Tensor, size: int) -> Tensor:
    """``t`` with negative indices counted from the end (``-1`` is ``size - 1``):
    on a deferred-check device always, as a kernel (no read to decide)."""
    from . import elementwise as E

    return E.where(E.lt(t, 0), E.add(t, size), t)


__all__ = ["check_range", "deferred", "queue_check", "raise_pending", "wrap_negative"]
