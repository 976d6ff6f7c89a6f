"""The cpu backend's kernels split over threads (``rtx_cpu.parallel``): the same bits
on 1, 2 and 4 threads, equal to the single NumPy call, for every kernel it splits,
on contiguous, strided, transposed and broadcast inputs; and the default thread count."""

from __future__ import annotations

import os

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch import threads as thread_setting
from rtxcore.dispatch.xp import kernels as xp_kernels

pytest.importorskip("rtx_cpu")
from rtx_cpu import fused, parallel  # noqa: E402
from rtx_cpu.kernels import KERNELS  # noqa: E402

BASE = xp_kernels(np)  # the single-call kernels the split ones wrap
THREADS = (1, 2, 4)
SMALL = 1 << 9  # elements per part in the tests' own kernels: small arrays split
# (``parallel.wrap``'s kernels: 4096 at least, xp's _BRANCHLESS_MIN)

UNARY = ["neg", "abs", "sign", "reciprocal", "floor", "ceil", "round", "trunc", "exp", "log",
         "sqrt", "sin", "cos", "tanh", "expm1", "log1p", "log2", "tan", "isnan", "isinf"]
BINARY = ["add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "floor_divide",
          "remainder"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
REDUCTIONS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


@pytest.fixture
def runs(monkeypatch):
    """The number of split calls (``parallel._run``) made while the test runs."""
    seen = []
    real = parallel._run

    def spy(fn, calls):
        seen.append(len(calls))
        return real(fn, calls)

    monkeypatch.setattr(parallel, "_run", spy)
    return seen


@pytest.fixture
def small_blocks(monkeypatch):
    """Flat parts start anywhere (not at multiples of 1024) and sums of everything
    have leaves of at most 1000 elements: small arrays take every path."""
    monkeypatch.setattr(parallel, "_ALIGN", 1)
    monkeypatch.setattr(parallel, "LEAF", 1000)


def _on_threads(fn):
    """fn() on 1, 2 and 4 threads: {n: result}."""
    old = rc.get_num_threads()
    out = {}
    try:
        for n in THREADS:
            rc.set_num_threads(n)
            out[n] = fn()
    finally:
        rc.set_num_threads(old)
    return out


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


def _data(shape, dt, rng, special=True):
    if np.dtype(dt).kind == "f":
        x = (rng.standard_normal(shape) * 3).astype(dt)
        if special:
            f = x.reshape(-1)
            f[::97], f[5::101], f[7::103], f[9::107], f[11::89] = 0, np.inf, np.nan, -0.0, -np.inf
            f[13::83] = np.finfo(dt).tiny / 4  # subnormal
        return x
    return rng.integers(-50, 50, shape).astype(dt)


def _layouts(shape, dt, rng):
    """(name, array) of ``shape``: contiguous, strided, transposed, broadcast."""
    big = _data((shape[0], shape[1] * 2), dt, rng)
    return [("contiguous", _data(shape, dt, rng)),
            ("strided", big[:, ::2]),
            ("transposed", np.ascontiguousarray(_data(shape[::-1], dt, rng)).T),
            ("broadcast", np.broadcast_to(_data((1, shape[1]), dt, rng), shape))]


def _check(kernel, base, out_like, args):
    """kernel(out, *args) on 1, 2, 4 threads: the same bits, and base's (one call)."""
    want = np.empty_like(out_like)
    with np.errstate(all="ignore"):
        base(want, *args)

        def go():
            out = np.empty_like(out_like)
            kernel(out, *args)
            return out

        got = _on_threads(go)
    for n in THREADS:
        _same_bits(got[n], want)


def _split(runs):
    assert runs and max(runs) > 1, "the kernel never split"


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", UNARY)
def test_unary_same_bits_on_any_thread_count(op, dt, runs, small_blocks):
    rng = np.random.default_rng(1)
    kernel = parallel.unary(BASE[op], SMALL)
    for name, x in _layouts((37, 129), dt, rng):
        out_dt = bool if op in ("isnan", "isinf") else dt
        _check(kernel, BASE[op], np.empty(x.shape, out_dt), (x,))
    _split(runs)


# (integer division is not here: the core gives it other kernels; div is floats)
_BINARY_CASES = [(op, dt) for op in BINARY
                 for dt in (np.float32, np.float64, np.int32, np.int64)
                 if np.dtype(dt).kind == "f" or op not in ("div", "floor_divide", "remainder")]


@pytest.mark.parametrize("op, dt", _BINARY_CASES)
def test_binary_same_bits_on_any_thread_count(op, dt, runs, small_blocks):
    rng = np.random.default_rng(2)
    kernel = parallel.binary(BASE[op], SMALL)
    to_bool = op in ("eq", "ne", "lt", "le", "gt", "ge")
    ints = np.dtype(dt).kind == "i"
    odt = bool if to_bool else dt
    layouts = _layouts((41, 97), dt, rng)
    for (_, x), (_, y) in zip(layouts, layouts[1:] + layouts[:1]):
        _check(kernel, BASE[op], np.empty(x.shape, odt), (x, y))
    x = layouts[0][1]
    scalar = 3 if ints else 1.5
    _check(kernel, BASE[op], np.empty(x.shape, odt), (x, scalar))
    _check(kernel, BASE[op], np.empty(x.shape, odt), (scalar, x))
    # a row vector broadcast by NumPy itself (shape (97,) against (41, 97))
    _check(kernel, BASE[op], np.empty(x.shape, odt), (x, layouts[1][1][0]))
    _split(runs)


@pytest.mark.parametrize("op", LOGICAL)
def test_logical_same_bits_on_any_thread_count(op, runs, small_blocks):
    rng = np.random.default_rng(3)
    kernel = parallel.binary(BASE[op], SMALL)
    x, y = rng.random((53, 70)) < 0.5, rng.random((53, 70)) < 0.3
    _check(kernel, BASE[op], np.empty(x.shape, bool), (x, y))
    _check(kernel, BASE[op], np.empty(x.shape, bool), (x, y[:, ::-1]))
    _split(runs)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_extremum_same_bits_on_any_thread_count(op, dt, runs, small_blocks):
    rng = np.random.default_rng(4)
    kernel = parallel.wrap(BASE[op], 2, SMALL)
    layouts = _layouts((64, 160), dt, rng)
    x = layouts[0][1]
    for scalar in (0.0, -0.0, 1.5):  # relu's maximum(x, 0): the scalar-filled path
        _check(kernel, BASE[op], np.empty_like(x), (x, scalar))
        _check(kernel, BASE[op], np.empty_like(x), (scalar, x))
        _check(kernel, BASE[op], np.empty_like(x), (layouts[1][1], scalar))
    for (_, a), (_, b) in zip(layouts, layouts[::-1]):
        _check(kernel, BASE[op], np.empty_like(x), (a, b))
    _split(runs)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int64])
