"""DDP's step time at 2 to 512 ranks, on paper: the sim backend's network model
(rtxcore.distributed.sim) applied to data-parallel training.

    python benchmarks/scaling.py            # the table docs/distributed.md quotes

Nothing runs on a network here; every figure comes from the model, stated below.

Per step and rank: ``compute`` (forward + backward + optimizer) and one
all-reduce of every gradient (float32, 4 bytes a parameter), started bucket by
bucket during backward (DDP's 25 MB buckets). Backward is two thirds of the
compute; the all-reduce overlaps it except for the last bucket, which can only
start when backward ends:

    step = compute + max(comm - overlap, 0) + last,
    overlap = 2/3 compute, last = the all-reduce time of one 25 MB bucket.

All-reduce of B bytes on n ranks with latency L and bandwidth W per rank:

- ring: ``2 (n-1) L + 2 (n-1)/n B / W``
- tree (pipelined double binary tree, as NCCL's for many ranks):
  ``2 log2(n) L + 2 B / W``
- many nodes (8 ranks a node): within the node on its own link (reduce-scatter,
  then all-gather: ``2 (8-1)/8 B / W_node``); across nodes each rank all-reduces
  its share ``B / 8`` with its peers on the other nodes, by ring or tree, over
  its own network card (one card a GPU, as in DGX-class nodes).

Links: ``8gpu-node`` (3 us, 300 GB/s) within a node, ``100g`` (5 us,
12.5 GB/s) across nodes; ``10g`` (25 us, 1.25 GB/s)
for a cluster of single-device machines. Compute: the 12M MLP's step as measured
by ``benchmarks/distributed.py`` on one CPU core (batch 64: 72 ms); a 124M GPT
(GPT-2 small) at 8 sequences of 1024 tokens a rank: 6 x params x tokens FLOPs
at 150 TFLOP/s sustained (an H100-class GPU at ~40% of its bf16 peak): 40 ms.
"""

from __future__ import annotations

import math

from rtxcore.distributed.sim import PRESETS

BUCKET = 25 << 20


def ring(nbytes: float, n: int, lat: float, bw: float) -> float:
    return 0.0 if n <= 1 else 2 * (n - 1) * lat + 2 * (n - 1) / n * nbytes / bw


def tree(nbytes: float, n: int, lat: float, bw: float) -> float:
    return 0.0 if n <= 1 else 2 * math.log2(n) * lat + 2 * nbytes / bw


def all_reduce(nbytes: float, n: int, algo: str, cluster: str) -> float:
    """The model's all-reduce time on ``n`` ranks: ``cluster`` is "flat10g" (one
    device a machine, 10 Gbit/s) or "nodes" (8 a node, NVLink-class within,
    100 Gbit/s across)."""
    alg = ring if algo == "ring" else tree
    if cluster == "flat10g":
        return alg(nbytes, n, *PRESETS["10g"])
    lat_n, bw_n = PRESETS["8gpu-node"]
    per_node = min(n, 8)
    inside = 2 * (per_node - 1) / per_node * nbytes / bw_n + 2 * (per_node - 1) * lat_n \
        if per_node > 1 else 0.0
    nodes = math.ceil(n / 8)
    across = alg(nbytes / per_node, nodes, *PRESETS["100g"]) if nodes > 1 else 0.0
    return inside + across


def step(params: float, compute: float, n: int, algo: str, cluster: str) -> float:
    nbytes = 4 * params
    comm = all_reduce(nbytes, n, algo, cluster)
    last = all_reduce(min(BUCKET, nbytes), n, algo, cluster)
    return compute + max(comm - 2 / 3 * compute, 0.0) + last if n > 1 else compute


MODELS = {"12M MLP": (12e6, 0.072), "124M GPT": (124e6, 6 * 124e6 * 8 * 1024 / 150e12)}


def main() -> None:
    ranks = (2, 8, 64, 512)
    print("DDP step time (ms) and efficiency (compute / step) on the model's network")
    print(f"{'model':>9} {'network':>24} {'algo':>5} " +
          " ".join(f"{f'n={n}':>15}" for n in ranks))
    for name, (params, compute) in MODELS.items():
        for cluster, label in (("flat10g", "10 Gbit/s, 1 a machine"),
                               ("nodes", "8 a node, 100 Gbit/s")):
            for algo in ("ring", "tree"):
                cells = []
                for n in ranks:
                    t = step(params, compute, n, algo, cluster)
                    cells.append(f"{t * 1e3:8.1f} {compute / t:5.0%}")
                print(f"{name:>9} {label:>24} {algo:>5} " + " ".join(f"{c:>15}" for c in cells))
    print("\ncompute per step: " + ", ".join(f"{k} {v[1] * 1e3:.0f} ms" for k, v in MODELS.items()))


if __name__ == "__main__":
    main()
