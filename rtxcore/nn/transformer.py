"""Attention and transformer layers, as ``torch.nn``: ``MultiheadAttention``,
``TransformerEncoderLayer`` / ``TransformerEncoder``, ``TransformerDecoderLayer``
/ ``TransformerDecoder`` and ``Transformer``.

Parameter names, shapes and initialisation are PyTorch's (``in_proj_weight``,
``in_proj_bias``, ``out_proj``; ``layers.0.self_attn...``), so a PyTorch
``state_dict`` loads as is. Masks follow PyTorch's ``nn.MultiheadAttention``:
a bool ``attn_mask`` / ``key_padding_mask`` is True where attention is *not*
allowed (the opposite of ``F.scaled_dot_product_attention``'s bool mask), a
float mask is added to the scores. Everything is written in public ops, so it
runs and differentiates on every backend.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

from .. import dtype as D
from ..ops import creation as C
from ..ops.indexing import cat, triu
from ..ops.linalg import matmul
from ..ops.reduction import softmax
from ..tensor import Tensor
from . import functional as F
from . import init
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm
from .module import Module
from .parameter import Parameter

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


# -- masks ----------------------------------------------------------------------------------


def _canonical_mask(mask: Tensor | None, name: str, dtype: D.DType) -> Tensor | None:
    """A bool mask (True = masked out) as a float mask with -inf there; a float
    mask as is."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"MultiheadAttention: {name} must be a Tensor or None, got "
                        f"{type(mask).__name__}")
    if mask._dtype is D.bool_:
        return C.zeros(mask._shape, dtype=dtype, device=mask._device).masked_fill(mask, -math.inf)
    if mask._dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def _pad_key(mask: Tensor | None) -> Tensor | None:
    """The mask with one more key column (0: attended), for an appended key."""
    return F.pad(mask, (0, 1)) if mask is not None else None


def _generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
    return triu(C.full((sz, sz), -math.inf, dtype=dtype, device=device), diagonal=1)


# -- multi-head attention ---------------------------------------------------------------------


