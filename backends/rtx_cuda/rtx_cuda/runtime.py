"""Finding CuPy and the CUDA devices, without ever failing an import.

``problem()`` says, in one line with the fix, why the backend can't run here:
no CuPy, a CuPy whose CUDA runtime the driver can't serve (or no driver at
all), or no device. CuPy is imported on first use, not when rtxcore loads its
plugins.
"""

from __future__ import annotations

import threading
from typing import Any

from rtxcore.dispatch import optional_import

cp: Any = None  # cupy, once imported

_lock = threading.Lock()
_count: int | None = None
_problem: str | None = None

FIX_NO_CUPY = ("install CuPy for your CUDA version: pip install 'rtx-cuda[cuda13]' "
               "(or 'rtx-cuda[cuda12]')")


def _explain(exc: BaseException) -> str:
    text = str(exc)
    if "InsufficientDriver" in text or "driver version is insufficient" in text:
        return (f"the CUDA driver is missing or older than CuPy's CUDA runtime ({text.strip()}); "
                "install or update the NVIDIA driver, or install the CuPy wheel for the CUDA "
                "version your driver supports (cupy-cuda12x / cupy-cuda13x)")
    if "NoDevice" in text or "no CUDA-capable device" in text:
        return f"no CUDA device found ({text.strip()}); run on a machine with an NVIDIA GPU"
    return (f"CUDA could not be initialised ({type(exc).__name__}: {text.strip()}); "
            "check the NVIDIA driver with nvidia-smi")


def _find() -> tuple[Any, int, str | None]:
    """(cupy or None, the device count, why the backend can't run here or None)."""
    cupy, problem = optional_import("cupy", "CuPy", FIX_NO_CUPY)
    if cupy is None:
        return None, 0, problem
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError: no driver, old driver, no device
        return cupy, 0, _explain(exc)
    if n == 0:
        return cupy, 0, "no CUDA device found; run on a machine with an NVIDIA GPU"
    return cupy, n, None


def _probe() -> None:
    global cp, _count, _problem
    with _lock:
        if _count is None:
            cp, _count, _problem = _find()


def problem() -> str | None:
    if _count is None:
        _probe()
    return _problem


def device_count() -> int:
    if _count is None:
        _probe()
    return _count or 0


def properties(index: int) -> dict[str, Any]:
    p = cp.cuda.runtime.getDeviceProperties(index)
    return {
        "name": p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"]),
        "compute capability": f"{p['major']}.{p['minor']}",
        "memory": f"{p['totalGlobalMem'] / (1 << 30):.1f} GiB",
        "cupy": cp.__version__,
    }


def reset_for_tests() -> None:
    """Forget what was found (tests hide or break CuPy and probe again)."""
    global _count, _problem, cp
    with _lock:
        _count, _problem, cp = None, None, None
