"""Sampling from distributions: ``normal`` (tensor mean/std), ``bernoulli``,
``multinomial``, and the in-place samplers ``bernoulli_``, ``random_``,
``exponential_``, ``cauchy_``, ``log_normal_``, ``geometric_``.

Draws come from the uniform and normal kernels (rtxcore/ops/random.py) and a
``Generator``; like PyTorch's, they carry no gradient.
"""

from __future__ import annotations

import math
from typing import Any

from .. import dtype as D
from ..autograd.grad_mode import no_grad
from ..random import Generator
from ..shape import broadcast_many
from ..tensor import Tensor
from . import elementwise as E
from . import indexing as I
from . import reduction as R
from . import views as V
from .core import bad_operand, cast, empty as _empty, ready_device, tensor_arg
from .creation import arange
from .random import _wide_float, normal_, uniform_
from .reorder import flip


def _uniform_like(x: Tensor, generator: Generator | None) -> Tensor:
    """Uniform [0, 1) draws of x's shape, in the widest float the device has."""
    return uniform_(_empty(x._shape, _wide_float(x._device), x._device), generator=generator)


def _fill_with(x: Tensor, values: Tensor) -> Tensor:
    """Write drawn values into ``x`` (autograd sees a write of a constant)."""
    return E.copy_(x, cast(values, x._dtype))


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Generator | None = None,
           dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Normal draws with the given ``mean`` and ``std`` (tensors, broadcast, or
    floats with ``size``). Like PyTorch's, the draws carry no gradient."""
    tm, ts = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not tm and not ts:
        if size is None:
            raise TypeError("normal(): with float mean and std, size is required")
        shape = tuple(size) if isinstance(size, (list, tuple)) else (int(size),)
        dev = ready_device(device)
        dt = D.get_default_dtype() if dtype is None else D.as_dtype(dtype)
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        out = normal_(_empty(shape, dt, dev), float(mean), float(std), generator=generator)
        return out.requires_grad_() if requires_grad else out
    with no_grad():
        m = mean.detach() if tm else mean
        s = std.detach() if ts else std
        if ts:
            if bool(R.any(E.lt(s, 0)).item()):
                raise RuntimeError("normal expects all elements of std >= 0.0")
        elif s < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {s}")
        ref = m if tm else s
        if ref._dtype.kind != "f":
            raise RuntimeError(f"normal: expected a floating point mean/std, got {ref._dtype.name}")
        shape = broadcast_many(*(t._shape for t in (m, s) if isinstance(t, Tensor)))
        z = normal_(_empty(shape, ref._dtype, ref._device), 0.0, 1.0, generator=generator)
        return E.add(E.mul(z, s), m)


