"""Automatic mixed precision: ``rtxcore.autocast``'s cast policy and
``rtxcore.amp.GradScaler``."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore.amp import autocast_mode
from rtxcore.dispatch import Backend, BackendPlugin

from . import fake_backend


def dev_type(device: str) -> str:
    return rc.device(device).type


def ac(device: str, **kw):
    """autocast for the device's type (cpu needs the dtype spelled out)."""
    return rc.autocast(dev_type(device), dtype=rc.float16, **kw)


# -- the cast policy -------------------------------------------------------------------------


def test_matrix_products_run_in_float16(device):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((4, 5)).astype(np.float32)
    b_np = rng.standard_normal((5, 3)).astype(np.float32)
    a, b = rc.tensor(a_np, device=device), rc.tensor(b_np, device=device)
    batch = rc.tensor(rng.standard_normal((2, 4, 5)).astype(np.float32), device=device)
    with ac(device):
        outs = {"matmul": rc.matmul(a, b), "@": a @ b, "mm": rc.mm(a, b), "bmm": rc.bmm(batch, batch.mT),
                "mv": rc.mv(a, b[:, 0]), "method": a.matmul(b)}
        for name, out in outs.items():
            assert out.dtype is rc.float16, name
        want = a_np.astype(np.float16).astype(np.float32) @ b_np.astype(np.float16).astype(np.float32)
        np.testing.assert_allclose(outs["@"].float().cpu().numpy(), want, rtol=2e-3, atol=2e-3)
        # float64 and integer operands are never cast
        d = rc.tensor(a_np, dtype=rc.float64, device=device) if rc.device(device).supports(rc.float64) else None
        if d is not None:
            assert (d @ d.T).dtype is rc.float64
        i = rc.ones(2, 2, dtype=rc.int64, device=device)
        assert (i @ i).dtype is rc.int64
        assert (a + 1).dtype is rc.float32  # elementwise ops keep their dtype
    assert (a @ b).dtype is rc.float32  # outside the region: as before
    np.testing.assert_allclose((a @ b).cpu().numpy(), a_np @ b_np, rtol=1e-5, atol=1e-5)


def test_linear_and_conv_run_in_float16(device):
    x = rc.randn(3, 4, device=device)
    w = rc.randn(5, 4, device=device)
    bias = rc.randn(5, device=device)
    img = rc.randn(1, 2, 5, 5, device=device)
    k = rc.randn(3, 2, 3, 3, device=device)
    kb = rc.randn(3, device=device)
    with ac(device):
        y = F.linear(x, w, bias)
        c = F.conv2d(img, k, kb, padding=1)
        lin = rc.nn.Linear(4, 5).to(device)
        z = lin(x)
    assert y.dtype is rc.float16 and c.dtype is rc.float16 and z.dtype is rc.float16
    ref = (x.cpu().numpy().astype(np.float16).astype(np.float32)
           @ w.cpu().numpy().astype(np.float16).astype(np.float32).T + bias.cpu().numpy())
    np.testing.assert_allclose(y.float().cpu().numpy(), ref, rtol=5e-3, atol=5e-3)
    np.testing.assert_allclose(c.float().cpu().numpy(), F.conv2d(img, k, kb, padding=1).cpu().numpy(),
                               rtol=2e-2, atol=2e-2)


def test_precision_sensitive_ops_run_in_float32(device):
    h = rc.randn(4, 6, device=device).half()
    target = rc.tensor([0, 2, 5, 1], device=device)
    with ac(device):
        assert F.softmax(h, -1).dtype is rc.float32
        assert F.log_softmax(h, 1).dtype is rc.float32
        assert F.softmin(h, 1).dtype is rc.float32
        assert F.layer_norm(h, (6,)).dtype is rc.float32
        assert F.cross_entropy(h, target).dtype is rc.float32
        assert F.nll_loss(F.log_softmax(h, 1), target).dtype is rc.float32
        assert F.mse_loss(h, h * 0.5).dtype is rc.float32
        assert F.l1_loss(h, h * 0.5).dtype is rc.float32
        assert F.smooth_l1_loss(h, h * 0.5).dtype is rc.float32
        assert F.huber_loss(h, h * 0.5).dtype is rc.float32
        assert F.binary_cross_entropy_with_logits(h, (h > 0).half()).dtype is rc.float32
        assert F.binary_cross_entropy(h.sigmoid(), (h > 0).half()).dtype is rc.float32
        assert F.kl_div(F.log_softmax(h, 1), F.softmax(h, 1), reduction="batchmean").dtype is rc.float32
        want = F.softmax(h.float(), -1).cpu().numpy()
        np.testing.assert_allclose(F.softmax(h, -1).cpu().numpy(), want, rtol=1e-6)
    assert F.softmax(h, -1).dtype is rc.float16  # outside: the input's dtype


