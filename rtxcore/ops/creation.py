"""Making tensors: from data (``tensor``, ``as_tensor``, ``from_numpy``, ``from_dlpack``),
filled (``empty``, ``zeros``, ``full``, ``*_like``, ``new_*``) and ranges
(``arange``, ``linspace``, ``logspace``, ``eye``).

The random factories (rtxcore/ops/random.py) and the copies and moves between
dtypes, devices and the host (rtxcore/ops/conversion.py) are re-exported here,
with the tensor methods of all three.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtype as D
from ..device import host_device
from ..shape import prod
from ..tensor import Storage, Tensor
from .._tensor_api import empty_in_format, like_format, target_format
from . import elementwise as E
from .conversion import (CONVERSIONS, _converter, _host, _parse_to, clone, cpu, item, numpy,  # noqa: F401
                         to, tolist, type_as)
from .core import (as_tensor_on, check_dtype, cstrides, empty as _empty, from_data, kernel, make,  # noqa: F401
                   ready_device, scalar_for, view_of)
from .factory_args import _grad_option, _like, _plain_layout, _size, _sizes
from .random import (normal_, rand, rand_like, randint, randint_like, randn, randn_like, randperm,  # noqa: F401
                     uniform_)

# -- from data ----------------------------------------------------------------------


@_grad_option
def tensor(data: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """A new tensor holding a copy of ``data`` (numbers, nested lists, arrays)."""
    return from_data(data, None if dtype is None else D.as_dtype(dtype), device)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like ``tensor`` but shares memory when it can: a tensor already right, or
    a numpy array of the wanted dtype on a device whose backend shares host
    memory (``Backend.shares_host_memory``: cpu, any strides; another such
    backend, a C-contiguous array)."""
    dt = None if dtype is None else D.as_dtype(dtype)
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data._device, dtype=dt or data._dtype)
    dev = ready_device(device)
    if (isinstance(data, np.ndarray) and dev.backend.shares_host_memory
            and (dt is None or dt.numpy == data.dtype)):
        if dev.type == "cpu":
            try:
                return from_numpy(data)
            except (TypeError, ValueError):
                pass
        elif data.flags.c_contiguous and data.dtype in D._BY_NUMPY:
            dtype_ = D._BY_NUMPY[data.dtype]
            check_dtype(dtype_, dev)
            buf, _ = kernel(dev, "from_host")(data, dtype_, dev.index)  # kept: the flag's promise
            return make(dev.storage_type(buf, dev), tuple(data.shape), _cstrides_for(data.shape), 0,
                        dtype_, dev)
    return tensor(data, dtype=dt, device=dev)


asarray = as_tensor


_DLPACK_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                 10: "ROCm"}


