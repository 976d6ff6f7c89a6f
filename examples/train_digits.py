"""Train a classifier on scikit-learn's handwritten digits (8x8 images, 10 classes).

    python examples/train_digits.py                       # MLP on the default device
    python examples/train_digits.py --model cnn --device cpu
    python examples/train_digits.py --plot curves.png     # also draw loss/accuracy (matplotlib)
    python examples/train_digits.py --profile             # where a training step's time goes

The data ships inside scikit-learn (``load_digits``): nothing is downloaded. The
script trains, prints the test accuracy, saves a checkpoint (safetensors) and
loads it back to check it. Exit status 0 when the accuracy reaches the model's
target (MLP 0.95, CNN 0.97), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import rtxcore as rc
from rtxcore import nn
from rtxcore.utils.data import DataLoader, TensorDataset

TARGET = {"mlp": 0.95, "cnn": 0.97}
DEFAULTS = {  # epochs, learning rate (Adam), batch size
    "mlp": (30, 2e-3, 64),
    "cnn": (25, 2e-3, 64),
}
PROFILE_WARMUP = 2  # steps before --profile starts (the first ones compile kernels)


def mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def load_data(device: rc.Device, seed: int) -> tuple[TensorDataset, TensorDataset]:
    """Digits as (N, 1, 8, 8) float32 in [0, 1], split 80/20 with a fixed seed."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("this example needs scikit-learn for its data: pip install scikit-learn "
                 "(python3 dev.py demo installs it)")
    digits = load_digits()
    x = rc.tensor(digits.images / 16.0, dtype=rc.float32).unsqueeze(1)
    y = rc.tensor(digits.target, dtype=rc.int64)
    order = rc.randperm(len(y), generator=rc.Generator().manual_seed(seed))
    n_train = int(0.8 * len(y))
    train, test = order[:n_train], order[n_train:]
    return (TensorDataset(x[train].to(device), y[train].to(device)),
            TensorDataset(x[test].to(device), y[test].to(device)))


