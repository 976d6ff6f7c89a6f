"""``rtxcore.nn.functional``: PyTorch's ``torch.nn.functional``, with its signatures
and semantics.

Everything here is a composition of public tensor ops, so it differentiates
through their backward rules and runs on every backend, including one with only
the primitive kernels. Two pieces have a hand-written backward (an
``autograd.Function`` whose backward is itself written in public ops, so it
differentiates again): the sliding windows under ``conv2d`` / the pools /
``unfold`` (im2col; its backward, col2im, is ``kh * kw`` strided adds instead
of a scatter), and ``binary_cross_entropy`` (PyTorch's gradient, finite at
inputs of exactly 0 and 1). ``embedding`` and constant ``pad`` also carry small
Functions so their backward is one scatter / one slice; ``max_pool2d`` over
non-overlapping tiles is one node whose backward puts each gradient at its
index. ``conv2d`` on small images is a matmul with the convolution's dense
matrix (recorded ops), elsewhere im2col and one matmul.

    import rtxcore.nn.functional as F
    loss = F.cross_entropy(F.linear(x, w, b), target)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtype as D
from ..ops.linalg import linear as _linear
from ..autograd.function import Function
from ..autograd.grad_mode import _state, enable_grad, no_grad
from ..ops import elementwise as E
from ..ops import reduction as R
from ..ops.creation import arange, full, rand_like, tensor, zeros
from ..ops.checks import check_range, deferred
from ..ops.core import empty, own_kernel, view_of
from ..ops.core import kernel as _kernel
from ..ops.linalg import matmul
from ..amp.autocast_mode import autocast_inputs, regions as _autocast_regions
from ..tensor import Tensor

__all__ = [
    "linear", "bilinear", "conv2d", "unfold", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
    "relu", "relu_", "relu6", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh", "softplus",
    "logsigmoid", "hardtanh", "softmax", "softmin", "log_softmax", "dropout", "layer_norm",
    "batch_norm", "normalize", "embedding", "one_hot", "pad", "scaled_dot_product_attention",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
]


# -- argument helpers ---------------------------------------------------------------------


def _check_tensor(fn: str, name: str, v: Any) -> None:
    if not isinstance(v, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be a Tensor, not {type(v).__name__}")


def _pair(v: Any, name: str, fn: str) -> tuple[int, int]:
    if isinstance(v, bool):
        raise TypeError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    try:
        t = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}") from None
    if len(t) == 1:
        return t[0], t[0]
    if len(t) != 2:
        raise ValueError(f"{fn}(): {name} must be an int or a pair of ints, got {v!r}")
    return t


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t._shape)


_REDUCTIONS = ("mean", "sum", "none")


def _reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """The reduction string, from the legacy ``size_average``/``reduce`` pair when given."""
    if size_average is not None or reduce is not None:
        sa = True if size_average is None else bool(size_average)
        rd = True if reduce is None else bool(reduce)
        reduction = "mean" if sa and rd else ("sum" if rd else "none")
        warnings.warn(f"size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", stacklevel=3)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction "
                         f"(expected one of 'mean', 'sum', 'none')")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_target_size(input: Tensor, target: Tensor) -> None:
    if target._shape != input._shape:
        warnings.warn(
            f"Using a target size ({_shape(target)}) that is different to the input size "
            f"({_shape(input)}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.", stacklevel=3)


def _float_min(dt: D.DType) -> Any:
    if dt.kind == "f":
        return -math.inf
    if dt is D.bool_:
        return False
    return int(np.iinfo(dt.numpy).min)


# -- linear -------------------------------------------------------------------------------


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: one matmul and one add, recorded as one node
    (``rtxcore.ops.linalg.linear``) whose backward gives ``weight`` a contiguous
    gradient."""
    if _autocast_regions[0]:  # autocast: computed in float16
        input, weight, bias = autocast_inputs("linear", input, weight, bias)
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        _check_tensor("linear", "input", input)
        _check_tensor("linear", "weight", weight)
    ishape = input._shape
    wshape = weight._shape
    if len(wshape) == 1:  # PyTorch accepts a vector weight: input @ weight
        if not ishape or ishape[-1] != wshape[0]:
            raise RuntimeError(
                f"linear: input has {ishape[-1] if ishape else 0} features (shape "
                f"{tuple(ishape)}) but weight expects {wshape[0]} (weight shape {tuple(wshape)})")
        out = matmul(input, weight)
        if bias is not None:
            _check_tensor("linear", "bias", bias)
            out = out + bias
        return out
    if len(wshape) != 2:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{tuple(wshape)}")
    k = wshape[1]
    if not ishape or ishape[-1] != k:
        raise RuntimeError(
            f"linear: input has {ishape[-1] if ishape else 0} features (shape "
            f"{tuple(ishape)}) but weight expects {k} (weight shape {tuple(wshape)})")
    if bias is not None:
        _check_tensor("linear", "bias", bias)
        bshape = bias._shape
        if bshape and bshape[-1] not in (1, wshape[0]):
            raise RuntimeError(
                f"linear: bias of shape {tuple(bshape)} does not match the {wshape[0]} output "
                f"features (weight shape {tuple(wshape)})")
    if len(ishape) <= 2:
        return _linear(input, weight, bias)
    # (..., k): one 2-D product over all leading dims
    return _linear(input.reshape(-1, k), weight, bias).reshape(ishape[:-1] + (wshape[0],))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = input1 @ weight[o] @ input2 + bias[o]`` (weight (out, in1, in2))."""
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear: weight must be 3-D (out, in1, in2), got shape {_shape(weight)}")
    o, i1, i2 = weight._shape
    if input1._shape[-1] != i1 or input2._shape[-1] != i2:
        raise RuntimeError(
            f"bilinear: input1 has {input1._shape[-1]} features and input2 {input2._shape[-1]} "
            f"(shapes {_shape(input1)} and {_shape(input2)}) but weight of shape "
            f"{_shape(weight)} expects {i1} and {i2}")
    lead = input1._shape[:-1]
    a = input1.reshape(-1, i1)
    b = input2.reshape(-1, i2)
    t = matmul(a, weight.permute(1, 0, 2).reshape(i1, o * i2)).reshape(-1, o, i2)
    out = (t * b.unsqueeze(1)).sum(-1).reshape(lead + (o,))
    return out + bias if bias is not None else out


# -- sliding windows (im2col) ---------------------------------------------------------------


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
    from ..autograd.engine import grad

    z = zeros(xshape, dtype=g._dtype, device=g._device).requires_grad_()
    with enable_grad():
        pt, pb, pl, pr = pads
        zp = pad(z, (pl, pr, pt, pb)) if any(pads) else z
        win = _window_views(zp, kernel, stride, dilation)
        out = _as_cols(win) if cols else win
    (dz,) = grad(out, z, g, create_graph=True)
    return dz


def _out_size(size: int, k: int, s: int, p_lo: int, p_hi: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (``pooling_output_shape``)."""
    eff = d * (k - 1) + 1
    num = size + p_lo + p_hi - eff + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p_lo:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _as_4d(fn: str, input: Tensor) -> tuple[Tensor, bool]:
    _check_tensor(fn, "input", input)
    if input.ndim == 4:
        return input, False
    if input.ndim == 3:  # unbatched (C, H, W)
        return input.unsqueeze(0), True
    raise RuntimeError(f"{fn}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                       f"{_shape(input)}")


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
    x, unbatched = _as_4d(fn, input)
    _check_tensor(fn, "weight", weight)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"conv2d: non-positive groups is not supported, got groups={groups!r}")
    if weight.ndim != 4:
        raise RuntimeError(f"conv2d: weight must be 4-D (out_channels, in_channels, kH, kW), got "
                           f"weight of shape {_shape(weight)} (input shape {_shape(input)})")
    n, c, h, w = x._shape
    oc, wc, kh, kw = weight._shape
    if oc % groups:
        raise RuntimeError(f"conv2d: Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size {list(weight._shape)}")
    if wc * groups != c:
        raise RuntimeError(
            f"conv2d: input has {c} channels (input shape {_shape(input)}) but weight expects "
            f"{wc * groups} (weight shape {_shape(weight)}); groups={groups}")
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
    if groups == 1 and h * w <= _DENSE_CONV_RATIO * kh * kw and \
            c * h * w * oc * oh * ow <= _DENSE_CONV_MAX:
        out = _conv2d_dense(x, weight, bias, *geom)
    elif groups == 1 and _conv2d_kernels(x, weight, bias) is not None:
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
        cols = empty((c * kh * kw, n * oh * ow), dt, dev)
        kern = _conv2d_kernels(x, weight, bias)[0]
        kern(out._h, cols._h, view_of(x), view_of(weight),
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
            from ..autograd.engine import grad

            with enable_grad():
                if need_x:
                    z = zeros(x._shape, dtype=x._dtype, device=x._device).requires_grad_()
                    out = _conv2d_cols(z, weight, None, 1, stride, pads, dilation, out_hw)
                    (dx,) = grad(out, z, g, create_graph=True)
                if need_w:
                    z = zeros(weight._shape, dtype=weight._dtype,
                              device=weight._device).requires_grad_()
                    out = _conv2d_cols(x, z, None, 1, stride, pads, dilation, out_hw)
                    (dw,) = grad(out, z, g, create_graph=True)
        else:
            _, input_grad, weight_grad = _conv2d_kernels(x, weight, bias)
            if g._dtype is not x._dtype:
                g = g.to(x._dtype)
            if need_x:
                dx = empty(x._shape, x._dtype, x._device)
                input_grad(dx._h, view_of(g), view_of(weight), stride, pads, dilation)
            if need_w:
                dw = empty(weight._shape, weight._dtype, weight._device)
                weight_grad(dw._h, view_of(g), view_of(ctx.cols))
        if need_b:
            db = g.sum((0, 2, 3))
        return dx, dw, db, None, None, None, None


# conv2d on small images as one matmul with the convolution's dense matrix: for
# at most this many matrix elements (C*H*W x OC*OH*OW)
_DENSE_CONV_MAX = 1 << 18
# ... and where it costs at most this many times im2col's multiply-adds (H*W vs kh*kw)
_DENSE_CONV_RATIO = 3
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


def _pool_args(fn: str, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any) -> tuple[tuple[int, int], ...]:
    k = _pair(kernel_size, "kernel_size", fn)
    no_stride = stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
    s = k if no_stride else _pair(stride, "stride", fn)
    p = _pair(padding, "padding", fn)
    d = _pair(dilation, "dilation", fn)
    if min(k) <= 0 or min(s) <= 0 or min(d) <= 0:
        raise RuntimeError(f"{fn}: kernel_size, stride and dilation must be positive, got "
                           f"kernel_size={k}, stride={s}, dilation={d}")
    for kk, pp, dd in zip(k, p, d):
        if pp < 0 or pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"{fn}: pad should be at most half of effective kernel size, but "
                               f"got pad={pp}, kernel_size={kk} and dilation={dd}")
    return k, s, p, d


