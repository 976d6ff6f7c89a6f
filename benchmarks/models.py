"""Real models trained side by side with PyTorch: step time and loss curves.

    python benchmarks/models.py                          # every model, cpu and opencl
    python benchmarks/models.py --device cpu --steps 40 --models gpt,mlp
    python benchmarks/models.py --quick                  # smoke test: a few steps each
    python benchmarks/models.py --models gpt --profile   # cProfile top-15 of rtxcore's step
    python benchmarks/models.py --models gpt --profile ops   # rtxcore.profiler's op table
    python benchmarks/models.py --threads 1              # one BLAS/torch thread (busy machine)

Four models, each built by the same code on rtxcore and on PyTorch (``lib`` is
either module), with rtxcore's initial weights copied into PyTorch's through
NumPy and the same batches on both:

- ``gpt``: a decoder-only transformer LM as nanoGPT writes it (4 layers, 4
  heads, width 128, context 64, batch 16, GELU MLP 4x, LayerNorm, causal
  self-attention with a tril mask and masked_fill, tied embeddings, dropout
  0), AdamW and ``clip_grad_norm_(1.0)``;
- ``mlp``: a character MLP LM (Bengio / makemore: Embedding(27, 24), context 8,
  flatten, Linear-tanh-Linear, batch 64), SGD;
- ``gru``: a character GRU LM (Embedding, ``nn.GRU(batch_first=True)``,
  Linear), Adam and ``clip_grad_norm_(1.0)``; its row says "skipped: nn.GRU
  missing" on an rtxcore without ``nn.GRU``;
- ``cnn``: the digits CNN of ``examples/train_digits.py`` (scikit-learn's
  bundled digits), Adam.

The corpus is this repository's own documentation (nothing is downloaded).
One round is one rtxcore step then one PyTorch step (forward, loss, backward,
clipping where the model has it, optimizer step, ``loss.item()``); the table
shows median ms per step and the ratio rtxcore / PyTorch. On ``opencl`` the
comparison is rtxcore on opencl against PyTorch on cpu. The loss curves must
agree: a relative gap above ``--tol`` at any step exits with status 1. The
machine is often shared: read ratios, and rerun.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable


def _threads_from_argv(argv: list[str]) -> int | None:
    """``--threads N`` must act before NumPy and PyTorch load their thread pools."""
    for i, a in enumerate(argv):
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
    return None


THREADS = _threads_from_argv(sys.argv[1:]) if __name__ == "__main__" else None
if THREADS:
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = str(THREADS)

import numpy as np  # noqa: E402

import rtxcore as rc  # noqa: E402

try:
    import torch
    if THREADS:
        torch.set_num_threads(THREADS)
except ImportError:  # pragma: no cover - the benchmark needs PyTorch
    sys.exit("benchmarks/models.py compares with PyTorch: pip install torch")

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("gpt", "mlp", "gru", "cnn")


def rc_clip_grad_norm_(params: Any, max_norm: float) -> Any:
    """``rtxcore.nn.utils.clip_grad_norm_``; on an rtxcore without it (comparing
    with an older checkout), the same computation inline: the total 2-norm of
    the gradients, then a scale by ``min(1, max_norm / (norm + 1e-6))``."""
    try:
        from rtxcore.nn.utils import clip_grad_norm_
    except ImportError:
        grads = [p.grad for p in params if p.grad is not None]
        total = rc.stack([g.norm() for g in grads]).norm()
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef)
        return total
    return clip_grad_norm_(params, max_norm)


def torch_clip_grad_norm_(params: Any, max_norm: float) -> Any:
    return torch.nn.utils.clip_grad_norm_(params, max_norm)


# -- data ----------------------------------------------------------------------------------


def corpus() -> str:
    """The repository's documentation as one string (fixed for a checkout)."""
    parts = [ROOT / "README.md", ROOT / "docs" / "architecture.md"]
    return "\n".join(p.read_text(encoding="utf-8") for p in parts if p.exists())


def char_stream(vocab: int) -> np.ndarray:
    """The corpus as int64 codes: ``vocab`` 27 keeps lowercase letters and maps
    everything else to 0 (makemore's '.'); otherwise the ``vocab - 1`` most
    frequent characters, the rest sharing code 0."""
    text = corpus()
    if vocab == 27:
        codes = np.frombuffer(text.lower().encode("ascii", "replace"), np.uint8).astype(np.int64)
        letters = (codes >= ord("a")) & (codes <= ord("z"))
        return np.where(letters, codes - ord("a") + 1, 0)
    codes = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    chars, counts = np.unique(codes, return_counts=True)
    keep = chars[np.argsort(-counts, kind="stable")[: vocab - 1]]
    table = {int(c): i + 1 for i, c in enumerate(keep)}
    return np.array([table.get(ord(ch), 0) for ch in text], np.int64)


