"""PyTorch's numeric-type info (``finfo``/``iinfo``) and its process-wide
switches (threads, deterministic algorithms, float32 matmul precision), stored
and reported honestly: what each one controls in rtxcore is said below."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from . import dtype as D
from .dispatch import threads as _threads_setting


class _TypeInfo:
    """What finfo and iinfo share: the dtype's kind checked, then ``bits``,
    ``max``, ``min`` and ``dtype`` (its name) read from NumPy's info."""

    _NAME = _OTHER = _KIND_TEXT = _KINDS = ""

    def _read(self, dt: D.DType, np_info: Any, num: type) -> Any:
        if dt.kind not in self._KINDS:
            raise TypeError(f"rtxcore.{self._NAME}() requires {self._KIND_TEXT} input type. "
                            f"Use rtxcore.{self._OTHER} to handle 'rtxcore.{self._NAME}'")
        info = np_info(dt.numpy)
        self.bits: int = info.bits
        self.max = num(info.max)
        self.min = num(info.min)
        self.dtype: str = dt.name
        return info


class finfo(_TypeInfo):  # noqa: N801  (PyTorch's name)
    """Machine limits of a floating-point dtype (the default dtype when none is
    given): ``bits eps max min tiny smallest_normal resolution dtype``."""

    _NAME, _OTHER, _KIND_TEXT, _KINDS = "finfo", "iinfo", "a floating point", "f"

    def __init__(self, type: Any = None) -> None:  # noqa: A002
        info = self._read(D.get_default_dtype() if type is None else _dtype(type), np.finfo, float)
        self.eps: float = float(info.eps)
        self.tiny: float = float(info.tiny)
        self.smallest_normal: float = float(info.smallest_normal)
        self.resolution: float = 10.0 ** -info.precision

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo(_TypeInfo):  # noqa: N801  (PyTorch's name)
    """Limits of an integer dtype: ``bits max min dtype``."""

    _NAME, _OTHER, _KIND_TEXT, _KINDS = "iinfo", "finfo", "an integer", "iu"

    def __init__(self, type: Any) -> None:  # noqa: A002
        dt = _dtype(type)
        if dt is D.bool_:
            raise TypeError("rtxcore.bool is not supported by rtxcore.iinfo")
        self._read(dt, np.iinfo, int)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def _dtype(t: Any) -> D.DType:
    if type(t) is D.DType:
        return t
    name = getattr(t, "name", None) if not isinstance(t, str) else None
    try:
        return D.as_dtype(t)
    except TypeError:
        # another library's dtype object (torch.float32): by its name
        text = str(t).rpartition(".")[2] if name is None else name
        return D.as_dtype(text)


# -- threads (the value lives in the backend contract, rtxcore.dispatch.threads) -------------


def set_num_threads(n: int) -> None:
    """Threads the cpu backend splits its large kernels over (products,
    convolutions, elementwise ops, reductions, layer_norm, fused groups of
    ``rtxcore.compile``), read at each call. The backend keeps NumPy's BLAS on
    one thread and splits products itself (``rtx_cpu.blas``: one owner of the
    cores); other libraries' thread pools (PyTorch's, OpenMP's) are left as they
    are."""
    n = int(n)
    if n <= 0:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {n}")
    _threads_setting.set_requested(n)


def get_num_threads() -> int:
    """The value set by ``set_num_threads``, else PyTorch's default:
    ``OMP_NUM_THREADS`` when set, else the CPUs this process may run on
    (``len(os.sched_getaffinity(0))``). The cpu backend splits large kernels over
    that many threads (``rtx_cpu.parallel``)."""
    return _threads_setting.count()


# -- determinism and matmul precision -----------------------------------------------------------

_deterministic = False
_warn_only = False
_precision = "highest"


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Stored for ``are_deterministic_algorithms_enabled``. rtxcore's kernels are
    deterministic already (reductions and scatter_add run in a fixed order on
    every built-in backend), so nothing else changes."""
    global _deterministic, _warn_only
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' must be bool, not "
                        f"{type(mode).__name__}")
    _deterministic, _warn_only = mode, bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _warn_only


def set_float32_matmul_precision(precision: str) -> None:
    """'highest', 'high' or 'medium'; anything else warns and is ignored, as in
    PyTorch. Stored only: float32 matmuls always compute in float32 here (no
    TF32 or bfloat16 passes)."""
    global _precision
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      f"set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _precision = precision


def get_float32_matmul_precision() -> str:
    return _precision


def get_autocast_gpu_dtype() -> Any:
    """The dtype autocast uses on cuda (PyTorch's older name for
    ``get_autocast_dtype("cuda")``): the open region's, else float16. Read from
    the core's autocast state (``rtxcore/_autocast.py``), which amp builds on."""
    from ._autocast import _state

    active = _state.active
    return active["cuda"] if active is not None and "cuda" in active else D.float16


NAMES = ["finfo", "iinfo", "set_num_threads", "get_num_threads", "use_deterministic_algorithms",
         "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
         "set_float32_matmul_precision", "get_float32_matmul_precision", "get_autocast_gpu_dtype"]
