"""The ``DataLoader``, as ``torch.utils.data.dataloader``.

    ds = TensorDataset(x, y)
    for xb, yb in DataLoader(ds, batch_size=64, shuffle=True):
        ...

Batches are made in the calling process, as PyTorch does with
``num_workers=0``: ``num_workers``, ``prefetch_factor``, ``persistent_workers``,
``timeout``, ``multiprocessing_context`` and ``worker_init_fn`` are accepted and
validated as PyTorch validates them, but no worker process is started, so
``worker_init_fn`` is never called and ``get_worker_info()`` is None.
``pin_memory`` is accepted and does nothing.

Indices are drawn from the sampler lazily, a batch (or one chunk of a
sampler's random draws) at a time: a loader over ``RandomSampler(ds,
replacement=True, num_samples=10**10)`` yields its first batch at once.

A ``TensorDataset`` (or a ``Subset`` of one, at any depth) loaded with the
default collate takes a fast path: one ``index_select`` per tensor per batch,
no per-sample Python; the indices move to the tensors' device once per chunk
of the sampler's output (once per epoch for the default samplers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, Generic, TypeVar

import numpy as np

from ._utils.collate import default_collate, default_convert
from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      WeightedRandomSampler)

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_BULK_SAMPLERS = (SequentialSampler, RandomSampler, WeightedRandomSampler)
"""Samplers whose ``_chunks()`` the fast path reads (their exact types only: a
subclass may override ``__iter__``)."""


T_co = TypeVar("T_co", covariant=True)


def _rc() -> Any:
    import rtxcore

    return rtxcore


def get_worker_info() -> None:
    """Information about the current loader worker process: always None, since
    rtxcore loads every batch in the calling process."""
    return None


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



class _InfiniteConstantSampler(Sampler[None]):
    """The sampler of an ``IterableDataset``: None, forever."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


class _LoaderIter:
    """One pass over a DataLoader: an iterator that also knows its length."""

    def __init__(self, loader: DataLoader, batches: Iterator[Any]) -> None:
        self._loader = loader
        self._batches = batches

    def __iter__(self) -> _LoaderIter:
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches, as ``torch.utils.data.DataLoader``.

    ``batch_size`` samples per batch (``None``: no batching, samples one by one
    through ``default_convert``); ``shuffle`` draws a new order every epoch
    (a ``RandomSampler`` on ``generator``, default: seeded from the global
    generator); ``sampler`` (an iterable of indices) or ``batch_sampler`` (an
    iterable of index lists) replaces the order; ``drop_last`` drops a last,
    short batch; ``collate_fn`` merges a list of samples (default:
    ``default_collate``). An ``IterableDataset`` is read in its own order and
    batched as it streams. See the module docstring for the worker options.
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler[Any] | Iterable[Any] | None = None,
                 batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[Any], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")

        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.shuffle = shuffle
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is not None:
                return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def __iter__(self) -> _LoaderIter:
        return _LoaderIter(self, self._batches())

    # -- one pass ------------------------------------------------------------------

    def _batches(self) -> Iterator[Any]:
        ds = self.dataset
        collate = self.collate_fn
        if isinstance(ds, IterableDataset):
            it = iter(ds)
            if not self._auto_collation:
                yield from (collate(x) for x in it)
                return
            bs = self.batch_size
            while True:
                batch = list(islice(it, bs))
                if not batch or (self.drop_last and len(batch) < bs):  # type: ignore[operator]
                    return
                yield collate(batch)
        if not self._auto_collation:
            yield from (collate(ds[i]) for i in self.sampler)
            return
        if collate is default_collate:
            src = _tensor_source(ds)
            if src is not None:
                yield from self._tensor_batches(src)
                return
        getitems = getattr(ds, "__getitems__", None)
        for indices in self.batch_sampler:  # type: ignore[union-attr]
            yield collate(getitems(indices) if getitems is not None else [ds[i] for i in indices])

    def _tensor_batches(self, src: tuple[tuple[Any, ...], np.ndarray | None]) -> Iterator[Any]:
        """The fast path: the sampler's indices a chunk at a time, each batch one
        ``index_select`` per tensor."""
        bsampler = self.batch_sampler
        if type(bsampler) is not BatchSampler:
            # a custom batch sampler: its batches as they come
            for indices in bsampler:  # type: ignore[union-attr]
                idx = np.fromiter((int(i) for i in indices), dtype=np.int64)
                yield from self._gather(src, idx, max(idx.size, 1))
            return
        bs, drop_last = bsampler.batch_size, bsampler.drop_last
        sampler = bsampler.sampler
        if type(sampler) in _BULK_SAMPLERS:
            chunks = sampler._chunks()  # type: ignore[union-attr]
        else:
            chunks = _iter_chunks(sampler, bs)
        pending = np.empty(0, dtype=np.int64)
        for chunk in chunks:
            if pending.size:
                chunk = np.concatenate([pending, chunk])
            full = chunk.size - chunk.size % bs
            if full:
                yield from self._gather(src, chunk[:full], bs)
            pending = chunk[full:]
        if pending.size and not drop_last:
            yield from self._gather(src, pending, bs)

    def _gather(self, src: tuple[tuple[Any, ...], np.ndarray | None], order: np.ndarray,
                bs: int) -> Iterator[list[Any]]:
        """Batches of ``bs`` of the samples at ``order`` (dataset indices)."""
        rc = _rc()
        tensors, base = src
        n = len(self.dataset)
        if order.size and (order.min() < -n or order.max() >= n):
            bad = order[(order < -n) | (order >= n)][0]
            raise IndexError(f"index {bad} is out of range for a dataset of length {n}")
        order = np.where(order < 0, order + n, order)
        if base is not None:
            order = base[order]
        order = np.ascontiguousarray(order)
        # the index on each device the tensors live on, moved there once per chunk
        on: dict[Any, Any] = {}
        for t in tensors:
            if t.device not in on:
                on[t.device] = rc.tensor(order, dtype=rc.int64, device=t.device)
        idx = [on[t.device] for t in tensors]
        for s in range(0, order.size, bs):
            yield [rc.index_select(t, 0, ix[s:s + bs]) for t, ix in zip(tensors, idx)]

    def __repr__(self) -> str:
        return (f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"sampler={type(self.sampler).__name__}, drop_last={self.drop_last})")


def _iter_chunks(sampler: Iterable[Any], size: int) -> Iterator[np.ndarray]:
    """The indices of any iterable, ``size`` at a time, as int64 arrays."""
    it = iter(sampler)
    while True:
        chunk = np.fromiter((int(i) for i in islice(it, size)), dtype=np.int64)
        if not chunk.size:
            return
        yield chunk
