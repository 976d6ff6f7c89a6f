"""Run under ``python -m rtxcore.distributed.run -n N`` by tests/test_distributed.py:
``worker.py SCENARIO [args]`` (the collectives themselves are checked by
``rtxcore.distributed.conformance``). Each scenario asserts on every rank (a failing
rank aborts the job, so the test sees a non-zero exit) and rank 0 prints
``OK scenario`` at the end."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import rtxcore as rc
import rtxcore.distributed as dist
from rtxcore import nn
from rtxcore.nn.parallel import DistributedDataParallel as DDP


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def _batches(steps: int, per_rank: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((steps, per_rank * n, 6)).astype(np.float32),
            rng.standard_normal((steps, per_rank * n, 3)).astype(np.float32))


def _flat(model: nn.Module) -> np.ndarray:
    return np.concatenate([p.detach().cpu().numpy().ravel() for p in model.parameters()])


def _same_on_every_rank(model: nn.Module, what: str) -> None:
    mine = rc.tensor(_flat(model))
    every = [rc.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    for k, e in enumerate(every):
        assert np.array_equal(e.numpy(), mine.numpy()), f"{what}: rank {k}'s parameters differ"


def ddp(device: str, mode: str) -> None:
    r, n = dist.get_rank(), dist.get_world_size()
    rc.manual_seed(100 + r)  # every rank initialises differently: the wrap must broadcast
    model = _model().to(device)
    # several buckets even for this small model
    ddp_model = DDP(model, bucket_cap_mb=0.0005, gradient_as_bucket_view=(mode == "view"))
    assert len(ddp_model._buckets) > 1
    ref = _model().to(device)
    ref.load_state_dict(model.state_dict())
    steps, per = 6, 4
    X, Y = _batches(steps, per, n)
    if mode == "zero":
        opt = dist.optim.ZeroRedundancyOptimizer(ddp_model.parameters(), rc.optim.AdamW, lr=0.01)
        base = _model().to(device)
        base.load_state_dict(model.state_dict())
        base_ddp = DDP(base)
        base_opt = rc.optim.AdamW(base_ddp.parameters(), lr=0.01)
    else:
        opt = rc.optim.SGD(ddp_model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = rc.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        x = rc.tensor(X[s], device=device)
        y = rc.tensor(Y[s], device=device)
        xs, ys = x[r * per:(r + 1) * per], y[r * per:(r + 1) * per]
        opt.zero_grad(set_to_none=(mode != "view"))
        if mode == "no_sync":  # two half batches: accumulate, then reduce
            h = per // 2
            with ddp_model.no_sync():
                (((ddp_model(xs[:h]) - ys[:h]) ** 2).mean() / 2).backward()
            (((ddp_model(xs[h:]) - ys[h:]) ** 2).mean() / 2).backward()
        else:
            ((ddp_model(xs) - ys) ** 2).mean().backward()
        opt.step()
        if mode == "zero":
            base_opt.zero_grad()
            ((base_ddp(xs) - ys) ** 2).mean().backward()
            base_opt.step()
        else:
            ref_opt.zero_grad()
            ((ref(x) - y) ** 2).mean().backward()
            ref_opt.step()
    if mode == "view":  # the gradients live in the buckets now
        assert all(p.grad._storage is ddp_model._where[id(p)][0].buf._storage
                   for p in model.parameters())
    _same_on_every_rank(ddp_model, f"ddp {mode}")
    want = _flat(base if mode == "zero" else ref)
    gap = np.abs(_flat(model) - want).max()
    assert gap < 1e-5, f"ddp {mode} on {device}: {gap} from the reference"
    if r == 0:
        print(f"ddp {mode} {device}: max gap {gap:.2e}")


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.a = nn.Linear(4, 1)
        self.b = nn.Linear(4, 1)  # used by rank 0 only

    def forward(self, x: rc.Tensor, use_b: bool) -> rc.Tensor:
        h = self.body(x)
        return self.a(h) + (self.b(h) if use_b else 0)


def unused() -> None:
    r = dist.get_rank()
    rc.manual_seed(0)
    m = DDP(TwoHeads(), find_unused_parameters=True)
    for _ in range(2):
        m.module.zero_grad()
        m(rc.ones(2, 4), use_b=(r == 0)).sum().backward()
        assert m.module.b.weight.grad is not None  # used on rank 0: reduced everywhere
    _same_grads = rc.cat([p.grad.reshape(-1) for p in m.parameters()])
    every = [rc.empty_like(_same_grads) for _ in range(dist.get_world_size())]
    dist.all_gather(every, _same_grads)
    assert all(bool((e == _same_grads).all()) for e in every)
    # without find_unused_parameters the next forward names the missing parameters
    m2 = DDP(TwoHeads())
    m2(rc.ones(2, 4), use_b=False).sum().backward()
    try:
        m2(rc.ones(2, 4), use_b=False)
    except RuntimeError as exc:
        assert "find_unused_parameters=True" in str(exc) and "b.weight" in str(exc), exc
    else:
        raise AssertionError("a forward after an incomplete reduction must raise")


def sampler() -> None:
    r, n = dist.get_rank(), dist.get_world_size()
    s = rc.utils.data.DistributedSampler(list(range(11)), shuffle=False)
    assert (s.num_replicas, s.rank) == (n, r)
    padded = list(range(11)) + list(range(11))[:(-11) % n]  # PyTorch pads with the start
    assert list(s) == padded[r::n], (list(s), padded[r::n])


def fault(mode: str) -> None:
    r = dist.get_rank()
    if mode == "group_hang":  # the world waits long; this group 2 s
        g = dist.new_group([0, 1], timeout=2)
        if r == 1:
            time.sleep(120)
        dist.all_reduce(rc.ones(3), group=g)
    if r == 1:
        if mode == "exit":
            sys.exit(3)
        if mode == "raise":
            raise ValueError("rank 1 fails on purpose")
        if mode == "systemexit":
            raise SystemExit(4)
        if mode == "hang":
            time.sleep(120)
        if mode == "mismatch":
            dist.all_reduce(rc.ones(5))
        if mode == "leave":  # an off-by-one: rank 1's loop ends a step early
            sys.exit(0)
        if mode == "leave_end":  # the script simply ends on rank 1
            raise _EndOfScript
    if mode == "later":  # rank 0 works on alone after rank 1 ended: nothing aborts
        if r == 1:
            raise _EndOfScript
        time.sleep(8)
        print("OK rank 0 finished alone", flush=True)
        raise _EndOfScript
    dist.all_reduce(rc.ones(3))


class _EndOfScript(Exception):
    """Ends this rank's program the way the end of a script does (caught in main)."""


