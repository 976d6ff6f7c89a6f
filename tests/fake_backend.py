"""A fake in-process backend for testing dispatch without hardware.

Device type ``fake`` with two devices: ``fake:0`` supports every dtype,
``fake:1`` lacks float64. No kernel for ``cos`` (to test missing-kernel errors).
Buffers are flat NumPy arrays, but kernels receive the core's generic
``rtxcore.dispatch.View`` objects (no native views), and transfers copy, as on a
real accelerator. Every kernel call is counted in ``CALLS``.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

import numpy as np
from rtx_cpu.kernels import KERNELS as NUMPY_KERNELS

from rtxcore.dispatch import (Backend, BackendPlugin, View, backend_hooks, contiguous_strides,
                              ops)

CALLS: Counter[str] = Counter()
MISSING = "cos"


class FakeBackend(Backend):
    name = "fake"
    distribution = "fake-backend (tests)"
    version = "0.0"

    def device_count(self) -> int:
        return 2

    def dtypes(self, index: int) -> frozenset[str]:
        full = super().dtypes(index)
        return full if index == 0 else full - {"float64"}

    def properties(self, index: int) -> dict[str, Any]:
        return {"fp64": index == 0}


def _arr(v: Any) -> Any:
    if isinstance(v, View):
        isz = v.buffer.itemsize
        return np.lib.stride_tricks.as_strided(
            v.buffer[v.offset:], v.shape, [s * isz for s in v.strides]
        )
    if isinstance(v, tuple):
        return tuple(_arr(x) for x in v)
    return v


def _wrap(name: str, fn: Any) -> Any:
    def kernel(*args: Any) -> Any:
        CALLS[name] += 1
        return fn(*(_arr(a) for a in args))

    return kernel


def _empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[Any, View]:
    CALLS["empty"] += 1
    n = int(np.prod(shape)) if shape else 1
    buf = np.zeros(n, dtype.numpy)
    return buf, View(buf, shape, contiguous_strides(shape), 0, dtype)


def _from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[Any, View]:
    CALLS["from_host"] += 1
    buf = arr.reshape(-1).copy()  # a real device copies
    return buf, View(buf, arr.shape, contiguous_strides(arr.shape), 0, dtype)


def _to_host(v: View) -> np.ndarray:
    CALLS["to_host"] += 1
    return np.array(_arr(v), copy=True)


KERNELS = {
    name: _wrap(name, NUMPY_KERNELS[name])
    for name in ops.PRIMITIVES
    if name not in ("empty", "from_host", "to_host", MISSING)
}
KERNELS.update(empty=_empty, from_host=_from_host, to_host=_to_host)

rtx_backends, rtx_kernels = backend_hooks(FakeBackend, KERNELS)  # this module is the plugin


class PrimsBackend(Backend):
    """``prims``: every primitive and nothing else, all dtypes, one device."""

    name = "prims"
    distribution = "prims-backend (tests)"
    version = "0.0"

    def is_accelerator(self, index: int) -> bool:
        return False  # NumPy on the host, like cpu


PRIMS_KERNELS = {
    name: _wrap(name, NUMPY_KERNELS[name])
    for name in ops.PRIMITIVES
    if name not in ("empty", "from_host", "to_host")
}
PRIMS_KERNELS.update(empty=_empty, from_host=_from_host, to_host=_to_host)


class AcceleratorBackend(PrimsBackend):
    """``fakeacc``: the prims kernels on a device that says it is an accelerator."""

    name = "fakeacc"

    def is_accelerator(self, index: int) -> bool:
        return True


# plugins to register in-process. PrimsPlugin() is registered by tests/conftest.py,
# so the whole suite also runs on a backend that has only the primitives: every
# composite runs as the core's decomposition
AcceleratorPlugin = partial(BackendPlugin, AcceleratorBackend, PRIMS_KERNELS)
PrimsPlugin = partial(BackendPlugin, PrimsBackend, PRIMS_KERNELS)
