"""rtxcore.utils.data: samplers, lazy loading, default_collate on nested samples,
iterable datasets, DistributedSampler and the module paths PyTorch scripts import."""

from __future__ import annotations

import time
from collections import Counter, namedtuple

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset,
                                DistributedSampler, IterableDataset, RandomSampler, Sampler,
                                SequentialSampler, Subset, SubsetRandomSampler, TensorDataset,
                                WeightedRandomSampler, default_collate, get_worker_info)


@pytest.fixture(autouse=True)
def rng_state():
    """Leave the default generator as the test found it."""
    state = rc.get_rng_state()
    yield
    rc.set_rng_state(state)


def _tensor_ds(device="cpu", n=20):
    x = rc.arange(n * 2, dtype=rc.float32, device=device).reshape(n, 2)
    y = rc.arange(n, device=device)
    return TensorDataset(x, y)


class Plain(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"i": i, "x": np.full(2, i, np.float32)}


def gen(seed):
    return rc.Generator().manual_seed(seed)


# -- laziness ------------------------------------------------------------------------------


@pytest.mark.parametrize("make_ds", [_tensor_ds, lambda: Plain(50)], ids=["tensor", "plain"])
def test_loader_draws_from_sampler_lazily(make_ds):
    ds = make_ds()
    sampler = RandomSampler(ds, replacement=True, num_samples=10 ** 10)
    loader = DataLoader(ds, sampler=sampler, batch_size=8)
    assert len(loader) == 10 ** 10 // 8
    t = time.perf_counter()
    first = next(iter(loader))
    assert time.perf_counter() - t < 5.0
    idx = first[1] if isinstance(first, list) else first["i"]
    assert tuple(idx.shape) == (8,) and all(0 <= int(v) < len(ds) for v in idx.tolist())


def test_infinite_generic_sampler_is_read_lazily(device):
    ds = _tensor_ds(device)

    class Forever(Sampler[int]):
        def __iter__(self):
            i = 0
            while True:
                yield i % 20
                i += 3

    it = iter(DataLoader(ds, sampler=Forever(), batch_size=4))
    assert next(it)[1].tolist() == [0, 3, 6, 9]
    assert next(it)[1].tolist() == [12, 15, 18, 1]
    it = iter(DataLoader(ds, sampler=Forever(), batch_size=None))
    assert int(next(it)[1]) == 0 and int(next(it)[1]) == 3


# -- samplers --------------------------------------------------------------------------------


def test_sequential_and_batch_sampler():
    s = SequentialSampler(range(7))
    assert list(s) == list(range(7)) and len(s) == 7
    b = BatchSampler(s, 3, drop_last=False)
    assert list(b) == [[0, 1, 2], [3, 4, 5], [6]] and len(b) == 3
    b = BatchSampler(s, 3, drop_last=True)
    assert list(b) == [[0, 1, 2], [3, 4, 5]] and len(b) == 2
    assert list(BatchSampler([5, 1, 2, 0], 2, False)) == [[5, 1], [2, 0]]
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
            BatchSampler(s, bad, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(s, 2, 1)


def test_random_sampler_without_replacement():
    data = range(13)
    s = RandomSampler(data, generator=gen(0))
    a, b = list(s), list(s)
    assert sorted(a) == sorted(b) == list(range(13)) and a != b and len(s) == 13
    # num_samples beyond the length: whole permutations, then part of one
    s = RandomSampler(data, num_samples=30, generator=gen(1))
    out = list(s)
    assert len(out) == len(s) == 30
    assert sorted(out[:13]) == sorted(out[13:26]) == list(range(13))
    assert len(set(out[26:])) == 4
    # reproducible from the generator's seed, and from the global seed
    same = [list(RandomSampler(data, generator=gen(5))) for _ in range(2)]
    assert same[0] == same[1]
    rc.manual_seed(3)
    x = [list(RandomSampler(data)) for _ in range(2)]
    rc.manual_seed(3)
    y = [list(RandomSampler(data)) for _ in range(2)]
    assert x == y and x[0] != x[1]


def test_random_sampler_with_replacement():
    s = RandomSampler(range(5), replacement=True, num_samples=2000, generator=gen(2))
    out = list(s)
    assert len(out) == len(s) == 2000 and set(out) == set(range(5))
    counts = np.bincount(out, minlength=5)
    assert np.all(np.abs(counts - 400) < 4 * np.sqrt(400))  # uniform, within 4 sigma
    assert len(list(RandomSampler(range(5), replacement=True, num_samples=3))) == 3


def test_random_sampler_errors():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, "
                                         "but got num_samples=0"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="num_samples=2.5"):
        RandomSampler(range(3), replacement=True, num_samples=2.5)
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        RandomSampler(range(3), replacement=1)


def test_subset_random_sampler():
    idx = [10, 20, 30, 40, 50]
    s = SubsetRandomSampler(idx, generator=gen(0))
    a, b = list(s), list(s)
    assert sorted(a) == sorted(b) == idx and a != b and len(s) == 5


