"""The CPU fallback and per-op dtype limits, on the fake backend (which has no
``cos`` kernel) and on a backend that declares ``op_dtypes``."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch import Backend, BackendPlugin, hookimpl
from rtxcore.dispatch.fallback import get_fallback
from rtxcore.testing import assert_close

from . import fake_backend


@contextlib.contextmanager
def _registered(plugin, name):
    """``plugin`` registered, with a fresh fallback report, until the block ends."""
    name = rc.register_backend(plugin, name=name)
    rc.fallback_report(reset=True)
    try:
        yield
    finally:
        rc.unregister_backend(name)
        rc.fallback_report(reset=True)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.delenv("RTX_FALLBACK", raising=False)
    with _registered(fake_backend, "fake-plugin"):
        yield fake_backend.CALLS


def test_off_by_default_and_the_error_names_both_remedies(fake):
    x = rc.tensor([0.0, 1.0], device="fake:0")
    with pytest.raises(NotImplementedError) as err:
        rc.cos(x)
    msg = str(err.value)
    assert "'cos'" in msg and "fake:0" in msg and "to('cpu')" in msg
    assert "set_fallback('cpu')" in msg and "RTX_FALLBACK=cpu" in msg and "now off: the default" in msg
    assert rc.fallback_report() == {}


def test_set_fallback_runs_the_op_on_cpu_warns_once_and_counts(fake):
    xn = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], np.float32)
    x = rc.tensor(xn, device="fake:0")
    with rc.set_fallback("cpu"):
        with pytest.warns(rc.FallbackWarning, match=r"cos has no kernel on fake:0.*CPU backend"):
            y = rc.cos(x.t())  # a strided view in
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second call doesn't warn again
            z = rc.cos(x[:, 1:])
        assert y.device == rc.device("fake:0") and z.device == rc.device("fake:0")
        assert_close(y.cpu(), np.cos(xn.T), rtol=1e-6)
        assert_close(z.cpu(), np.cos(xn[:, 1:]), rtol=1e-6)
        # in place, into a strided target: the result is copied back into it
        w = rc.tensor(xn, device="fake:0")
        w.t()[1:].cos_()
        want = xn.copy()
        want.T[1:] = np.cos(xn.T[1:])
        assert_close(w.cpu(), want, rtol=1e-6)
        # gradients flow through a fallback op
        v = rc.tensor([0.5, 1.0], device="fake:0", requires_grad=True)
        rc.cos(v).sum().backward()
        assert_close(v.grad.cpu(), -np.sin(np.float32([0.5, 1.0])), rtol=1e-5)
    report = rc.fallback_report()
    assert report[("fake", "cos")] >= 4
    assert "fake.cos" in str(report)
    with pytest.raises(NotImplementedError):  # the context ended: off again
        rc.cos(x)


def test_set_fallback_without_with_stays_on_until_turned_off(fake):
    x = rc.tensor([1.0], device="fake:1")
    rc.set_fallback("cpu")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rc.FallbackWarning)
            assert rc.cos(x).item() == pytest.approx(np.cos(1.0), rel=1e-6)
        assert get_fallback() == ("cpu", "set_fallback('cpu')")
    finally:
        rc.set_fallback(None)
    assert get_fallback()[0] == "error"
    with pytest.raises(ValueError, match="mode must be"):
        rc.set_fallback("gpu")


def test_env_is_read_at_every_miss_and_error_is_strict(fake, monkeypatch):
    x = rc.tensor([1.0], device="fake:0")
    monkeypatch.setenv("RTX_FALLBACK", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rc.FallbackWarning)
        assert rc.cos(x).item() == pytest.approx(np.cos(1.0), rel=1e-6)
    monkeypatch.setenv("RTX_FALLBACK", "error")
    with rc.set_fallback("cpu"):  # a program asks for it; strict CI says no
        with pytest.raises(NotImplementedError, match="now off: RTX_FALLBACK=error"):
            rc.cos(x)
    monkeypatch.setenv("RTX_FALLBACK", "sometimes")
    with pytest.raises(ValueError, match="RTX_FALLBACK='sometimes'"):
        rc.cos(x)


# -- per-op dtype limits -----------------------------------------------------------------


class LimitedBackend(Backend):
    """``limited``: the cpu kernels, but matmul declared for float32 only and
    ``eq`` for float types only."""

    name = "limited"
    shares_host_memory = True

    def op_dtypes(self, index: int) -> dict[str, frozenset[str]]:
        return {"matmul": frozenset({"float32"}), "eq": frozenset({"float16", "float32", "float64"})}

    def view(self, buffer, shape, strides, offset, dtype):
        isz = dtype.itemsize
        return np.ndarray(shape, dtype.numpy, buffer, offset * isz, tuple(s * isz for s in strides))


class LimitedPlugin:
    ran: list[str] = []

    @hookimpl
    def rtx_backends(self):
        return [LimitedBackend()]

    @hookimpl
    def rtx_kernels(self, backend):
        if backend != "limited":
            return None
        from rtx_cpu.kernels import KERNELS

        def spy(op, fn):
            def k(*args):
                self.ran.append(op)
                return fn(*args)
            return k

        return {op: spy(op, fn) for op, fn in KERNELS.items()}


@pytest.fixture
def limited(monkeypatch):
    monkeypatch.delenv("RTX_FALLBACK", raising=False)
    plugin = LimitedPlugin()
    plugin.ran = []
    with _registered(plugin, "limited-plugin"):
        yield plugin.ran


def test_undeclared_dtype_is_refused_before_the_kernel_runs(limited):
    a = rc.ones(2, 3, dtype=rc.float64, device="limited")
    b = rc.ones(3, 2, dtype=rc.float64, device="limited")
    limited.clear()
    with pytest.raises(TypeError, match=r"matmul on device limited:0 does not support dtype float64.*"
                                        r"declares float32.*set_fallback"):
        a @ b
    assert "matmul" not in limited
    # the declared dtype runs on the backend's own kernel
    assert_close((a.float() @ b.float()).cpu(), np.full((2, 2), 3.0, np.float32))
    assert "matmul" in limited
    # comparisons: the bool output doesn't count against the limit, the inputs do
    assert (a.float() == 1).all().item()
    with pytest.raises(TypeError, match="eq on device limited:0 does not support dtype int64"):
        rc.arange(3, device="limited") == 1


def test_undeclared_dtype_goes_to_the_fallback_when_it_is_on(limited):
    a = rc.tensor(np.arange(6.0).reshape(2, 3), dtype=rc.float64, device="limited")
    with rc.set_fallback("cpu"), pytest.warns(rc.FallbackWarning, match="matmul on limited:0 doesn't take float64"):
        c = a @ a.t()
    assert c.dtype == rc.float64 and c.device == rc.device("limited")
    assert_close(c.cpu(), np.arange(6.0).reshape(2, 3) @ np.arange(6.0).reshape(2, 3).T)
    assert rc.fallback_report() == {("limited", "matmul"): 1}


def test_limits_follow_a_table_rebuild(limited):
    a = rc.ones(2, 2, device="limited")
    assert (a @ a).sum().item() == 8.0
    # registering another plugin rebuilds the tables; the limited device rebinds
    other = LimitedPlugin()
    other.ran = []

    class Extra:
        @hookimpl(tryfirst=True)
        def rtx_kernels(self, backend):
            if backend == "limited":
                from rtx_cpu.kernels import KERNELS

                def matmul(out, x, y):
                    other.ran.append("matmul")
                    KERNELS["matmul"](out, x, y)
                return {"matmul": matmul}

    name = rc.register_backend(Extra(), name="extra-matmul")
    try:
        assert (a @ a).sum().item() == 8.0
        assert other.ran == ["matmul"]  # the override is used, behind the same limit
        with pytest.raises(TypeError, match="matmul on device limited:0 does not support dtype float64"):
            a.double() @ a.double()
    finally:
        rc.unregister_backend(name)


def test_a_limit_on_a_composite_falls_back_to_the_decomposition(monkeypatch):
    # softmax limited to float32: float64 softmax is decomposed into primitives
    # (no TypeError, no CPU fallback); float32 uses the backend's kernel
    monkeypatch.delenv("RTX_FALLBACK", raising=False)
    ran = []

    class Limits(LimitedBackend):
        name = "climited"

        def op_dtypes(self, index):
            return {"softmax": {"float32"}, "sort": ["float"]}  # names go through as_dtype

    def kernels():
        from rtx_cpu.kernels import KERNELS

        def softmax(out, x, axis):
            ran.append(x.dtype.name)
            KERNELS["softmax"](out, x, axis)
        return {**KERNELS, "softmax": softmax}

    name = rc.register_backend(BackendPlugin(Limits, kernels), name="climited-plugin")
    try:
        xn = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])
        for dt in (rc.float64, rc.float32):
            got = rc.tensor(xn, dtype=dt, device="climited").softmax(-1)
            e = np.exp(xn - xn.max(-1, keepdims=True))
            assert_close(got.cpu(), (e / e.sum(-1, keepdims=True)).astype(dt.numpy), rtol=1e-6)
        assert ran == ["float32"]
        v = rc.tensor([3, 1, 2], device="climited").sort().values  # int64: decomposed
        assert v.tolist() == [1, 2, 3]
    finally:
        rc.unregister_backend(name)


def test_a_zero_dim_result_comes_back_zero_dim(fake):
    with rc.set_fallback("cpu"), warnings.catch_warnings():
        warnings.simplefilter("ignore", rc.FallbackWarning)
        y = rc.cos(rc.tensor(0.5, device="fake:0"))
    assert y.shape == () and y.item() == pytest.approx(np.cos(0.5), rel=1e-6)