def accuracy(model: nn.Module, data: TensorDataset) -> float:
    model.eval()
    with rc.no_grad():
        x, y = data.tensors
        correct = (model(x).argmax(1) == y).sum().item()
    model.train()
    return correct / len(y)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--device", default=os.environ.get("RTX_DEVICE", "cpu"),
                   help="rtxcore device (default: $RTX_DEVICE, else cpu)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (a smoke run)")
    p.add_argument("--checkpoint", default=None,
                   help="where to save the weights (default: checkpoints/digits-<model>.safetensors)")
    p.add_argument("--plot", default=None, metavar="PNG", help="draw loss and accuracy curves (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--profile", type=int, nargs="?", const=5, default=None, metavar="STEPS",
                   help=f"profile STEPS training steps (default 5, after {PROFILE_WARMUP} warm-up "
                        "steps) and print a table of where the time goes")
    p.add_argument("--distributed", action="store_true",
                   help="data-parallel on the processes of an MPI job: run it as "
                        "python -m rtxcore.distributed.run -n 2 examples/train_digits.py --distributed "
                        "(the batch is split over the ranks; rank 0 prints and saves)")
    p.add_argument("--trace", default=None, metavar="JSON",
                   help="with --profile: also write a Chrome trace (chrome://tracing, ui.perfetto.dev)")
    args = p.parse_args(argv)

    epochs, lr, batch = DEFAULTS[args.model]
    epochs = args.epochs if args.epochs is not None else epochs
    lr = args.lr if args.lr is not None else lr
    batch = args.batch_size if args.batch_size is not None else batch
    try:
        device = rc.device(args.device)
        rc.zeros(1, device=device)  # fail here, clearly, if the device can't be used
    except Exception as exc:  # noqa: BLE001
        print(f"device {args.device!r} is not usable: {exc}", file=sys.stderr)
        return 2
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("--plot needs matplotlib: pip install matplotlib (or pip install 'rtxcore[plot]')",
                  file=sys.stderr)
            return 2
    try:
        from tqdm import tqdm
    except ImportError:
        print("this example needs tqdm: pip install tqdm (python3 dev.py demo installs it)", file=sys.stderr)
        return 2

    rank, world = 0, 1
    if args.distributed:
        import rtxcore.distributed as dist

        dist.init_process_group()
        rank, world = dist.get_rank(), dist.get_world_size()
        if batch % world:
            print(f"--batch-size {batch} does not split over {world} ranks", file=sys.stderr)
            return 2
    say = print if rank == 0 else _quiet  # one voice: the other ranks train silently
    if rank != 0:
        args.no_progress = True

    rc.manual_seed(args.seed)
    train, test = load_data(device, args.seed)
    model = (mlp() if args.model == "mlp" else cnn()).to(device)
    net = model
    sampler = None
    if args.distributed:
        from rtxcore.nn.parallel import DistributedDataParallel
        from rtxcore.utils.data import DistributedSampler

        net = DistributedDataParallel(model)
        sampler = DistributedSampler(train, seed=args.seed)  # this rank's share
        loader = DataLoader(train, batch_size=batch // world, sampler=sampler)
    else:
        loader = DataLoader(train, batch_size=batch, shuffle=True,
                            generator=rc.Generator().manual_seed(args.seed))
    opt = rc.optim.Adam(model.parameters(), lr=lr)
    sched = rc.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    if world > 1:
        say(f"data parallel on {world} ranks: {batch // world} images per rank per step")
    say(f"training {args.model} on {device}: {len(train)} train / {len(test)} test images, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters, {epochs} epochs")
    losses, accs, steps = [], [], 0
    prof = rc.profiler.profile(record_shapes=True) if args.profile else None
    t0 = time.perf_counter()
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        # (disable=None: no bar when stdout isn't a terminal, e.g. in a CI log)
        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}", leave=False,
                   disable=True if args.no_progress else None, file=sys.stdout)
        total, count = 0.0, 0
        for x, y in bar:
            if prof is not None and steps == PROFILE_WARMUP:
                prof.start()
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.item()
            total, count, steps = total + value, count + 1, steps + 1
            if prof is not None and steps == PROFILE_WARMUP + args.profile:
                show_profile(prof, steps - PROFILE_WARMUP, args.trace)
                prof = None
            bar.set_postfix(loss=f"{value:.4f}")
            if args.max_steps is not None and steps >= args.max_steps:
                break
        sched.step()
        losses.append(total / max(count, 1))
        accs.append(accuracy(model, test))
        if not args.no_progress or epoch == epochs - 1:
            say(f"epoch {epoch + 1:3d}  loss {losses[-1]:.4f}  test accuracy {accs[-1]:.4f}")
        if args.max_steps is not None and steps >= args.max_steps:
            break
    if prof is not None:  # training ended before the profiled steps did
        show_profile(prof, max(0, steps - PROFILE_WARMUP), args.trace)
    elapsed = time.perf_counter() - t0
    acc = accs[-1]
    say(f"test accuracy: {acc:.4f} ({args.model}, {elapsed:.1f} s, {steps} steps)")

    path = Path(args.checkpoint or f"checkpoints/digits-{args.model}.safetensors")
    if rank == 0:  # every rank holds the same weights: one checkpoint
        path.parent.mkdir(parents=True, exist_ok=True)
        rc.save(model.state_dict(), path)
    if args.distributed:
        dist.barrier()  # the file is complete before any rank reads it
    again = (mlp() if args.model == "mlp" else cnn()).to(device)
    again.load_state_dict(rc.load(path, map_location=device))
    same = accuracy(again, test) == acc
    say(f"checkpoint: {path} (reloaded: accuracy {'identical' if same else 'DIFFERENT'})")

    if args.plot:
        plot(losses, accs, args.plot)
        say(f"curves: {args.plot}")
    ok = acc >= TARGET[args.model] and same
    if args.max_steps is None:
        say(f"target {TARGET[args.model]:.2f}: {'reached' if ok else 'NOT reached'}")
        return 0 if ok else 1
    return 0 if same else 1


def _quiet(*args: object, **kwargs: object) -> None:
    """``print`` on ranks other than 0."""


def show_profile(prof: "rc.profiler.profile", steps: int, trace: str | None) -> None:
    """Stop ``prof`` and print its table: the ops, kernels, backward nodes and
    optimizer steps of ``steps`` training steps, by their own (self) time."""
    prof.stop()
    print(f"\nprofile of {steps} training step{'s' if steps != 1 else ''}:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    if trace:
        prof.export_chrome_trace(trace)
        print(f"trace: {trace} (open it in chrome://tracing or https://ui.perfetto.dev)\n")


def plot(losses: list[float], accs: list[float], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no screen needed
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    epochs = range(1, len(losses) + 1)
    a.plot(epochs, losses)
    a.set_xlabel("epoch")
    a.set_ylabel("training loss")
    b.plot(epochs, accs)
    b.set_xlabel("epoch")
    b.set_ylabel("test accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
