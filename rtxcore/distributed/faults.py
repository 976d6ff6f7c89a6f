"""Faults end the whole job, never a hang: the exception and exit hooks, and the watchdog.

MPI alone leaves the other ranks blocked in a collective when one rank raises
or calls ``sys.exit(3)``: mpi4py finalises MPI at exit and nobody aborts. Once
a world of more than one process exists, rtxcore installs:

- an exception hook: an uncaught exception prints its traceback headed by the
  rank, then aborts the job (exit status 1);
- a ``sys.exit`` wrapper and an exit handler: a non-zero exit status aborts
  the job with that status (``python -m rtxcore.distributed.run`` also catches
  ``raise SystemExit(n)`` and exceptions around the whole script);
- a watchdog thread: a collective (or a ``Work.wait()``) still running after
  the process group's ``timeout`` prints which one, on which rank, and aborts;
- a rank that ends its program normally (exit status 0, or the end of the
  script) while the process group is alive (no ``destroy_process_group()``)
  tells the others so (``Communicator.announce_exit``). A rank then waiting in
  a collective of a group the leaver belongs to, ``LEFT_GRACE`` seconds after
  such a notice, aborts the job, naming the collective and the rank that left,
  instead of waiting out the timeout. Ranks not waiting, or waiting in a group
  without the leaver, are left alone: several ranks may end one after the
  other, and a rank may go on with work of its own after the others ended.
  Where MPI can't be called from a second thread the notices are not read and
  the timeout ends such a job, as before.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import traceback
from typing import Any, Callable

_installed = False
_abort: Callable[[int], None] | None = None
_announce: Callable[[], None] | None = None
_rank = 0
_exit_code: list[Any] = [None]

# how long a collective of the leaver's group may still wait once it has left
# (the leaver may have finished its part of it before leaving)
LEFT_GRACE = 5.0


def _say(msg: str) -> None:
    try:
        sys.stderr.write(msg if msg.endswith("\n") else msg + "\n")
        sys.stderr.flush()
    except Exception:
        pass


# MPI_Abort makes the launcher kill every process at once, and the launcher may
# stop forwarding their output before the last lines written: give it a moment
# to carry the reason out first
FLUSH_DELAY = 0.2


def abort(code: int, why: str) -> None:
    _say(f"rtxcore.distributed: rank {_rank}: {why}; aborting the job (exit status {code})")
    time.sleep(FLUSH_DELAY)
    if _abort is not None:
        _abort(code)
    import os

    os._exit(code)


def install(rank: int, abort_fn: Callable[[int], None],
            announce_exit: Callable[[], None] | None = None) -> None:
    """Called by ``init_process_group`` for a world of more than one process;
    ``announce_exit`` tells the other ranks this one ends while the world is alive."""
    global _installed, _abort, _rank, _announce
    _abort, _rank, _announce = abort_fn, rank, announce_exit
    if _installed:
        return
    _installed = True
    previous_hook = sys.excepthook
    real_exit = sys.exit

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        if issubclass(kind, KeyboardInterrupt):
            abort(130, "interrupted")
        text = "".join(traceback.format_exception(kind, value, tb))
        _say("".join(f"[rank {_rank}] {line}\n" for line in text.rstrip().splitlines()))
        abort(1, f"uncaught {kind.__name__}")

    def exit_(status: Any = None) -> None:
        _exit_code[0] = status
        real_exit(status)

    def at_exit() -> None:
        code = _exit_code[0]
        if code is None or code == 0:
            if _announce is not None:  # the world is still alive: say we are gone
                try:
                    _announce()
                except Exception:
                    pass
            return
        abort(code if isinstance(code, int) else 1, f"exited with status {code!r}")

    sys.excepthook = excepthook
    sys.exit = exit_
    atexit.register(at_exit)  # runs before mpi4py's finalisation (registered earlier)


class Watchdog:
    """One daemon thread per process; ``begin(what)``/``end()`` bracket each
    blocking wait, per calling thread (a ``Work.wait()`` in a user thread is
    watched beside the main thread's collective). Costs a dict write and a
    delete per collective."""

    def __init__(self, timeout: float, exited: Callable[[], list[int]] | None = None) -> None:
        self.timeout = timeout
        self.exited = exited  # polls the ranks that ended their program (see install)
        self.left: dict[int, float] = {}  # rank -> when its notice arrived
        self.waiting: dict[int, tuple[Any, float]] = {}  # thread id -> (what, since)
        self._thread = threading.Thread(target=self._run, name="rtxcore-distributed-watchdog",
                                        daemon=True)
        self._stop = False
        self._thread.start()

    def begin(self, what: Any, timeout: float | None = None, ranks: Any = None) -> None:
        """``what`` starts waiting now, for at most ``timeout`` seconds (its
        group's; None: the world's), on the world ranks ``ranks`` (None: all)."""
        self.waiting[threading.get_ident()] = (what, time.monotonic(), timeout or self.timeout,
                                               ranks)

    def end(self) -> None:
        self.waiting.pop(threading.get_ident(), None)

    def stop(self) -> None:
        self._stop = True

    def _run(self) -> None:
        while not self._stop:
            waits = list(self.waiting.values())
            shortest = min([self.timeout] + [t for _, _, t, _ in waits])
            time.sleep(min(1.0, max(0.05, shortest / 10)))
            now = time.monotonic()
            if waits and self.exited is not None:
                for r in self.exited():
                    self.left.setdefault(r, now)
            if waits and self.left:
                for what, since, _, ranks in waits:
                    # a rank of this collective's group has left (a subgroup's
                    # collective without it finishes as ever)
                    gone = [(seen, r) for r, seen in self.left.items()
                            if ranks is None or r in ranks]
                    if gone and now - max(since, min(gone)[0]) > LEFT_GRACE:
                        abort(1, f"{what} can't finish: rank {min(gone)[1]} ended its program "
                                 "without destroy_process_group() and will not take part; the "
                                 "job ends here instead of waiting out the timeout (every rank "
                                 "must make the same collective calls)")
            for what, since, limit, _ in waits:
                if now - since > limit:
                    abort(1, f"{what} did not finish within the process group's timeout "
                             f"({limit:g} s): another rank is not taking part in it "
                             "(it exited, hangs, or calls a different collective)")
