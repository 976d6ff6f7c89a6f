"""rtxcore.distributed: collectives, DistributedDataParallel, ZeRO and faults,
run for real under MPI (the mpich wheel's mpiexec, through
``python -m rtxcore.distributed.run``) on 2 and 3 processes; and the
world of one process no launcher started."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.distributed as dist
from rtxcore.distributed import run as launcher

WORKER = str(Path(__file__).parent / "distributed" / "worker.py")


def launch(n: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", str(n), WORKER,
                           *args], capture_output=True, text=True, timeout=timeout)


def ok(res: subprocess.CompletedProcess, what: str) -> None:
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    assert f"OK {what}" in res.stdout, res.stdout + res.stderr


def test_mpi_is_installed_for_the_tests():
    # the test setup installs rtxcore[mpi]: these tests must run, not skip
    assert dist.is_mpi_available()
    assert launcher.find_mpiexec() is not None


@pytest.mark.parametrize("n", [2, 3])
def test_every_collective_on_cpu_and_opencl_matches_numpy(n):
    # the conformance check a third-party communication backend runs too
    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", str(n), "-m",
                          "rtxcore.distributed.conformance", "--backend", "mpi",
                          "--devices", "cpu,opencl"], capture_output=True, text=True, timeout=240)
    ok(res, f"collectives cpu,opencl on mpi, {n} ranks")


def test_collectives_with_all_reduces_in_pieces():
    # the conformance's 600 KB all-reduces in 64 KB pieces (the smallest allowed),
    # blocking and not
    import os

    env = dict(os.environ, RTX_MPI_ALLREDUCE_CHUNK="65536")
    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", "2", "-m",
                          "rtxcore.distributed.conformance", "--backend", "mpi",
                          "--devices", "cpu"], capture_output=True, text=True, timeout=240, env=env)
    ok(res, "collectives cpu on mpi, 2 ranks")
    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", "2", WORKER,
                          "ddp", "cpu", "plain"], capture_output=True, text=True, timeout=240,
                         env=dict(env, RTX_DDP_PROGRESS="1"))
    ok(res, "ddp cpu plain")


@pytest.mark.parametrize("mode", ["plain", "no_sync", "zero", "view"])
@pytest.mark.parametrize("n", [2, 3])
def test_ddp_matches_one_process_on_the_whole_batch(n, mode):
    res = launch(n, "ddp", "cpu", mode)
    ok(res, f"ddp cpu {mode}")


@pytest.mark.parametrize("n", [2, 3])
def test_object_collectives(n):
    ok(launch(n, "objects"), "objects")


@pytest.mark.parametrize("n", [2, 3])
def test_zero_checkpoint_consolidates_and_reloads(n, tmp_path):
    path = str(tmp_path / "zero.rtx")
    ok(launch(n, "zero_checkpoint", path), f"zero_checkpoint {path}")
    path2 = str(tmp_path / "zero2.rtx")
    ok(launch(n, "zero_checkpoint", path2, "2"), f"zero_checkpoint {path2} 2")


@pytest.mark.parametrize("clip", ["plain", "clip"])
@pytest.mark.parametrize("n", [2, 3])
def test_zero_stage_2_trains_as_ddp(n, clip):
    ok(launch(n, "zero2", "cpu", clip), f"zero2 cpu {clip}")


def test_ddp_on_opencl():
    ok(launch(2, "ddp", "opencl", "plain"), "ddp opencl plain")


def test_ddp_unused_parameters():
    ok(launch(2, "unused"), "unused")


@pytest.mark.parametrize("mode,code,says", [
    ("exit", 3, "exited with status 3"),
    ("raise", 1, "ValueError: rank 1 fails on purpose"),
    ("systemexit", 4, "exited with status 4"),
    ("hang", 1, "did not finish within the process group's timeout (3 s)"),
    ("group_hang", 1, "did not finish within the process group's timeout (2 s)"),
])
def test_a_failing_rank_ends_the_job_naming_it(mode, code, says):
    t0 = time.monotonic()
    # (the world's timeout: 3 s, but 600 s where a new_group sets its own)
    res = launch(2, "fault", mode, "600" if mode == "group_hang" else "3", timeout=60)
    took = time.monotonic() - t0
    assert res.returncode == code, (res.returncode, res.stderr)
    assert says in res.stderr, res.stderr
    assert "rank 1" in res.stderr or mode.endswith("hang"), res.stderr
    assert took < 30, f"{mode}: the job took {took:.1f} s to end"


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("mode", ["leave", "leave_end"])
def test_a_rank_that_leaves_early_ends_the_job_promptly_naming_it(mode, n):
    import re

    # the world's timeout is 10 minutes: the job must end long before
    t0 = time.monotonic()
    res = launch(n, "fault", mode, "600", timeout=120)
    took = time.monotonic() - t0
    assert res.returncode == 1, (res.returncode, res.stderr)
    assert re.search(r"rank [02]: all_reduce", res.stderr), res.stderr
    assert "can't finish: rank 1 ended its program without destroy_process_group()" in res.stderr
    assert took < 60, f"{mode}: the job took {took:.1f} s to end"


def test_a_rank_may_work_on_alone_after_the_others_ended():
    res = launch(2, "fault", "later", "600", timeout=120)
    assert res.returncode == 0, res.stderr
    assert "OK rank 0 finished alone" in res.stdout, (res.stdout, res.stderr)
    assert "aborting" not in res.stderr


def test_plain_mpiexec_and_sys_exit_abort_too():
    mpiexec = launcher.find_mpiexec()
    res = subprocess.run([mpiexec, "-n", "2", sys.executable, WORKER, "fault", "exit"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    assert "rank 1: exited with status 3" in res.stderr


def test_debug_mode_names_mismatched_collectives():
    import os

    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", "2", WORKER,
                          "fault", "mismatch", "20"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "RTX_DISTRIBUTED_DEBUG": "1"})
    assert res.returncode == 1
    assert "ranks disagree on the collective they call" in res.stderr
    assert "all_reduce(float32[3], sum)" in res.stderr and "all_reduce(float32[5], sum)" in res.stderr


# -- without a launcher ---------------------------------------------------------------

@pytest.fixture
def world_of_one():
    dist.init_process_group()
    yield
    dist.destroy_process_group()


def test_a_world_of_one_without_launcher(world_of_one):
    assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_rank() == 0
    assert dist.get_backend() == "self"
    x = rc.arange(4.0)
    dist.all_reduce(x, op=dist.ReduceOp.AVG)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    out = rc.empty(4)
    dist.all_gather_into_tensor(out, x)
    assert out.tolist() == x.tolist()
    y = rc.zeros(2, 2, device="opencl")
    lst = [rc.empty(2, 2, device="opencl")]
    dist.all_gather(lst, y + 1)
    assert lst[0].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert dist.broadcast(x, src=0, async_op=True).wait()
    model = rc.nn.parallel.DistributedDataParallel(rc.nn.Linear(3, 2))
    model(rc.ones(4, 3)).sum().backward()
    assert model.module.weight.grad.shape == (2, 3)
    with pytest.raises(ValueError, match="can't send to or from itself"):
        dist.send(x, dst=0)
    sampler = rc.utils.data.DistributedSampler(list(range(10)))  # the group's world and rank
    assert (sampler.num_replicas, sampler.rank, len(sampler)) == (1, 0, 10)


def test_errors_name_what_is_wrong(world_of_one):
    with pytest.raises(TypeError, match="must be an rtxcore Tensor"):
        dist.all_reduce(np.ones(3))
    with pytest.raises(ValueError, match="output has 3 elements, expected world size 1"):
        dist.all_gather_into_tensor(rc.empty(3), rc.ones(4))
    with pytest.raises(ValueError, match="object_list must be a list of world size 1 entries, "
                                         "got a list of 2"):
        dist.all_gather_object([None, None], 1)
    with pytest.raises(ValueError, match="dst=3 is not a rank"):
        dist.gather_object(1, [None], dst=3)
    with pytest.raises(TypeError, match="object_list must be a list, got tuple"):
        dist.broadcast_object_list((1,))
    z = dist.optim.ZeroRedundancyOptimizer(rc.nn.Linear(2, 2).parameters(), rc.optim.SGD, lr=0.1)
    with pytest.raises(RuntimeError, match="call consolidate_state_dict"):
        z.state_dict()
    with pytest.raises(ValueError, match="of 3 parameters, this optimizer has 2"):
        z.load_state_dict({"state": {}, "param_groups": [{"lr": 0.1, "params": [0, 1, 2]}]})
    with pytest.raises(TypeError, match="same dtype"):
        dist.all_gather_into_tensor(rc.empty(4, dtype=rc.int64), rc.ones(4))
    with pytest.raises(TypeError, match="BAND needs an integer or bool tensor"):
        dist.all_reduce(rc.ones(2), op=dist.ReduceOp.BAND)
    with pytest.raises(ValueError, match="src=3 is not a rank"):
        dist.broadcast(rc.ones(2), src=3)
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group()


def test_before_init_and_bad_backends():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(RuntimeError, match="call init_process_group"):
        dist.all_reduce(rc.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        rc.nn.parallel.DistributedDataParallel(rc.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="is PyTorch's"):
        dist.init_process_group("ucc")
    with pytest.raises(ValueError, match="unknown communication backend 'fabric'"):
        dist.init_process_group("fabric")
    assert not dist.is_initialized()


def test_launcher_without_mpiexec_says_how_to_install(monkeypatch, capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    monkeypatch.setattr(launcher, "find_mpiexec", lambda: None)
    assert launcher.main(["-n", "2", str(script)]) == 127
    err = capsys.readouterr().err
    assert "no mpiexec found" in err and "rtxcore[mpi]" in err
    assert launcher.main(["-n", "2", str(tmp_path / "missing.py")]) == 2
    assert "no such script" in capsys.readouterr().err


def test_comm_backend_plugin_is_found_through_the_hook():
    from rtxcore.dispatch import hookimpl
    from rtxcore.distributed.backend import CommBackend, SelfCommunicator

    class Fabric(CommBackend):
        name = "fabric"
        native_devices = frozenset({"cpu"})

        def world(self, timeout):
            return SelfCommunicator()

    class Plugin:
        @hookimpl
        def rtx_comm_backends(self):
            return [Fabric]

    name = rc.register_backend(Plugin(), name="fabric-plugin")
    try:
        dist.init_process_group("fabric")
        assert dist.get_backend() == "fabric"
        x = rc.ones(2)
        dist.all_reduce(x)
        assert x.tolist() == [1.0, 1.0]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        rc.unregister_backend(name)


def test_post_accumulate_grad_hook_sees_the_updated_grad():
    p = rc.ones(3, requires_grad=True)
    seen = []
    h = p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    (p * 2).sum().backward()
    (p * 3).sum().backward()
    assert seen == [[2.0] * 3, [5.0] * 3]
    h.remove()
    (p * 3).sum().backward()
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="non-leaf"):
        (p * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_nccl_backend_is_import_safe_and_says_why_it_cannot_run():
    from rtxcore.distributed.backend import comm_backends

    nccl = comm_backends()["nccl"]  # from rtx_cuda's rtx_comm_backends hook
    # cuda tensors through NCCL; host arrays (cpu, staged opencl) through MPI on the same ranks
    assert nccl.native_devices == frozenset({"cuda", "cpu"}) and nccl.host_staging
    reason = nccl.unavailable_reason()
    if reason is None:  # a GPU machine with NCCL: nothing to refuse
        assert dist.is_nccl_available()
        return
    assert not dist.is_nccl_available()
    with pytest.raises(dist.CommBackendUnavailable, match="'nccl' is unavailable: "):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_the_digits_example_trains_on_two_ranks(tmp_path):
    ckpt = tmp_path / "digits.safetensors"
    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "-n", "2",
                          str(Path(__file__).parents[1] / "examples" / "train_digits.py"),
                          "--distributed", "--no-progress", "--max-steps", "40",
                          "--checkpoint", str(ckpt)], capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "data parallel on 2 ranks" in out
    assert out.count("test accuracy:") == 1  # rank 0 speaks, rank 1 is silent
    assert "reloaded: accuracy identical" in out
    assert ckpt.exists()
    state = rc.load(ckpt)
    assert all(not k.startswith("module.") for k in state)  # the plain model's keys
