"""Backward rules of the matrix products: ``matmul`` (1-D, 2-D and batched operands)
and ``linear``."""

from __future__ import annotations

from typing import Any

from ...ops import creation as C
from ...ops import elementwise as E
from ...ops import linalg as L
from ...ops import reduction as R
from ...ops import views as V
from ...tensor import Tensor
from ..tape import Node
from .registry import _needs, rule


@rule("matmul", save=(0, 1))
def _matmul(ctx: Node, g: Tensor) -> Any:
    a, b = ctx.saved
    na, nb = a.ndim, b.ndim
    need_a, need_b = _needs(ctx)
    if a._dtype is not g._dtype:
        a = C.to(a, g._dtype)
    if b._dtype is not g._dtype:
        b = C.to(b, g._dtype)
    ga = gb = None
    if na == 1 and nb == 1:
        return (E.mul(g, b) if need_a else None), (E.mul(g, a) if need_b else None)
    if na == 1:  # (k) @ (..., k, m) -> (..., m)
        g2 = V.unsqueeze(g, -2)
        if need_a:
            ga = V.squeeze(L.matmul(g2, b.mT), -2)
        if need_b:
            gb = L.matmul(V.unsqueeze(a, -1), g2)
        return ga, gb
    if nb == 1:  # (..., n, k) @ (k) -> (..., n)
        g2 = V.unsqueeze(g, -1)
        if need_a:
            ga = L.matmul(g2, V.unsqueeze(b, -2))
        if need_b:
            gb = V.squeeze(L.matmul(a.mT, g2), -1)
        return ga, gb
    if need_a:
        ga = L.matmul(g, b.mT)
    if need_b:
        gb = L.matmul(a.mT, g)
    return ga, gb


@rule("linear", save=(0, 1))
def _linear(ctx: Node, g: Tensor) -> Any:
    x, w = ctx.saved[0], ctx.saved[1]
    need_x, need_w, need_b = (*_needs(ctx), False)[:3]  # bias may not have been passed
    if w._dtype is not g._dtype:
        w = C.to(w, g._dtype)
    gx = L.matmul(g, w) if need_x else None
    gw = gb = None
    if need_w or need_b:
        out = g._shape[-1] if g._shape else 1
        g2 = V.reshape(g, (-1, out)) if g.ndim != 2 else g
        if need_w:
            if x.ndim == 1:
                gw = L.outer(g, C.to(x, g._dtype))
            else:
                x2 = V.reshape(x, (-1, x._shape[-1])) if x.ndim != 2 else x
                gw = L.matmul(g2.mT, C.to(x2, g._dtype))
        if need_b:
            gb = R.sum(g2, 0)
    return gx, gw, gb
