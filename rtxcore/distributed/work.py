"""How a collective runs: blocking under the watchdog or as a ``Work``; the ranks-agree check.

``_launch`` starts a collective's backend call: with ``async_op=True`` it hands
back a :class:`Work` whose ``wait()`` finishes it, else it blocks in ``_run``,
which tells the watchdog (``faults``) what it waits for, so a collective that
waits past its group's timeout aborts the job naming it. With
``RTX_DISTRIBUTED_DEBUG=1`` every rank first checks that all ranks call the
same collective with the same shapes and dtypes (``_check_same``).
"""

from __future__ import annotations

from typing import Any

from .groups import ProcessGroup, _state


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
                 timeout: float | None = None, ranks: Any = None) -> None:
        self._req = req
        self._what = what
        self._timeout = timeout
        self._ranks = ranks
        self._finish = finish
        self._done = False
        self._result = result

    def wait(self, timeout: Any = None) -> bool:
        if not self._done:
            _run(lambda: self._req.wait() if self._req is not None else None, self._what,
                 then=self._finish, keep=self, timeout=self._timeout, ranks=self._ranks)
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
         timeout: float | None = None, ranks: Any = None) -> Any:
    """``call()`` watched: the job aborts if it waits past ``timeout`` (the
    group's; None: the world's), or once a rank of ``ranks`` (the group's world
    ranks; None: all) has ended its program."""
    wd = _state.watchdog
    if wd is not None:
        wd.begin(what, timeout, ranks)
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
        _run(lambda: _check_same(pg, what), what, timeout=pg.timeout, ranks=pg.ranks)
    if async_op:
        return Work(call(True), what, finish, timeout=pg.timeout, ranks=pg.ranks)
    _run(lambda: call(False), what, then=finish, timeout=pg.timeout, ranks=pg.ranks)
    return None