def _pool_geometry(fn: str, x: Tensor, input: Tensor, k: Any, s: Any, p: Any, d: Any,
                   ceil_mode: bool) -> tuple[int, int, tuple[int, int, int, int]]:
    _, c, h, w = x._shape
    oh = _out_size(h, k[0], s[0], p[0], p[0], d[0], ceil_mode)
    ow = _out_size(w, k[1], s[1], p[1], p[1], d[1], ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{fn}: given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{oh}x{ow}). Output size is too small (input shape {_shape(input)})")
    # ceil_mode: extra bottom/right padding so that the last window exists
    eb = max(0, (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1 - (h + 2 * p[0]))
    er = max(0, (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - (w + 2 * p[1]))
    return oh, ow, (p[0], p[0] + eb, p[1], p[1] + er)


_tile_tables: dict[tuple[Any, ...], Tensor] = {}


def _tile_table(kind: str, geom: tuple[int, int, int, int, int], dev: Any) -> Tensor:
    """Constant int64 tables of the tiled max pool (cached per geometry and device):
    ``corner`` (OH, OW), the flat index into H*W of each tile's first element;
    ``pos`` (OH, kh, OW, kw), the flat index of every element of the tiles."""
    key = (kind, geom, dev)
    t = _tile_tables.get(key)
    if t is None:
        oh, ow, kh, kw, w = geom
        if kind == "corner":
            a = np.add.outer(np.arange(oh) * (kh * w), np.arange(ow) * kw)
        else:
            a = np.arange(oh * kh).reshape(oh, kh, 1, 1) * w + np.arange(ow * kw).reshape(ow, kw)
        t = tensor(a.astype(np.int64), device=dev)
        if len(_tile_tables) >= 64:
            _tile_tables.clear()
        _tile_tables[key] = t
    return t


class _MaxPoolTiled(Function):
    """max_pool2d with stride == kernel, no padding or dilation (the common case)
    as one node, returning the values and PyTorch's indices (flat into H*W).

    The tiles do not overlap, so the forward is a reshape to (N, C, OH, kh, OW,
    kw), one copy that makes each tile a row and one max over the rows (or the
    backend's ``max_pool2d_tiled``); the backward puts each gradient at its
    index (ties to the first maximum, as PyTorch): the backend's
    ``max_pool2d_tiled_backward``, else one multiply by a one-hot mask in the
    input's layout, which is also what a double backward differentiates."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, kernel: tuple[int, int], out_hw: tuple[int, int]) -> Any:
        (kh, kw), (oh, ow) = kernel, out_hw
        n, c, h, w = x._shape
        dev = x._device
        kern = own_kernel(dev, "max_pool2d_tiled", x._dtype)
        if kern is not None:
            values = empty((n, c, oh, ow), x._dtype, dev)
            indices = empty((n, c, oh, ow), D.int64, dev)
            kern(values._h, indices._h, view_of(x), kh, kw)
        else:
            xs = x if (oh * kh, ow * kw) == (h, w) else x[:, :, :oh * kh, :ow * kw]
            rows = xs.reshape(n, c, oh, kh, ow, kw).permute(0, 1, 2, 4, 3, 5).reshape(
                n, c, oh, ow, kh * kw)
            values, idx = rows.max(dim=-1)
            # tile offset p = i*kw + j -> i*w + j: p plus (w - kw) per full row of the tile
            indices = idx + _tile_table("corner", (oh, ow, kh, kw, w), dev)
            for i in range(1, kh):
                indices = indices + (idx >= i * kw).to(D.int64) * (w - kw)
        ctx.mark_non_differentiable(indices)
        ctx.indices = indices
        return values, indices

    @staticmethod
    def backward(ctx: Any, g: Tensor, _gi: Any) -> Any:
        n, c, h, w = ctx._in[0][0]
        (kh, kw), (oh, ow) = ctx.args[1], ctx.args[2]
        indices = ctx.indices
        dev = g._device
        if not _state.enabled:
            kern = own_kernel(dev, "max_pool2d_tiled_backward", g._dtype)
            if kern is not None:
                dx = empty((n, c, h, w), g._dtype, dev)
                kern(dx._h, view_of(g), view_of(indices))
                return dx, None, None
        # (N, C, OH, kh, OW, kw): True where the flat position is the tile's index
        pos = _tile_table("pos", (oh, ow, kh, kw, w), dev)
        mask = E.eq(indices.reshape(n, c, oh, 1, ow, 1), pos)
        dx = (g.reshape(n, c, oh, 1, ow, 1) * mask).reshape(n, c, oh * kh, ow * kw)
        if (oh * kh, ow * kw) != (h, w):
            dx = pad(dx, (0, w - ow * kw, 0, h - oh * kh))
        return dx, None, None


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max over sliding windows (padding counts as -inf). With ``return_indices``,
    also the flat index (into H*W) of each maximum. The gradient goes to the
    first maximum of each window, as PyTorch's."""
    fn = "max_pool2d"
    x, unbatched = _as_4d(fn, input)
    k, s, p, d = _pool_args(fn, kernel_size, stride, padding, dilation)
    oh, ow, pads = _pool_geometry(fn, x, input, k, s, p, d, ceil_mode)
    if s == k and d == (1, 1) and not any(pads):
        values, indices = _MaxPoolTiled.apply(x, k, (oh, ow))
        if not return_indices:
            return values.squeeze(0) if unbatched else values
        return (values.squeeze(0), indices.squeeze(0)) if unbatched else (values, indices)
    n, c, _, w = x._shape
    win = _Windows.apply(x, k, s, pads, d, _float_min(x._dtype), False)
    values, idx = win.reshape(n, c, oh, ow, k[0] * k[1]).max(dim=-1)
    if not return_indices:
        return values.squeeze(0) if unbatched else values
    r = E.floor_divide(idx, k[1])
    q = E.remainder(idx, k[1])
    dev = x._device
    rows = (arange(oh, device=dev) * s[0] - pads[0]).reshape(oh, 1) + r * d[0]
    cols = arange(ow, device=dev) * s[1] - pads[2] + q * d[1]
    indices = rows * w + cols
    if unbatched:
        return values.squeeze(0), indices.squeeze(0)
    return values, indices


def _avg_divisor(size: int, k: int, s: int, p: int, out: int,
                 count_include_pad: bool) -> np.ndarray:
    """Per output position along one dim: how many elements its window averages (PyTorch's rule)."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)  # padding counts, the ceil_mode overhang doesn't
    if count_include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Mean over sliding windows (zero padding; ``count_include_pad`` as PyTorch)."""
    fn = "avg_pool2d"
    x, unbatched = _as_4d(fn, input)
    k, s, p, d = _pool_args(fn, kernel_size, stride, padding, 1)
    oh, ow, pads = _pool_geometry(fn, x, input, k, s, p, d, ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool2d: divisor must be not zero")
    win = _Windows.apply(x, k, s, pads, d, 0, False)
    extra = (pads[1] - pads[0], pads[3] - pads[2])
    if divisor_override is not None:
        out = win.sum(dim=(-2, -1)) / float(divisor_override)
    elif extra == (0, 0) and (count_include_pad or p == (0, 0)):
        out = win.mean(dim=(-2, -1))
    else:
        h, w = x._shape[2:]
        dv = np.outer(_avg_divisor(h, k[0], s[0], p[0], oh, count_include_pad),
                      _avg_divisor(w, k[1], s[1], p[1], ow, count_include_pad))
        out = win.sum(dim=(-2, -1)) / tensor(dv, dtype=x._dtype, device=x._device)
    return out.squeeze(0) if unbatched else out


def _adaptive_matrix(size: int, out: int) -> np.ndarray:
    m = np.zeros((out, size))
    for i in range(out):
        a, b = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, a:b] = 1.0 / (b - a)
    return m


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a fixed output size: bins [floor(i*H/OH), ceil((i+1)*H/OH)),
    as two small averaging matmuls (the bins of rows and of columns are separable)."""
    fn = "adaptive_avg_pool2d"
    x, unbatched = _as_4d(fn, input)
    h, w = x._shape[2:]
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{fn}: output_size must be positive, got {(oh, ow)}")
    if (oh, ow) == (1, 1):
        out = x.mean(dim=(-2, -1), keepdim=True)
    elif h % oh == 0 and w % ow == 0:
        out = avg_pool2d(x, (h // oh, w // ow))
    else:
        dev, dt = x._device, x._dtype
        ah = tensor(_adaptive_matrix(h, oh), dtype=dt, device=dev)
        aw = tensor(_adaptive_matrix(w, ow).T, dtype=dt, device=dev)
        out = matmul(matmul(ah, x), aw)
    return out.squeeze(0) if unbatched else out


# -- activations --------------------------------------------------------------------------


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return input.relu_() if inplace else E.relu(input)


def relu_(input: Tensor) -> Tensor:
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return input.clamp_(min_val, max_val) if inplace else E.clamp(input, min_val, max_val)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    out = E.where(input > 0, input, input * negative_slope)
    return input.copy_(out) if inplace else out


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    # expm1 of min(x, 0): no inf on the branch that isn't taken (its gradient would be nan)
    out = E.where(input > 0, input, E.expm1(E.minimum(input, E.zeros_scalar_like(input))) * alpha)
    return input.copy_(out) if inplace else out


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return E.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    out = E.silu(input)
    return input.copy_(out) if inplace else out


def sigmoid(input: Tensor) -> Tensor:
    return E.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return E.tanh(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return E.softplus(input, beta, threshold)


def _softplus_neg(x: Tensor) -> Tensor:
    """softplus(-x) = log(1 + e**-x), stable for every x, without inf anywhere
    (so no nan in its gradient) and with the right gradient at 0."""
    neg = x < 0
    nabs = E.where(neg, x, -x)  # -|x|, with 0 on the x >= 0 side
    return E.log1p(E.exp(nabs)) - E.where(neg, x, E.zeros_scalar_like(x))


def logsigmoid(input: Tensor) -> Tensor:
    return -_softplus_neg(input)


def _softmax_dim(name: str, ndim: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        input, = autocast_inputs("softmax", input)
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim)
    return R.softmax(input, dim, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        input, = autocast_inputs("softmin", input)
    if dim is None:
        dim = _softmax_dim("softmin", input.ndim)
    return R.softmax(-input, dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    if _autocast_regions[0]:  # autocast: computed in float32
        input, = autocast_inputs("log_softmax", input)
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim)
    return R.log_softmax(input, dim, dtype)


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` (from the default generator) and
    scale the rest by ``1 / (1 - p)``; the input itself when not training."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    q = 1.0 - p
    with no_grad():
        mask = (rand_like(input) < q).to(input._dtype).mul_(1.0 / q)
    return input.mul_(mask) if inplace else input * mask


# -- normalization ------------------------------------------------------------------------


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dims (biased variance)."""
    if _autocast_regions[0]:  # autocast: computed in float32
        input, weight, bias = autocast_inputs("layer_norm", input, weight, bias)
    _check_tensor("layer_norm", "input", input)
    ns = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(
        int(v) for v in normalized_shape)
    k = len(ns)
    if k == 0 or input.ndim < k or tuple(input._shape[input.ndim - k:]) != ns:
        raise RuntimeError(
            f"layer_norm: given normalized_shape={list(ns)}, expected input with shape "
            f"[*, {', '.join(map(str, ns))}], but got input of size {list(input._shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != ns:
            raise RuntimeError(f"layer_norm: expected {name} of shape {list(ns)}, got "
                               f"{list(t._shape)}")
    if input._dtype.kind == "f" and all(t is None or t._dtype is input._dtype
                                        for t in (weight, bias)):
        return _LayerNorm.apply(input, weight, bias, k, float(eps))
    dims = tuple(range(-k, 0))
    mean = input.mean(dim=dims, keepdim=True)
    xc = input - mean
    var = (xc * xc).mean(dim=dims, keepdim=True)
    y = xc / (var + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


class _LayerNorm(Function):
    """layer_norm over the last ``k`` dims as one node: the forward is the backend's
    ``layer_norm`` kernel where it has one (else mean, variance, scale), the
    backward the closed form ``rstd * (gw - mean(gw) - xhat * mean(gw * xhat))``
    instead of the backward of each step: the backend's ``layer_norm_backward``
    where it has one, else that formula in the core's ops. Under ``create_graph``
    always the core's ops, with the statistics recomputed as recorded ops, so the
    gradient differentiates again."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, weight: Tensor | None, bias: Tensor | None, k: int,
                eps: float) -> Tensor:
        shape = input._shape
        n = math.prod(shape[len(shape) - k:])
        x2 = input.reshape(-1, n)
        w = None if weight is None else weight.reshape(n)
        b = None if bias is None else bias.reshape(n)
        dev, dt = input._device, input._dtype
        kern = own_kernel(dev, "layer_norm", dt)
        if kern is not None and n:
            x2 = x2.contiguous()
            m = x2._shape[0]
            out, mean, rstd = empty((m, n), dt, dev), empty((m, 1), dt, dev), empty((m, 1), dt, dev)
            kern(out._h, mean._h, rstd._h, view_of(x2), None if w is None else view_of(w),
                 None if b is None else view_of(b), eps)
        else:
            mean = x2.mean(1, keepdim=True)
            xc = x2 - mean
            rstd = E.rsqrt((xc * xc).mean(1, keepdim=True) + eps)
            out = xc * rstd
            if w is not None:
                out = out * w
            if b is not None:
                out = out + b
        ctx.save_for_backward(input, weight, mean, rstd)
        return out.reshape(shape)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        input, weight, mean, rstd = ctx.saved_tensors
        k, eps = ctx.args[3], ctx.args[4]
        shape = input._shape
        n = math.prod(shape[len(shape) - k:])
        x2 = input.reshape(-1, n)
        g2 = g.reshape(-1, n)
        needs = ctx.needs_input_grad
        want_w = weight is not None and needs[1]
        want_b = ctx._in[2] is not None and needs[2]
        if not _state.enabled and g2.numel() and g._dtype is input._dtype:
            # (create_graph: the composite below)
            kern = own_kernel(input._device, "layer_norm_backward", input._dtype)
            if kern is not None:
                x2 = x2.contiguous()
                m = x2._shape[0]
                out = empty((m + 2 if want_w or want_b else m, n), input._dtype, input._device)
                kern(out._h, view_of(g2), view_of(x2), view_of(mean), view_of(rstd),
                     None if weight is None else view_of(weight.reshape(n)))
                # (the parameters' rows copied out: a view would keep all of out alive)
                dw = out[m].clone().reshape(ctx._in[1][0]) if want_w else None
                db = out[m + 1].clone().reshape(ctx._in[2][0]) if want_b else None
                return out[:m].reshape(shape), dw, db, None, None
        if _state.enabled:  # create_graph: the statistics as recorded ops of the input
            mean = x2.mean(1, keepdim=True)
            xc = x2 - mean
            rstd = E.rsqrt((xc * xc).mean(1, keepdim=True) + eps)
            xhat = xc * rstd
        else:
            xhat = (x2 - mean) * rstd
        gw = g2 if weight is None else g2 * weight.reshape(n)
        dx = (gw - gw.mean(1, keepdim=True) - xhat * (gw * xhat).mean(1, keepdim=True)) * rstd
        dw = (g2 * xhat).sum(0).reshape(ctx._in[1][0]) if want_w else None
        db = g2.sum(0).reshape(ctx._in[2][0]) if want_b else None
        return dx.reshape(shape), dw, db, None, None


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dim 1) over every other dim.

    Training: the batch's mean and biased variance; the running stats (when
    given) move toward the batch mean and the *unbiased* variance by
    ``momentum``, in place. Evaluation: the running stats.
    """
    _check_tensor("batch_norm", "input", input)
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C, ...) with at least 2 dims, "
                         f"got shape {_shape(input)}")
    c = input._shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"batch_norm: {name} should contain {c} elements (the channels of "
                               f"input of shape {_shape(input)}), not {t.numel()}")
    bshape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {_shape(input)}")
        dims = (0,) + tuple(range(2, input.ndim))
        mean = input.mean(dim=dims, keepdim=True)
        xc = input - mean
        var = (xc * xc).mean(dim=dims, keepdim=True)
        std = (var + eps).sqrt()
        scale = weight.reshape(bshape) / std if weight is not None else std.reciprocal()
        y = xc * scale
        if bias is not None:
            y = y + bias.reshape(bshape)
        if running_mean is not None or running_var is not None:
            if momentum is None:
                raise ValueError("batch_norm: momentum=None (a cumulative average) needs the "
                                 "batch count: pass the factor as momentum (BatchNorm modules do)")
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1.0 - momentum).add_(mean.reshape(c) * momentum)
                if running_var is not None:
                    running_var.mul_(1.0 - momentum).add_(
                        var.reshape(c) * (momentum * count / (count - 1)))
        return y
    if running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                           "evaluation mode (training=False)")
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * scale.reshape(bshape) + shift.reshape(bshape)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    res = input / R.norm(input, p, dim, keepdim=True).clamp(min=eps)
    if out is not None:
        out.copy_(res)
        return out
    return res


