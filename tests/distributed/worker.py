"""Run under ``python -m rtxcore.distributed.run -n N`` by tests/test_distributed.py:
``worker.py SCENARIO [args]``. Each scenario asserts on every rank (a failing
rank aborts the job, so the test sees a non-zero exit) and rank 0 prints
``OK scenario`` at the end."""

from __future__ import annotations

import sys
import time

import numpy as np

import rtxcore as rc
import rtxcore.distributed as dist
from rtxcore import nn
from rtxcore.nn.parallel import DistributedDataParallel as DDP

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def data(rank: int, shape: tuple[int, ...], dtype: str, salt: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: any rank can compute any other's."""
    rng = np.random.default_rng(1000 * rank + salt)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(1, 5, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def close(got: rc.Tensor, want: np.ndarray, what: str) -> None:
    g = got.cpu().numpy()
    assert g.dtype == want.dtype, (what, g.dtype, want.dtype)
    if want.dtype.kind == "f":
        tol = 2e-2 if want.dtype == np.float16 else 1e-5
        ok = np.allclose(g.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        ok = np.array_equal(g, want)
    assert ok, f"{what}: got {g.ravel()[:6]}, want {want.ravel()[:6]}"


def collectives(devices: list[str]) -> None:
    r, n = dist.get_rank(), dist.get_world_size()
    reducers = {"SUM": lambda a: np.sum(a, axis=0), "MAX": lambda a: np.max(a, axis=0),
                "MIN": lambda a: np.min(a, axis=0), "PRODUCT": lambda a: np.prod(a, axis=0),
                "AVG": None}
    for dev in devices:
        for dt in DTYPES:
            shape = (3, 5)
            every = np.stack([data(k, shape, dt) for k in range(n)])
            mine = every[r]
            t = lambda a: rc.tensor(a, device=dev)  # noqa: E731
            for name, fn in reducers.items():
                if dt == "bool" and name in ("PRODUCT", "AVG"):
                    continue
                if name == "AVG" and dt in ("int8", "uint8", "int16"):
                    continue
                x = t(mine)
                dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
                if dt == "bool":
                    want = every.any(0) if name in ("SUM", "MAX") else every.all(0)
                elif name == "AVG":
                    s = every.sum(0, dtype=np.float64)
                    want = (s / n if every.dtype.kind == "f" else s // n).astype(every.dtype)
                else:
                    want = fn(every).astype(every.dtype)
                close(x, want, f"all_reduce {name} {dt} on {dev}")
            # a non-contiguous tensor: the result lands in its own strides
            x = t(mine.T.copy()).T
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
            close(x, every.max(0) if dt != "bool" else every.any(0), f"all_reduce strided {dt}")
            # async
            x = t(mine)
            w = dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True)
            assert w.wait() is True
            close(x, every.max(0) if dt != "bool" else every.any(0), f"async all_reduce {dt}")
            for src in range(n):
                x = t(mine)
                dist.broadcast(x, src=src)
                close(x, every[src], f"broadcast src={src} {dt} on {dev}")
            out = rc.empty((n * 3, 5), dtype=getattr(rc, dt), device=dev)
            dist.all_gather_into_tensor(out, t(mine))
            close(out, every.reshape(n * 3, 5), f"all_gather_into_tensor {dt} on {dev}")
            lst = [rc.empty(shape, dtype=getattr(rc, dt), device=dev) for _ in range(n)]
            dist.all_gather(lst, t(mine))
            for k in range(n):
                close(lst[k], every[k], f"all_gather[{k}] {dt} on {dev}")
            big = np.stack([data(k, (n, 4), dt, salt=7) for k in range(n)])  # (rank, row, 4)
            if dt != "bool":
                o = rc.empty(4, dtype=getattr(rc, dt), device=dev)
                dist.reduce_scatter_tensor(o, t(big[r]))
                close(o, big[:, r].sum(0).astype(big.dtype), f"reduce_scatter_tensor {dt} on {dev}")
                o = rc.empty(4, dtype=getattr(rc, dt), device=dev)
                dist.reduce_scatter(o, [t(big[r, k]) for k in range(n)], op=dist.ReduceOp.MAX)
                close(o, big[:, r].max(0), f"reduce_scatter {dt} on {dev}")
                for dst in range(n):
                    x = t(mine)
                    dist.reduce(x, dst=dst)
                    close(x, every.sum(0).astype(every.dtype) if r == dst else mine,
                          f"reduce dst={dst} {dt} on {dev}")
            for root in range(n):
                gl = [rc.empty(shape, dtype=getattr(rc, dt), device=dev) for _ in range(n)] \
                    if r == root else None
                dist.gather(t(mine), gl, dst=root)
                if r == root:
                    for k in range(n):
                        close(gl[k], every[k], f"gather dst={root} [{k}] {dt} on {dev}")
                x = rc.empty(4, dtype=getattr(rc, dt), device=dev)
                dist.scatter(x, [t(big[root, k]) for k in range(n)] if r == root else None, src=root)
                close(x, big[root, r], f"scatter src={root} {dt} on {dev}")
            # all_to_all: even, then uneven splits (rank k sends k+1 rows to each rank j... )
            a2a = np.stack([data(k, (2 * n, 3), dt, salt=3) for k in range(n)])
            y = rc.empty((2 * n, 3), dtype=getattr(rc, dt), device=dev)
            dist.all_to_all_single(y, t(a2a[r]))
            close(y, np.concatenate([a2a[k, 2 * r:2 * r + 2] for k in range(n)]), f"all_to_all {dt}")
            sizes = [[(k + j) % 3 for j in range(n)] for k in range(n)]  # sizes[k][j]: k -> j
            rows = [data(k, (sum(sizes[k]), 2), dt, salt=5) for k in range(n)]
            y = rc.empty((sum(sizes[k][r] for k in range(n)), 2), dtype=getattr(rc, dt), device=dev)
            dist.all_to_all_single(y, t(rows[r]), output_split_sizes=[sizes[k][r] for k in range(n)],
                                   input_split_sizes=sizes[r])
            want = np.concatenate([rows[k][sum(sizes[k][:r]):sum(sizes[k][:r + 1])] for k in range(n)])
            close(y, want, f"all_to_all uneven {dt} on {dev}")
        # point to point: a ring
        x = rc.tensor(data(r, (4,), "float32"), device=dev)
        y = rc.empty(4, device=dev)
        w = dist.isend(x, dst=(r + 1) % n)
        src = dist.recv(y, src=(r - 1) % n)
        w.wait()
        assert src == (r - 1) % n
        close(y, data((r - 1) % n, (4,), "float32"), f"send/recv on {dev}")
        dist.barrier()
    # a subgroup of the ranks but the last
    sub = dist.new_group(list(range(n - 1)))
    if r < n - 1:
        x = rc.ones(3)
        dist.all_reduce(x, group=sub)
        close(x, np.full(3, n - 1, np.float32), "all_reduce in a subgroup")
        assert dist.get_world_size(sub) == n - 1 and dist.get_rank(sub) == r
    else:
        assert sub is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.all_reduce(rc.ones(3), group=sub) is None
    dist.barrier()


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def _batches(steps: int, per_rank: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((steps, per_rank * n, 6)).astype(np.float32),
            rng.standard_normal((steps, per_rank * n, 3)).astype(np.float32))


def _flat(model: nn.Module) -> np.ndarray:
    return np.concatenate([p.detach().cpu().numpy().ravel() for p in model.parameters()])


def _same_on_every_rank(model: nn.Module, what: str) -> None:
    mine = rc.tensor(_flat(model))
    every = [rc.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    for k, e in enumerate(every):
        assert np.array_equal(e.numpy(), mine.numpy()), f"{what}: rank {k}'s parameters differ"


def ddp(device: str, mode: str) -> None:
    r, n = dist.get_rank(), dist.get_world_size()
    rc.manual_seed(100 + r)  # every rank initialises differently: the wrap must broadcast
    model = _model().to(device)
    ddp_model = DDP(model, bucket_cap_mb=0.0005)  # several buckets even for this small model
    assert len(ddp_model._buckets) > 1
    ref = _model().to(device)
    ref.load_state_dict(model.state_dict())
    steps, per = 6, 4
    X, Y = _batches(steps, per, n)
    if mode == "zero":
        opt = dist.optim.ZeroRedundancyOptimizer(ddp_model.parameters(), rc.optim.AdamW, lr=0.01)
        base = _model().to(device)
        base.load_state_dict(model.state_dict())
        base_ddp = DDP(base)
        base_opt = rc.optim.AdamW(base_ddp.parameters(), lr=0.01)
    else:
        opt = rc.optim.SGD(ddp_model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = rc.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        x = rc.tensor(X[s], device=device)
        y = rc.tensor(Y[s], device=device)
        xs, ys = x[r * per:(r + 1) * per], y[r * per:(r + 1) * per]
        opt.zero_grad()
        if mode == "no_sync":  # two half batches: accumulate, then reduce
            h = per // 2
            with ddp_model.no_sync():
                (((ddp_model(xs[:h]) - ys[:h]) ** 2).mean() / 2).backward()
            (((ddp_model(xs[h:]) - ys[h:]) ** 2).mean() / 2).backward()
        else:
            ((ddp_model(xs) - ys) ** 2).mean().backward()
        opt.step()
        if mode == "zero":
            base_opt.zero_grad()
            ((base_ddp(xs) - ys) ** 2).mean().backward()
            base_opt.step()
        else:
            ref_opt.zero_grad()
            ((ref(x) - y) ** 2).mean().backward()
            ref_opt.step()
    _same_on_every_rank(ddp_model, f"ddp {mode}")
    want = _flat(base if mode == "zero" else ref)
    gap = np.abs(_flat(model) - want).max()
    assert gap < 1e-5, f"ddp {mode} on {device}: {gap} from the reference"
    if r == 0:
        print(f"ddp {mode} {device}: max gap {gap:.2e}")


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.a = nn.Linear(4, 1)
        self.b = nn.Linear(4, 1)  # used by rank 0 only

    def forward(self, x: rc.Tensor, use_b: bool) -> rc.Tensor:
        h = self.body(x)
        return self.a(h) + (self.b(h) if use_b else 0)


def unused() -> None:
    r = dist.get_rank()
    rc.manual_seed(0)
    m = DDP(TwoHeads(), find_unused_parameters=True)
    for _ in range(2):
        m.module.zero_grad()
        m(rc.ones(2, 4), use_b=(r == 0)).sum().backward()
        assert m.module.b.weight.grad is not None  # used on rank 0: reduced everywhere
    _same_grads = rc.cat([p.grad.reshape(-1) for p in m.parameters()])
    every = [rc.empty_like(_same_grads) for _ in range(dist.get_world_size())]
    dist.all_gather(every, _same_grads)
    assert all(bool((e == _same_grads).all()) for e in every)
    # without find_unused_parameters the next forward names the missing parameters
    m2 = DDP(TwoHeads())
    m2(rc.ones(2, 4), use_b=False).sum().backward()
    try:
        m2(rc.ones(2, 4), use_b=False)
    except RuntimeError as exc:
        assert "find_unused_parameters=True" in str(exc) and "b.weight" in str(exc), exc
    else:
        raise AssertionError("a forward after an incomplete reduction must raise")


def fault(mode: str) -> None:
    r = dist.get_rank()
    if r == 1:
        if mode == "exit":
            sys.exit(3)
        if mode == "raise":
            raise ValueError("rank 1 fails on purpose")
        if mode == "systemexit":
            raise SystemExit(4)
        if mode == "hang":
            time.sleep(120)
        if mode == "mismatch":
            dist.all_reduce(rc.ones(5))
    dist.all_reduce(rc.ones(3))


def main() -> None:
    scenario, args = sys.argv[1], sys.argv[2:]
    timeout = float(args[1]) if scenario == "fault" and len(args) > 1 else None
    dist.init_process_group(timeout=timeout)
    if scenario == "collectives":
        collectives(args[0].split(","))
    elif scenario == "ddp":
        ddp(args[0], args[1])
    elif scenario == "unused":
        unused()
    elif scenario == "fault":
        fault(args[0])
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    dist.barrier()
    if dist.get_rank() == 0:
        print(f"OK {scenario} {' '.join(args)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
