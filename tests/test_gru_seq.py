"""The GRU recurrence run as kernel calls on preallocated buffers (``_GRUSeq``)
against the same recurrence written with tensor ops (``_GRUSeqOps``): outputs
and every gradient, forward and reversed, with and without a bias, with a
strided output gradient (``batch_first``'s transpose); then gradcheck, and the
saved-tensor checks that guard it."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import gradcheck
from rtxcore.nn.rnn import _GRUSeq, _GRUSeqOps


def _inputs(device, t=4, b=3, h=5, bias=True, dtype=rc.float64):
    rc.manual_seed(1)
    mk = lambda *s: rc.randn(*s, dtype=dtype, device=device, requires_grad=True)  # noqa: E731
    return mk(t, b, 3 * h), mk(b, h), mk(3 * h, h), (mk(3 * h) if bias else None)


def _np(t):
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_kernel_recurrence_matches_tensor_ops(device, reverse, bias):
    args = _inputs(device, bias=bias)
    leaves = [a for a in args if a is not None]
    got, want = [], []
    for seq, res in ((_GRUSeq, got), (_GRUSeqOps, want)):
        out, hn = seq.apply(*args, reverse)
        # a strided gradient for the output, a plain one for h_n
        g = rc.arange(out.numel(), dtype=out.dtype, device=device).reshape(
            out.shape[1], out.shape[0], -1).transpose(0, 1) / 10
        (out * g).sum().add((hn * hn).sum()).backward()
        res += [_np(out), _np(hn)] + [_np(a.grad) for a in leaves]
        for a in leaves:
            a.grad = None
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_kernel_recurrence_gradcheck():
    gi, h0, w, b = _inputs("cpu", t=3, b=2, h=2)
    assert gradcheck(lambda *a: _GRUSeq.apply(*a, True), [gi, h0, w, b])
    assert gradcheck(lambda *a: _GRUSeq.apply(*a, False), [gi, h0, w, b])


def test_retain_graph_and_saved_versions():
    gi, h0, w, b = _inputs("cpu")
    out, _ = _GRUSeq.apply(gi, h0, w, b, False)
    loss = out.sum()
    loss.backward(retain_graph=True)
    first = _np(w.grad).copy()
    loss.backward()  # saved buffers are unchanged by a backward
    np.testing.assert_allclose(_np(w.grad), 2 * first, rtol=1e-12)
    out, _ = _GRUSeq.apply(gi, h0, w, b, False)
    with rc.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_mixed_dtypes_take_the_tensor_op_recurrence():
    gru = rc.nn.GRU(3, 4)
    x = rc.randn(5, 2, 3)
    h = rc.randn(1, 2, 4, dtype=rc.float64)
    out, hn = gru(x, h)
    ref, ref_hn = gru(x, h.float())
    assert out.dtype == rc.float64
    np.testing.assert_allclose(_np(out), _np(ref), rtol=1e-5, atol=1e-6)


def test_writing_to_the_output_leaves_backward_alone():
    gi, h0, w, b = _inputs("cpu")
    out, _ = _GRUSeq.apply(gi, h0, w, b, False)
    ref, _ = _GRUSeqOps.apply(gi, h0, w, b, False)
    y = out.sum()
    with rc.no_grad():
        out.mul_(0.0)  # sum's backward does not need out's values; the recurrence's must not see it
    y.backward()
    got = _np(w.grad).copy()
    w.grad = None
    ref.sum().backward()
    np.testing.assert_allclose(got, _np(w.grad), rtol=1e-10)
