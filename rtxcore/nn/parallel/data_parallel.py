"""``nn.DataParallel`` for scripts that wrap their model in it.

PyTorch's DataParallel splits each batch over the GPUs of one process. rtxcore
runs a model on one device per process, so this wrapper runs the whole batch on
the module's own device: scripts that write ``model = nn.DataParallel(model)``
(often only when ``torch.cuda.device_count() > 1``) run unchanged, with the
``module.``-prefixed ``state_dict`` keys PyTorch's wrapper gives. To use several
devices or cores, train data-parallel across processes with
``DistributedDataParallel`` (docs/distributed.md).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..module import Module


class DataParallel(Module):
    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps a Module, got {type(module).__name__}")
        if device_ids is not None and len(device_ids) > 1:
            raise ValueError(
                f"DataParallel(device_ids={list(device_ids)}): rtxcore runs a model on one "
                "device per process; use DistributedDataParallel with one process per device "
                "(python -m rtxcore.distributed.run --nproc_per_node N)")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


def data_parallel(module: Module, inputs: Any, device_ids: Sequence[Any] | None = None,
                  output_device: Any = None, dim: int = 0,
                  module_kwargs: dict[str, Any] | None = None) -> Any:
    """``module(*inputs, **module_kwargs)`` on the module's device (see DataParallel)."""
    if device_ids is not None and len(device_ids) > 1:
        raise ValueError(f"data_parallel(device_ids={list(device_ids)}): one device per "
                         "process; use DistributedDataParallel")
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))
