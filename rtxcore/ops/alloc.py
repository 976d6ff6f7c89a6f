"""Making tensors: allocation (and out-of-memory errors), views, casts, data from
the host, scalars as a kernel takes them, and the kernel lookup with its fallback:
what every op front-end shares. rtxcore/ops/core.py re-exports all of it, with
the elementwise and reduction drivers built on it.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import dtype as D
from .._native import safe_offset as _safe_offset, view_of
from ..device import Device, get_default_device
from ..dispatch.backend import Out
from ..dispatch.types import DType, contiguous_strides
from ..shape import expand_strides
from ..tensor import Storage, Tensor
from .host_data import numpy_from_data

_new = object.__new__
_bool = D.bool_
_int64 = D.int64

_CSTRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}


def cstrides(shape: tuple[int, ...]) -> tuple[int, ...]:
    s = _CSTRIDES.get(shape)
    if s is None:
        if len(_CSTRIDES) > 4096:
            _CSTRIDES.clear()
        s = _CSTRIDES[shape] = contiguous_strides(shape)
    return s


# -- making tensors ------------------------------------------------------------


def make(storage: Storage, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
         dtype: DType, dev: Device, h: Any = None) -> Tensor:
    t = _new(Tensor)
    t._storage = storage
    t._shape = shape
    t._strides = strides
    t._offset = offset
    t._dtype = dtype
    t._device = dev
    t._h = h
    t._ag = None
    t._base = None
    return t


def fresh(buf: Any, h: Any, shape: tuple[int, ...], dtype: DType, dev: Device) -> Tensor:
    """A new contiguous tensor on a buffer the device just allocated: every op's
    result is one (so ``make``'s stores are written out, and its Storage is made
    without a call to the class)."""
    s = _new(dev.storage_type)
    s.buffer = buf
    s.device = dev
    s.version = 0
    t = _new(Tensor)
    t._storage = s
    t._shape = shape
    st = _CSTRIDES.get(shape)
    t._strides = cstrides(shape) if st is None else st
    t._offset = 0
    t._dtype = dtype
    t._device = dev
    t._h = h
    t._ag = None
    t._base = None
    return t


def buffer(shape: tuple[int, ...], dtype: DType, dev: Device) -> tuple[Any, Any]:
    """(buffer, native view) of a new contiguous ``shape`` from ``dev``'s
    ``empty`` kernel (``dev`` ready and having ``dtype``); rtxcore's
    OutOfMemoryError when it fails."""
    try:
        return dev.kernels["empty"](shape, dtype, dev.index)
    except MemoryError as exc:
        raise out_of_memory(shape, dtype, dev, exc) from None


def ready_device(dev: Any) -> Device:
    if dev is None:
        dev = get_default_device()
    elif type(dev) is not Device:
        dev = Device(dev)
    if not dev._ready:
        dev._resolve()
    return dev


def check_dtype(dtype: DType, dev: Device) -> None:
    if dtype not in dev._dtypes:
        if not dev._ready:
            dev._resolve()
            if dtype in dev._dtypes:
                return
        raise TypeError(
            f"dtype {dtype.name} is not supported on device {dev} "
            f"(it supports: {', '.join(sorted(d.name for d in dev._dtypes))})"
        )


def empty(shape: tuple[int, ...], dtype: DType, dev: Device) -> Tensor:
    """A new contiguous tensor; ``dev`` must be ready."""
    if dtype not in dev._dtypes:
        check_dtype(dtype, dev)
    buf, h = buffer(shape, dtype, dev)
    return fresh(buf, h, shape, dtype, dev)


def computed(dev: Device, op: str, k: Callable[..., Any], shape: tuple[int, ...], dtype: DType,
             *inputs: Any) -> Tensor:
    """A new contiguous tensor holding ``op``'s result (kernel ``k``): from the
    backend's functional form where it has one (one call, the result adopted as
    the buffer), else ``k`` into a new buffer."""
    fn = dev.functional.get(op) if dev.functional else None
    if fn is None:
        t = empty(shape, dtype, dev)
        k(t._h, *inputs)
        return t
    if dtype not in dev._dtypes:
        check_dtype(dtype, dev)
    return adopted(dev, fn(Out(shape, dtype), *inputs), shape, dtype)


def adopted(dev: Device, array: Any, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """A new contiguous tensor on a functional kernel's result ``array``."""
    buf, h = adopt_buffer(dev, array, shape, dtype)
    return fresh(buf, h, shape, dtype, dev)