def test_a_model_step_inside_autocast(device):
    """The loss of a small model is float32, gradients reach the float32
    parameters in float32 and agree with the float32 computation."""
    rc.manual_seed(0)
    model = rc.nn.Sequential(rc.nn.Linear(6, 8), rc.nn.ReLU(), rc.nn.Linear(8, 3)).to(device)
    x = rc.randn(5, 6, device=device)
    y = rc.tensor([0, 1, 2, 1, 0], device=device)
    with ac(device):
        out = model(x)
        loss = F.cross_entropy(out, y)
    assert out.dtype is rc.float16 and loss.dtype is rc.float32
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is not None and g.dtype is rc.float32 for g in grads.values())
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for n, p in model.named_parameters():
        np.testing.assert_allclose(grads[n].cpu().numpy(), p.grad.cpu().numpy(), rtol=3e-2, atol=3e-3)


def test_gradients_flow_through_the_casts(device):
    w = rc.randn(3, 4, device=device, requires_grad=True)
    x = rc.randn(2, 4, device=device)
    with ac(device):
        out = x @ w.T
    assert out.dtype is rc.float16 and out.grad_fn is not None
    out.float().sum().backward()
    assert w.grad.dtype is rc.float32
    np.testing.assert_allclose(w.grad.cpu().numpy(), np.tile(x.cpu().numpy().sum(0), (3, 1)),
                               rtol=2e-3, atol=2e-3)


def test_float64_is_untouched_and_gradcheck_passes():
    x = rc.randn(3, 4, dtype=rc.float64, requires_grad=True)
    w = rc.randn(2, 4, dtype=rc.float64, requires_grad=True)
    with rc.autocast("cpu", dtype=rc.float16):
        assert F.linear(x, w).dtype is rc.float64
        assert rc.autograd.gradcheck(lambda a, b: F.log_softmax(F.linear(a, b), 1), (x, w))


# -- state: nesting, enabled=False, threads, decorator ------------------------------------------


def test_nesting_and_enabled_false(device):
    assert rc.autocast is rc.amp.autocast and issubclass(rc.cuda.amp.autocast, rc.autocast)
    t = dev_type(device)
    a = rc.randn(2, 2, device=device)
    assert not rc.amp.is_autocast_enabled(t)
    with ac(device):
        assert rc.amp.is_autocast_enabled(t) and (a @ a).dtype is rc.float16
        with ac(device, enabled=False):
            assert not rc.amp.is_autocast_enabled(t) and (a @ a).dtype is rc.float32
            with ac(device):
                assert (a @ a).dtype is rc.float16
            assert (a @ a).dtype is rc.float32
        assert (a @ a).dtype is rc.float16
        assert rc.amp.get_autocast_dtype(t) is rc.float16
    assert not rc.amp.is_autocast_enabled(t) and (a @ a).dtype is rc.float32
    assert autocast_mode._state.active is None and autocast_mode._state.cache is None
    assert autocast_mode.regions[0] == 0


def test_autocast_is_per_device_type():
    from rtxcore.testing import available_devices

    if "opencl:0" not in available_devices(complete=True):
        pytest.skip("needs a second device type (opencl)")
    a = rc.randn(2, 2)
    b = rc.randn(2, 2, device="opencl")
    with rc.autocast("opencl"):
        assert (b @ b).dtype is rc.float16
        assert (a @ a).dtype is rc.float32  # cpu tensors: autocast is not on for cpu
        assert rc.is_autocast_enabled("opencl") and not rc.is_autocast_enabled("cpu")


def test_autocast_state_is_thread_local(device):
    a = rc.randn(2, 2, device=device)
    seen = {}

    def worker():
        seen["dtype"] = (a @ a).dtype
        seen["enabled"] = rc.amp.is_autocast_enabled(dev_type(device))

    with ac(device):
        th = threading.Thread(target=worker)
        th.start()
        th.join()
        assert (a @ a).dtype is rc.float16
    assert seen == {"dtype": rc.float32, "enabled": False}


def test_autocast_as_decorator(device):
    a = rc.randn(2, 2, device=device)

    @ac(device)
    def f(x):
        return x @ x

    assert f(a).dtype is rc.float16 and (a @ a).dtype is rc.float32
    assert f.__name__ == "f"


