"""PyTorch's older tensor API: the typed tensor classes (``rtxcore.FloatTensor``,
``rtxcore.cuda.LongTensor``, ...), ``Tensor.type()``, ``Tensor.data_ptr()``,
``Tensor.cuda()``, and the memory-format helpers behind ``memory_format=``.

The typed classes are not subclasses of ``Tensor``: every tensor is a ``Tensor``,
and ``isinstance(t, rtxcore.FloatTensor)`` answers by the tensor's dtype and
device type, as PyTorch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtype as D
from .dispatch.types import DType
from .shape import is_contiguous as is_contiguous_layout
from .tensor import Tensor

# PyTorch's legacy class names, by dtype
TYPE_NAMES: dict[DType, str] = {
    D.float32: "FloatTensor", D.float64: "DoubleTensor", D.float16: "HalfTensor",
    D.int64: "LongTensor", D.int32: "IntTensor", D.int16: "ShortTensor",
    D.int8: "CharTensor", D.uint8: "ByteTensor", D.bool_: "BoolTensor",
}
_BY_TYPE_NAME: dict[str, DType] = {v: k for k, v in TYPE_NAMES.items()}


# -- typed tensor classes ------------------------------------------------------------


class _TensorType(type):
    """Metaclass of ``FloatTensor`` and friends: calling one makes a tensor of its
    dtype on its device type; ``isinstance`` checks dtype and device type."""

    dtype: DType
    device_type: str

    def __instancecheck__(cls, obj: Any) -> bool:
        return (isinstance(obj, Tensor) and obj._dtype is cls.dtype
                and obj._device.type == cls.device_type)

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[override]
        """``FloatTensor()`` (empty), ``FloatTensor(2, 3)`` / ``FloatTensor(size)``
        (uninitialized), ``FloatTensor([1, 2])`` (from data), ``FloatTensor(t)``
        (``t`` itself when it already has this type)."""
        from .ops import creation as C
        from .shape import Shape

        where = cls.device_type if device is None else device
        from .device import Device

        if Device(where).type != cls.device_type:
            raise RuntimeError(f"{cls.__qualname__}(): legacy constructor expects device type "
                               f"{cls.device_type}, but device type {Device(where).type} was passed")
        if not args:
            return C.empty(0, dtype=cls.dtype, device=where)
        if len(args) == 1 and not isinstance(args[0], (D.builtins_int, np.integer)):
            a = args[0]
            if isinstance(a, Tensor):
                if not isinstance(a, cls):
                    raise TypeError(f"{cls.__qualname__}(): expected a tensor of type "
                                    f"{cls.__qualname__}, got {tensor_type(a)}")
                return a
            if isinstance(a, Shape):
                return C.empty(tuple(a), dtype=cls.dtype, device=where)
            if isinstance(a, (list, tuple)) or hasattr(a, "__array__") or hasattr(a, "__len__"):
                return C.tensor(a, dtype=cls.dtype, device=where)
        if all(type(a) is D.builtins_int or hasattr(a, "__index__") for a in args):
            return C.empty(*[a.__index__() for a in args], dtype=cls.dtype, device=where)
        raise TypeError(f"{cls.__qualname__}(): expected sizes (ints), a Size, or data (a list, "
                        f"tuple or array), got {', '.join(type(a).__name__ for a in args)}")

    def __repr__(cls) -> str:
        return f"<class 'rtxcore.{cls.__qualname__}'>"


def _make_type(name: str, dt: DType, device_type: str) -> type:
    prefix = "" if device_type == "cpu" else f"{device_type}."
    return _TensorType(name, (), {"dtype": dt, "device_type": device_type,
                                  "__qualname__": prefix + name, "__module__": "rtxcore",
                                  "__doc__": f"Legacy constructor of {device_type} "
                                             f"{dt.name} tensors (PyTorch's {prefix}{name})."})


def make_types(device_type: str) -> dict[str, type]:
    """The nine typed classes for one device type, by name."""
    return {name: _make_type(name, dt, device_type) for dt, name in TYPE_NAMES.items()}


CPU_TYPES = make_types("cpu")


# -- Tensor.type / data_ptr / cuda --------------------------------------------------------


def type_string(dtype: DType, device_type: str) -> str:
    prefix = "rtxcore." if device_type == "cpu" else f"rtxcore.{device_type}."
    return prefix + TYPE_NAMES[dtype]


def tensor_type(x: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """``x.type()``: ``'rtxcore.FloatTensor'`` (``'rtxcore.cuda.FloatTensor'`` on cuda).
    ``x.type(t)``: ``x`` converted to ``t``, a dtype, a typed class or a type string
    (``'torch.'`` strings too); ``x`` itself when it already is of that type."""
    if kwargs:
        raise TypeError(f"type() got unexpected keyword arguments {sorted(kwargs)}")
    if dtype is None:
        return type_string(x._dtype, x._device.type)
    if isinstance(dtype, _TensorType):
        dt, dev_type = dtype.dtype, dtype.device_type
    elif isinstance(dtype, str):
        dt, dev_type = _parse_type_string(dtype)
    else:
        dt, dev_type = D.as_dtype(dtype), x._device.type
    if dev_type != x._device.type:
        dev: Any = dev_type if dev_type != "cuda" else _cuda_device(None, "Tensor.type")
        return x.to(dev, dt)
    return x.to(dt)


def _parse_type_string(s: str) -> tuple[DType, str]:
    parts = s.split(".")
    if len(parts) in (2, 3) and parts[0] in ("torch", "rtxcore") and parts[-1] in _BY_TYPE_NAME:
        return _BY_TYPE_NAME[parts[-1]], (parts[1] if len(parts) == 3 else "cpu")
    raise ValueError(f"type(): invalid type {s!r}; expected a string like 'rtxcore.FloatTensor' "
                     f"or 'torch.cuda.LongTensor'")


def data_ptr(x: Tensor) -> int:
    """The address of the tensor's first element.

    cpu: the real host address (the NumPy pointer of the element at the storage
    offset). A backend whose views export ``__cuda_array_interface__`` (cuda):
    the real device address. Elsewhere (opencl, ...), whose buffers have no
    address the host can use: ``id(buffer) + offset * itemsize``, an int that is
    stable for the tensor's life, equal for views starting at the same element
    and differing by byte offsets within one storage, as addresses would.
    """
    from .ops.core import view_of

    if x.numel() == 0:
        return 0
    h = view_of(x)
    for attr in ("__array_interface__", "__cuda_array_interface__"):
        iface = getattr(h, attr, None)
        if isinstance(iface, dict) and "data" in iface:
            return int(iface["data"][0])
    return id(x._storage.buffer) + x._offset * x._dtype.itemsize


def _cuda_device(device: Any, fn: str) -> Any:
    """A ready ``cuda`` device from an int, a string or a Device, or a RuntimeError
    saying why CUDA can't be used."""
    from .device import Device, current_index
    from .dispatch.registry import registry

    if device is None:  # the current cuda device (rtxcore.cuda.set_device), else 0
        spec = f"cuda:{current_index.get('cuda', 0)}"
    elif isinstance(device, (str, Device)):
        spec = device
    else:
        spec = f"cuda:{device.__index__()}"
    dev = Device(spec)
    if dev.type != "cuda":
        raise RuntimeError(f"{fn}(): invalid device {dev}: expected a cuda device")
    registry.ensure_loaded()
    entry = registry.backends.get("cuda")
    if entry is None:
        raise RuntimeError(f"{fn}(): CUDA is not available: {registry.missing_backend_message('cuda')}")
    if not entry.backend.is_available():
        reason = entry.backend.unavailable_reason() or "no reason given"
        raise RuntimeError(f"{fn}(): CUDA is not available: {reason}")
    return dev


