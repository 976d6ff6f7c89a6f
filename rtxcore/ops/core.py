"""The op front-ends' shared machinery: allocation, views, casts, and the
elementwise / reduction drivers every op goes through.

A front-end checks devices, promotes dtypes, broadcasts, allocates the output,
looks the kernel up in the device's table (one dict lookup) and calls it.

Nothing here records for autograd: the public front-ends that call these drivers
are marked ``@differentiable`` (rtxcore/autograd/tape.py) and record there.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import dtype as D
from .._native import safe_offset as _safe_offset, view_of  # noqa: F401  (view_of: every op's)
from ..device import Device, get_default_device
from ..dispatch.types import DType, contiguous_strides
from ..shape import broadcast_shapes, expand_strides
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
    try:
        buf, h = dev.kernels["empty"](shape, dtype, dev.index)
    except MemoryError as exc:
        raise out_of_memory(shape, dtype, dev, exc) from None
    return make(Storage(buf, dev), shape, cstrides(shape), 0, dtype, dev, h)


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
    return make(Storage(buf, dev), shape, cstrides(shape), 0, dtype, dev, h)


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
    out = empty(t._shape, dtype, t._device)
    kernel(t._device, "cast")(view_of(out), view_of(t))
    return out


def contiguous(t: Tensor) -> Tensor:
    if t.is_contiguous():
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


# -- elementwise ------------------------------------------------------------------

# How a unary op picks its compute and output dtypes.
SAME, FLOAT, TO_BOOL = 0, 1, 2


def unary(op: str, x: Tensor, kind: int = SAME, out: Tensor | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise bad_operand(op, x)
    dev = x._device
    dt = x._dtype
    if kind == FLOAT and dt.kind != "f":
        x = cast(x, D.get_default_dtype())
        dt = x._dtype
    odt = _bool if kind == TO_BOOL else dt
    k = dev.kernels.get(op) or kernel(dev, op)
    if out is None:
        if odt not in dev._dtypes:
            check_dtype(odt, dev)
        shape = x._shape
        try:
            buf, h = dev.kernels["empty"](shape, odt, dev.index)
        except MemoryError as exc:
            raise out_of_memory(shape, odt, dev, exc) from None
        a = x._h
        k(h, view_of(x) if a is None else a)
        return make(Storage(buf, dev), shape, cstrides(shape), 0, odt, dev, h)
    return _write_inplace(op, k, out, odt, (view_of(x),), x._shape)


def _write_inplace(op: str, k: Callable[..., Any], out: Tensor, odt: DType,
                   args: tuple[Any, ...], shape: tuple[int, ...]) -> Tensor:
    """Run ``k`` into ``out`` (an in-place op's target), casting when needed."""
    if shape != out._shape:
        raise RuntimeError(
            f"{op}_: output with shape {tuple(out._shape)} doesn't match the "
            f"broadcast shape {tuple(shape)}"
        )
    if odt is out._dtype:
        k(view_of(out), *args)
    else:
        if not can_cast(odt, out._dtype):
            raise RuntimeError(
                f"{op}_: result type {odt.name} can't be cast to the desired output "
                f"type {out._dtype.name}"
            )
        tmp = empty(shape, odt, out._device)
        k(tmp._h, *args)
        kernel(out._device, "cast")(view_of(out), tmp._h)
    out._storage.version += 1
    return out


def check_overlap(op: str, out: Tensor, *inputs: Any) -> None:
    """Refuse in-place writes whose result would depend on the kernel's order of
    work (PyTorch refuses the same): a target with several elements on one memory
    location, or an input partly overlapping the target."""
    for n, s in zip(out._shape, out._strides):
        if s == 0 and n > 1:
            raise RuntimeError(
                f"{op}: unsupported operation: more than one element of the written-to "
                "tensor refers to a single memory location. Please clone() the tensor "
                "before performing the operation."
            )
    for t in inputs:
        if not isinstance(t, Tensor) or t._storage is not out._storage:
            continue
        if (t._offset, t._shape, t._strides) == (out._offset, out._shape, out._strides):
            continue  # exact overlap: elementwise kernels handle it
        a = _dense_span(t)
        b = _dense_span(out)
        if a is None or b is None:
            continue  # too hard to decide cheaply; PyTorch lets these through too
        if a[0] < b[1] and b[0] < a[1]:
            raise RuntimeError(
                f"{op}: unsupported operation: some elements of the input tensor and the "
                "written-to tensor refer to a single memory location. Please clone() the "
                "tensor before performing the operation."
            )


def _dense_span(t: Tensor) -> tuple[int, int] | None:
    """[start, end) of the memory a tensor covers when it covers it densely (some
    permutation of a contiguous layout, as ``x.t()``); None otherwise."""
    dims = sorted((s, n) for n, s in zip(t._shape, t._strides) if n > 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return None
        expected *= n
    return t._offset, t._offset + expected


def can_cast(src: DType, dst: DType) -> bool:
    """PyTorch's rule for in-place results: no float -> int and no non-bool -> bool."""
    return D.category(src) <= D.category(dst)


def binary(op: str, x: Any, y: Any, kind: int = SAME, out: Tensor | None = None) -> Tensor:
    """Elementwise ``op`` on two operands, at least one a Tensor.

    kind: SAME (result has the promoted dtype), FLOAT (ints promote to the default
    float: true division), TO_BOOL (computed in the promoted dtype, result bool).
    """
    tx, ty = isinstance(x, Tensor), isinstance(y, Tensor)
    if tx and ty:
        # Fast path (most ops): same device, dtype and non-empty shape, new output.
        dt, shape = x._dtype, x._shape
        dev = x._device
        if (y._dtype is dt and y._shape == shape and shape and out is None
                and y._device is dev and (kind != FLOAT or dt.kind == "f")):
            k = dev.kernels.get(op)
            if k is not None:
                a, b = x._h, y._h
                return _fresh(k, dev, shape, _bool if kind == TO_BOOL else dt,
                              view_of(x) if a is None else a, view_of(y) if b is None else b)
        dev = x._device
        if y._device is not dev:
            raise mixed_devices(op, x, y)
        dt = x._dtype
        if y._dtype is not dt or not x._shape or not y._shape:
            dt = D.result_type(x, y)
        xs, ys = x._shape, y._shape
        shape = xs if xs == ys else broadcast_shapes(xs, ys)
    elif tx:
        ys = type(y)
        if ys is float and x._dtype.kind == "f" and out is None:
            # Fast path: float tensor with a Python float (x * 0.5).
            dev, shape, dt = x._device, x._shape, x._dtype
            k = dev.kernels.get(op)
            if k is not None:
                a = x._h
                return _fresh(k, dev, shape, _bool if kind == TO_BOOL else dt,
                              view_of(x) if a is None else a, y)
        if not is_scalar(y):
            return binary(op, x, _operand_tensor(op, y, x), kind, out)
        dev, shape = x._device, x._shape
        dt = D.promote_with_scalar(x._dtype, y)
    elif ty:
        if not is_scalar(x):
            return binary(op, _operand_tensor(op, x, y), y, kind, out)
        dev, shape = y._device, y._shape
        dt = D.promote_with_scalar(y._dtype, x)
    else:
        raise bad_operand(op, x if not tx else y)
    if kind == FLOAT and dt.kind != "f":
        dt = D.get_default_dtype()
    k = dev.kernels.get(op) or kernel(dev, op)
    a = expand_to(cast(x, dt), shape) if tx else scalar_for(x, dt)
    b = expand_to(cast(y, dt), shape) if ty else scalar_for(y, dt)
    odt = _bool if kind == TO_BOOL else dt
    if out is None:
        return _fresh(k, dev, shape, odt, a, b)
    check_overlap(op + "_", out, x, y)
    return _write_inplace(op, k, out, odt, (a, b), shape)


def _fresh(k: Callable[..., Any], dev: Device, shape: tuple[int, ...], odt: DType,
           a: Any, b: Any) -> Tensor:
    """Run binary kernel ``k`` into a new contiguous tensor."""
    if odt not in dev._dtypes:
        check_dtype(odt, dev)
    try:
        buf, h = dev.kernels["empty"](shape, odt, dev.index)
    except MemoryError as exc:
        raise out_of_memory(shape, odt, dev, exc) from None
    k(h, a, b)
    return make(Storage(buf, dev), shape, cstrides(shape), 0, odt, dev, h)


def where(cond: Tensor, x: Any, y: Any) -> Tensor:
    if not isinstance(cond, Tensor):
        raise bad_operand("where", cond)
    tensors = [t for t in (cond, x, y) if isinstance(t, Tensor)]
    dev = cond._device
    for t in tensors:
        if t._device is not dev:
            raise mixed_devices("where", cond, t)
    for v in (x, y):
        if not isinstance(v, Tensor) and not is_scalar(v):
            raise bad_operand("where", v)
    dt = D.result_type(x, y)
    shape = cond._shape
    for t in (x, y):
        if isinstance(t, Tensor):
            shape = broadcast_shapes(shape, t._shape)
    c = expand_to(cast(cond, _bool), shape)
    a = expand_to(cast(x, dt), shape) if isinstance(x, Tensor) else scalar_for(x, dt)
    b = expand_to(cast(y, dt), shape) if isinstance(y, Tensor) else scalar_for(y, dt)
    res = empty(shape, dt, dev)
    kernel(dev, "where")(res._h, c, a, b)
    return res


# -- reductions ----------------------------------------------------------------------


def reduce(op: str, x: Tensor, axes: tuple[int, ...], keepdim: bool,
           dtype: DType | None = None) -> Tensor:
    """Reduce ``x`` over ``axes`` (sorted, non-negative) with primitive ``op``."""
    if dtype is not None and dtype is not x._dtype:
        x = cast(x, dtype)
    shape = x._shape
    ndim = len(shape)
    dev = x._device
    if len(axes) == ndim:  # everything: the common loss.sum() case
        kshape = _ONES[ndim] if ndim < 8 else (1,) * ndim
        dt = x._dtype
        buf, h = dev.kernels["empty"](kshape, dt, dev.index)
        (dev.kernels.get(op) or kernel(dev, op))(h, view_of(x), axes)
        if keepdim:
            return make(Storage(buf, dev), kshape, cstrides(kshape), 0, dt, dev, h)
        return make(Storage(buf, dev), (), (), 0, dt, dev)
    kshape = tuple([1 if i in axes else n for i, n in enumerate(shape)])
    res = empty(kshape, x._dtype, dev)
    (dev.kernels.get(op) or kernel(dev, op))(res._h, view_of(x), axes)
    return res if keepdim else drop_axes(res, axes)


_ONES = [(1,) * n for n in range(8)]


def drop_axes(t: Tensor, axes: tuple[int, ...]) -> Tensor:
    """View of ``t`` without the (size-1) dims in ``axes``."""
    if not axes:
        return t
    if len(axes) == 1:
        a = axes[0]
        return as_view(t, t._shape[:a] + t._shape[a + 1:], t._strides[:a] + t._strides[a + 1:], t._offset)
    shape = tuple(n for i, n in enumerate(t._shape) if i not in axes)
    strides = tuple(s for i, s in enumerate(t._strides) if i not in axes)
    return as_view(t, shape, strides, t._offset)


def write_result(x: Tensor, r: Tensor, op: str, allow_any_cast: bool = False) -> Tensor:
    """Store ``r`` (broadcast) into ``x``: the second half of an in-place op."""
    if r._device is not x._device:
        raise mixed_devices(op + "_", x, r)
    shape = x._shape
    if r._shape != shape:
        try:
            bshape = broadcast_shapes(shape, r._shape)
        except RuntimeError:
            bshape = None
        if bshape != shape or not allow_any_cast:
            raise RuntimeError(
                f"{op}_: output with shape {tuple(shape)} doesn't match the broadcast "
                f"shape {tuple(bshape or r._shape)}"
            )
    if not allow_any_cast and r._dtype is not x._dtype and not can_cast(r._dtype, x._dtype):
        raise RuntimeError(
            f"{op}_: result type {r._dtype.name} can't be cast to the desired output "
            f"type {x._dtype.name}"
        )
    check_overlap(op + "_", x, r)
    src = expand_to(r, shape)
    k = kernel(x._device, "copy" if r._dtype is x._dtype else "cast")
    k(view_of(x), src)
    x._storage.version += 1
    return x
