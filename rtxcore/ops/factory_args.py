"""The arguments tensor factories share: PyTorch's ``requires_grad=`` keyword (a
generated wrapper), sizes given as ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``,
the dtype and device a ``*_like``/``new_*`` factory takes from its model, and
whether ``preserve_format`` means row-major for it."""

from __future__ import annotations

import functools
from typing import Any

from .. import dtype as D
from ..autograd.tape import parameters
from ..shape import ints_arg, is_contiguous as _rowmajor
from ..tensor import Tensor


def _grad_option(fn: Any) -> Any:
    """Give a creation function PyTorch's ``requires_grad=`` keyword (a wrapper
    generated with ``fn``'s own parameters, so a call costs next to nothing)."""
    pos, star, kwonly, dstar = parameters(fn)
    params = pos + [f"*{star}" if star else "*"] + kwonly + ["requires_grad"] + (
        [f"**{dstar}"] if dstar else [])
    call = pos + ([f"*{star}"] if star else []) + [f"{k}={k}" for k in kwonly] + (
        [f"**{dstar}"] if dstar else [])
    src = (f"def {fn.__name__}({', '.join(params)}):\n"
           f"    t = fn({', '.join(call)})\n"
           f"    return t.requires_grad_() if requires_grad else t\n")
    ns: dict[str, Any] = {"fn": fn}
    exec(compile(src, f"<creation {fn.__name__}>", "exec"), ns)  # noqa: S102
    create = ns[fn.__name__]
    create.__defaults__ = fn.__defaults__
    create.__kwdefaults__ = {**(fn.__kwdefaults__ or {}), "requires_grad": False}
    functools.update_wrapper(create, fn)
    del create.__wrapped__  # its own signature (with requires_grad) is the true one
    create.__annotations__ = {**fn.__annotations__, "requires_grad": "bool"}
    return create


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    shape = ints_arg(size)
    for n in shape:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(shape)}")
    return shape


def _sizes(fname: str, sizes: tuple[Any, ...], size: Any) -> tuple[int, ...]:
    """The shape of ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if size is None:
        return _size(sizes)
    if sizes:
        raise TypeError(f"{fname}() got multiple values for argument 'size'")
    return _size((size,))


def _plain_layout(x: Tensor) -> bool:
    """Whether ``preserve_format`` means row-major for ``x``: any rank but 4 and 5,
    and 4-/5-D tensors that are row-major already (the common case: no format
    to work out)."""
    return len(x._shape) not in (4, 5) or _rowmajor(x._shape, x._strides)


def _like(x: Tensor, dtype: Any, device: Any) -> tuple[D.DType, Any]:
    return (x._dtype if dtype is None else D.as_dtype(dtype)), (x._device if device is None else device)
