"""``ZeroRedundancyOptimizer``: each rank keeps the optimizer state of a share
of the parameters only (ZeRO stage 1, as ``torch.distributed.optim``).

The parameters are split over the ranks greedily, largest first, each to the
rank holding the fewest elements so far. Every rank steps its local optimizer
on its own share (gradients must already be averaged, e.g. by
``DistributedDataParallel``); then one all-gather per device and dtype brings
every rank's updated share (flat, padded to the longest share) to every
replica. The state (Adam's two moments: 2x the parameters) is held once
across the job instead of once per rank.

Checkpoints as PyTorch's: ``consolidate_state_dict(to=0)`` (every rank calls
it) gathers the shares' states on rank ``to``, whose ``state_dict()`` is then
the wrapped optimizer's full state dict, parameters numbered in the order
given; ``load_state_dict`` on every rank keeps the state of its own share.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .collectives import all_gather_into_tensor
from .groups import _group, _root
from .objects import gather_object

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer:
    def __init__(self, params: Any, optimizer_class: type, process_group: Any = None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False,
                 **defaults: Any) -> None:
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
        from .. import empty, no_grad

        n = self._pg.size()
        if n == 1:
            return
        kinds = {k: (ps[0].dtype, ps[0].device) for share in self._shares for k, ps in share.items()}
        with no_grad():
            for kind in sorted(kinds, key=str):  # the same order on every rank
                dtype, device = kinds[kind]
                shares = [share.get(kind, []) for share in self._shares]
                longest = max(sum(p.numel() for p in ps) for ps in shares)
                mine = empty(longest, dtype=dtype, device=device)
                off = 0
                for p in shares[self.rank]:
                    mine[off:off + p.numel()] = p.detach().reshape(-1)
                    off += p.numel()
                every = empty(n * longest, dtype=dtype, device=device)
                all_gather_into_tensor(every, mine, group=self.process_group)
                for r, ps in enumerate(shares):
                    if r == self.rank:
                        continue
                    off = r * longest
                    for p in ps:
                        p.detach().copy_(every[off:off + p.numel()].view(p.shape))
                        off += p.numel()

    # -- checkpoints ------------------------------------------------------------------------

    def _local_index(self) -> dict[int, int]:
        """Global parameter index -> its index in the local optimizer."""
        mine = [i for i, p in enumerate(self._all_params) if self.owner[id(p)] == self.rank]
        return {g: k for k, g in enumerate(mine)}

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's share of the state on rank ``to`` (every rank calls
        this); ``state_dict()`` there then returns the whole of it."""
        local = self._local_index()
        back = {k: g for g, k in local.items()}
        sd = self.optim.state_dict() if self.optim is not None else {"state": {}, "param_groups": []}
        state = {back[k]: {name: (v.detach().numpy() if hasattr(v, "numel") else v)
                           for name, v in st.items()} for k, st in sd["state"].items()}
        groups = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
        every: list[Any] | None = [None] * self._pg.size() \
            if self._pg.rank() == _root(self._pg, to, None, "consolidate_state_dict", "to") else None
        gather_object((state, groups), every, dst=to, group=self.process_group)
        self._consolidated = None
        if every is not None:
            from .. import tensor

            full: dict[int, Any] = {}
            hyper: dict[str, Any] = {}
            for st, gs in every:
                for g, entry in st.items():
                    p = self._all_params[g]
                    full[g] = {name: tensor(v, device=p.device) if isinstance(v, np.ndarray)
                               else v for name, v in entry.items()}
                if gs and not hyper:
                    hyper = gs[0]
            self._consolidated = {"state": dict(sorted(full.items())),
                                  "param_groups": [{**hyper,
                                                    "params": list(range(len(self._all_params)))}]}

    def state_dict(self) -> dict[str, Any]:
        """The whole optimizer state: only on the rank that ``consolidate_state_dict``
        gathered it on, after that call."""
        got = getattr(self, "_consolidated", None)
        if got is None:
            raise RuntimeError("ZeroRedundancyOptimizer.state_dict(): call consolidate_state_dict(to=r) "
                               "on every rank first, then state_dict() on rank r (each rank holds "
                               "only its share of the state)")
        return got

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict ``state_dict()`` gave (on every rank: each keeps its share)."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or \
                "param_groups" not in state_dict:
            raise ValueError("ZeroRedundancyOptimizer.load_state_dict expects a dict with 'state' "
                             "and 'param_groups', as state_dict() returns")
        groups = state_dict["param_groups"]
        count = sum(len(g["params"]) for g in groups)
        if count != len(self._all_params):
            raise ValueError(f"ZeroRedundancyOptimizer.load_state_dict: the state dict is of "
                             f"{count} parameters, this optimizer has {len(self._all_params)}")
        if self.optim is None:
            return
        local = self._local_index()
        hyper = {k: v for k, v in groups[0].items() if k != "params"}
        state = {int(g) if not isinstance(g, int) else g: v for g, v in state_dict["state"].items()}
        self.optim.load_state_dict({
            "state": {k: state[g] for g, k in local.items() if g in state},
            "param_groups": [{**hyper, "params": list(range(len(local)))}]})

    def __repr__(self) -> str:
        return (f"ZeroRedundancyOptimizer(rank {self.rank}: {sum(1 for v in self.owner.values() if v == self.rank)}"
                f" of {len(self._all_params)} parameters, {self.optim!r})")