# -- embedding, one_hot, pad --------------------------------------------------------------


def _index_bounds(t: Tensor) -> tuple[int, int]:
    """The smallest and largest of a non-empty integer tensor, read to the host
    once (where ``amin().item()`` and ``amax().item()`` would sync twice)."""
    arr = _kernel(t._device, "to_host")(view_of(t))
    return int(arr.min()), int(arr.max())


class _Embedding(Function):
    """``weight[input]``; backward one scatter-add of rows (none into ``padding_idx``)."""

    @staticmethod
    def forward(ctx: Any, weight: Tensor, input: Tensor, padding_idx: int | None) -> Tensor:
        if weight.ndim != 2 or input._device is not weight._device or not input.numel():
            ctx.idx = input
            return weight[input]  # indexing's own checks and errors
        idx = input if input._dtype is D.int64 else input.to(D.int64)
        num = weight._shape[0]
        bounds = check_range(idx, -num, num, lambda bad: IndexError(
            f"index {bad} is out of bounds for dimension 0 with size {num}"))
        if bounds is None or bounds[0] < 0:  # negative indices count from the end, as in
            idx = E.remainder(idx, num)      # weight[input] (None: not read, on the device)
        ctx.idx = idx
        # the rows by the index kernel: the checks above are all weight[input] needs
        out = empty(idx._shape + (weight._shape[1],), weight._dtype, weight._device)
        _kernel(weight._device, "index")(out._h, view_of(weight), (view_of(idx),))
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        weight_shape = ctx._in[0][0]
        padding_idx = ctx.args[2]
        d = weight_shape[1]
        idx = ctx.idx.reshape(-1, 1).to(D.int64)
        g2 = g.reshape(-1, d)
        dw = zeros(weight_shape, dtype=g._dtype, device=g._device)
        if _state.enabled:  # create_graph: recorded, so it differentiates again
            if padding_idx is not None:
                g2 = E.where(idx == padding_idx, E.zeros_scalar_like(g2), g2)
            # in place into the fresh zeros (scatter_add would copy them first)
            return dw.scatter_add_(0, idx.expand(idx._shape[0], d), g2), None, None
        # forward checked the indices: the kernel straight into the fresh zeros
        _kernel(g._device, "scatter_add")(view_of(dw), 0, view_of(idx.expand(idx._shape[0], d)),
                                          view_of(g2))
        if padding_idx is not None:
            dw[padding_idx].zero_()
        return dw, None, None


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at the indices ``input``; ``padding_idx``'s row gets no gradient."""
    _check_tensor("embedding", "input", input)
    _check_tensor("embedding", "weight", weight)
    if input._dtype.kind not in "iu":
        raise RuntimeError(f"embedding: expected input of integer indices (int64 or int32), got "
                           f"{input._dtype.name}")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
                           f"shape {_shape(weight)}")
    num = weight._shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings "
                             f"({num})")
        padding_idx = padding_idx % num
    if scale_grad_by_freq:
        raise NotImplementedError("embedding: scale_grad_by_freq=True is not supported")
    if sparse:
        raise NotImplementedError("embedding: sparse=True is not supported (gradients are dense)")
    if max_norm is not None:
        _embedding_renorm(weight, input, max_norm, norm_type)
    return _Embedding.apply(weight, input, padding_idx)


