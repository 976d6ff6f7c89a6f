"""Datasets and the ``DataLoader``, after ``torch.utils.data``.

    ds = TensorDataset(x, y)
    train, val = random_split(ds, [0.8, 0.2], generator=rc.Generator().manual_seed(0))
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True):
        ...

Batches are made in the calling process (``num_workers`` is accepted and
ignored). A ``TensorDataset`` (or a ``Subset`` of one, at any depth) loaded with
the default collate takes a fast path: one ``index_select`` per tensor per batch,
no per-sample Python. Shuffling draws ``rtxcore.randperm`` (on cpu) from the
loader's ``generator`` or, without one, from the default generator, so
``rtxcore.manual_seed(s)`` makes the order of every epoch reproducible, on every
device.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ConcatDataset", "DataLoader", "Dataset", "Subset", "TensorDataset", "default_collate",
           "default_convert", "random_split"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


# -- datasets ----------------------------------------------------------------------------


class Dataset:
    """A map-style dataset: ``ds[i]`` for ``0 <= i < len(ds)``. Subclasses define
    ``__getitem__`` and ``__len__``."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


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


class Subset(Dataset):
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


class ConcatDataset(Dataset):
    """The samples of several datasets, one after the other."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
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
    perm = rc.randperm(n, generator=generator, device="cpu").tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


# -- collation ---------------------------------------------------------------------------


def default_convert(data: Any) -> Any:
    """What a loader with ``batch_size=None`` yields per sample: numpy arrays and
    scalars become tensors, containers are converted recursively."""
    rc = _rc()
    if isinstance(data, rc.Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return rc.as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind in "biuf":
        return rc.as_tensor(np.asarray(data))
    if isinstance(data, Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, as PyTorch's ``default_collate``:
    tensors (and numpy arrays) are stacked along a new dim 0; Python floats give a
    float64 tensor, ints an int64 one, bools a bool one; str are kept as a list;
    dicts, named tuples, tuples and lists are collated field by field (a tuple
    gives a list)."""
    rc = _rc()
    if not len(batch):
        raise ValueError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, rc.Tensor):
        return rc.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind not in "biuf":
            raise TypeError(f"default_collate: can't batch numpy arrays of dtype {elem.dtype}")
        return rc.stack([rc.as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic) and elem.dtype.kind in "biuf":
        return rc.as_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return rc.tensor(list(batch), dtype=rc.bool_)
    if isinstance(elem, float):
        return rc.tensor(list(batch), dtype=rc.float64)
    if isinstance(elem, int):
        return rc.tensor(list(batch), dtype=rc.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        cols = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return cols
        try:
            return type(elem)(cols)
        except TypeError:
            return cols
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, str, dicts or "
        f"lists; found {type(elem).__name__}"
    )


# -- the loader --------------------------------------------------------------------------


def _tensor_source(ds: Any) -> tuple[tuple[Any, ...], np.ndarray | None] | None:
    """For a TensorDataset, or Subsets of one (their own __getitem__ untouched):
    its tensors and the index array the subsets select (None: all, in order)."""
    if isinstance(ds, TensorDataset) and type(ds).__getitem__ is TensorDataset.__getitem__:
        return ds.tensors, None
    if isinstance(ds, Subset) and type(ds).__getitem__ is Subset.__getitem__:
        inner = _tensor_source(ds.dataset)
        if inner is None:
            return None
        tensors, base = inner
        n = len(ds.dataset)
        idx = np.asarray(ds.indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            bad = idx[(idx < -n) | (idx >= n)][0]
            raise IndexError(f"Subset index {bad} is out of range for a dataset of length {n}")
        idx = np.where(idx < 0, idx + n, idx)
        return tensors, (idx if base is None else base[idx])
    return None


# PyTorch DataLoader options about worker processes and memory pinning: accepted, unused
_IGNORED_OPTIONS = {"timeout", "worker_init_fn", "multiprocessing_context", "prefetch_factor",
                    "persistent_workers", "pin_memory_device", "in_order"}


class DataLoader:
    """Iterate over ``dataset`` in batches.

    ``batch_size`` samples per batch (``None``: no batching, samples one by one);
    ``shuffle`` draws a new order every epoch with ``rtxcore.randperm`` from
    ``generator`` (default: the global generator); ``drop_last`` drops a last,
    short batch; ``collate_fn`` merges a list of samples (default:
    ``default_collate``); ``sampler``, an iterable of indices, replaces the
    sequential or shuffled order. ``num_workers``, ``pin_memory`` and the other
    PyTorch options are accepted for compatibility and do nothing.
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool = False,
                 sampler: Iterable[int] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, generator: Any = None, **ignored: Any) -> None:
        unknown = sorted(set(ignored) - _IGNORED_OPTIONS)
        if unknown:
            raise TypeError(f"DataLoader() got unexpected keyword arguments {unknown}")
        if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) != batch_size
                                       or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer or None, got {batch_size!r}")
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None disables batching, so drop_last=True makes no sense")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.drop_last = bool(drop_last)
        self.generator = generator

    def _order(self) -> np.ndarray:
        """This epoch's sample indices (into ``dataset``), as an int64 array."""
        if self.sampler is not None:
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        n = len(self.dataset)
        if self.shuffle:
            rc = _rc()
            return rc.randperm(n, generator=self.generator, device="cpu").numpy()
        return np.arange(n, dtype=np.int64)

    def _num_samples(self) -> int:
        if self.sampler is not None:
            return len(self.sampler)  # type: ignore[arg-type]
        return len(self.dataset)

    def __len__(self) -> int:
        n = self._num_samples()
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        order = self._order()
        bs = self.batch_size
        if bs is None:
            convert = self.collate_fn or default_convert
            return (convert(self.dataset[int(i)]) for i in order)
        stop = len(order) - len(order) % bs if self.drop_last else len(order)
        if self.collate_fn in (None, default_collate):
            src = _tensor_source(self.dataset)
            if src is not None:
                return self._tensor_batches(src, order, stop)
        collate = self.collate_fn or default_collate
        ds = self.dataset
        idx = order.tolist()
        return (collate([ds[i] for i in idx[s:s + bs]]) for s in range(0, stop, bs))

    def _tensor_batches(self, src: tuple[tuple[Any, ...], np.ndarray | None], order: np.ndarray,
                        stop: int) -> Iterator[list[Any]]:
        rc = _rc()
        tensors, base = src
        n = len(self.dataset)
        if order.size and (order.min() < -n or order.max() >= n):
            bad = order[(order < -n) | (order >= n)][0]
            raise IndexError(f"index {bad} is out of range for a dataset of length {n}")
        order = np.where(order < 0, order + n, order)
        if base is not None:
            order = base[order]
        order = np.ascontiguousarray(order[:stop])
        # the index on each device the tensors live on, moved there once per epoch
        on: dict[Any, Any] = {}
        for t in tensors:
            if t.device not in on:
                on[t.device] = rc.tensor(order, dtype=rc.int64, device=t.device)
        idx = [on[t.device] for t in tensors]
        bs = self.batch_size
        for s in range(0, stop, bs):  # type: ignore[arg-type]
            yield [rc.index_select(t, 0, ix[s:s + bs]) for t, ix in zip(tensors, idx)]

    def __repr__(self) -> str:
        return (f"DataLoader(dataset={type(self.dataset).__name__} of {self._num_samples()}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle}, drop_last={self.drop_last})")
