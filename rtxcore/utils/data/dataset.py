"""Datasets, as ``torch.utils.data.dataset``: map-style ``Dataset`` (``ds[i]``,
``len(ds)``), ``IterableDataset`` (a stream), ``TensorDataset``, ``Subset``,
``ConcatDataset``, ``ChainDataset`` and ``random_split``."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ...device import host_device  # cpu, or the default device without the cpu backend

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "Subset",
           "TensorDataset", "random_split"]


T_co = TypeVar("T_co", covariant=True)


def _rc() -> Any:
    import rtxcore

    return rtxcore


class Dataset(Generic[T_co]):
    """A map-style dataset: ``ds[i]`` for ``0 <= i < len(ds)``. Subclasses define
    ``__getitem__`` and ``__len__``."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset that is a stream of samples: subclasses define ``__iter__``. A
    ``DataLoader`` iterates it in order (no sampler, no shuffle) and batches what
    it yields."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate it instead of "
                        "indexing it")

    def __add__(self, other: Any) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """The samples of several iterable datasets, one stream after the other."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class TensorDataset(Dataset):
    """Samples are ``(t[i] for t in tensors)``: every tensor is indexed along dim 0,
    so all must have the same size there."""

    def __init__(self, *tensors: Any) -> None:
        rc = _rc()
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, rc.Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a {type(t).__name__}, not a Tensor")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: argument {i} is a 0-d tensor; each tensor needs a "
                                 "first dimension to index samples along")
        sizes = [t.shape[0] for t in tensors]
        if any(n != sizes[0] for n in sizes):
            raise ValueError(
                "TensorDataset: size mismatch between tensors: every tensor needs the same size in "
                f"dim 0 (the number of samples), got {sizes} for shapes "
                f"{[tuple(t.shape) for t in tensors]}"
            )
        self.tensors = tuple(tensors)

    def __getitem__(self, index: Any) -> tuple[Any, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices.tolist() if hasattr(indices, "tolist") else list(indices)

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """The samples of several datasets, one after the other."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes: list[int] = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> Any:
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise IndexError(f"index {idx} is out of range for a dataset of length {n}")
            idx += n
        if idx >= n:
            raise IndexError(f"index {idx} is out of range for a dataset of length {n}")
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[d][idx - (self.cumulative_sizes[d - 1] if d else 0)]


def random_split(dataset: Any, lengths: Sequence[Any], generator: Any = None) -> list[Subset]:
    """Split ``dataset`` at random into non-overlapping ``Subset``s of the given
    ``lengths``: ints summing to ``len(dataset)``, or fractions summing to 1 (the
    remainder of rounding down goes one by one to the first subsets)."""
    rc = _rc()
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is {frac}, not between 0 and 1")
        if not math.isclose(sum(lengths), 1):
            raise ValueError(f"random_split: fractions must sum to 1, got {sum(lengths)}")
        sizes = [math.floor(n * frac) for frac in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    for i, x in enumerate(lengths):
        if int(x) != x or x < 0:
            raise ValueError(f"random_split: length at index {i} is {x}; lengths must be "
                             "non-negative ints (or fractions summing to 1)")
    lengths = [int(x) for x in lengths]
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths {lengths} sum to {sum(lengths)}, but the "
                         f"dataset has {n} samples")
    perm = rc.randperm(n, generator=generator, device=host_device()).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