def from_dlpack(ext: Any, *, device: Any = None) -> Tensor:
    """A tensor sharing the memory of ``ext`` (anything with ``__dlpack__``: a
    NumPy or CuPy array, a PyTorch tensor, ...). Without ``device``, on the
    backend that owns that kind of memory -- cpu for host memory (kDLCPU), cuda
    for CUDA memory. ``device=`` names the device: one whose backend's
    ``dlpack_device`` is that kind shares the memory (a second host-memory
    backend takes kDLCPU arrays this way); any other gets a copy."""
    if isinstance(ext, Tensor):
        return ext.detach() if device is None else ext.detach().to(device)
    if not hasattr(ext, "__dlpack_device__") or not hasattr(ext, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ and "
                        f"__dlpack_device__, got {type(ext).__name__}")
    kind, index = ext.__dlpack_device__()
    kind, index = int(kind), int(index)
    what = f"DLPack device type {kind} ({_DLPACK_NAMES.get(kind, 'unknown')})"
    if device is not None:
        dev = ready_device(device)
        b = dev.backend
        if b.dlpack_device != kind or (kind != 1 and dev.index != index):
            # memory that device can't hold: shared where it lives, then copied (PyTorch's rule)
            return from_dlpack(ext).to(dev)
        index = dev.index
    else:
        from ..dispatch.registry import registry

        registry.ensure_loaded()
        # every backend that takes this kind; host memory goes to cpu unless
        # device= says otherwise (other host backends are reached only that way)
        takers = [n for n, e in registry.backends.items() if e.backend.dlpack_device == kind]
        if not takers:
            raise RuntimeError(f"from_dlpack: no installed backend holds {what}")
        name = "cpu" if "cpu" in takers and kind == 1 else takers[0]
        b = registry.backends[name].backend
        dev = ready_device("cpu" if name == "cpu" and index == 0 else f"{name}:{index}")
    buf, shape, strides, offset = b.from_dlpack(ext, index)
    dtype = D._BY_NUMPY.get(np.dtype(buf.dtype))
    if dtype is None:
        raise TypeError(f"from_dlpack: dtype {buf.dtype} is not supported")
    check_dtype(dtype, dev)
    return make(dev.storage_type(buf, dev), tuple(shape), tuple(strides), offset, dtype, dev)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A cpu tensor sharing ``arr``'s memory (any non-negative strides).

    Without the cpu backend installed, a tensor on the default device made
    from ``arr`` as ``as_tensor`` makes it (a copy, unless that device's
    backend keeps host memory), so that any one backend is a working install."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    if arr.dtype not in D._BY_NUMPY:
        raise TypeError(
            f"can't convert np.ndarray of type {arr.dtype}. The only supported types are: "
            + ", ".join(d.name for d in D.ALL)
        )
    dev = ready_device(host_device())
    dtype = D._BY_NUMPY[arr.dtype]
    isz = arr.itemsize
    if any(s < 0 for s in arr.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative; make a copy "
            "first with arr.copy()"
        )
    if any(s % isz for s in arr.strides):
        raise ValueError("numpy array strides are not a multiple of the element size; copy it first")
    if dev.type != "cpu":
        return as_tensor(arr, device=dev)
    shape = arr.shape
    if arr.flags.c_contiguous:
        base = arr.reshape(-1)
        strides = _cstrides_for(shape)
    else:
        strides = tuple(s // isz for s in arr.strides)
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if prod(shape) else 0
        base = np.lib.stride_tricks.as_strided(arr, (span,), (isz,))
    buf, _ = kernel(dev, "from_host")(base, dtype, dev.index)
    return make(dev.storage_type(buf, dev), tuple(shape), strides, 0, dtype, dev)


def _cstrides_for(shape: tuple[int, ...]) -> tuple[int, ...]:
    return cstrides(tuple(shape))


def _rebuild(arr: np.ndarray, device: str, requires_grad: bool = False) -> Tensor:
    if device == "cpu":  # (where no cpu backend is installed: the host device)
        device = host_device()
    return tensor(arr, device=device, requires_grad=requires_grad)


# -- filled ------------------------------------------------------------------------


@_grad_option
def empty(*sizes: Any, size: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    return _empty(_sizes("empty", sizes, size), D.as_dtype(dtype), ready_device(device))


@_grad_option
def full(size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    shape = _size((size,))
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    dt = D.scalar_dtype(fill_value) if dtype is None else D.as_dtype(dtype)
    t = _empty(shape, dt, ready_device(device))
    kernel(t._device, "full")(t._h, scalar_for(fill_value, dt, strict=True))
    return t


@_grad_option
def zeros(*sizes: Any, size: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    return full(_sizes("zeros", sizes, size), 0, dtype=D.as_dtype(dtype), device=device)


@_grad_option
def ones(*sizes: Any, size: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    return full(_sizes("ones", sizes, size), 1, dtype=D.as_dtype(dtype), device=device)


@_grad_option
def empty_like(x: Tensor, *, dtype: Any = None, device: Any = None,
               memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    if memory_format is D.preserve_format and _plain_layout(x):
        return _empty(x._shape, dt, ready_device(dev))
    return empty_in_format(x._shape, dt, ready_device(dev), target_format("empty_like", x, memory_format))


@_grad_option
def zeros_like(x: Tensor, *, dtype: Any = None, device: Any = None,
               memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("zeros_like", full(x._shape, 0, dtype=dt, device=dev), x, memory_format)


@_grad_option
def ones_like(x: Tensor, *, dtype: Any = None, device: Any = None,
              memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("ones_like", full(x._shape, 1, dtype=dt, device=dev), x, memory_format)


@_grad_option
def full_like(x: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None,
              memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("full_like", full(x._shape, fill_value, dtype=dt, device=dev), x, memory_format)


@_grad_option
def new_empty(x: Tensor, *sizes: Any, size: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return _empty(_sizes("new_empty", sizes, size), dt, ready_device(dev))


@_grad_option
def new_zeros(x: Tensor, *sizes: Any, size: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return full(_sizes("new_zeros", sizes, size), 0, dtype=dt, device=dev)


@_grad_option
def new_ones(x: Tensor, *sizes: Any, size: Any = None, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return full(_sizes("new_ones", sizes, size), 1, dtype=dt, device=dev)


@_grad_option
def new_full(x: Tensor, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return full(size, fill_value, dtype=dt, device=dev)


@_grad_option
def new_tensor(x: Tensor, data: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return tensor(data, dtype=dt, device=dev)


# -- ranges --------------------------------------------------------------------------


@_grad_option
def arange(start: Any = None, end: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None) -> Tensor:
    if end is None:  # arange(end)
        if start is None:
            raise TypeError("arange() missing required argument 'end'")
        start, end = 0, start
    elif start is None:  # arange(end=n)
        start = 0
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if not all(math.isfinite(v) for v in vals):
        raise RuntimeError(f"arange: unsupported range: {start} -> {end} (step {step}); "
                           "start, end and step must be finite")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(
            f"arange: upper bound and larger bound inconsistent with step sign "
            f"(start={start}, end={end}, step={step})"
        )
    if dtype is None:
        dtype = D.get_default_dtype() if any(isinstance(v, float) for v in vals) else D.int64
    dt = D.as_dtype(dtype)
    n = max(0, math.ceil((end - start) / step))
    t = _empty((n,), dt, ready_device(device))
    if n:
        kernel(t._device, "arange")(t._h, scalar_for(start, dt) if dt.kind != "f" else float(start),
                                    step if dt.kind != "f" else float(step))
    return t


@_grad_option
def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None) -> Tensor:
    if steps < 0:
        raise RuntimeError("linspace: number of steps must be non-negative")
    dt = D.as_dtype(dtype)
    t = _empty((steps,), dt, ready_device(device))
    if steps == 0:
        return t
    if steps == 1:
        kernel(t._device, "full")(t._h, scalar_for(start, dt))
        return t
    step = (end - start) / (steps - 1)
    half = steps // 2
    ar = kernel(t._device, "arange")
    # the first half counts up from start, the second down from end (PyTorch's
    # symmetric scheme: both endpoints exact)
    ar(view_of(t[:half]), float(start), step)
    ar(view_of(t[half:]), float(end - (steps - 1 - half) * step), step)
    return t


@_grad_option
def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype: Any = None,
             device: Any = None) -> Tensor:
    return E.pow(float(base), linspace(start, end, steps, dtype=dtype, device=device))


@_grad_option
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None) -> Tensor:
    m = n if m is None else m
    t = zeros(n, m, dtype=dtype, device=device)
    kernel(t._device, "full")(view_of(t.diagonal()), scalar_for(1, t._dtype))
    return t


METHODS = ["new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "clone", "numpy", "item", "tolist", "to", "cpu", "type_as", "uniform_", "normal_"]
