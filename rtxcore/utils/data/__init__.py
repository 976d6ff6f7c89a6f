"""Datasets, samplers and the ``DataLoader``, as ``torch.utils.data``.

    ds = TensorDataset(x, y)
    train, val = random_split(ds, [0.8, 0.2], generator=rc.Generator().manual_seed(0))
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True):
        ...

The submodules are PyTorch's: ``dataset``, ``sampler``, ``dataloader``,
``distributed`` (``DistributedSampler``) and ``_utils.collate``. Batches are
made in the calling process (see ``dataloader``); shuffling draws from the
loader's ``generator`` or, without one, from a generator seeded from the default
one, so ``rtxcore.manual_seed(s)`` makes the order of every epoch
reproducible, on every device.
"""

from __future__ import annotations

from . import _utils, dataloader, dataset, distributed, sampler
from ._utils.collate import default_collate, default_convert
from .dataloader import DataLoader, get_worker_info
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                      TensorDataset, random_split)
from .distributed import DistributedSampler
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
           "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler",
           "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "default_collate", "default_convert", "get_worker_info",
           "random_split"]
