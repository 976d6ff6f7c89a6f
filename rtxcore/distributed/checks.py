"""ReduceOp and the argument checks the collectives share: tensors, lists, dtypes, reduce ops.

A collective starts with :func:`_begin` (its tensor arguments are Tensors, the
group is known, the tensors agree in dtype and device); the helpers below check
what some of them take besides (a list of world size tensors, a root's list,
an input world size times the output, a reduce op). Messages name the
collective and the argument, as PyTorch's do.
"""

from __future__ import annotations

import enum
from typing import Any, Sequence

from ..tensor import Tensor
from .groups import ProcessGroup, _member


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MAX = "max"
    MIN = "min"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


_BITWISE = ("band", "bor", "bxor")


def _tensor(t: Any, what: str) -> Any:
    if type(t) is not Tensor and not isinstance(t, Tensor):
        raise TypeError(f"{what} must be an rtxcore Tensor, not {type(t).__name__}")
    return t


def _begin(op: str, group: Any, **tensors: Any) -> ProcessGroup | None:
    """A collective's first checks: each tensor argument (by its name) is an
    rtxcore Tensor; then the group, None on a rank outside it (the collective
    is a no-op there); two or more tensors must agree in dtype and device."""
    for name, t in tensors.items():
        _tensor(t, f"{op}: {name}")
    pg = _member(group)
    if pg is not None and len(tensors) > 1:
        _dtype_check(op, list(tensors.values()))
    return pg


def _dtype_check(op: str, ts: Sequence[Any]) -> None:
    first = ts[0]
    for t in ts[1:]:
        if t._dtype is not first._dtype:
            raise TypeError(f"{op}: every tensor must have the same dtype; got "
                            f"{first._dtype.name} and {t._dtype.name}")
        if t._device != first._device:
            raise ValueError(f"{op}: every tensor must be on the same device; got "
                             f"{first._device} and {t._device}")


def _tensor_list(op: str, tensors: Any, like: Any, name: str, n: int, where: str = "") -> None:
    """``tensors`` is a list of ``n`` tensors shaped, typed and placed like ``like``."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != n:
        raise ValueError(f"{op}: {where}{name} must be a list of world size ({n}) tensors")
    for i, o in enumerate(tensors):
        _tensor(o, f"{op}: {name}[{i}]")
        if tuple(o.shape) != tuple(like.shape):
            raise ValueError(f"{op}: {name}[{i}] has shape {list(o.shape)}, "
                             f"the tensor {list(like.shape)}")
    _dtype_check(op, [like, *tensors])


def _root_list(op: str, tensors: Any, like: Any, name: str, n: int, me: bool, where: str) -> None:
    """``tensors`` is checked on the root rank (gather's destination, scatter's
    source) and must be absent elsewhere."""
    if me:
        _tensor_list(op, tensors, like, name, n, f"on the {where} rank ")
    elif tensors:
        raise ValueError(f"{op}: {name} is only for the {where} rank")


def _world_times(op: str, whole: Any, whole_name: str, part: Any, part_name: str, n: int,
                 more: str = "") -> None:
    """``whole`` holds world size ``n`` times ``part``'s elements (the flat
    all-gather's output, the flat reduce-scatter's input)."""
    if whole.numel() != n * part.numel():
        raise ValueError(f"{op}: {whole_name} has {whole.numel()} elements, expected world "
                         f"size {n} x {part_name}'s {part.numel()}{more}")


def _reduce_op(op: Any, t: Any, what: str) -> str:
    """The backend's name of reduce op ``op`` (a ReduceOp or its name) for tensor ``t``."""
    if type(op) is not ReduceOp:
        if isinstance(op, str):
            try:
                op = ReduceOp[op.upper()]
            except KeyError:
                raise ValueError(f"{what}: unknown reduce op {op!r}") from None
        if not isinstance(op, ReduceOp):
            raise TypeError(f"{what}: op must be a dist.ReduceOp, not {type(op).__name__}")
    kind = op._value_
    if kind in _BITWISE and t._dtype.is_floating_point:
        raise TypeError(f"{what}: {op.name} needs an integer or bool tensor, not {t._dtype.name}")
    return kind
