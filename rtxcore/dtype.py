"""The nine dtypes and PyTorch's type promotion, Python scalars included."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dispatch.types import DType

bool_ = DType("bool", "b", np.bool_)
uint8 = DType("uint8", "u", np.uint8)
int8 = DType("int8", "i", np.int8)
int16 = DType("int16", "i", np.int16)
int32 = DType("int32", "i", np.int32)
int64 = DType("int64", "i", np.int64)
float16 = DType("float16", "f", np.float16)
float32 = DType("float32", "f", np.float32)
float64 = DType("float64", "f", np.float64)

ALL: tuple[DType, ...] = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL}
BY_NAME.update({"bool_": bool_, "half": float16, "float": float32, "double": float64,
                "long": int64, "int": int32, "short": int16})
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in ALL}

# Aliases PyTorch users write. ``bool`` shadows the builtin in this module, which
# therefore calls the builtin only as ``builtins_bool`` (as ``int`` / ``float``).
half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001
bool = bool_  # noqa: A001


class MissingDType:
    """A PyTorch dtype rtxcore does not have (``bfloat16``, the complex types).
    The name exists so that scripts which only mention it (a table of dtype
    choices, ``autocast(..., enabled=False)``) run; any tensor of it is refused
    by ``as_dtype`` with a TypeError saying what to use instead."""

    __slots__ = ("name", "instead")

    def __init__(self, name: str, instead: str) -> None:
        self.name = name
        self.instead = instead

    def __repr__(self) -> str:
        return f"rtxcore.{self.name}"

    def __reduce__(self) -> str:
        return self.name


bfloat16 = MissingDType("bfloat16", "float16 (or float32)")
complex64 = MissingDType("complex64", "two float32 tensors (real and imaginary parts)")
complex128 = MissingDType("complex128", "two float64 tensors (real and imaginary parts)")
cfloat, cdouble = complex64, complex128
_MISSING = {m.name: m for m in (bfloat16, complex64, complex128)}

_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def category(d: DType) -> int:
    """0 for bool, 1 for integers, 2 for floats."""
    return _CATEGORY[d.kind]


_state: dict[str, DType] = {"default": float32}


def get_default_dtype() -> DType:
    return _state["default"]


def set_default_dtype(d: DType) -> None:
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _state["default"] = d


def as_dtype(d: Any) -> DType:
    """Accept a DType, a numpy dtype, a dtype name or a Python type."""
    if type(d) is DType:
        return d
    if d is None:
        return get_default_dtype()
    if isinstance(d, str):
        try:
            return BY_NAME[d]
        except KeyError:
            if d in _MISSING:
                raise TypeError(f"rtxcore has no {d} dtype; use {_MISSING[d].instead}") from None
            raise TypeError(f"unknown dtype {d!r}; known: {', '.join(x.name for x in ALL)}") from None
    if type(d) is MissingDType:
        raise TypeError(f"rtxcore has no {d.name} dtype; use {d.instead}")
    if d is builtins_bool:
        return bool_
    if d is builtins_int:
        return int64
    if d is builtins_float:
        return get_default_dtype()
    try:
        return _BY_NUMPY[np.dtype(d)]
    except (TypeError, KeyError):
        raise TypeError(f"unsupported dtype {d!r}; rtxcore has {', '.join(x.name for x in ALL)}") from None


import builtins as _builtins  # noqa: E402

builtins_bool, builtins_int, builtins_float = _builtins.bool, _builtins.int, _builtins.float


def _promote_pair(a: DType, b: DType) -> DType:
    if a is b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        return a if a.itemsize >= b.itemsize else b
    # Integers: unsigned meets signed needs a signed type that holds both.
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    return {1: int16, 2: int32, 4: int64, 8: int64}[u.itemsize]


_PROMOTE: dict[tuple[DType, DType], DType] = {
    (a, b): _promote_pair(a, b) for a in ALL for b in ALL
}


def promote_types(a: DType, b: DType) -> DType:
    """The smallest dtype both convert to safely (``torch.promote_types``)."""
    return _PROMOTE[(as_dtype(a), as_dtype(b))]


def scalar_dtype(value: Any) -> DType:
    """The dtype a Python scalar would get on its own."""
    t = type(value)
    if t is builtins_bool or t is np.bool_:
        return bool_
    if t is builtins_int or isinstance(value, np.integer):
        return int64
    if t is builtins_float or isinstance(value, np.floating):
        return get_default_dtype()
    raise TypeError(f"expected a number, got {type(value).__name__}")


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    # PyTorch's combine_categories: a lower-priority operand only matters when
    # it is of a higher category (or the higher one is bool).
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return _PROMOTE[(higher, lower)]
    return higher


def promote_with_scalar(d: DType, value: Any) -> DType:
    """Result dtype of ``tensor(dtype=d) op value`` for a Python scalar.

    The scalar only counts by category: ``int32 + 2`` stays int32 and
    ``float16 + 2.5`` stays float16, but ``int32 + 2.5`` gives the default float.
    """
    return _combine(d, scalar_dtype(value))  # type: ignore[return-value]


def result_type(*operands: Any) -> DType:
    """PyTorch's ``result_type``: tensors with dims outrank 0-dim tensors, which
    outrank Python scalars; a lower rank only counts for a higher category."""
    dims: DType | None = None
    zero: DType | None = None
    scal: DType | None = None
    for x in operands:
        d = getattr(x, "_dtype", None)
        if d is None:
            sd = scalar_dtype(x)
            scal = sd if scal is None else _PROMOTE[(scal, sd)]
        elif len(x._shape) == 0:
            zero = d if zero is None else _PROMOTE[(zero, d)]
        else:
            dims = d if dims is None else _PROMOTE[(dims, d)]
    result = _combine(dims, _combine(zero, scal))
    if result is None:
        raise TypeError("result_type() needs at least one operand")
    return result


# -- memory formats -------------------------------------------------------------------


class memory_format:  # noqa: N801  (PyTorch's name)
    """``rtxcore.contiguous_format`` / ``channels_last`` / ``preserve_format``: the
    layout ``clone``, ``empty_like`` and friends, ``Tensor.contiguous`` and
    ``Tensor.to`` give their result.

    ``channels_last`` is real: a 4-D (N, C, H, W) tensor gets NHWC strides
    (``(H*W*C, 1, W*C, C)``), its memory ordered N, H, W, C. Every kernel takes
    any strides, so values never depend on it; ops return row-major results
    whatever their inputs' layout, and ``conv2d`` does not pick a kernel by it.
    ``preserve_format`` keeps a channels_last input channels_last and makes
    anything else row-major.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"rtxcore.{self.name}"

    def __reduce__(self) -> str:
        return self.name