class MultiheadAttention(Module):
    """``MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
    add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None, batch_first=False)``.

    forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False) returns
    ``(attn_output, attn_weights or None)``; inputs are (L, N, E), (N, L, E)
    with ``batch_first``, or unbatched (L, E)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(C.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(C.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(C.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(C.empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(C.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(C.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(C.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # PyTorch's: xavier-uniform projections, zero biases, xavier-normal bias_k / bias_v
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _projections(self, query: Tensor, key: Tensor, value: Tensor
                     ) -> tuple[Tensor, Tensor, Tensor]:
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        for name, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise TypeError(f"MultiheadAttention: {name} must be a Tensor, got "
                                f"{type(t).__name__}")
        batched = self._check_shapes(query, key, value, key_padding_mask, attn_mask)
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        tgt_len, bsz, e = query._shape
        src_len = key._shape[0]
        if e != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but "
                                 f"got {e}")
        if key._shape[:2] != value._shape[:2]:
            raise AssertionError(f"key's sequence and batch dims {tuple(key._shape[:2])} do not "
                                 f"match value's {tuple(value._shape[:2])}")
        dtype = query._dtype
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", dtype)
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None  # scaled_dot_product_attention applies the causal mask itself
        else:
            attn_mask = _canonical_mask(attn_mask, "attn_mask", dtype)
            if key_padding_mask is not None:
                is_causal = False
        h, hd = self.num_heads, self.head_dim
        if attn_mask is not None:
            if attn_mask.ndim == 2:
                if tuple(attn_mask._shape) != (tgt_len, src_len):
                    raise RuntimeError(f"The shape of the 2D attn_mask is "
                                       f"{tuple(attn_mask._shape)}, but should be "
                                       f"{(tgt_len, src_len)}.")
            elif tuple(attn_mask._shape) != (bsz * h, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask._shape)}, "
                                   f"but should be {(bsz * h, tgt_len, src_len)}.")
            else:
                attn_mask = attn_mask.reshape(bsz, h, tgt_len, src_len)
        q, k, v = self._projections(query, key, value)
        if self.bias_k is not None and self.bias_v is not None:
            k = cat([k, self.bias_k.expand(1, bsz, e)])
            v = cat([v, self.bias_v.expand(1, bsz, e)])
            attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
        # (len, N, E) -> (N, heads, len, head_dim), as views
        q = q.reshape(tgt_len, bsz, h, hd).permute(1, 2, 0, 3)
        k = k.reshape(k._shape[0], bsz, h, hd).permute(1, 2, 0, 3)
        v = v.reshape(v._shape[0], bsz, h, hd).permute(1, 2, 0, 3)
        if self.add_zero_attn:
            zeros = C.zeros((bsz, h, 1, hd), dtype=k._dtype, device=k._device)
            k, v = cat([k, zeros], 2), cat([v, zeros], 2)
            attn_mask, key_padding_mask = _pad_key(attn_mask), _pad_key(key_padding_mask)
        src_len = k._shape[2]
        if key_padding_mask is not None:
            if tuple(key_padding_mask._shape) != (bsz, src_len):
                raise RuntimeError(f"MultiheadAttention: expected key_padding_mask of shape "
                                   f"{(bsz, src_len)}, but got {tuple(key_padding_mask._shape)}")
            kpm = key_padding_mask.reshape(bsz, 1, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = matmul(q * (1.0 / math.sqrt(hd)), k.transpose(-2, -1))
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = softmax(scores, -1)
            if p > 0.0:
                weights = F.dropout(weights, p)  # PyTorch returns the weights after dropout
            out = matmul(weights, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask, p, is_causal)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, e)
        out = self.out_proj(out)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out = out.squeeze(1)
            weights = weights.squeeze(0) if weights is not None else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _check_shapes(self, query: Tensor, key: Tensor, value: Tensor,
                      key_padding_mask: Tensor | None, attn_mask: Tensor | None) -> bool:
        """PyTorch's shape checks; whether the input is batched."""
        n = query.ndim
        if n not in (2, 3):
            raise AssertionError("query should be unbatched 2D or batched 3D tensor but received "
                                 f"{n}-D query tensor")
        what = "For batched (3-D) `query`" if n == 3 else "For unbatched (2-D) `query`"
        if key.ndim != n or value.ndim != n:
            raise AssertionError(f"{what}, expected `key` and `value` to be {n}-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != n - 1:
            raise AssertionError(f"{what}, expected `key_padding_mask` to be `None` or {n - 1}-D "
                                 f"but found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError(f"{what}, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {attn_mask.ndim}-D tensor instead")
        if n == 2 and attn_mask is not None and attn_mask.ndim == 3:
            want = (self.num_heads, query._shape[0], key._shape[0])
            if tuple(attn_mask._shape) != want:
                raise AssertionError(f"Expected `attn_mask` shape to be {want} but got "
                                     f"{tuple(attn_mask._shape)}")
        return n == 3

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


# -- transformer layers -----------------------------------------------------------------------


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str):
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


class _TransformerLayer(Module):
    """What the encoder and decoder layers share, their constructor included:
    ``_blocks`` residual blocks (self-attention; for the decoder, cross-attention
    over ``memory``; then the feed-forward block), each with its LayerNorm
    (``norm1``, ...) and dropout (``dropout1``, ...), registered in PyTorch's order."""

    _blocks = 2

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        blocks = self._blocks

        def attention() -> MultiheadAttention:
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                      batch_first=batch_first, **kw)

        self.self_attn = attention()
        if blocks == 3:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)

    def _residual(self, x: Tensor, norm: Module, block: Callable[[Tensor], Tensor]) -> Tensor:
        """``x + block(norm(x))`` with ``norm_first``, else ``norm(x + block(x))``."""
        return x + block(norm(x)) if self.norm_first else norm(x + block(x))

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool = False) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, f"dropout{self._blocks}")(x)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention then a feed-forward block, each with a residual connection
    and LayerNorm (after, or before with ``norm_first``)."""

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = self._residual(src, self.norm1, lambda y: self._sa_block(
            y, src_mask, src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, self._ff_block)


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, cross-attention over ``memory`` (``multihead_attn``), then
    a feed-forward block; residuals and LayerNorms as the encoder layer."""

    _blocks = 3

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = self._residual(tgt, self.norm1, lambda y: self._sa_block(
            y, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self._residual(x, self.norm2, lambda y: self._mha_block(
            y, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self._residual(x, self.norm3, self._ff_block)

    def _mha_block(self, x: Tensor, mem: Tensor, attn_mask: Tensor | None,
                   key_padding_mask: Tensor | None, is_causal: bool = False) -> Tensor:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)


def _get_clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` (``layers.0``, ...), then
    ``norm`` if given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(out) if self.norm is not None else out


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer``, then ``norm`` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need", PyTorch's
    defaults; every weight matrix re-initialised xavier-uniform as PyTorch does."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Tensor], Tensor] = F.relu,
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias)

        def stack(stack_cls: Any, layer_cls: Any, num_layers: int) -> Module:
            return stack_cls(layer_cls(*layer_args, **kw), num_layers,
                             LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))

        self.encoder = (custom_encoder if custom_encoder is not None
                        else stack(TransformerEncoder, TransformerEncoderLayer, num_encoder_layers))
        self.decoder = (custom_decoder if custom_decoder is not None
                        else stack(TransformerDecoder, TransformerDecoderLayer, num_decoder_layers))
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        batched = src.ndim == 3
        if not self.batch_first and src._shape[1] != tgt._shape[1] and batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src._shape[0] != tgt._shape[0] and batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src._shape[-1] != self.d_model or tgt._shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A float (sz, sz) mask: -inf above the diagonal, 0 elsewhere (position i
        attends to positions <= i)."""
        return _generate_square_subsequent_mask(sz, device, dtype)
