"""Every primitive on CuPy: the NumPy-API table shared with rtx_cpu
(``rtxcore.dispatch.xp``) run with ``xp = cupy``, plus allocation, transfers and
random numbers. Each kernel runs under its output's ``cupy.cuda.Device``. CuPy
is imported on the first kernel call, not when this table is built."""

from __future__ import annotations

from math import prod
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rtxcore.dispatch import xp

from . import runtime as R

_shared: dict[str, Callable[..., Any]] | None = None
_module: Any = None
SOURCE = Path(__file__).with_name("philox.cu")
DIVMOD = Path(__file__).with_name("divmod.cu")


# dtypes CuPy's atomic scatter-add takes (cupy.add.at / cupyx.scatter_add)
_ATOMIC = ("int32", "uint32", "uint64", "float16", "float32", "float64")


def _table() -> dict[str, Callable[..., Any]]:
    global _shared
    if _shared is None:
        cp = R.cp
        at = getattr(cp.add, "at", None)
        if at is None:  # older CuPy: cupyx's scatter_add accumulates repeats
            import cupyx

            at = cupyx.scatter_add

        def add_at(out: Any, index: tuple[Any, ...], src: Any) -> None:
            name = out.dtype.name
            if name in _ATOMIC:
                at(out, index, src)
            elif name == "int64":  # two's complement: the same bits as unsigned
                at(out.view(np.uint64), index, src.view(np.uint64))
            else:  # bool, int8, int16, uint8: accumulate in int32, then store
                wide = out.astype(np.int32)
                at(wide, index, src.astype(np.int32))
                cp.copyto(out, wide != 0 if name == "bool" else wide, casting="unsafe")

        _shared = xp.kernels(cp, scatter_add_at=add_at)
        shared_cast = _shared["cast"]

        def cast(out: Any, x: Any) -> None:
            # float -> unsigned: CUDA saturates negatives to 0, C (and NumPy) wrap
            # them; going through int64 makes in-range negatives agree with cpu.
            # NaN, inf and values out of int64's range still differ: CUDA's
            # conversions saturate (NaN -> 0), x86's give INT_MIN; neither is
            # defined in C, and the contract leaves them unspecified
            if out.dtype.kind == "u" and x.dtype.kind == "f":
                x = x.astype(np.int64)
            shared_cast(out, x)

        _shared["cast"] = cast

        def masked_select(out: Any, x: Any, mask: Any) -> None:
            # CuPy's x[mask] counts the mask on the host, a second wait after the
            # core's own count (which sized out): place each selected element at
            # its running count instead, the others in a spare last slot
            n = out.size
            m = mask.reshape(-1)
            target = cp.where(m, cp.cumsum(m, dtype=np.int64) - 1, n)
            ext = cp.empty(n + 1, out.dtype)
            ext[target] = x.reshape(-1)
            out[...] = ext[:n]

        _shared["masked_select"] = masked_select
    return _shared


def _on_device(name: str) -> Callable[..., Any]:
    fn: Callable[..., Any] | None = None  # the shared kernel, once CuPy is imported

    def kernel(out: Any, *args: Any) -> None:
        nonlocal fn
        if fn is None:
            fn = _table()[name]
        with out.device:
            fn(out, *args)

    kernel.__name__ = name
    return kernel


def empty(shape: tuple[int, ...], dtype: Any, index: int) -> tuple[Any, Any]:
    with R.cp.cuda.Device(index):
        buf = R.cp.empty(prod(shape), dtype.numpy)
    return buf, buf.reshape(shape)


def from_host(arr: np.ndarray, dtype: Any, index: int) -> tuple[Any, Any]:
    with R.cp.cuda.Device(index):
        buf = R.cp.asarray(arr.reshape(-1))
    return buf, buf.reshape(arr.shape)


def to_host(x: Any) -> np.ndarray:
    with x.device:
        return R.cp.asnumpy(x)  # waits for the kernels that write x


def _philox() -> Any:
    global _module
    if _module is None:
        _module = R.cp.RawModule(code=SOURCE.read_text())
    return _module


_philox_fns: dict[tuple[int, str], Any] = {}


def _philox_fn(name: str) -> Any:
    """The compiled random kernel ``name`` of the current device (looked up once)."""
    key = (R.cp.cuda.runtime.getDevice(), name)
    fn = _philox_fns.get(key)
    if fn is None:
        fn = _philox_fns[key] = _philox().get_function(name)
    return fn


def _random(kind: str, out: Any, a: float, b: float, seed: int, offset: int) -> None:
    cp = R.cp
    n = out.size
    if n == 0:
        return
    with out.device:
        wide = out.dtype == np.float64
        name = f"{kind}_f64" if wide else (f"{kind}_f16" if out.dtype == np.float16 and kind == "uniform"
                                            else f"{kind}_f32")
        tmp = out if out.flags.c_contiguous and out.dtype in (np.float32, np.float64) \
            else cp.empty(out.shape, np.float64 if wide else np.float32)
        scalar = np.float64 if wide else np.float32
        f = _philox_fn(name)
        block = 256
        f(((n + block - 1) // block,), (block,),
          (tmp, np.int64(n), scalar(a), scalar(b), np.uint64(seed & (2**64 - 1)),
           np.uint64(offset & (2**64 - 1))))
        if tmp is not out:
            cp.copyto(out, tmp, casting="unsafe")


_divmod_module: Any = None


def _divmod(op: str) -> Callable[..., Any]:
    """floor_divide / remainder: floats through fmod (``divmod.cu``), with
    PyTorch's results next to multiples and at infinities; integers as shared."""
    shared = _on_device(op)

    def kernel(out: Any, x: Any, y: Any) -> None:
        global _divmod_module
        if out.dtype.kind != "f":
            shared(out, x, y)
            return
        cp = R.cp
        with out.device:
            if _divmod_module is None:
                _divmod_module = cp.RawModule(code=DIVMOD.read_text())
            ct = np.float64 if out.dtype == np.float64 else np.float32
            a = cp.ascontiguousarray(cp.broadcast_to(cp.asarray(x, dtype=ct), out.shape))
            b = cp.ascontiguousarray(cp.broadcast_to(cp.asarray(y, dtype=ct), out.shape))
            res = out if out.dtype == ct and out.flags.c_contiguous else cp.empty(out.shape, ct)
            n = res.size
            if n:
                block = 256
                f = _divmod_module.get_function(f"{op}_{'f64' if ct is np.float64 else 'f32'}")
                f(((n + block - 1) // block,), (block,), (a, b, res, np.int64(n)))
            if res is not out:
                cp.copyto(out, res, casting="unsafe")

    kernel.__name__ = op
    return kernel


def uniform(out: Any, low: float, high: float, seed: int, offset: int) -> None:
    _random("uniform", out, low, high - low, seed, offset)


def normal(out: Any, mean: float, std: float, seed: int, offset: int) -> None:
    _random("normal", out, mean, std, seed, offset)


_OWN = {"empty": empty, "from_host": from_host, "to_host": to_host,
        "uniform": uniform, "normal": normal}
# the names the shared table provides (the same for any xp: asked of NumPy's),
# less index_put: CuPy leaves `out[idx] = v` with repeated indices undefined,
# and the core's decomposition makes the last write win
_SHARED_NAMES = [n for n in xp.kernels(np) if n not in _OWN and n != "index_put"]

KERNELS: dict[str, Callable[..., Any]] = {n: _on_device(n) for n in _SHARED_NAMES}
KERNELS.update(_OWN)
KERNELS.update({op: _divmod(op) for op in ("floor_divide", "remainder")})
