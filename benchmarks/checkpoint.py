"""Saving and loading a checkpoint: rtxcore against safetensors.numpy and PyTorch.

    python benchmarks/checkpoint.py              # 200 MB: 50 float32 tensors of 1M elements
    python benchmarks/checkpoint.py --quick      # a smoke run (20 MB)

The same state dict is saved to and loaded from a file in ``--dir`` (default: a
temporary folder) by

* ``rc.save`` / ``rc.load``: the safetensors package's serializer and parser
  (``safetensors.serialize``; ``safe_open`` reading with pread), plus an atomic
  save (temporary file, fsync, rename) and CRC-32 checksums computed on save and
  verified on load; also ``rc.load(..., verify=False)``, which skips them;
* ``safetensors.numpy.save_file`` / ``load_file`` (plain write, no checksum);
* ``torch.save`` / ``torch.load`` (if PyTorch is installed; plain write).

Medians over interleaved rounds, in MB/s (higher is better). Reads come from
the page cache (the file was just written), so they measure the libraries, not
the disk; saves include rtxcore's fsync, which the others don't do. This machine
is shared and noisy: read ratios, rerun.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="rounds per measurement (median shown)")
    p.add_argument("--quick", action="store_true", help="a 20 MB checkpoint, 3 rounds")
    p.add_argument("--tensors", type=int, default=50, help="number of tensors (default 50)")
    p.add_argument("--numel", type=int, default=1_000_000, help="float32 elements per tensor (default 1M)")
    p.add_argument("--dir", default=None, help="folder for the files (default: a temporary one)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    return p.parse_args()


ARGS = _parse()
if ARGS.quick:
    ARGS.tensors, ARGS.rounds = 5, 3

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402

try:
    from safetensors.numpy import load_file as st_load
    from safetensors.numpy import save_file as st_save
except ImportError:
    st_save = st_load = None
try:
    if ARGS.no_torch:
        raise ImportError
    import torch
except ImportError:
    torch = None


def main() -> None:
    rng = np.random.default_rng(0)
    arrays = {f"layer{i}.weight": rng.random(ARGS.numel, dtype=np.float32) for i in range(ARGS.tensors)}
    mb = sum(a.nbytes for a in arrays.values()) / 1e6
    folder = ARGS.dir or tempfile.mkdtemp(prefix="rtx_checkpoint_")
    path = {k: os.path.join(folder, f"ckpt.{k}") for k in ("rtxcore", "safetensors", "torch")}

    sd = {k: rc.from_numpy(a) for k, a in arrays.items()}
    cases: dict[str, tuple] = {
        "rtxcore": (lambda: rc.save(sd, path["rtxcore"]), lambda: rc.load(path["rtxcore"])),
        "rtxcore (verify=False)": (None, lambda: rc.load(path["rtxcore"], verify=False)),
    }
    if st_save is not None:
        cases["safetensors.numpy"] = (lambda: st_save(arrays, path["safetensors"]),
                                      lambda: st_load(path["safetensors"]))
    if torch is not None:
        tsd = {k: torch.from_numpy(a) for k, a in arrays.items()}
        cases["torch.save/load"] = (lambda: torch.save(tsd, path["torch"]),
                                    lambda: torch.load(path["torch"], weights_only=True))

    samples: dict[str, list[float]] = {f"{k} {op}": [] for k in cases for op in ("save", "load")}
    for r in range(ARGS.rounds):
        names = list(cases)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate the order
        for k in names:
            save, load = cases[k]
            if save is not None:
                gc.collect()
                t0 = time.perf_counter()
                save()
                samples[f"{k} save"].append(time.perf_counter() - t0)
        for k in names:
            gc.collect()
            t0 = time.perf_counter()
            out = cases[k][1]()
            samples[f"{k} load"].append(time.perf_counter() - t0)
            del out

    print(f"\n## checkpoint of {ARGS.tensors} float32 tensors, {mb:.0f} MB, median of {ARGS.rounds} rounds\n")
    print("| | save MB/s | load MB/s |")
    print("|---|---|---|")
    for k in cases:
        cells = []
        for op in ("save", "load"):
            v = samples[f"{k} {op}"]
            cells.append(f"{mb / statistics.median(v):8.0f}" if v else "       -")
        print(f"| {k} | {cells[0]} | {cells[1]} |")
    for p in path.values():
        if os.path.exists(p):
            os.remove(p)
    if ARGS.dir is None:
        os.rmdir(folder)


if __name__ == "__main__":
    sys.exit(main())
