"""Autograd as a PyTorch user meets it: ``requires_grad``/``.grad``/``grad_fn``,
``backward`` and ``autograd.grad``, the grad modes (per thread), in-place ops and
the version check, the engine (deep chains, freeing the graph, flat memory),
``autograd.Function``, ``gradcheck``, drawing a graph, and moving between devices.
The per-op backward rules are checked in test_autograd_ops.py."""

from __future__ import annotations

import gc
import subprocess
import sys
import types
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.autograd import Function, GradcheckError, gradcheck, gradgradcheck
from rtxcore.testing import assert_close, available_devices


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """A test that leaks a grad mode fails on its own asserts; don't let the leak
    fail every test after it as well."""
    yield
    from rtxcore.autograd.grad_mode import _state

    _state.enabled, _state.inference = True, False


def leaf(data, device="cpu", dtype=rc.float32):
    return rc.tensor(np.asarray(data), dtype=dtype, device=device, requires_grad=True)


def npv(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


def other_device(device: str) -> str | None:
    """A device other than ``device`` (for transfers), or None."""
    devs = [d for d in available_devices(complete=True) if d != device]
    return devs[0] if devs else None


# -- 1. the Tensor API ------------------------------------------------------------------------

CREATORS = {
    "tensor": lambda d: rc.tensor([1.0, 2.0], device=d, requires_grad=True),
    "zeros": lambda d: rc.zeros(2, 3, device=d, requires_grad=True),
    "ones": lambda d: rc.ones((2, 3), device=d, requires_grad=True),
    "full": lambda d: rc.full((2,), 1.5, device=d, requires_grad=True),
    "empty": lambda d: rc.empty(4, device=d, requires_grad=True),
    "rand": lambda d: rc.rand(3, device=d, requires_grad=True),
    "randn": lambda d: rc.randn(3, device=d, requires_grad=True),
    "arange": lambda d: rc.arange(0.0, 3.0, device=d, requires_grad=True),
    "arange_dtype": lambda d: rc.arange(3, dtype=rc.float32, device=d, requires_grad=True),
    "zeros_like": lambda d: rc.zeros_like(rc.ones(2, device=d), requires_grad=True),
    "ones_like": lambda d: rc.ones_like(rc.ones(2, device=d), requires_grad=True),
    "empty_like": lambda d: rc.empty_like(rc.ones(2, device=d), requires_grad=True),
    "full_like": lambda d: rc.full_like(rc.ones(2, device=d), 7.0, requires_grad=True),
    "rand_like": lambda d: rc.rand_like(rc.ones(2, device=d), requires_grad=True),
    "randn_like": lambda d: rc.randn_like(rc.ones(2, device=d), requires_grad=True),
    "eye": lambda d: rc.eye(3, device=d, requires_grad=True),
    "linspace": lambda d: rc.linspace(0, 1, 5, device=d, requires_grad=True),
}


@pytest.mark.parametrize("name", list(CREATORS))
def test_creation_requires_grad(device, name):
    t = CREATORS[name](device)
    assert t.requires_grad and t.is_leaf and t.grad_fn is None and t.grad is None
    assert t.dtype == rc.float32
    # the flag takes effect: an op on it records, and backward reaches it
    (t * 2).sum().backward()
    assert_close(t.grad, np.full(tuple(t.shape), 2.0, np.float32))


@pytest.mark.parametrize("name", ["zeros", "ones", "rand", "tensor"])
def test_creation_default_is_no_grad(name):
    t = {"zeros": lambda: rc.zeros(2), "ones": lambda: rc.ones(2), "rand": lambda: rc.rand(2),
         "tensor": lambda: rc.tensor([1.0])}[name]()
    assert not t.requires_grad and t.is_leaf and t.grad_fn is None
    assert not (t * 2).requires_grad


def test_requires_grad_method_and_property(device):
    x = rc.ones(3, device=device)
    assert x.requires_grad_() is x
    assert x.requires_grad and x.is_leaf
    x.requires_grad_(False)
    assert not x.requires_grad and not (x * 2).requires_grad
    x.requires_grad = True
    assert (x * 2).requires_grad


@pytest.mark.parametrize("make", [lambda: rc.arange(3), lambda: rc.tensor([1, 2]),
                                  lambda: rc.tensor([True, False])])
def test_requires_grad_on_non_float_raises(make):
    t = make()
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        t.requires_grad = True
    assert not t.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        rc.arange(3, requires_grad=True)


def test_requires_grad_on_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="detach"):
        y.requires_grad_(False)
    y.requires_grad_(True)  # already does: allowed, as in PyTorch
    assert y.requires_grad and y.grad_fn is not None


def test_is_leaf(device):
    x = leaf([1.0, 2.0], device)
    c = rc.ones(2, device=device)
    assert x.is_leaf and c.is_leaf
    y = x * c
    assert not y.is_leaf
    assert (c * 3).is_leaf  # nothing in it requires grad
    with rc.no_grad():
        z = x * 3
    assert z.is_leaf and not z.requires_grad
    assert x.detach().is_leaf


def test_grad_allocated_then_accumulated(device):
    x = leaf([1.0, 2.0, 3.0], device)
    assert x.grad is None
    (x * x).sum().backward()
    g1 = x.grad
    assert g1 is not None and g1.device == x.device and g1.dtype == x.dtype
    assert not g1.requires_grad and g1.grad_fn is None
    assert_close(g1, np.array([2.0, 4.0, 6.0], np.float32))
    (x * 10).sum().backward()
    assert_close(x.grad, np.array([12.0, 14.0, 16.0], np.float32))
    x.grad = None
    (x * 3).sum().backward()
    assert_close(x.grad, np.full(3, 3.0, np.float32))


