"""The communication-backend contract: what a comm backend implements, and the helpers it may use.

A communication backend moves buffers between processes; rtxcore's collectives
(``rtxcore.distributed.all_reduce`` and the rest) check their tensors, turn them
into buffers the backend takes and hand them over. Backends plug in the way
compute backends do: a plugin implements the hook ``rtx_comm_backends`` (in the
``rtxcore`` pluggy namespace, entry point group ``rtxcore.backends``) and
returns :class:`CommBackend` subclasses. ``mpi`` (on mpi4py) is built in;
``nccl`` comes with ``rtx_cuda``. A backend imports this module and
``rtxcore.dispatch``, nothing else of rtxcore.

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

A backend that runs beside another (``nccl`` beside ``mpi``: host arrays, and
the exchange of NCCL's unique id, go over MPI on the same ranks) names it in
``host_backend``; the core opens that backend's world first and passes its
communicator to ``world(timeout, host=...)``. :func:`broadcast_bytes` sends a
setup message (an id made on one rank) over such a host communicator.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

__all__ = ["REDUCE_OPS", "CommBackendUnavailable", "Communicator", "CommBackend",
           "MPI_LAUNCHER_VARS", "started_by_mpi_launcher", "broadcast_bytes"]

REDUCE_OPS = ("sum", "product", "max", "min", "band", "bor", "bxor")

# environment variables MPI launchers set in the processes they start
MPI_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
                     "MPI_LOCALNRANKS", "HYDI_CONTROL_FD")


class CommBackendUnavailable(RuntimeError):
    """The backend asked for can't run here; the message says why and what to install."""


class Communicator:
    """One process group's communicator: the object a backend's ``world()``
    and ``split()`` return. ``rank`` and ``size`` are within the group."""

    rank: int = 0
    size: int = 1
    # True where a request completes with nobody calling test() (a network card
    # or a GPU moves the data; sim's model): DDP then starts each bucket's
    # all-reduce non-blocking even without a progress thread
    progresses_alone: bool = False

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

    # -- a rank leaving while the others may still wait for it (optional) -------
    def announce_exit(self) -> None:
        """Tell every other rank, without blocking, that this process is ending
        its program while the group is alive (no ``destroy_process_group()``).
        Called on the world communicator only. Optional: without it, a rank left
        waiting for this one is ended by the watchdog's timeout instead."""

    def exited_ranks(self) -> list[int]:
        """The ranks whose ``announce_exit()`` arrived since the last call; never
        blocks. Called from the watchdog's thread while a collective waits, so a
        backend that can't be called from a second thread returns []."""
        return []

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
        host_backend: the name of the backend this one runs beside, or None;
            when set, ``world()`` is given that backend's world communicator
            as ``host``.
    """

    name: str = ""
    native_devices: frozenset[str] = frozenset()
    host_staging: bool = True
    priority: int = 0
    host_backend: str | None = None

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
        """The communicator over every process of the job (a backend with a
        ``host_backend`` takes ``host=``, that backend's world communicator)."""
        raise NotImplementedError


def started_by_mpi_launcher() -> bool:
    """Whether an MPI launcher (``mpiexec``, ``python -m rtxcore.distributed.run``)
    started this process: what ``launched()`` answers for backends on MPI."""
    return any(v in os.environ for v in MPI_LAUNCHER_VARS)


def broadcast_bytes(host: Communicator, data: bytes | None, root: int = 0) -> bytes:
    """Rank ``root``'s ``data`` on every rank of ``host``, a communicator that
    takes NumPy arrays (the host communicator a backend was given): for setup
    messages made on one rank, e.g. NCCL's unique id. Every rank calls it; the
    others pass None. Blocking (the length travels first)."""
    me = host.rank == root
    if me and data is None:
        raise ValueError(f"broadcast_bytes: rank {root} sends, its data can't be None")
    size = np.array([len(data) if me else 0], np.int64)
    host.broadcast(size, root, False)
    buf = np.frombuffer(data, np.uint8).copy() if me else np.empty(int(size[0]), np.uint8)
    host.broadcast(buf, root, False)
    return buf.tobytes()
