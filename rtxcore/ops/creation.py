"""Making tensors (from data, filled, ranges, random) and moving them between
dtypes, devices and the host."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import dtype as D
from ..device import Device
from ..random import Generator, default_generator
from ..shape import ints_arg, is_contiguous as _rowmajor, prod
from ..tensor import Storage, Tensor
from ..autograd.tape import differentiable, parameters
from .core import (cast, check_dtype, empty as _empty, from_host, kernel, make,
                   ready_device, scalar_for, view_of)
from .._tensor_api import empty_in_format, in_format, like_format, target_format

# -- from data ----------------------------------------------------------------------


def _numpy_from_data(data: Any, dtype: D.DType | None) -> np.ndarray:
    """A new C-contiguous numpy array holding ``data`` with rtxcore's dtype rules."""
    if isinstance(data, Tensor):
        arr = data.detach().cpu().numpy()
        return np.array(arr, dtype=(dtype or data._dtype).numpy, copy=True, order="C")
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.array(data, copy=True, order="C")
        if dtype is None:
            if arr.dtype not in D._BY_NUMPY:
                raise TypeError(
                    f"can't convert a numpy array of dtype {arr.dtype}; rtxcore supports "
                    f"{', '.join(d.name for d in D.ALL)}"
                )
            return arr
        return arr.astype(dtype.numpy, copy=False)
    try:
        arr = np.array(data, order="C")
    except ValueError as exc:
        raise ValueError(f"can't make a tensor from ragged or malformed data: {exc}") from None
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(
            f"can't make a tensor from data of type {type(data).__name__}: expected numbers, "
            "nested lists of numbers, numpy arrays or tensors"
        )
    if dtype is None:
        if arr.dtype.kind == "f":
            dtype = D.get_default_dtype()
        elif arr.dtype.kind in "iu":
            dtype = D.int64
        elif arr.dtype.kind == "b":
            dtype = D.bool_
        else:
            raise TypeError(f"unsupported data type {arr.dtype} in tensor()")
    if dtype.kind in "iu" and arr.dtype.kind == "f":
        arr = np.trunc(arr)
    return np.require(arr.astype(dtype.numpy, copy=False), requirements="C")


def _grad_option(fn: Any) -> Any:
    """Give a creation function PyTorch's ``requires_grad=`` keyword (a wrapper
    generated with ``fn``'s own parameters, so a call costs next to nothing)."""
    pos, star, kwonly, dstar = parameters(fn)
    params = pos + [f"*{star}" if star else "*"] + kwonly + ["requires_grad"] + (
        [f"**{dstar}"] if dstar else [])
    call = pos + ([f"*{star}"] if star else []) + [f"{k}={k}" for k in kwonly] + (
        [f"**{dstar}"] if dstar else [])
    src = (f"def {fn.__name__}({', '.join(params)}):\n"
           f"    t = fn({', '.join(call)})\n"
           f"    return t.requires_grad_() if requires_grad else t\n")
    ns: dict[str, Any] = {"fn": fn}
    exec(compile(src, f"<creation {fn.__name__}>", "exec"), ns)  # noqa: S102
    create = ns[fn.__name__]
    create.__defaults__ = fn.__defaults__
    create.__kwdefaults__ = {**(fn.__kwdefaults__ or {}), "requires_grad": False}
    functools.update_wrapper(create, fn)
    del create.__wrapped__  # its own signature (with requires_grad) is the true one
    create.__annotations__ = {**fn.__annotations__, "requires_grad": "bool"}
    return create


@_grad_option
def tensor(data: Any, *, dtype: Any = None, device: Any = None) -> Tensor:
    """A new tensor holding a copy of ``data`` (numbers, nested lists, arrays)."""
    dt = None if dtype is None else D.as_dtype(dtype)
    arr = _numpy_from_data(data, dt)
    dev = ready_device(device)
    if not arr.flags.owndata:
        arr = arr.copy()
    return from_host(arr, dev)


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
            return make(Storage(buf, dev), tuple(data.shape), _cstrides_for(data.shape), 0,
                        dtype_, dev)
    return tensor(data, dtype=dt, device=dev)


asarray = as_tensor


def as_tensor_on(value: Any, dev: Device, dtype: D.DType) -> Tensor:
    """``value`` (a number or data) as a tensor of ``dtype`` on ``dev``."""
    if isinstance(value, (int, float, bool)):
        t = _empty((), dtype, dev)
        kernel(dev, "full")(t._h, scalar_for(value, dtype, strict=True))
        return t
    return tensor(value, dtype=dtype, device=dev)


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
    return make(Storage(buf, dev), tuple(shape), tuple(strides), offset, dtype, dev)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A cpu tensor sharing ``arr``'s memory (any non-negative strides)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    if arr.dtype not in D._BY_NUMPY:
        raise TypeError(
            f"can't convert np.ndarray of type {arr.dtype}. The only supported types are: "
            + ", ".join(d.name for d in D.ALL)
        )
    dev = ready_device("cpu")
    dtype = D._BY_NUMPY[arr.dtype]
    isz = arr.itemsize
    if any(s < 0 for s in arr.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative; make a copy "
            "first with arr.copy()"
        )
    if any(s % isz for s in arr.strides):
        raise ValueError("numpy array strides are not a multiple of the element size; copy it first")
    shape = arr.shape
    if arr.flags.c_contiguous:
        base = arr.reshape(-1)
        strides = _cstrides_for(shape)
    else:
        strides = tuple(s // isz for s in arr.strides)
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if prod(shape) else 0
        base = np.lib.stride_tricks.as_strided(arr, (span,), (isz,))
    buf, _ = kernel(dev, "from_host")(base, dtype, dev.index)
    return make(Storage(buf, dev), tuple(shape), strides, 0, dtype, dev)


def _cstrides_for(shape: tuple[int, ...]) -> tuple[int, ...]:
    from .core import cstrides

    return cstrides(tuple(shape))


def _rebuild(arr: np.ndarray, device: str, requires_grad: bool = False) -> Tensor:
    return tensor(arr, device=device, requires_grad=requires_grad)


# -- filled ------------------------------------------------------------------------


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    shape = ints_arg(size)
    for n in shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(shape)}")
    return shape


