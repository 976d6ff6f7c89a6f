"""rtx_cpu's LSTM cell as C passes (``rnn_kernels``): the array-module kernels'
bits (and so the core decomposition's), for float32 and float64, with strided
rows, without ``dc``, and the array-module kernels kept for what the C passes
don't take (float16, a row that isn't contiguous)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rtx_cpu")
from rtxcore.dispatch import xp  # noqa: E402
from rtx_cpu import rnn_kernels as R  # noqa: E402

BASE = xp.kernels(np)
CELL = R.lstm_cell_kernel(BASE["lstm_cell"])
BACK = R.lstm_cell_backward_kernel(BASE["lstm_cell_backward"])

if R._function("lstm_pre", np.dtype(np.float32)) is None:  # pragma: no cover - CI has a compiler
    pytest.skip("no C compiler: the array-module kernels run", allow_module_level=True)


def _rows(r, b, n, dtype, strided):
    """A (b, n) operand: contiguous, or every other row of a wider buffer."""
    if not strided:
        return r.uniform(-3, 3, (b, n)).astype(dtype)
    return r.uniform(-3, 3, (2 * b, n + 5)).astype(dtype)[::2, 3:3 + n]


def _operands(b, n, dtype, strided, seed=0):
    r = np.random.default_rng(seed)
    gi, gh = _rows(r, b, 4 * n, dtype, strided), _rows(r, b, 4 * n, dtype, strided)
    c_prev, dh, dc = (_rows(r, b, n, dtype, strided) for _ in range(3))
    gi[0, :4] = [0.0, -0.0, 40.0, -40.0]  # saturated gates, signed zeros
    gh[0, :4] = [0.0, -0.0, 50.0, -50.0]
    return gi, gh, c_prev, dh, dc


def _forward(kernel, gi, gh, c_prev):
    b, n = c_prev.shape
    dt = c_prev.dtype
    h, c, act = np.empty((b, n), dt), np.empty((b, n), dt), np.empty((4, b, n), dt)
    kernel(h, c, act, gi, gh, c_prev)
    return h, c, act


def _backward(kernel, dh, dc, act, c, c_prev):
    b, n = c.shape
    dt = c.dtype
    dg, dcp = np.empty((b, 4 * n), dt), np.empty((b, n), dt)
    kernel(dg, dcp, dh, dc, act, c, c_prev)
    return dg, dcp


@pytest.mark.parametrize("with_dc", [True, False])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b,n", [(1, 1), (3, 7), (64, 128)])
def test_c_passes_give_the_array_kernels_bits(b, n, dtype, strided, with_dc, monkeypatch):
    calls = []
    real = R._function
    monkeypatch.setattr(R, "_function", lambda name, dt: calls.append(name) or real(name, dt))
    gi, gh, c_prev, dh, dc = _operands(b, n, dtype, strided)
    dc = dc if with_dc else None
    want = _forward(BASE["lstm_cell"], gi, gh, c_prev)
    got = _forward(CELL, gi, gh, c_prev)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    want_b = _backward(BASE["lstm_cell_backward"], dh, dc, *want[2:0:-1], c_prev)
    got_b = _backward(BACK, dh, dc, *want[2:0:-1], c_prev)
    for g, w in zip(got_b, want_b):
        np.testing.assert_array_equal(g, w)
    assert {"lstm_pre", "lstm_back"} <= set(calls)  # the C passes ran


def test_what_the_c_passes_do_not_take_runs_the_array_kernels():
    gi, gh, c_prev, dh, dc = _operands(4, 8, np.float16, False)
    for g, w in zip(_forward(CELL, gi, gh, c_prev), _forward(BASE["lstm_cell"], gi, gh, c_prev)):
        np.testing.assert_array_equal(g, w)
    gi, gh, c_prev, dh, dc = _operands(4, 8, np.float32, False)
    gi_cols = np.asfortranarray(gi)  # rows not contiguous
    for g, w in zip(_forward(CELL, gi_cols, gh, c_prev),
                    _forward(BASE["lstm_cell"], gi, gh, c_prev)):
        np.testing.assert_array_equal(g, w)
