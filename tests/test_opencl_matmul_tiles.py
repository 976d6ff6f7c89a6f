"""The OpenCL matmul's tiled paths at their edges: b packed (row-major,
transposed, strided, broadcast over a batch), b read in place, ragged row and
column blocks, k not a multiple of the packing block, and bit-for-bit repeats."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc

R = pytest.importorskip("rtx_opencl.runtime")
pytestmark = pytest.mark.skipif(R.problem() is not None, reason=f"opencl: {R.problem()}")


def _t(a: np.ndarray) -> rc.Tensor:
    return rc.tensor(a, device="opencl")


def _ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


# (n, k, m): small b read in place; large b packed with k and m off the blocks;
# few rows against a wide b (the conv forward); a long k to a small output (its
# weight gradient); one row; rows not a multiple of the row block
SHAPES = [(7, 33, 50), (40, 300, 600), (64, 97, 2050), (9, 1500, 37), (1, 600, 700),
          (13, 70, 1030), (130, 65, 129)]


@pytest.mark.parametrize("n,k,m", SHAPES)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_float32_layouts(n, k, m, layout) -> None:
    rng = np.random.default_rng(n * 1000 + k + m)
    a = rng.standard_normal((n, k), dtype=np.float32)
    b = rng.standard_normal((k, m), dtype=np.float32)
    ta = _t(np.ascontiguousarray(a.T)).t() if layout[0] == "t" else _t(a)
    tb = _t(np.ascontiguousarray(b.T)).t() if layout[1] == "t" else _t(b)
    got = (ta @ tb).numpy()
    np.testing.assert_allclose(got, _ref(a, b), rtol=1e-4, atol=1e-4 * np.sqrt(k))
    # the same inputs give the same bits
    assert np.array_equal((ta @ tb).numpy(), got)


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64"])
def test_other_dtypes_tiled(dtype) -> None:
    rng = np.random.default_rng(4)
    a = rng.integers(-4, 5, (21, 330)).astype(dtype)
    b = rng.integers(-4, 5, (330, 1100)).astype(dtype)
    got = (_t(a) @ _t(b)).numpy()
    np.testing.assert_array_equal(got, (a.astype(np.int64) @ b.astype(np.int64)).astype(dtype))
    bt = _t(np.ascontiguousarray(b.T)).t()
    np.testing.assert_array_equal((_t(a) @ bt).numpy(), got)


def test_batched_broadcast_and_strided() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 20, 150), dtype=np.float32)
    b = rng.standard_normal((150, 900), dtype=np.float32)
    np.testing.assert_allclose((_t(a) @ _t(b)).numpy(), _ref(a, b), rtol=1e-4, atol=1e-3)
    # batched b, every other column (column stride 2), out of a transposed view
    bb = rng.standard_normal((3, 150, 1800), dtype=np.float32)
    tb = _t(bb)[..., ::2]
    np.testing.assert_allclose((_t(a) @ tb).numpy(), _ref(a, bb[..., ::2]), rtol=1e-4, atol=1e-3)
    # attention-like views of one tensor: q @ k^T
    qkv = rng.standard_normal((4, 32, 3 * 48), dtype=np.float32)
    t = _t(qkv)
    q = t[..., :48].reshape(4, 32, 3, 16).transpose(1, 2)
    k = t[..., 48:96].reshape(4, 32, 3, 16).transpose(1, 2)
    qn = qkv[..., :48].reshape(4, 32, 3, 16).swapaxes(1, 2)
    kn = qkv[..., 48:96].reshape(4, 32, 3, 16).swapaxes(1, 2)
    np.testing.assert_allclose((q @ k.transpose(-1, -2)).numpy(), _ref(qn, kn.swapaxes(-1, -2)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,k,m", [(20, 300, 40), (9, 600, 37), (130, 70, 50)])
def test_out_with_strides(n, k, m) -> None:
    """out= a transposed view (column stride != 1): element stores, and the
    strip kernel's partial sums read back through the same strides."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((n, k), dtype=np.float32)
    b = rng.standard_normal((k, m), dtype=np.float32)
    o = rc.zeros((m, n), device="opencl").t()
    rc.matmul(_t(a), _t(b), out=o)
    np.testing.assert_allclose(o.numpy(), _ref(a, b), rtol=1e-4, atol=1e-3)
    # every other column of a wider out
    w = rc.zeros((n, 2 * m), device="opencl")
    rc.matmul(_t(a), _t(np.ascontiguousarray(b.T)).t(), out=w[:, ::2])
    np.testing.assert_allclose(w.numpy()[:, ::2], _ref(a, b), rtol=1e-4, atol=1e-3)
    assert not w.numpy()[:, 1::2].any()


