"""In-place changes through a view: the ``CopySlices`` node an owner of memory gets
when a view of it is written in place (``x[0].mul_(2)``, ``x[i] = v``), the
``AsStridedBackward`` node of such a view, and ``copy_slices``/``view_of_base``,
which the tape calls to rewire them."""

from __future__ import annotations

from typing import Any

from ...ops import creation as C
from ...ops import elementwise as E
from ...ops import indexing as I
from ...ops import views as V
from ...ops.core import make
from ...tensor import Tensor
from ..tape import FREED, Meta, Node, _new, edge, init_node
from .registry import _no_grad, in_shape
from .selection import _scatter_back, _written_mask


class CopySlices(Node):
    """The owner of memory that a view of it changed in place (``x[0].mul_(2)``,
    ``x[i] = v``): its gradient goes to its old value outside the changed region,
    and through the in-place op's rule inside it."""

    __slots__ = ()
    op = "copy_slices"

    @staticmethod
    def rule(ctx: Node, g: Tensor) -> Any:
        if ctx.extra is None:
            raise RuntimeError(FREED)
        pos, fn = ctx.extra
        from ..engine import _apply

        flat = V.reshape(g, (-1,))
        gview = V.reshape(I.getitem(flat, V.reshape(pos, (-1,))), pos._shape)
        fgrads = _apply(fn, [gview])
        keep = _no_grad(lambda: _written_mask(flat, V.reshape(pos, (-1,))))
        res = E.mul(flat, keep)
        if fgrads and fgrads[0] is not None:
            res = I.scatter_add(res, 0, V.reshape(pos, (-1,)), V.reshape(fgrads[0], (-1,)))
        return (V.reshape(res, g._shape),) + tuple(fgrads[1:])

    def release(self) -> None:
        if self.extra is not None:
            self.extra[1].release()
        Node.release(self)


class AsStridedBackward(Node):
    """A view whose memory was changed in place: its elements are positions of its
    owner, whose node (a CopySlices) now holds the history."""

    __slots__ = ()
    op = "as_strided"

    @staticmethod
    def rule(ctx: Node, g: Tensor) -> Any:
        return _scatter_back(g, ctx.extra, in_shape(ctx))

    def release(self) -> None:
        pass  # positions are small and needed by every later backward through it


def copy_slices(base: Tensor, view: Tensor, fn: Node) -> None:
    """``view`` (of ``base``) was just overwritten by ``fn``'s result: rewire
    ``base`` through a CopySlices and ``view`` through a view of it."""
    if not base.is_contiguous():
        raise RuntimeError(
            "in-place change of a view whose base is not contiguous is not supported with "
            "autograd; clone() the base first"
        )
    pos = _no_grad(lambda: _view_positions(base, view))
    cs = init_node(_new(CopySlices), (edge(base),) + tuple(fn.next_functions[1:]),
                   ((base._shape, base._dtype, base._device),) + tuple(fn._in[1:]), (pos, fn))
    base._ag = Meta(cs, 0)
    _as_view_of(base, view, pos, (cs, 0))


def _as_view_of(base: Tensor, view: Tensor, pos: Tensor, base_edge: Any) -> None:
    v = init_node(_new(AsStridedBackward), (base_edge,),
                  ((base._shape, base._dtype, base._device),), pos)
    m = Meta(v, 0)
    m.view_version = view._storage.version
    view._ag = m


def view_of_base(base: Tensor, view: Tensor) -> None:
    """Give ``view`` a fresh history: a view of ``base``'s current one."""
    if not base.is_contiguous():
        raise RuntimeError(
            "a view whose base (not contiguous) was changed in place can't be used with "
            "autograd; clone() the base first"
        )
    pos = _no_grad(lambda: _view_positions(base, view))
    _as_view_of(base, view, pos, edge(base))


def _view_positions(base: Tensor, view: Tensor) -> Tensor:
    idx = C.arange(base.numel(), device=base._device)
    return C.clone(make(idx._storage, view._shape, view._strides, view._offset - base._offset,
                        idx._dtype, idx._device))
