"""GFLOP/s of rtxcore's OpenCL matmul against NumPy and PyTorch on the CPU, for
the shapes the models of ``benchmarks/models.py --device opencl`` run.

    python benchmarks/opencl_matmul.py                  # every shape, 2 threads
    python benchmarks/opencl_matmul.py --only conv      # rows whose name has "conv"
    python benchmarks/opencl_matmul.py --rounds 9 --threads 1

The shapes come from a run of superres, dcgan and nanogpt (``--steps 3``) with
the OpenCL matmul's signatures logged: the im2col convolutions' forward
(W @ cols: a short, wide product), their weight gradient (dY @ cols^T: a long
reduction to a small output, b transposed), their input gradient (W^T @ dY),
the Linear layers (x @ W^T, dY @ W, x^T @ dY) and attention's batched products
(strided views of one qkv tensor). float32 throughout.

One round times each library on each shape (``number`` calls, then a
synchronize); rounds are interleaved and the table shows medians. The machine
is often shared: read the ratios, and rerun.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _setup import import_torch, limit_threads  # noqa: E402

# (name, batch, n, k, m, a transposed, b transposed): out[i] = a[i] @ b[i], (n, k) @ (k, m);
# "transposed" operands are stored (k, n) / (m, k) and read through a transposed view.
SHAPES = [
    ("square 1024^3", 0, 1024, 1024, 1024, False, False),
    ("conv fwd superres 64x576 @ 576x16384", 0, 64, 576, 16384, False, False),
    ("conv fwd superres 32x576 @ 576x16384", 0, 32, 576, 16384, False, False),
    ("conv fwd superres 9x288 @ 288x16384", 0, 9, 288, 16384, False, False),
    ("conv fwd superres 64x25 @ 25x16384", 0, 64, 25, 16384, False, False),
    ("conv dW superres 64x16384 @ (576x16384)^T", 0, 64, 16384, 576, False, True),
    ("conv dW superres 32x16384 @ (576x16384)^T", 0, 32, 16384, 576, False, True),
    ("conv dW superres 9x16384 @ (288x16384)^T", 0, 9, 16384, 288, False, True),
    ("conv dX superres (64x576)^T @ 64x16384", 0, 576, 64, 16384, True, False),
    ("conv dX superres (32x576)^T @ 32x16384", 0, 576, 32, 16384, True, False),
    ("linear fwd 64x2048 @ (512x2048)^T", 0, 64, 2048, 512, False, True),
    ("linear fwd 128x512 @ (1024x512)^T", 0, 128, 512, 1024, False, True),
    ("linear dX 64x512 @ 512x2048", 0, 64, 512, 2048, False, False),
    ("linear dW (64x512)^T @ 64x2048", 0, 512, 64, 2048, True, False),
    ("linear nanogpt 512x48 @ (144x48)^T", 0, 512, 48, 144, False, True),
    ("linear dcgan 128x1024 @ 1024x512", 0, 128, 1024, 512, False, False),
    ("linear dcgan (128x1024)^T @ 128x512", 0, 1024, 128, 512, True, False),
    ("matvecs dcgan 32x((32x2048)^T @ 32x1)", 32, 2048, 32, 1, True, False),
    ("attention 384x(64x16 @ 16x64)", 384, 64, 16, 64, False, False),
    ("attention 384x(64x64 @ 64x16)", 384, 64, 64, 16, False, False),
    ("batched dcgan 32x(1024x16 @ (128x16)^T)", 32, 1024, 16, 128, False, True),
]
QKV = ("attention nanogpt q @ k^T, views of qkv (16,3,32,16)", 16, 3, 32, 16)


def _operands(np, rng, B, n, k, m, at, bt):
    """NumPy operands: a (B, n, k) and b (B, k, m) as (possibly transposed) views."""
    lead = (B,) if B else ()
    a = rng.standard_normal(lead + ((k, n) if at else (n, k)), dtype=np.float32)
    b = rng.standard_normal(lead + ((m, k) if bt else (k, m)), dtype=np.float32)
    return (a.swapaxes(-1, -2) if at else a), (b.swapaxes(-1, -2) if bt else b)


def _views(lib, x, at):
    return x.transpose(-1, -2) if at else x


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="", help="rows whose name contains this")
    p.add_argument("--seconds", type=float, default=0.05, help="per library, shape and round")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--no-check", action="store_true", help="skip comparing results with NumPy")
    args = p.parse_args()
    limit_threads(args.threads)
    os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", str(args.threads))
    import numpy as np

    import rtx_opencl
    import rtxcore as rc
    torch = import_torch(args.no_torch, args.threads)
    rng = np.random.default_rng(0)
    sync = rtx_opencl.synchronize

    cases = []  # (name, flops, {lib: fn})
    for name, B, n, k, m, at, bt in SHAPES:
        if args.only not in name:
            continue
        a, b = _operands(np, rng, B, n, k, m, at, bt)
        # the base arrays (contiguous), viewed as the model's layout on each library
        a0 = np.ascontiguousarray(a.swapaxes(-1, -2) if at else a)
        b0 = np.ascontiguousarray(b.swapaxes(-1, -2) if bt else b)
        ra, rb = rc.tensor(a0, device="opencl"), rc.tensor(b0, device="opencl")
        ra, rb = _views(rc, ra, at), _views(rc, rb, bt)
        fns = {"opencl": (lambda ra=ra, rb=rb: ra @ rb),
               "numpy": (lambda a=a, b=b: a @ b)}
        if torch is not None:
            ta, tb = torch.from_numpy(a0), torch.from_numpy(b0)
            ta, tb = _views(torch, ta, at), _views(torch, tb, bt)
            fns["torch"] = lambda ta=ta, tb=tb: ta @ tb
        if not args.no_check:
            got = (ra @ rb).numpy()
            want = a.astype(np.float64) @ b.astype(np.float64)
            err = np.abs(got - want).max() / (np.abs(want).max() + 1e-30)
            assert err < 1e-4, (name, err)
        cases.append((name, 2 * max(B, 1) * n * k * m, fns))
    name, Bq, H, T, D = QKV
    if args.only in name:
        qkv = rng.standard_normal((Bq, T, 3 * H * D), dtype=np.float32)
        q = qkv[..., :H * D].reshape(Bq, T, H, D).swapaxes(1, 2)
        kk = qkv[..., H * D:2 * H * D].reshape(Bq, T, H, D).swapaxes(1, 2)
        rq = rc.tensor(qkv, device="opencl")
        rqq = rq[..., :H * D].reshape(Bq, T, H, D).transpose(1, 2)
        rkk = rq[..., H * D:2 * H * D].reshape(Bq, T, H, D).transpose(1, 2).transpose(-1, -2)
        fns = {"opencl": (lambda: rqq @ rkk), "numpy": (lambda: q @ kk.swapaxes(-1, -2))}
        if torch is not None:
            tq = torch.from_numpy(qkv)
            tqq = tq[..., :H * D].reshape(Bq, T, H, D).transpose(1, 2)
            tkk = tq[..., H * D:2 * H * D].reshape(Bq, T, H, D).transpose(1, 2).transpose(-1, -2)
            fns["torch"] = lambda: tqq @ tkk
        if not args.no_check:
            assert np.allclose((rqq @ rkk).numpy(), q @ kk.swapaxes(-1, -2), rtol=1e-4, atol=1e-4)
        cases.append((name, 2 * Bq * H * T * T * D, fns))

    libs = ["opencl", "numpy"] + (["torch"] if torch is not None else [])
    # calls per round: about --seconds each, from one warm call
    number = {}
    for name, flops, fns in cases:
        for lib, fn in fns.items():
            fn()
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            dt = time.perf_counter() - t0
            number[name, lib] = max(1, min(200, int(args.seconds / max(dt, 1e-6))))
    times: dict = {}
    for _ in range(args.rounds):
        for name, flops, fns in cases:
            for lib, fn in fns.items():
                n_ = number[name, lib]
                sync()
                t0 = time.perf_counter()
                for _ in range(n_):
                    fn()
                sync()
                times.setdefault((name, lib), []).append((time.perf_counter() - t0) / n_)
    w = max(len(c[0]) for c in cases) + 2
    print(f"GFLOP/s, float32, {args.threads} threads, median of {args.rounds} interleaved rounds")
    print("shape".ljust(w) + "".join(f"{lib:>9}" for lib in libs)
          + "".join(f"{'ocl/' + lib:>12}" for lib in libs[1:]))
    for name, flops, fns in cases:
        gf = {lib: flops / statistics.median(times[name, lib]) / 1e9 for lib in fns}
        print(name.ljust(w) + "".join(f"{gf[lib]:9.1f}" for lib in libs)
              + "".join(f"{gf['opencl'] / gf[lib]:12.2f}" for lib in libs[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
