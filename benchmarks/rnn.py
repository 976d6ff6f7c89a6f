"""Recurrent layers and cells against PyTorch: a training step's time with the
fused cell kernels (``lstm_cell``, ``gru_cell``), with them taken away (the
core's op-by-op decomposition of the gates), and PyTorch's, in one process.

    python benchmarks/rnn.py                       # cpu, default threads
    python benchmarks/rnn.py --threads 1           # one BLAS/OpenMP/torch thread
    python benchmarks/rnn.py --device cpu,opencl --cases lstm,gru
    python benchmarks/rnn.py --clock cpu           # process CPU time (a busy machine, 1 thread)

Cases (the same code builds each on rtxcore and on PyTorch, rtxcore's weights
copied into PyTorch's; Adam):

- ``lstm``: an LSTM classifier over image rows: ``nn.LSTM(28, 128, 2,
  batch_first=True)``, Linear on the last step, batch 64, 28 steps;
- ``gru``: benchmarks/models.py's character GRU LM: Embedding(65, 32),
  ``nn.GRU(32, 128, batch_first=True)``, Linear, batch 32, 32 steps,
  ``clip_grad_norm_(1.0)``;
- ``lstmcell``, ``grucell``, ``rnncell``: the cell in a Python loop over the 28
  rows as users write it (input 28, hidden 128, batch 64), Linear on the last h.

One round runs each contender once (fused, op by op, PyTorch), in an order
that rotates from round to round; the table shows median ms per step after two
warm-up rounds and the ratios to PyTorch. The machine is often shared: read
ratios, and rerun.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from typing import Any, Callable


def _threads_from_argv(argv: list[str]) -> int | None:
    """``--threads N`` must act before NumPy and PyTorch load their thread pools."""
    for i, a in enumerate(argv):
        val = a.split("=", 1)[1] if a.startswith("--threads=") else \
            argv[i + 1] if a == "--threads" and i + 1 < len(argv) else None
        if val is not None and val.isdigit():
            return int(val)
    return None


THREADS = _threads_from_argv(sys.argv[1:]) if __name__ == "__main__" else None
if THREADS:
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "POCL_MAX_PTHREAD_COUNT"):
        os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402
from rtxcore.ops.core import ready_device  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover - the benchmark needs PyTorch
    sys.exit("benchmarks/rnn.py compares with PyTorch: pip install torch")
if THREADS:
    torch.set_num_threads(THREADS)
    rc.set_num_threads(THREADS)

CASES = ("lstm", "gru", "lstmcell", "grucell", "rnncell")
CELL_OPS = ("lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward")


def lstm_rows(lib: Any) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class LSTMRows(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(28, 128, 2, batch_first=True)
            self.fc = nn.Linear(128, 10)

        def forward(self, x: Any, y: Any) -> Any:
            out, _ = self.rnn(x)
            return F.cross_entropy(self.fc(out[:, -1]), y)

    return LSTMRows()


def gru_lm(lib: Any, vocab: int = 65) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class GRULM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, 32)
            self.rnn = nn.GRU(32, 128, batch_first=True)
            self.head = nn.Linear(128, vocab)

        def forward(self, x: Any, y: Any) -> Any:
            out, _ = self.rnn(self.emb(x))
            return F.cross_entropy(self.head(out).reshape(-1, vocab), y.reshape(-1))

    return GRULM()


def cell_loop(kind: str) -> Callable[[Any], Any]:
    def build(lib: Any) -> Any:
        nn, F = lib.nn, lib.nn.functional

        class CellLoop(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.cell = getattr(nn, kind)(28, 128)
                self.fc = nn.Linear(128, 10)

            def forward(self, x: Any, y: Any) -> Any:
                state = None
                for t in range(x.shape[1]):
                    state = self.cell(x[:, t], state)
                h = state[0] if isinstance(state, tuple) else state
                return F.cross_entropy(self.fc(h), y)

        return CellLoop()

    return build


def _data(case: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    if case == "gru":
        return rng.integers(0, 65, (32, 32)), rng.integers(0, 65, (32, 32))
    return rng.standard_normal((64, 28, 28)).astype(np.float32), rng.integers(0, 10, 64)


BUILD = {"lstm": lstm_rows, "gru": gru_lm, "lstmcell": cell_loop("LSTMCell"),
         "grucell": cell_loop("GRUCell"), "rnncell": cell_loop("RNNCell")}


def _step(lib: Any, model: Any, clip: bool) -> Callable[[Any, Any], float]:
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    params = list(model.parameters())

    def step(x: Any, y: Any) -> float:
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        if clip:
            lib.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    return step


@contextlib.contextmanager
def _decomposed(device: str) -> Any:
    """``device`` without its cell kernels: the gates op by op (the core's decomposition)."""
    dev = ready_device(device)
    saved = {k: dev.kernels.pop(k) for k in CELL_OPS if k in dev.kernels}
    try:
        yield
    finally:
        dev.kernels.update(saved)


def run_case(case: str, device: str, rounds: int, clock: Callable[[], float]) -> dict[str, Any]:
    rc.manual_seed(0)
    fused_m, ops_m = BUILD[case](rc).to(device), BUILD[case](rc).to(device)
    ops_m.load_state_dict(fused_m.state_dict())
    torch.manual_seed(0)
    tm = BUILD[case](torch)
    with torch.no_grad():
        for name, p in tm.named_parameters():
            p.copy_(torch.from_numpy(dict(fused_m.named_parameters())[name].detach().cpu()
                                     .numpy().copy()))
    clip = case == "gru"
    x, y = _data(case)
    rx, ry = rc.tensor(x).to(device), rc.tensor(y).to(device)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    fused, ops, theirs = _step(rc, fused_m, clip), _step(rc, ops_m, clip), _step(torch, tm, clip)

    def ops_step() -> float:
        with _decomposed(device):
            return ops(rx, ry)

    runs = {"fused": lambda: fused(rx, ry), "op by op": ops_step, "torch": lambda: theirs(tx, ty)}
    times: dict[str, list[float]] = {k: [] for k in runs}
    losses: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for r in range(rounds + 2):
        for name in names[r % 3:] + names[:r % 3]:  # (each follows each: cache effects even out)
            fn = runs[name]
            t0 = clock()
            losses[name].append(fn())
            if r >= 2:
                times[name].append(clock() - t0)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    gap = max(abs(a - b) / max(abs(b), 1e-8) for a, b in zip(losses["fused"], losses["torch"]))
    return {"ms": ms, "gap": gap}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="comma-separated rtxcore devices")
    p.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=None,
                   help="BLAS/OpenMP/torch threads for both libraries (default: theirs)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: process CPU time, steadier on a busy machine (one thread only)")
    args = p.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in BUILD:
            p.error(f"--cases: unknown case {c!r} (choose from {', '.join(CASES)})")
    print(f"rtxcore vs torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{args.rounds} rounds, median ms per training step ({args.clock} clock); "
          f"x = / torch's")
    print(f"{'case':<10}{'device':<10}{'fused':>18}{'op by op':>18}{'torch':>10}"
          f"{'loss gap':>10}")
    for case in cases:
        for device in [d.strip() for d in args.device.split(",") if d.strip()]:
            r = run_case(case, device, args.rounds, clock)
            ms, t = r["ms"], r["ms"]["torch"]
            cell = lambda k: f"{ms[k]:7.1f} ({ms[k] / t:4.2f}x)"  # noqa: E731
            print(f"{case:<10}{device:<10}{cell('fused'):>18}{cell('op by op'):>18}"
                  f"{t:>10.1f}{r['gap']:>10.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
