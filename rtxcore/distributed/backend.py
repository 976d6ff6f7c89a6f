"""The contract of a communication backend, and how rtxcore finds one.

A communication backend moves buffers between processes; rtxcore's collectives
(``rtxcore.distributed.all_reduce`` and the rest) check their tensors, turn them
into buffers the backend takes and hand them over. Backends plug in the way
compute backends do: a plugin implements the hook ``rtx_comm_backends`` (in the
``rtxcore`` pluggy namespace, entry point group ``rtxcore.backends``) and
returns :class:`CommBackend` subclasses. ``mpi`` (on mpi4py) is built in;
``nccl`` comes with ``rtx_cuda``.

A backend works on *arrays*: NumPy arrays for the device types it stages through
host memory, and the device's own arrays (the backend view ``rtxcore`` keeps on
a tensor, e.g. a CuPy array) for the device types in ``native_devices``. Every
array it is given is C-contiguous; the core has checked shapes, dtypes and
ranks before calling, and copies results back into non-contiguous or staged
tensors afterwards. Every method takes ``async_``: when true it returns a
request (any object with ``wait()`` and ``test() -> bool``), otherwise it
returns once the buffers hold the result (``None``).

Reductions take ``op``, one of ``"sum"``, ``"product"``, ``"max"``, ``"min"``,
``"band"``, ``"bor"``, ``"bxor"`` (``AVG`` is a sum the core divides).
"""

from __future__ import annotations

from typing import Any, Sequence

REDUCE_OPS = ("sum", "product", "max", "min", "band", "bor", "bxor")


class CommBackendUnavailable(RuntimeError):
    """The backend asked for can't run here; the message says why and what to install."""


class Communicator:
    """One process group's communicator: the object a backend's ``world()``
    and ``split()`` return. ``rank`` and ``size`` are within the group."""

    rank: int = 0
    size: int = 1

    # -- collectives (every rank of the group calls them, in the same order) ---
    def all_reduce(self, buf: Any, op: str, async_: bool) -> Any:
        raise NotImplementedError

    def broadcast(self, buf: Any, root: int, async_: bool) -> Any:
        raise NotImplementedError

    def all_gather(self, send: Any, recv: Any, async_: bool) -> Any:
        """recv (size, *send.shape): row r is rank r's send."""
        raise NotImplementedError

    def reduce_scatter(self, send: Any, recv: Any, op: str, async_: bool) -> Any:
        """send (size, *recv.shape): recv = op over ranks of row ``rank``."""
        raise NotImplementedError

    def reduce(self, buf: Any, op: str, root: int, async_: bool) -> Any:
        """buf on root = op over ranks; other ranks' buf is left as it was."""
        raise NotImplementedError

    def gather(self, send: Any, recv: Any | None, root: int, async_: bool) -> Any:
        """recv (size, *send.shape) on root, None elsewhere."""
        raise NotImplementedError

    def scatter(self, send: Any | None, recv: Any, root: int, async_: bool) -> Any:
        """send (size, *recv.shape) on root, None elsewhere."""
        raise NotImplementedError

    def all_to_all(self, send: Any, recv: Any, send_counts: Sequence[int],
                   recv_counts: Sequence[int], async_: bool) -> Any:
        """Flat send/recv; ``send_counts[r]`` elements go to rank r (in rank
        order), ``recv_counts[r]`` come from it."""
        raise NotImplementedError

    def barrier(self, async_: bool) -> Any:
        raise NotImplementedError

    # -- point to point ---------------------------------------------------------
    def send(self, buf: Any, dst: int, tag: int, async_: bool) -> Any:
        raise NotImplementedError

    def recv(self, buf: Any, src: int | None, tag: int, async_: bool) -> Any:
        """``src=None``: any source. Blocking, returns the sender's group rank; async, a
        request whose ``wait()`` returns it."""
        raise NotImplementedError

    # -- groups and faults ------------------------------------------------------
    def split(self, ranks: Sequence[int]) -> "Communicator | None":
        """A communicator over ``ranks`` (group ranks of this one, in order);
        every rank of this group calls it, non-members get None."""
        raise NotImplementedError

    def exchange_small(self, data: bytes) -> list[bytes]:
        """Every rank's ``data`` (at most 256 bytes), in rank order: the debug
        checks that collectives match across ranks use it."""
        raise NotImplementedError

    def abort(self, code: int) -> None:
        """End every process of the job with exit status ``code``, now."""
        raise NotImplementedError

    def free(self) -> None:
        """Release the communicator (``destroy_process_group``)."""