def objects() -> None:
    """The object collectives: pickled Python objects, per rank."""
    r, n = dist.get_rank(), dist.get_world_size()
    mine = {"rank": r, "data": list(range(r * 100)), "text": "x" * r}
    every = [None] * n
    dist.all_gather_object(every, mine)
    assert every == [{"rank": k, "data": list(range(k * 100)), "text": "x" * k} for k in range(n)]
    got = [None] * n if r == n - 1 else None
    dist.gather_object(("from", r), got, dst=n - 1)
    if r == n - 1:
        assert got == [("from", k) for k in range(n)], got
    box = [{"config": [1, 2.5]}, None] if r == 0 else [None, None]
    dist.broadcast_object_list(box, src=0)
    assert box == [{"config": [1, 2.5]}, None], box
    out = [None]
    dist.scatter_object_list(out, [f"part {k}" for k in range(n)] if r == 1 else None, src=1)
    assert out == [f"part {r}"], out


def zero2(device: str, clip: str) -> None:
    """ZeRO stage 2 (no DDP; the optimizer reduce-scatters the gradients) trains
    as DDP + AdamW does, with clipping by the total norm of the reduced gradients
    when ``clip`` is "clip"; between steps a rank keeps its share's gradients only."""
    r, n = dist.get_rank(), dist.get_world_size()
    rc.manual_seed(200 + r)  # every rank initialises differently: stage 2 broadcasts
    model = _model().to(device)
    opt = dist.optim.ZeroRedundancyOptimizer(model.parameters(), rc.optim.AdamW, lr=0.01,
                                             stage=2)
    _same_on_every_rank(model, "zero2 after construction")
    base = _model().to(device)
    base.load_state_dict(model.state_dict())
    # a frozen parameter (never a gradient: AdamW's weight decay must not move it)
    model[2].bias.requires_grad_(False)
    base[2].bias.requires_grad_(False)
    frozen = model[2].bias.detach().clone()
    base_ddp = DDP(base)
    base_opt = rc.optim.AdamW(base_ddp.parameters(), lr=0.01)
    steps, per = 5, 4
    X, Y = _batches(steps, per, n)
    for s in range(steps):
        x = rc.tensor(X[s], device=device)[r * per:(r + 1) * per]
        y = rc.tensor(Y[s], device=device)[r * per:(r + 1) * per]
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        if clip == "clip":
            got = opt.clip_grad_norm_(0.05)
        opt.step()
        base_opt.zero_grad()
        ((base_ddp(x) - y) ** 2).mean().backward()
        if clip == "clip":
            want = nn.utils.clip_grad_norm_(base.parameters(), 0.05)
            assert abs(float(got) - float(want)) <= 1e-5 * float(want), (float(got), float(want))
        base_opt.step()
        held = [p for p in model.parameters() if p.grad is not None]
        assert held and all(opt.owner[id(p)] == r for p in held), "a foreign share's gradient kept"
    _same_on_every_rank(model, "zero2")
    assert model[2].bias.grad is None and np.array_equal(model[2].bias.numpy(), frozen.numpy())
    gap = np.abs(_flat(model) - _flat(base)).max()
    assert gap < 1e-5, f"zero2 {clip} on {device}: {gap} from DDP"
    if r == 0:
        print(f"zero2 {clip} {device}: max gap {gap:.2e}")


