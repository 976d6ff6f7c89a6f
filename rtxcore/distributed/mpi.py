"""The ``mpi`` communication backend, on mpi4py.

NumPy arrays go to MPI as buffers, without a copy. Reductions use MPI's own
operations on the array's MPI type (MPICH reduces float16 natively); ``bool``
reductions are the logical ones (SUM and MAX are OR, PRODUCT and MIN are AND),
as PyTorch's. Data that is only moved (broadcast, gathers, all-to-all,
send/recv) travels as bytes, so every dtype NumPy carries goes through.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ..dispatch.comm import (CommBackend, CommBackendUnavailable, Communicator,
                             started_by_mpi_launcher)
from .env import allreduce_chunk

_INSTALL = "pip install 'rtxcore[mpi]'   (mpi4py and the mpich wheel, which brings mpiexec)"


def _mpi() -> Any:
    from mpi4py import MPI

    return MPI


class _Request:
    __slots__ = ("req", "after", "status")

    def __init__(self, req: Any, after: Any = None) -> None:
        self.req = req
        self.after = after  # status -> result (recv: the sender's rank)
        self.status = None

    def wait(self) -> Any:
        if self.after is None:
            self.req.Wait()
            return None
        if self.status is None:  # (test() may have completed it, keeping its status)
            self.status = _mpi().Status()
            self.req.Wait(self.status)
        return self.after(self.status)

    def test(self) -> bool:
        if self.after is None:
            return bool(self.req.Test())
        status = _mpi().Status()
        done = bool(self.req.Test(status))
        if done:
            self.status = status
        return done


# A large all-reduce runs as consecutive all-reduces of CHUNK bytes: on one
# node MPICH's shared-memory all-reduce slows down past a few MB (2 ranks on
# this 2-core machine: 8.6 GB/s bus bandwidth at 4 MB, 2.3 at 64 MB, one 48 MB
# call 21 ms against 6.9 ms as 2 MB pieces); over a network a 2 MB piece is
# already long enough to run at full bandwidth. RTX_MPI_ALLREDUCE_CHUNK (bytes,
# 0: never; checked by env.allreduce_chunk) overrides, read when the first
# communicator opens.
CHUNK = 2 << 20


class _Chunked:
    """The request of a chunked non-blocking all-reduce: one request per piece,
    all started at once, in order (every collective starts on the caller's
    thread, so all ranks start them in the same order; a progress thread only
    tests them). On 2 ranks here, 48 MB: 10.5 ms against 21 ms in one piece
    (blocking, one piece after the other: 6.9 ms)."""

    def __init__(self, comm: Any, pieces: list[np.ndarray], op: Any, in_place: Any) -> None:
        self.reqs = [comm.Iallreduce(in_place, piece, op) for piece in pieces]

    def test(self) -> bool:
        return bool(_mpi().Request.Testall(self.reqs))

    def wait(self) -> None:
        _mpi().Request.Waitall(self.reqs)


def _pieces(buf: np.ndarray) -> list[np.ndarray] | None:
    """``buf`` as consecutive CHUNK-byte views, when it is large enough to be worth it."""
    if CHUNK <= 0 or buf.nbytes <= 2 * CHUNK or not buf.flags.c_contiguous:
        return None
    flat = buf.reshape(-1)
    step = max(1, CHUNK // buf.itemsize)
    return [flat[i:i + step] for i in range(0, flat.size, step)]


def _bytes(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1).view(np.uint8)


class MPICommunicator(Communicator):
    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        MPI = _mpi()
        self._ops = {"sum": MPI.SUM, "product": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN,
                     "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR}
        self._bool_ops = {"sum": MPI.LOR, "max": MPI.LOR, "product": MPI.LAND,
                          "min": MPI.LAND, "band": MPI.LAND, "bor": MPI.LOR, "bxor": MPI.LXOR}
        self._in_place = MPI.IN_PLACE

    def _op(self, op: str, a: np.ndarray) -> Any:
        return (self._bool_ops if a.dtype == np.bool_ else self._ops)[op]

    def all_reduce(self, buf, op, async_):
        mop = self._op(op, buf)
        pieces = _pieces(buf)
        if pieces is not None:
            if async_:
                return _Chunked(self.comm, pieces, mop, self._in_place)
            for piece in pieces:
                self.comm.Allreduce(self._in_place, piece, mop)
            return None
        if async_:
            return _Request(self.comm.Iallreduce(self._in_place, buf, mop))
        self.comm.Allreduce(self._in_place, buf, mop)

    def broadcast(self, buf, root, async_):
        if async_:
            return _Request(self.comm.Ibcast(_bytes(buf), root))
        self.comm.Bcast(_bytes(buf), root)

    def all_gather(self, send, recv, async_):
        if async_:
            return _Request(self.comm.Iallgather(_bytes(send), _bytes(recv)))
        self.comm.Allgather(_bytes(send), _bytes(recv))

    def reduce_scatter(self, send, recv, op, async_):
        if async_:
            return _Request(self.comm.Ireduce_scatter_block(send, recv, self._op(op, send)))
        self.comm.Reduce_scatter_block(send, recv, self._op(op, send))

    def reduce(self, buf, op, root, async_):
        send = self._in_place if self.rank == root else buf
        recv = buf if self.rank == root else None
        if async_:
            return _Request(self.comm.Ireduce(send, recv, self._op(op, buf), root))
        self.comm.Reduce(send, recv, self._op(op, buf), root)

    def gather(self, send, recv, root, async_):
        r = _bytes(recv) if recv is not None else None
        if async_:
            return _Request(self.comm.Igather(_bytes(send), r, root))
        self.comm.Gather(_bytes(send), r, root)

    def scatter(self, send, recv, root, async_):
        s = _bytes(send) if send is not None else None
        if async_:
            return _Request(self.comm.Iscatter(s, _bytes(recv), root))
        self.comm.Scatter(s, _bytes(recv), root)

    def all_to_all(self, send, recv, send_counts, recv_counts, async_):
        item = send.dtype.itemsize
        sc = [c * item for c in send_counts]
        rc = [c * item for c in recv_counts]
        sd = np.concatenate([[0], np.cumsum(sc)[:-1]]).astype(np.int64).tolist()
        rd = np.concatenate([[0], np.cumsum(rc)[:-1]]).astype(np.int64).tolist()
        s = [_bytes(send), (sc, sd)]
        r = [_bytes(recv), (rc, rd)]
        if async_:
            return _Request(self.comm.Ialltoallv(s, r))
        self.comm.Alltoallv(s, r)

    def barrier(self, async_):
        if async_:
            return _Request(self.comm.Ibarrier())
        self.comm.Barrier()

    def send(self, buf, dst, tag, async_):
        if async_:
            return _Request(self.comm.Isend(_bytes(buf), dst, tag))
        self.comm.Send(_bytes(buf), dst, tag)

    def recv(self, buf, src, tag, async_):
        MPI = _mpi()
        source = MPI.ANY_SOURCE if src is None else src
        if async_:
            return _Request(self.comm.Irecv(_bytes(buf), source, tag),
                            after=lambda status: status.Get_source())
        status = MPI.Status()
        self.comm.Recv(_bytes(buf), source, tag, status)
        return status.Get_source()

    def split(self, ranks: Sequence[int]) -> "MPICommunicator | None":
        MPI = _mpi()
        ranks = list(ranks)
        member = self.rank in ranks
        sub = self.comm.Split(0 if member else MPI.UNDEFINED,
                              ranks.index(self.rank) if member else 0)
        return MPICommunicator(sub) if member else None

    def exchange_small(self, data: bytes) -> list[bytes]:
        if len(data) > 256:
            data = data[:256]
        mine = np.zeros(258, np.uint8)
        mine[:2] = np.frombuffer(len(data).to_bytes(2, "little"), np.uint8)
        mine[2:2 + len(data)] = np.frombuffer(data, np.uint8)
        every = np.empty((self.size, 258), np.uint8)
        self.comm.Allgather(mine, every)
        return [bytes(row[2:2 + int.from_bytes(bytes(row[:2]), "little")]) for row in every]

    def abort(self, code: int) -> None:
        _mpi().COMM_WORLD.Abort(code)

    # exit notices travel on a communicator of their own (a duplicate of the
    # world's, made by world()), so they never match a collective's messages
    exit_channel: Any = None
    _EXIT_TAG = 7

    def announce_exit(self) -> None:
        ch = self.exit_channel
        if ch is None:
            return
        note = np.ones(1, np.uint8)
        reqs = [ch.Isend(note, r, self._EXIT_TAG) for r in range(self.size) if r != self.rank]
        MPI, deadline = _mpi(), time.monotonic() + 1.0
        while not MPI.Request.Testall(reqs) and time.monotonic() < deadline:
            time.sleep(0.001)  # a one-byte message leaves at once (eager): this is brief
        for r in reqs:  # none left pending into MPI's finalisation
            if not r.Test():
                r.Cancel()
                r.Free()

    def exited_ranks(self) -> list[int]:
        ch = self.exit_channel
        if ch is None or not self.threads_ok():
            return []
        MPI = _mpi()
        out, status, note = [], MPI.Status(), np.empty(1, np.uint8)
        while ch.Iprobe(MPI.ANY_SOURCE, self._EXIT_TAG, status):
            ch.Recv(note, status.Get_source(), self._EXIT_TAG)
            out.append(status.Get_source())
        return out

    @staticmethod
    def threads_ok() -> bool:
        """Whether MPI may be called from several threads at once (DDP's progress thread)."""
        MPI = _mpi()
        return MPI.Query_thread() >= MPI.THREAD_MULTIPLE

    def free(self) -> None:
        MPI = _mpi()
        if self.exit_channel is not None:
            self.exit_channel.Free()
            self.exit_channel = None
        if self.comm != MPI.COMM_WORLD and self.comm != MPI.COMM_NULL:
            self.comm.Free()


class MPIBackend(CommBackend):
    """MPI through mpi4py: host buffers (cpu tensors in place, other devices
    staged through one host copy each way)."""

    name = "mpi"
    native_devices = frozenset({"cpu"})
    host_staging = True
    priority = 10

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            return f"mpi4py is not installed: {_INSTALL}"
        return None

    @classmethod
    def launched(cls) -> bool:
        return started_by_mpi_launcher()

    def world(self, timeout: float) -> Communicator:
        reason = self.unavailable_reason()
        if reason is not None:
            raise CommBackendUnavailable(f"the mpi backend can't run: {reason}")
        global CHUNK
        CHUNK = allreduce_chunk()  # refuses a value out of range, naming the variable
        MPI = _mpi()
        world = MPICommunicator(MPI.COMM_WORLD)
        if world.size > 1:  # (collective: every rank opens its world together)
            world.exit_channel = MPI.COMM_WORLD.Dup()
        return world
