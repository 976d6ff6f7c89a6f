"""Embedding lookups and class encodings: ``embedding`` (a small Function whose
backward is one scatter-add of rows) and ``one_hot``."""

from __future__ import annotations

from typing import Any

from ... import dtype as D
from ...autograd.function import Function
from ...autograd.grad_mode import _state, no_grad
from ...ops import elementwise as E
from ...ops import reduction as R
from ...ops.checks import check_range, wrap_negative
from ...ops.core import empty, view_of
from ...ops.core import kernel as _kernel
from ...ops.creation import arange, zeros
from ...tensor import Tensor
from ._args import _check_tensor, _shape

__all__ = ["embedding", "one_hot"]


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
            idx = wrap_negative(idx, num)    # weight[input] (None: not read, on the device)
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
