"""``rtxcore.distributed``: process groups and collectives, as ``torch.distributed``.

Processes are started by an MPI launcher (``mpiexec -n 4 python train.py`` or
``python -m rtxcore.distributed.run -n 4 train.py``); ``init_process_group()``
joins them. A script run without a launcher gets a world of one process, where
every collective is a no-op, so the same script runs alone or distributed.

Collectives work in place on tensors of any device, as PyTorch's do: cpu
tensors go to MPI as buffers without a copy, tensors on other devices are
staged through host memory (one transfer each way) unless the backend takes
them natively (``nccl``: cuda). ``async_op=True`` returns a :class:`Work`
whose ``wait()`` finishes the operation. Collectives are not recorded by
autograd.

Communication backends are plugins (``rtx_comm_backends``; see
``rtxcore.distributed.backend``). Faults end the job: see ``_guard``.
``RTX_DISTRIBUTED_DEBUG=1`` checks before every collective that all ranks call
the same one with the same shapes and dtypes, and names the ranks that differ.
"""

from __future__ import annotations

import enum
import os
from datetime import timedelta
from typing import Any, Sequence

import numpy as np

from ..ops.core import kernel, view_of
from ..tensor import Tensor
from . import _guard
from .backend import CommBackend, CommBackendUnavailable, Communicator, SelfBackend, comm_backends

__all__ = [
    "ReduceOp", "Work", "ProcessGroup", "GroupMember", "init_process_group",
    "destroy_process_group", "is_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "get_rank", "get_world_size", "get_backend", "new_group",
    "get_process_group_ranks", "all_reduce", "broadcast", "all_gather",
    "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "reduce", "gather",
    "scatter", "all_to_all_single", "barrier", "send", "recv", "isend", "irecv",
    "all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
    "CommBackend", "CommBackendUnavailable",
]

DEFAULT_TIMEOUT = timedelta(minutes=30)


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


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
    watchdog: _guard.Watchdog | None = None
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
    if name in ("gloo", "ucc"):
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
    comm = impl.world(seconds)
    if world_size not in (-1, None) and world_size != comm.size:
        raise ValueError(f"world_size={world_size}, but the launcher started {comm.size} processes")
    if rank not in (-1, None) and rank != comm.rank:
        raise ValueError(f"rank={rank}, but the launcher gave this process rank {comm.rank}")
    _state.backend = impl
    _state.debug = os.environ.get("RTX_DISTRIBUTED_DEBUG", "").strip().upper() in (
        "1", "DETAIL", "INFO", "TRUE", "YES")
    world = ProcessGroup(comm, impl.name, list(range(comm.size)), seconds)
    GroupMember.WORLD = world
    _state.groups = [world]
    if comm.size > 1:
        _guard.install(comm.rank, comm.abort)
        _state.watchdog = _guard.Watchdog(seconds)


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


# -- tensors as buffers ------------------------------------------------------------

def _tensor(t: Any, what: str) -> Any:
    if type(t) is not Tensor and not isinstance(t, Tensor):
        raise TypeError(f"{what} must be an rtxcore Tensor, not {type(t).__name__}")
    return t


def _xp(a: Any) -> Any:
    """NumPy for host arrays, the array's own module (CuPy) for device arrays."""
    if isinstance(a, np.ndarray):
        return np
    import cupy

    return cupy.get_array_module(a)


def _divide(a: Any, n: int) -> None:
    """AVG: the sum over ``n`` ranks divided in place (integers: floor division)."""
    if n > 1:
        if a.dtype.kind in "fc":
            a /= n
        else:
            _xp(a).floor_divide(a, n, out=a)