def test_parameter_casts_are_cached_within_a_region(device):
    w = rc.randn(3, 3, device=device, requires_grad=True)
    x = rc.randn(3, 3, device=device)
    with ac(device):
        (w1,), (w2,) = autocast_mode.autocast_inputs("linear", w), autocast_mode.autocast_inputs("linear", w)
        assert w1 is w2 and w1.dtype is rc.float16
        (x1,), (x2,) = autocast_mode.autocast_inputs("linear", x), autocast_mode.autocast_inputs("linear", x)
        assert x1 is not x2  # not a leaf that requires grad: not cached
        with rc.no_grad():
            w.mul_(2.0)  # written in place: the cached copy is stale
        (w3,) = autocast_mode.autocast_inputs("linear", w)
        assert w3 is not w1
        np.testing.assert_allclose(w3.float().cpu().detach().numpy(),
                                   w.detach().cpu().numpy().astype(np.float16).astype(np.float32))
    with ac(device, cache_enabled=False):
        (a1,), (a2,) = autocast_mode.autocast_inputs("linear", w), autocast_mode.autocast_inputs("linear", w)
        assert a1 is not a2
    assert autocast_mode._state.cache is None


def test_front_ends_skip_autocast_when_off(monkeypatch, device):
    """Outside autocast the front-ends read one thread-local and call nothing."""
    from rtxcore.nn.functional import linear_maps, losses
    from rtxcore.ops import linalg

    def boom(*args):
        raise AssertionError("autocast_inputs called outside autocast")

    monkeypatch.setattr(linalg, "autocast_inputs", boom)
    monkeypatch.setattr(linear_maps, "autocast_inputs", boom)
    monkeypatch.setattr(losses, "autocast_inputs", boom)
    a = rc.randn(3, 3, device=device)
    F.cross_entropy(F.linear(a @ a, a), rc.tensor([0, 1, 2], device=device))


# -- errors ------------------------------------------------------------------------------------


def test_cpu_default_dtype_is_refused():
    with pytest.raises(RuntimeError, match=r"autocast\('cpu'\): the default autocast dtype on cpu is "
                                           r"bfloat16, which rtxcore does not have; pass dtype=rtxcore.float16"):
        rc.autocast("cpu")
    with rc.autocast("cpu", enabled=False):  # nothing asked for: nothing to refuse
        assert (rc.ones(2, 2) @ rc.ones(2, 2)).dtype is rc.float32
    with pytest.raises(RuntimeError, match="dtype bfloat16 is not available in rtxcore"):
        rc.autocast("cpu", dtype="bfloat16")
    with pytest.raises(RuntimeError, match=r"autocast\('cpu'\): dtype float32 is not supported"):
        rc.autocast("cpu", dtype=rc.float32)


def test_bad_device_types():
    with pytest.raises(ValueError, match="expected `device_type` of type `str`"):
        rc.autocast(rc.device("cpu"))
    with pytest.raises(RuntimeError, match="autocast\\(\\): unsupported device_type 'tpu'"):
        rc.autocast("tpu")


