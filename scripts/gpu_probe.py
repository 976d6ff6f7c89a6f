"""The GPU check's probe (scripts/gpu-check.sh, stage 4): cuda against cpu on
the edge cases where CUDA libraries are known to differ, and three timings
against raw CuPy. ``--ignore-list`` prints pytest ``--ignore`` options for the
test modules this machine can't import (a missing library, or opencl).

    python scripts/gpu_probe.py cuda:0
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import sys
import time


def ignore_list() -> str:
    need = {"hypothesis": "hypothesis", "safetensors": "safetensors", "sklearn": "scikit-learn",
            "tqdm": "tqdm", "pyopencl": "pyopencl", "torch": "torch", "mpi4py": "mpi4py"}
    missing = {m for m in need if importlib.util.find_spec(m) is None}
    out = []
    for f in sorted(pathlib.Path("tests").glob("test_*.py")):
        text = f.read_text()
        top = {m for m in missing if re.search(rf"^(import|from) {m}\b", text, re.M)}
        if f.name in ("test_opencl.py", "test_opencl_more.py") or "opencl" in f.name:
            top.add("opencl")
        if f.name == "test_distributed.py" and "mpi4py" in missing:
            top.add("mpi4py")
        if top:
            out.append(f"--ignore={f}")
            print(f"left out {f.name}: needs {', '.join(sorted(top))}", file=sys.stderr)
    return " ".join(out)


def probe(dev: str) -> int:
    import numpy as np

    import rtxcore as rc

    bad = 0

    def same(what: str, got: object, want: object, tol: float = 0.0) -> None:
        nonlocal bad
        g = np.asarray(got, np.float64)
        w = np.asarray(want, np.float64)
        ok = np.allclose(g, w, rtol=tol, atol=0, equal_nan=True) if tol else \
            np.array_equal(g, w, equal_nan=True)
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {what}: cuda {g.tolist()}  cpu {w.tolist()}")

    inf = float("inf")
    a, b = [1.0, 5.0, -5.0, -5.0, 7.5], [0.1, inf, inf, 2.0, -2.0]
    for op in ("floor_divide", "remainder"):
        for dt in (rc.float32, rc.float64, rc.float16):
            x = getattr(rc, op)(rc.tensor(a, dtype=dt, device=dev), rc.tensor(b, dtype=dt, device=dev))
            y = getattr(rc, op)(rc.tensor(a, dtype=dt), rc.tensor(b, dtype=dt))
            same(f"{op} {dt.name}", x.cpu().numpy(), y.numpy(), 1e-6)
    for dt in (rc.int32, rc.int64, rc.uint8):
        x = rc.tensor([1.5, -1.5, 300.0, -300.0], device=dev).to(dt)
        y = rc.tensor([1.5, -1.5, 300.0, -300.0]).to(dt)
        same(f"cast float32 -> {dt.name}", x.cpu().numpy(), y.numpy())
    tiny = np.array([1e-40, -1e-40], np.float32)  # float32 subnormals (CUDA may flush)
    same("subnormal * 1 (may flush to zero on CUDA: documented)",
         (rc.tensor(tiny, device=dev) * 1).cpu().numpy(), (rc.tensor(tiny) * 1).numpy())
    idx = [3, 0, 2]
    same("index_select", rc.arange(5.0, device=dev)[rc.tensor(idx, device=dev)].cpu().numpy(),
         rc.arange(5.0)[rc.tensor(idx)].numpy())
    try:
        rc.arange(5.0, device=dev)[rc.tensor([7], device=dev)]
        print("BAD out-of-range index: no error")
        bad += 1
    except (IndexError, RuntimeError) as exc:
        print(f"ok  out-of-range index: {type(exc).__name__}: {str(exc)[:80]}")

    import cupy as cp

    def clock(fn, n: int) -> float:
        fn()
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        cp.cuda.Device().synchronize()
        return (time.perf_counter() - t) / n

    x, xc = rc.ones(16, device=dev), cp.ones(16, cp.float32)
    i, ic = rc.tensor([1, 3, 5], device=dev), cp.asarray([1, 3, 5])
    m, mc = rc.randn(4096, 4096, device=dev), cp.random.standard_normal((4096, 4096), cp.float32)
    for what, ours, raw, n in (("x + 1 (16 floats)", lambda: x + 1, lambda: xc + 1, 2000),
                               ("x[idx]", lambda: x[i], lambda: xc[ic], 2000),
                               ("4096^2 matmul", lambda: m @ m, lambda: mc @ mc, 10)):
        t_rc, t_cp = clock(ours, n), clock(raw, n)
        print(f"time {what}: rtxcore {t_rc * 1e6:.1f} us, cupy {t_cp * 1e6:.1f} us, "
              f"ratio {t_rc / t_cp:.2f}")
    print(f"probe: {bad} differences" if bad else "probe: all as cpu")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ignore-list"]:
        print(ignore_list())
        sys.exit(0)
    sys.exit(probe(sys.argv[1] if len(sys.argv) > 1 else "cuda:0"))