preserve_format = memory_format("preserve_format")
contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

_CL_RANK = {channels_last: 4, channels_last_3d: 5}


def check_memory_format(fn: str, mf: Any, ndim: Any = None) -> memory_format:
    """Validate ``memory_format=`` of ``fn`` for a tensor of ``ndim`` dims."""
    if not isinstance(mf, memory_format):
        raise TypeError(f"{fn}(): argument 'memory_format' must be rtxcore.memory_format "
                        f"(rtxcore.contiguous_format, channels_last, channels_last_3d or "
                        f"preserve_format), not {type(mf).__name__}")
    rank = _CL_RANK.get(mf)
    if rank is not None and ndim is not None and ndim != rank:
        raise RuntimeError(f"{fn}(): required rank {rank} tensor to use {mf.name} format, "
                           f"got a {ndim}-D tensor")
    return mf


def channels_last_strides(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """NHWC (NDHWC) strides of an (N, C, *spatial) shape."""
    n, c, *sp = shape
    strides = [0] * len(shape)
    acc = c
    strides[1] = 1
    for i in range(len(shape) - 1, 1, -1):
        strides[i] = acc
        acc *= shape[i]
    strides[0] = acc
    return tuple(strides)


def suggest_memory_format(shape: tuple[Any, ...], strides: tuple[Any, ...]) -> memory_format:
    """channels_last for a 4-D (5-D) tensor laid out NHWC and not also row-major."""
    from .shape import is_contiguous

    nd = len(shape)
    if nd in (4, 5) and not is_contiguous(shape, strides):
        want = channels_last_strides(shape)
        if all(s == w or n == 1 for s, w, n in zip(strides, want, shape)):
            return channels_last if nd == 4 else channels_last_3d
    return contiguous_format
