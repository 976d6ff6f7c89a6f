"""The wrappers of op front-ends that ``@differentiable`` and ``@inplace``
(rtxcore/autograd/tape.py) make, generated as source with each front-end's own
parameters: a generic ``(*args, **kwargs)`` wrapper, or a call into a shared
recording function, would add a quarter of a microsecond to every call of every
op. Nothing is imported from the tape: each wrapper gets the names it uses as
the globals of its own namespace (which the profiler swaps ``fn`` in).
"""

from __future__ import annotations

from typing import Any, Callable


_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def parameters(fn: Callable[..., Any]) -> tuple[list[str], str | None, list[str], str | None]:
    """``fn``'s parameter names: (positional, *name, keyword-only, **name)."""
    code = fn.__code__
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    pos, kwonly = list(names[:npos]), list(names[npos:npos + nkw])
    i = npos + nkw
    star = names[i] if code.co_flags & _CO_VARARGS else None
    i += star is not None
    dstar = names[i] if code.co_flags & _CO_VARKEYWORDS else None
    return pos, star, kwonly, dstar


# names the generated wrappers use for themselves (a front-end's parameter must not take one)
RESERVED = {"fn", "name", "_state", "_edge1", "attach", "_r", "_ex", "_ey", "out", "op",
             "check", "write", "oname", "oop", "run_inplace"}


def recording_wrapper(name: str, fn: Callable[..., Any], n_inputs: int, ns: dict[str, Any],
                      out_branch: str | None = None, composite: bool = True) -> Callable[..., Any]:
    """The recording wrapper of a one- or two-input op, generated with ``fn``'s own
    parameter list and the recording inlined: a generic ``(*args, **kwargs)``
    wrapper, or a call to a shared recording function, would add a quarter of a
    microsecond to every call of every op.

    For ``def sum(x, dim=None, keepdim=False, *, dtype=None)`` it is::

        def sum(x, dim, keepdim, *, dtype):      # defaults copied from fn
            if getattr(x, "_ag", None) is None or not _state.enabled:
                return fn(x, dim, keepdim, dtype=dtype)
            _ex = _edge1(x)
            if _ex is None:
                return fn(x, dim, keepdim, dtype=dtype)
            _state.enabled = False      # its inner ops record nothing
            try:
                _r = fn(x, dim, keepdim, dtype=dtype)
            finally:
                _state.enabled = True
            if _r._dtype.kind != "f" or _r._ag is not None or _r is x:
                return _r               # not differentiable, or an input passed through
            attach(name, _r, (x,), (_ex,), (dim, keepdim), {"dtype": dtype})
            return _r

    ``ns``: the names it uses (``fn``, ``name``, ``_state``, ``_edge1``,
    ``attach``), its module globals. ``out_branch`` (rtxcore/ops/out.py's):
    source run first when a keyword-only ``out`` (added to the parameters) is
    not None, with names of ``ns`` too. Not ``composite`` (``fn`` calls kernels
    only): ``_r = fn(...)`` without switching recording off around it.
    """
    pos, star, kwonly, dstar = parameters(fn)
    if len(pos) < n_inputs:
        raise TypeError(f"@differentiable({name!r}): {fn.__name__} takes fewer than {n_inputs} positional inputs")
    clash = RESERVED.intersection(pos + kwonly + [star, dstar])
    if clash:
        raise TypeError(f"@differentiable({name!r}): {fn.__name__}'s parameter {sorted(clash)[0]!r} "
                        "is a name the generated wrapper uses")
    inputs, rest = pos[:n_inputs], pos[n_inputs:]
    outs = ["out"] if out_branch is not None else []
    params = pos + ([f"*{star}"] if star else (["*"] if kwonly or outs else [])) + kwonly + outs + (
        [f"**{dstar}"] if dstar else [])
    call = ", ".join(pos + ([f"*{star}"] if star else []) + [f"{k}={k}" for k in kwonly] + (
        [f"**{dstar}"] if dstar else []))
    args = "(" + "".join(f"{a}, " for a in rest) + ")"
    if star:
        args = f"{args} + {star}"
    kwargs = ("{" + ", ".join(f"{k!r}: {k}" for k in kwonly) + "}") if kwonly else "None"
    if dstar:
        kwargs = f"({{**{kwargs}, **{dstar}}} or None)" if kwonly else f"({dstar} or None)"
    if n_inputs == 1:
        x, = inputs
        test = f"getattr({x}, '_ag', None) is None"
        edges = f"_ex = _edge1({x})"
        none = "_ex is None"
        same = f"_r is {x}"
        ins, es = f"({x},)", "(_ex,)"
    else:
        x, y = inputs
        test = f"(getattr({x}, '_ag', None) is None and getattr({y}, '_ag', None) is None)"
        edges = f"_ex = _edge1({x}); _ey = _edge1({y})"
        none = "_ex is None and _ey is None"
        same = f"_r is {x} or _r is {y}"
        ins, es = f"({x}, {y})", "(_ex, _ey)"
    src = (f"def {fn.__name__}({', '.join(params)}):\n"
           + (out_branch if out_branch is not None else "")
           + f"    if {test} or not _state.enabled:\n"
           f"        return fn({call})\n"
           f"    {edges}\n"
           f"    if {none}:\n"
           f"        return fn({call})\n"
           + (f"    _state.enabled = False\n"
              f"    try:\n"
              f"        _r = fn({call})\n"
              f"    finally:\n"
              f"        _state.enabled = True\n" if composite else f"    _r = fn({call})\n")
           + f"    if _r._dtype.kind != 'f' or _r._ag is not None or {same}:\n"
           f"        return _r\n"
           f"    attach(name, _r, {ins}, {es}, {args}, {kwargs})\n"
           f"    return _r\n")
    return _made(src, f"<differentiable {name}>", fn, ns,
                 {**(fn.__kwdefaults__ or {}), "out": None} if outs else fn.__kwdefaults__)


