"""Composite nodes on a device whose backend lacks that composite: the core's own
decomposition, run on the node's tensors. A graph traced where ``gelu`` is one
kernel (cpu) then runs where it is several (a backend with primitives only)."""

from __future__ import annotations

from typing import Any, Callable

from .. import dtype as D
from ..tensor import Tensor


def _unary(name: str) -> Callable[..., None]:
    def run(out: Tensor, x: Tensor) -> None:
        import rtxcore as rc

        out.copy_(getattr(rc, name)(x))

    return run


def _binary(name: str) -> Callable[..., None]:
    def run(out: Tensor, x: Any, y: Any) -> None:
        import rtxcore as rc

        if not isinstance(x, Tensor):  # a scalar first operand: the op from y's side
            x = rc.full_like(y, x)
        out.copy_(getattr(rc, name)(x, y))

    return run


def _cumsum(out: Tensor, x: Tensor, axis: int) -> None:
    out.copy_(x.cumsum(axis))


def _softmax(out: Tensor, x: Tensor, axis: int) -> None:
    out.copy_(x.softmax(axis))


def _log_softmax(out: Tensor, x: Tensor, axis: int) -> None:
    out.copy_(x.log_softmax(axis))


def _softmax_backward(out: Tensor, g: Tensor, y: Tensor, axis: int) -> None:
    out.copy_(y * (g - (g * y).sum(axis, keepdim=True)))


def _log_softmax_backward(out: Tensor, g: Tensor, y: Tensor, axis: int) -> None:
    out.copy_(g - y.exp() * g.sum(axis, keepdim=True))


def _gelu(out: Tensor, x: Tensor, approximate: str) -> None:
    from ..nn import functional as F

    out.copy_(F.gelu(x, approximate=approximate))


def _gelu_backward(out: Tensor, g: Tensor, x: Tensor, y: Tensor, approximate: str) -> None:
    from ..autograd import grad
    from ..autograd.grad_mode import enable_grad
    from ..nn import functional as F

    with enable_grad():
        xx = x.detach().requires_grad_()
        (d,) = grad(F.gelu(xx, approximate=approximate), xx, g)
    out.copy_(d)


def _layer_norm(out: Tensor, mean: Tensor, rstd: Tensor, x: Tensor, weight: Tensor | None,
                bias: Tensor | None, eps: float) -> None:
    mu = x.mean(1, keepdim=True)
    d = x - mu
    r = ((d * d).mean(1, keepdim=True) + eps).rsqrt()
    y = d * r
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    out.copy_(y)
    mean.copy_(mu)
    rstd.copy_(r)


def _layer_norm_backward(out: Tensor, g: Tensor, x: Tensor, mean: Tensor, rstd: Tensor,
                         weight: Tensor | None) -> None:
    m = x.shape[0]
    xhat = (x - mean) * rstd
    gw = g if weight is None else g * weight
    out[:m].copy_((gw - gw.mean(1, keepdim=True) - xhat * (gw * xhat).mean(1, keepdim=True))
                  * rstd)
    if out.shape[0] > m:  # the parameters' gradients too
        out[m].copy_((g * xhat).sum(0))
        out[m + 1].copy_(g.sum(0))


def _batch_norm(out: Tensor, mean: Tensor, var: Tensor, rstd: Tensor, x: Tensor,
                weight: Tensor | None, bias: Tensor | None, eps: float) -> None:
    mu = x.mean((0, 2), keepdim=True)
    d = x - mu
    v = (d * d).mean((0, 2), keepdim=True)
    r = (v + eps).rsqrt()
    y = d * (r if weight is None else r * weight.reshape(1, -1, 1))
    if bias is not None:
        y = y + bias.reshape(1, -1, 1)
    out.copy_(y)
    mean.copy_(mu.reshape(-1))
    var.copy_(v.reshape(-1))
    rstd.copy_(r.reshape(-1))


def _batch_norm_backward(dx: Tensor, sums: Tensor, g: Tensor, x: Tensor, mean: Tensor,
                         rstd: Tensor, weight: Tensor | None) -> None:
    count = max(x.shape[0] * x.shape[2], 1)  # (an empty batch: sums of nothing, 0)
    r = rstd.reshape(1, -1, 1)
    xhat = (x - mean.reshape(1, -1, 1)) * r
    a = g.sum((0, 2), keepdim=True)
    gx = (g * xhat).sum((0, 2), keepdim=True)
    scale = r if weight is None else r * weight.reshape(1, -1, 1)
    dx.copy_((g - a * (1.0 / count) - xhat * (gx * (1.0 / count))) * scale)
    sums[0].copy_(gx.reshape(-1))
    sums[1].copy_(a.reshape(-1))


