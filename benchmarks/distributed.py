"""rtxcore.distributed under MPI, measured in one run.

    python benchmarks/distributed.py                 # both tables
    python benchmarks/distributed.py --quick         # smoke test: small sizes, few rounds
    python benchmarks/distributed.py --part ddp --params 12 --batch 64
    python benchmarks/distributed.py --part overlap --network 10g

1. ``all_reduce`` bandwidth on 2 ranks, 1 KB to 256 MB of float32: rtxcore's
   ``dist.all_reduce`` on a cpu tensor against raw mpi4py ``Allreduce``
   (``IN_PLACE``) on a NumPy array of the same size, rounds interleaved (the two
   sides alternate within one job, ABBA), median time per call; bus bandwidth is
   ``2 (n-1)/n * bytes / time`` (what a ring all-reduce moves per rank).
   Budget: rtxcore >= 0.9x raw's bandwidth from 1 MB up.
2. ``DistributedDataParallel`` step (forward, backward with the bucketed
   all-reduce, SGD) of an MLP of ``--params`` million parameters, the same
   per-rank batch on 1 rank and on 2 ranks; jobs alternate (1, 2, 1, 2, ...)
   and each reports its median step. Budget: 2 ranks <= 1.15x the 1-rank step.
   ``comm only`` is the blocking all-reduce of all the gradients once (what
   the step would add with no overlap at all); ``without communication`` is
   the 2-rank step under ``no_sync()``: what two ranks cost each other on
   this machine (cores, memory bandwidth) before any all-reduce.

3. ``overlap``: DDP on the ``sim`` backend (mpi held to a modelled network,
   ``--network`` a preset of ``rtxcore.distributed.sim``): the 2-rank synced step
   against the 2-rank ``no_sync`` step, with the buckets' all-reduces overlapping
   backward, and with overlap switched off (each bucket blocking when ready).
   Budget: overlapping <= 1.15x no_sync on the 10 Gbit/s link; goal 1.05x.
4. ``memory``: what each rank holds after three AdamW steps (parameters,
   gradients, optimizer state, DDP's buckets, peak RSS) for DDP + AdamW,
   DDP + ZeRO-1 and ZeRO-2 (``ZeroRedundancyOptimizer(stage=2)``, no DDP).

Each rank runs one BLAS thread (OPENBLAS_NUM_THREADS=1), so two ranks use the
two cores a single rank leaves half idle. The machine may be shared: read the
ratios, and rerun.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# -- inside the MPI job ---------------------------------------------------------

def bandwidth_rank(sizes: list[int], rounds: int) -> None:
    import numpy as np
    from mpi4py import MPI

    import rtxcore as rc
    import rtxcore.distributed as dist

    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        arr = np.ones(count, np.float32)
        t = rc.ones(count)
        reps = max(1, min(200, (64 << 20) // max(nbytes, 1)))
        ours: list[float] = []
        raw: list[float] = []

        def time_raw() -> None:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                comm.Allreduce(MPI.IN_PLACE, arr)
            raw.append((time.perf_counter() - t0) / reps)

        def time_ours() -> None:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(reps):
                dist.all_reduce(t)
            ours.append((time.perf_counter() - t0) / reps)

        for i in range(rounds):  # ABBA: neither side always runs on a warm cache
            for fn in ((time_raw, time_ours) if i % 2 == 0 else (time_ours, time_raw)):
                fn()
        if comm.Get_rank() == 0:
            print(f"BW {nbytes} {statistics.median(ours)} {statistics.median(raw)} {n}", flush=True)
    dist.destroy_process_group()


def ddp_rank(params_m: float, batch: int, steps: int, bucket_mb: float, sync: bool,
             backend: str = "mpi", overlap: bool = True, view: bool = False) -> None:
    from contextlib import nullcontext

    import rtxcore as rc
    import rtxcore.distributed as dist
    from rtxcore import nn
    from rtxcore.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group(backend)
    # width w, four w x w layers: 4 w^2 ~ params
    w = int((params_m * 1e6 / 4) ** 0.5)
    rc.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(w, w), nn.Tanh())])
    nparams = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, bucket_cap_mb=bucket_mb, gradient_as_bucket_view=view)
    if not overlap:  # for contrast: each bucket's all-reduce blocks when it is ready
        ddp._overlap = False
    opt = rc.optim.SGD(ddp.parameters(), lr=1e-3)
    x = rc.randn(batch, w)
    times = []
    for s in range(steps + 2):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        with nullcontext() if sync else ddp.no_sync():
            ddp(x).square().mean().backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    grads = rc.cat([p.grad.reshape(-1) for p in model.parameters()])
    comm = []
    for _ in range(3):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(grads)
        comm.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print(f"DDP {dist.get_world_size() if sync else 0} {statistics.median(times[2:])} {nparams} "
              f"{len(ddp._buckets)} {statistics.median(comm)}", flush=True)
    dist.destroy_process_group()


def memory_rank(params_m: float, batch: int, mode: str) -> None:
    """Bytes each rank holds after three AdamW steps of the MLP: parameters,
    gradients, optimizer state, DDP's buckets; and the process's peak RSS."""
    import resource

    import rtxcore as rc
    import rtxcore.distributed as dist
    from rtxcore import nn
    from rtxcore.distributed.optim import ZeroRedundancyOptimizer
    from rtxcore.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("mpi")
    w = int((params_m * 1e6 / 4) ** 0.5)
    rc.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(w, w), nn.Tanh())])
    wrapped = model if mode == "zero2" else DDP(model)
    if mode == "ddp":
        opt = rc.optim.AdamW(model.parameters(), lr=1e-4)
    else:
        opt = ZeroRedundancyOptimizer(model.parameters(), rc.optim.AdamW, lr=1e-4,
                                      stage=2 if mode == "zero2" else 1)
    x = rc.randn(batch, w)
    for _ in range(3):
        opt.zero_grad(set_to_none=False)
        wrapped(x).square().mean().backward()
        opt.step()

    def size(ts):
        return sum(t.numel() * t.element_size() for t in ts if t is not None)

    params = size(model.parameters())
    grads = size(p.grad for p in model.parameters())
    state = size(v for st in opt.state.values() for v in st.values() if hasattr(v, "numel"))
    buckets = size(b.buf for b in wrapped._buckets) if mode != "zero2" else 0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    row = [params, grads, state, buckets, rss]
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, row)
    if dist.get_rank() == 0:
        worst = [max(r[i] for r in every) for i in range(5)]
        print("MEM " + mode + " " + " ".join(map(str, worst)), flush=True)
    dist.destroy_process_group()


# -- the driver --------------------------------------------------------------------

def launch(n: int, *args: str) -> list[str]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", str(n),
                          __file__, "--rank", *args], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    if res.returncode != 0:
        sys.exit(f"the {n}-rank job failed (exit {res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res.stdout.splitlines()


def human(nbytes: int) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "bandwidth", "ddp", "overlap", "memory"],
                    default="all")
    ap.add_argument("--network", default="10g", help="sim preset for --part overlap")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--params", type=float, default=12.0, help="DDP model size, millions")
    ap.add_argument("--batch", type=int, default=64, help="DDP per-rank batch")
    ap.add_argument("--jobs", type=int, default=3, help="DDP jobs per world size")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    ap.add_argument("--view", action="store_true",
                    help="DDP(gradient_as_bucket_view=True) in --part overlap")
    ap.add_argument("--rank", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank is not None:
        kind, *rest = a.rank
        if kind == "bw":
            bandwidth_rank([int(s) for s in rest[0].split(",")], int(rest[1]))
        elif kind == "mem":
            memory_rank(float(rest[0]), int(rest[1]), rest[2])
        else:
            ddp_rank(float(rest[0]), int(rest[1]), int(rest[2]), float(rest[3]), rest[4] == "sync",
                     *(rest[5:6] or ["mpi"]), *([rest[6] == "overlap"] if len(rest) > 6 else []),
                     *([rest[7] == "view"] if len(rest) > 7 else []))
        return
    import rtxcore.distributed  # noqa: F401  (fails early, naming what is missing)

    if a.part in ("all", "bandwidth"):
        sizes = [1 << 10, 1 << 16, 1 << 20, 1 << 24] if a.quick else \
            [1 << k for k in (10, 14, 16, 18, 20, 22, 24, 26, 28)]
        lines = launch(2, "bw", ",".join(map(str, sizes)), "3" if a.quick else "7")
        print("all_reduce, 2 ranks, float32 on cpu: median per call, bus bandwidth "
              "2(n-1)/n * bytes / time")
        print(f"{'size':>8}  {'rtxcore':>10}  {'mpi4py':>10}  {'rtxcore GB/s':>12}  "
              f"{'mpi4py GB/s':>11}  {'ratio':>6}")
        for line in lines:
            if not line.startswith("BW "):
                continue
            _, nb, ours, raw, n = line.split()
            nb, ours, raw, n = int(nb), float(ours), float(raw), int(n)
            bus = 2 * (n - 1) / n * nb
            print(f"{human(nb):>8}  {ours * 1e6:>8.1f}us  {raw * 1e6:>8.1f}us  "
                  f"{bus / ours / 1e9:>12.2f}  {bus / raw / 1e9:>11.2f}  {raw / ours:>5.2f}x")
        print()
    if a.part in ("all", "ddp"):
        params = 1.0 if a.quick else a.params
        steps = 3 if a.quick else 8
        got: dict[int, list[float]] = {1: [], 2: [], 0: []}
        info: dict[int, tuple[int, int, float]] = {}
        for _ in range(1 if a.quick else a.jobs):
            for n, sync in ((1, "sync"), (2, "sync"), (2, "nosync")):
                for line in launch(n, "ddp", str(params), str(a.batch), str(steps),
                                   str(a.bucket_mb), sync):
                    if line.startswith("DDP "):
                        _, ws, t, nparams, buckets, comm = line.split()
                        got[int(ws)].append(float(t))
                        info[int(ws)] = (int(nparams), int(buckets), float(comm))
        one, two, alone = (statistics.median(got[k]) for k in (1, 2, 0))
        nparams, buckets, comm = info[2]
        print(f"DistributedDataParallel step: MLP of {nparams / 1e6:.1f}M parameters "
              f"({buckets} buckets), per-rank batch {a.batch}, SGD; median of "
              f"{len(got[1])} jobs x {steps} steps each")
        print(f"  1 rank : {one * 1e3:8.1f} ms/step")
        print(f"  2 ranks: {two * 1e3:8.1f} ms/step   {two / one:.2f}x the 1-rank step "
              f"(budget 1.15x)")
        print(f"  2 ranks without communication (no_sync): {alone * 1e3:8.1f} ms/step   "
              f"{alone / one:.2f}x: what sharing the machine costs before any all-reduce")
        print(f"  comm only: one blocking all-reduce of all {nparams * 4 / 2**20:.0f} MB of "
              f"gradients on 2 ranks: {comm * 1e3:.1f} ms")

    if a.part in ("all", "overlap"):
        overlap_table(a)
    if a.part in ("all", "memory"):
        memory_table(a)


def memory_table(a: argparse.Namespace) -> None:
    params = 1.0 if a.quick else a.params
    print(f"Memory per rank after 3 AdamW steps, MLP of {params:g}M parameters, 2 ranks "
          "(the larger rank's figure; MB)")
    print(f"{'':>22} {'params':>8} {'grads':>8} {'state':>8} {'buckets':>8} {'sum':>8} "
          f"{'peak RSS':>9}")
    for mode, label in (("ddp", "DDP + AdamW"), ("zero1", "DDP + ZeRO-1"),
                        ("zero2", "ZeRO-2 (no DDP)")):
        for line in launch(2, "mem", str(params), str(a.batch), mode):
            if line.startswith("MEM "):
                _, _, *vals = line.split()
                p, g, st, b, rss = (int(v) / 2**20 for v in vals)
                print(f"{label:>22} {p:8.1f} {g:8.1f} {st:8.1f} {b:8.1f} {p + g + st + b:8.1f} "
                      f"{rss:9.1f}")


def overlap_table(a: argparse.Namespace) -> None:
    """DDP on the sim backend's modelled link: the synced step against the
    no_sync step (the same compute, no communication), with overlap on and off."""
    from rtxcore.distributed.sim import PRESETS, modelled_seconds

    params = 1.0 if a.quick else a.params
    steps = 3 if a.quick else 8
    os.environ["RTX_SIM_NETWORK"] = a.network
    got: dict[str, list[float]] = {"overlap": [], "blocking": [], "nosync": [], "free": []}
    nparams = buckets = 0
    for _ in range(1 if a.quick else a.jobs):  # jobs interleaved
        for kind, sync, ov in (("overlap", "sync", "overlap"), ("blocking", "sync", "blocking"),
                               ("nosync", "nosync", "overlap"), ("free", "sync", "overlap")):
            # "free": a link of no latency and unbounded bandwidth -- what DDP costs
            # on this machine itself (bucket copies, mpi moving the data through memory)
            link = {"RTX_SIM_LATENCY_US": "0", "RTX_SIM_BANDWIDTH_GBIT": "1000000"} \
                if kind == "free" else {}
            os.environ.update(link)
            try:
                lines = launch(2, "ddp", str(params), str(a.batch), str(steps), str(a.bucket_mb),
                               sync, "sim", ov, "view" if a.view else "copy")
            finally:
                for k in link:
                    os.environ.pop(k, None)
            for line in lines:
                if line.startswith("DDP "):
                    _, _, t, nparams, buckets, _ = line.split()
                    got[kind].append(float(t))
    on, off, alone, free = (statistics.median(got[k])
                            for k in ("overlap", "blocking", "nosync", "free"))
    lat, bw = PRESETS[a.network]
    comm = modelled_seconds("all_reduce", int(nparams) * 4, 2, lat, bw)
    print(f"DDP on the sim backend, link {a.network} ({lat * 1e6:g} us, {bw * 8 / 1e9:g} Gbit/s): "
          f"MLP of {int(nparams) / 1e6:.1f}M parameters ({buckets} buckets), per-rank batch "
          f"{a.batch}, 2 ranks; median of {len(got['overlap'])} jobs x {steps} steps each")
    print(f"  no_sync (compute only)          : {alone * 1e3:8.1f} ms/step")
    print(f"  DDP, all-reduce overlapping     : {on * 1e3:8.1f} ms/step   {on / alone:.2f}x "
          f"no_sync (budget 1.15x, goal 1.05x)")
    print(f"  DDP, overlap off (blocking)     : {off * 1e3:8.1f} ms/step   {off / alone:.2f}x "
          f"no_sync")
    print(f"  DDP on a free link (host costs) : {free * 1e3:8.1f} ms/step   {free / alone:.2f}x "
          f"no_sync: bucket copies and mpi's own data movement on these cores")
    print(f"  the link's share of the step: {(on - free) * 1e3:.1f} ms with overlap, "
          f"{(off - free) * 1e3:.1f} ms without")
    print(f"  the model's all-reduce of all {int(nparams) * 4 / 2**20:.0f} MB of gradients: "
          f"{comm * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
