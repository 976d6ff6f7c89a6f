"""``DistributedDataParallel``: one model replica per process, gradients averaged.

At wrap, rank 0's parameters and buffers are broadcast to every rank. The
parameters are cut into buckets (about ``bucket_cap_mb``, the first 1 MB as in
PyTorch) in reverse registration order, roughly the order backward produces
their gradients. Each parameter has a post-accumulate-grad hook; when every
gradient of a bucket has arrived, the bucket's gradients are copied into one
flat buffer and its all-reduce (AVG) is started without waiting, so
communication runs while backward computes the rest. Buckets start in index
order on every rank (the order collectives must match in). When the last bucket
has started, backward waits for all of them and copies the averages back into
``.grad``.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from ..module import Module

_FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    __slots__ = ("params", "offsets", "numel", "buf", "pending", "work")

    def __init__(self, params: list[Any]) -> None:
        self.params = params
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.numel = n
        self.buf = None
        self.pending = len(params)
        self.work = None


class _Progress:
    """Drives the in-flight all-reduces while backward computes.

    MPI moves a non-blocking collective's data only inside MPI calls; between
    two gradient hooks backward may run for milliseconds of matmuls (which
    release the GIL). This thread tests the requests in flight every
    ``interval`` seconds, so they progress during that compute, and stops
    before the main thread waits on them (a request is never used by two
    threads at once)."""

    def __init__(self, interval: float = 2e-4) -> None:
        self.interval = interval
        self.requests: list[Any] = []
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.stopping = False

    def add(self, work: Any) -> None:
        req = getattr(work, "_req", None)
        if req is None:
            return
        with self.lock:
            self.requests.append(req)
            if self.thread is None:  # (none running: the last one found nothing left)
                self.stopping = False
                self.thread = threading.Thread(target=self._run, name="rtxcore-ddp-progress",
                                               daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while not self.stopping:
            with self.lock:
                self.requests = [r for r in self.requests if not r.test()]
                if not self.requests:
                    self.thread = None  # add() starts a new one for the next bucket
                    return
            time.sleep(self.interval)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            thread = self.thread
        if thread is not None:
            thread.join()
        with self.lock:
            self.thread = None
            self.requests = []


def _spare_cpu(world: int) -> bool:
    """Whether this node has a CPU beyond one per rank for the progress thread.
    Without one the thread only takes turns with backward's compute: on 2 ranks
    of a 2-CPU machine the step took 1.41x the 1-rank step with it, 1.18x
    without. ``RTX_DDP_PROGRESS=1`` / ``0`` decides instead."""
    from ...distributed.env import env_flag

    forced = env_flag("RTX_DDP_PROGRESS", None)
    if forced is not None:
        return forced
    local = os.environ.get("MPI_LOCALNRANKS") or os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
    ranks = int(local) if local and local.isdigit() else world
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus > ranks


class DistributedDataParallel(Module):
    """Wrap ``module`` so that ``loss.backward()`` leaves every rank with the
    gradients averaged over all ranks (as one process would get from the
    concatenated batches, when each rank's loss is a mean over equal batches).

    ``no_sync()``: backward passes inside accumulate locally; the next one
    outside reduces the accumulated gradients. ``find_unused_parameters``:
    after each forward, parameters the output does not depend on are counted
    as ready (otherwise backward would wait for them and the next forward
    raises). ``gradient_as_bucket_view``: ``.grad`` becomes a view into the
    bucket (no copy back; the next backward accumulates into it in place).
    ``device_ids``/``output_device`` are accepted as PyTorch's and ignored (the
    module's own device is used).
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, process_group: Any = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, **kwargs: Any) -> None:
        super().__init__()
        from ... import distributed as dist

        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps an nn.Module, not {type(module).__name__}")
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel needs a process group: call "
                               "rtxcore.distributed.init_process_group() first")
        if kwargs:
            raise TypeError(f"DistributedDataParallel got unexpected arguments {sorted(kwargs)}")
        self.module = module
        self.process_group = process_group
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.dim = dim
        self._pg = dist._group(process_group)
        self._root = self._pg.ranks[0]
        seen: set[int] = set()
        params = []
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        self._params = params
        cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * (1 << 20))
        self._buckets = self._make_buckets(params, cap)
        self._where: dict[int, tuple[_Bucket, int]] = {}
        for b in self._buckets:
            for i, p in enumerate(b.params):
                self._where[id(p)] = (b, i)
        self._expect = False  # a synced backward is expected for the last forward
        self._started = False  # a gradient of that backward has arrived
        self._next = 0  # the next bucket to start
        self._used: set[int] = set()
        # the progress thread calls MPI beside the main thread: only where MPI allows it
        threads_ok = getattr(self._pg.comm, "threads_ok", None)
        self._progress = _Progress() if threads_ok is not None and threads_ok() and \
            _spare_cpu(self._pg.size()) else None
        # buckets' all-reduces start non-blocking (overlapping the rest of backward)
        # where something moves them meanwhile: the progress thread, or a backend
        # whose requests complete by themselves (sim's modelled network)
        self._overlap = self._progress is not None or \
            bool(getattr(self._pg.comm, "progresses_alone", False))
        self._sync_state()
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params]

    # -- setup ---------------------------------------------------------------------

    @staticmethod
    def _make_buckets(params: list[Any], cap: int) -> list[_Bucket]:
        buckets: list[_Bucket] = []
        current: list[Any] = []
        size = 0
        limit = min(cap, _FIRST_BUCKET_BYTES)
        for p in reversed(params):
            nbytes = p.numel() * p.element_size()
            if current and (size + nbytes > limit or p.device != current[0].device
                            or p.dtype is not current[0].dtype):
                buckets.append(_Bucket(current))
                current, size, limit = [], 0, cap
            current.append(p)
            size += nbytes
        if current:
            buckets.append(_Bucket(current))
        return buckets

    def _sync_state(self) -> None:
        """Every rank starts from the first rank's parameters and buffers."""
        from ... import distributed as dist
        from ... import no_grad

        if self._pg.size() == 1:
            return
        with no_grad():
            for t in [*self.module.parameters(), *self.module.buffers()]:
                dist.broadcast(t.detach(), src=self._root, group=self.process_group)

    # -- forward ---------------------------------------------------------------------

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        from ... import is_grad_enabled

        if self._expect and self._started and self._next < len(self._buckets):
            missing = [n for n, p in self.module.named_parameters()
                       if p.requires_grad and id(p) not in self._used]
            raise RuntimeError(
                "Expected to have finished reduction in the prior iteration before starting a "
                "new one: the last backward produced no gradient for parameters "
                f"{missing[:10]}{' ...' if len(missing) > 10 else ''}. Pass "
                "find_unused_parameters=True to DistributedDataParallel if the model's forward "
                "does not use every parameter, and make sure every output takes part in the loss."
            )
        if self.broadcast_buffers and self._pg.size() > 1:
            from ... import distributed as dist

            for b in self.module.buffers():
                dist.broadcast(b.detach(), src=self._root, group=self.process_group)
        out = self.module(*inputs, **kwargs)
        self._expect = bool(is_grad_enabled() and self.require_backward_grad_sync and self._params)
        self._started = False
        self._next = 0
        self._used = set()
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = None
        if self._expect and self.find_unused_parameters:
            reached = _reached_leaves(out)
            for p in self._params:
                if id(p) not in reached:
                    self._mark(p)
        return out

    # -- backward ----------------------------------------------------------------------

    def _grad_ready(self, p: Any) -> None:
        if not self._expect:
            return
        self._started = True
        self._used.add(id(p))
        self._mark(p)

    def _mark(self, p: Any) -> None:
        b, _ = self._where[id(p)]
        b.pending -= 1
        if b.pending == 0:
            self._launch_ready()

    def _launch_ready(self) -> None:
        from ... import distributed as dist
        from ... import div, empty, no_grad

        buckets = self._buckets
        n = self._pg.size()
        with no_grad():
            while self._next < len(buckets) and buckets[self._next].pending == 0:
                b = buckets[self._next]
                if b.buf is None:
                    p0 = b.params[0]
                    b.buf = empty(b.numel, dtype=p0.dtype, device=p0.device)
                view = self.gradient_as_bucket_view
                for p, off in zip(b.params, b.offsets):
                    g = p.grad
                    dst = b.buf[off:off + p.numel()]
                    if g is not None and g._storage is b.buf._storage:
                        # gradient_as_bucket_view: accumulated in place already
                        dst.div_(n)
                    elif g is None:
                        dst.zero_()
                    elif view:  # the division by the world size in the copy, as
                        div(g.reshape(-1), n, out=dst)  # PyTorch's hook divides first
                    else:
                        dst.copy_(g.reshape(-1))
                # a SUM: the division by the world size is fused into the copy back
                # (bucket views: into the copy in, above).
                # Non-blocking where a progress thread moves it during the rest of
                # backward; else blocking, now: with no CPU to spare nothing would
                # move it before the wait anyway, and the blocking call is the
                # fast one (a large all-reduce runs in pieces, see distributed.mpi)
                b.work = dist.all_reduce(b.buf, op=dist.ReduceOp.SUM, group=self.process_group,
                                         async_op=self._overlap)
                self._next += 1
                if self._progress is not None and self._next < len(buckets):
                    self._progress.add(b.work)  # more backward to overlap with
        if self._next == len(buckets):
            self._finish()

    def _finish(self) -> None:
        from ... import distributed as dist
        from ... import div, no_grad, tensor

        self._expect = False
        if self._progress is not None:
            self._progress.stop()  # (before any other collective on this thread)
        used_anywhere = None
        if self.find_unused_parameters and self._pg.size() > 1:
            flags = tensor([1 if id(p) in self._used else 0 for p in self._params],
                           device=self._params[0].device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.process_group)
            used_anywhere = {id(p) for p, f in zip(self._params, flags.tolist()) if f}
        elif self.find_unused_parameters:
            used_anywhere = set(self._used)
        n = self._pg.size()
        with no_grad():
            for b in self._buckets:
                if b.work is not None:
                    b.work.wait()
                b.work = None
                for p, off in zip(b.params, b.offsets):
                    total = b.buf[off:off + p.numel()].view(p.shape)
                    g = p.grad
                    if g is None and used_anywhere is not None and id(p) not in used_anywhere:
                        continue
                    if self.gradient_as_bucket_view:
                        p.grad = total  # later backward passes accumulate into the bucket
                    elif g is None:
                        p.grad = total / n
                    else:
                        div(total, n, out=g)

    # -- PyTorch's API ----------------------------------------------------------------------

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside accumulate gradients locally, without communication."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def extra_repr(self) -> str:
        return f"world_size={self._pg.size()}, buckets={len(self._buckets)}"


def _reached_leaves(out: Any) -> set[int]:
    """ids of the leaf tensors the autograd graph of ``out`` reaches."""
    from ...autograd.tape import AccumulateGrad
    from ...tensor import Tensor

    roots = []

    def collect(o: Any) -> None:
        if isinstance(o, Tensor):
            m = o._ag
            if m is not None and m.grad_fn is not None:
                roots.append(m.grad_fn)
        elif isinstance(o, (list, tuple)):
            for x in o:
                collect(x)
        elif isinstance(o, dict):
            for x in o.values():
                collect(x)

    collect(out)
    seen: set[int] = set()
    leaves: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is AccumulateGrad:
            leaves.add(id(node.variable))
            continue
        for e in node.next_functions:
            if e is not None and e[0] is not None:
                stack.append(e[0])
    return leaves