def test_weighted_random_sampler_honours_weights():
    w = [1.0, 0.0, 3.0, 6.0]
    s = WeightedRandomSampler(w, num_samples=20000, generator=gen(0))
    out = list(s)
    assert len(out) == len(s) == 20000
    freq = np.bincount(out, minlength=4) / 20000
    p = np.array(w) / sum(w)
    sigma = np.sqrt(p * (1 - p) / 20000)
    assert freq[1] == 0
    np.testing.assert_array_less(np.abs(freq - p), 5 * sigma + 1e-12)
    # without replacement: distinct, zero weights never drawn, heavier ones first more often
    firsts = Counter()
    for seed in range(200):
        draw = list(WeightedRandomSampler(w, 3, replacement=False, generator=gen(seed)))
        assert sorted(draw) == [0, 2, 3]
        firsts[draw[0]] += 1
    assert firsts[3] > firsts[2] > firsts[0]
    with pytest.raises(RuntimeError, match="without replacement"):
        list(WeightedRandomSampler(w, 5, replacement=False))
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        WeightedRandomSampler(w, 0)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        WeightedRandomSampler(w, 2, replacement=None)


def test_weighted_sampler_is_lazy():
    s = WeightedRandomSampler([0.5, 0.5], num_samples=10 ** 12)
    it = iter(s)
    assert {next(it) for _ in range(64)} <= {0, 1}


