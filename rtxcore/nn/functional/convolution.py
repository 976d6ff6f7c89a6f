"""Convolution: ``conv1d``, ``conv2d``, ``conv_transpose1d``, ``conv_transpose2d`` and
``unfold`` (im2col).

``conv2d`` takes one of three paths: on small images one matmul with the
convolution's dense matrix (recorded ops); where the backend has the conv2d
kernels, one node over them (``_Conv2dKernel``); elsewhere im2col (the sliding
windows of ``windows._Windows``) and one matmul. ``conv_transpose2d`` is one
matmul and a col2im (``_Col2Im``, a Function whose backward is im2col). The 1-D
forms are the 2-D ones on a height-1 view.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import dtype as D
from ...amp.autocast_mode import autocast_inputs, regions as _autocast_regions
from ...autograd.function import Function
from ...autograd.grad_mode import _state, enable_grad
from ..._tracing import is_tracing
from ...ops.core import empty, own_kernel, view_of
from ...ops.creation import tensor, zeros
from ...ops.linalg import matmul
from ...tensor import Tensor
from ._args import _as_3d, _as_4d, _check_groups, _check_tensor, _pair, _shape, _single
from .padding import pad
from .windows import _Windows

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "unfold"]


def _conv_operands(fn: str, input: Tensor, weight: Tensor, groups: Any,
                   layout: str) -> tuple[Tensor, bool, Any]:
    """The batched input (and whether it was unbatched), and the groups, checked
    (``groups=None``: left for later); the weight must have ``layout``'s dims."""
    dims = layout.count(",") + 1
    x, unbatched = (_as_4d if dims == 4 else _as_3d)(fn, input)
    _check_tensor(fn, "weight", weight)
    if groups is not None:
        groups = _check_groups(fn, groups)
    if weight.ndim != dims:
        raise RuntimeError(f"{fn}: weight must be {dims}-D ({layout}), got weight of shape "
                           f"{_shape(weight)} (input shape {_shape(input)})")
    return x, unbatched, groups


def _check_divisible(fn: str, size: int, groups: int, weight: Tensor) -> None:
    """The weight's dim 0 (``size`` channels) splits into ``groups``."""
    if size % groups:
        raise RuntimeError(f"{fn}: Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size {list(weight._shape)}")


