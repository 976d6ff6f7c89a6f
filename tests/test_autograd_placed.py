"""The engine's placed gradients of view ops (``engine.Placed``) and its in-place
sums: the same gradients as writing each view's gradient into zeros and adding
the whole tensors, and nothing another edge can see is ever written in place."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import engine
from rtxcore.autograd.tape import NODES

VIEW_OPS = ("narrow", "select", "diagonal", "getitem")


@pytest.fixture
def dense_only():
    """Switch the placed rules off (each view's gradient written into zeros)."""
    saved = {op: NODES[op].__dict__["placed"] for op in VIEW_OPS}  # (the staticmethod)
    for op in VIEW_OPS:
        NODES[op].placed = None
    yield
    for op, p in saved.items():
        NODES[op].placed = p


def _grads(fn, *arrays):
    ts = [rc.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [t.grad.numpy() for t in ts]


def _programs():
    def split3(x):  # attention's q, k, v = qkv.split(n, -1)
        q, k, v = x.split(4, dim=-1)
        return (q * 2.0 + (k.transpose(0, 1) * 3.0).transpose(0, 1) + v.exp()).sum()

    def overlapping(x):  # views that share elements, and a dense use beside them
        return (x[1:3].sum() + (x[2:5] * 2.0).sum() + x[0].sum() * 5.0
                + x.diagonal().sum() * 7.0 + (x * x).sum())

    def unbind_rows(x):
        rows = x.unbind(0)
        return sum(((r * float(i + 1)).tanh().sum() for i, r in enumerate(rows)),
                   rc.tensor(0.0))

    def dense_first(x):  # a whole-tensor gradient arrives before the views' ones
        y = x * 3.0
        a, b = y.chunk(2, dim=1)
        return (y.sum() + (a * a).sum() + b.select(1, 0).sum())

    return [split3, overlapping, unbind_rows, dense_first]


@pytest.mark.parametrize("prog", _programs(), ids=lambda f: f.__name__)
def test_placed_gradients_equal_dense_ones(prog, request):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 12)).astype(np.float32)
    placed = _grads(prog, x)[0]
    request.getfixturevalue("dense_only")
    dense = _grads(prog, x)[0]
    np.testing.assert_array_equal(placed, dense)


def test_split_backward_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 9))
    (gx,) = _grads(lambda t: sum((p * float(i + 2)).sum() for i, p in
                                 enumerate(t.split([2, 3, 4], dim=-1))), x)
    want = np.concatenate([np.full((2, 5, 2), 2.0), np.full((2, 5, 3), 3.0),
                           np.full((2, 5, 4), 4.0)], axis=-1)
    np.testing.assert_array_equal(gx, want)


def test_a_sum_handed_to_two_edges_is_not_written_in_place():
    # n's gradient is a sum the engine made; add's rule hands that very tensor to
    # both c and d, which later receive more: each must get a new sum
    # (in either order of the terms: one of them runs n's node first)
    for reverse in (False, True):
        x = rc.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c, d = x * 2.0, x * 3.0
        n = c + d
        terms = [n * 1.0 + n * 1.0, c * 5.0, d * 7.0]
        if reverse:
            terms.reverse()
        (terms[0] + terms[1] + terms[2]).sum().backward()
        # dL/dc = 2 + 5, dL/dd = 2 + 7: dL/dx = 7 * 2 + 9 * 3
        np.testing.assert_array_equal(x.grad.numpy(), np.full(3, 41.0, np.float32))


def test_hooks_retain_grad_and_autograd_grad_see_dense_gradients():
    x = rc.randn(4, 6, requires_grad=True)
    y = x * 1.0
    y.retain_grad()
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    a, b = y.split(3, dim=1)
    (a.sum() * 2.0 + b.sum() * 3.0).backward()
    want = np.concatenate([np.full((4, 3), 2.0), np.full((4, 3), 3.0)], axis=1)
    np.testing.assert_array_equal(y.grad.numpy(), want)
    np.testing.assert_array_equal(seen[0], want)
    z = rc.randn(3, 4, requires_grad=True)
    (gz,) = rc.autograd.grad(z[0].sum() + z[1:].sum() * 2.0, [z])
    np.testing.assert_array_equal(gz.numpy(), np.array([[1.0] * 4, [2.0] * 4, [2.0] * 4],
                                                       np.float32))


def test_create_graph_differentiates_through_views_again():
    x = rc.tensor(np.linspace(-1.0, 1.0, 8), requires_grad=True)
    a, b = x.split(4)
    (g,) = rc.autograd.grad((a ** 3).sum() + (b ** 2).sum(), [x], create_graph=True)
    g.sum().backward()
    xs = np.linspace(-1.0, 1.0, 8)
    want = np.concatenate([6.0 * xs[:4], np.full(4, 2.0)])
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_placed_is_written_out_once_when_alone():
    p = engine.Placed(rc.ones(2, 3), "narrow", (1, 1, 3), None, (2, 5))
    np.testing.assert_array_equal(p.dense().numpy(), [[0, 1, 1, 1, 0], [0, 1, 1, 1, 0]])
