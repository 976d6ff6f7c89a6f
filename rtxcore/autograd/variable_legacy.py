"""``Variable``, PyTorch's pre-0.4 wrapper, for scripts that still write it.

Since PyTorch 0.4 a Variable is a Tensor: ``Variable(t, requires_grad=True)``
returns a new leaf tensor on ``t``'s memory (``t`` itself is left as it was), and
``isinstance(x, Variable)`` is true of every tensor. Here too. ``volatile`` is
accepted with PyTorch's warning and has no effect (use ``no_grad()``).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    def __new__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Any:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with rtxcore.no_grad():` "
                          "instead.", UserWarning, stacklevel=2)
        return data.detach().requires_grad_(bool(requires_grad))