def test_unavailable_device_type_disables_with_a_warning():
    if rc.cuda.is_available():
        pytest.skip("CUDA is available here: autocast('cuda') is on")
    with pytest.warns(UserWarning, match="User provided device_type of 'cuda', but cuda is not available"):
        ctx = rc.autocast("cuda")
    with ctx:
        assert not rc.is_autocast_enabled()
    with pytest.warns(FutureWarning, match=r"rtxcore.cuda.amp.autocast\(args...\)` is deprecated"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            rc.cuda.amp.autocast()


class _NoHalf(fake_backend.FakeBackend):
    name = "nohalf"

    def device_count(self) -> int:
        return 1

    def dtypes(self, index: int) -> frozenset[str]:
        return Backend.dtypes(self, index) - {"float16"}


def _NoHalfPlugin() -> BackendPlugin:
    return BackendPlugin(_NoHalf, lambda: fake_backend.rtx_kernels("fake"))


def test_device_without_float16_is_refused():
    name = rc.register_backend(_NoHalfPlugin(), name="nohalf-plugin")
    try:
        with pytest.raises(RuntimeError, match=r"autocast\('nohalf'\): device nohalf:0 does not "
                                               r"compute float16 \(it supports: bool, float32"):
            rc.autocast("nohalf")
        rc.autocast("nohalf", enabled=False)
    finally:
        rc.unregister_backend(name)


def test_unknown_op_kind():
    with rc.autocast("cpu", dtype=rc.float16):
        with pytest.raises(ValueError, match="autocast_inputs\\(\\): unknown op kind 'matmull'"):
            autocast_mode.autocast_inputs("matmull", rc.ones(1))


# -- GradScaler --------------------------------------------------------------------------------


def _setup(device, lr=0.1):
    w = rc.tensor([[0.5, -1.0], [2.0, 0.25]], device=device, requires_grad=True)
    return w, rc.optim.SGD([w], lr=lr)


def test_scaler_skips_a_step_with_inf_and_backs_off(device):
    w, opt = _setup(device)
    scaler = rc.amp.GradScaler(device, init_scale=1024.0, growth_interval=3)
    before = w.detach().cpu().numpy().copy()
    loss = (w * rc.tensor([[float("inf"), 1.0], [1.0, 1.0]], device=device)).sum()
    scaler.scale(loss).backward()
    assert scaler.step(opt) is None
    np.testing.assert_array_equal(w.detach().cpu().numpy(), before)  # skipped
    scaler.update()
    assert scaler.get_scale() == 512.0 and scaler._get_growth_tracker() == 0


def test_scaler_skips_when_any_gradient_is_inf_not_only_all(device):
    # two parameters, only the second's gradient overflows: no parameter moves
    w, _ = _setup(device)
    v = rc.tensor([1.0, 2.0], device=device, requires_grad=True)
    opt = rc.optim.SGD([w, v], lr=0.1)
    scaler = rc.amp.GradScaler(device, init_scale=4.0)
    before = (w.detach().cpu().numpy().copy(), v.detach().cpu().numpy().copy())
    loss = (w * w).sum() + (v * rc.tensor([float("nan"), 1.0], device=device)).sum()
    scaler.scale(loss).backward()
    assert np.isfinite(w.grad.cpu().numpy()).all()  # the first gradient alone is fine
    assert scaler.step(opt) is None
    np.testing.assert_array_equal(w.detach().cpu().numpy(), before[0])
    np.testing.assert_array_equal(v.detach().cpu().numpy(), before[1])
    scaler.update()
    assert scaler.get_scale() == 2.0


def test_scaler_load_state_dict_after_scaling_takes_the_loaded_scale(device):
    w, opt = _setup(device)
    scaler = rc.amp.GradScaler(device, init_scale=8.0, growth_interval=100)
    scaler.scale((w * w).sum()).backward()  # the scale is now in use
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 8.0
    scaler.load_state_dict({"scale": 1024.0, "growth_factor": 3.0, "backoff_factor": 0.25,
                            "growth_interval": 7, "_growth_tracker": 2})
    assert scaler.get_scale() == 1024.0 and scaler._get_growth_tracker() == 2
    opt.zero_grad()
    loss = (w * w).sum()
    np.testing.assert_allclose(scaler.scale(loss).item(), 1024.0 * loss.item(), rtol=1e-6)


def test_scaler_steps_unscaled_and_grows(device):
    w, opt = _setup(device)
    scaler = rc.amp.GradScaler(device, init_scale=256.0, growth_factor=4.0, growth_interval=2)
    x = rc.tensor([1.0, 3.0], device=device)
    expected = w.detach().cpu().numpy().copy()
    for i in range(5):
        opt.zero_grad()
        loss = ((w @ x) ** 2).sum()
        scaled = scaler.scale(loss)
        np.testing.assert_allclose(scaled.item(), loss.item() * scaler.get_scale(), rtol=1e-6)
        scaled.backward()
        scaler.unscale_(opt)  # the gradient the step sees is the true one
        grad = 2 * np.outer(expected @ x.cpu().numpy(), x.cpu().numpy())
        np.testing.assert_allclose(w.grad.cpu().numpy(), grad, rtol=1e-5)
        scaler.step(opt)
        scaler.update()
        expected = expected - 0.1 * grad
        np.testing.assert_allclose(w.detach().cpu().numpy(), expected, rtol=1e-5)
    # grown after steps 2 and 4: 256 * 4 * 4
    assert scaler.get_scale() == 4096.0 and scaler._get_growth_tracker() == 1


def test_scaler_misuse_errors(device):
    w, opt = _setup(device)
    scaler = rc.amp.GradScaler(device)
    with pytest.raises(RuntimeError, match="call scale\\(loss\\) first"):
        scaler.step(opt)
    scaler.scale((w * 2).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    scaler.update()
    h = rc.ones(2, device=device, dtype=rc.float16, requires_grad=True)
    hopt = rc.optim.SGD([h], lr=0.1)
    scaler.scale(h.float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(hopt)
    with pytest.raises(ValueError, match="outputs must be a Tensor"):
        scaler.scale(3.0)
    with pytest.raises(ValueError, match="growth_factor should be > 1"):
        rc.amp.GradScaler(device, growth_factor=1.0)


def test_scaler_scales_sequences(device):
    scaler = rc.amp.GradScaler(device, init_scale=8.0)
    a, b = rc.ones(2, device=device), rc.ones(1, device=device, dtype=rc.float16)
    out = scaler.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    np.testing.assert_array_equal(out[0].cpu().numpy(), [8.0, 8.0])
    assert out[1][0].dtype is rc.float16 and out[1][0].item() == 8.0


def test_scaler_state_dict_round_trip(device):
    w, opt = _setup(device)
    s1 = rc.amp.GradScaler(device, init_scale=64.0, growth_interval=5)
    for _ in range(3):
        s1.scale((w * w).sum()).backward()
        s1.step(opt)
        s1.update()
    sd = s1.state_dict()
    assert sd == {"scale": 64.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 5, "_growth_tracker": 3}
    s2 = rc.amp.GradScaler(device)
    s2.load_state_dict(sd)
    assert s2.state_dict() == sd and s2.get_scale() == 64.0
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        s2.load_state_dict({})
    off = rc.amp.GradScaler(device, enabled=False)
    assert off.state_dict() == {}
    off.load_state_dict(sd)  # a disabled scaler ignores it, as PyTorch's
    assert off.get_scale() == 1.0


def test_disabled_scaler_passes_through(device):
    w, opt = _setup(device)
    scaler = rc.amp.GradScaler(device, enabled=False)
    loss = (w * 3).sum()
    assert scaler.scale(loss) is loss and not scaler.is_enabled()
    loss.backward()
    before = w.detach().cpu().numpy().copy()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(w.detach().cpu().numpy(), before - 0.1 * 3, rtol=1e-6)
    assert scaler.get_scale() == 1.0


def test_scaler_on_unavailable_cuda_disables_itself():
    if rc.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.warns(UserWarning, match="GradScaler is enabled, but cuda is not available"):
        s = rc.amp.GradScaler()
    assert not s.is_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.warns(FutureWarning, match=r"rtxcore.cuda.amp.GradScaler\(args...\)` is deprecated"):
            old = rc.cuda.amp.GradScaler()
    assert not old.is_enabled()


def test_scaler_matches_torch():
    """The same sequence (finite steps, an inf step, growth) through rtxcore's and
    PyTorch's GradScaler on cpu: equal scales, trackers, step results, params."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    xs = rng.standard_normal((8, 4)).astype(np.float32)
    w_rc = rc.tensor(w0, requires_grad=True)
    w_t = torch.tensor(w0, requires_grad=True)
    opt_rc, opt_t = rc.optim.SGD([w_rc], lr=0.05, momentum=0.9), torch.optim.SGD([w_t], lr=0.05, momentum=0.9)
    s_rc = rc.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    s_t = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    for i, x in enumerate(xs):
        bad = float("inf") if i in (3, 4) else (float("nan") if i == 6 else 1.0)
        for lib, w, opt, s in ((rc, w_rc, opt_rc, s_rc), (torch, w_t, opt_t, s_t)):
            opt.zero_grad()
            loss = ((w @ lib.tensor(x)) ** 2).sum() * bad
            s.scale(loss).backward()
            s.step(opt)
            s.update()
        assert s_rc.get_scale() == s_t.get_scale(), i
        assert s_rc._get_growth_tracker() == s_t._get_growth_tracker(), i
        np.testing.assert_allclose(w_rc.detach().numpy(), w_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert s_rc.state_dict() == s_t.state_dict()


def test_reductions_and_softmax_run_in_float32_under_autocast():
    x = rc.randn(3, 5, dtype=rc.float16, requires_grad=True)
    with rc.autocast("cpu", dtype=rc.float16):
        outs = {"sum": x.sum(), "mean": x.mean(1), "prod": x.prod(1), "cumsum": x.cumsum(1),
                "softmax": x.softmax(-1), "log_softmax": x.log_softmax(-1),
                "logsumexp": x.logsumexp(1), "norm": x.norm()}
    for name, out in outs.items():
        assert out.dtype is rc.float32, name
    sum(o.sum() for o in outs.values()).backward()
    assert x.grad.dtype is rc.float16  # the gradient comes back in the input's dtype
    want = np.exp(x.detach().numpy().astype(np.float32))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(outs["softmax"].detach().numpy(), want, rtol=1e-6)
    assert x.sum().dtype is rc.float16  # outside the region: as before
