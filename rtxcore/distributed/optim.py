"""``ZeroRedundancyOptimizer``: each rank keeps the optimizer state of a share
of the parameters only (ZeRO stage 1, as ``torch.distributed.optim``).

The parameters are split over the ranks greedily, largest first, each to the
rank holding the fewest elements so far. Every rank steps its local optimizer
on its own share (gradients must already be averaged, e.g. by
``DistributedDataParallel``); then each rank's updated share is broadcast
from it, one flat buffer per rank and dtype, so that every replica holds every
updated parameter. The state (Adam's two moments: 2x the parameters) is held
once across the job instead of once per rank.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer:
    def __init__(self, params: Any, optimizer_class: type, process_group: Any = None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False,
                 **defaults: Any) -> None:
        from . import _group

        if overlap_with_ddp:
            raise ValueError("ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported: "
                             "step after backward instead")
        params = list(params)
        if params and isinstance(params[0], dict):
            raise TypeError("ZeroRedundancyOptimizer takes a flat list of parameters "
                            "(parameter groups are not supported)")
        if not params:
            raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
        self.process_group = process_group
        self._pg = _group(process_group)
        n = self._pg.size()
        self._all_params = params
        self.owner: dict[int, int] = {}
        load = [0] * n
        for p in sorted(params, key=lambda t: t.numel(), reverse=True):
            r = min(range(n), key=lambda i: (load[i], i))
            self.owner[id(p)] = r
            load[r] += p.numel()
        self.rank = self._pg.rank()
        mine = [p for p in params if self.owner[id(p)] == self.rank]
        # a rank may own nothing (more ranks than parameters): it steps nothing
        self.optim = optimizer_class(mine, **defaults) if mine else None
        self._shares: list[dict[tuple[Any, Any], list[Any]]] = []
        for r in range(n):
            by_kind: dict[tuple[Any, Any], list[Any]] = {}
            for p in params:
                if self.owner[id(p)] == r:
                    by_kind.setdefault((str(p.device), p.dtype), []).append(p)
            self._shares.append(by_kind)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The local optimizer's groups (this rank's share)."""
        return self.optim.param_groups if self.optim is not None else []

    @property
    def state(self) -> Any:
        return self.optim.state if self.optim is not None else {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._all_params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach().zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if self.optim is not None:
            loss = self.optim.step(closure) if closure is not None else self.optim.step()
        elif closure is not None:
            loss = closure()
        self._sync_params()
        return loss

    def _sync_params(self) -> None:
        from .. import cat, empty, no_grad
        from . import broadcast

        if self._pg.size() == 1:
            return
        with no_grad():
            for r, by_kind in enumerate(self._shares):
                src = self._pg.ranks[r]
                for (_, dtype), ps in by_kind.items():
                    if r == self.rank:
                        flat = cat([p.detach().reshape(-1) for p in ps])
                    else:
                        flat = empty(sum(p.numel() for p in ps), dtype=dtype, device=ps[0].device)
                    broadcast(flat, src=src, group=self.process_group)
                    if r != self.rank:
                        off = 0
                        for p in ps:
                            p.detach().copy_(flat[off:off + p.numel()].view(p.shape))
                            off += p.numel()

    def __repr__(self) -> str:
        return (f"ZeroRedundancyOptimizer(rank {self.rank}: {sum(1 for v in self.owner.values() if v == self.rank)}"
                f" of {len(self._all_params)} parameters, {self.optim!r})")
