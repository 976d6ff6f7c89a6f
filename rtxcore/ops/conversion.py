"""Copies and moves: ``clone``, ``to``/``cpu``/``type_as`` and the dtype conversions
(``x.float()``, ``x.long()``, ...), the host's view of a tensor (``numpy``, ``item``,
``tolist``), and where its memory lives (``is_cuda``, ``pin_memory``,
``share_memory_``, which rtxcore needs no copy for)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as D
from ..autograd.tape import differentiable
from ..device import Device
from ..shape import prod
from ..tensor import Tensor
from .._tensor_api import empty_in_format, in_format, target_format
from .core import cast, empty as _empty, from_host, kernel, ready_device, view_of
from .factory_args import _plain_layout


@differentiable("clone")
def clone(x: Tensor, *, memory_format: Any = D.preserve_format) -> Tensor:
    if memory_format is D.preserve_format and _plain_layout(x):
        out = _empty(x._shape, x._dtype, x._device)
    else:
        out = empty_in_format(x._shape, x._dtype, x._device, target_format("clone", x, memory_format))
    kernel(x._device, "copy")(out._h, view_of(x))
    return out


def _host(x: Tensor) -> np.ndarray:
    return kernel(x._device, "to_host")(view_of(x))


def numpy(x: Tensor, *, force: bool = False) -> np.ndarray:
    """On cpu, an array sharing the tensor's memory; on other devices, a copy
    (``to_host`` returns new memory there, by contract)."""
    if x._ag is not None and x._ag.requires_grad and not force:
        raise RuntimeError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
        )
    arr = _host(x)
    return arr.copy() if force and x._device.backend.shares_host_memory else arr


def item(x: Tensor) -> Any:
    if prod(x._shape) != 1:
        raise RuntimeError(
            f"a Tensor with {prod(x._shape)} elements cannot be converted to Scalar "
            f"(shape {tuple(x._shape)})"
        )
    return _host(x).reshape(-1)[0].item()


def tolist(x: Tensor) -> Any:
    return _host(x).tolist()


def _parse_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, bool]:
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = bool(kwargs.pop("copy", False))
    kwargs.pop("non_blocking", None)
    if "memory_format" in kwargs:  # Module.to(memory_format=) lays out no parameter
        D.check_memory_format("to", kwargs.pop("memory_format"))
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a._device, a._dtype
        elif isinstance(a, (str, Device)):
            device = a
        elif a is None:
            continue
        else:
            dtype = a
    return device, dtype, copy


@differentiable("to")
def to(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``x.to(device)``, ``x.to(dtype)``, ``x.to(device, dtype)``, ``x.to(other)``.

    Returns ``x`` itself when nothing changes (unless ``copy=True``);
    ``memory_format=`` lays the result out as ``clone``'s does."""
    mf = kwargs.pop("memory_format", D.preserve_format)
    if mf is not D.preserve_format:
        return in_format("to", to(x, *args, **kwargs), mf)
    device, dtype, copy = _parse_to(args, kwargs)
    dt = x._dtype if dtype is None else D.as_dtype(dtype)
    dev = x._device if device is None else ready_device(device)
    if dev is x._device:
        if dt is x._dtype:
            return clone(x) if copy else x
        return cast(x, dt)
    # across devices: through the host, unless a plugin offers a direct copy
    src = cast(x, dt) if not dev.supports(x._dtype) else x
    host = np.require(_host(src), requirements="C")
    if src._device.backend.shares_host_memory and dev.backend.shares_host_memory:
        host = host.copy()  # both keep host memory: never let them alias
    out = from_host(host, dev)
    return cast(out, dt)


def cpu(x: Tensor) -> Tensor:
    return to(x, "cpu")


def type_as(x: Tensor, other: Tensor) -> Tensor:
    return to(x, other._dtype)


def _converter(dt: D.DType) -> Any:
    def convert(x: Tensor) -> Tensor:
        return to(x, dt)

    convert.__name__ = dt.name
    return convert


CONVERSIONS = {"float": D.float32, "double": D.float64, "half": D.float16, "long": D.int64,
               "int": D.int32, "short": D.int16, "char": D.int8, "byte": D.uint8, "bool": D.bool_}


def ndimension(input: Tensor) -> int:  # noqa: A002
    """The number of dims (PyTorch's older name for ``dim()``)."""
    return input.ndim


def is_cuda(input: Tensor) -> bool:  # noqa: A002
    return input._device.type == "cuda"


def pin_memory(input: Tensor, device: Any = None) -> Tensor:  # noqa: A002
    """The tensor itself: rtxcore's cpu tensors live in ordinary host memory and
    every backend copies from it directly, so there is no page-locked copy to
    make. Only cpu tensors can be pinned, as in PyTorch."""
    if input._device.type != "cpu":
        raise RuntimeError(f"cannot pin '{input.type()}' only dense CPU tensors can be pinned")
    return input


def is_pinned(input: Tensor, device: Any = None) -> bool:  # noqa: A002
    """False: no tensor lives in page-locked memory (see ``pin_memory``)."""
    return False


def share_memory_(input: Tensor) -> Tensor:  # noqa: A002
    """The tensor itself: rtxcore runs in one process, so there is nothing to
    move to shared memory (``multiprocessing`` children get pickled copies)."""
    return input


def is_shared(input: Tensor) -> bool:  # noqa: A002
    return False


METHODS = ["clone", "numpy", "item", "tolist", "to", "cpu", "type_as", "ndimension", "pin_memory",
           "is_pinned", "share_memory_", "is_shared"]
