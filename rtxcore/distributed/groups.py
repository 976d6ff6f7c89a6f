"""Process groups: joining the job (init/destroy), the world and new groups, ranks and sizes.

Processes are started by an MPI launcher; ``init_process_group()`` joins them
into the default group (``GroupMember.WORLD``) over the communication backend
it picks (see ``backend``), and installs the fault guard and watchdog
(``faults``) in a world of more than one process. ``_state`` holds what the
collectives need of that: the backend, the watchdog, the groups, the debug flag.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from typing import Any, Sequence

from . import faults
from .backend import CommBackend, CommBackendUnavailable, Communicator, SelfBackend, comm_backends

DEFAULT_TIMEOUT = timedelta(minutes=30)


class ProcessGroup:
    """A set of ranks and the communicator joining them."""

    def __init__(self, comm: Communicator, backend: str, ranks: list[int], timeout: float) -> None:
        self.comm = comm
        self.backend_name = backend
        self.ranks = ranks  # global ranks, in group-rank order
        self.timeout = timeout

    def rank(self) -> int:
        return self.comm.rank

    def size(self) -> int:
        return self.comm.size

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend_name!r}, ranks={self.ranks})"


class GroupMember:
    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


class _State:
    backend: CommBackend | None = None
    watchdog: faults.Watchdog | None = None
    groups: list[ProcessGroup] = []
    debug = False


_state = _State()


# -- setting up ----------------------------------------------------------------

def is_available() -> bool:
    """True: rtxcore is built with distributed support (a world of one process
    always works; ``is_mpi_available()`` says whether MPI is installed)."""
    return True


def is_mpi_available() -> bool:
    from .mpi import MPIBackend

    return MPIBackend.unavailable_reason() is None


def is_nccl_available() -> bool:
    cls = comm_backends().get("nccl")
    return cls is not None and cls.unavailable_reason() is None


def is_initialized() -> bool:
    return GroupMember.WORLD is not None


def _seconds(timeout: Any) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT.total_seconds()
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and timeout > 0:
        return float(timeout)
    raise ValueError(f"timeout must be a datetime.timedelta or a positive number of seconds, "
                     f"not {timeout!r}")


def _pick(backend: str | None) -> CommBackend:
    known = comm_backends()
    if backend is None:
        launched = [cls for cls in known.values() if cls.launched()]
        if not launched:
            return SelfBackend()
        usable = [cls for cls in launched if cls.unavailable_reason() is None]
        if not usable:
            reasons = "; ".join(f"{c.name}: {c.unavailable_reason()}" for c in launched)
            raise CommBackendUnavailable(f"started by a launcher, but no backend can run: {reasons}")
        return max(usable, key=lambda c: c.priority)()
    name = str(backend).lower()
    if name == "gloo":  # PyTorch's cpu backend: what a cpu job here runs on
        return _serve_gloo(known)
    if name == "ucc":
        raise ValueError(f"backend {backend!r} is PyTorch's; rtxcore's are "
                         f"{sorted(known)} (use 'mpi' on cpu and opencl, 'nccl' on cuda, "
                         "or None for the best one here)")
    if name == "self":
        return SelfBackend()
    cls = known.get(name)
    if cls is None:
        raise ValueError(f"unknown communication backend {backend!r}; known: {sorted(known)} "
                         "(a plugin adds one through the rtx_comm_backends hook)")
    reason = cls.unavailable_reason()
    if reason is not None:
        raise CommBackendUnavailable(f"communication backend {name!r} is unavailable: {reason}")
    return cls()


_said_gloo = [False]


def _serve_gloo(known: dict[str, type[CommBackend]]) -> CommBackend:
    """``init_process_group("gloo")``, as every PyTorch cpu script says: served by
    ``mpi`` under a launcher (a world of one process without one), said once on
    rank 0's stderr."""
    mpi = known.get("mpi")
    if mpi is None or not mpi.launched():
        impl: CommBackend = SelfBackend()
    else:
        reason = mpi.unavailable_reason()
        if reason is not None:
            raise CommBackendUnavailable(f"backend 'gloo' is served by 'mpi' here, which is "
                                         f"unavailable: {reason}")
        impl = mpi()
    rank = next((os.environ[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK")
                 if v in os.environ), "0")
    if not _said_gloo[0] and rank == "0":
        sys.stderr.write(f"rtxcore.distributed: backend 'gloo' (PyTorch's) is served by "
                         f"'{impl.name}' here\n")
    _said_gloo[0] = True
    return impl


def _open_world(impl: CommBackend, seconds: float) -> Communicator:
    """``impl``'s world communicator; a backend that runs beside another
    (``host_backend``: nccl beside mpi) is given that one's world as ``host``."""
    if impl.host_backend is None:
        return impl.world(seconds)
    host = comm_backends().get(impl.host_backend)
    if host is None:
        raise CommBackendUnavailable(f"communication backend {impl.name!r} runs beside "
                                     f"{impl.host_backend!r}, which is not installed")
    return impl.world(seconds, host=host().world(seconds))


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: Any = None, world_size: int = -1, rank: int = -1,
                       store: Any = None, group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:
    """Join the processes of this job into the default group (``WORLD``).

    ``backend``: ``"mpi"``, ``"nccl"``, a plugin's name, or None for the best
    one for this launch (a world of one process when no launcher started us).
    Rank and world size come from the launcher; ``world_size``/``rank``, when
    given, are checked against it. ``timeout``: how long a collective may wait
    before the job is aborted (default 30 minutes).
    """
    if is_initialized():
        raise RuntimeError("trying to initialize the default process group twice!")
    if init_method not in (None, "env://") or store is not None:
        raise ValueError("rtxcore's process groups come from the MPI launcher: init_method and "
                         "store are not used (start the job with mpiexec or "
                         "python -m rtxcore.distributed.run)")
    seconds = _seconds(timeout)
    impl = _pick(backend)
    comm = _open_world(impl, seconds)
    if world_size not in (-1, None) and world_size != comm.size:
        raise ValueError(f"world_size={world_size}, but the launcher started {comm.size} processes")
    if rank not in (-1, None) and rank != comm.rank:
        raise ValueError(f"rank={rank}, but the launcher gave this process rank {comm.rank}")
    _state.backend = impl
    from .env import env_flag

    _state.debug = bool(env_flag("RTX_DISTRIBUTED_DEBUG"))
    world = ProcessGroup(comm, impl.name, list(range(comm.size)), seconds)
    GroupMember.WORLD = world
    _state.groups = [world]
    if comm.size > 1:
        faults.install(comm.rank, comm.abort, _announce_exit)
        _state.watchdog = faults.Watchdog(seconds, comm.exited_ranks)


def _announce_exit() -> None:
    """At exit: tell the other ranks this one is gone, if the world still exists
    (``destroy_process_group()`` is the clean way out and announces nothing)."""
    world = GroupMember.WORLD
    if world is not None:
        world.comm.announce_exit()


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    if group is None or group is GroupMember.WORLD:
        for g in _state.groups:
            g.comm.free()
        if _state.watchdog is not None:
            _state.watchdog.stop()
        _state.watchdog = None
        _state.groups = []
        _state.backend = None
        GroupMember.WORLD = None
        return
    group.comm.free()
    if group in _state.groups:
        _state.groups.remove(group)


def _world() -> ProcessGroup:
    w = GroupMember.WORLD
    if w is None:
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    return w


def _group(group: Any) -> ProcessGroup:
    if group is None:
        return _world()
    if group is GroupMember.NON_GROUP_MEMBER:
        raise RuntimeError("this rank is not a member of the group")
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup (from new_group) or None, not "
                        f"{type(group).__name__}")
    return group