def adopt_buffer(dev: Device, array: Any, shape: tuple[int, ...], dtype: DType) -> tuple[Any, Any]:
    """``dev.adopt`` of a functional kernel's result, checked: an array of another
    shape is a backend bug, named here rather than met later as wrong data."""
    got = getattr(array, "shape", None)
    if got is not None and tuple(got) != tuple(shape):
        raise RuntimeError(f"{dev}: a functional kernel returned an array of shape "
                           f"{tuple(got)} where {tuple(shape)} ({dtype.name}) was asked for "
                           "(a backend bug: see rtxcore.dispatch.functional)")
    try:
        return dev.adopt(array, dtype, dev.index)
    except MemoryError as exc:
        raise out_of_memory(shape, dtype, dev, exc) from None


def out_of_memory(shape: tuple[int, ...], dtype: DType, dev: Device,
                  exc: BaseException) -> Exception:
    """rtxcore's OutOfMemoryError (a RuntimeError) for a failed allocation."""
    from ..dispatch.types import OutOfMemoryError

    if isinstance(exc, OutOfMemoryError):
        return exc
    n = 1
    for s in shape:
        n *= s
    return OutOfMemoryError(
        f"{dev}: out of memory: tried to allocate {n * dtype.itemsize} bytes "
        f"(shape {tuple(shape)}, {dtype.name}): {exc or type(exc).__name__}")


def from_host(arr: Any, dev: Device) -> Tensor:
    """A tensor on ``dev`` from a C-contiguous numpy array of a supported dtype."""
    dtype = D._BY_NUMPY[arr.dtype]
    check_dtype(dtype, dev)
    shape = arr.shape
    try:
        buf, h = kernel(dev, "from_host")(arr, dtype, dev.index)
    except MemoryError as exc:
        raise out_of_memory(shape, dtype, dev, exc) from None
    return make(dev.storage_type(buf, dev), shape, cstrides(shape), 0, dtype, dev, h)


def from_data(data: Any, dtype: DType | None, device: Any) -> Tensor:
    """A new tensor on ``device`` holding a copy of ``data`` (numbers, nested
    lists, NumPy arrays, tensors), with rtxcore's dtype rules when ``dtype`` is None."""
    arr = numpy_from_data(data, dtype)
    dev = ready_device(device)
    if not arr.flags.owndata:
        arr = arr.copy()
    return from_host(arr, dev)


def full_on(shape: tuple[int, ...], value: Any, dtype: DType, dev: Device,
            strict: bool = False) -> Tensor:
    """A new tensor of ``shape`` filled with ``value`` (``dev`` must be ready;
    ``strict``: the value must fit ``dtype``, see ``scalar_for``)."""
    t = empty(shape, dtype, dev)
    kernel(dev, "full")(t._h, scalar_for(value, dtype, strict))
    return t


def zeros_on(shape: tuple[int, ...], dtype: DType, dev: Device) -> Tensor:
    return full_on(shape, 0, dtype, dev)


def as_tensor_on(value: Any, dev: Device, dtype: DType) -> Tensor:
    """``value`` (a number or data) as a tensor of ``dtype`` on ``dev``."""
    if isinstance(value, (int, float, bool)):
        return full_on((), value, dtype, dev, strict=True)
    return from_data(value, dtype, dev)


def as_view(base: Tensor, shape: tuple[int, ...], strides: tuple[int, ...],
            offset: int) -> Tensor:
    """A tensor sharing ``base``'s storage with a new layout. No data moves.
    Its ``_base`` is the tensor that owns the memory (in-place writes through a
    view are recorded on that owner)."""
    t = make(base._storage, shape, strides, offset, base._dtype, base._device)
    b = base._base
    t._base = base if b is None else b
    return t


def kernel(dev: Device, op: str) -> Callable[..., Any]:
    k = dev.kernels.get(op)
    if k is None:
        if not dev._ready:
            dev._resolve()
            k = dev.kernels.get(op)
            if k is not None:
                return k
        from ..dispatch import fallback

        return fallback.missing(dev, op)  # the CPU backend's, if allowed; else raises
    return k


