"""``Parameter``: a tensor that a ``Module`` registers as one of its parameters."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that requires grad (by default) and that a Module picks up
    when assigned as an attribute. It shares memory with the tensor it wraps."""

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            from ..ops.creation import empty

            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor, got {type(data).__name__}")
        p = object.__new__(cls)
        p._storage = data._storage
        p._shape = data._shape
        p._strides = data._strides
        p._offset = data._offset
        p._dtype = data._dtype
        p._device = data._device
        p._h = data._h
        p._ag = None
        p._base = None
        if requires_grad:
            p.requires_grad_()
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # all done in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __reduce_ex__(self, protocol: int) -> Any:
        return (Parameter, (self.detach(), self.requires_grad))

    def __deepcopy__(self, memo: dict[int, Any]) -> "Parameter":
        out = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = out
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        return out
