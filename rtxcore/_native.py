"""Native views, and the index checks a device still owes before its memory is read.

``view_of`` gives the backend's own view of a tensor (what every kernel takes),
built once and kept on the tensor. ``raise_pending`` reads back the flags of the
checks an ``async_errors`` device (CUDA, OpenCL) queued with its ops
(rtxcore/ops/checks.py queues them) and raises the first failed one's error; the
device calls it before every ``to_host``, where the host waits for it anyway.
Both read only the tensor's and device's own attributes: this module imports
nothing of rtxcore, so the device can use it.
"""

from __future__ import annotations

from typing import Any


def safe_offset(offset: int, shape: tuple[int, ...]) -> int:
    """An empty view's offset may point past its storage; backends get 0 there."""
    return 0 if offset and 0 in shape else offset


def view_of(t: Any) -> Any:
    """The backend's native view of ``t`` (built once, then kept on the tensor)."""
    h = t._h
    if h is None:
        off = safe_offset(t._offset, t._shape)
        h = t._h = t._device.view(t._storage.buffer, t._shape, t._strides, off, t._dtype)
    return h


def raise_pending(dev: Any) -> None:
    """Read ``dev``'s pending flags (the host waits for the device here anyway);
    raise the first failed check's error. Called by ``to_host`` and
    ``synchronize`` on ``async_errors`` devices."""
    pending = getattr(dev, "_pending_checks", None)
    if not pending:
        return
    dev._pending_checks = []
    host = dev._raw_to_host

    def read(t: Any) -> Any:
        return host(view_of(t))

    failed = [make for flag, make in pending if bool(read(flag).reshape(-1)[0])]
    if failed:
        # the first one raised, naming how many more failed (one bad index can
        # fail several checks: a loss's target check and its gather's)
        exc = failed[0](read)
        if len(failed) > 1:
            more = (f"{len(failed) - 1} more check(s) queued since the last read failed too: "
                    "the results computed since then are not valid")
            exc.args = (f"{exc.args[0]}\n({more})",) + exc.args[1:] if exc.args else (more,)
        raise exc