def _check_in_channels(fn: str, input: Tensor, weight: Tensor, c: int, groups: int) -> None:
    if weight._shape[1] * groups != c:
        raise RuntimeError(
            f"{fn}: input has {c} channels (input shape {_shape(input)}) but weight expects "
            f"{weight._shape[1] * groups} (weight shape {_shape(weight)}); groups={groups}")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation as im2col plus one matmul.

    input (N, C, H, W) or (C, H, W); weight (OC, C, kh, kw); padding an int, a
    pair, ``'valid'`` or ``'same'`` (stride 1 only; the odd extra pixel goes
    bottom/right, as PyTorch).
    """
    if _autocast_regions[0]:  # autocast: computed in float16
        input, weight, bias = autocast_inputs("conv2d", input, weight, bias)
    fn = "conv2d"
    x, unbatched, groups = _conv_operands(fn, input, weight, groups,
                                          "out_channels, in_channels, kH, kW")
    n, c, h, w = x._shape
    oc, _, kh, kw = weight._shape
    _check_divisible(fn, oc, groups, weight)
    _check_in_channels(fn, input, weight, c, groups)
    sh, sw = _pair(stride, "stride", fn)
    dh, dw = _pair(dilation, "dilation", fn)
    if sh <= 0 or sw <= 0:
        raise RuntimeError(f"conv2d: stride must be positive, got {(sh, sw)}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"conv2d: dilation must be positive, got {(dh, dw)}")
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    if isinstance(padding, str):
        if padding == "valid":
            pads = (0, 0, 0, 0)
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise RuntimeError("conv2d: padding='same' is not supported for strided convolutions")
            th, tw = ekh - 1, ekw - 1
            pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
        else:
            raise ValueError(f"conv2d: invalid padding string {padding!r}, should be one of "
                             "'valid' or 'same'")
    else:
        ph, pw = _pair(padding, "padding", fn)
        if ph < 0 or pw < 0:
            raise RuntimeError(f"conv2d: negative padding is not supported, got {(ph, pw)}")
        pads = (ph, ph, pw, pw)
    hp, wp = h + pads[0] + pads[1], w + pads[2] + pads[3]
    if hp < ekh or wp < ekw:
        raise RuntimeError(
            f"conv2d: calculated padded input size per channel: ({hp} x {wp}). Kernel size: "
            f"({ekh} x {ekw}). Kernel size can't be greater than actual input size (input "
            f"shape {_shape(input)}, weight shape {_shape(weight)})")
    if bias is not None:
        _check_tensor(fn, "bias", bias)
        if bias.numel() != oc:
            raise RuntimeError(f"conv2d: bias has {bias.numel()} elements (shape {_shape(bias)}) "
                               f"but weight has {oc} output channels (weight shape {_shape(weight)})")
    oh, ow = (hp - ekh) // sh + 1, (wp - ekw) // sw + 1
    geom = ((sh, sw), pads, (dh, dw), (oh, ow))
    kernels = groups == 1 and _conv2d_kernels(x, weight, bias) is not None
    if groups == 1 and h * w <= (_DENSE_KERNELS_RATIO if kernels else _DENSE_CONV_RATIO) \
            * kh * kw and c * h * w * oc * oh * ow <= _DENSE_CONV_MAX:
        out = _conv2d_dense(x, weight, bias, *geom)
    elif kernels:
        out = _Conv2dKernel.apply(x, weight, bias, *geom)
    else:
        out = _conv2d_cols(x, weight, bias, groups, *geom)
    return out.squeeze(0) if unbatched else out


def _conv2d_cols(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int,
                 stride: tuple[int, int], pads: tuple[int, int, int, int],
                 dilation: tuple[int, int], out_hw: tuple[int, int]) -> Tensor:
    """conv2d in tensor ops: the im2col matrix (C*kh*kw, N*OH*OW) times the weight."""
    n, oc, (kh, kw), (oh, ow) = x._shape[0], weight._shape[0], weight._shape[2:], out_hw
    cols = _Windows.apply(x, (kh, kw), stride, pads, dilation, 0, True)
    out = _grouped_cols_matmul(cols, weight, groups)  # (OC, N*OH*OW)
    out = out.reshape(oc, n, oh, ow).permute(1, 0, 2, 3)
    # the add (or the copy) makes the result contiguous (N, OC, OH, OW), as PyTorch's
    return out + bias.reshape(oc, 1, 1) if bias is not None else out.contiguous()


def _conv2d_kernels(x: Tensor, weight: Tensor, bias: Tensor | None) -> Any:
    """The backend's (conv2d, conv2d_input_grad, conv2d_weight_grad) for these
    operands (floating point, one dtype and device), or None: then the core's."""
    dt, dev = x._dtype, x._device
    if dt.kind != "f" or weight._dtype is not dt or weight._device is not dev or (
            bias is not None and (bias._dtype is not dt or bias._device is not dev
                                  or bias.ndim != 1)):
        return None
    ks = (own_kernel(dev, "conv2d", dt), own_kernel(dev, "conv2d_input_grad", dt),
          own_kernel(dev, "conv2d_weight_grad", dt))
    return None if None in ks else ks


def _weight_grad_x(x: Tensor) -> Any:
    """The backend's conv2d_weight_grad_x for x's dtype, or None. With it, conv2d
    writes no im2col matrix (cols None): the weight's gradient takes x. A traced
    forward keeps the cols form (its kernel nodes have fixed outputs)."""
    return None if is_tracing() else own_kernel(x._device, "conv2d_weight_grad_x", x._dtype)