class CommBackend:
    """A communication backend: a name, the devices it serves, and a way to
    reach the world of processes it was launched in.

    Attributes:
        name: what users pass to ``init_process_group(backend=...)``.
        native_devices: device types whose tensors it takes as they are (their
            backend arrays); tensors on other devices are staged through a
            NumPy copy when ``host_staging`` is true and refused otherwise.
        host_staging: whether it takes NumPy arrays (host memory).
        priority: ``init_process_group(backend=None)`` picks, among available
            backends serving the devices present, the one with the highest.
    """

    name: str = ""
    native_devices: frozenset[str] = frozenset()
    host_staging: bool = True
    priority: int = 0

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when usable here; otherwise why not and what to install."""
        return None

    @classmethod
    def launched(cls) -> bool:
        """Whether this process was started by a launcher this backend knows
        (so the world may hold more than one process)."""
        return False

    def world(self, timeout: float) -> Communicator:
        """The communicator over every process of the job."""
        raise NotImplementedError


class SelfCommunicator(Communicator):
    """A world of one process: every collective is a copy or nothing."""

    rank = 0
    size = 1

    def all_reduce(self, buf, op, async_):
        return _done(async_)

    def broadcast(self, buf, root, async_):
        return _done(async_)

    def all_gather(self, send, recv, async_):
        recv[0] = send
        return _done(async_)

    def reduce_scatter(self, send, recv, op, async_):
        recv[...] = send[0]
        return _done(async_)

    def reduce(self, buf, op, root, async_):
        return _done(async_)

    def gather(self, send, recv, root, async_):
        recv[0] = send
        return _done(async_)

    def scatter(self, send, recv, root, async_):
        recv[...] = send[0]
        return _done(async_)

    def all_to_all(self, send, recv, send_counts, recv_counts, async_):
        recv[...] = send
        return _done(async_)

    def barrier(self, async_):
        return _done(async_)

    def send(self, buf, dst, tag, async_):
        raise RuntimeError("send: a world of one process has no other rank to send to")

    def recv(self, buf, src, tag, async_):
        raise RuntimeError("recv: a world of one process has no other rank to receive from")

    def split(self, ranks):
        return SelfCommunicator() if list(ranks) == [0] else None

    def exchange_small(self, data):
        return [data]

    def abort(self, code):
        import os

        os._exit(code)


class _Done:
    def wait(self, timeout: Any = None) -> Any:
        return None

    def test(self) -> bool:
        return True


def _done(async_: bool) -> Any:
    return _Done() if async_ else None


class SelfBackend(CommBackend):
    """The world of one process no launcher started: what
    ``init_process_group()`` gives a script run as ``python train.py``."""

    name = "self"
    native_devices = frozenset({"cpu"})
    priority = -1

    def world(self, timeout: float) -> Communicator:
        return SelfCommunicator()


def builtin_backends() -> list[type[CommBackend]]:
    from .mpi import MPIBackend

    return [MPIBackend]


def comm_backends() -> dict[str, type[CommBackend]]:
    """Every communication backend known: the built-in ones, then the plugins'
    (a plugin can't take a built-in name; a failing plugin hook is skipped here
    and shown by ``rtx info``)."""
    from ..dispatch.registry import registry

    found: dict[str, type[CommBackend]] = {b.name: b for b in builtin_backends()}
    registry.ensure_loaded()
    for impl in reversed(registry.pm.hook.rtx_comm_backends.get_hookimpls()):
        try:
            for cls in impl.function() or []:
                if isinstance(cls, type) and issubclass(cls, CommBackend) and cls.name \
                        and cls.name not in found:
                    found[cls.name] = cls
        except Exception:  # a broken plugin must not stop the others
            continue
    return found
