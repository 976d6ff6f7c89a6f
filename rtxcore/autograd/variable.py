"""The autograd side of ``Tensor``: ``requires_grad``, ``grad``, ``grad_fn``,
``is_leaf``, ``backward``, ``detach``, ``retain_grad``, ``register_hook``.
Bound onto the class at the bottom of tensor.py."""

from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable

from ..tensor import Tensor
from .tape import Meta, RemovableHandle, _add_hook, _type_name, alias


def _get_requires_grad(self: Tensor) -> bool:
    m = self._ag
    return m is not None and m.requires_grad


def _set_requires_grad(self: Tensor, flag: bool) -> None:
    flag = bool(flag)
    m = self._ag
    if m is not None and m.grad_fn is not None:
        if flag:
            return
        raise RuntimeError(
            "you can only change requires_grad flags of leaf variables. If you want to use "
            "a computed variable in a subgraph that doesn't require differentiation use "
            "var_no_grad = var.detach()."
        )
    if flag and self._dtype.kind != "f":
        raise RuntimeError(
            f"only Tensors of floating point dtype can require gradients (got {self._dtype.name})"
        )
    if m is None:
        if flag:
            self._ag = Meta(None, 0, True)
    else:
        m.requires_grad = flag


requires_grad = property(_get_requires_grad, _set_requires_grad, doc=(
    "Whether ops on this tensor are recorded for backward. Settable on leaves."))


def requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
    _set_requires_grad(self, requires_grad)
    return self


def _get_grad_fn(self: Tensor) -> Any:
    m = self._ag
    return None if m is None else m.grad_fn


grad_fn = property(_get_grad_fn, doc="The node that made this tensor (None for leaves).")


def _is_leaf(self: Tensor) -> bool:
    m = self._ag
    return m is None or m.grad_fn is None


is_leaf = property(_is_leaf, doc="True for tensors not made by a recorded op.")


def _get_grad(self: Tensor) -> Any:
    m = self._ag
    if m is None:
        return None
    if m.grad_fn is not None and not m.retains_grad and m.grad is None:
        warnings.warn(
            "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its "
            ".grad attribute won't be populated during autograd.backward(). If you indeed want "
            "the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the "
            "non-leaf Tensor.", UserWarning, stacklevel=2)
    return m.grad


def _set_grad(self: Tensor, value: Any) -> None:
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got {type(value).__name__}")
        if value._shape != self._shape:
            raise RuntimeError(
                f"assigned grad has data of a different size: shape {tuple(value._shape)}, "
                f"but the tensor has shape {tuple(self._shape)}"
            )
        if value._dtype is not self._dtype:
            raise RuntimeError(f"assigned grad has data of a different type ({value._dtype.name} vs {self._dtype.name})")
        if value._device is not self._device:
            raise RuntimeError(f"assigned grad has data located on a different device ({value._device} vs {self._device})")
    m = self._ag
    if m is None:
        if value is None:
            return
        m = self._ag = Meta(None, 0, False)
    m.grad = value


grad = property(_get_grad, _set_grad, doc=(
    "The gradient accumulated by backward: allocated on the first one, added to "
    "by later ones. None until then."))


def _retains_grad(self: Tensor) -> bool:
    m = self._ag
    return m is not None and m.retains_grad


retains_grad = property(_retains_grad)


def retain_grad(self: Tensor) -> None:
    """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
    m = self._ag
    if m is None or not m.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if m.grad_fn is None or m.retains_grad:
        return  # leaves keep their grad anyway
    m.retains_grad = True
    node = m.grad_fn
    if node._retain is None:
        node._retain = {}
    node._retain[m.output_nr] = weakref.ref(m)


def register_hook(self: Tensor, hook: Callable[[Tensor], Any]) -> RemovableHandle:
    """``hook(grad) -> Tensor or None`` runs when this tensor's gradient is computed;
    a returned tensor replaces the gradient."""
    m = self._ag
    if m is None or not m.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if m.grad_fn is not None:
        return _add_hook(m.grad_fn, m.output_nr, hook)
    if m.hooks is None:
        m.hooks = []
    entry = (0, hook)
    m.hooks.append(entry)
    return RemovableHandle(m.hooks, entry)


def register_post_accumulate_grad_hook(self: Tensor,
                                       hook: Callable[[Tensor], None]) -> RemovableHandle:
    """``hook(tensor)`` runs after a backward pass has added to this leaf's ``.grad``
    (``tensor.grad`` is up to date when it runs); its return value is ignored.
    ``DistributedDataParallel`` starts a bucket's all-reduce from such hooks."""
    m = self._ag
    if m is None or not m.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if m.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if m.post_hooks is None:
        m.post_hooks = []
    m.post_hooks.append(hook)
    return RemovableHandle(m.post_hooks, hook)


def backward(self: Tensor, gradient: Any = None, retain_graph: Any = None,
             create_graph: bool = False, inputs: Any = None) -> None:
    """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see
    ``rtxcore.autograd.backward``)."""
    from .engine import backward as _backward

    _backward(self, gradient, retain_graph, create_graph, inputs)


def detach(self: Tensor) -> Tensor:
    """A tensor on the same memory, outside the graph (in-place writes to either
    are seen by both; autograd's version check still guards saved tensors)."""
    return alias(self)


def detach_(self: Tensor) -> Tensor:
    """Take this tensor out of the graph, in place: it becomes a leaf that needs no grad."""
    if self._base is not None and self._base._ag is not None and self._ag is not None \
            and self._ag.grad_fn is not None:
        raise RuntimeError(
            f"can't detach_() a view ({_type_name(self)}) of a tensor in the graph; use detach()"
        )
    self._ag = None
    return self


def _get_data(self: Tensor) -> Tensor:
    return alias(self)


def _set_data(self: Tensor, value: Tensor) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"data must be a Tensor, not {type(value).__name__}")
    self._storage = value._storage
    self._shape = value._shape
    self._strides = value._strides
    self._offset = value._offset
    self._dtype = value._dtype
    self._device = value._device
    self._h = value._h
    self._base = value._base


data = property(_get_data, _set_data, doc="This tensor's values outside the graph (a detached alias).")


def _output_nr(self: Tensor) -> int:
    m = self._ag
    return 0 if m is None else m.output_nr


output_nr = property(_output_nr)

PROPERTIES = ["requires_grad", "grad_fn", "is_leaf", "grad", "retains_grad", "data", "output_nr"]
METHODS = ["requires_grad_", "retain_grad", "register_hook", "register_post_accumulate_grad_hook",
           "backward", "detach", "detach_"]