def _weight_grad_of_x(dw: Tensor, g: Tensor, x: Tensor, weight_grad: Any,
                      stride: tuple[int, int], pads: tuple[int, int, int, int],
                      dilation: tuple[int, int]) -> None:
    """dw = the weight's gradient where the forward wrote no cols: the backend's
    conv2d_weight_grad_x, looked up now (a backward traced after an untraced
    forward records it; a kernel table changed since the forward is the one
    used), else conv2d_weight_grad of the core's im2col of x."""
    k = own_kernel(x._device, "conv2d_weight_grad_x", x._dtype)
    if k is not None:
        k(dw._h, view_of(g), view_of(x), stride, pads, dilation)
        return
    cols = _Windows.apply(x.detach(), tuple(dw._shape[2:]), stride, pads, dilation, 0, True)
    weight_grad(dw._h, view_of(g), view_of(cols))


def _recorded_vjps(conv: Any, x: Tensor, weight: Tensor, g: Tensor, need_x: bool,
                   need_w: bool) -> tuple[Tensor | None, Tensor | None]:
    """A kernel backward under create_graph: the gradients of the core's
    differentiable form ``conv(x, weight)``, recorded. It is linear in each operand,
    so each gradient is a vjp with respect to a fresh zero leaf."""
    from ...autograd.engine import grad

    dx = dw = None
    with enable_grad():
        if need_x:
            z = zeros(x._shape, dtype=x._dtype, device=x._device).requires_grad_()
            (dx,) = grad(conv(z, weight), z, g, create_graph=True)
        if need_w:
            z = zeros(weight._shape, dtype=weight._dtype, device=weight._device).requires_grad_()
            (dw,) = grad(conv(x, z), z, g, create_graph=True)
    return dx, dw


