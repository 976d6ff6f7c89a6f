"""More of ``torch.nn.functional``: 1-D and transposed convolution, the remaining
activations, channel dropout, group / instance normalisation, pixel shuffle,
interpolation and the 1-D / adaptive pools.

Like the rest of ``rtxcore.nn.functional`` (which re-exports all of these),
each is a composition of public tensor ops, so it differentiates through their
backward rules and runs on every backend. The 1-D ops are their 2-D
counterparts on a height-1 view. ``conv_transpose2d`` is one matmul and a
col2im, a small Function whose backward is ``conv2d``'s im2col (public ops
again). ``interpolate`` gathers rows and columns at PyTorch's source indices
(and mixes two of them with PyTorch's weights for the linear modes).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .. import dtype as D
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..ops import elementwise as E
from ..ops.creation import rand, tensor, zeros
from ..ops.indexing import stack
from ..ops.linalg import matmul
from ..tensor import Tensor
from .functional import (_check_p, _check_tensor, _pair, _shape, _Windows, adaptive_avg_pool2d,
                         avg_pool2d, conv2d, max_pool2d, pad, softplus)

__all__ = [
    "conv1d", "conv_transpose1d", "conv_transpose2d", "mish", "hardswish", "hardsigmoid",
    "softsign", "tanhshrink", "prelu", "selu", "celu", "hardshrink", "softshrink", "threshold",
    "glu", "dropout1d", "dropout2d", "group_norm", "instance_norm", "pixel_shuffle",
    "pixel_unshuffle", "interpolate", "adaptive_avg_pool1d", "adaptive_max_pool2d",
    "max_pool1d", "avg_pool1d",
]


def _single(v: Any, name: str, fn: str) -> int:
    """An int, or a 1-sequence of one (PyTorch's ``_single``)."""
    if isinstance(v, bool):
        raise TypeError(f"{fn}(): {name} must be an int or a tuple of one int, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    try:
        t = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{fn}(): {name} must be an int or a tuple of one int, got {v!r}") from None
    if len(t) != 1:
        raise ValueError(f"{fn}(): {name} must be an int or a tuple of one int, got {v!r}")
    return t[0]


def _check_groups(fn: str, groups: Any) -> int:
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise RuntimeError(f"{fn}: non-positive groups is not supported, got groups={groups!r}")
    return int(groups)


def _as_3d(fn: str, input: Tensor) -> tuple[Tensor, bool]:
    _check_tensor(fn, "input", input)
    if input.ndim == 3:
        return input, False
    if input.ndim == 2:  # unbatched (C, L)
        return input.unsqueeze(0), True
    raise RuntimeError(f"{fn}: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape "
                       f"{_shape(input)}")


# -- convolution ----------------------------------------------------------------------------


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation: ``conv2d`` of the (N, C, 1, L) view with the
    (OC, C/groups, 1, K) weight. input (N, C, L) or (C, L); padding an int,
    ``'valid'`` or ``'same'``."""
    fn = "conv1d"
    x, unbatched = _as_3d(fn, input)
    _check_tensor(fn, "weight", weight)
    groups = _check_groups(fn, groups)
    if weight.ndim != 3:
        raise RuntimeError(f"conv1d: weight must be 3-D (out_channels, in_channels/groups, kW), "
                           f"got weight of shape {_shape(weight)} (input shape {_shape(input)})")
    c, wc = x._shape[1], weight._shape[1]
    if wc * groups != c:
        raise RuntimeError(
            f"conv1d: input has {c} channels (input shape {_shape(input)}) but weight expects "
            f"{wc * groups} (weight shape {_shape(weight)}); groups={groups}")
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
    _check_tensor(fn, "input", input)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{fn}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                           f"{_shape(input)}")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    _check_tensor(fn, "weight", weight)
    groups = _check_groups(fn, groups)
    if weight.ndim != 4:
        raise RuntimeError(f"{fn}: weight must be 4-D (in_channels, out_channels/groups, kH, kW), "
                           f"got weight of shape {_shape(weight)} (input shape {_shape(input)})")
    n, c, h, w = x._shape
    wc, ocg, kh, kw = weight._shape
    if wc != c:
        raise RuntimeError(f"{fn}: input has {c} channels (input shape {_shape(input)}) but "
                           f"weight expects {wc} (weight shape {_shape(weight)}; its dim 0 is "
                           "in_channels)")
    if c % groups:
        raise RuntimeError(f"{fn}: Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size {list(weight._shape)}")
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
    out = _Col2Im.apply(cols, (kh, kw), (sh, sw), (dh, dw), (ph, pw), (oph, opw))
    if bias is not None:
        out = out + bias.reshape(oc, 1, 1)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """1-D transposed convolution: ``conv_transpose2d`` of the height-1 view.
    input (N, C_in, L) or (C_in, L); weight (C_in, C_out/groups, kW)."""
    fn = "conv_transpose1d"
    x, unbatched = _as_3d(fn, input)
    _check_tensor(fn, "weight", weight)
    if weight.ndim != 3:
        raise RuntimeError(f"{fn}: weight must be 3-D (in_channels, out_channels/groups, kW), got "
                           f"weight of shape {_shape(weight)} (input shape {_shape(input)})")
    s = _single(stride, "stride", fn)
    p = _single(padding, "padding", fn)
    op = _single(output_padding, "output_padding", fn)
    d = _single(dilation, "dilation", fn)
    out = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (0, op),
                           groups, (1, d)).squeeze(2)
    return out.squeeze(0) if unbatched else out


# -- activations ----------------------------------------------------------------------------


def _maybe_inplace(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    return input.copy_(out) if inplace else out


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return _maybe_inplace(input, input * E.tanh(softplus(input)), inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return _maybe_inplace(input, E.clamp(input + 3.0, 0.0, 6.0) / 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return _maybe_inplace(input, input * (E.clamp(input + 3.0, 0.0, 6.0) / 6.0), inplace)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - E.tanh(input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``max(0, x) + weight * min(0, x)``; ``weight`` has one element or one per
    channel (dim 1, or dim 0 of a 1-D input)."""
    _check_tensor("prelu", "input", input)
    _check_tensor("prelu", "weight", weight)
    k = weight.numel()
    a = weight
    if k != 1:
        cdim = 1 if input.ndim >= 2 else 0
        if input.ndim == 0 or input._shape[cdim] != k:
            raise RuntimeError(
                f"prelu: mismatch of parameter numbers and input channel size. Found parameter "
                f"numbers = {k} and channel size = {input._shape[cdim] if input.ndim else 1} "
                f"(input shape {_shape(input)})")
        a = weight.reshape((k,) + (1,) * (input.ndim - cdim - 1))
    elif weight.ndim:
        a = weight.reshape(())
    return E.where(input > 0, input, input * a)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_core(x: Tensor, alpha: float, inv: float = 1.0) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x * inv) - 1)`` (no inf on the untaken branch)."""
    neg = E.minimum(x, E.zeros_scalar_like(x))
    return E.where(x > 0, x, E.expm1(neg * inv if inv != 1.0 else neg) * alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with SELU's fixed constants."""
    return _maybe_inplace(input, _elu_core(input, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("celu: alpha must not be 0 (it divides the input)")
    return _maybe_inplace(input, _elu_core(input, alpha, 1.0 / alpha), inplace)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    return E.where(input.abs() > lambd, input, E.zeros_scalar_like(input))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be "
                           f"{lambd}.")
    z = E.zeros_scalar_like(input)
    return E.where(input > lambd, input - lambd, E.where(input < -lambd, input + lambd, z))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    out = E.where(input > threshold, input, E.zeros_scalar_like(input) + value)
    return _maybe_inplace(input, out, inplace)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """First half of ``dim`` times the sigmoid of the second half."""
    _check_tensor("glu", "input", input)
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input._shape[dim]
    if size % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim % input.ndim} "
                           f"is size {size}")
    a, b = input.split(size // 2, dim)
    return a * E.sigmoid(b)


# -- channel dropout ------------------------------------------------------------------------


def _feature_dropout(input: Tensor, p: float, inplace: bool) -> Tensor:
    """Zero whole channels: one draw per (N, C) entry, broadcast over the rest."""
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    q = 1.0 - p
    mshape = tuple(input._shape[:2]) + (1,) * (input.ndim - 2)
    with no_grad():
        mask = (rand(mshape, dtype=input._dtype, device=input._device) < q).to(input._dtype)
        mask.mul_(1.0 / q)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input with probability ``p``
    and scale the rest by ``1 / (1 - p)``."""
    _check_p(p)
    _check_tensor("dropout1d", "input", input)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, "
            "a channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if not training or p == 0.0:
        return input
    if input.ndim == 2:
        out = _feature_dropout(input.unsqueeze(0), p, inplace)
        return input if inplace else out.squeeze(0)
    return _feature_dropout(input, p, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels (dim 1) with probability ``p`` and scale the rest by
    ``1 / (1 - p)``. As PyTorch, a 3-D input is taken as (N, C, L)."""
    _check_p(p)
    _check_tensor("dropout2d", "input", input)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and "
            "will result in an error in a future release. To retain the behavior and silence this "
            "warning, please use dropout instead. Note that dropout2d exists to provide "
            "channel-wise dropout on inputs with 2 spatial dimensions, a channel dimension, and an "
            "optional batch dimension (i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
            "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
            "dim. This behavior will change in a future release to interpret the input as one "
            "without a batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise "
            "dropout behavior, please switch to using dropout1d instead.", stacklevel=2)
    if not training or p == 0.0:
        return input
    return _feature_dropout(input, p, inplace)


