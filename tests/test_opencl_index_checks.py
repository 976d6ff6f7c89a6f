"""rtx_opencl checks indices on the device (``async_errors``): a gather, an
embedding or a loss (binary cross-entropy's input range too) reads nothing back
mid-step, a bad index raises IndexError
at the next read naming it, and meanwhile the index kernels (gather, index,
scatter_add) clamp it: nothing outside the tensor is read or written, whatever
the index (the neighbours of a view inside a larger buffer stay untouched)."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F

R = pytest.importorskip("rtx_opencl.runtime")
pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")

DEV = "opencl"


def _count_reads(monkeypatch):
    reads = []
    table = rc.tensor([0.0], device=DEV)._device.kernels
    real = table["to_host"]
    monkeypatch.setitem(table, "to_host", lambda x: reads.append(x.shape) or real(x))
    return reads


def _ops():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    w = rng.standard_normal((10, 3)).astype(np.float32)
    logits = rng.standard_normal((4, 5)).astype(np.float32)
    g_idx = rng.integers(0, 6, (3, 4))
    return {
        "index": lambda d: rc.tensor(x, device=d)[rc.tensor([0, 5, -1, 2], device=d)],
        "gather": lambda d: rc.tensor(x, device=d).gather(0, rc.tensor(g_idx, device=d)),
        "scatter_add": lambda d: rc.tensor(x, device=d).scatter_add(
            0, rc.tensor(g_idx, device=d), rc.ones(3, 4, device=d)),
        "embedding": lambda d: F.embedding(rc.tensor([[1, 9], [0, -2]], device=d),
                                           rc.tensor(w, device=d)),
        "cross_entropy": lambda d: F.cross_entropy(rc.tensor(logits, device=d),
                                                   rc.tensor([1, 0, 4, 2], device=d)),
        # (not an index: its inputs' range, checked the same way)
        "binary_cross_entropy": lambda d: F.binary_cross_entropy(
            rc.tensor(logits, device=d).sigmoid(), rc.tensor(logits > 0, device=d).float()),
    }


@pytest.mark.parametrize("op", list(_ops()))
def test_no_read_back_per_op_and_the_cpu_values(monkeypatch, op):
    want = _ops()[op]("cpu").numpy()
    reads = _count_reads(monkeypatch)
    got = _ops()[op](DEV)
    assert reads == [], f"{op} read {len(reads)} tensors back to the host"
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-6, atol=1e-6)


BAD = [4, -5, 7, 2 ** 40, -(2 ** 40), 2 ** 62]  # 4, -5: inside the buffer, outside x


@pytest.mark.parametrize("bad", BAD)
def test_gather_and_index_read_nothing_outside_and_raise_later(bad):
    # x is the middle rows of a larger buffer: a read past x would see the 99s
    big = rc.tensor(np.full((10, 4), 99.0, np.float32), device=DEV)
    big[3:7] = rc.tensor(np.arange(16.0, dtype=np.float32).reshape(4, 4), device=DEV)
    x = big[3:7]
    g = x.gather(0, rc.tensor([[0, bad, 1, 2]], device=DEV))
    y = x[rc.tensor([bad, 1], device=DEV)]
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        g.cpu()
    # reported once; what the kernels read meanwhile came from x alone
    vals = np.concatenate([g.cpu().numpy().ravel(), y.cpu().numpy().ravel()])
    assert not (vals == 99.0).any(), vals


@pytest.mark.parametrize("bad", BAD)
def test_scatter_add_writes_nothing_outside_and_raises_later(bad):
    big = rc.zeros(10, 3, device=DEV)
    out = big[3:7]
    out.scatter_add_(0, rc.tensor([[0, bad, 3]], device=DEV), rc.ones(1, 3, device=DEV))
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        rc.zeros(1, device=DEV).item()
    b = big.cpu().numpy()
    assert not b[:3].any() and not b[7:].any(), b
    assert b.sum() == 3.0  # each add landed somewhere inside out


def test_an_embedding_and_a_loss_name_their_bad_index_at_the_next_read():
    F.embedding(rc.tensor([4], device=DEV), rc.ones(3, 2, device=DEV))
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 3"):
        rc.zeros(1, device=DEV).item()
    loss = F.cross_entropy(rc.zeros(2, 3, device=DEV), rc.tensor([0, 5], device=DEV))
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds \(input has 3 classes"):
        loss.item()
    # the device is usable again
    assert rc.arange(4.0, device=DEV).sum().item() == 6.0


def test_binary_cross_entropy_names_an_input_outside_0_1_at_the_next_read():
    loss = F.binary_cross_entropy(rc.tensor([0.5, 1.5], device=DEV), rc.tensor([0.0, 1.0], device=DEV))
    with pytest.raises(RuntimeError, match=r"between 0 and 1 \(got values in \[0.5, 1.5\]\)"):
        loss.item()


def test_small_writes_do_not_wait_for_the_queue_and_land_in_order(monkeypatch):
    # a small host-to-device write is queued from a private copy: changing the
    # source array right after cannot change what arrives, and kernels queued
    # before and after see the data in queue order
    from rtx_opencl import runtime

    waits = []
    real = runtime.cl.enqueue_copy

    def spy(queue, dst, src, **kw):
        waits.append(kw.get("is_blocking", True) and isinstance(dst, runtime.cl.Buffer))
        return real(queue, dst, src, **kw)

    monkeypatch.setattr(runtime.cl, "enqueue_copy", spy)
    a = rc.ones(1 << 16, device=DEV)
    total = a * 2.0  # queued before the write
    src = np.arange(8, dtype=np.float32)
    t = rc.tensor(src, device=DEV)
    src[:] = -1  # after the call: the device already has its own copy
    got = (t + total[:8]).cpu().numpy()
    np.testing.assert_array_equal(got, np.arange(8, dtype=np.float32) + 2.0)
    assert waits and not any(waits), waits  # no blocking host-to-device write
    assert runtime.device(0).pending_writes == []  # the read drained them


def test_an_index_into_a_dim_of_size_0_raises_at_once():
    # no index fits: the core says so before any kernel runs (a clamp has no
    # element to hold the index to)
    empty = rc.zeros(0, 3, device=DEV)
    idx = rc.tensor([0, 0], device=DEV)
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 0"):
        empty.gather(0, rc.tensor([[0, 0, 0]], device=DEV))
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 0"):
        empty[idx]
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 0"):
        empty[idx] = 7.0
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 0"):
        rc.zeros(10, 3, device=DEV)[3:3].scatter_add_(0, rc.tensor([[0, 0, 0]], device=DEV),
                                                      rc.ones(1, 3, device=DEV))
    w = rc.zeros(0, 3, device=DEV, requires_grad=True)
    with pytest.raises(IndexError, match="out of bounds for dimension 0 with size 0"):
        F.embedding(idx, w)


def test_a_read_names_how_many_checks_failed():
    # the first failure raised, the count of the others in its message (their
    # results are not valid either); the device is usable after
    x = rc.arange(6.0, device=DEV)
    g = x.gather(0, rc.tensor([1, 7], device=DEV))
    x[rc.tensor([9], device=DEV)]
    with pytest.raises(IndexError, match=r"index 7 is out of bounds(.|\n)*1 more check"):
        g.cpu()
    assert x.sum().item() == 15.0


def test_an_index_changed_before_the_read_still_raises_and_says_so():
    x = rc.arange(4.0, device=DEV)
    idx = rc.tensor([1, 7], device=DEV)
    x[idx]
    idx.fill_(2)  # the bad value is gone by the time the flag is read
    with pytest.raises(IndexError, match="changed since"):
        rc.zeros(1, device=DEV).item()
    p = rc.tensor([0.5, 1.5], device=DEV)
    F.binary_cross_entropy(p, rc.tensor([0.0, 1.0], device=DEV))
    p.clamp_(0.0, 1.0)
    with pytest.raises(RuntimeError, match="changed since"):
        rc.zeros(1, device=DEV).item()
