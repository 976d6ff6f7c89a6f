"""``rtxcore.multiprocessing`` as ``torch.multiprocessing`` is used: spawn with
ranks, failures reported with their traceback, tensors copied (not shared)."""

from __future__ import annotations

import multiprocessing

import pytest

import rtxcore as rc
import rtxcore.multiprocessing as mp


def _square_into(i, x, queue):
    # a child: gets a copy of x, changes it, sends back its rank's result
    x.mul_(10)
    queue.put((i, (x * (i + 1)).tolist()))


def _fail_on_one(i):
    if i == 1:
        raise ValueError("rank one broke")


def _exit_3(i):
    raise SystemExit(3)


def test_the_standard_library_names_are_there():
    assert mp.Process is multiprocessing.Process and mp.Queue is multiprocessing.Queue
    assert mp.cpu_count() == multiprocessing.cpu_count()
    assert set(multiprocessing.__all__) <= set(mp.__all__)
    import rtxcore

    assert rtxcore.multiprocessing is mp


def test_spawn_runs_each_rank_and_tensors_are_copies():
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    x = rc.tensor([1.0, 2.0])
    assert mp.spawn(_square_into, args=(x, queue), nprocs=2) is None
    got = dict(queue.get(timeout=60) for _ in range(2))
    assert got == {0: [10.0, 20.0], 1: [20.0, 40.0]}
    assert x.tolist() == [1.0, 2.0]  # the children's in-place change is not seen here


def test_a_failing_rank_raises_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException, match="rank one broke") as err:
        mp.spawn(_fail_on_one, nprocs=2)
    assert err.value.error_index == 1 and "ValueError" in str(err.value)
    with pytest.raises(mp.ProcessExitedException, match="exit code 3") as err:
        mp.spawn(_exit_3, nprocs=1)
    assert err.value.exit_code == 3


def test_join_false_returns_the_context():
    ctx = mp.spawn(_exit_3, nprocs=1, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 1
    with pytest.raises(mp.ProcessExitedException):
        while not ctx.join(timeout=30):
            pass


def test_bad_arguments_and_sharing_strategy():
    with pytest.raises(ValueError, match="nprocs"):
        mp.spawn(_exit_3, nprocs=0)
    with pytest.raises(ValueError, match="start method"):
        mp.spawn(_exit_3, start_method="fork")
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError, match="sharing strategy"):
        mp.set_sharing_strategy("shm")