def _max_pool2d_tiled(values: Tensor, indices: Tensor, x: Tensor, kh: int, kw: int) -> None:
    from ..nn import functional as F

    v, i = F.max_pool2d(x, (kh, kw), return_indices=True)
    values.copy_(v)
    indices.copy_(i)


def _max_pool2d_tiled_backward(out: Tensor, g: Tensor, indices: Tensor) -> None:
    n, c, h, w = out.shape
    flat = out.new_zeros(n * c, h * w)
    flat.scatter_add_(1, indices.reshape(n * c, -1), g.reshape(n * c, -1))
    out.copy_(flat.reshape(n, c, h, w))


def _wide(*ts: Any) -> tuple[Any, ...]:
    """float16 operands as float32: the conv kernels accumulate half in float32
    and round once, where they write."""
    return tuple(t.float() if t is not None and t.dtype == D.float16 else t for t in ts)


def _conv2d(out: Tensor, cols: Tensor, x: Tensor, weight: Tensor, bias: Tensor | None,
            stride: tuple[int, int], padding: tuple[int, int, int, int],
            dilation: tuple[int, int]) -> None:
    from ..nn import functional as F

    n, oc, oh, ow = out.shape
    kh, kw = weight.shape[2:]
    cols.copy_(F._Windows.apply(x, (kh, kw), tuple(stride), tuple(padding), tuple(dilation),
                                0, True))
    weight, wcols, bias = _wide(weight, cols, bias)  # the matmul reads the cols just made
    y = (weight.reshape(oc, -1) @ wcols).reshape(oc, n, oh, ow).permute(1, 0, 2, 3)
    out.copy_(y + bias.reshape(oc, 1, 1) if bias is not None else y)


def _conv2d_input_grad(dx: Tensor, g: Tensor, weight: Tensor, stride: tuple[int, int],
                       padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> None:
    from ..autograd.engine import grad
    from ..autograd.grad_mode import enable_grad
    from ..nn import functional as F

    g, weight = _wide(g, weight)
    z = g.new_zeros(dx.shape).requires_grad_()
    with enable_grad():
        y = F._conv2d_cols(z, weight.detach(), None, 1, tuple(stride), tuple(padding),
                           tuple(dilation), tuple(g.shape[2:]))
    (d,) = grad(y, z, g)
    dx.copy_(d)


def _conv2d_weight_grad(dweight: Tensor, g: Tensor, cols: Tensor) -> None:
    g, cols = _wide(g, cols)
    rows = g.permute(1, 0, 2, 3).reshape(dweight.shape[0], -1)
    dweight.copy_((rows @ cols.T).reshape(dweight.shape))


def _conv2d_weight_grad_x(dweight: Tensor, g: Tensor, x: Tensor, stride: tuple[int, int],
                          padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> None:
    from ..nn import functional as F

    kh, kw = dweight.shape[2:]
    cols = F._Windows.apply(x, (kh, kw), tuple(stride), tuple(padding), tuple(dilation), 0, True)
    _conv2d_weight_grad(dweight, g, cols)


def _sort(values: Tensor, indices: Tensor, x: Tensor, axis: int, descending: bool) -> None:
    v, i = x.sort(dim=axis, descending=descending, stable=True)
    values.copy_(v)
    indices.copy_(i)


def _index_put(out: Tensor, indices: tuple[Tensor, ...], values: Tensor) -> None:
    out.index_put_(tuple(indices), values)


def _rnn(op: str) -> Callable[..., None]:
    def run(*args: Any) -> None:
        from ..nn._rnn_cells import DECOMPOSE as RNN

        RNN[op](*args)

    return run


DECOMPOSE: dict[str, Callable[..., None]] = {
    **{n: _unary(n) for n in ("expm1", "log1p", "log2", "tan", "ceil", "round", "trunc",
                              "isnan", "isinf", "sigmoid", "erf")},
    **{n: _binary(n) for n in ("floor_divide", "remainder", "logical_xor")},
    "cumsum": _cumsum, "softmax": _softmax, "log_softmax": _log_softmax,
    "softmax_backward": _softmax_backward, "log_softmax_backward": _log_softmax_backward,
    "gelu": _gelu, "gelu_backward": _gelu_backward, "layer_norm": _layer_norm,
    "layer_norm_backward": _layer_norm_backward, "batch_norm": _batch_norm,
    "batch_norm_backward": _batch_norm_backward,
    "max_pool2d_tiled": _max_pool2d_tiled,
    "max_pool2d_tiled_backward": _max_pool2d_tiled_backward,
    "conv2d": _conv2d, "conv2d_input_grad": _conv2d_input_grad,
    "conv2d_weight_grad": _conv2d_weight_grad, "conv2d_weight_grad_x": _conv2d_weight_grad_x,
    "sort": _sort, "index_put": _index_put,
    **{op: _rnn(op) for op in ("lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward")},
}
