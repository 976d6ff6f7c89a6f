"""PyTorch's ``out=`` keyword, in one place.

``with_out(fn)`` gives ``fn`` an ``out=None`` keyword. Without it the call goes
straight to ``fn`` (a wrapper generated with ``fn``'s own parameters, so it costs
one call). With it, as in PyTorch:

- no autograd: a RuntimeError when grad mode is on and an input or ``out``
  requires grad;
- ``out`` is resized to the result's shape, with a UserWarning when it had
  elements (an empty ``out`` is resized silently);
- the result must be castable to ``out``'s dtype (no float -> int, no
  non-bool -> bool) and on ``out``'s device;
- the function returns ``out`` (a tuple of them for ``max(x, dim)`` and the like).

Factories (``zeros``, ``arange``, ``randn``, ...) take their dtype and device
from ``out`` when those are not given, and ``sum``/``prod``/``cumsum``/``cumprod``
accumulate in ``out``'s dtype.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from ..autograd.grad_mode import _state
from ..autograd.tape import FRONTENDS, _exact_wrapper, parameters
from ..tensor import Tensor
from .core import can_cast, empty, mixed_devices, write_result


def _needs_grad(v: Any) -> bool:
    m = getattr(v, "_ag", None)
    return m is not None and m.requires_grad


def check(name: str, out: Any, inputs: tuple[Any, ...]) -> None:
    """Refuse ``out=`` when autograd would have to record through it."""
    if not _state.enabled:
        return
    outs = out if isinstance(out, (tuple, list)) else (out,)
    found = any(_needs_grad(o) for o in outs)
    for v in inputs:
        if found:
            break
        if isinstance(v, (list, tuple)):
            found = any(_needs_grad(t) for t in v)
        else:
            found = _needs_grad(v)
    if found:
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, "
            "but one of the arguments requires grad."
        )


def resize_(t: Tensor, shape: tuple[int, ...]) -> None:
    """Give ``t`` new contiguous memory of ``shape`` (its old contents are lost),
    as PyTorch resizes an ``out=`` tensor."""
    fresh = empty(shape, t._dtype, t._device)
    t._storage = fresh._storage
    t._shape = fresh._shape
    t._strides = fresh._strides
    t._offset = 0
    t._h = fresh._h
    t._base = None


def write(name: str, out: Any, result: Any) -> Any:
    """Store ``result`` into ``out`` (PyTorch's rules above) and return ``out``."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors")
        written = [write(name, o, r) for o, r in zip(out, result)]
        return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if out._device is not result._device:
        raise mixed_devices(name, result, out)
    if result._dtype is not out._dtype and not can_cast(result._dtype, out._dtype):
        raise RuntimeError(f"{name}(): result type {result._dtype.name} can't be cast to the desired "
                           f"output type {out._dtype.name}")
    if result._storage is out._storage:
        result = result.clone()  # e.g. ``add(a, b, out=a)`` returning a view of ``a``
    if out._shape != result._shape:
        if out.numel():
            warnings.warn(
                f"{name}(): an output with one or more elements was resized since it had shape "
                f"{list(out._shape)}, which does not match the required output shape "
                f"{list(result._shape)}. Resize it to zero elements first (or pass an empty "
                "tensor) to reuse it silently.", UserWarning, stacklevel=3)
        resize_(out, result._shape)
    prev = _state.enabled
    _state.enabled = False
    try:
        write_result(out, result, name, allow_any_cast=True)
    finally:
        _state.enabled = prev
    return out


_CODE: dict[str, Any] = {}


def with_out(fn: Callable[..., Any], name: str | None = None, factory: bool = False) -> Callable[..., Any]:
    """``fn`` with an ``out=None`` keyword (see the module docstring). ``factory``:
    ``fn``'s ``dtype``/``device`` keywords default to ``out``'s (factories, and the
    sums that accumulate in the dtype they are asked for)."""
    src = getattr(fn, "__wrapped__", fn)
    pos, star, kwonly, dstar = parameters(src)
    if dstar:
        raise TypeError(f"with_out: {fn.__name__} takes **{dstar}; give it out= by hand")
    name = name or fn.__name__
    params = pos + ([f"*{star}"] if star else ["*"]) + kwonly + ["out"]
    call = ", ".join(pos + ([f"*{star}"] if star else []) + [f"{k}={k}" for k in kwonly])
    inputs = "(" + "".join(f"{a}, " for a in pos) + ")" + (f" + tuple({star})" if star else "")
    fill = ""
    if factory:
        if "dtype" in kwonly:
            fill += "    if dtype is None:\n        dtype = out.dtype\n"
        if "device" in kwonly:
            fill += "    if device is None:\n        device = out.device\n"
    if getattr(fn, "_rtx_inputs", None) is not None:
        # a recording front-end: one generated function does both (no call to
        # the front-end, then to its body, for every rc.add(x, y))
        return _recording_with_out(fn, name, fill, call, inputs)
    body = (f"def _op({', '.join(params)}):\n"
            f"    if out is None:\n"
            f"        return fn({call})\n"
            f"    check(name, out, {inputs})\n"
            f"{fill}"
            f"    return write(name, out, fn({call}))\n")
    code = _CODE.get(body)
    if code is None:  # functions with the same parameters share one compiled wrapper
        code = _CODE[body] = compile(body, "<out=>", "exec")
    ns: dict[str, Any] = {"fn": fn, "name": name, "check": check, "write": write}
    exec(code, ns)  # noqa: S102
    op = ns["_op"]
    op.__code__ = op.__code__.replace(co_name=fn.__name__, co_qualname=fn.__name__)
    functools.update_wrapper(op, fn)
    del op.__wrapped__  # its own signature (with out=) is the true one
    op.__defaults__ = src.__defaults__
    op.__kwdefaults__ = {**(src.__kwdefaults__ or {}), "out": None}
    return op


def _recording_with_out(fn: Callable[..., Any], name: str, fill: str, call: str,
                        inputs: str) -> Callable[..., Any]:
    """``with_out`` of a front-end made by ``@differentiable`` for one or two
    inputs: its own generated wrapper with ``out`` added (the out= path calls the
    front-end ``fn`` as ``with_out``'s wrapper does). Listed with the front-ends,
    so that the profiler swaps its body too."""
    raw = fn.raw  # type: ignore[attr-defined]
    branch = ("    if out is not None:\n"
              f"        check(oname, out, {inputs})\n"
              + "".join("    " + ln + "\n" for ln in fill.splitlines())
              + f"        return write(oname, out, op({call}))\n")
    op = _exact_wrapper(fn._rtx_name, raw, fn._rtx_inputs, branch,  # type: ignore[attr-defined]
                        {"op": fn, "oname": name, "check": check, "write": write},
                        fn._rtx_composite)  # type: ignore[attr-defined]
    functools.update_wrapper(op, fn)
    del op.__wrapped__  # its own signature (with out=) is the true one
    op.raw = raw  # type: ignore[attr-defined]
    FRONTENDS.append(op)
    return op


def _build() -> dict[str, Callable[..., Any]]:
    from . import creation as C
    from . import elementwise as E
    from . import indexing as I
    from . import linalg as L
    from . import reduction as R
    from . import sampling as SM
    from . import scatter as S

    plain = {
        E: ["add", "sub", "mul", "div", "pow", "exp", "log", "log2", "log10", "log1p", "expm1",
            "sqrt", "rsqrt", "abs", "neg", "sin", "cos", "tan", "tanh", "sigmoid", "clamp",
            "maximum", "minimum", "remainder", "floor_divide", "floor", "ceil", "round", "trunc",
            "reciprocal", "sign", "square", "erf", "eq", "ne", "lt", "le", "gt", "ge",
            "logical_and", "logical_or", "logical_not", "logical_xor", "lerp", "addcmul", "addcdiv"],
        R: ["sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod",
            "logsumexp", "std", "var", "all", "any"],
        L: ["matmul", "mm", "bmm", "mv", "dot", "outer"],
        I: ["cat", "stack", "index_select", "gather", "masked_select", "sort", "topk", "nonzero"],
        S: ["index_add"],
        SM: ["multinomial"],
    }
    out: dict[str, Callable[..., Any]] = {}
    for mod, names in plain.items():
        for n in names:
            out[n] = with_out(getattr(mod, n))
    out["prod"] = with_out(R.prod_, "prod", factory=True)
    for n in ("sum", "cumsum", "cumprod"):  # these reduce in out's dtype, as in PyTorch
        out[n] = with_out(getattr(R, n), factory=True)
    out["where"] = with_out(E.where, "where")
    for n in ("zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand", "randn", "randint"):
        out[n] = with_out(getattr(C, n), factory=True)
    # PyTorch's aliases share the wrapped function
    for alias, n in (("clip", "clamp"), ("divide", "div"), ("true_divide", "div"), ("multiply", "mul"),
                     ("subtract", "sub"), ("concat", "cat"), ("concatenate", "cat"),
                     ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                     ("not_equal", "ne")):
        out[alias] = out[n]
    return out


FUNCTIONS = _build()