def test_grad_does_not_alias_the_seed_gradient(device):
    x = leaf([1.0, 2.0], device)
    seed = rc.tensor([1.0, 1.0], device=device)
    (x + 0).backward(seed)  # the grad arriving at x is the seed itself
    (x + 0).backward(seed)  # accumulating into .grad must not write into seed
    assert_close(seed, np.ones(2, np.float32))
    assert_close(x.grad, np.full(2, 2.0, np.float32))


def test_grad_setter_validation(device):
    x = leaf([1.0, 2.0], device)
    x.grad = rc.tensor([5.0, 6.0], device=device)
    assert_close(x.grad, np.array([5.0, 6.0], np.float32))
    (x * 1).sum().backward()  # accumulates onto the assigned grad
    assert_close(x.grad, np.array([6.0, 7.0], np.float32))
    with pytest.raises(RuntimeError, match=r"\(3,\)"):
        x.grad = rc.zeros(3, device=device)
    with pytest.raises(RuntimeError, match="different type"):
        x.grad = rc.zeros(2, dtype=rc.int64, device=device)
    with pytest.raises(TypeError, match="Tensor or None"):
        x.grad = [1.0, 2.0]
    other = other_device(device)
    if other is not None:
        with pytest.raises(RuntimeError, match="different device"):
            x.grad = rc.zeros(2, device=other)
    assert_close(x.grad, np.array([6.0, 7.0], np.float32))  # failed sets change nothing
    x.grad = None
    assert x.grad is None


def test_grad_fn_names_and_next_functions():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0])
    c = rc.tensor([5.0, 6.0])
    a = x * c
    b = a + w
    s = b.sum()
    assert a.grad_fn.name() == "MulBackward" and type(a.grad_fn).__name__ == "MulBackward"
    assert b.grad_fn.name() == "AddBackward"
    assert s.grad_fn.name() == "SumBackward"
    assert "MulBackward" in repr(a.grad_fn)
    # Sum -> Add
    (nxt,) = s.grad_fn.next_functions
    assert nxt[0] is b.grad_fn and nxt[1] == 0
    # Add -> (Mul, AccumulateGrad(w))
    (ea, ew) = b.grad_fn.next_functions
    assert ea[0] is a.grad_fn
    assert ew[0].name() == "AccumulateGrad" and ew[0].variable is w
    # Mul -> (AccumulateGrad(x), None for the constant)
    ex, ec = a.grad_fn.next_functions
    assert ex[0].name() == "AccumulateGrad" and ex[0].variable is x
    assert ec is None
    assert a.grad_fn.needs_input_grad == (True, False)
    # one AccumulateGrad per leaf, shared by every use
    y = x * x
    assert y.grad_fn.next_functions[0][0] is y.grad_fn.next_functions[1][0]
    assert y.grad_fn.next_functions[0][0] is a.grad_fn.next_functions[0][0]


