"""Index bounds checks on a device that queues its work (``async_errors``, as
rtx_cuda declares): no host read per op, the IndexError at the next read.

The device here is cpu with the flag switched on (and its kernel table rebuilt),
so the core's deferred path runs on every machine; rtx_cuda takes the same path
on a GPU."""

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.device import Device


class _Reads(list):
    before: dict


@pytest.fixture
def async_cpu(monkeypatch):
    """cpu as an async_errors device, counting the host reads ops make; also the
    ops' results computed before the switch (the checks read on the host)."""
    dev = Device("cpu")
    dev._resolve()
    before = {op: f().numpy().copy() for op, f in _ops().items()}
    monkeypatch.setattr(type(dev.backend), "async_errors", True, raising=False)
    dev._resolve()
    reads = _Reads()
    checked = dev.kernels["to_host"]

    def counting(x):
        reads.append(x.shape)
        return checked(x)

    dev.kernels["to_host"] = counting
    # NumPy's indexing raises on a bad index; a queued device's kernels must not
    # fault, and CuPy's wrap indices around: so do these
    k = dict(dev.kernels)

    def wrap(i, n):
        return np.mod(i, n) if isinstance(i, np.ndarray) and i.dtype.kind in "iu" else i

    dev.kernels["index"] = lambda out, x, ix: k["index"](
        out, x, tuple(wrap(i, x.shape[a]) for a, i in enumerate(ix)))
    dev.kernels["gather"] = lambda out, x, d, ix: k["gather"](out, x, d, wrap(ix, x.shape[d]))
    reads.before = before
    yield reads
    monkeypatch.undo()
    dev._resolve()


def _ops():
    rng = np.random.default_rng(0)
    x = rc.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    idx = rc.tensor([0, 5, -1, 2])
    g_idx = rc.tensor(rng.integers(0, 6, (3, 4)))
    w = rc.tensor(rng.standard_normal((10, 3)).astype(np.float32))
    logits = rc.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    target = rc.tensor([1, 0, 4, 2])
    return {
        "index": lambda: x[idx],
        "index_put": lambda: x.clone().index_put_((idx,), rc.zeros(4)),
        "gather": lambda: x.gather(0, g_idx),
        "scatter_add": lambda: x.scatter_add(0, g_idx, rc.ones(3, 4)),
        "embedding": lambda: F.embedding(rc.tensor([[1, 9], [0, -2]]), w),
        "cross_entropy": lambda: F.cross_entropy(logits, target),
        "integer pow": lambda: rc.tensor([2, -3, 4]) ** rc.tensor([3, 2, -1]),
    }


@pytest.mark.parametrize("op", list(_ops()))
def test_no_host_read_per_op(async_cpu, op):
    got = _ops()[op]()
    assert async_cpu == [], f"{op} read {len(async_cpu)} tensors back to the host"
    np.testing.assert_allclose(got.numpy(), async_cpu.before[op], rtol=1e-6)


def test_the_same_ops_read_back_on_a_device_that_waits():
    """The counter above can see a read: the immediate path reads indices."""
    dev = Device("cpu")
    dev._resolve()
    reads = []
    k = dev.kernels["to_host"]
    dev.kernels["to_host"] = lambda x: (reads.append(1), k(x))[1]
    try:
        _ops()["gather"]()
        _ops()["embedding"]()
    finally:
        dev.kernels["to_host"] = k
    assert len(reads) >= 2


@pytest.mark.parametrize("read", ["numpy", "item", "synchronize", "print"])
def test_a_bad_index_raises_at_the_next_read(async_cpu, read):
    x = rc.arange(6.0)
    y = x[rc.tensor([1, 7])]  # queued: no error yet
    assert y.shape == (2,)
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0 with size 6"):
        if read == "numpy":
            y.numpy()
        elif read == "item":
            x.sum().item()  # any read, not only of the bad op's result
        elif read == "synchronize":
            _sync_cpu()
        else:
            str(y)
    # reported once; the device is usable again
    assert x.sum().item() == 15.0


def _sync_cpu():
    from rtxcore.ops.checks import raise_pending

    raise_pending(Device("cpu"))


@pytest.mark.parametrize("bad, message", [
    (lambda: rc.arange(6.0).reshape(2, 3).gather(1, rc.tensor([[0, 3]])),
     r"gather\(\): index 3 is out of bounds for dimension 1 with size 3"),
    (lambda: F.embedding(rc.tensor([4]), rc.ones(3, 2)),
     "index 4 is out of bounds for dimension 0 with size 3"),
    (lambda: F.cross_entropy(rc.zeros(2, 3), rc.tensor([0, 5])),
     r"Target 5 is out of bounds \(input has 3 classes"),
])
def test_each_check_names_the_bad_index_later(async_cpu, bad, message):
    bad()
    with pytest.raises(IndexError, match=message):
        rc.zeros(1).item()


def test_cross_entropy_still_ignores_the_ignore_index(async_cpu):
    logits = rc.tensor(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32))
    target = rc.tensor([1, -100, 3])
    got = F.cross_entropy(logits, target).item()
    lp = logits.numpy() - np.log(np.exp(logits.numpy()).sum(1, keepdims=True))
    assert got == pytest.approx(-(lp[0, 1] + lp[2, 3]) / 2, rel=1e-6)