def get_rank(group: Any = None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).rank()


def get_world_size(group: Any = None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).size()


def get_backend(group: Any = None) -> str:
    return _group(group).backend_name


def get_process_group_ranks(group: Any) -> list[int]:
    return list(_group(group).ranks)


def new_group(ranks: Sequence[int] | None = None, timeout: Any = None, backend: Any = None,
              pg_options: Any = None, use_local_synchronization: bool = False) -> Any:
    """A group over ``ranks`` (global ranks; every rank of the world calls it).
    Non-members get ``GroupMember.NON_GROUP_MEMBER``."""
    world = _world()
    ranks = sorted(set(range(world.size()) if ranks is None else (int(r) for r in ranks)))
    bad = [r for r in ranks if not 0 <= r < world.size()]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are not in the world of {world.size()} processes")
    comm = world.comm.split(ranks)
    if comm is None:
        return GroupMember.NON_GROUP_MEMBER
    g = ProcessGroup(comm, world.backend_name, ranks, _seconds(timeout) if timeout else world.timeout)
    _state.groups.append(g)
    return g


# -- a collective's group and root ---------------------------------------------------

def _member(group: Any) -> ProcessGroup | None:
    """The group, or None on a rank outside it (the collective is then a no-op there)."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    return _group(group)


def _root(pg: ProcessGroup, rank: int, group_rank: int | None, what: str, name: str) -> int:
    """The root's rank within ``pg``: ``group_rank`` when given, else global ``rank`` mapped."""
    return group_rank if group_rank is not None else _group_rank(pg, rank, what, name)


def _group_rank(pg: ProcessGroup, rank: int, what: str, name: str) -> int:
    try:
        return pg.ranks.index(int(rank))
    except ValueError:
        raise ValueError(f"{what}: {name}={rank} is not a rank of {pg}") from None