def cuda_method(x: Tensor, device: Any = None, non_blocking: bool = False,
                memory_format: Any = D.preserve_format) -> Tensor:
    """``x.cuda()``: ``x`` on the current (or given) CUDA device."""
    D.check_memory_format("cuda", memory_format)
    return x.to(_cuda_device(device, "cuda"), memory_format=memory_format)


def is_contiguous(x: Tensor, memory_format: Any = D.contiguous_format) -> bool:
    from .shape import is_contiguous as _row_major

    if memory_format is D.contiguous_format:
        return _row_major(x._shape, x._strides)
    D.check_memory_format("is_contiguous", memory_format)
    if memory_format is D.preserve_format:
        raise RuntimeError("is_contiguous(): preserve_format is not a layout a tensor can have")
    if len(x._shape) != D._CL_RANK[memory_format]:
        return False
    want = D.channels_last_strides(x._shape)
    return all(s == w or n == 1 for s, w, n in zip(x._strides, want, x._shape))


# -- memory formats -----------------------------------------------------------------------


def target_format(fn: str, x: Tensor, mf: Any) -> Any:
    """The format a result of ``fn(x, memory_format=mf)`` gets: contiguous or a
    channels_last one (preserve_format resolved from ``x``'s layout)."""
    if mf is D.preserve_format:
        if len(x._shape) in (4, 5):
            return D.suggest_memory_format(x._shape, x._strides)
        return D.contiguous_format
    if mf is D.contiguous_format:
        return mf
    return D.check_memory_format(fn, mf, len(x._shape))


def empty_in_format(shape: tuple[int, ...], dtype: DType, dev: Any, mf: Any) -> Tensor:
    """A new tensor of ``shape`` laid out in ``mf`` (contiguous or channels_last)."""
    from .ops.core import empty, make, view_of

    if mf is D.contiguous_format:
        return empty(shape, dtype, dev)
    nhwc = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    flat = empty(nhwc, dtype, dev)
    t = make(flat._storage, shape, D.channels_last_strides(shape), 0, dtype, dev)
    view_of(t)  # kernels may be handed t._h directly
    return t


def in_format(fn: str, x: Tensor, mf: Any) -> Tensor:
    """``x`` itself when it is laid out in ``mf`` already, else a copy that is."""
    from .ops.core import kernel, view_of

    target = target_format(fn, x, mf)
    if target is D.contiguous_format:
        if x.is_contiguous():
            return x
    elif is_contiguous(x, target):
        return x
    out = empty_in_format(x._shape, x._dtype, x._device, target)
    kernel(x._device, "copy")(view_of(out), view_of(x))
    return out


def like_format(fn: str, out: Tensor, x: Tensor, mf: Any) -> Tensor:
    """``out`` (a fresh row-major result of ``fn(x, memory_format=mf)``) in the
    layout ``mf`` asks for; ``out`` itself in the common cases."""
    if mf is D.contiguous_format or (mf is D.preserve_format and (
            len(x._shape) not in (4, 5) or is_contiguous_layout(x._shape, x._strides))):
        return out
    return in_format(fn, out, target_format(fn, x, mf))
