"""rtx-cuda: rtxcore's CUDA backend, on CuPy.

Views are CuPy arrays over one allocation per tensor (zero-copy strided views);
kernels are the NumPy-API table shared with rtx_cpu (``rtxcore.dispatch.xp``)
run on CuPy, each launched under its array's ``cupy.cuda.Device``; matmul is
cuBLAS through ``cupy.matmul``; random numbers are a Philox kernel of our own
(``philox.cu``), seeded by ``rtxcore.manual_seed``. Importing never fails:
without CuPy, a driver or a device, the backend says why and how to fix it.
"""

from __future__ import annotations

import os
from typing import Any

from rtxcore.dispatch import Backend, DType, backend_hooks, hookimpl

from . import runtime

# VERSION: a link to rtxcore/VERSION, the one version of rtxcore and its backends
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION")) as _f:
    __version__ = _f.read().strip()
__all__ = ["CUDABackend"]

DLPACK_CUDA = 2  # kDLCUDA


class CUDABackend(Backend):
    name = "cuda"
    distribution = "rtx-cuda"
    version = __version__
    dlpack_device = DLPACK_CUDA
    async_errors = True  # index checks read at the next sync (CuPy's indexing wraps)

    def is_available(self) -> bool:
        return runtime.problem() is None

    def unavailable_reason(self) -> str | None:
        return runtime.problem()

    def device_count(self) -> int:
        return runtime.device_count()

    def device_name(self, index: int) -> str:
        return runtime.properties(index)["name"]

    def properties(self, index: int) -> dict[str, Any]:
        p = dict(runtime.properties(index))
        del p["name"]
        return p

    def view(self, buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...],
             offset: int, dtype: DType) -> Any:
        isz = dtype.itemsize
        return runtime.cp.ndarray(shape, dtype.numpy, buffer.data + offset * isz,
                                  tuple(s * isz for s in strides))

    def fuse(self, program: dict[str, Any], index: int) -> Any:
        from .fused import runner  # (plain Python: CuPy is imported when it runs)

        return runner(program)

    def to_dlpack(self, view: Any, **kwargs: Any) -> Any:
        with view.device:  # (the capsule's stream and device are the tensor's)
            return view.__dlpack__(**kwargs)

    def from_dlpack(self, obj: Any, index: int) -> tuple[Any, tuple[int, ...], tuple[int, ...], int]:
        from rtxcore.dispatch import xp

        with runtime.cp.cuda.Device(index):
            return xp.span(runtime.cp, runtime.cp.from_dlpack(obj))


def _kernels() -> dict[str, Any]:
    from .kernels import KERNELS  # (builds nothing of CuPy until a kernel runs)

    return KERNELS


# the plugin's hooks: a CUDABackend, its KERNELS (imported when cuda is first
# used), and the nccl communication backend
rtx_backends, rtx_kernels = backend_hooks(CUDABackend, _kernels)


@hookimpl
def rtx_comm_backends() -> list[Any]:
    """``nccl`` for rtxcore.distributed (import-safe: nothing loads until it is used)."""
    from .nccl import NCCLBackend

    return [NCCLBackend]
