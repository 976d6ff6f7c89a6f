"""``DistributedSampler``, as ``torch.utils.data.distributed``: the share of a
dataset's indices that one of ``num_replicas`` processes loads.

``num_replicas`` and ``rank`` default to the default process group's world
size and rank (``rtxcore.distributed``); without one, to 1 and 0 (the whole
dataset).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ...device import host_device  # cpu, or the default device without the cpu backend

from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler[int]):
    """Indices ``rank, rank + num_replicas, ...`` of the (shuffled, when
    ``shuffle``) index list, padded by repeating its start to a multiple of
    ``num_replicas`` (or cut down to one, when ``drop_last``). The shuffle is
    seeded with ``seed + epoch``: call ``set_epoch(epoch)`` before each epoch
    for a new order."""

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            from ... import distributed as dist

            on = dist.is_initialized()
            if num_replicas is None:
                num_replicas = dist.get_world_size() if on else 1
            if rank is None:
                rank = dist.get_rank() if on else 0
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(dataset) % self.num_replicas != 0:
            # drop the tail so that every replica gets the same number of samples
            self.num_samples = math.ceil((len(dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        import rtxcore as rc

        n = len(self.dataset)
        if self.shuffle:
            g = rc.Generator().manual_seed(self.seed + self.epoch)
            indices = rc.randperm(n, generator=g, device=host_device()).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch the next shuffle is seeded with (``seed + epoch``)."""
        self.epoch = epoch
