"""Random tensors: uniform and normal draws from a ``Generator`` into new tensors
(``rand``, ``randn``, ``randint``, ``randperm``, ``rand_like``, ...) or existing ones
(``uniform_``, ``normal_``). Draws from other distributions (``bernoulli``,
``multinomial``, ``exponential_``, ...) are in rtxcore/ops/sampling.py."""

from __future__ import annotations

from typing import Any

from .. import dtype as D
from ..device import Device
from ..random import Generator, default_generator
from ..tensor import Tensor
from .._tensor_api import like_format
from . import elementwise as E
from .core import cast, empty as _empty, kernel, ready_device, view_of
from .factory_args import _grad_option, _like, _size, _sizes


def _gen(generator: Generator | None) -> Generator:
    return default_generator if generator is None else generator


def _float_dtype(dtype: Any, what: str) -> D.DType:
    dt = D.as_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"{what} expects a floating point dtype, got {dt.name}")
    return dt


def uniform_(x: Tensor, a: float = 0.0, b: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    seed, off = _gen(generator).take(x.numel())
    kernel(x._device, "uniform")(view_of(x), float(a), float(b), seed, off)
    x._storage.version += 1
    return x


def normal_(x: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    seed, off = _gen(generator).take(x.numel())
    kernel(x._device, "normal")(view_of(x), float(mean), float(std), seed, off)
    x._storage.version += 1
    return x


@_grad_option
def rand(*sizes: Any, size: Any = None, generator: Generator | None = None, dtype: Any = None,
         device: Any = None) -> Tensor:
    t = _empty(_sizes("rand", sizes, size), _float_dtype(dtype, "rand"), ready_device(device))
    return uniform_(t, 0.0, 1.0, generator=generator)


@_grad_option
def randn(*sizes: Any, size: Any = None, generator: Generator | None = None, dtype: Any = None,
          device: Any = None) -> Tensor:
    t = _empty(_sizes("randn", sizes, size), _float_dtype(dtype, "randn"), ready_device(device))
    return normal_(t, 0.0, 1.0, generator=generator)


def _wide_float(dev: Device) -> D.DType:
    return D.float64 if dev.supports(D.float64) else D.float32


def randint(low: int = 0, high: Any = None, size: Any = None, *, generator: Generator | None = None,
            dtype: Any = None, device: Any = None) -> Tensor:
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=size)
        low, high = 0, low
    if high is None or size is None:
        raise TypeError("randint() needs high and size: randint(high, size) or randint(low, high, size)")
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dev = ready_device(device)
    u = uniform_(_empty(_size((size,) if isinstance(size, int) else tuple(size)), _wide_float(dev), dev),
                 generator=generator)
    return cast(E.add(E.floor(E.mul(u, float(high - low))), float(low)), D.as_dtype(dtype or D.int64))


def randperm(n: int, *, generator: Generator | None = None, dtype: Any = None, device: Any = None) -> Tensor:
    dev = ready_device(device)
    u = uniform_(_empty((n,), _wide_float(dev), dev), generator=generator)
    return cast(u.argsort(), D.as_dtype(dtype or D.int64))


@_grad_option
def rand_like(x: Tensor, *, dtype: Any = None, device: Any = None,
              memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("rand_like", rand(x._shape, dtype=dt, device=dev), x, memory_format)


@_grad_option
def randn_like(x: Tensor, *, dtype: Any = None, device: Any = None,
               memory_format: Any = D.preserve_format) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return like_format("randn_like", randn(x._shape, dtype=dt, device=dev), x, memory_format)


def randint_like(x: Tensor, low: int, high: Any = None, *, dtype: Any = None, device: Any = None) -> Tensor:
    dt, dev = _like(x, dtype, device)
    return randint(low, high, x._shape, dtype=dt, device=dev)


METHODS = ["uniform_", "normal_"]
