"""``rtxcore.multiprocessing``: the standard library's ``multiprocessing`` under PyTorch's name, with ``spawn``.

Scripts written for PyTorch import ``torch.multiprocessing as mp`` and call
``mp.spawn(main, args=(...), nprocs=N)``, ``mp.set_start_method("spawn")``,
``mp.Queue()``, ``mp.Process``: all of them work here. Everything but the
few names below is the standard library's own.

One difference, by design: **tensors are not shared between processes.** A
tensor handed to another process (as an argument, through a ``Queue`` or a
``Pipe``) is pickled by value -- its data, device and ``requires_grad`` -- so
the receiver gets a copy, and an in-place change on either side is not seen
by the other. ``Tensor.share_memory_()`` is accepted and changes nothing; the
sharing-strategy functions are kept for scripts that call them. To combine
work from several processes, send results back (a ``Queue``), or use
``rtxcore.distributed`` (MPI collectives) for data-parallel training.
"""

from __future__ import annotations

import multiprocessing as _mp
import multiprocessing.connection as _connection
import signal as _signal
import traceback as _traceback
from multiprocessing import *  # noqa: F401,F403  (the standard library's names)
from typing import Any, Callable

__all__ = [*_mp.__all__, "spawn", "start_processes", "ProcessContext", "ProcessRaisedException",
           "ProcessExitedException", "get_sharing_strategy", "set_sharing_strategy",
           "get_all_sharing_strategies"]

_STRATEGIES = {"file_system", "file_descriptor"}
_strategy = ["file_descriptor"]


def get_all_sharing_strategies() -> set[str]:
    """PyTorch's sharing strategies (kept for scripts that ask; tensors are copied here)."""
    return set(_STRATEGIES)


def get_sharing_strategy() -> str:
    return _strategy[0]


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepted and stored, as PyTorch's; tensors are copied between processes whatever it is."""
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"invalid sharing strategy {new_strategy!r}: expected one of "
                         f"{sorted(_STRATEGIES)}")
    _strategy[0] = new_strategy


class ProcessException(Exception):
    """A process started by :func:`spawn` failed."""

    def __init__(self, msg: str, error_index: int, pid: int | None) -> None:
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised: the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process ended with a non-zero exit code or a signal."""

    def __init__(self, msg: str, error_index: int, error_pid: int | None, exit_code: int,
                 signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _run(fn: Callable[..., Any], i: int, args: tuple[Any, ...], errors: Any) -> None:
    """A spawned process's body: ``fn(i, *args)``; an exception's traceback goes
    to the parent, and the process exits 1."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is ending the job
    except Exception:  # (SystemExit passes: its code is the process's exit code)
        errors.put(_traceback.format_exc())
        raise SystemExit(1) from None


class ProcessContext:
    """The processes :func:`start_processes` started; ``join()`` waits for them."""

    def __init__(self, processes: list[Any], error_queues: list[Any]) -> None:
        self.processes, self.error_queues = processes, error_queues

    def pids(self) -> list[int | None]:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the processes: True when all ended well, False when some still
        run after ``timeout``. The first to fail makes the others end and raises
        ``ProcessRaisedException`` (its traceback) or ``ProcessExitedException``."""
        running = [p for p in self.processes if p.exitcode is None]
        if running:
            _connection.wait([p.sentinel for p in running], timeout=timeout)
        codes = [p.exitcode for p in self.processes]  # read once: one consistent view
        failed = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
        if failed is None:
            if any(c is None for c in codes):
                return False
            for p in self.processes:
                p.join()
            return True
        for p in self.processes:  # one failed: end the others, as PyTorch does
            if p.is_alive():
                p.terminate()
            p.join()
        proc, queue = self.processes[failed], self.error_queues[failed]
        if not queue.empty():
            raise ProcessRaisedException(f"\n\n-- Process {failed} terminated with the following "
                                         f"error:\n{queue.get()}", failed, proc.pid)
        code = proc.exitcode
        if code < 0:
            name = _signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed,
                                         proc.pid, code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}", failed,
                                     proc.pid, code)


def start_processes(fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1,
                    join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:
    """Run ``fn(i, *args)`` in ``nprocs`` new processes (``i`` = 0 .. nprocs-1),
    started with ``start_method``. ``join=True`` waits for all and returns None,
    raising if one fails; ``join=False`` returns the :class:`ProcessContext`."""
    if not isinstance(nprocs, int) or isinstance(nprocs, bool) or nprocs < 1:
        raise ValueError(f"spawn: nprocs must be a positive int, got {nprocs!r}")
    ctx = _mp.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_run, args=(fn, i, tuple(args), q), daemon=daemon)
        p.start()
        processes.append(p)
        queues.append(q)
    context = ProcessContext(processes, queues)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1, join: bool = True,
          daemon: bool = False, start_method: str = "spawn") -> ProcessContext | None:
    """PyTorch's ``torch.multiprocessing.spawn``: :func:`start_processes` with
    the ``spawn`` start method. Tensors in ``args`` reach each process as copies."""
    if start_method != "spawn":
        raise ValueError(f"spawn() always uses the 'spawn' start method (got {start_method!r}); "
                         f"use start_processes(..., start_method={start_method!r})")
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
