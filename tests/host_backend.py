"""A second backend whose buffers are host memory: device type ``hostmem``.

It declares ``shares_host_memory = True`` and DLPack device kCPU, like rtx_cpu,
and runs rtx_cpu's kernels on NumPy views of its buffers: ``from_host`` keeps
the array it is given and ``to_host`` returns a view, as the flag promises. It
tests the contract's host-memory rules on a backend that is not ``cpu``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtxcore.dispatch import Backend, BackendPlugin, DType


class HostMemBackend(Backend):
    name = "hostmem"
    distribution = "hostmem (tests)"
    version = "0.0"
    shares_host_memory = True
    dlpack_device = 1  # kDLCPU

    def is_accelerator(self, index: int) -> bool:
        return False

    def view(self, buffer: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...],
             offset: int, dtype: DType) -> np.ndarray:
        isz = dtype.itemsize
        return np.ndarray(shape, dtype.numpy, buffer, offset * isz, tuple(s * isz for s in strides))

    def to_dlpack(self, view: np.ndarray, **kwargs: Any) -> Any:
        return view.__dlpack__(**kwargs)

    def from_dlpack(self, obj: Any,
                    index: int) -> tuple[Any, tuple[int, ...], tuple[int, ...], int]:
        from rtxcore.dispatch import xp

        HostMemPlugin.imported += 1
        return xp.span(np, np.from_dlpack(obj))


def _kernels() -> dict[str, Any]:
    from rtx_cpu.kernels import KERNELS

    return dict(KERNELS)


class HostMemPlugin(BackendPlugin):
    imported = 0  # calls of the backend's from_dlpack

    def __init__(self) -> None:
        super().__init__(HostMemBackend, _kernels)