def test_out_with_strides_via_out_arg() -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((50, 80), dtype=np.float32)
    b = rng.standard_normal((80, 700), dtype=np.float32)
    want = _ref(a, b)
    # (b^T a^T)^T: the output of the transposed product is read back transposed
    got = (_t(np.ascontiguousarray(b.T)) @ _t(np.ascontiguousarray(a.T))).t().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n,k,m", [(32, 16, 32), (100, 600, 40), (20, 30, 610)])
def test_batch_dims_that_do_not_merge(n, k, m) -> None:
    """Two batch dims (one launch of the strip kernel where it takes the
    shape; else a loop of launches) and three (a loop over the outer one)."""
    rng = np.random.default_rng(7)
    base_a = rng.standard_normal((2, 3, n, 5, k), dtype=np.float32)
    base_b = rng.standard_normal((2, k, 3, m), dtype=np.float32)
    a = base_a[:, :, :, 1].swapaxes(0, 1)       # (3, 2, n, k), strides that don't merge
    b = base_b.transpose(2, 0, 1, 3)             # (3, 2, k, m)
    got = (_t(base_a)[:, :, :, 1].transpose(0, 1) @ _t(base_b).permute(2, 0, 1, 3)).numpy()
    np.testing.assert_allclose(got, _ref(a, b), rtol=1e-4, atol=1e-3)
    a3 = rng.standard_normal((2, 3, 2, n, k), dtype=np.float32)
    b3 = rng.standard_normal((2, 2, 3, k, m), dtype=np.float32).swapaxes(1, 2)
    got3 = (_t(a3) @ _t(np.ascontiguousarray(b3.swapaxes(1, 2))).transpose(1, 2)).numpy()
    np.testing.assert_allclose(got3, _ref(a3, b3), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m", [1, 3, 7])
def test_few_columns(m) -> None:
    """A matrix times a few vectors runs as out^T = b^T @ a^T: plain, with a
    transposed a broadcast over a batch, out= a strided view, and under three
    batch dims (the loop, which takes the product as it came)."""
    rng = np.random.default_rng(8 + m)
    a = rng.standard_normal((300, 70), dtype=np.float32)
    b = rng.standard_normal((70, m), dtype=np.float32)
    np.testing.assert_allclose((_t(a) @ _t(b)).numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)
    w = rng.standard_normal((32, 600), dtype=np.float32)
    v = rng.standard_normal((5, 32, m), dtype=np.float32)
    got = (_t(w).t().expand(5, 600, 32) @ _t(v)).numpy()
    np.testing.assert_allclose(got, _ref(w.T, v), rtol=1e-4, atol=1e-4)
    o = rc.zeros((m, 300), device="opencl").t()
    rc.matmul(_t(a), _t(b), out=o)
    np.testing.assert_allclose(o.numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)
    a3 = rng.standard_normal((2, 3, 2, 40, 30), dtype=np.float32)
    b3 = rng.standard_normal((2, 2, 3, 30, m), dtype=np.float32).swapaxes(1, 2)
    got3 = (_t(a3) @ _t(np.ascontiguousarray(b3.swapaxes(1, 2))).transpose(1, 2)).numpy()
    np.testing.assert_allclose(got3, _ref(a3, b3), rtol=1e-4, atol=1e-4)
    for dtype in ("float64", "int32"):
        ai, bi = (a * 4).astype(dtype), (b * 4).astype(dtype)
        np.testing.assert_allclose((_t(ai) @ _t(bi)).numpy(), ai.astype(np.float64) @ bi,
                                   rtol=1e-9)


def test_strip_kernel_sized_to_local_memory(monkeypatch) -> None:
    """The strip kernel holds at most half the device's local memory (a GPU's
    32-64 KiB take fewer strips; under 32 KiB the program has none), and
    products still run on the other kernels without it."""
    M = pytest.importorskip("rtx_opencl.matmul")

    class Dev:
        def __init__(self, local_mem: int) -> None:
            self.local_mem = local_mem

    assert [M._strip_w(Dev(x << 10)) for x in (1024, 64, 48, 32, 16)] == [4, 2, 1, 1, 0]
    src = M.source("float", "float", 0)
    assert "matmul_strip" not in src and "matmul_vecp" in src
    R.device(0).build(src, "matmul without the strip kernel")  # (it builds)
    monkeypatch.setattr(M, "_strip_w", lambda dev: 0)
    rng = np.random.default_rng(9)
    a = rng.standard_normal((11, 77), dtype=np.float32)  # (a shape no other test plans)
    b = rng.standard_normal((77, 333), dtype=np.float32)
    np.testing.assert_allclose((_t(a) @ _t(b)).numpy(), _ref(a, b), rtol=1e-4, atol=1e-4)
