"""Samplers, as ``torch.utils.data.sampler``: iterables of dataset indices that
a ``DataLoader`` draws from, one index (or, for ``BatchSampler``, one list of
indices) at a time.

Every sampler here is lazy: it draws its random numbers in chunks as it is
iterated, so ``RandomSampler(ds, replacement=True, num_samples=10**10)`` starts
at once. Random draws come from ``generator``, or, without one, from a private
generator seeded from rtxcore's default generator at the start of each pass, as
PyTorch does: ``rtxcore.manual_seed(s)`` then makes every epoch's order
reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from itertools import islice
from typing import Any, Generic, TypeVar

import numpy as np

from ...device import host_device  # cpu, or the default device without the cpu backend

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]

T_co = TypeVar("T_co", covariant=True)

_REPLACEMENT_CHUNK = 32
"""Indices drawn at a time when sampling with replacement (PyTorch's figure)."""


def _rc() -> Any:
    import rtxcore

    return rtxcore


def _private_generator(generator: Any) -> Any:
    """``generator``, or a fresh one seeded from the default generator."""
    rc = _rc()
    if generator is not None:
        return generator
    seed = int(rc.randint(0, 2 ** 62, (1,), device=host_device()).item())
    return rc.Generator().manual_seed(seed)


def _check_num_samples(num_samples: Any) -> None:
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
        raise ValueError(
            f"num_samples should be a positive integer value, but got num_samples={num_samples}"
        )


def _check_replacement(replacement: Any) -> None:
    if not isinstance(replacement, bool):
        raise TypeError(
            f"replacement should be a boolean value, but got replacement={replacement}"
        )


class Sampler(Generic[T_co]):
    """Base class of the samplers: subclasses define ``__iter__`` (the indices of
    one pass) and, when they know it, ``__len__``."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def _chunks(self) -> Iterator[np.ndarray]:
        """The indices of one pass as int64 arrays, a chunk at a time (what the
        DataLoader's tensor fast path gathers with). By default, from ``__iter__``."""
        it = iter(self)
        while True:
            chunk = np.fromiter(islice(it, 1024), dtype=np.int64)
            if not chunk.size:
                return
            yield chunk


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def _chunks(self) -> Iterator[np.ndarray]:
        yield np.arange(len(self.data_source), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices into ``data_source``.

    Without replacement: a new random permutation per pass (several, then part
    of one, when ``num_samples`` exceeds the dataset's length). With
    replacement: ``num_samples`` independent uniform draws, made 32 at a time.
    ``num_samples`` defaults to ``len(data_source)``.
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_replacement(replacement)
        if num_samples is not None or len(data_source) != 0:
            # (an empty dataset shuffles to nothing rather than failing, unlike PyTorch)
            _check_num_samples(self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _chunks(self) -> Iterator[np.ndarray]:
        rc = _rc()
        n = len(self.data_source)
        gen = _private_generator(self.generator)
        total = self.num_samples
        if self.replacement:
            for _ in range(total // _REPLACEMENT_CHUNK):
                yield rc.randint(0, n, (_REPLACEMENT_CHUNK,), generator=gen,
                                 device=host_device()).numpy()
            if total % _REPLACEMENT_CHUNK:
                yield rc.randint(0, n, (total % _REPLACEMENT_CHUNK,), generator=gen,
                                 device=host_device()).numpy()
            return
        if total == 0:
            return
        for _ in range(total // n):
            yield rc.randperm(n, generator=gen, device=host_device()).numpy()
        if total % n:
            yield rc.randperm(n, generator=gen, device=host_device()).numpy()[:total % n]

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks():
            yield from chunk.tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices``, in a new random order each pass."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rc = _rc()
        for i in rc.randperm(len(self.indices), generator=self.generator,
                             device=host_device()).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices in ``[0, len(weights))``, index i drawn with
    probability proportional to ``weights[i]``; with replacement (the default)
    or without (then ``num_samples`` may not exceed the number of non-zero
    weights). Draws with ``rtxcore.multinomial``, in chunks when with
    replacement."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        rc = _rc()
        _check_num_samples(num_samples)
        _check_replacement(replacement)
        weights_tensor = rc.as_tensor(weights, dtype=rc.float64, device=host_device())
        if weights_tensor.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def _chunks(self) -> Iterator[np.ndarray]:
        rc = _rc()
        gen = _private_generator(self.generator)
        if not self.replacement:
            yield rc.multinomial(self.weights, self.num_samples, False, generator=gen).numpy()
            return
        chunk = 4096
        left = self.num_samples
        while left > 0:
            k = min(chunk, left)
            yield rc.multinomial(self.weights, k, True, generator=gen).numpy()
            left -= k

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks():
            yield from chunk.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Group the indices of ``sampler`` into lists of ``batch_size``; the last,
    shorter list is dropped when ``drop_last``."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(
                f"drop_last should be a boolean value, but got drop_last={drop_last}"
            )
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        while True:
            batch = list(islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size