def own_kernel(dev: Device, op: str, dtype: Any) -> Callable[..., Any] | None:
    """The backend's kernel for composite ``op`` on ``dtype`` (a DType, or a
    function giving it, called only where the backend limits ``op``), or None:
    then the core decomposes it."""
    k = dev.kernels.get(op)
    if k is None or not dev._limits:
        return k
    allowed = dev._limits.get(op)
    if allowed is None:
        return k
    return k if (dtype() if callable(dtype) else dtype).name in allowed else None


def expand_to(t: Tensor, shape: tuple[int, ...]) -> Any:
    """Native view of ``t`` broadcast to ``shape`` (stride-0 dims)."""
    if t._shape == shape:
        return view_of(t)
    strides = expand_strides(t._shape, t._strides, shape)
    return t._device.view(t._storage.buffer, shape, strides, _safe_offset(t._offset, shape), t._dtype)


def cast(t: Tensor, dtype: DType) -> Tensor:
    """``t`` converted to ``dtype`` (``t`` itself when it already has it)."""
    if t._dtype is dtype:
        return t
    dev = t._device
    return computed(dev, "cast", kernel(dev, "cast"), t._shape, dtype, view_of(t))


def contiguous(t: Tensor) -> Tensor:
    if t._strides is _CSTRIDES.get(t._shape) or t.is_contiguous():
        return t
    out = empty(t._shape, t._dtype, t._device)
    kernel(t._device, "copy")(view_of(out), view_of(t))
    return out


def scalar_for(v: Any, dtype: DType, strict: bool = False) -> Any:
    """A Python scalar converted to ``dtype`` as a kernel expects it.

    Integers outside int64 raise OverflowError. Inside it, arithmetic operands
    wrap into narrower dtypes (``int8_tensor + 300`` as in PyTorch); values
    stored as they are (``fill_``, ``full``: ``strict``) must fit.
    """
    k = dtype.kind
    if k == "f":
        return float(v)
    if k == "b":
        return bool(v)
    if isinstance(v, float) and v != v:
        raise RuntimeError(f"cannot convert nan to integer dtype {dtype.name}")
    iv = int(v)
    if not -(1 << 63) <= iv < (1 << 63):
        raise OverflowError(f"Python int {iv} is too big to convert to a tensor element")
    bits = dtype.itemsize * 8
    lo, hi = (0, (1 << bits) - 1) if k == "u" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if lo <= iv <= hi:
        return iv
    if strict:
        raise RuntimeError(f"value {v} cannot be converted to type {dtype.name} without overflow")
    if k == "u":
        return iv & ((1 << bits) - 1)
    half = 1 << (bits - 1)
    return ((iv + half) & ((1 << bits) - 1)) - half


def is_scalar(v: Any) -> bool:
    return isinstance(v, (int, float, bool)) or _is_np_scalar(v)


def _is_np_scalar(v: Any) -> bool:
    import numpy as np

    return isinstance(v, (np.integer, np.floating, np.bool_))


def _operand_tensor(op: str, v: Any, like: Tensor) -> Tensor:
    """A NumPy array operand as a tensor on ``like``'s device (PyTorch accepts
    ``tensor + ndarray``); anything else is a TypeError."""
    import numpy as np

    if not isinstance(v, np.ndarray):
        raise bad_operand(op, v)
    return from_data(v, None, like._device)


def mixed_devices(op: str, a: Tensor, b: Tensor) -> RuntimeError:
    return RuntimeError(
        f"{op}: expected all tensors on the same device, but found tensors on "
        f"{a._device} and {b._device}; move one with .to({str(a._device)!r})"
    )


def bad_operand(op: str, v: Any) -> TypeError:
    return TypeError(
        f"{op}: unsupported operand of type {type(v).__name__}; expected a Tensor "
        "or a Python number"
    )


def tensor_arg(name: str, x: Any) -> Tensor:
    """``x``, which ``name`` needs to be a Tensor (else ``bad_operand``'s TypeError)."""
    if not isinstance(x, Tensor):
        raise bad_operand(name, x)
    return x
