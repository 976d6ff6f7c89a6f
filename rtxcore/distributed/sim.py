"""``sim``: MPI with a modelled network, to see what communication would cost on
a link this machine doesn't have.

``init_process_group("sim")`` under the launcher runs every collective on
``mpi`` (so results are MPI's, bit for bit) and then holds it back until the
modelled network would have delivered it: a collective of ``B`` bytes takes the
time of its algorithm on a link of latency ``L`` and bandwidth ``W``:

=================  ==================================================
all_reduce         ring: ``2 (n-1) (L + B / (n W))``
all_gather,        ring: ``(n-1) (L + B / (n W))``, ``B`` the gathered
reduce_scatter,    (resp. scattered) total
all_to_all
broadcast, reduce  tree: ``ceil(log2 n) (L + B / W)``
gather, scatter    ``(n-1) L + B (n-1) / (n W)``
barrier            ``2 ceil(log2 n) L``
send, recv         ``L + B / W``
=================  ==================================================

The link carries one collective at a time (per process, whatever the group or
thread): a collective starts when the previous one has finished on the model's
clock, so back-to-back all-reduces
queue as on a real link. Waiting costs no CPU: a blocking call sleeps out the
rest of its modelled time, and a non-blocking one (``async_op=True``) completes
once the data has moved *and* its modelled finish has passed, so compute issued
in between overlaps it, as it would on a network card that moves data by itself.
That is why DDP starts every bucket's all-reduce non-blocking on ``sim``.

The link is set by environment variables, checked when the group is made:

``RTX_SIM_NETWORK``  a preset: ``10g`` (default: 25 us, 10 Gbit/s, an Ethernet
                     cluster), ``100g`` (5 us, 100 Gbit/s, InfiniBand HDR-class),
                     ``8gpu-node`` (3 us, 2400 Gbit/s = 300 GB/s, NVLink-class
                     within one 8-GPU node)
``RTX_SIM_LATENCY_US``, ``RTX_SIM_BANDWIDTH_GBIT``  override the preset's figures

These are models of the link, not measurements of any product; the modelled time
is what ``benchmarks/distributed.py`` and ``docs/distributed.md`` call "on a
modelled 10 Gbit/s link".

Written as a third-party communication backend would be: it imports only the
comm contract (``rtxcore.dispatch.comm``) and runs beside ``mpi``
(``host_backend``).
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Sequence

from ..dispatch.comm import CommBackend, Communicator, started_by_mpi_launcher

# name -> (latency in seconds, bandwidth in bytes per second)
PRESETS: dict[str, tuple[float, float]] = {
    "10g": (25e-6, 10e9 / 8),
    "100g": (5e-6, 100e9 / 8),
    "8gpu-node": (3e-6, 2400e9 / 8),
}


def _env_float(name: str, lo: float, hi: float) -> float | None:
    v = os.environ.get(name, "").strip()
    if not v:
        return None
    try:
        x = float(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not a number; it takes {lo:g} .. {hi:g}") from None
    if not lo <= x <= hi or math.isnan(x):
        raise ValueError(f"{name}={v!r} is out of range; it takes {lo:g} .. {hi:g}")
    return x


def link_from_env() -> tuple[float, float]:
    """(latency s, bandwidth bytes/s) from ``RTX_SIM_*``; a bad value is refused
    naming the variable and what it takes."""
    preset = os.environ.get("RTX_SIM_NETWORK", "").strip() or "10g"
    if preset not in PRESETS:
        raise ValueError(f"RTX_SIM_NETWORK={preset!r} is not a preset; it takes one of "
                         f"{', '.join(PRESETS)}")
    lat, bw = PRESETS[preset]
    us = _env_float("RTX_SIM_LATENCY_US", 0.0, 1e6)
    gbit = _env_float("RTX_SIM_BANDWIDTH_GBIT", 1e-3, 1e6)
    return (lat if us is None else us * 1e-6), (bw if gbit is None else gbit * 1e9 / 8)


def modelled_seconds(op: str, nbytes: int, n: int, latency: float, bandwidth: float) -> float:
    """The model's time for collective ``op`` moving ``nbytes`` among ``n`` ranks."""
    if n <= 1:
        return 0.0
    lg = math.ceil(math.log2(n))
    if op == "all_reduce":
        return 2 * (n - 1) * (latency + nbytes / (n * bandwidth))
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) * (latency + nbytes / (n * bandwidth))
    if op in ("broadcast", "reduce"):
        return lg * (latency + nbytes / bandwidth)
    if op in ("gather", "scatter"):
        return (n - 1) * latency + nbytes * (n - 1) / (n * bandwidth)
    if op == "barrier":
        return 2 * lg * latency
    if op in ("send", "recv"):
        return latency + nbytes / bandwidth
    raise ValueError(f"no model for {op!r}")


