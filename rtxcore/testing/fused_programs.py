"""``Backend.fuse`` checked: fused programs of every kind the fusion pass makes
(``FUSE_PROGRAMS``), each run by the backend's runner against the same steps
run one by one on cpu (``fuse_entries``).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from .arrays import _rc

Entry = tuple[str, str, float, str]  # (what, status, worst difference, detail)

FUSE_PROGRAMS: list[dict[str, Any]] = [
    {"n": 1003, "inputs": ["float32", "float32"],  # a tanh GELU and a second output
     "steps": [["mul", "float32", [["in", 0], ["in", 0]]],
               ["mul", "float32", [["step", 0], ["in", 0]]],
               ["mul", "float32", [["step", 1], ["const", 0.044715]]],
               ["add", "float32", [["in", 0], ["step", 2]]],
               ["mul", "float32", [["step", 3], ["const", 0.7978845608]]],
               ["tanh", "float32", [["step", 4]]],
               ["add", "float32", [["step", 5], ["const", 1.0]]],
               ["mul", "float32", [["step", 6], ["in", 0]]],
               ["mul", "float32", [["step", 7], ["const", 0.5]]],
               ["sub", "float32", [["step", 8], ["in", 1]]]],
     "outputs": [8, 9]},
    {"n": 517, "inputs": ["float32", "float32"],  # compare, where, NaN-aware max, cast
     "steps": [["gt", "bool", [["in", 0], ["in", 1]]],
               ["where", "float32", [["step", 0], ["in", 0], ["const", -1.5]]],
               ["maximum", "float32", [["step", 1], ["in", 1]]],
               ["cast", "float64", [["step", 2]]]],
     "outputs": [0, 3]},
    {"n": 300, "inputs": ["int32", "int32"],  # integers
     "steps": [["add", "int32", [["in", 0], ["in", 1]]],
               ["mul", "int32", [["step", 0], ["const", 3]]],
               ["neg", "int32", [["step", 1]]],
               ["minimum", "int32", [["step", 2], ["in", 1]]]],
     "outputs": [3]},
    {"n": 640, "cols": 16, "inputs": ["float32", "float32", "float32"],  # broadcasts:
     "steps": [["sub", "float32", [["in", 0], ["col", 2]]],  # x - mean[:, None]
               ["mul", "float32", [["step", 0], ["row", 1]]],  # ... * w[None, :]
               ["add", "float32", [["step", 1], ["const", 0.5]]]],
     "outputs": [2]},
    {"n": 91, "cols": 13, "inputs": ["float64", "float64", "float64"],  # an odd row length
     "steps": [["mul", "float64", [["row", 0], ["col", 1]]],
               ["maximum", "float64", [["step", 0], ["in", 2]]]],
     "outputs": [1]},
    {"n": 1001, "inputs": ["float32", "float32", "float32"],  # an optimizer's update:
     "steps": [["mul", "float32", [["in", 0], ["scalar", 2]]],  # a step size in a tensor,
               ["sqrt", "float32", [["in", 1]]],                # output 0 written over
               ["add", "float32", [["step", 1], ["const", 1e-8]]],  # input 0 (in place)
               ["div", "float32", [["step", 0], ["step", 2]]],
               ["sub", "float32", [["in", 0], ["step", 3]]]],
     "outputs": [4]},
    {"n": 37 * 24, "cols": 24, "reduce": "rows",  # ends in a row sum: x - mean[:, None],
     "inputs": ["float32", "float32"],            # its square summed per row, and exp
     "steps": [["sub", "float32", [["in", 0], ["col", 1]]],
               ["mul", "float32", [["step", 0], ["step", 0]]],
               ["exp", "float32", [["step", 0]]],
               ["sum", "float32", [["step", 1]]]],
     "outputs": [2, 3]},
    {"n": 11 * 13, "cols": 13, "reduce": "rows",  # float64, an odd row length, a bias
     "inputs": ["float64", "float64"],
     "steps": [["mul", "float64", [["in", 0], ["row", 1]]],
               ["tanh", "float64", [["step", 0]]],
               ["sum", "float64", [["step", 1]]]],
     "outputs": [2]},
    {"n": 5003, "reduce": "all", "inputs": ["float32", "float32"],  # a sum of everything
     "steps": [["mul", "float32", [["in", 0], ["in", 1]]],
               ["add", "float32", [["step", 0], ["const", 0.25]]],
               ["sum", "float32", [["step", 1]]]],
     "outputs": [2]},
    {"n": 8 * 1000, "reduce": "all", "inputs": ["float32"],  # a squared norm
     "steps": [["mul", "float32", [["in", 0], ["in", 0]]],
               ["sum", "float32", [["step", 0]]]],
     "outputs": [1]},
]
# program -> (output, input): that output is written into that input's memory
FUSE_ALIAS: dict[int, tuple[int, int]] = {5: (0, 0)}


def fuse_entries(device: str) -> list[Entry]:
    """One row per program: ``Backend.fuse``'s runner against the steps run one by
    one on cpu; "missing" where the backend has no runner (the core then runs
    the steps through the device's kernels, each checked by its own rows)."""
    from .. import dtype as D
    from ..dispatch.fused import input_sizes, output_sizes
    from ..jit.fused import run_steps
    from ..ops.core import empty, ready_device, view_of

    dev = ready_device(device)
    rng = np.random.default_rng(zlib.crc32(b"fuse"))
    out: list[Entry] = []
    for i, prog in enumerate(FUSE_PROGRAMS):
        name = f"program {i}"
        if any(dt not in {d.name for d in dev._dtypes} for dt in
               prog["inputs"] + [s[1] for s in prog["steps"]]):
            continue  # a dtype the device lacks
        try:
            runner = dev.backend.fuse(prog, dev.index)
        except Exception as exc:  # noqa: BLE001  (a backend's bug: its row says so)
            out.append((name, "fail", float("inf"), f"fuse() raised {type(exc).__name__}: {exc}"))
            continue
        if runner is None:
            out.append((name, "missing", 0.0, "no fused runner: the core runs the steps one by one"))
            continue
        n = prog["n"]
        sizes = input_sizes(prog)
        data = []
        for q, dt in enumerate(prog["inputs"]):
            a = rng.standard_normal(sizes[q]) * 3
            if sizes[q] >= 4 and prog.get("reduce") != "all":  # (a NaN would be all it sums)
                a[:4] = [0.0, -0.0, np.nan, np.inf] if dt.startswith("float") else a[:4]
            data.append(a.astype(dt) if dt.startswith("float") else
                        rng.integers(-100, 100, a.shape).astype(dt))
        ins = [_rc().tensor(a.copy(), device=device) for a in data]
        osizes = output_sizes(prog)
        outs = [empty((m,), D.BY_NAME[prog["steps"][k][1]], dev)
                for k, m in zip(prog["outputs"], osizes)]
        if i in FUSE_ALIAS:
            j, into = FUSE_ALIAS[i]
            outs[j] = ins[into]
        try:
            runner([view_of(t) for t in outs], [view_of(t) for t in ins])
        except Exception as exc:  # noqa: BLE001
            out.append((name, "fail", float("inf"), f"the runner raised {type(exc).__name__}: {exc}"))
            continue
        # the reference: the same steps one by one on cpu (the reference backend),
        # so a row depends on the fused runner alone
        cpu = ready_device("cpu")
        refs = [empty((m,), D.BY_NAME[prog["steps"][k][1]], cpu)
                for k, m in zip(prog["outputs"], osizes)]
        run_steps(prog, refs, [_rc().tensor(a.copy(), device="cpu") for a in data], cpu)
        worst, bad = 0.0, ""
        for j, (o, r) in enumerate(zip(outs, refs)):
            got, want = o.cpu().numpy(), r.cpu().numpy()
            if got.dtype.kind == "f" and osizes[j] != n:  # a sum: in another order
                ok = np.isclose(got, want, rtol=1e-5, atol=1e-5 * n / osizes[j], equal_nan=True)
            elif got.dtype.kind == "f":
                ok = np.isclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)
            else:
                ok = got == want
            if not ok.all():
                k = int(np.flatnonzero(~ok)[0])
                bad = f"output {j}[{k}] = {got[k]!r}, the steps give {want[k]!r}"
                worst = float("inf")
        out.append((name, "fail" if bad else "pass", worst, bad or f"{n} elements"))
    return out