def test_distributed_sampler():
    ds = list(range(10))
    parts = [list(DistributedSampler(ds, num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    # padded by repeating the start: 12 indices, every sample at least once
    assert parts == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    dropped = [list(DistributedSampler(ds, num_replicas=3, rank=r, shuffle=False, drop_last=True))
               for r in range(3)]
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    s = DistributedSampler(ds)  # one process: the whole dataset
    assert len(s) == 10 and sorted(s) == ds
    a = list(s)
    assert a == list(s)  # the same epoch, the same order
    s.set_epoch(1)
    assert sorted(s) == ds and list(s) != a
    with pytest.raises(ValueError,
                       match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(ds, num_replicas=3, rank=3)


def test_distributed_sampler_matches_torch_split():
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TDS

    for n, reps, drop in [(10, 3, False), (10, 3, True), (7, 4, False), (2, 5, False)]:
        for r in range(reps):
            ours = DistributedSampler(list(range(n)), reps, r, shuffle=False, drop_last=drop)
            theirs = TDS(list(range(n)), reps, r, shuffle=False, drop_last=drop)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    assert torch is not None


# -- the DataLoader ------------------------------------------------------------------------


def test_batch_sampler_option(device):
    ds = _tensor_ds(device)
    bs = [[3, 1], [0], [19, -1, 5]]
    loader = DataLoader(ds, batch_sampler=bs)
    assert loader.batch_size is None and len(loader) == 3
    assert [yb.tolist() for _, yb in loader] == [[3, 1], [0], [19, 19, 5]]
    slow = DataLoader(ds, batch_sampler=bs, collate_fn=lambda b: default_collate(b))
    assert [yb.tolist() for _, yb in slow] == [[3, 1], [0], [19, 19, 5]]
    for kw in ({"batch_size": 2}, {"shuffle": True}, {"sampler": [0]}, {"drop_last": True}):
        with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
            DataLoader(ds, batch_sampler=bs, **kw)


def test_shuffle_with_replacement_sampler_fast_path_matches_slow_path(device):
    ds = _tensor_ds(device, 30)
    kw = dict(sampler=RandomSampler(ds, replacement=True, num_samples=70, generator=gen(4)),
              batch_size=16)
    fast = [yb.tolist() for _, yb in DataLoader(ds, **kw)]
    kw["sampler"].generator.manual_seed(4)
    slow = [yb.tolist() for _, yb in DataLoader(ds, collate_fn=lambda b: default_collate(b), **kw)]
    assert fast == slow and [len(b) for b in fast] == [16, 16, 16, 16, 6]
    # a Subset of a TensorDataset, shuffled, with drop_last
    sub = Subset(ds, list(range(29, -1, -2)))
    got = [yb.tolist() for _, yb in DataLoader(sub, batch_size=4, shuffle=True, drop_last=True,
                                               generator=gen(0))]
    assert len(got) == 3 and all(len(b) == 4 for b in got)
    assert set(sum(got, [])) <= set(range(29, -1, -2))


def test_loader_attributes_and_len():
    ds = Plain(10)
    loader = DataLoader(ds, batch_size=4, shuffle=True)
    assert isinstance(loader.sampler, RandomSampler)
    assert isinstance(loader.batch_sampler, BatchSampler) and loader.batch_sampler.batch_size == 4
    assert len(loader) == 3 and len(iter(loader)) == 3
    loader = DataLoader(ds, batch_size=4, drop_last=True)
    assert isinstance(loader.sampler, SequentialSampler) and len(loader) == 2
    loader = DataLoader(ds, batch_size=None)
    assert loader.batch_sampler is None and len(loader) == 10
    assert int(list(loader)[3]["i"]) == 3
    loader = DataLoader(ds, sampler=RandomSampler(ds, num_samples=25), batch_size=10)
    assert len(loader) == 3 and sum(len(b["i"]) for b in loader) == 25


def test_worker_options_accepted_and_loading_stays_in_process():
    ds = Plain(6)
    called = []
    loader = DataLoader(ds, batch_size=2, num_workers=3, pin_memory=True,
                        worker_init_fn=called.append, persistent_workers=True, prefetch_factor=2,
                        timeout=5)
    seen = []

    def collate(batch):
        seen.append(get_worker_info())
        return default_collate(batch)

    loader.collate_fn = collate
    assert [b["i"].tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    assert called == [] and seen == [None, None, None] and get_worker_info() is None
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        DataLoader(ds, prefetch_factor=2)


def test_getitems_is_used_for_batches():
    class Batched(Plain):
        calls = 0

        def __getitems__(self, indices):
            Batched.calls += 1
            return [self[i] for i in indices]

    out = list(DataLoader(Batched(5), batch_size=2))
    assert Batched.calls == 3 and out[2]["i"].tolist() == [4]


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_iterable_dataset():
    loader = DataLoader(Stream(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]] and len(loader) == 3
    loader = DataLoader(Stream(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]] and len(loader) == 2
    assert [int(v) for v in DataLoader(Stream(3), batch_size=None)] == [0, 1, 2]
    chained = Stream(2) + Stream(3)
    assert isinstance(chained, ChainDataset) and list(chained) == [0, 1, 0, 1, 2]
    assert len(chained) == 5
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match="expected unspecified sampler option"):
        DataLoader(Stream(3), sampler=[0])
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        ConcatDataset([Stream(2)])


# -- default_collate ------------------------------------------------------------------------

Point = namedtuple("Point", "x y")


def _samples():
    return [
        {"img": np.full((2, 2), i, np.float32), "label": i, "w": 0.5 * i, "flag": i % 2 == 0,
         "name": f"s{i}", "meta": (rc.tensor([i, -i]), [np.int64(i), 2.0 * i]),
         "pt": Point(i, float(i))}
        for i in range(3)
    ]


def test_default_collate_nested():
    batch = default_collate(_samples())
    assert set(batch) == {"img", "label", "w", "flag", "name", "meta", "pt"}
    assert batch["img"].dtype == rc.float32 and tuple(batch["img"].shape) == (3, 2, 2)
    np.testing.assert_array_equal(batch["img"].numpy()[:, 0, 0], [0, 1, 2])
    assert batch["label"].dtype == rc.int64 and batch["label"].tolist() == [0, 1, 2]
    assert batch["w"].dtype == rc.float64 and batch["w"].tolist() == [0.0, 0.5, 1.0]
    assert batch["flag"].dtype == rc.bool_ and batch["flag"].tolist() == [True, False, True]
    assert batch["name"] == ["s0", "s1", "s2"]
    meta = batch["meta"]
    assert isinstance(meta, list) and len(meta) == 2  # a tuple collates to a list
    assert meta[0].tolist() == [[0, 0], [1, -1], [2, -2]]
    assert isinstance(meta[1], list) and meta[1][0].dtype == rc.int64
    assert meta[1][1].tolist() == [0.0, 2.0, 4.0]
    assert isinstance(batch["pt"], Point) and batch["pt"].x.tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])


def test_default_collate_matches_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as tcollate

    samples = _samples()
    tsamples = [{**s, "meta": (torch.tensor(s["meta"][0].numpy()), s["meta"][1])}
                for s in samples]

    def compare(a, b):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, rc.Tensor) and str(a.dtype).split(".")[-1].rstrip("_") == \
                str(b.dtype).split(".")[-1]
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        elif isinstance(b, dict):
            assert set(a) == set(b)
            for k in b:
                compare(a[k], b[k])
        elif isinstance(b, (list, tuple)):
            assert type(a) is type(b) and len(a) == len(b)
            for x, y in zip(a, b):
                compare(x, y)
        else:
            assert a == b

    compare(default_collate(samples), tcollate(tsamples))


# -- module paths -----------------------------------------------------------------------------


def test_module_paths():
    import rtxcore.utils.data as data
    from rtxcore.utils.data import dataloader, dataset, distributed, sampler
    from rtxcore.utils.data._utils.collate import default_collate as dc

    assert dataloader.DataLoader is data.DataLoader and dataloader.default_collate is dc
    assert dataloader.default_collate is data.default_collate
    assert sampler.RandomSampler is data.RandomSampler and sampler.BatchSampler is BatchSampler
    assert dataset.TensorDataset is data.TensorDataset
    assert dataset.IterableDataset is IterableDataset
    assert distributed.DistributedSampler is DistributedSampler
    assert rc.utils.data is data

    class Ints(Dataset[int]):  # PyTorch's generic spellings
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i

    loader: DataLoader[int] = DataLoader(Ints(), batch_size=2)
    assert [b.tolist() for b in loader] == [[0, 1], [2]]
    for name in data.__all__:
        assert getattr(data, name) is not None