def _sizes(fname: str, sizes: tuple[Any, ...], size: Any) -> tuple[int, ...]:
    """The shape of ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if size is None:
        return _size(sizes)
    if sizes:
        raise TypeError(f"{fname}() got multiple values for argument 'size'")
    return _size((size,))


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


def _plain_layout(x: Tensor) -> bool:
    """Whether ``preserve_format`` means row-major for ``x``: any rank but 4 and 5,
    and 4-/5-D tensors that are row-major already (the common case: no format
    to work out)."""
    return len(x._shape) not in (4, 5) or _rowmajor(x._shape, x._strides)


def _like(x: Tensor, dtype: Any, device: Any) -> tuple[D.DType, Any]:
    return (x._dtype if dtype is None else D.as_dtype(dtype)), (x._device if device is None else device)


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
    from .elementwise import pow as _pow

    return _pow(float(base), linspace(start, end, steps, dtype=dtype, device=device))


@_grad_option
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None) -> Tensor:
    m = n if m is None else m
    t = zeros(n, m, dtype=dtype, device=device)
    kernel(t._device, "full")(view_of(t.diagonal()), scalar_for(1, t._dtype))
    return t


# -- random -----------------------------------------------------------------------------


def _gen(generator: Generator | None) -> Generator:
    return default_generator if generator is None else generator


def _float_dtype(dtype: Any, what: str) -> D.DType:
    dt = D.as_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{what} expects a floating point dtype, got {dt.name}")
    return dt


def uniform_(x: Tensor, a: float = 0.0, b: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    seed, off = _gen(generator).take(x.numel())
    kernel(x._device, "uniform")(view_of(x), float(a), float(b), seed, off)
    x._storage.version += 1
    return x


def normal_(x: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    seed, off = _gen(generator).take(x.numel())
    kernel(x._device, "normal")(view_of(x), float(mean), float(std), seed, off)
    x._storage.version += 1
    return x


@_grad_option
def rand(*sizes: Any, size: Any = None, generator: Generator | None = None, dtype: Any = None,
         device: Any = None) -> Tensor:
    t = _empty(_sizes("rand", sizes, size), _float_dtype(dtype, "rand"), ready_device(device))
    return uniform_(t, 0.0, 1.0, generator=generator)


@_grad_option
def randn(*sizes: Any, size: Any = None, generator: Generator | None = None, dtype: Any = None,
          device: Any = None) -> Tensor:
    t = _empty(_sizes("randn", sizes, size), _float_dtype(dtype, "randn"), ready_device(device))
    return normal_(t, 0.0, 1.0, generator=generator)


def _wide_float(dev: Device) -> D.DType:
    return D.float64 if dev.supports(D.float64) else D.float32


def randint(low: int = 0, high: Any = None, size: Any = None, *, generator: Generator | None = None,
            dtype: Any = None, device: Any = None) -> Tensor:
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=size)
        low, high = 0, low
    if high is None or size is None:
        raise TypeError("randint() needs high and size: randint(high, size) or randint(low, high, size)")
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dev = ready_device(device)
    from .elementwise import add, floor, mul

    u = uniform_(_empty(_size((size,) if isinstance(size, int) else tuple(size)), _wide_float(dev), dev),
                 generator=generator)
    return cast(add(floor(mul(u, float(high - low))), float(low)), D.as_dtype(dtype or D.int64))


def randperm(n: int, *, generator: Generator | None = None, dtype: Any = None, device: Any = None) -> Tensor:
    dev = ready_device(device)
    u = uniform_(_empty((n,), _wide_float(dev), dev), generator=generator)
    return cast(u.argsort(), D.as_dtype(dtype or D.int64))


@_grad_option
def rand_like(x: Tensor, *, dtype: Any = None, device: Any = None,
              memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("rand_like", rand(x._shape, dtype=dt, device=dev), x, memory_format)


@_grad_option
def randn_like(x: Tensor, *, dtype: Any = None, device: Any = None,
               memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("randn_like", randn(x._shape, dtype=dt, device=dev), x, memory_format)


def randint_like(x: Tensor, low: int, high: Any = None, *, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return randint(low, high, x._shape, dtype=dt, device=dev)


# -- conversion --------------------------------------------------------------------------


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


METHODS = ["new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "clone", "numpy", "item", "tolist", "to", "cpu", "type_as", "uniform_", "normal_"]
CONVERSIONS = {"float": D.float32, "double": D.float64, "half": D.float16, "long": D.int64,
               "int": D.int32, "short": D.int16, "char": D.int8, "byte": D.uint8, "bool": D.bool_}