def test_retain_grad(device):
    x = leaf([1.0, 2.0, 3.0], device)
    y = x * 2
    y.retain_grad()
    assert y.retains_grad and not x.retains_grad
    z = y * y
    z.sum().backward()
    assert_close(y.grad, 2 * np.array([2.0, 4.0, 6.0], np.float32))
    assert_close(x.grad, 8 * np.array([1.0, 2.0, 3.0], np.float32))
    with pytest.warns(UserWarning, match="not a leaf"):
        assert z.grad is None  # not retained, and PyTorch's warning says so
    y2 = x * 3
    y2.retain_grad()
    x.retain_grad()  # a leaf keeps its grad anyway: no-op
    (y2 * 1).sum().backward()
    assert_close(y2.grad, np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        rc.ones(2, device=device).retain_grad()


def test_leaf_hook_runs_for_autograd_grad(device):
    x = leaf([1.0, 2.0], device)
    x.register_hook(lambda g: g * 10)
    (g,) = rc.autograd.grad((x * x).sum(), x)
    assert_close(g, np.array([20.0, 40.0], np.float32))
    assert x.grad is None


def test_detach_shares_memory_and_leaves_graph(device):
    x = leaf([1.0, 2.0, 3.0], device)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    assert not (d * x).detach().requires_grad
    d[0] = 100.0  # the same memory
    assert_close(y.detach(), np.array([100.0, 4.0, 6.0], np.float32))
    # gradients don't flow through a detached tensor
    z = (d * x).sum() + y.sum()
    z.backward()
    assert_close(x.grad, np.array([100.0 + 2, 4.0 + 2, 6.0 + 2], np.float32))
    # detach() of a leaf shares the leaf's memory
    xd = x.detach()
    xd.add_(1.0)  # allowed: xd needs no grad
    assert_close(x.detach(), np.array([2.0, 3.0, 4.0], np.float32))
    assert x.requires_grad and x.is_leaf


def test_detach_inplace(device):
    x = leaf([1.0, 2.0], device)
    y = x * 2
    assert y.detach_() is y
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    assert_close(y, np.array([2.0, 4.0], np.float32))
    assert not (y * x.detach()).requires_grad
    (y * x).sum().backward()  # y is a constant now
    assert_close(x.grad, np.array([2.0, 4.0], np.float32))


def test_hook_on_leaf(device):
    x = leaf([1.0, 2.0], device)
    seen = []

    def double(g):
        seen.append(npv(g))
        return g * 2

    h = x.register_hook(double)
    (x * 3).sum().backward()
    assert_close(x.grad, np.full(2, 6.0, np.float32))
    np.testing.assert_array_equal(seen[0], [3.0, 3.0])
    h.remove()
    x.grad = None
    (x * 3).sum().backward()
    assert_close(x.grad, np.full(2, 3.0, np.float32))
    assert len(seen) == 1
    # a hook returning None leaves the gradient alone
    x.grad = None
    x.register_hook(lambda g: None)
    (x * 3).sum().backward()
    assert_close(x.grad, np.full(2, 3.0, np.float32))
    with pytest.raises(RuntimeError, match="doesn't require"):
        rc.ones(2).register_hook(lambda g: g)


def test_hook_on_non_leaf(device):
    x = leaf([1.0, 2.0], device)
    y = x * x
    seen = []

    def double(g):
        seen.append(npv(g))
        return g * 2

    h = y.register_hook(double)
    (y * 5).sum().backward(retain_graph=False)
    np.testing.assert_array_equal(seen[0], [5.0, 5.0])
    assert_close(x.grad, 2 * 5 * 2 * np.array([1.0, 2.0], np.float32))  # doubled
    h.remove()
    x.grad = None
    y = x * x
    y.register_hook(double).remove()
    (y * 5).sum().backward()
    assert_close(x.grad, 5 * 2 * np.array([1.0, 2.0], np.float32))
    assert len(seen) == 1


def test_repr_shows_autograd_state():
    x = leaf([1.0, 2.0])
    assert "requires_grad=True" in repr(x)
    y = x * 2
    assert "grad_fn=<MulBackward>" in repr(y)
    assert "requires_grad" not in repr(y)
    s = y.sum()
    assert "grad_fn=<SumBackward>" in repr(s)
    assert "grad" not in repr(rc.tensor([1.0, 2.0]))
    assert "grad" not in repr(y.detach())


# -- 2. backward() and autograd.grad() ------------------------------------------------------


def test_implicit_gradient_only_for_scalars(device):
    x = leaf(np.ones((2, 3)), device)
    y = x * 2
    with pytest.raises(RuntimeError, match="scalar") as ei:
        y.backward()
    assert "[2, 3]" in str(ei.value) and "gradient" in str(ei.value)
    assert x.grad is None
    # a one-element tensor of any rank is fine
    (x.sum().reshape(1, 1) * 1).backward()
    assert_close(x.grad, np.ones((2, 3), np.float32))


def test_explicit_gradient(device):
    x = leaf([1.0, 2.0, 3.0], device)
    y = x * x
    y.backward(gradient=rc.tensor([1.0, 10.0, 100.0], device=device))
    assert_close(x.grad, np.array([2.0, 40.0, 600.0], np.float32))
    y2 = x * 2
    with pytest.raises(RuntimeError, match="shape") as ei:
        y2.backward(gradient=rc.ones(2, 2, device=device))
    assert "(2, 2)" in str(ei.value) and "(3,)" in str(ei.value)
    with pytest.raises(RuntimeError, match="shape"):
        y2.backward(gradient=rc.ones(1, device=device))


def test_backward_inputs_restricts_accumulation(device):
    a = leaf([1.0, 2.0], device)
    b = leaf([3.0, 4.0], device)
    y = (a * b).sum()
    y.backward(inputs=[a])
    assert_close(a.grad, np.array([3.0, 4.0], np.float32))
    assert b.grad is None
    z = (a * b).sum()
    z.backward(inputs=b)
    assert_close(b.grad, np.array([1.0, 2.0], np.float32))
    assert_close(a.grad, np.array([3.0, 4.0], np.float32))  # untouched
    # a non-leaf input gets its .grad too
    h = a * 3
    (h * b).sum().backward(inputs=[h])
    assert_close(h.grad, np.array([3.0, 4.0], np.float32))
    assert_close(a.grad, np.array([3.0, 4.0], np.float32))
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (a * b).sum().backward(inputs=[])


def test_autograd_grad_returns_without_touching_grad(device):
    x = leaf([1.0, 2.0, 3.0], device)
    w = leaf([0.5, 0.5, 0.5], device)
    y = x * x * w
    gx, gw = rc.autograd.grad(y, [x, w], grad_outputs=rc.ones(3, device=device), retain_graph=True)
    assert_close(gx, np.array([1.0, 2.0, 3.0], np.float32))
    assert_close(gw, np.array([1.0, 4.0, 9.0], np.float32))
    assert x.grad is None and w.grad is None
    assert not gx.requires_grad
    (gx2,) = rc.autograd.grad(y.sum(), x)
    assert_close(gx2, np.array([1.0, 2.0, 3.0], np.float32))
    assert x.grad is None


def test_autograd_grad_create_graph(device):
    x = leaf([1.0, 2.0], device)
    y = (x ** 3).sum()
    (g,) = rc.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    assert_close(g, np.array([3.0, 12.0], np.float32))
    (gg,) = rc.autograd.grad(g.sum(), x)
    assert_close(gg, np.array([6.0, 12.0], np.float32))
    assert x.grad is None


def test_autograd_grad_allow_unused(device):
    x = leaf([1.0, 2.0], device)
    unused = leaf([5.0], device)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True") as ei:
        rc.autograd.grad(y, [x, unused], retain_graph=True)
    assert "input 1" in str(ei.value)
    gx, gu = rc.autograd.grad(y, [x, unused], allow_unused=True)
    assert gu is None
    assert_close(gx, np.full(2, 2.0, np.float32))


def test_second_backward_needs_retain_graph(device):
    x = leaf([1.0, 2.0], device)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    x.grad = None
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = npv(x.grad)
    y.backward(retain_graph=True)
    y.backward()
    expect = np.exp([1.0, 2.0]) * (np.array([1.0, 2.0]) + 1)
    np.testing.assert_allclose(first, expect, rtol=1e-5)
    np.testing.assert_allclose(npv(x.grad), 3 * expect, rtol=1e-5)
    with pytest.raises(RuntimeError, match="second time"):
        rc.autograd.grad(y, x)


def test_backward_of_tensor_not_requiring_grad(device):
    t = rc.ones(2, device=device).sum()
    with pytest.raises(RuntimeError, match="does not require grad"):
        t.backward()
    with rc.no_grad():
        u = (leaf([1.0], device) * 2).sum()
    with pytest.raises(RuntimeError, match="does not require grad"):
        u.backward()
    x = leaf([1.0], device)
    with pytest.raises(RuntimeError, match="does not require grad"):
        rc.autograd.grad((x * 2).sum(), rc.ones(1, device=device))


# -- 3. grad modes -------------------------------------------------------------------------


def test_no_grad_context_and_decorator(device):
    x = leaf([1.0, 2.0], device)
    assert rc.is_grad_enabled()
    with rc.no_grad():
        assert not rc.is_grad_enabled()
        y = x * 2
        assert not y.requires_grad and y.grad_fn is None
        with rc.enable_grad():
            assert rc.is_grad_enabled()
            assert (x * 2).requires_grad
        assert not rc.is_grad_enabled()
    assert rc.is_grad_enabled() and (x * 2).requires_grad

    @rc.no_grad()
    def f(t):
        assert not rc.is_grad_enabled()
        return t * 2

    @rc.no_grad
    def f_bare(t):
        return t * 2

    assert not f(x).requires_grad and not f_bare(x).requires_grad
    assert f.__name__ == "f"
    assert rc.is_grad_enabled()


def test_enable_grad_decorator():
    x = leaf([1.0])

    @rc.enable_grad()
    def f(t):
        return t * 2

    @rc.enable_grad
    def f_bare(t):
        return t * 2

    with rc.no_grad():
        assert f(x).requires_grad and f_bare(x).requires_grad
        assert not rc.is_grad_enabled()


def test_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with rc.no_grad():
            raise ValueError
    assert rc.is_grad_enabled()

    @rc.no_grad()
    def boom():
        raise ValueError

    with pytest.raises(ValueError):
        boom()
    assert rc.is_grad_enabled()


def test_set_grad_enabled():
    x = leaf([1.0])
    with rc.set_grad_enabled(False):
        assert not rc.is_grad_enabled() and not (x * 2).requires_grad
        with rc.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not rc.is_grad_enabled()
    assert rc.is_grad_enabled()
    # called on its own, it switches until switched back (as in PyTorch)
    try:
        rc.set_grad_enabled(False)
        assert not rc.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        rc.set_grad_enabled(True)
    assert rc.is_grad_enabled()

    # as a decorator it applies inside the function only, not from decoration on
    @rc.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert rc.is_grad_enabled()
    assert not f(x).requires_grad
    assert rc.is_grad_enabled() and (x * 2).requires_grad


def test_inference_mode():
    x = leaf([1.0])
    with rc.inference_mode():
        assert not rc.is_grad_enabled() and rc.autograd.is_inference_mode_enabled()
        assert not (x * 2).requires_grad
        with rc.inference_mode(False):
            assert not rc.autograd.is_inference_mode_enabled()
    assert rc.is_grad_enabled() and not rc.autograd.is_inference_mode_enabled()

    @rc.inference_mode()
    def f(t):
        return t * 2

    @rc.inference_mode
    def f_bare(t):
        return t * 2

    assert not f(x).requires_grad and not f_bare(x).requires_grad
    assert rc.is_grad_enabled() and (x * 2).requires_grad


def test_grad_mode_is_thread_local():
    n_threads, iters = 4, 50
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            barrier.wait()
            if k == 0:
                with rc.no_grad():
                    for _ in range(iters):
                        x = leaf([1.0, 2.0, 3.0])
                        y = (x * x).exp().sum()
                        assert not rc.is_grad_enabled()
                        assert not y.requires_grad and y.grad_fn is None
            else:
                for i in range(iters):
                    assert rc.is_grad_enabled()
                    v = np.array([1.0, 2.0, 3.0]) * (k + i)
                    x = leaf(v, dtype=rc.float64)
                    y = (x * x * float(k)).sum()
                    assert y.requires_grad
                    y.backward()
                    np.testing.assert_allclose(npv(x.grad), 2 * k * v)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, mid-op and mid-backward
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    assert rc.is_grad_enabled()


def test_new_thread_starts_with_grad_enabled():
    seen = []
    with rc.no_grad():
        t = threading.Thread(target=lambda: seen.append(rc.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


# -- 4. in-place ops -------------------------------------------------------------------------

LEAF_INPLACE = {
    "add_": lambda x: x.add_(1.0),
    "mul_": lambda x: x.mul_(2.0),
    "zero_": lambda x: x.zero_(),
    "iadd": lambda x: x.__iadd__(1.0),
    "setitem": lambda x: x.__setitem__(0, 1.0),
    "view_mul_": lambda x: x[0].mul_(2.0),
}


@pytest.mark.parametrize("op", list(LEAF_INPLACE))
def test_inplace_on_leaf_requiring_grad_raises(device, op):
    x = leaf([1.0, 2.0, 3.0], device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        LEAF_INPLACE[op](x)
    assert_close(x.detach(), np.array([1.0, 2.0, 3.0], np.float32))  # unchanged
    assert x.is_leaf and x.requires_grad


@pytest.mark.parametrize("op", list(LEAF_INPLACE))
def test_inplace_on_leaf_under_no_grad(device, op):
    x = leaf([1.0, 2.0, 3.0], device)
    with rc.no_grad():
        LEAF_INPLACE[op](x)
    assert x.is_leaf and x.requires_grad and x.grad_fn is None
    (x * 2).sum().backward()
    assert_close(x.grad, np.full(3, 2.0, np.float32))


def test_optimizer_style_update(device):
    p = leaf([1.0, 2.0], device)
    lr = 0.1
    for _ in range(3):
        loss = (p * p).sum()
        loss.backward()
        with rc.no_grad():
            p.sub_(lr * p.grad)
        p.grad = None
    # p <- p * (1 - 2 lr) each step
    assert_close(p.detach(), np.array([1.0, 2.0], np.float32) * 0.8 ** 3)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None and p.grad is None
    # a graph that saved p before an update under no_grad is stale
    y = (p * p).sum()
    with rc.no_grad():
        p.sub_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_saved_output_modified_in_place(device):
    x = leaf([1.0, 2.0], device)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as ei:
        y.sum().backward()
    assert "ExpBackward" in str(ei.value)


def test_saved_input_modified_in_place(device):
    x = leaf([1.0, 2.0], device)
    a = x * 1
    b = a * a
    a.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as ei:
        b.sum().backward()
    assert "version 1" in str(ei.value) and "expected version 0" in str(ei.value)


def test_modified_after_save_through_detach(device):
    x = leaf([1.0, 2.0], device)
    y = x.exp()
    y.detach().zero_()  # the same memory: the version check sees it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_inplace_on_non_leaf(device):
    x = leaf([1.0, 2.0, 3.0], device)
    y = x * 2
    assert y.mul_(3) is y
    assert y.grad_fn is not None and not y.is_leaf
    y.sum().backward()
    assert_close(x.grad, np.full(3, 6.0, np.float32))


def test_inplace_chain_exp_relu(device):
    v = np.array([-1.0, 0.5, 2.0])
    x = leaf(v, device)
    y = x * 1
    y.exp_()
    y.relu_()
    y.sum().backward()
    assert_close(x.grad, np.exp(v).astype(np.float32), rtol=1e-5, atol=1e-6)
    x.grad = None
    y = x * 1
    y.relu_()
    y.mul_(y)  # reads its own old value
    y.sum().backward()
    assert_close(x.grad, (2 * np.maximum(v, 0)).astype(np.float32))


def test_inplace_with_other_requiring_grad(device):
    x = leaf([1.0, 2.0], device)
    z = leaf([10.0, 20.0], device)
    y = x * 1
    y.add_(z)
    (y * y).sum().backward()
    assert_close(z.grad, np.array([22.0, 44.0], np.float32))
    assert_close(x.grad, np.array([22.0, 44.0], np.float32))
    # mul_ by a tensor requiring grad reads the old y for z's gradient
    x.grad = z.grad = None
    y = x * 1
    y.mul_(z)
    y.sum().backward()
    assert_close(z.grad, np.array([1.0, 2.0], np.float32))
    assert_close(x.grad, np.array([10.0, 20.0], np.float32))


def test_inplace_makes_no_grad_tensor_require_grad(device):
    z = leaf([2.0, 3.0], device)
    buf = rc.ones(2, device=device)
    buf.mul_(z)
    assert buf.requires_grad and not buf.is_leaf
    buf.sum().backward()
    assert_close(z.grad, np.ones(2, np.float32))


def _torch_view_inplace(case):
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = torch.tensor([10.0, 20.0], requires_grad=True)
    y = x * 1
    case(y, z)
    (y * y).sum().backward()
    return x.grad.numpy(), z.grad.numpy() if z.grad is not None else None


def _view_mul(y, z):
    y[0].mul_(5)


def _view_iadd(y, z):
    y[1:] += z


def _view_slice_mul_tensor(y, z):
    y[:2].mul_(z)


# hand-computed: y = [1, 2, 3]; loss = sum(y_final ** 2)
VIEW_CASES = {
    # y = [5, 2, 3]: dx = 2 y * [5, 1, 1]
    "mul_": (_view_mul, [50.0, 4.0, 6.0], None),
    # y = [1, 12, 23]: dx = 2 y, dz = 2 y[1:]
    "iadd": (_view_iadd, [2.0, 24.0, 46.0], [24.0, 46.0]),
    # y = [10, 40, 3]: dx = 2 y * [10, 20, 1], dz = 2 y[:2] * [1, 2]
    "mul_tensor": (_view_slice_mul_tensor, [200.0, 1600.0, 6.0], [20.0, 160.0]),
}


@pytest.mark.parametrize("case", list(VIEW_CASES))
def test_inplace_through_view_of_non_leaf(device, case):
    fn, gx, gz = VIEW_CASES[case]
    x = leaf([1.0, 2.0, 3.0], device)
    z = leaf([10.0, 20.0], device)
    y = x * 1
    fn(y, z)
    (y * y).sum().backward()
    assert_close(x.grad, np.array(gx, np.float32))
    if gz is None:
        assert z.grad is None
    else:
        assert_close(z.grad, np.array(gz, np.float32))


@pytest.mark.parametrize("case", list(VIEW_CASES))
def test_inplace_through_view_matches_torch(case):
    fn, gx, gz = VIEW_CASES[case]
    tx, tz = _torch_view_inplace(fn)
    np.testing.assert_allclose(tx, gx)
    if gz is not None:
        np.testing.assert_allclose(tz, gz)


def test_view_sees_base_history(device):
    x = leaf([1.0, 2.0, 3.0], device)
    y = x * 1
    v = y[1:]
    y.mul_(2)  # v shares y's memory; gradients through v use the new values
    (v * 1).sum().backward()
    assert_close(x.grad, np.array([0.0, 2.0, 2.0], np.float32))


def test_view_of_view_changed_through_sibling(device):
    # two views of one base; writing through one is seen by the other's gradient
    x = leaf([1.0, 2.0, 3.0, 4.0], device)
    y = x * 1
    a, b = y[:2], y[1:3]
    a.mul_(3)  # y[1] (shared with b) is now 3 * x[1]
    (b * 1).sum().backward()
    assert_close(x.grad, np.array([0.0, 3.0, 1.0, 0.0], np.float32))


def test_setitem_into_buffer(device):
    w = leaf([1.0, 2.0, 3.0, 4.0], device)
    buf = rc.zeros(3, 4, device=device)
    buf[1] = w * 2
    assert buf.requires_grad and not buf.is_leaf
    buf.sum().backward()
    assert_close(w.grad, np.full(4, 2.0, np.float32))
    # overwritten elements get no gradient from the old value
    x = leaf(np.ones((2, 3)), device)
    y = x * 3
    y[0, 1:] = w[:2]
    w.grad = None
    (y * rc.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)).sum().backward()
    assert_close(x.grad, np.array([[3.0, 0.0, 0.0], [12.0, 15.0, 18.0]], np.float32))
    assert_close(w.grad, np.array([2.0, 3.0, 0.0, 0.0], np.float32))


# -- 5. the engine -----------------------------------------------------------------------------


def test_deep_chain_has_no_recursion_limit():
    x = leaf([1.0, 2.0], dtype=rc.float64)
    y = x
    n = 100_000
    for i in range(n // 2):
        y = y * 1.0000001
        y = y + 0.0
    y.sum().backward()
    np.testing.assert_allclose(npv(x.grad), np.full(2, 1.0000001 ** (n // 2)), rtol=1e-9)
    del y
    gc.collect()


def _node_refs(y):
    """Weakrefs to every node behind ``y`` and to the leaves' AccumulateGrads."""
    refs, seen, stack = [], set(), [y.grad_fn]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        refs.append(weakref.ref(n))
        stack.extend(e[0] for e in n.next_functions if e is not None)
    return refs


def _build(x, w):
    h = (x @ w).relu()
    h2 = h * h
    return h2.exp().mean()


@pytest.mark.parametrize("with_gc", [True, False])
def test_graph_freed_when_output_dies(with_gc):
    x = leaf(np.ones((3, 4)))
    w = leaf(np.full((4, 2), 0.1))
    was = gc.isenabled()
    if not with_gc:
        gc.collect()
        gc.disable()
    try:
        y = _build(x, w)
        mid = y.grad_fn.next_functions[0][0]
        refs = _node_refs(y)
        r_mid = weakref.ref(mid)
        assert len(refs) >= 5 and all(r() is not None for r in refs)
        del mid
        del y
        if with_gc:
            gc.collect()
        # refcounting alone frees it when gc is off: the graph holds no cycles
        assert r_mid() is None
        assert all(r() is None for r in refs), [r() for r in refs if r() is not None]
    finally:
        if was:
            gc.enable()
    # the leaves themselves are fine
    assert x.grad is None and x.requires_grad


def test_graph_freed_after_backward_and_leaf_drop():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        x = leaf(np.ones((3, 4)))
        w = leaf(np.full((4, 2), 0.1))
        y = _build(x, w)
        refs = _node_refs(y)
        y.backward()
        del y
        assert all(r() is None for r in refs)
        rx = weakref.ref(x)
        del x  # the leaf itself is not kept alive by a cycle through its grad or node
        assert rx() is None
    finally:
        if was:
            gc.enable()


def test_saved_tensors_released_after_backward():
    x = leaf([1.0, 2.0, 3.0])
    a = x * 2
    b = a * a  # saves a
    r = weakref.ref(a)
    del a
    gc.collect()
    assert r() is not None  # only the graph holds it
    s = b.sum()
    s.backward(retain_graph=True)
    gc.collect()
    assert r() is not None
    s.backward()
    gc.collect()
    assert r() is None
    assert_close(x.grad, 2 * 8 * np.array([1.0, 2.0, 3.0], np.float32))
    # the saved result of exp is released too
    e = x.exp()
    es = e.sum()
    node = e.grad_fn
    assert len(node.saved_tensors) == 1
    del e
    es.backward()
    with pytest.raises(RuntimeError, match="second time"):
        node.saved_tensors


def test_memory_flat_over_training_loop():
    rng = np.random.default_rng(0)
    X = rc.tensor(rng.standard_normal((8, 3)), dtype=rc.float32)
    T = rc.tensor(rng.standard_normal((8, 1)), dtype=rc.float32)
    w = rc.zeros(3, 1, requires_grad=True)
    lr = 0.05
    losses = []

    def step():
        loss = ((X @ w - T) ** 2).mean()
        loss.backward()
        with rc.no_grad():
            w.sub_(lr * w.grad)
        w.grad = None
        return loss

    for _ in range(1000):
        loss = step()
    losses.append(loss.item())
    del loss
    gc.collect()
    n_objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(9000):
            loss = step()
        losses.append(loss.item())
        del loss
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"traced memory grew by {grown} bytes over 9000 iterations"
    assert len(gc.get_objects()) - n_objects < 50
    # and it did train: least squares reached (up to a small residual)
    lstsq = np.linalg.lstsq(npv(X), npv(T), rcond=None)[0]
    assert_close(w.detach(), lstsq.astype(np.float32), rtol=1e-3, atol=1e-3)
    assert losses[1] <= losses[0]


# -- 6. autograd.Function ------------------------------------------------------------------


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class ScaledMul(Function):
    """a * b * k for a number k: needs_input_grad per argument, None for k."""

    @staticmethod
    def forward(ctx, a, b, k):
        ctx.save_for_backward(a, b)
        ctx.k = k
        ctx.needs = ctx.needs_input_grad
        return a * b * k

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g * b * ctx.k if ctx.needs_input_grad[0] else None
        gb = g * a * ctx.k if ctx.needs_input_grad[1] else None
        return ga, gb, None


class SumAndDiff(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b, a - b

    @staticmethod
    def backward(ctx, g_sum, g_diff):
        return g_sum + g_diff, g_sum - g_diff


class Cube(Function):
    """Backward made of differentiable ops: double backward works."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x


def test_function_exp(device):
    v = np.array([0.0, 1.0, -1.0])
    x = leaf(v, device)
    y = Exp.apply(x)
    assert_close(y, np.exp(v).astype(np.float32), rtol=1e-6, atol=1e-6)
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "ExpBackward" and type(y.grad_fn).__name__ == "ExpBackward"
    assert "grad_fn=<ExpBackward>" in repr(y)
    assert y.grad_fn.next_functions[0][0].variable is x
    (y * 2).sum().backward()
    assert_close(x.grad, (2 * np.exp(v)).astype(np.float32), rtol=1e-6, atol=1e-6)


def test_function_without_grad_inputs_records_nothing():
    y = Exp.apply(rc.tensor([1.0]))
    assert not y.requires_grad and y.grad_fn is None
    with rc.no_grad():
        y = Exp.apply(leaf([1.0]))
    assert not y.requires_grad


def test_function_needs_input_grad_and_non_tensor_args(device):
    a = leaf([1.0, 2.0], device)
    b = rc.tensor([3.0, 4.0], device=device)
    out = ScaledMul.apply(a, b, 10.0)
    assert out.grad_fn.name() == "ScaledMulBackward"
    assert out.grad_fn.needs_input_grad == (True, False, False)
    assert out.grad_fn.needs == (True, False, False)  # already known in forward
    out.sum().backward()
    assert_close(a.grad, np.array([30.0, 40.0], np.float32))
    assert b.grad is None
    # both inputs requiring grad
    b.requires_grad_()
    a.grad = None
    ScaledMul.apply(a, b, 2.0).sum().backward()
    assert_close(a.grad, np.array([6.0, 8.0], np.float32))
    assert_close(b.grad, np.array([2.0, 4.0], np.float32))


def test_function_two_outputs(device):
    a = leaf([1.0, 2.0], device)
    b = leaf([5.0, 7.0], device)
    s, d = SumAndDiff.apply(a, b)
    assert s.grad_fn is d.grad_fn and s.output_nr == 0 and d.output_nr == 1
    (s * 2 + d * 3).sum().backward()
    assert_close(a.grad, np.full(2, 5.0, np.float32))
    assert_close(b.grad, np.full(2, -1.0, np.float32))
    # only one output used: backward still gets one gradient per output, zeros
    # for the unused one
    a.grad = b.grad = None
    s, d = SumAndDiff.apply(a, b)
    d.sum().backward()
    assert_close(a.grad, np.ones(2, np.float32))
    assert_close(b.grad, -np.ones(2, np.float32))
    a.grad = b.grad = None
    s, d = SumAndDiff.apply(a, b)
    s.sum().backward()
    assert_close(a.grad, np.ones(2, np.float32))
    assert_close(b.grad, np.ones(2, np.float32))


def test_function_wrong_number_of_grads():
    class Bad(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g  # one gradient for two inputs

    class TooMany(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g

    a, b = leaf([1.0]), leaf([2.0])
    with pytest.raises(RuntimeError, match="incorrect number of gradients") as ei:
        Bad.apply(a, b).sum().backward()
    assert "BadBackward" in str(ei.value) and "expected 2, got 1" in str(ei.value)
    with pytest.raises(RuntimeError, match=r"expected 1, got 2"):
        TooMany.apply(a).sum().backward()


def test_function_wrong_grad_shape():
    class BadShape(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return rc.ones(5)

    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        BadShape.apply(leaf([1.0, 2.0])).sum().backward()


def test_function_gradcheck():
    rng = np.random.default_rng(1)
    x = leaf(rng.standard_normal(4), dtype=rc.float64)
    assert gradcheck(Exp.apply, (x,))
    a = leaf(rng.standard_normal(3), dtype=rc.float64)
    b = leaf(rng.standard_normal(3), dtype=rc.float64)
    assert gradcheck(lambda p, q: ScaledMul.apply(p, q, 1.5), (a, b))
    assert gradcheck(SumAndDiff.apply, (a, b))
    assert gradcheck(Cube.apply, (a,))


def test_function_double_backward(device):
    x = leaf([1.0, 2.0, -3.0], device)
    y = Cube.apply(x).sum()
    (g,) = rc.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    assert_close(g, 3 * np.array([1.0, 4.0, 9.0], np.float32))
    g.sum().backward()
    assert_close(x.grad, 6 * np.array([1.0, 2.0, -3.0], np.float32))
    xd = leaf(np.array([0.5, -1.5]), dtype=rc.float64)
    assert gradgradcheck(Cube.apply, (xd,))
    assert gradgradcheck(Exp.apply, (xd,))


def test_once_differentiable():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @rc.autograd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    x = leaf([3.0])
    (g,) = rc.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    assert_close(g, np.array([6.0], np.float32))
    # g depends on x through the saved tensor: differentiating it again must not
    # silently give zero (PyTorch leaves g without grad here); it raises
    with pytest.raises(RuntimeError, match="differentiate twice"):
        g.sum().backward()
    (g,) = rc.autograd.grad(Sq.apply(x).sum(), x)  # without create_graph: a plain tensor
    assert not g.requires_grad


# -- 7. gradcheck / gradgradcheck ----------------------------------------------------------


class WrongMul(Function):
    """a * b with b's gradient doubled."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, 2 * g * a


def test_gradcheck_catches_wrong_backward():
    a = leaf([1.0, 5.0, 2.0], dtype=rc.float64)  # the worst error is at element 1
    b = leaf([0.5, 0.25, 2.0], dtype=rc.float64)
    with pytest.raises(GradcheckError) as ei:
        gradcheck(WrongMul.apply, (a, b))
    msg = str(ei.value)
    assert "input 1" in msg and "index (1,)" in msg and "output element 1" in msg, msg
    assert "analytical 10.0" in msg and "numerical 4.99" in msg, msg  # 2 * a[1] vs a[1]
    assert isinstance(ei.value, RuntimeError)
    assert gradcheck(WrongMul.apply, (a, b), raise_exception=False) is False
    # the correct input alone passes
    assert gradcheck(WrongMul.apply, (a, b.detach()))
    assert a.grad is None and b.grad is None  # gradcheck leaves .grad alone


def test_gradcheck_float32_warns():
    x = leaf([0.5, 1.0])
    with pytest.warns(UserWarning, match="double precision"):
        gradcheck(lambda t: t * 2, (x,), eps=1e-3, atol=1e-2)


def test_gradcheck_needs_an_input_requiring_grad():
    with pytest.raises(ValueError, match="require gradient"):
        gradcheck(lambda t: t * 2, (rc.tensor([1.0], dtype=rc.float64),))


def test_gradgradcheck_catches_wrong_double_backward():
    class BadCube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            # the right value, but 3 x^2 as a constant: no derivative in x
            return g * 3 * (x * x).detach()

    x = leaf([0.5, -1.5], dtype=rc.float64)
    assert gradcheck(BadCube.apply, (x,))  # first derivatives are right
    assert gradgradcheck(BadCube.apply, (x,), raise_exception=False) is False
    with pytest.raises(GradcheckError, match="input 0"):
        gradgradcheck(BadCube.apply, (x,))
    assert gradgradcheck(Cube.apply, (x,))


def test_gradcheck_is_the_function_even_after_importing_its_module():
    # the submodule rtxcore.autograd.gradcheck shares the function's name
    code = ("import rtxcore.autograd.gradcheck\n"
            "from rtxcore.autograd import GradcheckError, gradcheck, gradgradcheck\n"
            "import rtxcore as rc\n"
            "assert callable(gradcheck) and rc.autograd.gradcheck is gradcheck, gradcheck\n"
            "assert callable(gradgradcheck) and issubclass(GradcheckError, RuntimeError)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert callable(rc.autograd.gradcheck)


# -- 8. drawing the graph -----------------------------------------------------------------------


def test_to_dot(device):
    x = leaf(np.ones((2, 3)), device)
    w = leaf(np.ones(3), device, dtype=rc.float64)
    y = (x.exp() * 2).sum() + (w * w).sum()
    dot = rc.autograd.to_dot(y)
    assert dot.startswith("digraph")
    assert dot.rstrip().endswith("}")
    for name in ("MulBackward", "SumBackward", "AddBackward", "ExpBackward", "AccumulateGrad"):
        assert name in dot, name
    assert "(2, 3)" in dot and "(3,)" in dot
    assert "float32" in dot and "float64" in dot
    assert str(x.device) in dot
    assert "saved result: (2, 3) float32" in dot  # exp keeps its output
    assert "saved: (3,) float64" in dot  # w * w keeps w
    assert dot.count("AccumulateGrad") == 2
    assert dot.count("->") >= 7
    y.backward()
    assert "freed" in rc.autograd.to_dot(y)


def test_to_dot_of_plain_tensor():
    dot = rc.autograd.to_dot(rc.ones(2))
    assert dot.startswith("digraph") and "Backward" not in dot
    with pytest.raises(TypeError):
        rc.autograd.to_dot([1.0])


def test_render_without_graphviz(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    y = (leaf([1.0]) * 2).sum()
    with pytest.raises(RuntimeError, match="graphviz") as ei:
        rc.autograd.render(y, str(tmp_path / "g.svg"))
    assert "to_dot" in str(ei.value)
    assert not (tmp_path / "g.svg").exists()
    with pytest.raises(ValueError, match="svg"):
        rc.autograd.render(y, str(tmp_path / "g.pdf"))


def _fake_graphviz(have_dot: bool) -> types.ModuleType:
    """The graphviz package's surface that render() uses, without the dot program."""
    mod = types.ModuleType("graphviz")

    class ExecutableNotFound(RuntimeError):
        pass

    class Source:
        def __init__(self, text: str) -> None:
            self.text = text

        def pipe(self, format: str) -> bytes:  # noqa: A002
            if not have_dot:
                raise ExecutableNotFound("failed to execute 'dot'")
            return f"<{format}>{self.text}</{format}>".encode()

    mod.ExecutableNotFound = ExecutableNotFound
    mod.Source = Source
    return mod


def test_render_writes_file(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "graphviz", _fake_graphviz(have_dot=True))
    y = (leaf([1.0]) * 2).sum()
    out = rc.autograd.render(y, str(tmp_path / "g.svg"))
    text = (tmp_path / "g.svg").read_text()
    assert out == str(tmp_path / "g.svg")
    assert text.startswith("<svg>digraph") and "MulBackward" in text
    rc.autograd.render(y, str(tmp_path / "g.out"), format="png")
    assert (tmp_path / "g.out").read_text().startswith("<png>")


def test_render_without_dot_program(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "graphviz", _fake_graphviz(have_dot=False))
    y = (leaf([1.0]) * 2).sum()
    with pytest.raises(RuntimeError, match="dot"):
        rc.autograd.render(y, str(tmp_path / "g.png"))
    assert not (tmp_path / "g.png").exists()


# -- 9. across devices -----------------------------------------------------------------------


def test_transfer_is_differentiable(device):
    other = other_device(device)
    if other is None:
        pytest.skip("needs a second device")
    v = np.array([0.0, 1.0, 2.0])
    x = leaf(v, device)
    y = x.to(other)
    assert y.requires_grad and y.device == rc.device(other)
    s = (y.exp().to(device) * 2).sum()
    s.backward()
    assert x.grad.device == x.device
    assert_close(x.grad, (2 * np.exp(v)).astype(np.float32), rtol=1e-5, atol=1e-6)
    # a leaf on the other device gets its grad there
    z = leaf(v, other)
    (z.to(device) * x).sum().backward()
    assert z.grad.device == z.device
    assert_close(z.grad, v.astype(np.float32))


def test_mixing_devices_raises(device):
    other = other_device(device)
    if other is None:
        pytest.skip("needs a second device")
    x = leaf([1.0, 2.0], device)
    with pytest.raises(RuntimeError, match="same device"):
        x * rc.ones(2, device=other)
    y = x * 2
    with pytest.raises(RuntimeError, match=other):
        y.backward(rc.ones(2, device=other))
    assert x.grad is None