# -- normalisation --------------------------------------------------------------------------


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each group of ``C / num_groups`` channels of each sample over the
    group's channels and spatial positions (biased variance), then the
    per-channel affine ``weight``, ``bias``."""
    _check_tensor("group_norm", "input", input)
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.ndim}")
    n, c = input._shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(input._shape)} and num_groups="
                           f"{num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"group_norm: expected {name} to be a vector of size equal to the "
                               f"number of channels in input ({c}), but got {name} of shape "
                               f"{_shape(t)}")
    x = input.reshape(n, num_groups, -1)
    mean = x.mean(dim=-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(dim=-1, keepdim=True)
    y = (xc / (var + eps).sqrt()).reshape(input._shape)
    cshape = (c,) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(cshape)
    if bias is not None:
        y = y + bias.reshape(cshape)
    return y


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its spatial positions (biased
    variance), then the per-channel affine. With ``use_input_stats`` the running
    stats (when given) move toward the batch average of the per-instance mean
    and *unbiased* variance by ``momentum``, in place; without it, the running
    stats normalise."""
    _check_tensor("instance_norm", "input", input)
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected input of shape (N, C, ...) with at least one "
                         f"spatial dim, got shape {_shape(input)}")
    c = input._shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"instance_norm: {name} should contain {c} elements (the channels "
                               f"of input of shape {_shape(input)}), not {t.numel()}")
    cshape = (c,) + (1,) * (input.ndim - 2)
    if use_input_stats:
        count = input.numel() // max(1, input._shape[0] * c)
        if count <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"{list(input._shape)}")
        dims = tuple(range(2, input.ndim))
        mean = input.mean(dim=dims, keepdim=True)
        xc = input - mean
        var = (xc * xc).mean(dim=dims, keepdim=True)
        y = xc / (var + eps).sqrt()
        if running_mean is not None or running_var is not None:
            with no_grad():
                if running_mean is not None:
                    bm = mean.reshape(-1, c).mean(0)
                    running_mean.mul_(1.0 - momentum).add_(
                        bm.reshape(running_mean._shape) * momentum)
                if running_var is not None:
                    bv = var.reshape(-1, c).mean(0) * (count / (count - 1))
                    running_var.mul_(1.0 - momentum).add_(
                        bv.reshape(running_var._shape) * momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("instance_norm: Expected running_mean and running_var to be defined "
                               "when use_input_stats is false")
        y = (input - running_mean.reshape(cshape)) / (running_var.reshape(cshape) + eps).sqrt()
    if weight is not None:
        y = y * weight.reshape(cshape)
    if bias is not None:
        y = y + bias.reshape(cshape)
    return y


# -- pixel shuffle --------------------------------------------------------------------------


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r): each group of ``r**2`` channels
    becomes an ``r x r`` block of pixels."""
    _check_tensor("pixel_shuffle", "input", input)
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input._shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible "
                           f"by the square of upscale_factor, but input.size(-3)={c} is not "
                           f"divisible by {r * r}")
    k = len(lead)
    oc = c // (r * r)
    x = input.reshape(*lead, oc, r, r, h, w)
    perm = tuple(range(k)) + tuple(k + i for i in (0, 3, 1, 4, 2))
    return x.permute(*perm).reshape(*lead, oc, h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W), the inverse of ``pixel_shuffle``."""
    _check_tensor("pixel_unshuffle", "input", input)
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input._shape
    if h % r or w % r:
        which, size = ("height", h) if h % r else ("width", w)
        raise RuntimeError(f"pixel_unshuffle expects {which} to be divisible by downscale_factor, "
                           f"but input.size({-2 if which == 'height' else -1})={size} is not "
                           f"divisible by {r}")
    k = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    perm = tuple(range(k)) + tuple(k + i for i in (0, 2, 4, 1, 3))
    return x.permute(*perm).reshape(*lead, c * r * r, h // r, w // r)


# -- interpolation --------------------------------------------------------------------------


def _nearest_index(in_size: int, out_size: int, scale: float | None, exact: bool) -> np.ndarray:
    """PyTorch's ``nearest_idx`` / ``nearest_neighbor_exact_compute_source_index``
    (float32 arithmetic, as its kernels)."""
    o = np.arange(out_size, dtype=np.float32)
    if not exact:
        if out_size == in_size:
            return np.arange(out_size, dtype=np.int64)
        if out_size == 2 * in_size:
            return np.arange(out_size, dtype=np.int64) >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else \
        np.float32(in_size) / np.float32(out_size)
    src = np.floor((o + np.float32(0.5)) * s if exact else o * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear_index(in_size: int, out_size: int, scale: float | None, align_corners: bool,
                  dt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's linear-interpolation sources and weights along one dim, in the
    input's precision (``area_pixel_compute_source_index`` + ``guard_index_and_lambda``):
    (i0, i1, w0, w1)."""
    one = dt.type(1)
    if align_corners:
        s = dt.type(in_size - 1) / dt.type(out_size - 1) if out_size > 1 else dt.type(0)
    elif scale is not None and scale > 0:
        s = dt.type(1.0 / scale)
    else:
        s = dt.type(in_size) / dt.type(out_size)
    o = np.arange(out_size, dtype=dt)
    if align_corners:
        src = s * o
    else:
        src = np.maximum(s * (o + dt.type(0.5)) - dt.type(0.5), dt.type(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(dt), dt.type(0), one).astype(dt)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, (one - lam).astype(dt), lam


def _gather_dim(x: Tensor, dim: int, idx: np.ndarray) -> Tensor:
    """``x`` at indices ``idx`` along ``dim``; a broadcast view and a reshape when
    ``idx`` repeats each index an integer number of times (nearest upscaling)."""
    size = x._shape[dim]
    out = idx.shape[0]
    if out == size and np.array_equal(idx, np.arange(size)):
        return x
    if out % size == 0 and np.array_equal(idx, np.arange(out) // (out // size)):
        k = out // size
        shape = tuple(x._shape)
        wide = x.unsqueeze(dim + 1).expand(*shape[:dim + 1], k, *shape[dim + 1:])
        return wide.reshape(*shape[:dim], out, *shape[dim + 1:])
    return x.index_select(dim, tensor(idx, dtype=D.int64, device=x._device))


def _lerp_dim(x: Tensor, dim: int, index: tuple[np.ndarray, ...]) -> Tensor:
    i0, i1, w0, w1 = index
    tail = (1,) * (x.ndim - dim - 1)
    dev, dt = x._device, x._dtype
    a = _gather_dim(x, dim, i0) * tensor(w0.reshape((-1,) + tail), dtype=dt, device=dev)
    b = _gather_dim(x, dim, i1) * tensor(w1.reshape((-1,) + tail), dtype=dt, device=dev)
    return a + b


_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "area")


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of an (N, C, L) or (N, C, H, W) input to ``size`` or
    by ``scale_factor``, with PyTorch's source-index and weight formulas.

    Modes: ``'nearest'`` and ``'nearest-exact'`` (3-D and 4-D), ``'linear'`` (3-D),
    ``'bilinear'`` (4-D; ``align_corners`` as PyTorch, default False), ``'area'``
    (adaptive average pooling).
    """
    _check_tensor("interpolate", "input", input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    scales: list[float] | None
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    f"Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input._shape[2:])} and output size of "
                    f"{size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    f"output size in (o1, o2, ...,oK) format.")
            if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in size):
                raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                f"or Tuple[int, int, int], but got size with types "
                                f"{[type(v) for v in size]}")
            out_size = [int(v) for v in size]
        else:
            out_size = [int(size)] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    f"Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input._shape[2:])} and "
                    f"scale_factor of shape {scale_factor}. Please provide input tensor in (N, C, "
                    f"d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(v) for v in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out_size = [int(math.floor(input._shape[2 + i] * scales[i])) for i in range(dim)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor or mode == "area":
        scales = None
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if input.ndim not in (3, 4):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the "
            f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
            f"(got {mode}); rtxcore supports 3D and 4D")
    if mode not in _INTERP_MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; use one of "
                                  f"{', '.join(_INTERP_MODES)}")
    if mode == "bilinear" and input.ndim != 4:
        raise NotImplementedError(f"Got {input.ndim}D input, but bilinear mode needs 4D input")
    if mode == "linear" and input.ndim != 3:
        raise NotImplementedError(f"Got {input.ndim}D input, but linear mode needs 3D input")
    if mode in ("linear", "bilinear", "area") and input._dtype.kind != "f":
        raise RuntimeError(f"interpolate: mode {mode!r} needs a floating point input, got "
                           f"{input._dtype.name}")
    if any(o <= 0 for o in out_size):
        raise RuntimeError(f"interpolate: output size {tuple(out_size)} must be positive (input "
                           f"shape {_shape(input)})")
    if mode == "area":
        if input.ndim == 3:
            return adaptive_avg_pool1d(input, out_size[0])
        return adaptive_avg_pool2d(input, tuple(out_size))
    out = input
    for i in range(dim):
        in_size = input._shape[2 + i]
        scale = None if scales is None else scales[i]
        if mode in ("nearest", "nearest-exact"):
            out = _gather_dim(out, 2 + i, _nearest_index(in_size, out_size[i], scale,
                                                         mode == "nearest-exact"))
        else:
            npdt = np.dtype(np.float64 if input._dtype is D.float64 else np.float32)
            out = _lerp_dim(out, 2 + i, _linear_index(in_size, out_size[i], scale,
                                                      bool(align_corners), npdt))
    return out if out is not input else input.clone()