class _Conv2dKernel(Function):
    """conv2d (groups 1) as the backend's kernels: the forward writes the output
    and the im2col matrix, which the weight's gradient reuses; the input's
    gradient is the backend's col2im. A backward that records (double backward)
    differentiates the core's tensor-op conv2d instead: conv2d is linear in each
    operand, so each gradient is a vjp with respect to a fresh leaf."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None,
                stride: tuple[int, int], pads: tuple[int, int, int, int],
                dilation: tuple[int, int], out_hw: tuple[int, int]) -> Tensor:
        n, c = x._shape[:2]
        oc, _, kh, kw = weight._shape
        oh, ow = out_hw
        dev, dt = x._device, x._dtype
        out = empty((n, oc, oh, ow), dt, dev)
        cols = None if _weight_grad_x(x) is not None else \
            empty((c * kh * kw, n * oh * ow), dt, dev)
        kern = _conv2d_kernels(x, weight, bias)[0]
        kern(out._h, None if cols is None else cols._h, view_of(x), view_of(weight),
             None if bias is None else view_of(bias), stride, pads, dilation)
        ctx.cols = cols
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        x, weight = ctx.saved_tensors
        _, _, bias, stride, pads, dilation, out_hw = ctx.args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = dw = db = None
        if _state.enabled:  # create_graph
            dx, dw = _recorded_vjps(
                lambda a, b: _conv2d_cols(a, b, None, 1, stride, pads, dilation, out_hw),
                x, weight, g, need_x, need_w)
        else:
            _, input_grad, weight_grad = _conv2d_kernels(x, weight, bias)
            if g._dtype is not x._dtype:
                g = g.to(x._dtype)
            if need_x:
                dx = empty(x._shape, x._dtype, x._device)
                input_grad(dx._h, view_of(g), view_of(weight), stride, pads, dilation)
            if need_w:
                dw = empty(weight._shape, weight._dtype, weight._device)
                if ctx.cols is None:
                    _weight_grad_of_x(dw, g, x, weight_grad, stride, pads, dilation)
                else:
                    weight_grad(dw._h, view_of(g), view_of(ctx.cols))
        if need_b:
            db = g.sum((0, 2, 3))
        return dx, dw, db, None, None, None, None


# conv2d on small images as one matmul with the convolution's dense matrix: for
# at most this many matrix elements (C*H*W x OC*OH*OW)
_DENSE_CONV_MAX = 1 << 18
# ... and where it costs at most this many times im2col's multiply-adds (H*W vs kh*kw)
# against the core's im2col in tensor ops, or against a backend's conv kernels.
# Against rtx_cpu's kernels the dense form paid only where the kernel covers the
# image (DCGAN's last 4x4 -> 1x1 layer, 2 threads: step 48.4 ms, 56.1 without
# it); the digits CNN's 3x3 on 4x4 (1.8 times the multiply-adds, and the map
# product's k = 9) made its step 2.7 ms against 2.1 through the kernels.
_DENSE_CONV_RATIO = 3
_DENSE_KERNELS_RATIO = 1
_conv_maps: dict[tuple[Any, ...], Tensor] = {}


def _conv_map(hw: tuple[int, int], out_hw: tuple[int, int], kernel: tuple[int, int],
              stride: tuple[int, int], pads: tuple[int, int, int, int],
              dilation: tuple[int, int], dt: D.DType, dev: Any) -> Tensor:
    """The 0/1 map (OH*OW, kh*kw, H*W): for each output position and kernel offset,
    the input pixel read there (none in the padding). Cached per geometry, dtype
    and device."""
    key = (hw, out_hw, kernel, stride, pads, dilation, dt, dev)
    m = _conv_maps.get(key)
    if m is None:
        (h, w), (oh, ow), (kh, kw) = hw, out_hw, kernel
        (sh, sw), (dh, dw) = stride, dilation
        s = np.zeros((oh, ow, kh, kw, h, w))
        a, b = np.arange(oh), np.arange(ow)
        for i in range(kh):
            r = a * sh - pads[0] + i * dh
            ra, rr = a[(r >= 0) & (r < h)], r[(r >= 0) & (r < h)]
            for j in range(kw):
                q = b * sw - pads[2] + j * dw
                qb, qq = b[(q >= 0) & (q < w)], q[(q >= 0) & (q < w)]
                s[ra[:, None], qb, i, j, rr[:, None], qq] = 1.0
        m = tensor(s.reshape(oh * ow, kh * kw, h * w), dtype=dt, device=dev)
        if len(_conv_maps) >= 64:
            _conv_maps.clear()
        _conv_maps[key] = m
    return m


def _conv2d_dense(x: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple[int, int],
                  pads: tuple[int, int, int, int], dilation: tuple[int, int],
                  out_hw: tuple[int, int]) -> Tensor:
    """conv2d (groups 1) as ``K @ x^T``, x (N, C*H*W), K (OH*OW*OC, C*H*W) the
    convolution's dense matrix, built from the weight and the 0/1 map of the pixel
    each kernel offset reads at each output position. On small images this is a
    few larger matmuls instead of im2col's copies and col2im's adds. Recorded ops
    only: it differentiates (again) through matmul and the views."""
    n, c, h, w = x._shape
    oc, _, kh, kw = weight._shape
    oh, ow = out_hw
    smap = _conv_map((h, w), out_hw, (kh, kw), stride, pads, dilation, weight._dtype,
                     weight._device)
    k = matmul(weight.reshape(1, oc * c, kh * kw), smap)  # (OH*OW, OC*C, H*W)
    # K @ x^T rather than x @ K^T: K's gradient (g @ x) then comes out contiguous
    # in k's own layout, where the other order's needs a transposing copy of K
    out = matmul(k.reshape(oh * ow * oc, c * h * w), x.reshape(n, c * h * w).T)
    out = out.reshape(oh, ow, oc, n).permute(3, 2, 0, 1)
    # the add (or the copy) makes the result contiguous (N, OC, OH, OW), as PyTorch's
    return out + bias.reshape(oc, 1, 1) if bias is not None else out.contiguous()


def _grouped_cols_matmul(cols: Tensor, weight: Tensor, groups: int) -> Tensor:
    """The (OC, C/groups, kh, kw) weight times the im2col matrix (C*kh*kw, L) ->
    (OC, L).

    Channel-major rows put each group's block one after the other, so a grouped
    convolution is one batched matmul over the groups."""
    oc = weight._shape[0]
    k = weight.numel() // oc  # (C / groups) * kh * kw
    if groups == 1:
        return matmul(weight.reshape(oc, k), cols)
    lcols = cols._shape[1]
    per = matmul(weight.reshape(groups, oc // groups, k),  # (G, OC/G, k)
                 cols.reshape(groups, k, lcols))  # (G, k, L)
    return per.reshape(oc, lcols)


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), L the number of window positions."""
    fn = "unfold"
    x, unbatched = _as_4d(fn, input)
    kh, kw = _pair(kernel_size, "kernel_size", fn)
    dh, dw = _pair(dilation, "dilation", fn)
    ph, pw = _pair(padding, "padding", fn)
    sh, sw = _pair(stride, "stride", fn)
    n, c, h, w = x._shape
    if h + 2 * ph < dh * (kh - 1) + 1 or w + 2 * pw < dw * (kw - 1) + 1:
        raise RuntimeError(f"unfold: kernel {(kh, kw)} (dilation {(dh, dw)}) is larger than the "
                           f"padded input (input shape {_shape(input)}, padding {(ph, pw)})")
    win = _Windows.apply(x, (kh, kw), (sh, sw), (ph, ph, pw, pw), (dh, dw), 0, False)
    _, _, oh, ow, _, _ = win._shape
    out = win.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return out.squeeze(0) if unbatched else out


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation: ``conv2d`` of the (N, C, 1, L) view with the
    (OC, C/groups, 1, K) weight. input (N, C, L) or (C, L); padding an int,
    ``'valid'`` or ``'same'``."""
    fn = "conv1d"
    x, unbatched, groups = _conv_operands(fn, input, weight, groups,
                                          "out_channels, in_channels/groups, kW")
    _check_in_channels(fn, input, weight, x._shape[1], groups)
    s = _single(stride, "stride", fn)
    d = _single(dilation, "dilation", fn)
    p: Any = padding if isinstance(padding, str) else (0, _single(padding, "padding", fn))
    out = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), p, (1, d), groups)
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


class _Col2Im(Function):
    """col2im: the (N, C, kH, kW, H, W) patches of a transposed convolution added
    into its (N, C, OH, OW) output, ``kH * kW`` strided adds; the backward is
    im2col (the sliding windows of ``conv2d``, ``_Windows``), so it differentiates
    again.

    Patch (i, j) of input pixel (y, x) lands at output row ``y * stride + i *
    dilation - padding`` (and likewise for columns); the canvas is ``padding``
    larger on each side, plus ``output_padding`` rows/cols that nothing reaches.
    """

    @staticmethod
    def forward(ctx: Any, patches: Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                dilation: tuple[int, int], padding: tuple[int, int],
                output_padding: tuple[int, int]) -> Tensor:
        n, c, kh, kw, h, w = patches._shape
        (sh, sw), (dh, dw) = stride, dilation
        (ph, pw), (oph, opw) = padding, output_padding
        hspan, wspan = sh * (h - 1) + 1, sw * (w - 1) + 1
        full_h, full_w = hspan + dh * (kh - 1) + oph, wspan + dw * (kw - 1) + opw
        canvas = zeros((n, c, full_h, full_w), dtype=patches._dtype, device=patches._device)
        for i in range(kh):
            for j in range(kw):
                canvas[:, :, i * dh:i * dh + hspan:sh, j * dw:j * dw + wspan:sw].add_(
                    patches[:, :, i, j])
        return canvas[:, :, ph:full_h - ph, pw:full_w - pw].contiguous()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        _, kernel, stride, dilation, (ph, pw), (oph, opw) = ctx.args
        # back to the canvas that the windows read (the output_padding rows dropped)
        gp = pad(g, (pw, pw - opw, ph, ph - oph))
        win = _Windows.apply(gp, kernel, stride, (0, 0, 0, 0), dilation, 0, False)
        return (win.permute(0, 1, 4, 5, 2, 3),) + (None,) * 5


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """2-D transposed convolution (the gradient of ``conv2d`` with respect to its input).

    input (N, C_in, H, W) or (C_in, H, W); weight (C_in, C_out/groups, kH, kW).
    Output size ``(H - 1) * stride - 2 * padding + dilation * (kH - 1) +
    output_padding + 1``. One matmul gives each input pixel's contribution
    (a kH x kW patch per output channel) and col2im adds the patches into the
    output (``_Col2Im``): the same work as the ``conv2d`` it transposes.
    """
    fn = "conv_transpose2d"
    x, unbatched, groups = _conv_operands(fn, input, weight, groups,
                                          "in_channels, out_channels/groups, kH, kW")
    n, c, h, w = x._shape
    wc, ocg, kh, kw = weight._shape
    if wc != c:
        raise RuntimeError(f"{fn}: input has {c} channels (input shape {_shape(input)}) but "
                           f"weight expects {wc} (weight shape {_shape(weight)}; its dim 0 is "
                           "in_channels)")
    _check_divisible(fn, c, groups, weight)
    sh, sw = _pair(stride, "stride", fn)
    ph, pw = _pair(padding, "padding", fn)
    oph, opw = _pair(output_padding, "output_padding", fn)
    dh, dw = _pair(dilation, "dilation", fn)
    if min(sh, sw, dh, dw) <= 0:
        raise RuntimeError(f"{fn}: stride and dilation must be positive, got stride={(sh, sw)}, "
                           f"dilation={(dh, dw)}")
    if min(ph, pw, oph, opw) < 0:
        raise RuntimeError(f"{fn}: negative padding is not supported, got padding={(ph, pw)}, "
                           f"output_padding={(oph, opw)}")
    if not (oph < max(sh, dh) and opw < max(sw, dw)):
        raise RuntimeError(
            f"{fn}: output padding must be smaller than either stride or dilation, but got "
            f"output_padding_height: {oph} output_padding_width: {opw} stride_height: {sh} "
            f"stride_width: {sw} dilation_height: {dh} dilation_width: {dw}")
    oc = ocg * groups
    out_h = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    out_w = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if out_h <= 0 or out_w <= 0:
        raise RuntimeError(f"{fn}: given input size per channel: ({h} x {w}); calculated output "
                           f"size per channel: ({out_h} x {out_w}). Output size is too small")
    if bias is not None:
        _check_tensor(fn, "bias", bias)
        if bias.numel() != oc:
            raise RuntimeError(f"{fn}: bias has {bias.numel()} elements (shape {_shape(bias)}) but "
                               f"the output has {oc} channels (weight shape {_shape(weight)}, "
                               f"groups={groups})")
    if groups == 1 and oph < sh and opw < sw and _conv2d_kernels(x, weight, bias) is not None:
        # the backend's conv kernels: this is conv2d's input gradient, and its
        # backward conv2d (input) and conv2d's weight gradient (weight). (An
        # output_padding of a stride or more -- allowed below the dilation -- is not
        # the input gradient of any conv2d of x's size: the core's form takes it.)
        out = _ConvTranspose2dKernel.apply(x, weight, bias, (sh, sw), (ph, ph, pw, pw),
                                           (dh, dw), (out_h, out_w))
        return out.squeeze(0) if unbatched else out
    return _conv_transpose2d_cols(x, weight, bias, groups, (sh, sw), (ph, pw), (oph, opw),
                                  (dh, dw), unbatched)


def _conv_transpose2d_cols(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int,
                           stride: tuple[int, int], padding: tuple[int, int],
                           output_padding: tuple[int, int], dilation: tuple[int, int],
                           unbatched: bool = False) -> Tensor:
    """conv_transpose2d in tensor ops (any groups): a matmul and col2im."""
    n, c, h, w = x._shape
    _, ocg, kh, kw = weight._shape
    oc = ocg * groups
    # every input pixel's patches: (C_out*kH*kW, C_in) @ (N, C_in, H*W), per group (as the
    # weight's transpose on the left, the input's gradient comes back contiguous)
    k = ocg * kh * kw
    if groups == 1:
        cols = matmul(weight.reshape(c, k).T, x.reshape(n, c, h * w))
    else:
        cg = c // groups
        cols = matmul(weight.reshape(groups, cg, k).transpose(1, 2),
                      x.reshape(n, groups, cg, h * w))  # (N, G, C_out/G*kH*kW, H*W)
    cols = cols.reshape(n, oc, kh, kw, h, w)
    out = _Col2Im.apply(cols, (kh, kw), stride, dilation, padding, output_padding)
    if bias is not None:
        out = out + bias.reshape(oc, 1, 1)
    return out.squeeze(0) if unbatched else out


class _ConvTranspose2dKernel(Function):
    """conv_transpose2d (groups 1) as the backend's conv2d kernels: the forward is
    conv2d's input gradient of ``x`` (conv2d_input_grad); the backward is a conv2d
    of the output's gradient (the input's gradient, and the im2col matrix the
    weight's gradient then takes, as conv2d_weight_grad of ``x``). A backward that
    records (double backward) differentiates the core's tensor-op form instead."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None,
                stride: tuple[int, int], pads: tuple[int, int, int, int],
                dilation: tuple[int, int], out_hw: tuple[int, int]) -> Tensor:
        n = x._shape[0]
        oc = weight._shape[1]
        input_grad = _conv2d_kernels(x, weight, bias)[1]
        out = empty((n, oc, *out_hw), x._dtype, x._device)
        input_grad(out._h, view_of(x), view_of(weight), stride, pads, dilation)
        if bias is not None:
            out.add_(bias.reshape(oc, 1, 1))
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        x, weight = ctx.saved_tensors
        _, _, bias, stride, pads, dilation, out_hw = ctx.args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = dw = db = None
        (kh, kw), (h, w) = weight._shape[2:], x._shape[2:]
        oph = out_hw[0] - ((h - 1) * stride[0] - 2 * pads[0] + dilation[0] * (kh - 1) + 1)
        opw = out_hw[1] - ((w - 1) * stride[1] - 2 * pads[2] + dilation[1] * (kw - 1) + 1)
        geom = (stride, (pads[0], pads[2]), (oph, opw), dilation)
        if _state.enabled:  # create_graph: the core's differentiable form
            dx, dw = _recorded_vjps(lambda a, b: _conv_transpose2d_cols(a, b, None, 1, *geom),
                                    x, weight, g, need_x, need_w)
        elif need_x or need_w:
            conv, _, weight_grad = _conv2d_kernels(x, weight, bias)
            if g._dtype is not x._dtype:
                g = g.to(x._dtype)
            n, oc = x._shape[0], weight._shape[1]
            weight_grad_x = _weight_grad_x(x)
            if weight_grad_x is not None:  # (g's im2col formed by the weight's gradient)
                if need_x:
                    dx = empty(x._shape, x._dtype, x._device)
                    conv(dx._h, None, view_of(g), view_of(weight), None, stride, pads, dilation)
                if need_w:
                    dw = empty(weight._shape, weight._dtype, weight._device)
                    weight_grad_x(dw._h, view_of(x), view_of(g), stride, pads, dilation)
                if need_b:
                    db = g.sum((0, 2, 3))
                return dx, dw, db, None, None, None, None
            dxt = empty(x._shape, x._dtype, x._device)
            cols = empty((oc * kh * kw, n * h * w), x._dtype, x._device)
            conv(dxt._h, cols._h, view_of(g), view_of(weight), None, stride, pads, dilation)
            dx = dxt if need_x else None
            if need_w:
                dw = empty(weight._shape, weight._dtype, weight._device)
                weight_grad(dw._h, view_of(x), view_of(cols))
        if need_b:
            db = g.sum((0, 2, 3))
        return dx, dw, db, None, None, None, None


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """1-D transposed convolution: ``conv_transpose2d`` of the height-1 view.
    input (N, C_in, L) or (C_in, L); weight (C_in, C_out/groups, kW)."""
    fn = "conv_transpose1d"
    x, unbatched, _ = _conv_operands(fn, input, weight, None,  # groups: conv_transpose2d's
                                     "in_channels, out_channels/groups, kW")
    s = _single(stride, "stride", fn)
    p = _single(padding, "padding", fn)
    op = _single(output_padding, "output_padding", fn)
    d = _single(dilation, "dilation", fn)
    out = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (0, op),
                           groups, (1, d)).squeeze(2)
    return out.squeeze(0) if unbatched else out