def _embedding_renorm(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescale, in place, the referenced rows whose norm exceeds ``max_norm`` (PyTorch's
    ``embedding_renorm_``)."""
    with no_grad():
        idx = input.reshape(-1)
        rows = weight[idx]
        norms = R.norm(rows, norm_type, -1, keepdim=True)
        scale = E.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[idx] = rows * scale


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """(..., ) int64 class indices -> (..., num_classes) int64 one-hot."""
    _check_tensor("one_hot", "tensor", tensor)
    if tensor._dtype is not D.int64:
        raise RuntimeError(f"one_hot is only applicable to index tensor of type int64 (LongTensor), "
                           f"got {tensor._dtype.name}")
    if tensor.numel():
        lo, hi = int(tensor.amin().item()), int(tensor.amax().item())
        if lo < 0:
            raise RuntimeError(f"one_hot: class values must be non-negative (got {lo}).")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise RuntimeError(f"one_hot: class values must be smaller than num_classes "
                               f"({num_classes}), got {hi}.")
    elif num_classes == -1:
        raise RuntimeError("one_hot: can not infer total number of classes from empty tensor.")
    classes = arange(num_classes, device=tensor._device)
    return (tensor.unsqueeze(-1) == classes).to(D.int64)


class _ConstantPad(Function):
    """A bigger tensor of ``value`` with ``x`` inside at ``key``; backward: the slice."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, shape: tuple[int, ...], key: tuple[slice, ...],
                value: Any) -> Tensor:
        out = full(shape, value, dtype=x._dtype, device=x._device)
        out[key] = x
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        return g[ctx.args[2]], None, None, None


