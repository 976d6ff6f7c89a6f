"""Communication backends as rtxcore finds them: the contract, the world of one process, plugins.

The contract a backend implements (:class:`Communicator`, :class:`CommBackend`,
:class:`CommBackendUnavailable`, ``REDUCE_OPS``) lives in
``rtxcore.dispatch.comm``, where a backend package imports it from; it is
re-exported here, where it has always been reachable. This module adds the
world of one process (what ``init_process_group()`` gives a script no launcher
started) and :func:`comm_backends`, every backend known: ``mpi`` built in, then
the plugins' (hook ``rtx_comm_backends``).
"""

from __future__ import annotations

from typing import Any

from ..dispatch.comm import REDUCE_OPS, CommBackend, CommBackendUnavailable, Communicator

__all__ = ["REDUCE_OPS", "CommBackend", "CommBackendUnavailable", "Communicator",
           "SelfCommunicator", "SelfBackend", "builtin_backends", "comm_backends"]


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
    from .sim import SimBackend

    return [MPIBackend, SimBackend]


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
