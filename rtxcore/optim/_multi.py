"""Multi-tensor optimizer steps: a parameter group's update as whole-buffer ops.

An optimizer step is a dozen elementwise ops per parameter. At several
microseconds of dispatch each, a model of many small parameters spends more of
its step dispatching than computing: the digits CNN's Adam ran ~100 ops a step
over 8 parameters, half PyTorch's whole step. This is PyTorch's ``foreach``
idea on rtxcore's ops: the group's gradients are copied into one flat buffer;
the optimizer's per-parameter state tensors are pieces (views) of flat buffers
of their own; the update rule runs once over the flat buffers; and each
parameter receives its piece of the update. About fifteen ops plus one or two
per parameter, each a kernel call.

An elementwise op computes each element of a flat buffer exactly as it does
in the parameter's own tensor, so the results are bit for bit those of the
per-parameter loop (the tests compare them).
"""

from __future__ import annotations

from typing import Any

from ..ops.core import as_view, cstrides, empty, kernel, scalar_for, view_of
from ..tensor import Tensor


def flatten(tensors: list[Tensor]) -> Tensor:
    """A new contiguous 1-D tensor holding ``tensors`` one after the other (all of
    one dtype and device): one copy kernel per tensor, no ops recorded."""
    first = tensors[0]
    dev, dt = first._device, first._dtype
    flat = empty((sum(t.numel() for t in tensors),), dt, dev)
    copy = kernel(dev, "copy")
    buf, off = flat._storage.buffer, 0
    for t in tensors:
        shape = t._shape
        copy(dev.view(buf, shape, cstrides(shape), off, dt), view_of(t))
        off += t.numel()
    return flat


def pieces(flat: Tensor, shapes: list[tuple[int, ...]]) -> list[Tensor]:
    """Views of consecutive pieces of ``flat`` with ``shapes``."""
    out, off = [], flat._offset
    for shape in shapes:
        out.append(as_view(flat, shape, cstrides(shape), off))
        off += _numel(shape)
    return out


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def flat_state(cache: dict[Any, Any], key: Any, states: list[dict[str, Any]], name: str,
               shapes: list[tuple[int, ...]]) -> Tensor:
    """The flat buffer whose pieces are ``states[i][name]``. Made (and its pieces
    put in the states) when the states hold anything else: on the first step, or
    after ``load_state_dict``, a device move, or a change in which parameters
    have gradients."""
    cur = [st[name] for st in states]
    hit = cache.get((key, name))
    if hit is not None and len(hit[1]) == len(cur) and all(a is b for a, b in zip(hit[1], cur)):
        return hit[0]
    flat = flatten(cur)
    views = pieces(flat, shapes)
    for st, v in zip(states, views):
        st[name] = v
    cache[(key, name)] = (flat, views)
    return flat


def add_pieces_(params: list[Tensor], flat: Tensor, scale: float | None = None) -> None:
    """``p.mul_(scale)`` (when given), then ``p.add_(piece)`` for each parameter
    and its piece of ``flat``, as kernel calls (the per-parameter loop's own
    kernels and scalar, so its rounding)."""
    dev, dt = flat._device, flat._dtype
    add = kernel(dev, "add")
    mul = kernel(dev, "mul") if scale is not None else None
    c = scalar_for(scale, dt) if scale is not None else None
    buf, off = flat._storage.buffer, flat._offset
    for p in params:
        v = view_of(p)
        shape = p._shape
        if mul is not None:
            mul(v, v, c)
        add(v, v, dev.view(buf, shape, cstrides(shape), off, dt))
        p._storage.version += 1
        off += _numel(shape)


def eligible(group: dict[str, Any], items: list[tuple[Any, ...]]) -> bool:
    """Whether a group's step (its (param, grad, state, step) items) can run
    flat: ``foreach`` not False, two or more parameters of one dtype and device
    with gradients of that dtype, plain (not tensor) step counts all equal."""
    if group.get("foreach") is False or group.get("capturable") or len(items) < 2:
        return False
    p0, _, _, step = items[0]
    if isinstance(step, Tensor):
        return False
    dev, dt = p0._device, p0._dtype
    for p, g, _, s in items:
        if (p._device is not dev or p._dtype is not dt or g._dtype is not dt
                or g._device is not dev or s != step or isinstance(s, Tensor)):
            return False
    return True


def state_like_params(items: list[tuple[Any, ...]], names: tuple[str, ...]) -> bool:
    """Whether every state tensor ``names`` of the items is of its parameter's
    dtype and device (after ``model.half()`` the state stays float32: the
    per-parameter loop promotes, where the flat step's kernels would not)."""
    for p, _, st, _ in items:
        for name in names:
            t = st.get(name)
            if isinstance(t, Tensor) and (t._dtype is not p._dtype or t._device is not p._device):
                return False
    return True