# -- pools ----------------------------------------------------------------------------------


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of an (N, C, L) or (C, L) input to ``output_size`` positions."""
    _check_tensor("adaptive_avg_pool1d", "input", input)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d: expected a 2-D (C, L) or 3-D (N, C, L) input, "
                           f"got shape {_shape(input)}")
    o = _single(output_size, "output_size", "adaptive_avg_pool1d")
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """Max pooling to a fixed output size over bins [floor(i*H/OH), ceil((i+1)*H/OH)):
    ``max_pool2d`` when the bins tile evenly, else one max per bin. With
    ``return_indices``, also each maximum's flat index into H*W."""
    fn = "adaptive_max_pool2d"
    _check_tensor(fn, "input", input)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{fn}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                           f"{_shape(input)}")
    h, w = input._shape[-2:]
    if isinstance(output_size, (int, np.integer)):
        output_size = (output_size, output_size)
    oh = h if output_size[0] is None else int(output_size[0])
    ow = w if output_size[1] is None else int(output_size[1])
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{fn}: output_size must be positive, got {(oh, ow)}")
    if h % oh == 0 and w % ow == 0:
        return max_pool2d(input, (h // oh, w // ow), return_indices=return_indices)
    values, indices = [], []
    for a, b in _bins(h, oh):
        for c0, c1 in _bins(w, ow):
            blk = input[..., a:b, c0:c1].flatten(-2)
            if return_indices:
                v, i = blk.max(dim=-1)
                wb = c1 - c0
                indices.append((E.floor_divide(i, wb) + a) * w + E.remainder(i, wb) + c0)
            else:
                v = blk.amax(dim=-1)
            values.append(v)
    lead = tuple(input._shape[:-2])
    out = stack(values, -1).reshape(*lead, oh, ow)
    if return_indices:
        return out, stack(indices, -1).reshape(*lead, oh, ow)
    return out


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max over sliding windows of an (N, C, L) or (C, L) input (``max_pool2d``
    of the height-1 view)."""
    fn = "max_pool1d"
    x, unbatched = _as_3d(fn, input)
    k = _single(kernel_size, "kernel_size", fn)
    no_stride = stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
    s = k if no_stride else _single(stride, "stride", fn)
    p = _single(padding, "padding", fn)
    d = _single(dilation, "dilation", fn)
    res = max_pool2d(x.unsqueeze(2), (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        v, i = res[0].squeeze(2), res[1].squeeze(2)
        return (v.squeeze(0), i.squeeze(0)) if unbatched else (v, i)
    out = res.squeeze(2)
    return out.squeeze(0) if unbatched else out


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Mean over sliding windows of an (N, C, L) or (C, L) input (``avg_pool2d``
    of the height-1 view)."""
    fn = "avg_pool1d"
    x, unbatched = _as_3d(fn, input)
    k = _single(kernel_size, "kernel_size", fn)
    no_stride = stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
    s = k if no_stride else _single(stride, "stride", fn)
    p = _single(padding, "padding", fn)
    out = avg_pool2d(x.unsqueeze(2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad)
    out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out
