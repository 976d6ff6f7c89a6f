"""rtx-opencl: rtxcore's OpenCL backend.

Every primitive op is OpenCL C generated from an expression table and one
template per family (``codegen.py``), compiled once per (op, dtypes, layout) and
enqueued without waiting. Devices ``opencl:0..N`` are every device of every
platform, platforms sorted by name. Importing never fails: without PyOpenCL or
an OpenCL platform the backend says why and how to fix it.
"""

from __future__ import annotations

import os
from typing import Any

from rtxcore.dispatch import Backend, backend_hooks

from . import runtime
from .kernels import KERNELS
from .runtime import OutOfMemoryError, synchronize

# VERSION: a link to rtxcore/VERSION, the one version of rtxcore and its backends
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION")) as _f:
    __version__ = _f.read().strip()
__all__ = ["OpenCLBackend", "OutOfMemoryError", "synchronize", "empty_cache"]


def empty_cache() -> None:
    """Return the memory pools' unused buffers to the OpenCL runtime."""
    for d in runtime.devices():
        d.empty_cache()


class OpenCLBackend(Backend):
    name = "opencl"
    distribution = "rtx-opencl"
    version = __version__
    # index checks queued as kernels, their flags read at the next read back:
    # reading an index's bounds at every gather, embedding or loss would wait
    # for the whole queue mid-step (the index kernels clamp meanwhile)
    async_errors = True

    def is_available(self) -> bool:
        return runtime.problem() is None

    def unavailable_reason(self) -> str | None:
        return runtime.problem()

    def device_count(self) -> int:
        return len(runtime.devices())

    def device_name(self, index: int) -> str:
        return runtime.device(index).name

    def op_dtypes(self, index: int) -> dict[str, frozenset[str]]:
        # the float kernels of two composites; integers take the core's composite
        floats = frozenset({"float16", "float32", "float64"})
        # conv2d's kernels accumulate in their dtype: float16 takes the core's
        # form, which accumulates in float32 as the contract asks
        wide = frozenset({"float32", "float64"})
        return {"floor_divide": floats, "remainder": floats, "conv2d": wide,
                "conv2d_input_grad": wide, "conv2d_weight_grad": wide}

    def notes(self) -> list[str]:
        return [f"left out {s}" for s in runtime.skipped()] if runtime.problem() is None else []

    def properties(self, index: int) -> dict[str, Any]:
        d = runtime.device(index)
        return {
            "platform": d.platform,
            "compute units": d.compute_units,
            "global memory": runtime._gib(d.global_mem),
            "fp64": d.fp64,
            "fp16 arithmetic": d.fp16,
        }

    def is_accelerator(self, index: int) -> bool:
        # PoCL and other CPU drivers run on the host's own cores: not an accelerator
        d = runtime.device(index).cl_device
        return not d.type & runtime.cl.device_type.CPU

    def fuse(self, program: dict[str, Any], index: int) -> Any:
        from .fused import runner

        return runner(program)

    def profiling_start(self, current: Any) -> bool:
        return runtime.profiling_start(current)

    def profiling_stop(self) -> list[tuple[Any, str, int, int]]:
        return runtime.profiling_stop()

    def dtypes(self, index: int) -> frozenset[str]:
        # float16 is stored as half and computed in float (vload_half and
        # vstore_half are core OpenCL), so every device has it; float64 needs
        # cl_khr_fp64.
        names = set(super().dtypes(index))
        if not runtime.device(index).fp64:
            names.discard("float64")
        return frozenset(names)


# the plugin's two hooks: an OpenCLBackend, and KERNELS for device type "opencl"
rtx_backends, rtx_kernels = backend_hooks(OpenCLBackend, KERNELS)
