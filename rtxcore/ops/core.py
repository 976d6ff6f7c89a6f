"""The op front-ends' shared machinery: the elementwise and reduction drivers
every op goes through, the in-place writes, and (re-exported from
rtxcore/ops/alloc.py) allocation, views and casts.

A front-end checks devices, promotes dtypes, broadcasts, allocates the output,
looks the kernel up in the device's table (one dict lookup) and calls it.

Nothing here records for autograd: the public front-ends that call these drivers
are marked ``@differentiable`` (rtxcore/autograd/tape.py) and record there.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import dtype as D
from .._native import safe_offset as _safe_offset, view_of  # noqa: F401  (view_of: every op's)
from ..device import Device
from ..dispatch.types import DType
from ..shape import broadcast_shapes
from ..tensor import Tensor
from ..dispatch.backend import Out
from .alloc import (_CSTRIDES, _new, _operand_tensor, adopt_buffer, adopted, as_tensor_on, as_view,  # noqa: F401
                    bad_operand, buffer, cast, computed, check_dtype, contiguous, cstrides, empty, expand_to, fresh, from_data,
                    from_host, full_on, is_scalar, kernel, make, mixed_devices, out_of_memory,
                    own_kernel, ready_device, scalar_for, tensor_arg, zeros_on)

_bool = D.bool_


# -- elementwise ------------------------------------------------------------------

# How a unary op picks its compute and output dtypes.
SAME, FLOAT, TO_BOOL = 0, 1, 2


def unary_op(op: str, kind: int = SAME) -> Callable[[Any], Tensor]:
    """Unary ``op`` as a function of its operand: a unary primitive's front-end
    itself (and what ``unary`` runs), the common case (a new result of the
    tensor's own dtype, or bool) in its body: each layer of calls costs a tiny
    op a few percent."""
    to_bool = kind == TO_BOOL
    to_float = kind == FLOAT

    def run(x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise bad_operand(op, x)
        dt = x._dtype
        if to_float and dt.kind != "f":
            return _unary(op, x, kind, None)
        dev = x._device
        k = dev.kernels.get(op) or kernel(dev, op)
        if to_bool:
            dt = _bool
            if dt not in dev._dtypes:
                check_dtype(dt, dev)
        shape = x._shape
        a = x._h
        if a is None:
            a = view_of(x)
        if dev.functional and op in dev.functional:  # (a backend's functional kernel)
            return adopted(dev, dev.functional[op](Out(shape, dt), a), shape, dt)
        buf, h = buffer(shape, dt, dev)
        k(h, a)
        return fresh(buf, h, shape, dt, dev)

    run.__name__ = run.__qualname__ = op
    run.__code__ = run.__code__.replace(co_name=op, co_qualname=op)  # (in tracebacks, profiles)
    return run


_UNARY: dict[tuple[str, int], Callable[[Any], Tensor]] = {}
_BINARY: dict[tuple[str, int], Callable[[Any, Any], Tensor]] = {}


def unary(op: str, x: Tensor, kind: int = SAME, out: Tensor | None = None) -> Tensor:
    """Unary primitive ``op`` of ``x`` (into ``out``, an in-place op's target)."""
    if out is None:
        run = _UNARY.get((op, kind))
        if run is None:
            run = _UNARY[(op, kind)] = unary_op(op, kind)
        return run(x)
    return _unary(op, x, kind, out)


def _unary(op: str, x: Tensor, kind: int, out: Tensor | None) -> Tensor:
    """``unary``'s other cases: an integer input of a float op (cast first), ``out``."""
    if not isinstance(x, Tensor):
        raise bad_operand(op, x)
    if kind == FLOAT and x._dtype.kind != "f":
        x = cast(x, D.get_default_dtype())
    if out is None:
        return unary(op, x, kind)
    dev = x._device
    k = dev.kernels.get(op) or kernel(dev, op)
    return _write_inplace(op, k, out, _bool if kind == TO_BOOL else x._dtype, (view_of(x),), x._shape)


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


def binary_op(op: str, kind: int = SAME) -> Callable[[Any, Any], Tensor]:
    """Binary ``op`` as a function of its two operands: a binary primitive's
    front-end itself (and what ``binary`` runs). Its fast paths -- two tensors of
    one dtype, non-empty shape and device; a float tensor and a Python number
    (passed as a float, what ``scalar_for`` gives) -- are written out; anything
    else (promotion, broadcasting, errors) is ``_binary``'s."""
    to_bool = kind == TO_BOOL
    to_float = kind == FLOAT

    def run(x: Any, y: Any) -> Tensor:
        if not isinstance(x, Tensor):
            return _binary(op, x, y, kind, None)
        dt = x._dtype
        dev = x._device
        shape = x._shape
        if isinstance(y, Tensor):
            if (y._dtype is not dt or y._shape != shape or not shape or y._device is not dev
                    or (to_float and dt.kind != "f")):
                return _binary(op, x, y, kind, None)
            b = y._h
            if b is None:
                b = view_of(y)
        else:
            ty = type(y)
            if ty is float:
                b = y
            elif ty is int:
                b = float(y)
            else:
                return _binary(op, x, y, kind, None)
            if dt.kind != "f":
                return _binary(op, x, y, kind, None)
        k = dev.kernels.get(op)
        if k is None:
            return _binary(op, x, y, kind, None)
        a = x._h
        if a is None:
            a = view_of(x)
        if to_bool:
            dt = _bool
            if dt not in dev._dtypes:
                check_dtype(dt, dev)
        if dev.functional and op in dev.functional:  # (a backend's functional kernel)
            return adopted(dev, dev.functional[op](Out(shape, dt), a, b), shape, dt)
        buf, h = buffer(shape, dt, dev)
        k(h, a, b)
        return fresh(buf, h, shape, dt, dev)

    run.__name__ = run.__qualname__ = op
    run.__code__ = run.__code__.replace(co_name=op, co_qualname=op)  # (in tracebacks, profiles)
    return run


def binary(op: str, x: Any, y: Any, kind: int = SAME, out: Tensor | None = None) -> Tensor:
    """Elementwise ``op`` on two operands, at least one a Tensor (into ``out``, an
    in-place op's target).

    kind: SAME (result has the promoted dtype), FLOAT (ints promote to the default
    float: true division), TO_BOOL (computed in the promoted dtype, result bool).
    """
    if out is None:
        run = _BINARY.get((op, kind))
        if run is None:
            run = _BINARY[(op, kind)] = binary_op(op, kind)
        return run(x, y)
    if out is x and kind != TO_BOOL:
        # x.mul_(0.9), x.add_(y) (an optimizer's step): x contiguous, y a Python
        # number (x float) or a tensor like x on other memory: the kernel straight
        # into x, what _binary comes to after its checks
        shape = x._shape
        dt = x._dtype
        if x._strides is _CSTRIDES.get(shape):
            ty = type(y)
            if ty is float or ty is int:
                b = float(y) if dt.kind == "f" else None
            elif (isinstance(y, Tensor) and y._dtype is dt and y._device is x._device
                  and y._storage is not x._storage and (kind == SAME or dt.kind == "f")):
                ys = y._shape
                if ys == shape:
                    b = y._h
                    if b is None:
                        b = view_of(y)
                elif ys and len(ys) <= len(shape) and broadcast_shapes(shape, ys) == shape:
                    b = expand_to(y, shape)  # (x += bias: y broadcast over x)
                else:
                    b = None
            else:
                b = None
            k = x._device.kernels.get(op) if b is not None else None
            if k is not None:
                h = view_of(x)
                k(h, h, b)
                x._storage.version += 1
                return x
    return _binary(op, x, y, kind, out)


def _binary(op: str, x: Any, y: Any, kind: int, out: Tensor | None) -> Tensor:
    """``binary``, every case: promotion, broadcasting, scalars, ``out``."""
    tx, ty = isinstance(x, Tensor), isinstance(y, Tensor)
    if tx and ty:
        dev = x._device
        if y._device is not dev:
            raise mixed_devices(op, x, y)
        dt = x._dtype
        if y._dtype is not dt or not x._shape or not y._shape:
            dt = D.result_type(x, y)
        xs, ys = x._shape, y._shape
        shape = xs if xs == ys else broadcast_shapes(xs, ys)
    elif tx:
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
        return computed(dev, op, k, shape, odt, a, b)
    check_overlap(op + "_", out, x, y)
    return _write_inplace(op, k, out, odt, (a, b), shape)


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
    return computed(dev, "where", kernel(dev, "where"), shape, dt, c, a, b)


# -- reductions ----------------------------------------------------------------------


def reduce(op: str, x: Tensor, axes: tuple[int, ...], keepdim: bool,
           dtype: DType | None = None) -> Tensor:
    """Reduce ``x`` over ``axes`` (sorted, non-negative) with primitive ``op``.
    The kernel writes a keepdim-shaped result; without keepdim the result is a
    new tensor of the remaining dims on the same buffer (the same layout)."""
    if dtype is not None and dtype is not x._dtype:
        x = cast(x, dtype)
    shape = x._shape
    ndim = len(shape)
    if len(axes) == ndim:  # everything: the common loss.sum() case
        kshape = _ONES[ndim] if ndim < 8 else (1,) * ndim
        rshape: tuple[int, ...] = ()
    elif len(axes) == 1:
        a = axes[0]
        kshape = shape[:a] + (1,) + shape[a + 1:]
        rshape = shape[:a] + shape[a + 1:]
    else:
        kshape = tuple([1 if i in axes else n for i, n in enumerate(shape)])
        rshape = tuple([n for i, n in enumerate(shape) if i not in axes])
    dev = x._device
    dt = x._dtype
    a = x._h
    if a is None:
        a = view_of(x)
    if dev.functional and op in dev.functional:  # (a backend's functional kernel)
        buf, h = adopt_buffer(dev, dev.functional[op](Out(kshape, dt), a, axes), kshape, dt)
    else:
        buf, h = buffer(kshape, dt, dev)
        (dev.kernels.get(op) or kernel(dev, op))(h, a, axes)
    return fresh(buf, h, kshape, dt, dev) if keepdim else fresh(buf, None, rshape, dt, dev)


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