def test_where_same_bits_on_any_thread_count(dt, runs, small_blocks):
    rng = np.random.default_rng(5)
    kernel = parallel.wrap(BASE["where"], 3, SMALL)
    layouts = _layouts((192, 64), dt, rng)
    cond = rng.random((192, 64)) < 0.4
    causal = np.broadcast_to(np.tril(np.ones((1, 64), bool)), (192, 64))  # a regular mask
    x, y = layouts[0][1], layouts[2][1]
    for c in (cond, causal, cond[:, ::-1]):
        for a, b in ((x, y), (x, 0.0 if dt != np.int64 else 0), (layouts[3][1], -0.0),
                     (layouts[1][1], x)):
            _check(kernel, BASE["where"], np.empty_like(x), (c, a, b))
    _split(runs)


@pytest.mark.parametrize("src,dst", [(np.float32, np.float32), (np.float64, np.float32),
                                     (np.float32, np.float16), (np.float32, np.int32),
                                     (np.int64, np.float64), (np.float32, np.bool_)])
def test_copy_and_cast_same_bits_on_any_thread_count(src, dst, runs, small_blocks):
    rng = np.random.default_rng(6)
    op = "copy" if src == dst else "cast"
    kernel = parallel.copy_kernel(None if op == "copy" else "unsafe", SMALL)
    for _, x in _layouts((160, 70), src, rng):
        if np.dtype(dst).kind in "iub" and np.dtype(src).kind == "f":
            x = np.nan_to_num(x, nan=1.0, posinf=7.0, neginf=-7.0)
        _check(kernel, BASE[op], np.empty(x.shape, dst), (x,))
    # into a strided target (an in-place write into a slice of a tensor)
    x = _data((160, 70), src, rng, special=False)
    big = np.zeros((160, 140), dst)
    want = big.copy()
    BASE[op](want[:, ::2], x)

    def go():
        out = big.copy()
        kernel(out[:, ::2], x)
        return out

    for got in _on_threads(go).values():
        _same_bits(got, want)
    _split(runs)


