"""rtx-template: an rtxcore backend in one file, to copy and grow.

Device ``template`` keeps each tensor's memory in a flat NumPy array, standing
in for memory on an accelerator: ``from_host`` and ``to_host`` copy, as they
would across a bus. Kernels receive ``rtxcore.dispatch.View`` objects (buffer,
shape, strides in elements, element offset, dtype) and write into ``out``.

It implements the memory primitives and a handful of ops; everything else is
missing, which the conformance suite reports and the CPU fallback serves
(``RTX_FALLBACK=cpu``). Check it with::

    RTX_FALLBACK=cpu python -m rtxcore.testing template
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rtxcore.dispatch import Backend, View, contiguous_strides, hookimpl

__version__ = "0.1.0"


class TemplateBackend(Backend):
    name = "template"  # the device type: rtxcore.tensor(..., device="template")
    distribution = "rtx-template"
    version = __version__

    def device_count(self) -> int:
        return 1

    def dtypes(self, index: int) -> frozenset[str]:
        # what this device stores; the core refuses any other dtype here
        return frozenset({"bool", "int64", "float32"})

    def op_dtypes(self, index: int) -> dict[str, frozenset[str]]:
        # narrower limits for single ops: matmul is float32 only
        return {"matmul": frozenset({"float32"})}


def _np(v: View) -> np.ndarray:
    """A NumPy array over the view's elements (no copy): how this backend
    reads and writes strided memory. A real backend passes buffer, offset,
    shape and strides to its kernel instead."""
    isz = v.dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        v.buffer[v.offset:], v.shape, tuple(s * isz for s in v.strides))


def _arg(x: Any) -> Any:
    return _np(x) if isinstance(x, View) else x  # operands may be Python scalars


# -- memory: the core can't create a tensor without these three -----------------------


def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[np.ndarray, View]:
    buf = np.empty(int(np.prod(shape, dtype=np.int64)), dtype.numpy)
    return buf, View(buf, shape, contiguous_strides(shape), 0, dtype)


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[np.ndarray, View]:
    buf = np.array(arr, dtype.numpy).reshape(-1)  # a copy: the device owns its memory
    return buf, View(buf, arr.shape, contiguous_strides(arr.shape), 0, dtype)


def to_host(x: View) -> np.ndarray:
    return np.array(_np(x))  # a copy, in x's shape


# -- kernels: each writes into out (any strides; inputs already broadcast) --------------


def full(out: View, value: Any) -> None:
    _np(out)[...] = value


def copy(out: View, x: View) -> None:
    _np(out)[...] = _np(x)


def cast(out: View, x: View) -> None:
    np.copyto(_np(out), _np(x), casting="unsafe")


def _binary(fn: Any) -> Any:
    def kernel(out: View, x: Any, y: Any) -> None:
        fn(_arg(x), _arg(y), out=_np(out))
    return kernel


def neg(out: View, x: View) -> None:
    np.negative(_np(x), out=_np(out))


def exp(out: View, x: View) -> None:
    np.exp(_np(x), out=_np(out))


def sum_(out: View, x: View, axes: tuple[int, ...]) -> None:
    # out keeps x's rank with the reduced axes set to 1
    np.sum(_np(x), axis=axes, keepdims=True, out=_np(out))


def matmul(out: View, a: View, b: View) -> None:
    np.matmul(_np(a), _np(b), out=_np(out))


KERNELS = {
    "empty": empty, "from_host": from_host, "to_host": to_host,
    "full": full, "copy": copy, "cast": cast,
    "add": _binary(np.add), "mul": _binary(np.multiply), "neg": neg, "exp": exp,
    "sum": sum_, "matmul": matmul,
}


# -- the plugin: two hooks --------------------------------------------------------------
# (spelled out here; ``rtx_backends, rtx_kernels = rtxcore.dispatch.backend_hooks(
# TemplateBackend, KERNELS)`` makes the same two, as rtx_cpu and rtx_opencl do)


@hookimpl
def rtx_backends() -> list[Backend]:
    return [TemplateBackend()]


@hookimpl
def rtx_kernels(backend: str) -> dict[str, Any] | None:
    return KERNELS if backend == "template" else None
