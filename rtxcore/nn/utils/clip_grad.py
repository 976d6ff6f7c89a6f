"""Gradient clipping, as ``torch.nn.utils``: by total norm and by value.

Like PyTorch's, ``clip_grad_norm_`` never reads a value back to the host
(unless ``error_if_nonfinite``): the scale ``min(1, max_norm / (norm + 1e-6))``
stays a device tensor, and every gradient is multiplied by it in place. The
total norm takes one reduction per gradient (a sum of powers, or a max for
``inf``) and one over their stack.
"""

from __future__ import annotations

import math
import types
import warnings
from typing import Any, Iterable

from ... import dtype as D
from ...autograd.grad_mode import no_grad
from ...linalg import vector_norm
from ...ops import elementwise as E
from ...ops import reduction as R
from ...ops.core import cast, check_overlap, cstrides, empty, kernel, view_of
from ...ops.creation import tensor
from ...ops.indexing import stack
from ...tensor import Tensor

_TensorOrTensors = Tensor | Iterable[Tensor]


def _partial(g: Tensor, p: float) -> Tensor:
    """One gradient's share of the total ``p``-norm: ``sum |g|**p`` (``max |g|``
    for ``inf``), so that the shares combine with one more reduction."""
    if g._dtype is D.float16 and p != math.inf:  # powers of half overflow from 256
        g = cast(g, D.float32)
    if p == 2.0:
        return R.sum(E.mul(g, g))
    if p == 1.0:
        return R.sum(E.abs(g))
    if p == math.inf:
        return R.amax(E.abs(g)) if g.numel() else tensor(0.0, dtype=g._dtype, device=g._device)
    if p == 0.0:
        return R.sum(cast(E.ne(g, 0.0), g._dtype))
    return R.sum(E.pow(E.abs(g), p))


def _one_kind(tensors: list[Tensor]) -> bool:
    """Whether the tensors are of one device and one float32/float64 dtype, none
    recording (grads of a create_graph backward): then the kernels are called
    directly on them (``_partials_into``, ``_scale_``), as PyTorch's foreach path."""
    t0 = tensors[0]
    dev, dt = t0._device, t0._dtype
    return dt in (D.float32, D.float64) and all(
        t._device is dev and t._dtype is dt and t._ag is None for t in tensors)


def _partials_into(tensors: list[Tensor]) -> Tensor:
    """The (n,) stack of each tensor's ``sum(t * t)``, each by the kernels that
    ``R.sum(E.mul(t, t))`` calls (so the same bits), into its slot: no op made
    per tensor, and no stack of n 0-d tensors (nanogpt's 40 gradients: 0.77 ms of
    clipping a step, against PyTorch's 0.16)."""
    t0 = tensors[0]
    dev, dt = t0._device, t0._dtype
    parts = empty((len(tensors),), dt, dev)
    scratch = empty((max(t.numel() for t in tensors),), dt, dev)
    mul, add_up = kernel(dev, "mul"), kernel(dev, "sum")
    view, pb, sb = dev.view, parts._storage.buffer, scratch._storage.buffer
    for i, t in enumerate(tensors):
        shape, nd = t._shape, len(t._shape)
        sq = view(sb, shape, cstrides(shape), 0, dt)
        h = view_of(t)
        mul(sq, h, h)
        add_up(view(pb, (1,) * nd, (1,) * nd, i, dt), sq, tuple(range(nd)))
    return parts


def _scale_(tensors: list[Tensor], coef: Tensor) -> None:
    """``t.mul_(coef)`` for each tensor (coef 0-d, of their device and dtype), as
    the kernel calls that makes."""
    dev, dt = coef._device, coef._dtype
    mul, view, cb = kernel(dev, "mul"), dev.view, coef._storage.buffer
    for t in tensors:  # (an expanded gradient is refused, as by mul_)
        check_overlap("mul_", t)
    for t in tensors:
        h = view_of(t)
        mul(h, h, view(cb, t._shape, (0,) * len(t._shape), coef._offset, dt))
        t._storage.version += 1


def get_total_norm(tensors: _TensorOrTensors, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together, as if concatenated into
    one vector (a 0-d tensor on the first tensor's device)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    first = tensors[0].device
    with no_grad():
        if norm_type == 2.0 and _one_kind(tensors):
            parts = _partials_into(tensors)
        elif norm_type > 0:
            parts = stack([_partial(t, norm_type).to(first) for t in tensors])
        if norm_type > 0:
            if norm_type == math.inf:
                total = R.amax(parts)
            elif norm_type in (0.0, 1.0):
                total = R.sum(parts)
            else:
                s = R.sum(parts)
                total = E.sqrt(s) if norm_type == 2.0 else E.pow(s, 1.0 / norm_type)
            dt = tensors[0].dtype
            if all(t.dtype is dt for t in tensors):
                total = total.to(dt)  # the float32 sum of half gradients: back to half
        else:  # 0, negative orders and -inf don't decompose into sums: PyTorch's two-level norm
            norms = [vector_norm(t, norm_type).to(first) for t in tensors]
            total = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and bool(E.logical_or(E.isnan(total), E.isinf(total)).item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the "
            "non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def _grads(parameters: _TensorOrTensors) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grads_with_norm_(parameters: _TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``
    (on the device: no host sync)."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    if not grads:
        return
    with no_grad():
        coef = E.clamp(max_norm / (total_norm + 1e-6), max=1.0)
        if _one_kind(grads) and coef._device is grads[0]._device and \
                coef._dtype is grads[0]._dtype and not coef._shape:
            _scale_(grads, coef)
            return
        per_device: dict[Any, Tensor] = {}
        for g in grads:
            c = per_device.get(g.device)
            if c is None:
                c = per_device[g.device] = coef.to(g.device)
            g.mul_(c)


def clip_grad_norm_(parameters: _TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total
    ``norm_type``-norm is at most ``max_norm``; return the total norm before
    clipping. ``error_if_nonfinite``: RuntimeError when that norm is inf or NaN."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=2)
    grads = _grads(parameters)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters: _TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated spelling of ``clip_grad_norm_``."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: _TensorOrTensors, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]``, in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