def zero_checkpoint(path: str, stage: str = "1") -> None:
    """ZeRO's consolidate_state_dict / state_dict / load_state_dict: training on
    from a checkpoint equals training on without one."""
    r, n = dist.get_rank(), dist.get_world_size()
    rc.manual_seed(5)
    a, b = _model(), _model()
    b.load_state_dict(a.state_dict())
    za = dist.optim.ZeroRedundancyOptimizer(a.parameters(), rc.optim.AdamW, lr=0.01,
                                            stage=int(stage))
    X, Y = _batches(6, 4, 1)

    def step(model, opt, s):
        opt.zero_grad()
        ((model(rc.tensor(X[s])) - rc.tensor(Y[s])) ** 2).mean().backward()
        opt.step()

    for s in range(3):
        step(a, za, s)
    za.consolidate_state_dict(to=n - 1)
    if r == n - 1:
        rc.save({"model": a.state_dict(), "optim": za.state_dict()}, path)
    else:
        try:
            za.state_dict()
        except RuntimeError as e:
            assert "consolidate_state_dict" in str(e)
        else:
            raise AssertionError("state_dict() on a rank that holds a share only")
    dist.barrier()
    ck = rc.load(path)
    b.load_state_dict(ck["model"])
    zb = dist.optim.ZeroRedundancyOptimizer(b.parameters(), rc.optim.AdamW, lr=0.5,
                                            stage=int(stage))
    zb.load_state_dict(ck["optim"])
    assert zb.param_groups[0]["lr"] == 0.01 or not zb.param_groups
    for s in range(3, 6):
        step(a, za, s)
        step(b, zb, s)
    assert np.array_equal(_flat(a), _flat(b)), np.abs(_flat(a) - _flat(b)).max()
    _same_on_every_rank(b, "zero from a checkpoint")


def main() -> None:
    scenario, args = sys.argv[1], sys.argv[2:]
    timeout = float(args[1]) if scenario == "fault" and len(args) > 1 else None
    # RTX_TEST_COMM_BACKEND: run the scenario on another backend (sim: mpi with a
    # modelled network), which must give the same results
    dist.init_process_group(os.environ.get("RTX_TEST_COMM_BACKEND") or None, timeout=timeout)
    if scenario == "ddp":
        ddp(args[0], args[1])
    elif scenario == "unused":
        unused()
        sampler()
    elif scenario == "fault":
        try:
            fault(args[0])
        except _EndOfScript:
            return  # the end of the script, with the process group alive
    elif scenario == "objects":
        objects()
    elif scenario == "zero_checkpoint":
        zero_checkpoint(*args)
    elif scenario == "zero2":
        zero2(*args)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    dist.barrier()
    if dist.get_rank() == 0:
        print(f"OK {scenario} {' '.join(args)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