class _Buf:
    """A tensor as the array the backend gets: the tensor's own memory where it
    can be (a contiguous tensor on a native device), else a contiguous copy
    that ``finish()`` writes back."""

    __slots__ = ("t", "a", "copied", "staged")

    def __init__(self, t: Any, pg: ProcessGroup, read: bool = True) -> None:
        self.t = t
        dev = t._device
        backend = _state.backend
        if dev.type in backend.native_devices:
            h = view_of(t)
            self.staged = False
            self.copied = not h.flags.c_contiguous
            self.a = _xp(h).ascontiguousarray(h) if self.copied else h
            return
        if not backend.host_staging:
            raise RuntimeError(f"the {backend.name} backend can't take {dev.type} tensors "
                               f"(it serves {sorted(backend.native_devices)}); move the "
                               "tensor there or init_process_group with another backend")
        self.staged = self.copied = True
        if read:
            self.a = np.ascontiguousarray(kernel(dev, "to_host")(view_of(t)))
        else:
            self.a = np.empty(t._shape, t._dtype.numpy)

    def finish(self) -> None:
        """Write the result back into the tensor (if it was copied) and count the write."""
        t = self.t
        if self.copied:
            if self.staged:
                from .. import no_grad
                from ..ops.creation import from_numpy

                with no_grad():
                    t.copy_(from_numpy(self.a))
                return
            view_of(t)[...] = self.a
        t._storage.version += 1


def _dtype_check(op: str, ts: Sequence[Any]) -> None:
    first = ts[0]
    for t in ts[1:]:
        if t._dtype is not first._dtype:
            raise TypeError(f"{op}: every tensor must have the same dtype; got "
                            f"{first._dtype.name} and {t._dtype.name}")
        if t._device != first._device:
            raise ValueError(f"{op}: every tensor must be on the same device; got "
                             f"{first._device} and {t._device}")


_BITWISE = ("band", "bor", "bxor")