def lm_batches(vocab: int, context: int, batch: int, steps: int, seed: int,
               last_only: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """(x, y) windows of the stream: y is x shifted by one (every position), or
    only the next character (``last_only``: the MLP LM)."""
    data = char_stream(vocab)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        starts = rng.integers(0, len(data) - context - 1, batch)
        x = np.stack([data[s:s + context] for s in starts])
        if last_only:
            y = data[starts + context]
        else:
            y = np.stack([data[s + 1:s + context + 1] for s in starts])
        out.append((x, y))
    return out


def digit_batches(batch: int, steps: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Batches of scikit-learn's bundled digits, (N, 1, 8, 8) float32 in [0, 1]."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    return [(x[i], y[i]) for i in (rng.integers(0, len(y), batch) for _ in range(steps))]


# -- models, written once for either library ----------------------------------------------


def gpt(lib: Any, vocab: int = 65, n_layer: int = 4, n_head: int = 4, n_embd: int = 128,
        block: int = 64) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("bias", lib.tril(lib.ones(block, block)).view(1, 1, block, block))

        def forward(self, x: Any) -> Any:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT
            self.register_buffer("pos", lib.arange(block))

        def forward(self, idx: Any, targets: Any) -> Any:
            t = idx.size(1)
            x = self.wte(idx) + self.wpe(self.pos[:t])
            for b in self.h:
                x = b(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT()


def mlp_lm(lib: Any, vocab: int = 27, emb: int = 24, context: int = 8, hidden: int = 256) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class MLPLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.fc1 = nn.Linear(context * emb, hidden)
            self.fc2 = nn.Linear(hidden, vocab)

        def forward(self, x: Any, y: Any) -> Any:
            h = lib.tanh(self.fc1(self.emb(x).view(x.size(0), -1)))
            return F.cross_entropy(self.fc2(h), y)

    return MLPLM()


def gru_lm(lib: Any, vocab: int = 65, emb: int = 32, hidden: int = 128) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class GRULM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, emb)
            self.rnn = nn.GRU(emb, hidden, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, x: Any, y: Any) -> Any:
            out, _ = self.rnn(self.emb(x))
            logits = self.head(out)
            return F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))

    return GRULM()


def digits_cnn(lib: Any) -> Any:
    nn, F = lib.nn, lib.nn.functional

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(), nn.Linear(64, 10))

        def forward(self, x: Any, y: Any) -> Any:
            return F.cross_entropy(self.net(x), y)

    return CNN()


# name: (builder, optimizer(lib, params), clip, batches(steps, seed), needs)
SPECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], Any], bool,
                       Callable[[int, int], list], str | None]] = {
    "gpt": (gpt, lambda lib, ps: lib.optim.AdamW(ps, lr=1e-3, weight_decay=0.1), True,
            lambda n, s: lm_batches(65, 64, 16, n, s, False), None),
    "mlp": (mlp_lm, lambda lib, ps: lib.optim.SGD(ps, lr=0.1), False,
            lambda n, s: lm_batches(27, 8, 64, n, s, True), None),
    "gru": (gru_lm, lambda lib, ps: lib.optim.Adam(ps, lr=2e-3), True,
            lambda n, s: lm_batches(65, 32, 32, n, s, False), "GRU"),
    "cnn": (digits_cnn, lambda lib, ps: lib.optim.Adam(ps, lr=2e-3), False,
            lambda n, s: digit_batches(64, n, s), None),
}


# -- running ------------------------------------------------------------------------------


def copy_weights(src: Any, dst: Any) -> None:
    """rtxcore module ``src``'s parameters into torch module ``dst``, by name."""
    theirs = dict(dst.named_parameters())
    mine = dict(src.named_parameters())
    if sorted(mine) != sorted(theirs):
        raise SystemExit(f"parameter names differ: rtxcore {sorted(mine)} vs torch "
                         f"{sorted(theirs)}")
    with torch.no_grad():
        for name, p in mine.items():
            arr = p.detach().cpu().numpy()
            if tuple(theirs[name].shape) != arr.shape:
                raise SystemExit(f"{name}: rtxcore shape {arr.shape} vs torch "
                                 f"{tuple(theirs[name].shape)}")
            theirs[name].copy_(torch.from_numpy(arr.copy()))


def make_step(model: Any, opt: Any,
              clip: Callable[[Any, float], Any] | None) -> Callable[[Any, Any], float]:
    params = [p for p in model.parameters()]

    def step(x: Any, y: Any) -> float:
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        if clip is not None:
            clip(params, 1.0)
        opt.step()
        return loss.item()

    return step


