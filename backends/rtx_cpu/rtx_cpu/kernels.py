"""Every primitive (and a few composites) on NumPy. Most kernels are the
NumPy-API table shared with other array-module backends
(``rtxcore.dispatch.xp``); here are what is particular to the CPU: allocation
from the buffer pool, zero-copy transfers, random numbers and ``erf``. Views
arrive as ndarrays already broadcast and promoted; each kernel writes into ``out``."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from rtxcore.dispatch import xp

from . import memory

# PyTorch computes log(0) = -inf and 1/0 = inf silently; so do we. Only warnings
# raised from the kernels' module are ignored, and at no per-op cost (np.errstate
# costs about 1 us a call, more than a tiny add).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtxcore\.dispatch\.xp")
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"rtx_cpu\.kernels")


# -- memory: a buffer is any C-contiguous ndarray; views are ndarrays over it

def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.empty(shape, dtype.numpy)
    if a.nbytes >= memory.POOL_MIN_BYTES:  # rare and slow anyway: the check stays cheap
        a = memory.empty(shape, dtype.numpy)
    return a, a


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[np.ndarray, np.ndarray]:
    return arr, arr  # shares the caller's array: the host is our device


def to_host(x: np.ndarray) -> np.ndarray:
    return x


def _rng(seed: int, offset: int) -> np.random.Generator:
    return np.random.Generator(np.random.Philox(key=seed, counter=offset))


def _draw_dtype(out: np.ndarray) -> Any:
    return np.float64 if out.dtype == np.float64 else np.float32


def uniform(out: np.ndarray, low: float, high: float, seed: int, offset: int) -> None:
    if out.dtype == np.float16:
        # 11 random bits, exact in float16: a float32 draw near 1 rounds up to 1.0
        # in float16, outside [0, 1) (PyTorch draws half the same way)
        bits = _rng(seed, offset).integers(0, 1 << 11, out.shape)
        u = bits.astype(np.float32) * np.float32(2.0 ** -11)
        np.copyto(out, u * np.float32(high - low) + np.float32(low), casting="unsafe")
        return
    u = _rng(seed, offset).random(out.shape, dtype=_draw_dtype(out))
    np.copyto(out, u * (high - low) + low, casting="unsafe")


def normal(out: np.ndarray, mean: float, std: float, seed: int, offset: int) -> None:
    z = _rng(seed, offset).standard_normal(out.shape, dtype=_draw_dtype(out))
    np.copyto(out, z * std + mean, casting="unsafe")


def erf(out: np.ndarray, x: np.ndarray) -> None:
    # NumPy has no erf; the C library's, element by element, is exact and still
    # faster than any vectorised series over the whole array
    flat = np.fromiter(map(math.erf, x.astype(np.float64).ravel()), np.float64, count=x.size)
    np.copyto(out, flat.reshape(x.shape), casting="unsafe")


KERNELS = xp.kernels(np)
KERNELS.update({
    "empty": empty, "from_host": from_host, "to_host": to_host,
    "uniform": uniform, "normal": normal, "erf": erf,
})