def _tensor_list(op: str, tensors: Any, like: Any, name: str, n: int, where: str = "") -> None:
    """``tensors`` is a list of ``n`` tensors shaped, typed and placed like ``like``."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != n:
        raise ValueError(f"{op}: {where}{name} must be a list of world size ({n}) tensors")
    for i, o in enumerate(tensors):
        _tensor(o, f"{op}: {name}[{i}]")
        if tuple(o.shape) != tuple(like.shape):
            raise ValueError(f"{op}: {name}[{i}] has shape {list(o.shape)}, "
                             f"the tensor {list(like.shape)}")
    _dtype_check(op, [like, *tensors])


def _root_list(op: str, tensors: Any, like: Any, name: str, n: int, me: bool, where: str) -> None:
    """``tensors`` is checked on the root rank (gather's destination, scatter's
    source) and must be absent elsewhere."""
    if me:
        _tensor_list(op, tensors, like, name, n, f"on the {where} rank ")
    elif tensors:
        raise ValueError(f"{op}: {name} is only for the {where} rank")


def _reduce_op(op: Any, t: Any, what: str) -> str:
    if type(op) is ReduceOp:
        kind = op._value_
        if kind in _BITWISE and t._dtype.is_floating_point:
            raise TypeError(f"{what}: {op.name} needs an integer or bool tensor, not {t._dtype.name}")
        return kind
    if isinstance(op, str):
        try:
            op = ReduceOp[op.upper()]
        except KeyError:
            raise ValueError(f"{what}: unknown reduce op {op!r}") from None
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a dist.ReduceOp, not {type(op).__name__}")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and t._dtype.is_floating_point:
        raise TypeError(f"{what}: {op.name} needs an integer or bool tensor, not {t._dtype.name}")
    return op.value


def _check_same(pg: ProcessGroup, what: Any) -> None:
    """RTX_DISTRIBUTED_DEBUG: every rank is about to call the same collective."""
    every = pg.comm.exchange_small(str(what).encode())
    if len(set(every)) > 1:
        lines = "\n".join(f"  rank {pg.ranks[r]}: {d.decode(errors='replace')}"
                          for r, d in enumerate(every))
        raise RuntimeError(f"ranks disagree on the collective they call:\n{lines}")


class _describe:
    """What a collective is, for the debug check and the watchdog's message;
    formatted only when one of them needs it."""

    __slots__ = ("name", "t", "extra")

    def __init__(self, name: str, t: Any = None, extra: str = "") -> None:
        self.name, self.t, self.extra = name, t, extra

    def __str__(self) -> str:
        t = self.t
        if t is None:
            return f"{self.name}()"
        return f"{self.name}({t._dtype.name}{list(t._shape)}{self.extra})"


class Work:
    """The handle of an ``async_op=True`` call: ``wait()`` blocks until the
    tensors hold the result (and writes them back where they were staged)."""

    def __init__(self, req: Any, what: Any, finish: Any = None, result: Any = None,
                 timeout: float | None = None) -> None:
        self._req = req
        self._what = what
        self._timeout = timeout
        self._finish = finish
        self._done = False
        self._result = result

    def wait(self, timeout: Any = None) -> bool:
        if not self._done:
            _run(lambda: self._req.wait() if self._req is not None else None, self._what,
                 then=self._finish, keep=self, timeout=self._timeout)
            self._done = True
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if self._req is None or self._req.test():
            self.wait()
        return self._done

    def result(self) -> Any:
        return self._result


def _run(call: Any, what: Any, then: Any = None, keep: Any = None,
         timeout: float | None = None) -> Any:
    """``call()`` watched: the job aborts if it waits past ``timeout`` (the
    group's; None: the world's)."""
    wd = _state.watchdog
    if wd is not None:
        wd.begin(what, timeout)
    try:
        out = call()
    finally:
        if wd is not None:
            wd.end()
    if keep is not None:
        keep._result = out if out is not None else keep._result
    if then is not None:
        then()
    return out


def _finished(async_op: bool) -> Any:
    """What a collective with nothing to do returns (a world of one process)."""
    if not async_op:
        return None
    w = Work(None, "nothing")
    w._done = True
    return w


def _launch(pg: ProcessGroup, what: Any, call: Any, finish: Any, async_op: bool) -> Any:
    """Start ``call(async_)``; block (watched) or hand back a Work."""
    if _state.debug:
        _run(lambda: _check_same(pg, what), what, timeout=pg.timeout)
    if async_op:
        return Work(call(True), what, finish, timeout=pg.timeout)
    _run(lambda: call(False), what, then=finish, timeout=pg.timeout)
    return None


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


# -- collectives -----------------------------------------------------------------

def all_reduce(tensor: Any, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
    """Every rank's ``tensor`` becomes the reduction (``op``) of all ranks' tensors."""
    t = _tensor(tensor, "all_reduce: tensor")
    pg = _member(group)
    if pg is None:
        return None
    kind = _reduce_op(op, t, "all_reduce")
    if pg.size() == 1:  # nothing to combine: no staging either
        return _finished(async_op)
    b = _Buf(t, pg)
    avg = kind == "avg"

    def finish() -> None:
        if avg:
            _divide(b.a, pg.size())
        b.finish()

    return _launch(pg, _describe("all_reduce", t, f", {kind}"),
                   lambda a: pg.comm.all_reduce(b.a, "sum" if avg else kind, a), finish, async_op)


def broadcast(tensor: Any, src: int = 0, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> Any:
    """Every rank's ``tensor`` becomes rank ``src``'s (a global rank)."""
    t = _tensor(tensor, "broadcast: tensor")
    pg = _member(group)
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast", "src")
    if pg.size() == 1:
        return _finished(async_op)
    b = _Buf(t, pg, read=pg.rank() == root)
    return _launch(pg, _describe("broadcast", t, f", src={root}"),
                   lambda a: pg.comm.broadcast(b.a, root, a), b.finish, async_op)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None,
                           async_op: bool = False) -> Any:
    """``output_tensor`` (world * d0, ...) or (world, d0, ...) gets every rank's input, in rank order."""
    out = _tensor(output_tensor, "all_gather_into_tensor: output_tensor")
    inp = _tensor(input_tensor, "all_gather_into_tensor: input_tensor")
    pg = _member(group)
    if pg is None:
        return None
    _dtype_check("all_gather_into_tensor", [out, inp])
    n = pg.size()
    if out.numel() != n * inp.numel():
        raise ValueError(f"all_gather_into_tensor: output has {out.numel()} elements, expected "
                         f"world size {n} x input's {inp.numel()} (input {list(inp.shape)}, "
                         f"output {list(out.shape)})")
    src = _Buf(inp, pg)
    dst = _Buf(out, pg, read=False)
    send = src.a.reshape(-1)
    recv = dst.a.reshape(n, -1)
    return _launch(pg, _describe("all_gather", inp),
                   lambda a: pg.comm.all_gather(send, recv, a), dst.finish, async_op)