def bernoulli(input: Tensor, p: Any = None, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """0/1 draws (``input``'s dtype), 1 with probability ``input`` (or ``p``)."""
    x = tensor_arg("bernoulli", input)
    with no_grad():
        prob = x.detach() if p is None else p
        if isinstance(prob, Tensor):
            if prob.numel() and (bool(R.any(E.lt(prob, 0)).item()) or bool(R.any(E.gt(prob, 1)).item())):
                raise RuntimeError("bernoulli: expected all probabilities in [0, 1]")
        elif not 0 <= prob <= 1:
            raise RuntimeError(f"bernoulli_: expected p in [0, 1], but got p={prob}")
        u = _uniform_like(x, generator)
        return cast(E.lt(u, prob), x._dtype if x._dtype.kind == "f" else D.get_default_dtype())


def bernoulli_(input: Tensor, p: Any = 0.5, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """In place: 1 with probability ``p`` (a float or a tensor), else 0."""
    with no_grad():
        draws = bernoulli(input.detach(), p, generator=generator)
    return _fill_with(input, draws)


def random_(input: Tensor, from_: int = 0, to: int | None = None, *,  # noqa: A002
            generator: Generator | None = None, **kwargs: Any) -> Tensor:
    """In place: integers uniform in [from, to - 1]; ``random_(to)`` is
    [0, to - 1]; without ``to``, [0, 2**mantissa] for floats and [0, max] for
    integer dtypes, as in PyTorch."""
    import numpy as np

    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_() got unexpected keyword arguments {sorted(kwargs)}")
    x = tensor_arg("random_", input)
    if to is None and from_ != 0 and "from" not in kwargs:
        lo, hi = 0, int(from_)
    elif to is None:
        lo = 0
        if x._dtype.kind == "f":
            hi = 2 ** (np.finfo(x._dtype.numpy).nmant + 1) + 1
        elif x._dtype is D.bool_:
            hi = 2
        else:
            hi = int(np.iinfo(x._dtype.numpy).max) + 1
    else:
        lo, hi = int(from_), int(to)
    if lo >= hi:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
    with no_grad():
        u = _uniform_like(x, generator)
        v = E.add(E.floor(E.mul(u, float(hi - lo))), float(lo))
        v = E.minimum(v, E._full_like_scalar(v, float(hi - 1)))
    return _fill_with(x, v)


def _transform_(name: str, x: Tensor, generator: Generator | None, f: Any) -> Tensor:
    x = tensor_arg(name, x)
    if x._dtype.kind != "f":
        raise RuntimeError(f"{name} expects a floating point tensor, got {x._dtype.name}")
    with no_grad():
        v = f(_uniform_like(x, generator))
    return _fill_with(x, v)


def exponential_(input: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """In place: exponential draws with rate ``lambd`` (inverse CDF)."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _transform_("exponential_", input, generator,
                       lambda u: E.div(E.neg(E.log1p(E.neg(u))), float(lambd)))


def cauchy_(input: Tensor, median: float = 0.0, sigma: float = 1.0, *,  # noqa: A002
            generator: Generator | None = None) -> Tensor:
    """In place: Cauchy draws, ``median + sigma * tan(pi * (u - 1/2))``."""
    return _transform_("cauchy_", input, generator,
                       lambda u: E.add(E.mul(E.tan(E.mul(E.sub(u, 0.5), math.pi)), float(sigma)),
                                       float(median)))


def log_normal_(input: Tensor, mean: float = 1.0, std: float = 2.0, *,  # noqa: A002
                generator: Generator | None = None) -> Tensor:
    """In place: ``exp`` of normal draws with ``mean`` and ``std``."""
    x = tensor_arg("log_normal_", input)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    if x._dtype.kind != "f":
        raise RuntimeError(f"log_normal_ expects a floating point tensor, got {x._dtype.name}")
    with no_grad():
        z = normal_(_empty(x._shape, _wide_float(x._device), x._device), float(mean), float(std),
                    generator=generator)
        v = E.exp(z)
    return _fill_with(x, v)


def geometric_(input: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:  # noqa: A002
    """In place: the number of Bernoulli(p) trials up to the first success (>= 1)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    x = tensor_arg("geometric_", input)
    with no_grad():
        u = _uniform_like(x, generator)
        v = E.maximum(E.ceil(E.div(E.log1p(E.neg(u)), math.log1p(-p))), E._full_like_scalar(u, 1.0))
    return _fill_with(x, v)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Generator | None = None) -> Tensor:
    """Indices drawn from the categories of each row of ``input`` (1-D or 2-D
    non-negative weights), with probabilities proportional to the weights.

    With replacement: inverse-CDF sampling of uniforms. Without: the
    exponential-race trick (the ``num_samples`` largest ``log(u) / w``), which
    draws an ordered sample without replacement with the same law as
    sequential draws; zero weights come last."""
    if not isinstance(input, Tensor):
        raise bad_operand("multinomial", input)
    if input._dtype.kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input._dtype.name}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.ndim}-D input")
    n = input._shape[-1]
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (num_samples={num_samples})")
    if not replacement and num_samples > n:
        raise RuntimeError(
            f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            f"(num_samples={num_samples}, categories={n})"
        )
    if n == 0:
        raise RuntimeError("multinomial: invalid multinomial distribution (no categories)")
    dev = ready_device(input._device)
    wide = _wide_float(dev)
    with no_grad():
        w = cast(input.detach(), wide)
        w2 = V.reshape(w, (-1, n))
        rows = w2._shape[0]
        bad = E.logical_or(E.logical_not(E.isfinite(w2)), E.lt(w2, 0.0))
        if bool(R.any(bad).item()):
            raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or element < 0")
        total = R.sum(w2, -1, True)
        if rows and bool(R.any(E.le(total, 0.0)).item()):
            raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
        if replacement:
            u = uniform_(_empty((rows, num_samples), wide, dev), generator=generator)
            cdf = R.cumsum(w2, -1)
            thresh = E.mul(u, total)
            # the first category whose cumulative weight exceeds u * total
            below = E.le(V.unsqueeze(cdf, 1), V.unsqueeze(thresh, 2))
            idx = R.sum(below, -1)
            # rounding can push u * total past the last cumulative weight: take
            # the last category that has weight then
            pos = cast(E.gt(w2, 0.0), D.int64)
            last = E.sub(n - 1, R.argmax(flip(pos, -1), -1, True))
            idx = E.minimum(idx, last)
        else:
            u = uniform_(_empty((rows, n), wide, dev), generator=generator)
            positive = E.gt(w2, 0.0)
            keys = E.div(E.log1p(E.neg(u)), E.where(positive, w2, 1.0))  # u in [0, 1): finite
            keys = E.where(positive, keys, -math.inf)
            # ties (zero weights) resolve by position: a stable sort
            order = I.sort(keys, -1, descending=True, stable=True).indices
            idx = V.narrow(order, -1, 0, num_samples)
        idx = cast(idx, D.int64)
        if rows == 0:
            idx = cast(arange(0, device=dev), D.int64).reshape(0, num_samples)
    return V.reshape(idx, (num_samples,)) if input.ndim == 1 else idx.contiguous()


METHODS = ["bernoulli", "bernoulli_", "random_", "exponential_", "cauchy_", "log_normal_", "geometric_",
           "multinomial"]
