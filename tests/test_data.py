"""rtxcore.utils.data: datasets, DataLoader, collate, random_split."""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import assert_close
from rtxcore.utils.data import (ConcatDataset, DataLoader, Dataset, Subset, TensorDataset,
                                default_collate, default_convert, random_split)


@pytest.fixture(autouse=True)
def rng_state():
    """Leave the default generator as the test found it."""
    state = rc.get_rng_state()
    yield
    rc.set_rng_state(state)


def _dataset(device, n=23):
    x = rc.arange(n * 3, dtype=rc.float32, device=device).reshape(n, 3)
    y = rc.arange(n, device=device)
    return TensorDataset(x, y), x, y


class Squares(Dataset):
    """A plain map-style dataset of Python values (the per-sample path)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"i": i, "sq": float(i * i), "pair": (np.float32(i), [i, -i])}


def _labels(loader):
    return [int(v) for _, yb in loader for v in yb.tolist()]


# -- TensorDataset ---------------------------------------------------------------------------


def test_tensor_dataset_items(device):
    ds, _, _ = _dataset(device)
    assert len(ds) == 23
    xi, yi = ds[4]
    assert_close(xi, np.array([12.0, 13.0, 14.0], dtype=np.float32))
    assert yi.item() == 4 and xi.device == rc.device(device)
    xs, ys = ds[2:5]
    assert tuple(xs.shape) == (3, 3) and ys.tolist() == [2, 3, 4]


def test_tensor_dataset_errors(device):
    with pytest.raises(ValueError, match=r"size mismatch.*\[3, 4\]"):
        TensorDataset(rc.zeros(3, 2, device=device), rc.zeros(4, device=device))
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()
    with pytest.raises(TypeError, match="argument 1 is a list"):
        TensorDataset(rc.zeros(3, device=device), [1, 2, 3])
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(rc.tensor(1.0, device=device))


# -- batches -------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 4, 5, 23, 100])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_exactly_once_per_epoch(device, batch_size, shuffle):
    ds, _, _ = _dataset(device)
    loader = DataLoader(ds, batch_size=batch_size, shuffle=shuffle)
    for _ in range(2):
        seen = []
        sizes = []
        for xb, yb in loader:
            assert xb.device == rc.device(device) and yb.device == rc.device(device)
            assert xb.dtype is rc.float32 and yb.dtype is rc.int64
            # rows travel with their labels
            assert_close(xb, np.array([[3 * i, 3 * i + 1, 3 * i + 2] for i in yb.tolist()],
                                      dtype=np.float32).reshape(-1, 3))
            sizes.append(len(yb))
            seen += yb.tolist()
        assert sorted(seen) == list(range(23))
        if not shuffle:
            assert seen == list(range(23))
        assert sizes == [min(batch_size, 23 - s) for s in range(0, 23, batch_size)]
        assert len(loader) == len(sizes)


def test_sequential_order(device):
    ds, _, _ = _dataset(device)
    assert _labels(DataLoader(ds, batch_size=5)) == list(range(23))


def test_shuffle_changes_between_epochs_and_is_reproducible(device):
    ds, _, _ = _dataset(device, 50)
    g = rc.Generator().manual_seed(1234)
    loader = DataLoader(ds, batch_size=8, shuffle=True, generator=g)
    first, second = _labels(loader), _labels(loader)
    assert first != second and first != list(range(50))
    g.manual_seed(1234)
    assert _labels(loader) == first and _labels(loader) == second
    # the same seed gives the same order on every device
    cpu_ds, _, _ = _dataset("cpu", 50)
    assert _labels(DataLoader(cpu_ds, batch_size=8, shuffle=True,
                              generator=rc.Generator().manual_seed(1234))) == first


def test_global_seed_makes_shuffling_reproducible(device):
    ds, _, _ = _dataset(device, 40)
    loader = DataLoader(ds, batch_size=7, shuffle=True)
    rc.manual_seed(7)
    a = [_labels(loader) for _ in range(3)]
    rc.manual_seed(7)
    b = [_labels(loader) for _ in range(3)]
    assert a == b and a[0] != a[1]


@pytest.mark.parametrize("n,bs", [(23, 5), (20, 5), (3, 5), (0, 4)])
def test_drop_last_and_len(device, n, bs):
    ds, _, _ = _dataset(device, n)
    keep = DataLoader(ds, batch_size=bs)
    drop = DataLoader(ds, batch_size=bs, drop_last=True, shuffle=True)
    assert len(keep) == -(-n // bs) == len(list(keep))
    batches = list(drop)
    assert len(drop) == n // bs == len(batches)
    assert all(len(yb) == bs for _, yb in batches)
    assert len(set(_labels(batches))) == (n // bs) * bs


def test_batch_size_none_yields_samples(device):
    ds, _, _ = _dataset(device, 6)
    loader = DataLoader(ds, batch_size=None)
    items = list(loader)
    assert len(loader) == 6 == len(items)
    assert [int(yi) for _, yi in items] == list(range(6))
    assert tuple(items[2][0].shape) == (3,)
    g = rc.Generator().manual_seed(0)
    shuffled = [int(yi) for _, yi in DataLoader(ds, batch_size=None, shuffle=True, generator=g)]
    assert sorted(shuffled) == list(range(6))
    with pytest.raises(ValueError, match="drop_last"):
        DataLoader(ds, batch_size=None, drop_last=True)


def test_bad_arguments(device):
    ds, _, _ = _dataset(device, 4)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            DataLoader(ds, batch_size=bad)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(TypeError, match="unexpected"):
        DataLoader(ds, batchsize=3)
    DataLoader(ds, num_workers=4, pin_memory=True, persistent_workers=False)  # accepted


def test_sampler_gives_the_order(device):
    ds, _, _ = _dataset(device, 10)
    loader = DataLoader(ds, batch_size=3, sampler=[9, 0, 4, 4, -1])
    assert len(loader) == 2
    assert _labels(loader) == [9, 0, 4, 4, 9]


def test_fast_path_matches_per_sample_path(device):
    ds, _, _ = _dataset(device, 17)
    fast = list(DataLoader(ds, batch_size=4, shuffle=True, generator=rc.Generator().manual_seed(3)))
    slow = list(DataLoader(ds, batch_size=4, shuffle=True, generator=rc.Generator().manual_seed(3),
                           collate_fn=lambda b: default_collate(b)))
    assert len(fast) == len(slow)
    for (fx, fy), (sx, sy) in zip(fast, slow):
        assert type(fx) is type(sx)
        assert_close(fx, sx.cpu().numpy())
        assert_close(fy, sy.cpu().numpy())


def test_fast_path_uses_one_index_select_per_tensor(device, monkeypatch):
    from rtxcore.utils import data

    ds, _, _ = _dataset(device, 20)
    calls = []
    real = rc.index_select

    def counting(t, dim, index):
        calls.append(dim)
        return real(t, dim, index)

    monkeypatch.setattr(rc, "index_select", counting)
    monkeypatch.setattr(data, "default_collate",
                        lambda batch: pytest.fail("per-sample collation on the fast path"))
    batches = list(DataLoader(ds, batch_size=8, shuffle=True))
    assert len(batches) == 3 and len(calls) == 3 * 2


def test_batches_do_not_alias_the_dataset(device):
    ds, x, _ = _dataset(device, 8)
    for xb, _ in DataLoader(ds, batch_size=4):
        xb.mul_(0)
    assert_close(x, np.arange(24, dtype=np.float32).reshape(8, 3))


def test_custom_collate_fn(device):
    ds, _, _ = _dataset(device, 7)
    loader = DataLoader(ds, batch_size=3, collate_fn=lambda batch: [int(y) for _, y in batch])
    assert list(loader) == [[0, 1, 2], [3, 4, 5], [6]]


def test_plain_dataset_and_collation():
    loader = DataLoader(Squares(5), batch_size=2)
    batches = list(loader)
    assert len(batches) == len(loader) == 3
    b = batches[0]
    assert set(b) == {"i", "sq", "pair"}
    assert b["i"].dtype is rc.int64 and b["i"].tolist() == [0, 1]
    assert b["sq"].dtype is rc.float64 and b["sq"].tolist() == [0.0, 1.0]
    first, second = b["pair"]
    assert first.dtype is rc.float32 and first.tolist() == [0.0, 1.0]
    assert isinstance(second, list) and [t.tolist() for t in second] == [[0, 1], [0, -1]]
    assert batches[2]["i"].tolist() == [4]


# -- collate ----------------------------------------------------------------------------------


def test_default_collate_kinds(device):
    t = [rc.tensor([1.0, 2.0], device=device), rc.tensor([3.0, 4.0], device=device)]
    out = default_collate(t)
    assert tuple(out.shape) == (2, 2) and out.device == rc.device(device)
    assert default_collate([1, 2, 3]).dtype is rc.int64
    assert default_collate([1.5, 2.0]).dtype is rc.float64
    flags = default_collate([True, False])
    assert flags.dtype is rc.bool_ and flags.tolist() == [True, False]
    assert default_collate(["a", "b"]) == ["a", "b"]
    arrays = default_collate([np.zeros(3, np.int16), np.ones(3, np.int16)])
    assert arrays.dtype is rc.int16 and tuple(arrays.shape) == (2, 3)
    assert default_collate([np.float32(1), np.float32(2)]).dtype is rc.float32

    tup = default_collate([(t[0], 1), (t[1], 2)])
    assert isinstance(tup, list) and len(tup) == 2
    assert_close(tup[0], np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32))
    assert tup[1].tolist() == [1, 2]

    Point = namedtuple("Point", "x y")
    pts = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert type(pts) is Point and pts.x.tolist() == [1, 3] and pts.y.tolist() == [2.0, 4.0]

    od = default_collate([OrderedDict(b=1, a=t[0]), OrderedDict(b=2, a=t[1])])
    assert type(od) is OrderedDict and list(od) == ["b", "a"]
    nested = default_collate([{"x": {"y": [1, 2]}}, {"x": {"y": [3, 4]}}])
    assert [v.tolist() for v in nested["x"]["y"]] == [[1, 3], [2, 4]]


def test_default_collate_errors(device):
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError):
        default_collate([rc.zeros(2, device=device), rc.zeros(3, device=device)])
    with pytest.raises(TypeError, match="object"):
        default_collate([object(), object()])
    with pytest.raises(ValueError, match="empty"):
        default_collate([])


def test_default_convert():
    out = default_convert({"a": np.arange(3), "b": (np.float32(2), "s"), "c": 1})
    assert isinstance(out["a"], rc.Tensor) and out["a"].tolist() == [0, 1, 2]
    assert isinstance(out["b"][0], rc.Tensor) and out["b"][1] == "s" and out["c"] == 1


# -- Subset and random_split -------------------------------------------------------------------


def test_subset(device):
    ds, _, _ = _dataset(device, 10)
    sub = Subset(ds, [7, 2, 2, -1])
    assert len(sub) == 4 and sub[0][1].item() == 7 and sub[3][1].item() == 9
    assert _labels(DataLoader(sub, batch_size=3)) == [7, 2, 2, 9]
    nested = Subset(sub, [3, 0])
    assert _labels(DataLoader(nested, batch_size=2)) == [9, 7]
    assert _labels(DataLoader(Subset(ds, rc.tensor([1, 3])), batch_size=2)) == [1, 3]
    with pytest.raises(IndexError, match="out of range"):
        list(DataLoader(Subset(ds, [0, 10]), batch_size=2))


@pytest.mark.parametrize("lengths,sizes", [
    ([7, 3], [7, 3]),
    ([10, 0], [10, 0]),
    ([0.7, 0.3], [7, 3]),
    ([0.5, 0.25, 0.25], [6, 2, 2]),  # the remainder goes to the first subsets
    ([1 / 3, 1 / 3, 1 / 3], [4, 3, 3]),
])
def test_random_split_sizes(device, lengths, sizes):
    ds, _, _ = _dataset(device, 10)
    parts = random_split(ds, lengths, generator=rc.Generator().manual_seed(0))
    assert [len(p) for p in parts] == sizes
    labels = [lab for p in parts if len(p) for lab in _labels(DataLoader(p, batch_size=4))]
    assert sorted(labels) == list(range(10))


def test_random_split_reproducible_and_errors(device):
    ds, _, _ = _dataset(device, 12)
    a = random_split(ds, [6, 6], generator=rc.Generator().manual_seed(5))
    b = random_split(ds, [6, 6], generator=rc.Generator().manual_seed(5))
    assert [p.indices for p in a] == [p.indices for p in b]
    assert a[0].indices != list(range(6))
    rc.manual_seed(1)
    c = random_split(ds, [0.5, 0.5])
    rc.manual_seed(1)
    assert [p.indices for p in random_split(ds, [0.5, 0.5])] == [p.indices for p in c]
    with pytest.raises(ValueError, match="sum to 11"):
        random_split(ds, [5, 6])
    with pytest.raises(ValueError, match="non-negative"):
        random_split(ds, [14, -2])
    with pytest.raises(ValueError, match="fraction"):
        random_split(ds, [1.5, -0.5])


def test_concat_dataset(device):
    a, _, _ = _dataset(device, 3)
    b, _, _ = _dataset(device, 4)
    cat = a + b
    assert isinstance(cat, ConcatDataset) and len(cat) == 7
    assert [int(cat[i][1]) for i in range(7)] == [0, 1, 2, 0, 1, 2, 3]
    assert int(cat[-1][1]) == 3
    with pytest.raises(IndexError):
        cat[7]
    assert _labels(DataLoader(cat, batch_size=3)) == [0, 1, 2, 0, 1, 2, 3]


def test_base_dataset_is_abstract():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        len(Dataset())