def all_gather(tensor_list: list[Any], tensor: Any, group: Any = None, async_op: bool = False) -> Any:
    """``tensor_list[r]`` gets rank r's ``tensor``."""
    t = _tensor(tensor, "all_gather: tensor")
    pg = _member(group)
    if pg is None:
        return None
    n = pg.size()
    _tensor_list("all_gather", tensor_list, t, "tensor_list", n)
    src = _Buf(t, pg)
    recv = _xp(src.a).empty((n, *src.a.shape), src.a.dtype)

    def finish() -> None:
        _scatter_rows(recv, tensor_list, pg)

    return _launch(pg, _describe("all_gather", t), lambda a: pg.comm.all_gather(src.a, recv, a),
                   finish, async_op)


def _scatter_rows(rows: Any, tensors: Sequence[Any], pg: ProcessGroup) -> None:
    for row, o in zip(rows, tensors):
        b = _Buf(o, pg, read=False)
        b.a[...] = row
        b.finish()


def _stack_rows(tensors: Sequence[Any], pg: ProcessGroup) -> Any:
    rows = [_Buf(o, pg).a for o in tensors]
    return _xp(rows[0]).stack(rows)


def reduce_scatter_tensor(output: Any, input: Any, op: Any = ReduceOp.SUM, group: Any = None,
                          async_op: bool = False) -> Any:
    """``output`` = the reduction over ranks of this rank's slice of ``input``
    (world x output's elements)."""
    out = _tensor(output, "reduce_scatter_tensor: output")
    inp = _tensor(input, "reduce_scatter_tensor: input")
    pg = _member(group)
    if pg is None:
        return None
    _dtype_check("reduce_scatter_tensor", [out, inp])
    kind = _reduce_op(op, out, "reduce_scatter_tensor")
    n = pg.size()
    if inp.numel() != n * out.numel():
        raise ValueError(f"reduce_scatter_tensor: input has {inp.numel()} elements, expected "
                         f"world size {n} x output's {out.numel()}")
    src = _Buf(inp, pg)
    dst = _Buf(out, pg, read=False)
    return _reduce_scatter(pg, src.a.reshape(n, -1), dst, kind, async_op,
                           _describe("reduce_scatter", out, f", {kind}"))


def _reduce_scatter(pg: ProcessGroup, send: Any, dst: _Buf, kind: str, async_op: bool,
                    what: str) -> Any:
    avg = kind == "avg"
    recv = dst.a.reshape(-1)

    def finish() -> None:
        if avg:
            _divide(dst.a, pg.size())
        dst.finish()

    return _launch(pg, what, lambda a: pg.comm.reduce_scatter(send, recv, "sum" if avg else kind, a),
                   finish, async_op)