def _pad_index(size: int, lo: int, hi: int, mode: str) -> np.ndarray:
    i = np.arange(-lo, size + hi)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    if mode == "circular":
        return np.mod(i, size)
    # reflect: mirror without repeating the edge
    period = 2 * (size - 1)
    j = np.mod(i, period) if period else np.zeros_like(i)
    return np.where(j >= size, period - j, j)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dims.

    ``pad = (left, right, top, bottom, ...)`` starts from the last dim.
    Modes: ``'constant'`` (``value``, default 0), ``'reflect'``, ``'replicate'``,
    ``'circular'``.
    """
    _check_tensor("pad", "input", input)
    pad = tuple(int(v) for v in pad)
    if len(pad) % 2:
        raise RuntimeError(f"pad: padding length must be divisible by 2, got {len(pad)} ({pad})")
    nd = len(pad) // 2
    if nd > input.ndim:
        raise RuntimeError(f"pad: padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of dimension "
                           f"{input.ndim}")
    ndim = input.ndim
    amounts = {ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(nd)}
    if mode == "constant":
        x = input
        # crop first (negative amounts): views
        for d, (lo, hi) in amounts.items():
            if lo < 0 or hi < 0:
                size = x._shape[d]
                start, stop = max(0, -lo), size - max(0, -hi)
                if stop < start:
                    raise RuntimeError(f"pad: the input size {size} at dimension {d} is too small "
                                       f"for the negative padding {(lo, hi)}")
                x = x.narrow(d, start, stop - start)
        shape = list(x._shape)
        key = [slice(None)] * ndim
        for d, (lo, hi) in amounts.items():
            lo, hi = max(0, lo), max(0, hi)
            key[d] = slice(lo, lo + shape[d])
            shape[d] += lo + hi
        if tuple(shape) == tuple(x._shape):
            return x.clone() if x is input else x
        fill = 0 if value is None else value
        return _ConstantPad.apply(x, tuple(shape), tuple(key), fill)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use 'constant', "
                                  "'reflect', 'replicate' or 'circular'")
    if value is not None and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    out = input
    for d, (lo, hi) in amounts.items():
        size = out._shape[d]
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"pad: padding size should be less than the corresponding input "
                               f"dimension, but got padding {(lo, hi)} at dimension {d} of input "
                               f"{list(input._shape)}")
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError(f"pad: padding value causes wrapping around more than once "
                               f"(padding {(lo, hi)} at dimension {d} of size {size})")
        if (lo, hi) == (0, 0):
            continue
        if lo < 0 or hi < 0:
            raise RuntimeError(f"pad: negative padding is only supported in 'constant' mode "
                               f"(got {(lo, hi)} with mode {mode!r})")
        idx = tensor(_pad_index(size, lo, hi, mode), dtype=D.int64, device=input._device)
        out = out.index_select(d, idx)
    return out if out is not input else input.clone()


# -- attention ----------------------------------------------------------------------------


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v``; a bool mask keeps where True."""
    if query._shape[-1] != key._shape[-1] or key._shape[-2] != value._shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: incompatible shapes query "
                           f"{_shape(query)}, key {_shape(key)}, value {_shape(value)}")
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not supported")
    L, S = query._shape[-2], key._shape[-2]
    scale = 1.0 / math.sqrt(query._shape[-1]) if scale is None else scale
    scores = matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("scaled_dot_product_attention: explicit attn_mask should not be set "
                               "when is_causal=True")
        keep = arange(L, device=query._device).reshape(L, 1) >= arange(S, device=query._device)
        scores = scores.masked_fill(keep.logical_not(), -math.inf)
    elif attn_mask is not None:
        if attn_mask._dtype is D.bool_:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
    attn = R.softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return matmul(attn, value)


