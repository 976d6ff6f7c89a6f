"""Scripts written for ``torchrun`` and ``init_process_group("gloo")`` run
unchanged under ``python -m rtxcore.distributed.run``: torchrun's flags, its
environment in every rank, gloo served by MPI (or the world of one process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import rtxcore.distributed as dist
from rtxcore.distributed import run as launcher

# a DDP tutorial script as written for torchrun: env ranks, "gloo", a shard each
SCRIPT = textwrap.dedent("""
    import os
    import rtxcore as torch
    import rtxcore.distributed as dist
    import rtxcore.nn as nn
    from rtxcore.nn.parallel import DistributedDataParallel as DDP

    def main():
        local_rank = int(os.environ["LOCAL_RANK"])
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo")
        assert dist.get_rank() == rank and dist.get_world_size() == world
        assert local_rank == rank and int(os.environ["LOCAL_WORLD_SIZE"]) == world
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        X, Y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
        per = 16 // world
        for _ in range(5):
            opt.zero_grad()
            part = slice(rank * per, (rank + 1) * per)
            nn.functional.mse_loss(ddp(X[part]), Y[part]).backward()
            opt.step()
        if rank == 0:
            print("WEIGHTS", " ".join(repr(v) for v in model[0].weight.flatten().tolist()))
            print("ENV", os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"],
                  os.environ["GROUP_RANK"])
            print("THREADS", torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"))
        dist.destroy_process_group()

    if __name__ == "__main__":
        main()
""")


def _values(out: str, tag: str) -> list[str]:
    return next(line.split()[1:] for line in out.splitlines() if line.startswith(tag))


def test_a_torchrun_ddp_script_runs_unchanged_and_equals_one_process(tmp_path):
    script = tmp_path / "ddp_train.py"
    script.write_text(SCRIPT)
    two = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "--standalone",
                          "--nproc_per_node=2", "--master_port", "29555", str(script)],
                         capture_output=True, text=True, timeout=240)
    assert two.returncode == 0, two.stdout + two.stderr
    assert "backend 'gloo' (PyTorch's) is served by 'mpi'" in two.stderr
    assert two.stderr.count("served by") == 1  # said once, by rank 0
    assert _values(two.stdout, "ENV") == ["127.0.0.1", "29555", "0"]
    share = str(max(1, launcher._cpus() // 2))  # each rank its share of the cores
    assert _values(two.stdout, "THREADS") == [share, share]
    # one process on the whole batch, as torchrun --nproc_per_node=1 would run it
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1",
           "GROUP_RANK": "0"}
    one = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "served by 'self'" in one.stderr
    w2 = [float(v) for v in _values(two.stdout, "WEIGHTS")]
    w1 = [float(v) for v in _values(one.stdout, "WEIGHTS")]
    assert len(w1) == 32 and w1 != [0.0] * 32
    assert max(abs(a - b) for a, b in zip(w1, w2)) < 1e-6


@pytest.mark.parametrize("env, cpus, share", [
    ({"LOCAL_WORLD_SIZE": "2"}, 8, 4), ({"LOCAL_WORLD_SIZE": "3"}, 2, 1),
    ({"LOCAL_WORLD_SIZE": "1"}, 8, None), ({}, 8, None),
    ({"LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "3"}, 8, None),  # the user's stays
    ({"LOCAL_WORLD_SIZE": "x"}, 8, None)])
def test_each_process_of_a_node_gets_its_share_of_the_cores(env, cpus, share):
    assert launcher.thread_share(env, cpus) == share


@pytest.mark.parametrize("opts, expected, env", [
    (["--nproc_per_node=3"], ["-n", "3"], {}),
    (["--nproc-per-node", "2", "--standalone", "--nnodes=1"], ["-n", "2"], {}),
    (["--nproc_per_node", "2", "--master_addr", "10.0.0.1", "--master-port=1234"], ["-n", "2"],
     {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"}),
    (["--nproc_per_node=2", "--rdzv_backend=c10d", "--rdzv-endpoint", "localhost:0",
      "--max_restarts=0"], ["-n", "2"], {}),
    (["-n", "2", "-hosts", "a,b"], ["-n", "2", "-hosts", "a,b"], {}),  # mpiexec's own, as they are
    (["--nproc_per_node=auto"], ["-n", str(launcher._cpus())], {}),
])
def test_torchrun_flags_become_mpiexec_options(opts, expected, env):
    got_env: dict[str, str] = {}
    assert launcher.torchrun_options(opts, got_env) == expected
    assert got_env == env


@pytest.mark.parametrize("opts, message", [
    (["--nnodes=2"], "one node's processes"),
    (["--node_rank", "1"], "one node only"),
    (["--nproc_per_node=0"], "positive number"),
    (["--nproc_per_node=gpu"], "positive number"),
    (["--master_port", "http"], "port number"),
    (["--nproc_per_node"], "needs a value"),
])
def test_torchrun_flags_that_cannot_run_here_are_refused(opts, message):
    with pytest.raises(ValueError, match=message):
        launcher.torchrun_options(opts, {})


def test_the_launcher_says_why_a_flag_is_refused(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('never')\n")
    res = subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", "--nnodes=2",
                          "--nproc_per_node=2", str(script)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "--nnodes 2" in res.stderr and "never" not in res.stdout


@pytest.mark.parametrize("env, expected", [
    ({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
     {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}),
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "3", "RANK": "9"},
     {"RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "3"}),
    ({}, {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}),
])
def test_each_rank_gets_torchruns_environment(env, expected):
    got = launcher.torchrun_environment(env)
    assert {k: got[k] for k in expected} == expected
    assert got["MASTER_ADDR"] == "127.0.0.1" and got["MASTER_PORT"] == "29500"
    assert got["ROLE_RANK"] == expected["RANK"] and got["GROUP_RANK"] == "0"
    kept = launcher.torchrun_environment({**env, "MASTER_ADDR": "h", "MASTER_PORT": "7"})
    assert (kept["MASTER_ADDR"], kept["MASTER_PORT"]) == ("h", "7")


def test_gloo_without_a_launcher_is_the_world_of_one_process(capsys):
    dist.init_process_group("gloo")
    try:
        assert dist.get_world_size() == 1 and dist.get_backend() == "self"
    finally:
        dist.destroy_process_group()
