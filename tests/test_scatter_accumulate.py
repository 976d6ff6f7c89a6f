"""How repeated indices accumulate in float16: scatter_add, and everything built
on it (index_add, index_put/put with accumulate=True, embedding's backward).

The contract (``scatter_add`` in the guide): float16 sums accumulate in float32
or wider, and each output element is rounded to float16 once -- PyTorch's
scatter_add. Summing in float16 stops at 2048 when adding ones (2049 rounds back
to 2048), so every check here crosses it.
"""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore import nn

from .dtypes_table import need


def reference(out0: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    """out0 + the scattered sums, in float64, rounded once to out0's dtype."""
    acc = out0.astype(np.float64)
    grid = list(np.indices(index.shape, sparse=True))
    grid[dim] = index
    np.add.at(acc, tuple(grid), src.astype(np.float64))
    return acc.astype(out0.dtype)


def assert_within_ulp(got: rc.Tensor, expected: np.ndarray, what: str) -> None:
    """float16 results equal to the reference or one float16 spacing from it (a
    float32 accumulation may round a near-tie the other way)."""
    assert got.dtype is rc.float16, f"{what}: dtype {got.dtype}"
    g = got.cpu().numpy().astype(np.float64)
    e = expected.astype(np.float64)
    assert g.shape == e.shape, f"{what}: shape {g.shape}, expected {e.shape}"
    err = np.abs(g - e)
    ulp = np.spacing(np.abs(expected)).astype(np.float64)
    i = int(np.argmax(err - ulp))
    assert (err <= ulp).all(), (f"{what}: got {g.reshape(-1)[i]}, expected {e.reshape(-1)[i]} "
                                f"({int((err > ulp).sum())} of {e.size} elements beyond one ulp)")


def test_scatter_add_float16_past_2048(device):
    need(device, "float16")
    n = 7000  # 2333 onto each of 3 targets
    for size in (1, 3, 200_000):  # a big target with few sources takes another path on cpu
        x = rc.zeros(size, dtype=rc.float16, device=device)
        idx = rc.tensor(np.arange(n) % min(size, 3), device=device)
        src = rc.ones(n, dtype=rc.float16, device=device)
        expected = reference(np.zeros(size, np.float16), 0, np.arange(n) % min(size, 3),
                             np.ones(n, np.float16))
        assert_within_ulp(x.scatter_add(0, idx, src), expected, f"scatter_add into {size}")


@pytest.mark.parametrize("n", [100, 4000])  # below and above cpu's small-scatter threshold
def test_scatter_add_float16_rounds_once(device, n):
    """Random float16 values into few targets along each dim, onto a nonzero
    out, in place on a transposed view too."""
    need(device, "float16")
    rng = np.random.default_rng(n)
    for dim in (0, 1):
        shape = (n, 3) if dim == 0 else (3, n)
        src = rng.uniform(0, 1, shape).astype(np.float16)
        index = rng.integers(0, 4, shape)
        out_shape = (4, 3) if dim == 0 else (3, 4)
        out0 = rng.uniform(100, 200, out_shape).astype(np.float16)
        expected = reference(out0, dim, index, src)
        got = rc.tensor(out0, device=device).scatter_add(dim, rc.tensor(index, device=device),
                                                         rc.tensor(src, device=device))
        assert_within_ulp(got, expected, f"scatter_add dim {dim}")
        # in place into a strided target: a transposed view of a contiguous buffer
        base = rc.tensor(np.ascontiguousarray(out0.T), device=device)
        target = base.t()
        target.scatter_add_(dim, rc.tensor(index, device=device), rc.tensor(src, device=device))
        assert_within_ulp(target, expected, f"scatter_add_ dim {dim} on a transposed view")
        assert_within_ulp(base, np.ascontiguousarray(expected.T), "the transposed view's base")


def test_index_add_and_accumulating_puts_float16(device):
    """index_add, index_put(accumulate=True) and put(accumulate=True) follow
    scatter_add's rule (PyTorch's cpu index_add sums these in float16 and stops
    at 2048; rtxcore has one rule for every accumulating index op)."""
    need(device, "float16")
    rng = np.random.default_rng(7)
    n = 5000
    idx = rng.integers(0, 2, n)
    src = rng.uniform(0.5, 1.5, (n, 3)).astype(np.float16)
    out0 = np.zeros((2, 3), np.float16)
    expected = reference(out0, 0, np.broadcast_to(idx[:, None], (n, 3)), src)
    x = rc.tensor(out0, device=device)
    i = rc.tensor(idx, device=device)
    s = rc.tensor(src, device=device)
    assert_within_ulp(x.index_add(0, i, s), expected, "index_add")
    assert_within_ulp(rc.index_put(x, (i,), s, accumulate=True), expected, "index_put")
    y = rc.tensor(out0, device=device)
    y.index_put_((i,), s, accumulate=True)
    assert_within_ulp(y, expected, "index_put_")
    flat = rc.zeros(6, dtype=rc.float16, device=device)
    flat_idx = rng.integers(0, 6, n)
    flat_src = rng.uniform(0.5, 1.5, n).astype(np.float16)
    got = flat.put(rc.tensor(flat_idx, device=device), rc.tensor(flat_src, device=device),
                   accumulate=True)
    assert_within_ulp(got, reference(np.zeros(6, np.float16), 0, flat_idx, flat_src), "put")


def test_embedding_backward_float16(device):
    """The gradient of a row looked up 5000 times is 5000, not 2048."""
    need(device, "float16")
    emb = nn.Embedding(3, 4).to(device=device, dtype=rc.float16)
    ids = rc.tensor(np.arange(6000) % 2 * 2, device=device)  # rows 0 and 2, 3000 times each
    emb(ids).sum().backward()
    expected = np.zeros((3, 4), np.float16)
    expected[[0, 2]] = 3000
    assert_within_ulp(emb.weight.grad, expected, "embedding's weight gradient")


def test_scatter_add_float16_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    src = rng.uniform(0, 2, (6000, 2)).astype(np.float16)
    index = rng.integers(0, 3, (6000, 2))
    out0 = rng.uniform(-5, 5, (3, 2)).astype(np.float16)
    theirs = torch.from_numpy(out0.copy()).scatter_add_(0, torch.from_numpy(index),
                                                        torch.from_numpy(src)).numpy()
    ours = rc.tensor(out0).scatter_add(0, rc.tensor(index), rc.tensor(src))
    assert_within_ulp(ours, theirs, "scatter_add against torch")