def inplace_wrapper(fn: Callable[..., Any], inputs: int, ns: dict[str, Any]) -> Callable[..., Any] | None:
    """``@inplace``'s wrapper generated with ``fn``'s own parameters (as
    ``recording_wrapper``), for an op whose differentiable inputs are required
    positional parameters (``add_(x, y, *, alpha=1)``); None for the others
    (``clamp_(x, min=None, max=None)``), which keep the generic wrapper. ``ns``:
    ``fn``, ``oop`` (the out-of-place twin), ``name``, ``_state``, ``run_inplace``."""
    pos, star, kwonly, dstar = parameters(fn)
    required = pos[:len(pos) - len(fn.__defaults__ or ())]
    if star or dstar or len(required) < 1 + inputs or RESERVED.intersection(pos + kwonly):
        return None
    x, ins = pos[0], pos[1:1 + inputs]
    test = " and ".join([f"getattr({x}, '_ag', None) is None",
                         f"getattr(getattr({x}, '_base', None), '_ag', None) is None"]
                        + [f"getattr({a}, '_ag', None) is None" for a in ins])
    params = pos + (["*"] if kwonly else []) + kwonly
    call = ", ".join(pos + [f"{k}={k}" for k in kwonly])
    src = (f"def {fn.__name__}({', '.join(params)}):\n"
           f"    if not _state.enabled or ({test}):\n"
           f"        return fn({call})\n"
           f"    return run_inplace({fn.__name__!r}, {x}, lambda: oop({call}), lambda: fn({call}))\n")
    return _made(src, f"<inplace {fn.__name__}>", fn, ns, fn.__kwdefaults__)


def _made(src: str, where: str, fn: Callable[..., Any], ns: dict[str, Any],
          kwdefaults: dict[str, Any] | None) -> Callable[..., Any]:
    """The function ``src`` defines (named as ``fn``), with ``ns`` as its globals
    and ``fn``'s defaults."""
    g = dict(ns)
    exec(compile(src, where, "exec"), g)  # noqa: S102
    op = g[fn.__name__]
    op.__defaults__ = fn.__defaults__
    op.__kwdefaults__ = kwdefaults
    return op
