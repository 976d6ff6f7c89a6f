"""``rtxcore.nn.functional``: PyTorch's ``torch.nn.functional``, with its signatures
and semantics; this package re-exports the functions of its family modules.

Everything here is a composition of public tensor ops, so it differentiates
through their backward rules and runs on every backend, including one with only
the primitive kernels. A few pieces carry a small ``autograd.Function`` whose
backward is itself written in public ops (so it differentiates again): the
sliding windows under convolution and pooling, col2im, ``layer_norm``,
``cross_entropy``, ``binary_cross_entropy``, ``embedding``, constant ``pad`` and
the tiled ``max_pool2d``.

The families, each importing only the ones listed before it:

- ``_args``: argument checks shared by all of them
- ``padding``: ``pad``
- ``windows``: the sliding windows (im2col) under convolution and pooling
- ``linear_maps``: ``linear``, ``bilinear``
- ``convolution``: ``conv1d``, ``conv2d``, the transposed convolutions, ``unfold``
- ``pooling``: max, average and adaptive pools
- ``activations``: pointwise non-linearities and the softmax family
- ``dropouts``: ``dropout``, ``dropout1d``, ``dropout2d``
- ``normalization``: layer, batch, group and instance norm, ``normalize``
- ``embeddings``: ``embedding``, ``one_hot``
- ``attention``: ``scaled_dot_product_attention``
- ``losses``: the regression and classification losses, ``kl_div``
- ``resampling``: ``interpolate``, ``pixel_shuffle``, ``pixel_unshuffle``

(``cosine_similarity`` and ``pairwise_distance`` are the tensor ops of the same name.)

    import rtxcore.nn.functional as F
    loss = F.cross_entropy(F.linear(x, w, b), target)
"""

from __future__ import annotations

from ...ops.norms import cosine_similarity, pairwise_distance
from .activations import (celu, elu, gelu, glu, hardshrink, hardsigmoid, hardswish, hardtanh,
                          leaky_relu, log_softmax, logsigmoid, mish, prelu, relu, relu6, relu_,
                          selu, sigmoid, silu, softmax, softmin, softplus, softshrink, softsign,
                          tanh, tanhshrink, threshold)
from .activations import celu_, elu_, hardtanh_, leaky_relu_, selu_, threshold_
from .attention import scaled_dot_product_attention
from .convolution import _conv2d_cols, conv1d, conv2d, conv_transpose1d, conv_transpose2d, unfold
from .dropouts import dropout, dropout1d, dropout2d
from .embeddings import embedding, one_hot
from .linear_maps import bilinear, linear
from .losses import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,
                     huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from .normalization import (batch_norm, group_norm, instance_norm, layer_norm, normalize,
                            rms_norm)
from .padding import pad
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool1d,
                      avg_pool2d, max_pool1d, max_pool2d)
from .resampling import interpolate, pixel_shuffle, pixel_unshuffle
from .windows import _Windows

# (``_Windows`` and ``_conv2d_cols``: the pieces rtxcore.jit's decompositions run)

__all__ = [
    "linear", "bilinear", "conv2d", "unfold", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
    "relu", "relu_", "relu6", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh", "softplus",
    "logsigmoid", "hardtanh", "softmax", "softmin", "log_softmax", "dropout", "layer_norm", "rms_norm",
    "batch_norm", "normalize", "embedding", "one_hot", "pad", "scaled_dot_product_attention",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "conv1d", "conv_transpose1d", "conv_transpose2d", "mish", "hardswish", "hardsigmoid",
    "softsign", "tanhshrink", "prelu", "selu", "celu", "hardshrink", "softshrink", "threshold",
    "glu", "dropout1d", "dropout2d", "group_norm", "instance_norm", "pixel_shuffle",
    "pixel_unshuffle", "interpolate", "adaptive_avg_pool1d", "adaptive_max_pool2d",
    "max_pool1d", "avg_pool1d", "leaky_relu_", "elu_", "hardtanh_", "threshold_", "celu_", "selu_",
    "cosine_similarity", "pairwise_distance",
]


def __getattr__(name: str) -> object:
    # a PyTorch name left out on purpose says why (rtxcore/_unbuilt.py)
    from rtxcore._unbuilt import missing_attribute

    raise missing_attribute(__name__, name)