class _Link:
    """This process's modelled link: one collective at a time, whichever group or
    thread issues it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free_at = 0.0  # when the link finishes its last collective

    def book(self, seconds: float) -> float:
        """When a collective of ``seconds`` issued now finishes on the link."""
        with self._lock:
            finish = max(time.monotonic(), self._free_at) + seconds
            self._free_at = finish
        return finish


class _Held:
    """A non-blocking collective on the model: done when the real one is and the
    modelled finish has passed."""

    def __init__(self, inner: Any, finish: float) -> None:
        self.inner, self.finish = inner, finish

    def test(self) -> bool:
        return (self.inner is None or self.inner.test()) and time.monotonic() >= self.finish

    def wait(self) -> Any:
        out = self.inner.wait() if self.inner is not None else None
        rest = self.finish - time.monotonic()
        if rest > 0:
            time.sleep(rest)
        return out


def _nbytes(*arrays: Any) -> int:
    return sum(int(a.nbytes) for a in arrays if a is not None)


class SimCommunicator(Communicator):
    """``host`` (an mpi communicator) with each collective held to the model."""

    def __init__(self, host: Communicator, latency: float, bandwidth: float,
                 link: "_Link | None" = None) -> None:
        self.host, self.latency, self.bandwidth = host, latency, bandwidth
        self.rank, self.size = host.rank, host.size
        self._link = _Link() if link is None else link  # shared with the groups split off

    # every collective goes through here: run it on the host, hold it to the model
    def _held(self, op: str, nbytes: int, async_: bool, call: Any) -> Any:
        finish = self._link.book(
            modelled_seconds(op, nbytes, self.size, self.latency, self.bandwidth))
        out = call(async_)
        if async_:
            return _Held(out, finish)
        rest = finish - time.monotonic()
        if rest > 0:
            time.sleep(rest)
        return out

    def all_reduce(self, buf: Any, op: str, async_: bool) -> Any:
        return self._held("all_reduce", _nbytes(buf), async_,
                          lambda a: self.host.all_reduce(buf, op, a))

    def broadcast(self, buf: Any, root: int, async_: bool) -> Any:
        return self._held("broadcast", _nbytes(buf), async_,
                          lambda a: self.host.broadcast(buf, root, a))

    def all_gather(self, send: Any, recv: Any, async_: bool) -> Any:
        return self._held("all_gather", _nbytes(recv), async_,
                          lambda a: self.host.all_gather(send, recv, a))

    def reduce_scatter(self, send: Any, recv: Any, op: str, async_: bool) -> Any:
        return self._held("reduce_scatter", _nbytes(send), async_,
                          lambda a: self.host.reduce_scatter(send, recv, op, a))

    def reduce(self, buf: Any, op: str, root: int, async_: bool) -> Any:
        return self._held("reduce", _nbytes(buf), async_,
                          lambda a: self.host.reduce(buf, op, root, a))

    def gather(self, send: Any, recv: Any | None, root: int, async_: bool) -> Any:
        return self._held("gather", _nbytes(send) * self.size, async_,
                          lambda a: self.host.gather(send, recv, root, a))

    def scatter(self, send: Any | None, recv: Any, root: int, async_: bool) -> Any:
        return self._held("scatter", _nbytes(recv) * self.size, async_,
                          lambda a: self.host.scatter(send, recv, root, a))

    def all_to_all(self, send: Any, recv: Any, send_counts: Sequence[int],
                   recv_counts: Sequence[int], async_: bool) -> Any:
        return self._held("all_to_all", _nbytes(send), async_,
                          lambda a: self.host.all_to_all(send, recv, send_counts, recv_counts, a))

    def barrier(self, async_: bool) -> Any:
        return self._held("barrier", 0, async_, lambda a: self.host.barrier(a))

    def send(self, buf: Any, dst: int, tag: int, async_: bool) -> Any:
        return self._held("send", _nbytes(buf), async_, lambda a: self.host.send(buf, dst, tag, a))

    def recv(self, buf: Any, src: int | None, tag: int, async_: bool) -> Any:
        return self._held("recv", _nbytes(buf), async_, lambda a: self.host.recv(buf, src, tag, a))

    # groups, faults and setup pass through (setup messages are not modelled)
    def split(self, ranks: Sequence[int]) -> Communicator | None:
        sub = self.host.split(ranks)
        return None if sub is None else SimCommunicator(sub, self.latency, self.bandwidth,
                                                         self._link)

    def exchange_small(self, data: bytes) -> list[bytes]:
        return self.host.exchange_small(data)

    def abort(self, code: int) -> None:
        self.host.abort(code)

    def announce_exit(self) -> None:
        self.host.announce_exit()

    def exited_ranks(self) -> list[int]:
        return self.host.exited_ranks()

    def threads_ok(self) -> bool:
        ok = getattr(self.host, "threads_ok", None)
        return bool(ok is not None and ok())

    # requests complete without a progress thread: the model's time passes by
    # itself, and the host moves the (local) data when the request is waited on
    progresses_alone = True

    def free(self) -> None:
        self.host.free()


class SimBackend(CommBackend):
    """``mpi`` held to a modelled network (see the module docstring)."""

    name = "sim"
    native_devices = frozenset({"cpu"})
    host_staging = True
    priority = -5  # only when asked for by name
    host_backend = "mpi"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            return ("sim runs on mpi, and mpi4py is not installed: pip install 'rtxcore[mpi]'")
        return None

    @classmethod
    def launched(cls) -> bool:
        return started_by_mpi_launcher()

    def world(self, timeout: float, host: Communicator | None = None) -> Communicator:
        if host is None:
            raise RuntimeError("the sim backend runs beside mpi: it needs the mpi world as host")
        latency, bandwidth = link_from_env()
        return SimCommunicator(host, latency, bandwidth)
