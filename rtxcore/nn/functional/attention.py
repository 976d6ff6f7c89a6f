"""Attention: ``scaled_dot_product_attention``, ``softmax(q @ k^T * scale + mask) @ v``
in public ops (two matmuls, a softmax, and dropout of the weights when asked)."""

from __future__ import annotations

import math

from ... import dtype as D
from ...ops import reduction as R
from ...ops.creation import arange
from ...ops.linalg import matmul
from ...tensor import Tensor
from ._args import _shape
from .dropouts import dropout

__all__ = ["scaled_dot_product_attention"]


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