# -- losses -------------------------------------------------------------------------------


def _weighted_loss(fn: str, loss: Tensor, input: Tensor, weight: Tensor | None,
                   reduction: str, mean_by_weight: bool) -> Tensor:
    if weight is None:
        return _reduce(loss, reduction)
    if weight._shape != input._shape:
        raise ValueError(f"{fn}: weights and input must have the same size (weight "
                         f"{_shape(weight)}, input {_shape(input)})")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    _warn_target_size(input, target)
    d = input - target
    return _weighted_loss("mse_loss", d * d, input, weight, reduction, True)


def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    reduction = _reduction(size_average, reduce, reduction)
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    _warn_target_size(input, target)
    return _weighted_loss("l1_loss", (input - target).abs(), input, weight, reduction, True)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: L1)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target = autocast_inputs("loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta (got {beta}).")
    _warn_target_size(input, target)
    d = input - target
    ad = d.abs()
    if beta == 0.0:
        return _reduce(ad, reduction)
    loss = E.where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    reduction = _reduction(None, None, reduction)
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta (got {delta}).")
    _warn_target_size(input, target)
    d = input - target
    ad = d.abs()
    loss = E.where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)
    return _weighted_loss("huber_loss", loss, input, weight, reduction, False)


def _check_target_batch(input: Tensor, target: Tensor) -> None:
    """(N, C, d1, ...) input against (N, d1, ...) class-index target."""
    if target.ndim >= 1 and input._shape[0] != target._shape[0]:
        raise ValueError(f"Expected input batch_size ({input._shape[0]}) to match target "
                         f"batch_size ({target._shape[0]}) (input shape {_shape(input)}, "
                         f"target shape {_shape(target)}).")
    expected = input._shape[:1] + input._shape[2:]
    if target._shape != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target._shape)} "
                           f"(input shape {_shape(input)})")


