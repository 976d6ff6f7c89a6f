"""rtx_opencl's kernel table: every op it runs, gathered from its families' modules.

Each kernel takes the core's ``View`` objects (buffer, shape, strides,
offset, dtype), plans its launch, compiles once per (op, dtypes, layout) and
enqueues without waiting: ``elementwise`` (unary, binary, casts, where, fills,
copies, random numbers, memory), ``reductions``, ``indexing`` and ``matmul``.
"""

from __future__ import annotations

from typing import Any, Callable

from . import codegen as C
from .elementwise import (arange, binary, cast, copy, empty, from_host, full, gelu,
                          gelu_backward, normal, to_host, unary, uniform, where)
from .indexing import gather, index, masked_select, scatter_add
from .matmul import matmul
from .reductions import REDUCE, argreduction, reduction
from .conv_kernels import KERNELS as CONV_KERNELS
from .pool_kernels import KERNELS as POOL_KERNELS
from .rnn_kernels import KERNELS as RNN_KERNELS
from .row_kernels import KERNELS as ROW_KERNELS

KERNELS: dict[str, Callable[..., Any]] = {
    "empty": empty, "from_host": from_host, "to_host": to_host, "full": full,
    "arange": arange, "copy": copy, "cast": cast, "uniform": uniform, "normal": normal,
    "where": where, "gelu": gelu, "gelu_backward": gelu_backward,
}
KERNELS.update({op: unary(op) for op in C.UNARY if op not in ("copy", "cast")})
KERNELS.update({op: binary(op) for op in C.BINARY})
KERNELS.update({op: reduction(op) for op in REDUCE})
KERNELS.update(argmax=argreduction("argmax"), argmin=argreduction("argmin"))
KERNELS.update(gather=gather, index=index, scatter_add=scatter_add, masked_select=masked_select)
KERNELS["matmul"] = matmul
KERNELS.update(RNN_KERNELS)  # lstm_cell, gru_cell and their backwards
KERNELS.update(POOL_KERNELS)  # max_pool2d_tiled and its backward
KERNELS.update(CONV_KERNELS)  # conv2d, its input and weight gradients (float32/float64)
KERNELS.update(ROW_KERNELS)  # softmax, log_softmax, layer_norm and their backwards
