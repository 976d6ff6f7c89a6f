"""What happens when a device has no kernel for an op (or not for its dtype).

The core first uses a decomposition into primitives where it has one (every
composite op). For a primitive with no kernel there are two outcomes:

* fallback on (``rtxcore.set_fallback("cpu")``, or ``RTX_FALLBACK=cpu`` in the
  environment, read at every miss): the CPU backend runs it. The operands are
  copied to the host, the CPU kernel computes, the outputs are copied back into
  the device's tensors. A ``FallbackWarning`` is issued once per (backend, op)
  and every call is counted (``rtxcore.fallback_report()``).
* otherwise: ``NotImplementedError`` naming the op, the device and both remedies
  (implement the kernel, or turn the fallback on). A per-op dtype limit the
  backend declared (``Backend.op_dtypes``) gives a ``TypeError`` instead.

``RTX_FALLBACK=error`` forbids the fallback even where a program turned it on:
the strict mode for CI.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Callable

import numpy as np

__all__ = ["set_fallback", "get_fallback", "fallback_report", "FallbackWarning", "FallbackReport"]

from .ops import REQUIRED as NO_FALLBACK  # what the fallback itself is made of

MODES = ("cpu", "error", "none")
# ops whose first two arguments are outputs (all others: the first)
_TWO_OUTPUTS = {"sort"}
# argument positions whose dtype is fixed by the op's contract (bool or int64
# outputs, indices, masks, conditions), not the op's dtype: not checked against
# a backend's per-op dtype limits
_FIXED = {**{op: {0} for op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                "logical_not", "logical_xor", "isnan", "isinf", "argmax", "argmin")},
          "where": {1}, "gather": {3}, "scatter_add": {2}, "masked_select": {2}, "sort": {1}}

_lock = threading.Lock()
_setting: list[str | None] = [None]  # set_fallback's value; None: not set (the env decides)
_counts: dict[tuple[str, str], int] = {}
_warned: set[tuple[str, str]] = set()


class FallbackWarning(UserWarning):
    """An op ran on the CPU backend because its device has no kernel for it."""


class set_fallback:
    """Turn the CPU fallback on (``"cpu"``) or off (``None``, ``"none"``,
    ``"error"``). Takes effect at once; used as a context manager it restores
    the previous setting on exit::

        rtxcore.set_fallback("cpu")            # from here on
        with rtxcore.set_fallback("cpu"):      # in this block only
            ...
    """

    def __init__(self, mode: str | None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"set_fallback: mode must be 'cpu', 'error', 'none' or None, got {mode!r}")
        with _lock:
            self._previous = _setting[0]
            _setting[0] = mode

    def __enter__(self) -> "set_fallback":
        return self

    def __exit__(self, *exc: Any) -> None:
        with _lock:
            _setting[0] = self._previous


def get_fallback() -> tuple[str, str]:
    """(mode, why): the mode in force ("cpu" or "error") and what set it."""
    env = os.environ.get("RTX_FALLBACK", "").strip().lower()
    if env and env not in MODES:
        raise ValueError(f"RTX_FALLBACK={env!r} is not one of: cpu, error, none")
    if strict():
        return "error", "RTX_FALLBACK=error"
    setting = _setting[0]
    if setting is not None:
        return ("cpu" if setting == "cpu" else "error"), f"set_fallback({setting!r})"
    if env == "cpu":
        return "cpu", "RTX_FALLBACK=cpu"
    return "error", "the default"


def strict() -> bool:
    """RTX_FALLBACK=error: no fallback, whatever a program asks for."""
    return os.environ.get("RTX_FALLBACK", "").strip().lower() == "error"


class FallbackReport(dict):
    """{(backend, op): calls} served by the CPU fallback; prints as a table."""

    def __str__(self) -> str:
        if not self:
            return "no op has run on the CPU fallback"
        rows = sorted(self.items(), key=lambda kv: (-kv[1], kv[0]))
        w = max(len(f"{b}.{op}") for (b, op), _ in rows)
        lines = [f"{'backend.op':<{w}}  calls", "-" * (w + 7)]
        lines += [f"{f'{b}.{op}':<{w}}  {n:>5}" for (b, op), n in rows]
        return "\n".join(lines)


def fallback_report(reset: bool = False) -> FallbackReport:
    """Which ops ran on the CPU fallback, per backend, and how often."""
    with _lock:
        report = FallbackReport(_counts)
        if reset:
            _counts.clear()
            _warned.clear()
    return report


# -- the core's side ---------------------------------------------------------------


def missing(dev: Any, op: str) -> Callable[..., Any]:
    """The kernel to run for ``op`` on ``dev``, which has none: the CPU backend's
    behind copies when the fallback is on, else a NotImplementedError."""
    mode, why = get_fallback()
    if mode == "cpu" and op not in NO_FALLBACK and dev.type != "cpu":
        return _borrowed(dev, op, f"{op} has no kernel on {dev}")
    if op in NO_FALLBACK or dev.type == "cpu":
        hint = ""
    else:
        hint = (f"; or let the CPU backend run it: rtxcore.set_fallback('cpu') or "
                f"RTX_FALLBACK=cpu (now off: {why})")
    raise NotImplementedError(
        f"op {op!r} has no kernel on device {dev} (backend {dev.type!r}) and no "
        f"decomposition in the core; install or update a backend that implements it, "
        f"or move the tensor to a device that does (e.g. .to('cpu')){hint}"
    )


def limited(dev: Any, op: str, fn: Callable[..., Any], allowed: frozenset[str]) -> Callable[..., Any]:
    """``fn`` guarded by the backend's declared dtypes for ``op``: another dtype
    goes to the CPU fallback when it is on, else raises a TypeError before the
    kernel runs."""
    fixed = _FIXED.get(op, ())

    def guarded(*args: Any) -> Any:
        for i, a in enumerate(args):
            dt = None if i in fixed else getattr(a, "dtype", None)
            if dt is not None and dt.name not in allowed:
                mode, why = get_fallback()
                if mode == "cpu":
                    return _borrowed(dev, op, f"{op} on {dev} doesn't take {dt.name}")(*args)
                raise TypeError(
                    f"{op} on device {dev} does not support dtype {dt.name} (its backend "
                    f"declares {', '.join(sorted(allowed))}); convert with .to(dtype), move "
                    f"the tensor to another device, or let the CPU backend run it: "
                    f"rtxcore.set_fallback('cpu') or RTX_FALLBACK=cpu (now off: {why})"
                )
        return fn(*args)

    guarded.__name__ = getattr(fn, "__name__", op)
    guarded.__wrapped__ = fn  # type: ignore[attr-defined]
    return guarded


def _cpu_table() -> dict[str, Callable[..., Any]]:
    """The cpu backend's kernel table, straight from the registry (this layer
    sees no Device objects); a RuntimeError says why there is none."""
    from .registry import registry

    b = registry.entry("cpu").backend
    if not b.is_available():
        why = b.unavailable_reason() or "no reason given"
        raise RuntimeError(f"device cpu is not available: {why}")
    return registry.table("cpu")


def _borrowed(dev: Any, op: str, what: str) -> Callable[..., Any]:
    try:
        cpu_kernel = _cpu_table().get(op)
    except RuntimeError as exc:
        raise NotImplementedError(f"{what}, and the CPU fallback can't run it: {exc}") from None
    if cpu_kernel is None:
        raise NotImplementedError(f"{what}, and the cpu backend has no kernel for it either")
    lacking = [k for k in ("to_host", "from_host", "copy") if k not in dev.kernels]
    if lacking:
        raise NotImplementedError(f"{what}; the CPU fallback needs {', '.join(lacking)} on "
                                  f"{dev}, which it lacks")
    key = (dev.type, op)
    with _lock:
        _counts[key] = _counts.get(key, 0) + 1
        first = key not in _warned
        _warned.add(key)
    if first:
        warnings.warn(f"{what}; running it on the CPU backend (copy in, compute, copy out). "
                      f"This warning is shown once per op; rtxcore.fallback_report() counts the calls",
                      FallbackWarning, stacklevel=4)
    outputs = 2 if op in _TWO_OUTPUTS else 1
    # (the unguarded kernels: a limit on copy must not send the write-back here again)
    to_host, from_host, copy = (getattr(dev.kernels[k], "__wrapped__", dev.kernels[k])
                                for k in ("to_host", "from_host", "copy"))

    def host(a: Any) -> Any:
        if isinstance(a, tuple):
            return tuple(host(e) for e in a)
        if isinstance(a, (bool, int, float, complex, str)) or a is None:
            return a
        return np.array(to_host(a))  # a copy, writable, even where to_host shares memory

    def run(*args: Any) -> None:
        from ..dtype import BY_NAME

        host_args = [host(a) for a in args]
        cpu_kernel(*host_args)
        for target, result in zip(args[:outputs], host_args[:outputs]):
            result = np.ascontiguousarray(result).reshape(result.shape)  # (keeps 0-d 0-d)
            _, staged = from_host(result, BY_NAME[result.dtype.name], dev.index)
            copy(target, staged)

    return run
