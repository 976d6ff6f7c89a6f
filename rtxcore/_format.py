"""``repr`` of tensors, in PyTorch's style:
``tensor([[1., 2.]], dtype=rtxcore.float64, device='opencl:0')``."""

from __future__ import annotations

from typing import Any

import numpy as np


def _float_formatter(values: np.ndarray) -> Any:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return lambda v: _special(v) or f"{v:.4f}"
    absf = np.abs(finite.astype(np.float64))
    integral = bool(np.all(finite == np.round(finite)))
    big, small = absf.max(), absf[absf > 0].min() if np.any(absf > 0) else 0.0
    # PyTorch's _Formatter: scientific when the nonzero magnitudes span more than
    # 1000x, exceed 1e8, or go below 1e-4
    sci = bool(big > 1e8 or (small and (big / small > 1000.0 or small < 1e-4)))
    if integral and not sci:
        width = max(len(f"{v:.0f}") for v in finite) + 1
        return lambda v: (_special(v) or f"{v:.0f}.").rjust(width)
    if sci:
        return lambda v: _special(v) or f"{v:.4e}"
    width = max(len(f"{v:.4f}") for v in finite)
    return lambda v: (_special(v) or f"{v:.4f}").rjust(width)


def _special(v: float) -> str:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return ""


def format_tensor(t: Any) -> str:
    from . import dtype as D

    arr = t.detach().cpu().numpy()
    if arr.size > 1000:
        opts = dict(threshold=1000, edgeitems=3)
    else:
        opts = dict(threshold=1001, edgeitems=3)
    if arr.dtype.kind == "f":
        fmt = _float_formatter(arr.reshape(-1)) if arr.size else None
        formatter = {"float_kind": fmt} if fmt else None
    elif arr.dtype.kind == "b":
        width = 5 if arr.size and not arr.all() and arr.any() else 0  # [ True, False]
        formatter = {"bool": lambda v: ("True" if v else "False").rjust(width)}
    else:
        formatter = None
    prefix = "tensor("
    if arr.ndim == 0:
        body = (formatter["float_kind"](arr.item()) if formatter and arr.dtype.kind == "f"
                else formatter["bool"](arr.item()) if formatter else str(arr.item())).strip()
    elif arr.size == 0:
        body = "[]"
    else:
        body = np.array2string(arr, separator=", ", prefix=prefix, formatter=formatter,
                               max_line_width=80, **opts)
    extras = []
    if arr.size == 0 and arr.ndim != 1:
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
