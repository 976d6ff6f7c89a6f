"""The ``nccl`` communication backend for ``rtxcore.distributed``, on CuPy's
NCCL bindings (``cupy.cuda.nccl``).

cuda tensors go to NCCL as they are (their CuPy arrays' device pointers), on
the current stream of the tensor's device; host arrays (cpu tensors, and other
devices' staged through the host) go over MPI on the same ranks, as PyTorch
pairs gloo with nccl. Each process drives one GPU: its rank among the
processes of its node, modulo the GPUs it sees (unless a device other than 0
was made current first).
The NCCL unique id is made on rank 0 and sent to the others over MPI, so jobs
are started by an MPI launcher as with the ``mpi`` backend. NCCL has no
gather/scatter/all-to-all of its own: those are built from grouped send/recv,
as PyTorch does.

It sees rtxcore only through the contract (``rtxcore.dispatch.comm``): it runs
beside ``mpi`` (``host_backend``), whose world communicator the core opens and
passes to ``world(timeout, host=...)``; host arrays, new groups, the exchange
of the unique id (``broadcast_bytes``) and aborts go over that communicator.

Importing this module never touches CuPy or a GPU; ``unavailable_reason()``
says what is missing.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rtxcore.dispatch.comm import (CommBackend, CommBackendUnavailable, Communicator,
                                   broadcast_bytes, started_by_mpi_launcher)


def _nccl() -> Any:
    from cupy.cuda import nccl

    return nccl


class _Event:
    """An async NCCL call: done when the stream has passed this event."""

    __slots__ = ("event",)

    def __init__(self, stream: Any) -> None:
        import cupy

        self.event = cupy.cuda.Event(disable_timing=True)
        self.event.record(stream)

    def wait(self) -> None:
        self.event.synchronize()

    def test(self) -> bool:
        return bool(self.event.done)


class NCCLCommunicator(Communicator):
    def __init__(self, comm: Any, host: Communicator) -> None:
        nccl = _nccl()
        self.host = host  # host arrays: MPI on the same ranks
        self.comm = comm
        self.rank = host.rank
        self.size = host.size
        self._ops = {"sum": nccl.NCCL_SUM, "product": nccl.NCCL_PROD, "max": nccl.NCCL_MAX,
                     "min": nccl.NCCL_MIN}
        self._types = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
                       "float64": nccl.NCCL_FLOAT64, "int8": nccl.NCCL_INT8,
                       "uint8": nccl.NCCL_UINT8, "int32": nccl.NCCL_INT32,
                       "int64": nccl.NCCL_INT64}

    def _args(self, a: Any, op: str | None = None) -> tuple[int, int, int]:
        """(pointer, count, NCCL type); data that is only moved goes as bytes."""
        name = a.dtype.name
        if op is None:
            return a.data.ptr, a.nbytes, _nccl().NCCL_UINT8
        if op not in self._ops:
            raise TypeError(f"nccl: reduce op {op!r} is not an NCCL reduction "
                            "(bitwise ops: use the mpi backend)")
        t = self._types.get(name)
        if t is None:
            raise TypeError(f"nccl: can't reduce {name} tensors (NCCL reduces float16/32/64, "
                            "int8, uint8, int32, int64)")
        return a.data.ptr, a.size, t

    @staticmethod
    def _stream() -> Any:
        import cupy

        return cupy.cuda.get_current_stream()

    def _done(self, async_: bool) -> Any:
        s = self._stream()
        if async_:
            return _Event(s)
        s.synchronize()
        return None

    def all_reduce(self, buf, op, async_):
        if isinstance(buf, np.ndarray):
            return self.host.all_reduce(buf, op, async_)
        p, n, t = self._args(buf, op)
        self.comm.allReduce(p, p, n, t, self._ops[op], self._stream().ptr)
        return self._done(async_)

    def broadcast(self, buf, root, async_):
        if isinstance(buf, np.ndarray):
            return self.host.broadcast(buf, root, async_)
        p, n, t = self._args(buf)
        self.comm.bcast(p, n, t, root, self._stream().ptr)
        return self._done(async_)

    def all_gather(self, send, recv, async_):
        if isinstance(send, np.ndarray):
            return self.host.all_gather(send, recv, async_)
        p, n, t = self._args(send)
        self.comm.allGather(p, recv.data.ptr, n, t, self._stream().ptr)
        return self._done(async_)

    def reduce_scatter(self, send, recv, op, async_):
        if isinstance(send, np.ndarray):
            return self.host.reduce_scatter(send, recv, op, async_)
        p, n, t = self._args(recv, op)
        self.comm.reduceScatter(send.data.ptr, p, n, t, self._ops[op], self._stream().ptr)
        return self._done(async_)

    def reduce(self, buf, op, root, async_):
        if isinstance(buf, np.ndarray):
            return self.host.reduce(buf, op, root, async_)
        p, n, t = self._args(buf, op)
        self.comm.reduce(p, p, n, t, self._ops[op], root, self._stream().ptr)
        return self._done(async_)

    def _grouped(self, sends: list[tuple[Any, int]], recvs: list[tuple[Any, int]]) -> None:
        nccl = _nccl()
        s = self._stream().ptr
        nccl.groupStart()
        try:
            for a, peer in sends:
                if a.nbytes:
                    self.comm.send(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, peer, s)
            for a, peer in recvs:
                if a.nbytes:
                    self.comm.recv(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, peer, s)
        finally:
            nccl.groupEnd()

    def gather(self, send, recv, root, async_):
        if isinstance(send, np.ndarray):
            return self.host.gather(send, recv, root, async_)
        if self.rank == root:
            recv[root] = send
            self._grouped([], [(recv[r], r) for r in range(self.size) if r != root])
        else:
            self._grouped([(send, root)], [])
        return self._done(async_)

    def scatter(self, send, recv, root, async_):
        if isinstance(recv, np.ndarray):
            return self.host.scatter(send, recv, root, async_)
        if self.rank == root:
            recv[...] = send[root]
            self._grouped([(send[r], r) for r in range(self.size) if r != root], [])
        else:
            self._grouped([], [(recv, root)])
        return self._done(async_)

    def all_to_all(self, send, recv, send_counts, recv_counts, async_):
        if isinstance(send, np.ndarray):
            return self.host.all_to_all(send, recv, send_counts, recv_counts, async_)
        so = ro = 0
        sends, recvs = [], []
        for r in range(self.size):
            sends.append((send[so:so + send_counts[r]], r))
            recvs.append((recv[ro:ro + recv_counts[r]], r))
            so += send_counts[r]
            ro += recv_counts[r]
        self._grouped(sends, recvs)
        return self._done(async_)

    def barrier(self, async_):
        return self.host.barrier(async_)

    def send(self, buf, dst, tag, async_):
        if isinstance(buf, np.ndarray):
            return self.host.send(buf, dst, tag, async_)
        self._grouped([(buf, dst)], [])
        return self._done(async_)

    def recv(self, buf, src, tag, async_):
        if isinstance(buf, np.ndarray):
            return self.host.recv(buf, src, tag, async_)
        if src is None:
            raise ValueError("nccl: recv needs src (NCCL has no receive from any source)")
        self._grouped([], [(buf, src)])
        done = self._done(async_)
        return done if async_ else src

    def split(self, ranks: Sequence[int]) -> "NCCLCommunicator | None":
        sub = self.host.split(ranks)
        return _make(sub) if sub is not None else None  # (on the device this process already uses)

    def exchange_small(self, data: bytes) -> list[bytes]:
        return self.host.exchange_small(data)

    def threads_ok(self) -> bool:
        ok = getattr(self.host, "threads_ok", None)
        return bool(ok is not None and ok())

    def abort(self, code: int) -> None:
        try:
            self.comm.abort()
        finally:
            self.host.abort(code)  # (mpi: MPI_Abort on the world)

    def free(self) -> None:
        self.comm.destroy()
        self.host.free()


def _make(host: Communicator) -> NCCLCommunicator:
    """An NCCL communicator over the ranks of ``host`` (their MPI communicator):
    rank 0 makes the unique id, ``host`` carries it to the others."""
    nccl = _nccl()
    # NCCL's unique id: 128 bytes, as ints from CuPy (sent as 128 int64)
    uid = np.array(nccl.get_unique_id(), np.int64).tobytes() if host.rank == 0 else None
    uid = tuple(int(v) for v in np.frombuffer(broadcast_bytes(host, uid, 0), np.int64))
    return NCCLCommunicator(nccl.NcclCommunicator(host.size, uid, host.rank), host)


class NCCLBackend(CommBackend):
    """NCCL for cuda tensors; MPI for cpu tensors (and opencl's, staged)."""

    name = "nccl"
    native_devices = frozenset({"cuda", "cpu"})
    host_staging = True
    priority = 20
    host_backend = "mpi"  # host arrays and the unique id's exchange go over MPI

    @classmethod
    def unavailable_reason(cls) -> str | None:
        from . import runtime

        gpu = runtime.problem()
        if gpu is not None:
            return f"no usable CUDA device: {gpu}"
        try:
            nccl = _nccl()
        except Exception as exc:  # noqa: BLE001
            return f"CuPy's NCCL bindings can't load: {exc}"
        if not getattr(nccl, "available", True) or not hasattr(nccl, "NcclCommunicator"):
            return ("CuPy finds no NCCL library: pip install nvidia-nccl-cu13 "
                    "(or the one matching your CUDA)")
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            return "mpi4py is needed to exchange NCCL's unique id: pip install 'rtxcore[mpi]'"
        return None

    @classmethod
    def launched(cls) -> bool:
        return started_by_mpi_launcher()  # started by an MPI launcher, as mpi's jobs are

    def world(self, timeout: float, host: Communicator | None = None) -> Communicator:
        """``host``: the mpi backend's world communicator (the core opens it)."""
        if host is None:
            raise CommBackendUnavailable("the nccl backend runs beside mpi: world() needs the "
                                         "mpi world communicator as host= (init_process_group"
                                         "('nccl') passes it)")
        import cupy
        from mpi4py import MPI

        count = cupy.cuda.runtime.getDeviceCount()
        if cupy.cuda.runtime.getDevice() == 0 and count > 1:
            # one GPU per process of this node: the rank among the node's processes
            node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
            local = node.Get_rank()
            node.Free()
            cupy.cuda.Device(local % count).use()
        return _make(host)
