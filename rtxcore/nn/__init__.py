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

__all__ = ["Module", "Parameter", "functional", "init", "Identity", "Linear", "Conv2d",
           "MaxPool2d", "AvgPool2d", "Flatten", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid",
           "Softmax", "LogSoftmax", "Dropout", "LayerNorm", "BatchNorm1d", "BatchNorm2d",
           "Embedding", "Sequential", "ModuleList", "ModuleDict", "MSELoss", "L1Loss",
           "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss"]