def test_short_first_dim_splits_rows_of_the_first_two(runs, small_blocks):
    # (2, T, C) + bias: no contiguous flat run, two rows too few; the first two
    # dims as one, (2 * T, C), where every operand allows it without a copy
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 300, 40)).astype(np.float32)
    bias = np.broadcast_to(rng.standard_normal(40).astype(np.float32), x.shape)
    mask = np.broadcast_to(rng.random((1, 300, 40)) < 0.5, x.shape)
    add = parallel.binary(BASE["add"], SMALL)
    _check(add, BASE["add"], np.empty_like(x), (x, bias))
    _check(parallel.wrap(BASE["where"], 3, SMALL), BASE["where"], np.empty_like(x),
           (mask, x, bias))
    y = rng.standard_normal((300, 2, 40)).astype(np.float32).transpose(1, 0, 2)
    _check(parallel.wrap(BASE["maximum"], 2, SMALL), BASE["maximum"], np.empty_like(x),
           (y, -0.0))  # dims that don't merge without a copy: one call
    _split(runs)


def test_in_place_and_overlap(runs, small_blocks):
    # out is x itself (x += y): split; out overlapping x shifted by one: the single call
    rng = np.random.default_rng(7)
    kernel = parallel.binary(BASE["add"], SMALL)
    x0, y = rng.standard_normal((2, 40, 50)).astype(np.float32)
    want = x0 + y

    def in_place():
        x = x0.copy()
        kernel(x, x, y)
        return x

    for got in _on_threads(in_place).values():
        _same_bits(got, want)
    assert runs and max(runs) > 1
    flat = rng.standard_normal(5001).astype(np.float32)
    want = flat.copy()
    np.add(want[:-1], 1.0, out=want[1:])  # NumPy copies the overlapping input first
    del runs[:]

    def shifted():
        a = flat.copy()
        kernel(a[1:], a[:-1], 1.0)
        return a

    for got in _on_threads(shifted).values():
        _same_bits(got, want)
    assert not runs  # never split


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, np.int64])
@pytest.mark.parametrize("op", list(REDUCTIONS))
def test_reductions_over_axes_same_bits_on_any_thread_count(op, dt, runs, small_blocks):
    rng = np.random.default_rng(8)
    kernel = parallel.reduction(REDUCTIONS[op], BASE[op], SMALL)
    base = BASE[op]
    x3 = _data((24, 33, 40), dt, rng, special=op in ("max", "min"))
    if op == "prod" and np.dtype(dt).kind == "f":
        x3 = (1 + x3 / 50).astype(dt)  # products that neither overflow nor vanish
    cases = [(x3, (0,)), (x3, (1,)), (x3, (2,)), (x3, (0, 2)), (x3, (1, 2)), (x3, (0, 1)),
             (x3.transpose(2, 0, 1), (1,)), (x3[:, ::2], (2,)),
             (_data((4096, 3), dt, rng, special=False), (1,)),  # folded: a few per output
             (_data((3, 4096), dt, rng, special=False), (0,)),
             (_data((2, 3000), dt, rng, special=False), (1,))]
    for x, axes in cases:
        out_like = np.empty(tuple(1 if d in axes else n for d, n in enumerate(x.shape)), dt)
        _check(kernel, base, out_like, (x, axes))
    _split(runs)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reductions_of_everything_same_bits(op, dt, runs, small_blocks):
    # NumPy's pairwise tree from the top: its leaves on the threads, its single
    # call's bits (max/min: the same leaves and tree)
    rng = np.random.default_rng(9)
    kernel = parallel.reduction(REDUCTIONS[op], BASE[op], SMALL)
    special = op != "sum"
    for x in (_data(20011, dt, rng, special), _data((64, 129), dt, rng, special),
              _data(40001, dt, rng, special)[::3], _data((1, 9000), dt, rng, special)):
        if op == "sum" and np.dtype(dt).kind == "f":
            x = x + np.asarray(100, dt)  # sums far from zero: any other order shows
        out_like = np.empty((1,) * x.ndim, dt)
        _check(kernel, BASE[op], out_like, (x, tuple(range(x.ndim))))
    _split(runs)


@pytest.mark.parametrize("op,dt", [("prod", np.float64), ("sum", np.float16)])
def test_reductions_of_everything_kept_single(op, dt, runs, small_blocks):
    # a product is taken in sequence, a float16 sum through float32 buffers: one call
    rng = np.random.default_rng(10)
    kernel = parallel.reduction(REDUCTIONS[op], BASE[op], SMALL)
    x = (1 + rng.standard_normal(5000) / 100).astype(dt)
    _check(kernel, BASE[op], np.empty(1, dt), (x, (0,)))
    assert not runs