def reduce_scatter(output: Any, input_list: list[Any], op: Any = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Any:
    """``output`` = the reduction over ranks of their ``input_list[rank]``."""
    out = _tensor(output, "reduce_scatter: output")
    pg = _member(group)
    if pg is None:
        return None
    n = pg.size()
    _tensor_list("reduce_scatter", input_list, out, "input_list", n)
    kind = _reduce_op(op, out, "reduce_scatter")
    send = _stack_rows(input_list, pg).reshape(n, -1)
    dst = _Buf(out, pg, read=False)
    return _reduce_scatter(pg, send, dst, kind, async_op, _describe("reduce_scatter", out, f", {kind}"))


def reduce(tensor: Any, dst: int = 0, op: Any = ReduceOp.SUM, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Any:
    """Rank ``dst``'s ``tensor`` becomes the reduction of every rank's; the others keep theirs."""
    t = _tensor(tensor, "reduce: tensor")
    pg = _member(group)
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "reduce", "dst")
    kind = _reduce_op(op, t, "reduce")
    if pg.size() == 1:
        return _finished(async_op)
    avg = kind == "avg"
    b = _Buf(t, pg)
    me = pg.rank() == root

    def finish() -> None:
        if not me:
            return
        if avg:
            _divide(b.a, pg.size())
        b.finish()

    return _launch(pg, _describe("reduce", t, f", {kind}, dst={root}"),
                   lambda a: pg.comm.reduce(b.a, "sum" if avg else kind, root, a), finish, async_op)


def _rooted(name: str, t: Any, lst: list[Any] | None, group: Any, root: int,
            group_root: int | None, arg: str, role: str) -> tuple[Any, int, int, bool] | None:
    """gather's and scatter's common start: (group, root's group rank, group size,
    whether this rank is the root), its list checked on the root; None off the group."""
    pg = _member(group)
    if pg is None:
        return None
    r = _root(pg, root, group_root, name, arg)
    n = pg.size()
    me = pg.rank() == r
    _root_list(name, lst, t, f"{name}_list", n, me, role)
    return pg, r, n, me


def gather(tensor: Any, gather_list: list[Any] | None = None, dst: int = 0, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Any:
    """Rank ``dst``'s ``gather_list[r]`` gets rank r's ``tensor``."""
    t = _tensor(tensor, "gather: tensor")
    rooted = _rooted("gather", t, gather_list, group, dst, group_dst, "dst", "destination")
    if rooted is None:
        return None
    pg, root, n, me = rooted
    src = _Buf(t, pg)
    recv = _xp(src.a).empty((n, *src.a.shape), src.a.dtype) if me else None

    def finish() -> None:
        if me:
            _scatter_rows(recv, gather_list, pg)

    return _launch(pg, _describe("gather", t, f", dst={root}"),
                   lambda a: pg.comm.gather(src.a, recv, root, a), finish, async_op)


def scatter(tensor: Any, scatter_list: list[Any] | None = None, src: int = 0, group: Any = None,
            async_op: bool = False, group_src: int | None = None) -> Any:
    """Rank r's ``tensor`` gets rank ``src``'s ``scatter_list[r]``."""
    t = _tensor(tensor, "scatter: tensor")
    rooted = _rooted("scatter", t, scatter_list, group, src, group_src, "src", "source")
    if rooted is None:
        return None
    pg, root, n, me = rooted
    send = _stack_rows(scatter_list, pg) if me else None
    dst = _Buf(t, pg, read=False)
    return _launch(pg, _describe("scatter", t, f", src={root}"),
                   lambda a: pg.comm.scatter(send, dst.a, root, a), dst.finish, async_op)


def all_to_all_single(output: Any, input: Any, output_split_sizes: Sequence[int] | None = None,
                      input_split_sizes: Sequence[int] | None = None, group: Any = None,
                      async_op: bool = False) -> Any:
    """Split ``input`` along dim 0 (evenly, or by ``input_split_sizes``), send
    part r to rank r, and concatenate what arrives, in rank order, into ``output``."""
    out = _tensor(output, "all_to_all_single: output")
    inp = _tensor(input, "all_to_all_single: input")
    pg = _member(group)
    if pg is None:
        return None
    _dtype_check("all_to_all_single", [out, inp])
    n = pg.size()
    row_in = inp.numel() // max(1, inp.shape[0]) if inp.dim() else 1
    row_out = out.numel() // max(1, out.shape[0]) if out.dim() else 1

    def counts(sizes: Any, t: Any, row: int, name: str) -> list[int]:
        if sizes is None or len(sizes) == 0:
            if t.dim() == 0 or t.shape[0] % n:
                raise ValueError(f"all_to_all_single: {name}'s first dimension "
                                 f"({t.shape[0] if t.dim() else 'none'}) does not split evenly "
                                 f"over {n} ranks; pass {name}_split_sizes")
            return [t.shape[0] // n * row] * n
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or sum(sizes) != t.shape[0]:
            raise ValueError(f"all_to_all_single: {name}_split_sizes {sizes} must have {n} "
                             f"entries summing to {name}'s first dimension {t.shape[0]}")
        return [s * row for s in sizes]

    sc = counts(input_split_sizes, inp, row_in, "input")
    rc = counts(output_split_sizes, out, row_out, "output")
    src = _Buf(inp, pg)
    dst = _Buf(out, pg, read=False)
    return _launch(pg, _describe("all_to_all_single", inp),
                   lambda a: pg.comm.all_to_all(src.a.reshape(-1), dst.a.reshape(-1), sc, rc, a),
                   dst.finish, async_op)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Any:
    """Wait until every rank of the group reaches it."""
    pg = _member(group)
    if pg is None:
        return None
    return _launch(pg, _describe("barrier"), lambda a: pg.comm.barrier(a), None, async_op)


def _p2p(op: str, tensor: Any, peer: int | None, group: Any, tag: int, async_op: bool) -> Any:
    t = _tensor(tensor, f"{op}: tensor")
    pg = _group(group)
    if peer is None:
        peer_g = None
    else:
        peer_g = _group_rank(pg, peer, op, "dst" if op in ("send", "isend") else "src")
        if peer_g == pg.rank():
            raise ValueError(f"{op}: a rank can't {op.lstrip('i')} to or from itself "
                             f"(rank {pg.ranks[peer_g]})")
    what = _describe(op, t, f", peer={peer}, tag={tag}")
    if op in ("send", "isend"):
        b = _Buf(t, pg)
        if async_op:
            return Work(pg.comm.send(b.a, peer_g, tag, True), what, timeout=pg.timeout)
        _run(lambda: pg.comm.send(b.a, peer_g, tag, False), what, timeout=pg.timeout)
        return None
    b = _Buf(t, pg, read=False)
    if async_op:
        return Work(pg.comm.recv(b.a, peer_g, tag, True), what, b.finish, timeout=pg.timeout)
    src = _run(lambda: pg.comm.recv(b.a, peer_g, tag, False), what, then=b.finish,
               timeout=pg.timeout)
    return pg.ranks[src]


def send(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> None:
    _p2p("send", tensor, dst, group, tag, False)


def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0) -> int:
    """Receive into ``tensor``; returns the sender's rank (any rank when ``src`` is None)."""
    return _p2p("recv", tensor, src, group, tag, False)


def isend(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> Work:
    return _p2p("isend", tensor, dst, group, tag, True)


def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0) -> Work:
    return _p2p("irecv", tensor, src, group, tag, True)

from . import optim  # noqa: E402  (ZeroRedundancyOptimizer)


# -- object collectives ----------------------------------------------------------------------
#
# As PyTorch's: a Python object travels pickled, as a uint8 tensor, through the
# tensor collectives above (the lengths first, then the bytes padded to the
# longest). Unpickling runs code of the sender's choosing: use these only
# between ranks of your own job, as with PyTorch's.


def _to_bytes(obj: Any) -> Any:
    import pickle

    from .. import tensor, uint8

    return tensor(np.frombuffer(pickle.dumps(obj), dtype=np.uint8).copy(), dtype=uint8)


def _from_bytes(t: Any, n: int) -> Any:
    import pickle

    return pickle.loads(t.numpy()[:n].tobytes())


def _gather_bytes(obj: Any, pg: ProcessGroup, group: Any) -> list[Any]:
    """Every rank's pickled ``obj``, unpickled, in group rank order."""
    from .. import empty, int64, tensor, uint8

    data = _to_bytes(obj)
    sizes = empty(pg.size(), dtype=int64)
    all_gather_into_tensor(sizes, tensor([data.numel()], dtype=int64), group=group)
    longest = int(sizes.numpy().max())
    padded = empty(longest, dtype=uint8)
    padded[:data.numel()] = data
    out = empty(pg.size() * longest, dtype=uint8)
    all_gather_into_tensor(out, padded, group=group)
    return [_from_bytes(out[r * longest:(r + 1) * longest], int(n))
            for r, n in enumerate(sizes.numpy())]


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """``object_list[r]`` gets rank r's ``obj`` (pickled: trusted ranks only)."""
    pg = _member(group)
    if pg is None:
        return
    if not isinstance(object_list, list) or len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must be a list of world size "
                         f"{pg.size()} entries, got {_what(object_list)}")
    object_list[:] = _gather_bytes(obj, pg, group)


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int = 0,
                  group: Any = None) -> None:
    """On ``dst``, ``object_gather_list[r]`` gets rank r's ``obj``; other ranks
    pass None. (Every rank's bytes travel to every rank: small objects only.)"""
    pg = _member(group)
    if pg is None:
        return
    root = _root(pg, dst, None, "gather_object", "dst")
    if pg.rank() == root:
        if not isinstance(object_gather_list, list) or len(object_gather_list) != pg.size():
            raise ValueError(f"gather_object: on dst, object_gather_list must be a list of world "
                             f"size {pg.size()} entries, got {_what(object_gather_list)}")
    got = _gather_bytes(obj, pg, group)
    if pg.rank() == root:
        object_gather_list[:] = got


def broadcast_object_list(object_list: list[Any], src: int = 0, group: Any = None,
                          device: Any = None) -> None:
    """Every rank's ``object_list`` gets ``src``'s entries, in place (the lists
    have the same length on every rank)."""
    from .. import empty, int64, tensor, uint8

    pg = _member(group)
    if pg is None:
        return
    if not isinstance(object_list, list):
        raise TypeError(f"broadcast_object_list: object_list must be a list, got {_what(object_list)}")
    root = _root(pg, src, None, "broadcast_object_list", "src")
    me = pg.rank() == root
    data = _to_bytes(list(object_list)) if me else None
    size = tensor([data.numel() if me else 0], dtype=int64)
    broadcast(size, src=src, group=group)
    buf = data if me else empty(int(size.numpy()[0]), dtype=uint8)
    broadcast(buf, src=src, group=group)
    if not me:
        got = _from_bytes(buf, buf.numel())
        if len(got) != len(object_list):
            raise ValueError(f"broadcast_object_list: src has {len(got)} objects, this rank's "
                             f"list {len(object_list)}")
        object_list[:] = got


def scatter_object_list(scatter_object_output_list: list[Any], scatter_object_input_list:
                        list[Any] | None = None, src: int = 0, group: Any = None) -> None:
    """``scatter_object_output_list[0]`` gets entry r of ``src``'s input list."""
    pg = _member(group)
    if pg is None:
        return
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a non-empty list")
    root = _root(pg, src, None, "scatter_object_list", "src")
    if pg.rank() == root and (not isinstance(scatter_object_input_list, list)
                              or len(scatter_object_input_list) != pg.size()):
        raise ValueError(f"scatter_object_list: on src, scatter_object_input_list must be a list "
                         f"of world size {pg.size()} entries, got {_what(scatter_object_input_list)}")
    box = [scatter_object_input_list if pg.rank() == root else None]
    broadcast_object_list(box, src=src, group=group)
    scatter_object_output_list[0] = box[0][pg.rank()]


def _what(x: Any) -> str:
    return f"a list of {len(x)}" if isinstance(x, list) else type(x).__name__