def _index_targets(fn: str, input: Tensor, target: Tensor,
                   weight: Tensor | None) -> tuple[Tensor, Tensor, bool, int]:
    """Check (input, class-index target, weight); return them batched (an unbatched
    (C,) input gains N = 1) as (input, int64 target, unbatched, C)."""
    if target._dtype.kind not in "iu":
        raise RuntimeError(f"{fn}: expected target of class indices with dtype int64, but got "
                           f"{target._dtype.name} (for class probabilities, pass a float target "
                           f"of the input's shape {_shape(input)})")
    if input.ndim == 0:
        raise ValueError(f"{fn}: input must have at least 1 dim (C,) or 2 (N, C, ...), got a 0-d tensor")
    unbatched = input.ndim == 1
    if unbatched:
        if target.ndim != 0:
            raise ValueError(f"{fn}: for an unbatched input of shape {_shape(input)} the target must "
                             f"be 0-d, got shape {_shape(target)}")
        input, target = input.unsqueeze(0), target.reshape(1)
    else:
        _check_target_batch(input, target)
    c = input._shape[1]
    if weight is not None and (weight.ndim != 1 or weight._shape[0] != c):
        raise RuntimeError(f"{fn}: weight tensor should be defined either for all {c} classes or no "
                           f"classes but got weight tensor of shape: {list(weight._shape)}")
    if target._dtype is not D.int64:
        target = target.to(D.int64)
    return input, target, unbatched, c


def _select_targets(fn: str, logp: Tensor, target: Tensor, weight: Tensor | None,
                    ignore_index: int, c: int) -> tuple[Tensor, Tensor | None, Tensor]:
    """(idx, wt, picked): ``logp`` (N, C, ...) at the target classes, (N, 1, ...), times
    ``wt``, the targets' weights (0 where ignored); ``wt`` is None when no target is
    ignored and there is no weight (the common case: one gather, no mask)."""
    idx = target.unsqueeze(1)
    if weight is None and not 0 <= ignore_index < c and not deferred(target._device):
        try:
            return idx, None, logp.gather(1, idx)  # gather checks the range too
        except IndexError:
            pass  # ignored targets, or out of range: sorted out below
    valid = target != ignore_index
    safe = E.where(valid, target, 0)
    check_range(safe, 0, c, lambda bad: IndexError(
        f"{fn}: Target {bad} is out of bounds (input has {c} classes; "
        f"ignore_index={ignore_index})."))
    idx = safe.unsqueeze(1)
    if weight is not None:
        wt = E.where(valid, weight[safe], 0.0).to(logp._dtype)
    else:
        wt = valid.to(logp._dtype)
    wt = wt.unsqueeze(1)
    return idx, wt, logp.gather(1, idx) * wt


def _reduce_picked(picked: Tensor, wt: Tensor | None, reduction: str) -> Tensor:
    """The loss from ``picked`` (weighted log-probabilities of the targets): a weighted
    mean divides by the total weight of the non-ignored targets, as PyTorch."""
    if reduction == "none":
        return -picked.squeeze(1)
    s = picked.sum()
    if reduction == "sum":
        return -s
    return s / -(float(picked.numel()) if wt is None else wt.sum())


def _nll(fn: str, logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int,
         reduction: str) -> Tensor:
    logp, target, unbatched, c = _index_targets(fn, logp, target, weight)
    _, wt, picked = _select_targets(fn, logp, target, weight, ignore_index, c)
    out = _reduce_picked(picked, wt, reduction)
    return out.squeeze(0) if unbatched and reduction == "none" else out


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices, ``input`` holding log-probabilities
    (N, C) / (N, C, d1, ...) / (C,); a weighted mean divides by the weights of the
    non-ignored targets."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, weight = autocast_inputs("loss", input, weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("nll_loss", "input", input)
    _check_tensor("nll_loss", "target", target)
    return _nll("nll_loss", input, target, weight, ignore_index, reduction)


class _CrossEntropy(Function):
    """log_softmax + the negative log likelihood of class indices, with the fused
    backward ``(softmax(x) - onehot(target)) * weight * grad``: a few ops instead
    of the backward of each step. Input (N, C, ...), target (N, ...) int64."""

    @staticmethod
    def forward(ctx: Any, input: Tensor, target: Tensor, weight: Tensor | None,
                ignore_index: int, reduction: str, c: int) -> Tensor:
        k = own_kernel(input._device, "log_softmax", input._dtype)
        if k is not None and input._dtype.kind == "f" and input.numel():
            logp = empty(input._shape, input._dtype, input._device)
            k(logp._h, view_of(input), 1)
        else:
            logp = R.log_softmax(input, 1)
        bounds = (_index_bounds(target) if weight is None and not 0 <= ignore_index < c
                  and target.numel() and target._device is logp._device
                  and not deferred(target._device) else (-1, c))
        if 0 <= bounds[0] and bounds[1] < c:
            # no weights, every target a class (none ignored): the gather kernel
            idx, wt = target.unsqueeze(1), None
            picked = empty(idx._shape, logp._dtype, logp._device)
            _kernel(logp._device, "gather")(picked._h, view_of(logp), 1, view_of(idx))
        else:  # ignored targets, weights, or out of range (its error)
            idx, wt, picked = _select_targets("cross_entropy", logp, target, weight, ignore_index,
                                              c)
        if reduction == "none":
            out = -picked.squeeze(1)
            denom = None
        else:
            s = picked.sum()
            if reduction == "mean" and wt is None:
                denom = float(picked.numel())
                out = s.div_(-denom)  # s is fresh: divided in place
            else:
                denom = wt.sum() if reduction == "mean" else None
                out = -s if denom is None else s / -denom
        ctx.save_for_backward(input, logp)
        ctx.bw = (idx, wt, denom)
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        input, logp = ctx.saved_tensors
        idx, wt, denom = ctx.bw
        if ctx.args[4] == "none":
            g = g.unsqueeze(1)
        elif denom is not None:
            g = g / denom
        if wt is not None:
            g = g * wt
        minus = full(idx._shape, -1.0, dtype=logp._dtype, device=logp._device)
        if _state.enabled:
            # create_graph: softmax of the (recorded) input, so this differentiates again
            d = R.softmax(input, 1).scatter_add(1, idx, minus)
            return d * g, None, None, None, None, None
        # forward's gather checked the targets: the kernel in place into the fresh exp
        d = logp.exp()
        _kernel(d._device, "scatter_add")(view_of(d), 1, view_of(idx), view_of(minus))
        return d.mul_(g), None, None, None, None, None


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dim (1, or 0 for an unbatched (C,) input), then
    the negative log likelihood of ``target``: class indices (int64, (N,) or
    (N, d1, ...)) or class probabilities (float, the input's shape)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have at least 1 dim (C,) or 2 (N, C, ...), "
                         "got a 0-d tensor")
    if target._shape == input._shape:  # class probabilities
        if target._dtype.kind != "f":
            raise RuntimeError(f"cross_entropy: expected floating point type for target with class "
                               f"probabilities, got {target._dtype.name}")
        cdim = 0 if input.ndim == 1 else 1
        c = input._shape[cdim]
        return _ce_probs(R.log_softmax(input, cdim), target, weight, reduction, label_smoothing,
                         cdim, c, (c,) + (1,) * (input.ndim - cdim - 1))
    x, t, unbatched, c = _index_targets("cross_entropy", input, target, weight)
    if label_smoothing == 0.0:
        out = _CrossEntropy.apply(x, t, weight, ignore_index, reduction, c)
        return out.squeeze(0) if unbatched and reduction == "none" else out
    # label smoothing, as PyTorch: (1 - eps) * nll + eps / C * (the loss against uniform targets)
    logp = R.log_softmax(x, 1)
    _, wt, picked = _select_targets("cross_entropy", logp, t, weight, ignore_index, c)
    nll = _reduce_picked(picked, wt, reduction)
    if weight is not None:
        smooth = -(logp * weight.reshape((c,) + (1,) * (x.ndim - 2))).sum(1)
    else:
        smooth = -logp.sum(1)
    ignored = t == ignore_index
    smooth = smooth.masked_fill(ignored, 0.0)
    if reduction == "mean":
        if weight is not None:
            tw = E.where(ignored, 0.0, weight[E.where(ignored, 0, t)])
            ret = smooth.sum() / tw.sum()
        else:
            ret = smooth.sum() / ignored.logical_not().sum()
    elif reduction == "sum":
        ret = smooth.sum()
    else:
        ret = smooth
    out = nll * (1.0 - label_smoothing) + ret * (label_smoothing / c)
    return out.squeeze(0) if unbatched and reduction == "none" else out


