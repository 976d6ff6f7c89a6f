"""Helpers for testing rtxcore and its backends: comparisons against NumPy, the
devices to test on, a short training loop, and (in the submodules) the
per-primitive conformance checks third-party backends run."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(x: Any) -> np.ndarray:
    from ..tensor import Tensor

    if isinstance(x, Tensor):
        return np.array(x.detach().cpu().numpy(), copy=True)
    return np.asarray(x)


def raise_device_errors() -> None:
    """Raise now an error a device holds for its next read (an out-of-range index
    on a device with ``async_errors``, e.g. CUDA); nothing elsewhere. A test
    expecting ``IndexError`` from an op calls it last inside ``pytest.raises``,
    so it holds on every device."""
    from ..device import Device
    from ..ops.checks import raise_pending

    for dev in list(Device._interned.values()):
        if dev._ready:
            raise_pending(dev)


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None,
                 atol: float | None = None, check_dtype: bool = True,
                 equal_nan: bool = True) -> None:
    """Assert a tensor equals a NumPy reference (shape, dtype, values).

    Tolerances default by dtype: exact for ints and bool, 1e-3 for float16,
    1.3e-6/1e-5 for float32, 1e-7 for float64 (PyTorch's defaults).
    """
    from ..tensor import Tensor

    a = to_numpy(actual)
    e = np.asarray(expected)
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(f"shape mismatch: got {tuple(a.shape)}, expected {tuple(e.shape)}")
    if check_dtype and isinstance(actual, Tensor) and e.dtype != object:
        if a.dtype != e.dtype:
            raise AssertionError(f"dtype mismatch: got {a.dtype}, expected {e.dtype}")
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":
        if not np.array_equal(a, e):
            bad = np.argwhere(a != e)
            i = tuple(bad[0]) if len(bad) else ()
            raise AssertionError(
                f"{len(bad)} of {a.size} elements differ; first at {i}: got {a[i]}, expected {e[i]}"
            )
        return
    kind = a.dtype if a.dtype.kind == "f" else e.dtype
    defaults = {np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float32): (1.3e-6, 1e-5)}
    r, t = defaults.get(np.dtype(kind), (1e-7, 1e-7))
    rtol = r if rtol is None else rtol
    atol = t if atol is None else atol
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    ok = np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if not np.all(ok):
        bad = np.argwhere(~ok)
        diff = np.abs(a64 - e64)
        diff[ok] = 0
        worst = np.unravel_index(np.nanargmax(np.where(np.isnan(diff), np.inf, diff)), a.shape) if a.ndim else ()
        raise AssertionError(
            f"{len(bad)} of {a.size} elements differ beyond rtol={rtol}, atol={atol}; worst at "
            f"{tuple(int(i) for i in worst)}: got {a64[worst]!r}, expected {e64[worst]!r}"
        )


def available_devices(complete: bool = False) -> list[str]:
    """Every device of every available backend, e.g. ``["cpu", "opencl:0"]``;
    with ``complete=True`` only those whose backend has a kernel for every
    primitive (the ones the whole test suite can run on without a fallback)."""
    from ..dispatch import ops as OPS
    from ..dispatch.registry import registry

    registry.ensure_loaded()
    out = []
    for name, entry in sorted(registry.backends.items(), key=lambda kv: (kv[0] != "cpu", kv[0])):
        b = entry.backend
        try:
            if not b.is_available():
                continue
            if complete and any(op not in entry.kernels for op in OPS.PRIMITIVES):
                continue
            n = b.device_count()
        except Exception:
            continue
        out += ["cpu" if name == "cpu" and i == 0 else f"{name}:{i}" for i in range(n)]
    return out


def training_losses(model: Any, optimizer: Any, loss_fn: Any, x: Any, y: Any,
                    steps: int) -> list[float]:
    """Train ``model`` for ``steps`` steps on one batch -- ``loss_fn(model(x), y)``,
    ``zero_grad``, ``backward``, ``step`` -- and return each step's loss. Plain
    method calls only: a PyTorch model and optimizer train the same way."""
    losses = []
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