def test_errstate_reaches_every_part(small_blocks):
    # np.errstate is per thread (a context variable): a part on a worker raises as
    # the single call would
    kernel = parallel.unary(BASE["log"], SMALL)
    x = np.ones(8000, np.float32)
    x[-3] = -1.0  # in the last part: a worker's
    old = rc.get_num_threads()
    try:
        rc.set_num_threads(2)
        with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
            kernel(np.empty_like(x), x)
    finally:
        rc.set_num_threads(old)


def test_no_split_on_a_pool_thread(runs, small_blocks):
    # a kernel called from one of the pool's threads (a fused group's step) runs as
    # one call: it would wait on its own pool
    kernel = parallel.binary(BASE["add"], SMALL)
    x = np.arange(10000, dtype=np.float32)
    out = np.empty_like(x)
    old = rc.get_num_threads()
    try:
        rc.set_num_threads(4)
        fused.pool().submit(kernel, out, x, x).result(timeout=30)
    finally:
        rc.set_num_threads(old)
    _same_bits(out, x + x)
    assert not runs


# -- through the public API, at the real sizes --------------------------------------


def test_public_ops_same_bits_on_any_thread_count(runs):
    # 4M elements: every op here splits at the real sizes (parallel.PART_MIN)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2048, 2048)).astype(np.float32) + np.float32(1)
    b = rng.standard_normal((2048, 2048)).astype(np.float32)
    bias = rng.standard_normal(2048).astype(np.float32)
    ta, tb, tbias = rc.from_numpy(a), rc.from_numpy(b), rc.from_numpy(bias)
    total = np.add.reduce(a, axis=None)  # NumPy's pairwise tree: its bits, from leaves
    cases = {
        "add": (lambda: ta + tb, a + b), "mul": (lambda: ta * tb, a * b),
        "bias": (lambda: ta + tbias, a + bias), "exp": (lambda: ta.exp(), np.exp(a)),
        "tanh": (lambda: ta.tanh(), np.tanh(a)),
        "relu": (lambda: rc.relu(tb), np.maximum(b, np.float32(0))),
        "where": (lambda: rc.where(tb > 0, ta, tb), np.where(b > 0, a, b)),
        "t-copy": (lambda: ta.t().contiguous(), np.ascontiguousarray(a.T)),
        "half": (lambda: ta.half(), a.astype(np.float16)),
        "sum": (lambda: ta.sum(), total),
        "mean": (lambda: ta.mean(), total / np.float32(a.size)),
        "sum0": (lambda: ta.sum(0), a.sum(0)), "sum1": (lambda: ta.sum(1), a.sum(1)),
        "amax": (lambda: ta.amax(1), a.max(1)), "max": (lambda: tb.max(), b.max()),
    }
    for name, (fn, want) in cases.items():
        before = len(runs)
        got = _on_threads(lambda: fn().numpy().copy())
        for n in THREADS:
            _same_bits(got[n], np.asarray(want, got[1].dtype))
        assert max(runs[before:], default=0) > 1, f"{name} never split"


def test_the_table_holds_the_split_kernels():
    # every kernel tested above is the one the cpu backend uses; the ufunc ones
    # keep ``.ufunc`` (fused groups call the ufunc directly, block by block)
    for op in UNARY + BINARY + LOGICAL + ["maximum", "minimum", "where", "copy", "cast",
                                           *REDUCTIONS]:
        assert KERNELS[op].__module__ == "rtx_cpu.parallel", op
    for op in UNARY + BINARY + LOGICAL:
        assert KERNELS[op].ufunc is BASE[op].ufunc, op


def test_small_ops_are_one_call(runs):
    x = rc.from_numpy(np.ones((64, 64), np.float32))
    (x + x).exp().sum()
    assert not runs


# -- the thread count ---------------------------------------------------------------


def test_default_thread_count(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert thread_setting._default() == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # PyTorch's rule: the variable wins
    assert thread_setting._default() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "zero")
    assert thread_setting._default() == cores


def test_set_num_threads_is_what_the_backend_uses():
    old = rc.get_num_threads()
    try:
        rc.set_num_threads(3)
        assert rc.get_num_threads() == 3 == thread_setting.count() == fused.threads()
    finally:
        rc.set_num_threads(old)


_FORK_SCRIPT = """
import os, numpy as np, rtxcore as rc
rc.set_num_threads(2)
x = rc.from_numpy(np.ones((1024, 1024), np.float32))
(x + x).sum()  # the parent's pool is running
pid = os.fork()
if pid == 0:
    os._exit(0 if float((x + x).sum()) == 2.0 * 1024 * 1024 else 3)
print(os.waitpid(pid, 0)[1])
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_split_ops_in_a_forked_child():
    # fork copies the calling thread alone: the child makes a pool of its own
    # instead of waiting forever on the parent's threads
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "0"
