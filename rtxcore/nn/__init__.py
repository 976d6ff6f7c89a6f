"""Neural-network building blocks, as ``torch.nn``: ``Module``, ``Parameter``,
layers, losses and containers; ``functional`` (as ``F``) and ``init``."""

from __future__ import annotations

from . import functional, init
from .module import Module
from .parameter import Parameter
from . import parallel, utils
from .parallel import DataParallel
from .activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                         LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, SELU,
                         Sigmoid, SiLU, Softmax, Softmin, Softplus, Softshrink, Softsign, Tanh,
                         Tanhshrink, Threshold)
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .dropout import Dropout, Dropout1d, Dropout2d
from .linear import (CosineSimilarity, Embedding, Flatten, Identity, Linear, PairwiseDistance,
                     Unflatten)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss,
                   MSELoss, NLLLoss, SmoothL1Loss)
from .normalization import (BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
                            LayerNorm, RMSNorm)
from .padding import (CircularPad1d, CircularPad2d, ConstantPad1d, ConstantPad2d, ReflectionPad1d,
                      ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, ZeroPad1d, ZeroPad2d)
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d,
                      AvgPool2d, MaxPool1d, MaxPool2d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .transformer import (MultiheadAttention, Transformer, TransformerDecoder,
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .upsampling import (PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d,
                         UpsamplingNearest2d)

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
__all__ += ["DataParallel", "ParameterDict", "ParameterList", "Unflatten", "CosineSimilarity",
            "PairwiseDistance", "HuberLoss", "KLDivLoss", "RMSNorm"]
__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
            "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
            "TransformerDecoderLayer", "TransformerDecoder", "Transformer"]


def __getattr__(name: str) -> object:
    # a PyTorch name left out on purpose says why (rtxcore/_unbuilt.py)
    from rtxcore._unbuilt import missing_attribute

    raise missing_attribute(__name__, name)