def _ce_probs(logp: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
              label_smoothing: float, cdim: int, c: int, wshape: tuple[int, ...]) -> Tensor:
    if label_smoothing > 0.0:
        target = target * (1.0 - label_smoothing) + label_smoothing / c
    prod = logp * target
    if weight is not None:
        if weight.ndim != 1 or weight._shape[0] != c:
            raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all {c} "
                               f"classes or no classes but got weight tensor of shape: "
                               f"{list(weight._shape)}")
        prod = prod * weight.reshape(wshape)
    if reduction == "none":
        return -prod.sum(cdim)
    if reduction == "sum":
        return -prod.sum()
    n = logp.numel() // c if c else 0
    return -prod.sum() / n if n else prod.sum() * math.nan


_BCE_EPS = float(np.float32(1e-12))  # PyTorch's EPSILON in the BCE backward, a float


class _BCE(Function):
    """Elementwise binary cross entropy with PyTorch's gradient, which stays finite
    at inputs of exactly 0 and 1: d/dx = (x - t) / max(x (1 - x), 1e-12)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, t: Tensor) -> Tensor:
        ctx.save_for_backward(x, t)
        log_x = x.log().clamp(min=-100.0)
        log_1mx = E.log1p(-x).clamp(min=-100.0)
        return -(log_1mx + t * (log_x - log_1mx))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Any:
        x, t = ctx.saved_tensors
        nx, nt = ctx.needs_input_grad
        gx = gt = None
        if nx:
            gx = g * (x - t) / (x * (1.0 - x)).clamp(min=_BCE_EPS)
        if nt:
            gt = g * (E.log1p(-x).clamp(min=-100.0) - x.log().clamp(min=-100.0))
        return gx, gt


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Tensor:
    """-w (t log x + (1 - t) log(1 - x)), each log clamped at -100, as PyTorch."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight = autocast_inputs("loss", input, target, weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("binary_cross_entropy", "input", input)
    _check_tensor("binary_cross_entropy", "target", target)
    if target._shape != input._shape:
        raise ValueError(f"binary_cross_entropy: using a target size ({_shape(target)}) that is "
                         f"different to the input size ({_shape(input)}) is deprecated. Please "
                         "ensure they have the same size.")
    if input.numel():
        lo, hi = float(input.amin().item()), float(input.amax().item())
        if not (lo >= 0.0 and hi <= 1.0):
            raise RuntimeError(f"binary_cross_entropy: all elements of input should be between 0 "
                               f"and 1 (got values in [{lo}, {hi}]); for logits use "
                               "binary_cross_entropy_with_logits")
    loss = _BCE.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: Any = None, reduce: Any = None,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """BCE of sigmoid(input), computed stably from the logits:
    (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target, weight, pos_weight = autocast_inputs("loss", input, target, weight, pos_weight)
    reduction = _reduction(size_average, reduce, reduction)
    _check_tensor("binary_cross_entropy_with_logits", "input", input)
    _check_tensor("binary_cross_entropy_with_logits", "target", target)
    if target._shape != input._shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target size ({_shape(target)}) must be "
                         f"the same as input size ({_shape(input)})")
    sp = _softplus_neg(input)
    if pos_weight is not None:
        sp = sp * ((pos_weight - 1.0) * target + 1.0)
    loss = (1.0 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Pointwise KL divergence ``target * (log target - input)`` (``input`` in log space)."""
    if _autocast_regions[0]:  # autocast: losses in float32
        input, target = autocast_inputs("loss", input, target)
    if reduction == "batchmean":
        red = "sum"
    else:
        red = _reduction(size_average, reduce, reduction)
        if red == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                          "support size.'batchmean' divides only by the batch size, and aligns with "
                          "the KL div math definition.'mean' will be changed to behave the same as "
                          "'batchmean' in the next major release.", stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        pos = target > 0
        safe = E.where(pos, target, 1.0)
        loss = E.where(pos, target * (safe.log() - input), 0.0)
    if reduction == "batchmean":
        n = input._shape[0] if input.ndim else 1
        return loss.sum() / n
    return _reduce(loss, red)


# -- conv1d / conv_transpose2d, more activations, group / instance norm, interpolate, ... ----
# (in their own module, which builds on the functions above)

from ._functional_more import *  # noqa: E402,F401,F403
from ._functional_more import __all__ as _more_all  # noqa: E402

__all__ += _more_all

from ..ops.more import cosine_similarity, pairwise_distance  # noqa: E402

__all__ += ["cosine_similarity", "pairwise_distance"]
