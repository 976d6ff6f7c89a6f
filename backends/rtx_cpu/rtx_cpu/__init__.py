"""rtx-cpu: rtxcore's CPU backend. Views are NumPy arrays over one flat buffer, so
the core's strided views reach kernels as ordinary ndarrays (no copies), and
``Tensor.numpy()`` shares memory."""

from __future__ import annotations

import os
import platform
from typing import Any

import numpy as np

from rtxcore.dispatch import Backend, DType, backend_hooks

from . import memory
from .kernels import KERNELS
from .memory import empty_cache

memory.tune_malloc()

# VERSION: a link to rtxcore/VERSION, the one version of rtxcore and its backends
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION")) as _f:
    __version__ = _f.read().strip()
__all__ = ["CPUBackend", "empty_cache"]


class CPUBackend(Backend):
    name = "cpu"
    distribution = "rtx-cpu"
    version = __version__
    shares_host_memory = True  # numpy() is zero-copy; from_host keeps the array
    dlpack_device = 1  # kDLCPU

    def device_name(self, index: int) -> str:
        return platform.processor() or platform.machine() or "cpu"

    def properties(self, index: int) -> dict[str, Any]:
        return {"cores": os.cpu_count(), "numpy": np.__version__,
                "buffer pool": "on" if memory._enabled else "off",
                "malloc": "tuned" if memory.malloc_tuned else "as is"}

    def fuse(self, program: dict[str, Any], index: int) -> Any:
        from .fused import runner

        return runner(program, KERNELS)

    def view(self, buffer: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...],
             offset: int, dtype: DType) -> np.ndarray:
        isz = dtype.itemsize
        n = len(strides)
        # spelled out for the common ranks: this runs for every new view
        if n == 2:
            st: Any = (strides[0] * isz, strides[1] * isz)
        elif n == 1:
            st = (strides[0] * isz,)
        else:
            st = [s * isz for s in strides]
        return np.ndarray(shape, dtype.numpy, buffer, offset * isz, st)

    def to_dlpack(self, view: np.ndarray, **kwargs: Any) -> Any:
        return view.__dlpack__(**kwargs)

    def from_dlpack(self, obj: Any, index: int) -> tuple[Any, tuple[int, ...], tuple[int, ...], int]:
        from rtxcore.dispatch import xp

        return xp.span(np, np.from_dlpack(obj))


# the plugin's two hooks: a CPUBackend, and KERNELS for device type "cpu"
rtx_backends, rtx_kernels = backend_hooks(CPUBackend, KERNELS)
