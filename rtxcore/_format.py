"""``repr`` of tensors, in PyTorch's style:
``tensor([[1., 2.]], dtype=rtxcore.float64, device='opencl:0')``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_DEFAULT = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80}
_PROFILES = {
    "default": _DEFAULT,
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}
# what tensors print with (process-wide, as PyTorch's PRINT_OPTS)
_opts: dict[str, Any] = {**_DEFAULT, "sci_mode": None}


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print (PyTorch's ``set_printoptions``).

    precision: digits after the point; threshold: more elements than this are
    summarized (``...``); edgeitems: items shown at each end of a summarized dim;
    linewidth: characters per line; profile: ``'default'``, ``'short'`` or
    ``'full'`` (set first, the other arguments then override it); sci_mode:
    True / False forces / forbids scientific notation, None (the default,
    also when not given) chooses from the values.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions(): unknown profile {profile!r}; "
                             f"expected one of {', '.join(map(repr, _PROFILES))}")
        _opts.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                name != "threshold" and not isinstance(value, int)):
            raise TypeError(f"set_printoptions(): argument {name!r} must be a non-negative "
                            f"{'number' if name == 'threshold' else 'int'}, got {value!r}")
        _opts[name] = value
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise TypeError(f"set_printoptions(): argument 'sci_mode' must be a bool or None, got {sci_mode!r}")
    _opts["sci_mode"] = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current print options, as ``set_printoptions`` takes them."""
    return dict(_opts)


class _Formatter:
    """PyTorch's ``_Formatter``: one width and one notation for all the values
    shown, chosen from the nonzero finite ones."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = _opts["precision"]
        if not self.floating:
            for v in values.reshape(-1).tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        flat = values.reshape(-1).astype(np.float64)
        nz = flat[np.isfinite(flat) & (flat != 0)]
        if nz.size:
            absv = np.abs(nz)
            big, small = float(absv.max()), float(absv.min())
            self.int_mode = bool(np.all(np.ceil(nz) == nz))
            sci = big / small > 1000.0 or big > 1.0e8 or small < 1.0e-4
            self.sci_mode = sci if _opts["sci_mode"] is None else _opts["sci_mode"]
            if self.sci_mode:
                fmt = lambda v: f"{v:.{p}e}"  # noqa: E731
            elif self.int_mode:
                fmt = lambda v: f"{v:.0f}."  # noqa: E731
            else:
                fmt = lambda v: f"{v:.{p}f}"  # noqa: E731
            for v in nz.tolist():
                self.max_width = max(self.max_width, len(fmt(v)))

    def width(self) -> int:
        return self.max_width

    def format(self, value: Any) -> str:
        p = _opts["precision"]
        if not self.floating:
            ret = str(value)
        elif self.sci_mode:
            ret = f"{value:{self.max_width}.{p}e}"
        elif self.int_mode:
            ret = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                ret += "."
        else:
            ret = f"{value:.{p}f}"
        return ret.rjust(self.max_width)


def _summarized(arr: np.ndarray, edgeitems: int) -> np.ndarray:
    """The elements a summarized print shows (PyTorch picks its format from these)."""
    for axis, n in enumerate(arr.shape):
        if n > 2 * edgeitems:
            idx = np.r_[0:edgeitems, n - edgeitems:n]
            arr = np.take(arr, idx, axis=axis)
    return arr


def _vector_str(arr: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    edge = _opts["edgeitems"]
    per_line = max(1, int(math.floor((_opts["linewidth"] - indent) / (fmt.width() + 2))))
    if summarize and not edge:
        data = ["..."]
    elif summarize and arr.shape[0] > 2 * edge:
        data = ([fmt.format(v) for v in arr[:edge].tolist()] + [" ..."]
                + [fmt.format(v) for v in arr[-edge:].tolist()])
    else:
        data = [fmt.format(v) for v in arr.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(arr: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    """PyTorch's ``_tensor_str_with_formatter``: nested brackets, rows wrapped
    at the line width, ``...`` for the middle of a summarized dim."""
    if arr.ndim == 1:
        return _vector_str(arr, indent, summarize, fmt)
    edge = _opts["edgeitems"]
    n = arr.shape[0]
    if summarize and n > 2 * edge:
        slices = ([_tensor_str(arr[i], indent + 1, summarize, fmt) for i in range(edge)] + ["..."]
                  + [_tensor_str(arr[i], indent + 1, summarize, fmt) for i in range(n - edge, n)])
    else:
        slices = [_tensor_str(arr[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def format_tensor(t: Any) -> str:
    from . import dtype as D

    arr = t.detach().numpy()  # the owning backend's to_host: no cpu backend needed
    prefix = "tensor("
    if arr.size == 0:
        body = "[]"
    else:
        summarize = arr.size > _opts["threshold"]
        fmt = _Formatter(_summarized(arr, _opts["edgeitems"]) if summarize else arr)
        if arr.ndim == 0:
            body = fmt.format(arr.item()).strip()
        else:
            body = _tensor_str(arr, len(prefix), summarize, fmt)
    extras = []
    if (arr.size == 0 and arr.ndim != 1) or (arr.size and not _opts["edgeitems"]):
        extras.append(f"size={tuple(arr.shape)}")
    # dtypes a reader would infer from the values are not shown; nothing can be
    # inferred from no values, so an empty tensor shows any non-default dtype
    default_dtypes = (D.get_default_dtype(),) if arr.size == 0 else (D.get_default_dtype(), D.int64, D.bool_)
    if t.dtype not in default_dtypes:
        extras.append(f"dtype={t.dtype!r}")
    dev = t.device
    if not (dev.type == "cpu" and dev.index == 0):
        extras.insert(0, f"device='{dev}'")
    m = t._ag
    if m is not None and m.requires_grad:
        extras.append(f"grad_fn=<{m.grad_fn.name()}>" if m.grad_fn is not None else "requires_grad=True")
    if extras:
        return f"{prefix}{body}, " + ", ".join(extras) + ")"
    return f"{prefix}{body})"
