"""Neural-network building blocks, as ``torch.nn``: ``Module``, ``Parameter``,
layers, losses and containers; ``functional`` (as ``F``) and ``init``."""

from __future__ import annotations

from . import functional, init
from .layers import (AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv2d,
                     CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity, L1Loss,
                     LayerNorm, Linear, LogSoftmax, MaxPool2d, ModuleDict, ModuleList, MSELoss,
                     NLLLoss, ReLU, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Tanh)
from .module import Module
from .parameter import Parameter
from . import parallel, utils
from .activation import (CELU, ELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU,
                         LogSigmoid, Mish, PReLU, ReLU6, SELU, Softmin, Softplus, Softshrink,
                         Softsign, Tanhshrink, Threshold)
from .conv import Conv1d, ConvTranspose1d, ConvTranspose2d
from .spatial import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d,
                      CircularPad1d, CircularPad2d, ConstantPad1d, ConstantPad2d, Dropout1d,
                      Dropout2d, GroupNorm, InstanceNorm1d, InstanceNorm2d, MaxPool1d,
                      PixelShuffle, PixelUnshuffle, ReflectionPad1d, ReflectionPad2d,
                      ReplicationPad1d, ReplicationPad2d, Upsample, UpsamplingBilinear2d,
                      UpsamplingNearest2d, ZeroPad1d, ZeroPad2d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .transformer import (MultiheadAttention, Transformer, TransformerDecoder,
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)

__all__ = ["Module", "Parameter", "functional", "init", "Identity", "Linear", "Conv2d",
           "MaxPool2d", "AvgPool2d", "Flatten", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid",
           "Softmax", "LogSoftmax", "Dropout", "LayerNorm", "BatchNorm1d", "BatchNorm2d",
           "Embedding", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "L1Loss",
           "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss"]
__all__ += ["utils", "Conv1d", "ConvTranspose1d", "ConvTranspose2d", "LeakyReLU", "ELU", "CELU",
            "SELU", "GLU", "Softplus", "Mish", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid",
            "PReLU", "Softsign", "Tanhshrink", "LogSigmoid", "Softmin", "Hardshrink",
            "Softshrink", "Threshold", "Dropout1d", "Dropout2d", "GroupNorm", "InstanceNorm1d",
            "InstanceNorm2d", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d",
            "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
            "CircularPad1d", "CircularPad2d", "PixelShuffle", "PixelUnshuffle", "Upsample",
            "UpsamplingNearest2d", "UpsamplingBilinear2d", "AdaptiveAvgPool1d",
            "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "MaxPool1d", "AvgPool1d"]
__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
            "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
            "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]
