"""The collectives conformance check of a communication backend, run under MPI:

    python -m rtxcore.distributed.run -n 2 -m rtxcore.distributed.conformance --backend mpi
    python -m rtxcore.distributed.run -n 3 -m rtxcore.distributed.conformance --backend mine --devices cpu

Every collective, on every dtype, on each device given, against NumPy: each
rank computes every other rank's input from its rank, so each can check its
result alone. A failing check raises on that rank (so the launcher ends the
job, naming it); rank 0 prints ``OK collectives ...`` at the end. Run it on 2
and on 3 processes (an odd count catches rank arithmetic that only works on
even ones).
"""

from __future__ import annotations

import argparse

import numpy as np

import rtxcore as rc
import rtxcore.distributed as dist

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
    g = got.detach().numpy()
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
        # the other way round, from any source, polled: the Work names the sender
        w = dist.irecv(y, tag=5)
        dist.send(x, dst=(r - 1) % n, tag=5)
        while not w.is_completed():
            pass
        assert w.result() == (r + 1) % n, (w.result(), (r + 1) % n)
        close(y, data((r + 1) % n, (4,), "float32"), f"irecv from any source on {dev}")
        dist.barrier()
    # a large all-reduce (600 KB: in pieces where the backend splits large ones,
    # e.g. mpi's RTX_MPI_ALLREDUCE_CHUNK), blocking and not, with an odd tail
    every = np.stack([data(k, (150_001,), "float32", salt=9) for k in range(n)])
    for op, want in (("SUM", every.sum(0)), ("MAX", every.max(0))):
        x = rc.tensor(every[r])
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
        close(x, want, f"a 600 KB all_reduce {op}")
        x = rc.tensor(every[r])
        dist.all_reduce(x, op=getattr(dist.ReduceOp, op), async_op=True).wait()
        close(x, want, f"a 600 KB async all_reduce {op}")
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="collectives conformance of a communication backend")
    ap.add_argument("--backend", default=None, help="init_process_group's backend (default: the best)")
    ap.add_argument("--devices", default="cpu", help="comma-separated devices, e.g. cpu,opencl")
    a = ap.parse_args(argv)
    dist.init_process_group(a.backend)
    collectives(a.devices.split(","))
    dist.barrier()
    if dist.get_rank() == 0:
        print(f"OK collectives {a.devices} on {dist.get_backend()}, "
              f"{dist.get_world_size()} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
