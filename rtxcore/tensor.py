"""``Tensor``: a strided window (shape, strides, offset, dtype) on a ``Storage``.

The class holds layout and conversions; every op lives in ``rtxcore/ops/`` and is
bound here in one block at the bottom, one line per method.
"""

from __future__ import annotations

from typing import Any

from .dispatch.types import DType
from .shape import Shape, is_contiguous, prod
from ._unbuilt import missing_attribute as _missing_attribute
from .storage import ReleasedStorage, Storage  # noqa: F401  (rtxcore.tensor.Storage, as before)


class Tensor:
    __slots__ = ("_storage", "_shape", "_strides", "_offset", "_dtype", "_device",
                 "_h", "_ag", "_base", "__weakref__")

    _storage: Storage
    _shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _offset: int
    _dtype: DType
    _h: Any  # the backend's native view, built on first use
    _ag: Any  # autograd metadata; None for tensors outside any graph
    _base: Any  # for a view: the tensor owning the memory; None otherwise

    # NumPy defers to our reflected operators: ndarray + Tensor gives a Tensor
    __array_priority__ = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "create tensors with rtxcore.tensor(data), rtxcore.zeros(shape), "
            "rtxcore.empty(shape), ... rather than Tensor(...)"
        )

    # -- layout -------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        return Shape(self._shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return Shape(self._shape)
        return self._shape[_norm_dim(dim, len(self._shape))]

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def device(self) -> Any:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return prod(self._shape)

    nelement = numel

    def stride(self, dim: int | None = None) -> Any:
        if dim is None:
            return self._strides
        return self._strides[_norm_dim(dim, len(self._shape))]

    def storage_offset(self) -> int:
        return self._offset

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self._dtype.itemsize

    def is_contiguous(self, memory_format: Any = None) -> bool:
        if memory_format is None:
            return is_contiguous(self._shape, self._strides)
        from ._tensor_api import is_contiguous as laid_out

        return laid_out(self, memory_format)

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    def __getattr__(self, name: str) -> Any:
        # reached only when ordinary lookup fails: a PyTorch method rtxcore leaves
        # out on purpose says why (rtxcore/_unbuilt.py), any other name is the
        # usual AttributeError (private and dunder names at once: hasattr probes)
        if name[0] == "_":
            raise AttributeError(f"'Tensor' object has no attribute '{name}'", name=name, obj=self)
        raise _missing_attribute("Tensor", name, self)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Any:
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        n = prod(self._shape)
        if n != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {'more than one value' if n else 'no values'} "
                f"is ambiguous (shape {tuple(self._shape)}); use .any() or .all()"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self._one("float"))

    def __int__(self) -> int:
        return int(self._one("int"))

    def __complex__(self) -> complex:
        return complex(self._one("complex"))

    def __index__(self) -> int:
        if self._dtype.kind not in "iub":
            raise TypeError(f"only integer tensors can be converted to an index, not {self._dtype.name}")
        return int(self._one("index"))

    def _one(self, what: str) -> Any:
        if prod(self._shape) != 1:
            raise ValueError(
                f"only one-element tensors can be converted to Python scalars "
                f"({what}() of a tensor of shape {tuple(self._shape)})"
            )
        return self.item()

    def __repr__(self) -> str:
        from ._format import format_tensor

        return format_tensor(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        # as PyTorch's: a 0-d tensor formats its number (f"{loss}" is "0.25", and
        # f"{loss:.3f}" works); others print as str() and take no format spec
        if not self._shape:
            return format(self.item(), spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return repr(self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        arr = self.numpy()  # on cpu a view, elsewhere a host copy (no cpu backend needed)
        if dtype is not None:
            arr = arr.astype(dtype, copy=False)
        return arr

    # DLPack: zero-copy exchange with NumPy (cpu), CuPy (cuda), PyTorch, ...
    def __dlpack__(self, **kwargs: Any) -> Any:
        if self.requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        from .ops.core import view_of

        return self._dlpack_backend().to_dlpack(view_of(self), **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._dlpack_backend().dlpack_device, self._device.index)

    def _dlpack_backend(self) -> Any:
        from .ops.core import ready_device

        b = ready_device(self._device).backend
        if b.dlpack_device is None:
            raise BufferError(f"{self._device} tensors can't be exchanged through DLPack "
                              f"(the {b.name} backend doesn't support it); use .cpu() first")
        return b

    def __reduce_ex__(self, protocol: int) -> Any:
        from .ops.creation import _rebuild

        d = self.detach()
        return (_rebuild, (d.numpy(), str(self._device),
                           self.requires_grad))

    def __deepcopy__(self, memo: dict[int, Any]) -> "Tensor":
        """A copy with its own memory; a leaf stays a leaf (requires_grad and .grad
        copied), as in PyTorch, which refuses to deep-copy non-leaves too."""
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment; use .detach().clone() for a non-leaf"
            )
        out = self.detach().clone()
        memo[id(self)] = out
        if self.requires_grad:
            out.requires_grad_()
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        return out

    def __copy__(self) -> "Tensor":
        return self.clone()

    @property
    def mT(self) -> "Tensor":
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    @property
    def mH(self) -> "Tensor":
        return self.mT

def _norm_dim(dim: int, ndim: int) -> int:
    from .shape import normalize_dim

    return normalize_dim(dim, ndim)


# -- the method block: every op is a function in rtxcore/ops; these bind them ----

from .ops import creation as _c  # noqa: E402
from .ops import elementwise as _e  # noqa: E402
from .ops import indexing as _i  # noqa: E402
from .ops import linalg as _l  # noqa: E402
from .ops import reduction as _r  # noqa: E402
from .ops import views as _v  # noqa: E402

T = Tensor
# arithmetic operators
T.__add__ = T.__radd__ = _e.add
T.__sub__ = _e.sub
T.__rsub__ = lambda a, b: _e.sub(b, a)
T.__mul__ = T.__rmul__ = _e.mul
T.__truediv__ = _e.div
T.__rtruediv__ = lambda a, b: _e.div(b, a)
T.__floordiv__ = _e.floor_divide
T.__rfloordiv__ = lambda a, b: _e.floor_divide(b, a)
T.__mod__ = _e.remainder
T.__rmod__ = lambda a, b: _e.remainder(b, a)
T.__pow__ = _e.pow
T.__rpow__ = lambda a, b: _e.pow(b, a)
T.__matmul__ = _l.matmul
T.__rmatmul__ = lambda a, b: _l.matmul(b, a)
T.__neg__ = _e.neg
T.__pos__ = lambda a: a
T.__abs__ = _e.abs
T.__invert__ = _e.bitwise_not
T.__and__ = T.__rand__ = _e.logical_and_bitwise
T.__or__ = T.__ror__ = _e.logical_or_bitwise
T.__xor__ = T.__rxor__ = _e.logical_xor_bitwise
T.__iadd__ = _e.add_
T.__isub__ = _e.sub_
T.__imul__ = _e.mul_
T.__itruediv__ = _e.div_
T.__ifloordiv__ = _e.floor_divide_
T.__imod__ = _e.remainder_
T.__ipow__ = _e.pow_
# comparisons
T.__eq__ = _e.eq_operator
T.__ne__ = _e.ne_operator
T.__lt__ = _e.lt
T.__le__ = _e.le
T.__gt__ = _e.gt
T.__ge__ = _e.ge
# elementwise methods (x.exp(), x.add_(y), ...)
for _name in _e.METHODS:
    setattr(T, _name, getattr(_e, _name))
for _name in _r.METHODS:
    setattr(T, _name, getattr(_r, _name))
for _name in _v.METHODS:
    setattr(T, _name, getattr(_v, _name))
for _name in _i.METHODS:
    setattr(T, _name, getattr(_i, _name))
for _name in _l.METHODS:
    setattr(T, _name, getattr(_l, _name))
for _name in _c.METHODS:
    setattr(T, _name, getattr(_c, _name))
from .ops import tensor_methods as _mo  # noqa: E402

for _name in _mo.METHODS:
    setattr(T, _name, getattr(_mo, _name))
T.is_cuda = property(_mo.is_cuda)
from .ops import predicates as _p  # noqa: E402

for _name, _prop in _p.PROPERTIES.items():
    setattr(T, _name, _prop)
for _name in _p.METHODS:
    setattr(T, _name, getattr(_p, _name))
from .ops import aliases as _al  # noqa: E402

for _name in _al.METHODS:
    setattr(T, _name, getattr(_al, _name))
T.real = property(_al.real)
T.where = _e.where_method
T.contiguous = _v.contiguous_method
T.prod = _r.prod_
for _name, _dt in _c.CONVERSIONS.items():
    setattr(T, _name, _c._converter(_dt))
T.__getitem__ = _i.getitem
# PyTorch's older API: x.type(), x.data_ptr(), x.cuda()
from . import _tensor_api as _api  # noqa: E402

T.type, T.data_ptr, T.cuda = _api.tensor_type, _api.data_ptr, _api.cuda_method
T.__setitem__ = _i.setitem
T.T = property(_v.T_property)
# autograd: requires_grad, grad, grad_fn, is_leaf, backward, detach, hooks
from .autograd import variable as _ag  # noqa: E402

for _name in _ag.PROPERTIES:
    setattr(T, _name, getattr(_ag, _name))
for _name in _ag.METHODS:
    setattr(T, _name, getattr(_ag, _name))
del T, _name, _dt, _prop
