"""``ZeroRedundancyOptimizer``: each rank keeps the optimizer state of a share
of the parameters only (ZeRO stage 1, as ``torch.distributed.optim``).

The parameters are split over the ranks greedily, largest first, each to the
rank holding the fewest elements so far. Every rank steps its local optimizer
on its own share (gradients must already be averaged, e.g. by
``DistributedDataParallel``); then one all-gather per device and dtype brings
every rank's updated share (flat, padded to the longest share) to every
replica. The state (Adam's two moments: 2x the parameters) is held once
across the job instead of once per rank.

``stage=2`` (ZeRO stage 2; an rtxcore extension): the model is *not* wrapped in
``DistributedDataParallel``, and ``step()`` reduces the gradients itself by one
reduce-scatter per device and dtype: each rank receives the sum of its own
share's gradients only (averaged over the ranks, as DDP's), and drops the
gradients of the other shares. That moves the same bytes as DDP's all-reduce but
never holds the whole reduced gradient, and between steps a rank keeps only
its share's gradients. The parameters are broadcast from the group's first rank
when the optimizer is made (as DDP does when it wraps). Clip with
``clip_grad_norm_`` here (the norm of the reduced gradients over every share),
not ``nn.utils.clip_grad_norm_``, which would see this rank's own, unreduced
gradients.

Checkpoints as PyTorch's: ``consolidate_state_dict(to=0)`` (every rank calls
it) gathers the shares' states on rank ``to``, whose ``state_dict()`` is then
the wrapped optimizer's full state dict, parameters numbered in the order
given; ``load_state_dict`` on every rank keeps the state of its own share.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .checks import ReduceOp
from .collectives import all_gather_into_tensor, all_reduce, broadcast, reduce_scatter_tensor
from .groups import _group, _root
from .objects import gather_object

__all__ = ["ZeroRedundancyOptimizer"]


class ZeroRedundancyOptimizer:
    def __init__(self, params: Any, optimizer_class: type, process_group: Any = None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False,
                 stage: int = 1, **defaults: Any) -> None:
        if stage not in (1, 2):
            raise ValueError(f"ZeroRedundancyOptimizer(stage={stage!r}): stage 1 shards the "
                             "optimizer state, stage 2 the gradients too; no other stage")
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
        self.stage = stage
        self._reduced = False  # stage 2: this step's gradients are reduced already
        if stage == 2 and n > 1:
            from .. import no_grad

            root = self._pg.ranks[0]
            with no_grad():
                for p in params:
                    broadcast(p.detach(), src=root, group=process_group)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The local optimizer's groups (this rank's share)."""
        return self.optim.param_groups if self.optim is not None else []

    @property
    def state(self) -> Any:
        return self.optim.state if self.optim is not None else {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        self._reduced = False  # (a step skipped after clip_grad_norm_: the next reduces again)
        for p in self._all_params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach().zero_()

    def _kinds(self) -> list[tuple[Any, Any, Any]]:
        """(key, dtype, device) of every kind of parameter, in one order on every rank."""
        kinds = {k: (ps[0].dtype, ps[0].device) for share in self._shares for k, ps in share.items()}
        return [(k, *kinds[k]) for k in sorted(kinds, key=str)]

    def reduce_gradients(self) -> None:
        """Stage 2: sum every rank's gradients onto their owners (one reduce-scatter
        per kind), averaged; the other shares' gradients become None. ``step()``
        calls it; call it first yourself to read or clip the reduced gradients.
        Every rank calls it, once per backward."""
        from .. import no_grad, zeros

        if self.stage != 2 or self._reduced:
            return
        n = self._pg.size()
        with no_grad():
            for key, dtype, device in self._kinds():
                shares = [share.get(key, []) for share in self._shares]
                longest = max(sum(p.numel() for p in ps) for ps in shares)
                # one more element per parameter, after the shares: whether this
                # rank has its gradient (a parameter no rank has one for keeps None,
                # as with DDP's find_unused_parameters; a frozen one is never touched)
                count = sum(len(ps) for ps in shares)
                send = zeros(n * longest + count, dtype=dtype, device=device)
                flag = n * longest
                for r, ps in enumerate(shares):
                    off = r * longest
                    for p in ps:
                        if p.grad is not None:
                            send[off:off + p.numel()] = p.grad.reshape(-1)
                            send[flag] = 1
                        off += p.numel()
                        flag += 1
                if n > 1:
                    has = send[n * longest:].clone()
                    all_reduce(has, op=ReduceOp.MAX, group=self.process_group)
                    mine = zeros(longest, dtype=dtype, device=device)
                    reduce_scatter_tensor(mine, send[:n * longest], group=self.process_group)
                    del send
                    mine.div_(n)
                else:
                    has, mine = send[longest:], send[:longest]
                had = has.tolist()
                first = sum(len(ps) for ps in shares[:self.rank])
                off = 0
                for j, p in enumerate(shares[self.rank]):
                    p.grad = mine[off:off + p.numel()].view(p.shape) if had[first + j] else None
                    off += p.numel()
                for r, ps in enumerate(shares):
                    if r != self.rank:
                        for p in ps:
                            p.grad = None
        self._reduced = True

    def clip_grad_norm_(self, max_norm: float, norm_type: float | str = 2.0,
                        error_if_nonfinite: bool = False) -> Any:
        """Stage 2: clip the reduced gradients to a total ``norm_type`` norm of
        ``max_norm`` over every share (reduces them first); returns the total norm,
        as ``nn.utils.clip_grad_norm_`` (on the gradients' device; a nan or inf total
        makes the gradients nan, or raises with ``error_if_nonfinite``)."""
        import math

        from .. import no_grad, tensor

        if self.stage != 2:
            raise RuntimeError("ZeroRedundancyOptimizer.clip_grad_norm_ is for stage=2 (at "
                               "stage 1 the gradients are whole on every rank: use "
                               "nn.utils.clip_grad_norm_)")
        self.reduce_gradients()
        mine = [p.grad for p in self._all_params if self.owner[id(p)] == self.rank
                and p.grad is not None]
        norm_type = float(norm_type)
        inf = norm_type == float("inf")
        with no_grad():
            if mine:
                part = max(float(g.abs().max()) for g in mine) if inf else \
                    sum(float((g.double().abs() ** norm_type).sum()) for g in mine)
            else:
                part = 0.0
            t = tensor([part], device=self._all_params[0].device).double()
            all_reduce(t, op=ReduceOp.MAX if inf else ReduceOp.SUM, group=self.process_group)
            total = float(t[0]) if inf else float(t[0]) ** (1.0 / norm_type)
            if error_if_nonfinite and not math.isfinite(total):
                raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                                   "`parameters` is non-finite, so it cannot be clipped. To "
                                   "disable this error and scale the gradients by the "
                                   "non-finite norm anyway, set `error_if_nonfinite=False`")
            coef = max_norm / (total + 1e-6)
            if not coef >= 1.0:  # (a nan total scales the gradients to nan, as PyTorch's)
                for g in mine:
                    g.mul_(coef)
        return tensor(total, device=self._all_params[0].device)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        if self.stage == 2:
            self.reduce_gradients()
        self._reduced = False
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
        with no_grad():
            for kind, dtype, device in self._kinds():  # the same order on every rank
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
