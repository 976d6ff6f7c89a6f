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


def test_a_replaced_sum_leaves_no_id_a_new_tensor_could_take():
    # w's gradient: a float64 root gradient, then float32 ones: the float64 sum is
    # replaced (another dtype); a later tensor at its address must not be taken for
    # the engine's own and written in place
    class Both(rc.autograd.Function):  # one fresh tensor for both inputs
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            tmp = g * 1.0  # noqa: F841  (a temporary, freed: its address is reused)
            gg = g * 1.0
            return gg, gg

    x = rc.tensor([1.0, 2.0], requires_grad=True)
    y = rc.tensor([1.0, 1.0], requires_grad=True)
    p, q = x * 1.0, x * 1.0
    s = Both.apply(p, q)
    w = y * 1.0
    rc.autograd.backward([w, (w * 3.0).sum(), (p * 11.0).sum(), (q * 13.0).sum(),
                          (w * s).sum(), (w * 5.0).sum()],
                         [rc.ones(2, dtype=rc.float64), None, None, None, None, None])
    # dL/ds = w = 1: dL/dp = 11 + 1, dL/dq = 13 + 1
    np.testing.assert_array_equal(x.grad.numpy(), [26.0, 26.0])


def test_a_hook_that_changes_its_gradient_in_place_leaves_placed_ones_alone():
    # add's rule hands one tensor to L and to the view; L's hook scales it in place
    # (a hook should not change its argument; one that does must not reach a view's
    # gradient that is only waiting to be written out: what the view's rule copied
    # before the placed gradients, it still sees)
    t = rc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    leaf = rc.tensor([1.0, 1.0], requires_grad=True)
    leaf.register_hook(lambda g: g.mul_(100.0))
    tt = t * 1.0
    s = leaf + tt[0:2]
    rc.autograd.backward([(tt * 2.0).sum(), (s * 1.0).sum()])
    np.testing.assert_array_equal(t.grad.numpy(), [3.0, 3.0, 2.0])
    np.testing.assert_array_equal(leaf.grad.numpy(), [100.0, 100.0])


def test_float64_and_retain_graph_through_views():
    rng = np.random.default_rng(9)
    x = rc.tensor(rng.standard_normal((5, 6)), requires_grad=True)
    a, b = x.split(3, dim=1)
    loss = (a * a).sum() + (b * 3.0).sum() + x[1].sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    want = np.concatenate([2.0 * x.detach().numpy()[:, :3], np.full((5, 3), 3.0)], axis=1)
    want[1] += 1.0
    np.testing.assert_allclose(first, want, rtol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * want, rtol=1e-15)


def test_a_post_accumulate_hook_changing_grad_in_place_leaves_other_gradients_alone():
    # add's rule hands one tensor to leaf and to t's branch; the hook scales
    # leaf.grad in place (as an optimizer step in the backward, or DDP's averaging)
    # before t's branch has read it
    t = rc.tensor([1.0, 2.0, 3.0], requires_grad=True)
    leaf = rc.ones(3, requires_grad=True)
    leaf.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(100.0))
    ((t * 2.0 + leaf) * 1.0).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(leaf.grad.numpy(), [100.0, 100.0, 100.0])