def run_model(name: str, device: str, steps: int, seed: int, profile: str | None) -> dict[str, Any]:
    build, optim, clip, batches, needs = SPECS[name]
    if needs is not None and not hasattr(rc.nn, needs):
        return {"skip": f"nn.{needs} missing"}
    rc.manual_seed(seed)
    rmodel = build(rc).to(device)
    torch.manual_seed(seed)
    tmodel = build(torch)
    copy_weights(rmodel, tmodel)
    rstep = make_step(rmodel, optim(rc, list(rmodel.parameters())),
                      rc_clip_grad_norm_ if clip else None)
    tstep = make_step(tmodel, optim(torch, list(tmodel.parameters())),
                      torch_clip_grad_norm_ if clip else None)
    data = batches(steps, seed)
    rdata = [(rc.tensor(x).to(device), rc.tensor(y).to(device)) for x, y in data]
    tdata = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data]
    rt, tt, rl, tl = [], [], [], []
    prof = cProfile.Profile() if profile == "cprofile" else None
    ops = None
    if profile == "ops":
        from rtxcore.profiler import profile as op_profile

        ops = op_profile()
    gc.collect()
    for i in range(steps):
        if prof is not None and i >= 2:
            prof.enable()
        if ops is not None and i == 2:
            ops.__enter__()
        t0 = time.perf_counter()
        rl.append(rstep(*rdata[i]))
        t1 = time.perf_counter()
        if prof is not None:
            prof.disable()
        tl.append(tstep(*tdata[i]))
        t2 = time.perf_counter()
        rt.append(t1 - t0)
        tt.append(t2 - t1)
    warm = min(2, steps - 1)  # first steps build kernels and state
    r_ms = statistics.median(rt[warm:]) * 1e3
    t_ms = statistics.median(tt[warm:]) * 1e3
    gap = max(abs(a - b) / max(abs(b), 1e-8) for a, b in zip(rl, tl))
    if prof is not None:
        print(f"\n-- cProfile: rtxcore {name} on {device}, {steps - 2} steps (top 15 by own time)")
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if ops is not None:
        ops.__exit__(None, None, None)
        print(f"\n-- rtxcore.profiler: {name} on {device}, {steps - 2} steps (top 15 by self time; "
              f"the torch steps in between are counted in no row)")
        print(ops.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    return {"rtx": r_ms, "torch": t_ms, "ratio": r_ms / t_ms, "gap": gap,
            "loss": (rl[0], rl[-1], tl[0], tl[-1])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu,opencl", help="comma-separated rtxcore devices")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--steps", type=int, default=30, help="training steps per model and device")
    p.add_argument("--quick", action="store_true", help="smoke test: 5 steps")
    p.add_argument("--tol", type=float, default=1e-3,
                   help="largest relative loss gap allowed at any step (default 1e-3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", nargs="?", const="cprofile", choices=["cprofile", "ops"],
                   help="profile rtxcore's steps after the warm-up and print the top 15: with "
                        "cProfile (the default) or, with 'ops', rtxcore.profiler's op table")
    p.add_argument("--threads", type=int, default=None,
                   help="BLAS/OpenMP/torch threads for both libraries (a busy machine: 1)")
    args = p.parse_args(argv)
    steps = 5 if args.quick else args.steps
    devices = [d.strip() for d in args.device.split(",") if d.strip()]
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in SPECS:
            p.error(f"--models: unknown model {m!r} (choose from {', '.join(MODELS)})")
    usable = []
    for d in devices:
        try:
            rc.zeros(1, device=d)
            usable.append(d)
        except Exception as e:  # noqa: BLE001 - report and go on with the other devices
            print(f"device {d}: unavailable ({e})", file=sys.stderr)
    print(f"rtxcore vs torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"{steps} steps, "
          f"median ms/step after 2 warm-up steps; ratio = rtxcore / torch (opencl: rtxcore on "
          f"opencl vs torch on cpu)")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    failed = []
    for m in models:
        for d in usable:
            r = results[m, d] = run_model(m, d, steps, args.seed, args.profile)
            if "skip" not in r and not r["gap"] <= args.tol:
                failed.append(f"{m} on {d}: loss curves differ by {r['gap']:.2e} relative "
                              f"(> {args.tol:g}); losses rtxcore {r['loss'][0]:.4f} -> "
                              f"{r['loss'][1]:.4f}, torch {r['loss'][2]:.4f} -> {r['loss'][3]:.4f}")
    w = 30
    print("\n" + "model".ljust(6) + "".join(f"{d:>{w}}" for d in usable) + "   max loss gap")
    for m in models:
        cells, gaps = [], []
        for d in usable:
            r = results[m, d]
            if "skip" in r:
                cells.append(f"{'skipped: ' + r['skip']:>{w}}")
                continue
            cells.append(f"{r['ratio']:>6.2f}x ({r['rtx']:7.1f} / {r['torch']:6.1f} ms)".rjust(w))
            gaps.append(f"{r['gap']:.1e}")
        print(m.ljust(6) + "".join(cells) + "   " + " ".join(gaps))
    if failed:
        print("\nFAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
