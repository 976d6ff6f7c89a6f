"""Tensors as the arrays a comm backend takes: in place where it can, else a copy written back.

A cpu tensor goes to MPI as it is (a contiguous one without a copy); a tensor
on a device the backend takes natively (nccl: cuda) goes as its device array;
others are staged through host memory, one transfer each way. AVG is a sum the
backend runs and :func:`_reduced` divides here.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..ops.core import kernel, view_of
from .groups import ProcessGroup, _state


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


def _reduced(kind: str, buf: _Buf, n: int) -> tuple[str, Callable[[], None]]:
    """A reduction's op for the backend (AVG: a sum) and what writes its result
    back into ``buf``'s tensor (AVG: the sum divided by the ``n`` ranks)."""
    avg = kind == "avg"

    def finish() -> None:
        if avg:
            _divide(buf.a, n)
        buf.finish()

    return ("sum" if avg else kind), finish


def _scatter_rows(rows: Any, tensors: Sequence[Any], pg: ProcessGroup) -> None:
    for row, o in zip(rows, tensors):
        b = _Buf(o, pg, read=False)
        b.a[...] = row
        b.finish()


def _stack_rows(tensors: Sequence[Any], pg: ProcessGroup) -> Any:
    rows = [_Buf(o, pg).a for o in tensors]
    return _xp(rows[0]).stack(rows)
