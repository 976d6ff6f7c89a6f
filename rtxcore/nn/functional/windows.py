"""The sliding windows under convolution and pooling (im2col): ``_Windows``, the
windows of a padded 4-D input as a view or as the im2col matrix, with a
hand-written backward (col2im as ``kh * kw`` strided adds instead of a scatter).

The backward is itself public ops, and under ``create_graph`` the views' own
recorded backward, so the windows differentiate again.
"""

from __future__ import annotations

from typing import Any

from ...autograd.function import Function
from ...autograd.grad_mode import _state, enable_grad
from ...ops.creation import full, zeros
from ...tensor import Tensor
from .padding import pad


def _pad_value_raw(x: Tensor, pads: tuple[int, int, int, int], value: Any) -> Tensor:
    """x (N, C, H, W) with (top, bottom, left, right) rows/cols of ``value`` around it
    (nothing recorded: for use inside a Function's forward)."""
    pt, pb, pl, pr = pads
    n, c, h, w = x._shape
    out = full((n, c, h + pt + pb, w + pl + pr), value, dtype=x._dtype, device=x._device)
    out[:, :, pt:pt + h, pl:pl + w] = x
    return out


def _window_views(xp: Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                  dilation: tuple[int, int]) -> Tensor:
    """(N, C, OH, OW, kh, kw) windows of a (padded) input, as a view."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    win = xp.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)
    if dh > 1 or dw > 1:
        win = win[..., ::dh, ::dw]
    return win


def _as_cols(win: Tensor) -> Tensor:
    """(N, C, OH, OW, kh, kw) windows -> the (C*kh*kw, N*OH*OW) im2col matrix, one
    copy. Window offset major: each row is one offset's pixels of every window, so
    the copy (and col2im's adds in the backward) run along whole output rows
    rather than over runs of kw elements."""
    n, c, oh, ow, kh, kw = win._shape
    return win.permute(1, 4, 5, 0, 2, 3).reshape(c * kh * kw, n * oh * ow)


class _Windows(Function):
    """The sliding windows of a padded 4-D input: the view (N, C, OH, OW, kh, kw),
    or with ``cols`` the im2col matrix (C*kh*kw, N*OH*OW).

    The forward is views (pad, ``unfold`` twice, a strided slice for dilation).
    The backward is col2im as ``kh * kw`` strided adds into the padded input's
    gradient: each window position's gradient lands on the input rows/cols it
    read. (The views' own backward, a scatter per ``unfold``, computes the same
    and runs when the backward itself records, for double backward.)
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                pads: tuple[int, int, int, int], dilation: tuple[int, int], value: Any,
                cols: bool) -> Tensor:
        xp = _pad_value_raw(x, pads, value) if any(pads) else x
        win = _window_views(xp, kernel, stride, dilation)
        ctx.geom = (x._shape, xp._shape, win._shape)
        return _as_cols(win) if cols else win

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        none = (None,) * 6
        if not ctx.needs_input_grad[0]:
            return (None,) + none
        xshape, pshape, wshape = ctx.geom
        _, kernel, stride, pads, dilation, _, cols = ctx.args
        if _state.enabled:  # create_graph: the views' own backward, which records
            return (_windows_vjp_recorded(g, xshape, kernel, stride, pads, dilation, cols),) + none
        n, c, oh, ow, kh, kw = wshape
        (sh, sw), (dh, dw) = stride, dilation
        if cols:
            g = g.reshape(c, kh, kw, n, oh, ow).permute(3, 0, 4, 5, 1, 2)
        dxp = zeros(pshape, dtype=g._dtype, device=g._device)
        hspan, wspan = sh * (oh - 1) + 1, sw * (ow - 1) + 1
        for i in range(kh):
            r0 = i * dh
            for j in range(kw):
                c0 = j * dw
                dxp[:, :, r0:r0 + hspan:sh, c0:c0 + wspan:sw].add_(g[:, :, :, :, i, j])
        if any(pads):
            pt, _, pl, _ = pads
            dxp = dxp[:, :, pt:pt + xshape[2], pl:pl + xshape[3]]
        return (dxp,) + none


def _windows_vjp_recorded(g: Tensor, xshape: tuple[int, ...], kernel: Any, stride: Any,
                          pads: Any, dilation: Any, cols: bool) -> Tensor:
    from ...autograd.engine import grad

    z = zeros(xshape, dtype=g._dtype, device=g._device).requires_grad_()
    with enable_grad():
        pt, pb, pl, pr = pads
        zp = pad(z, (pl, pr, pt, pb)) if any(pads) else z
        win = _window_views(zp, kernel, stride, dilation)
        out = _as_cols(win) if cols else win
    (dz,) = grad(out, z, g, create_graph=True)
    return dz
