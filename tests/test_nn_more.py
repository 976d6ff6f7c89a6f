"""conv1d / grouped conv2d / conv_transpose2d, the added activations, channel
dropout, group / instance norm, pixel shuffle, interpolate, 1-D and adaptive
pools, their Modules, and ``nn.utils`` (gradient clipping, parameter vectors).

Values against NumPy computations written here (loops over the definitions),
and against torch with the same weights where torch imports; gradients by
``gradcheck`` in float64; on every device."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn.functional as F
from rtxcore import nn
from rtxcore.autograd import gradcheck, gradgradcheck
from rtxcore.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector,
                              vector_to_parameters)

F64 = rc.float64

# torch's own note on padding='same' with even kernels (its reference side only)
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


# -- helpers ------------------------------------------------------------------------------


def T(a, device, dtype=None, rg=False):
    arr = np.asarray(a)
    if dtype is None and arr.dtype.kind == "f":
        dtype = rc.float32 if arr.dtype == np.float32 else F64
    t = rc.tensor(arr, dtype=dtype, device=device)
    return t.requires_grad_() if rg else t


def A(t):
    return np.asarray(t.detach().cpu().numpy())


def close(actual, expected, atol=1e-10, rtol=1e-7):
    a = A(actual) if isinstance(actual, rc.Tensor) else np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a, e, atol=atol, rtol=rtol)


def rng_(seed=0):
    return np.random.default_rng(seed)


def projected(fn, seed=1):
    """``fn``'s output reduced to one number by a fixed random projection (one backward)."""
    cache = {}

    def wrapped(*args):
        out = fn(*args)
        key = (tuple(out.shape), str(out.device))
        if key not in cache:
            cache[key] = rc.tensor(rng_(seed).standard_normal(tuple(out.shape)), dtype=out.dtype,
                                   device=out.device)
        return (out * cache[key]).sum()

    return wrapped


def torch_or_skip():
    return pytest.importorskip("torch")


def copy_params(src_torch, dst, device):
    """Load a torch module's state into ours through NumPy (as a ported program would)."""
    sd = {k: rc.tensor(v.detach().numpy(), device=device)
          for k, v in src_torch.state_dict().items()}
    dst.load_state_dict(sd)


# -- NumPy references ---------------------------------------------------------------------


def np_conv1d(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    n, c, length = x.shape
    oc, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    out_len = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, oc, out_len))
    ocg = oc // groups
    for o in range(oc):
        g = o // ocg
        for t in range(out_len):
            for j in range(k):
                out[:, o, t] += xp[:, g * cg:(g + 1) * cg, t * stride + j * dilation] @ w[o, :, j]
    return out + (b[None, :, None] if b is not None else 0)


def np_conv2d_grouped(x, w, groups, padding=0):
    n, c, h, wd = x.shape
    oc, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for o in range(oc):
        g = o // ocg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + kh, j:j + kw]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out


def np_conv_transpose2d(x, w, b, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The definition: every input pixel scatters weight * value onto the output."""
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = (
        (v, v) if isinstance(v, int) else v for v in (stride, padding, output_padding, dilation))
    n, c, h, wd = x.shape
    _, ocg, kh, kw = w.shape
    cg = c // groups
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    full_w = (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    canvas = np.zeros((n, ocg * groups, full_h, full_w))
    for ci in range(c):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for bb in range(kw):
                        canvas[:, g * ocg:(g + 1) * ocg, i * sh + a * dh, j * sw + bb * dw] += \
                            x[:, ci, i, j][:, None] * w[ci, :, a, bb][None, :]
    out_h = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    out_w = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = canvas[:, :, ph:ph + out_h, pw:pw + out_w]
    return out + (b[None, :, None, None] if b is not None else 0)


# -- conv1d -------------------------------------------------------------------------------


CONV1D_CASES = [
    dict(),
    dict(stride=2, padding=1),
    dict(dilation=2, padding=2, groups=2),
    dict(stride=3, groups=4),
]


@pytest.mark.parametrize("kw", CONV1D_CASES, ids=str)
def test_conv1d_values(device, kw):
    r = rng_(1)
    x, w, b = r.standard_normal((2, 4, 9)), r.standard_normal((4, 4 // kw.get("groups", 1), 3)), \
        r.standard_normal(4)
    out = F.conv1d(T(x, device), T(w, device), T(b, device), **kw)
    close(out, np_conv1d(x, w, b, **kw))
    # unbatched (C, L)
    close(F.conv1d(T(x[0], device), T(w, device), None, **kw), np_conv1d(x[:1], w, None, **kw)[0])


def test_conv1d_same_and_vs_torch(device):
    torch = torch_or_skip()
    r = rng_(2)
    x, w = r.standard_normal((2, 3, 8)), r.standard_normal((6, 3, 4))
    for kw in (dict(padding="same"), dict(padding="valid", stride=2), dict(padding=2, dilation=3)):
        out = F.conv1d(T(x, device), T(w, device), **kw)
        ref = torch.nn.functional.conv1d(torch.tensor(x), torch.tensor(w), **kw)
        close(out, ref.numpy())


def test_conv1d_grad(device):
    r = rng_(3)
    x = T(r.standard_normal((2, 4, 6)), device, rg=True)
    w = T(r.standard_normal((4, 2, 3)), device, rg=True)
    b = T(r.standard_normal(4), device, rg=True)
    assert gradcheck(projected(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, groups=2)),
                     (x, w, b))


def test_conv1d_errors(device):
    x = T(np.zeros((2, 4, 6)), device)
    with pytest.raises(RuntimeError, match=r"conv1d: input has 4 channels .* weight expects 3"):
        F.conv1d(x, T(np.zeros((2, 3, 3)), device))
    with pytest.raises(RuntimeError, match="conv1d: weight must be 3-D"):
        F.conv1d(x, T(np.zeros((2, 4, 3, 3)), device))
    with pytest.raises(RuntimeError, match=r"conv1d: expected a 2-D \(C, L\) or 3-D"):
        F.conv1d(T(np.zeros((1, 2, 4, 6)), device), T(np.zeros((2, 4, 3)), device))


# -- grouped conv2d -----------------------------------------------------------------------


@pytest.mark.parametrize("groups,oc", [(2, 4), (3, 6), (6, 6)])
def test_conv2d_groups_values(device, groups, oc):
    r = rng_(4)
    x, w = r.standard_normal((2, 6, 5, 4)), r.standard_normal((oc, 6 // groups, 3, 2))
    out = F.conv2d(T(x, device), T(w, device), groups=groups, padding=1)
    close(out, np_conv2d_grouped(x, w, groups, padding=1))


def test_conv2d_groups_grad(device):
    r = rng_(5)
    x = T(r.standard_normal((1, 4, 4, 4)), device, rg=True)
    w = T(r.standard_normal((6, 2, 2, 2)), device, rg=True)
    b = T(r.standard_normal(6), device, rg=True)
    assert gradcheck(projected(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2)),
                     (x, w, b))


def test_conv2d_groups_errors(device):
    x = T(np.zeros((1, 4, 5, 5)), device)
    with pytest.raises(RuntimeError, match=r"expected weight to be divisible by 3 at dimension 0"):
        F.conv2d(x, T(np.zeros((4, 2, 3, 3)), device), groups=3)
    with pytest.raises(RuntimeError, match="non-positive groups"):
        F.conv2d(x, T(np.zeros((4, 4, 3, 3)), device), groups=0)


# -- conv_transpose2d ---------------------------------------------------------------------


CONVT_CASES = [
    dict(),
    dict(stride=2),
    dict(stride=2, padding=1, output_padding=1),
    dict(stride=(2, 3), padding=(1, 2), output_padding=(1, 2), dilation=(1, 2), groups=2),
    dict(stride=3, padding=2, dilation=2, output_padding=1),
    dict(padding=2),  # the output cropped by more than the kernel's overhang
    dict(dilation=3, output_padding=2),  # output_padding >= stride (allowed below dilation)
]


@pytest.mark.parametrize("kw", CONVT_CASES, ids=str)
def test_conv_transpose2d_values(device, kw):
    r = rng_(6)
    groups = kw.get("groups", 1)
    x, w, b = r.standard_normal((2, 4, 3, 4)), r.standard_normal((4, 3, 3, 2)), \
        r.standard_normal(3 * groups)
    out = F.conv_transpose2d(T(x, device), T(w, device), T(b, device), **kw)
    close(out, np_conv_transpose2d(x, w, b, **kw))


def test_conv_transpose2d_vs_torch_and_unbatched(device):
    torch = torch_or_skip()
    r = rng_(7)
    x, w = r.standard_normal((2, 4, 5, 3)), r.standard_normal((4, 1, 3, 3))
    kw = dict(stride=2, padding=1, output_padding=1, groups=4)
    out = F.conv_transpose2d(T(x, device), T(w, device), **kw)
    close(out, torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), **kw).numpy())
    close(F.conv_transpose2d(T(x[1], device), T(w, device), **kw), A(out)[1])


def test_conv_transpose2d_grad(device):
    r = rng_(8)
    x = T(r.standard_normal((1, 4, 3, 3)), device, rg=True)
    w = T(r.standard_normal((4, 2, 3, 2)), device, rg=True)
    b = T(r.standard_normal(4), device, rg=True)
    fn = projected(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                      output_padding=1, groups=2))
    assert gradcheck(fn, (x, w, b))


def test_conv_transpose2d_double_backward(device):
    r = rng_(27)
    x = T(r.standard_normal((1, 2, 2, 3)), device, rg=True)
    w = T(r.standard_normal((2, 1, 2, 2)), device, rg=True)
    fn = lambda x, w: F.conv_transpose2d(x, w, stride=2, dilation=2, output_padding=1)  # noqa: E731
    assert gradgradcheck(projected(fn), (x, w))
    assert gradcheck(projected(fn), (x, w))


def test_conv_transpose1d_vs_numpy(device):
    r = rng_(9)
    x, w = r.standard_normal((2, 2, 5)), r.standard_normal((2, 3, 3))
    out = F.conv_transpose1d(T(x, device), T(w, device), stride=2, padding=1, output_padding=1)
    ref = np_conv_transpose2d(x[:, :, None], w[:, :, None], None, stride=(1, 2), padding=(0, 1),
                              output_padding=(0, 1))[:, :, 0]
    close(out, ref)


def test_conv_transpose2d_errors(device):
    x, w = T(np.zeros((1, 4, 3, 3)), device), T(np.zeros((4, 2, 3, 3)), device)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or "
                                           "dilation"):
        F.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match=r"input has 4 channels .* weight expects 3"):
        F.conv_transpose2d(x, T(np.zeros((3, 2, 3, 3)), device))
    with pytest.raises(RuntimeError, match="bias has 5 elements"):
        F.conv_transpose2d(x, w, T(np.zeros(5), device))


# -- conv Modules -------------------------------------------------------------------------


def test_conv_modules_shapes_init_and_torch_weights(device):
    torch = torch_or_skip()
    r = rng_(10)
    pairs = [
        (nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
         torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 9)),
        (nn.Conv2d(4, 6, (3, 2), padding=1, groups=2),
         torch.nn.Conv2d(4, 6, (3, 2), padding=1, groups=2), (2, 4, 5, 5)),
        (nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect"),
         torch.nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect"), (1, 2, 5, 4)),
        (nn.Conv1d(2, 4, 4, padding="same", padding_mode="circular"),
         torch.nn.Conv1d(2, 4, 4, padding="same", padding_mode="circular"), (1, 2, 7)),
        (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
         torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
         (2, 4, 3, 4)),
        (nn.ConvTranspose1d(3, 2, 3, stride=2), torch.nn.ConvTranspose1d(3, 2, 3, stride=2),
         (2, 3, 5)),
    ]
    for ours, theirs, xshape in pairs:
        ours = ours.to(device)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
               {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
        assert repr(ours) == repr(theirs)
        # PyTorch's initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in from the weight
        fan_in = ours.weight[0].numel()
        bound = 1 / math.sqrt(fan_in)
        assert float(ours.weight.abs().max().item()) <= bound
        assert float(ours.bias.abs().max().item()) <= bound
        copy_params(theirs, ours, device)
        x = r.standard_normal(xshape).astype(np.float32)
        close(ours(T(x, device)), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5, rtol=1e-5)


def test_conv_transpose_output_size(device):
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1).to(device)
    x = rc.randn(1, 2, 4, 4, device=device)
    assert m(x).shape == (1, 3, 7, 7)
    assert m(x, output_size=(8, 8)).shape == (1, 3, 8, 8)
    assert m(x, output_size=[1, 3, 8, 7]).shape == (1, 3, 8, 7)
    with pytest.raises(ValueError, match=r"requested an output size of \[9, 9\], but valid sizes "
                                         r"range from \[7, 7\] to \[8, 8\]"):
        m(x, output_size=(9, 9))


def test_conv_module_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv1d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv1d(4, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for '
                                         'ConvTranspose2d'):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv1d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(RuntimeError, match=r"Conv1d\(2, 2.*expected input \(N, 2, L\)"):
        nn.Conv1d(2, 2, 3)(rc.zeros(1, 3, 5))


# -- activations --------------------------------------------------------------------------


def _np_softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


NP_ACTS = {
    "mish": lambda x: x * np.tanh(_np_softplus(x)),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "tanhshrink": lambda x: x - np.tanh(x),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772
                                                    * np.expm1(np.minimum(x, 0))),
    "celu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "hardshrink": lambda x: np.where(np.abs(x) > 0.5, x, 0.0),
    "softshrink": lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0)),
    "glu": lambda x: x[..., :2] / (1 + np.exp(-x[..., 2:])),
}


@pytest.mark.parametrize("name", sorted(NP_ACTS))
def test_activation_values_and_grad(device, name):
    r = rng_(11)
    x = r.standard_normal((3, 4)) * 3
    x[np.abs(np.abs(x) - 3) < 0.05] += 0.2  # keep finite differences off hardswish's kinks
    x[np.abs(np.abs(x) - 0.5) < 0.05] += 0.2
    fn = getattr(F, name)
    close(fn(T(x, device)), NP_ACTS[name](x), atol=1e-12)
    xt = T(x, device, rg=True)
    assert gradcheck(projected(fn), (xt,))


def test_prelu_values_and_grad(device):
    r = rng_(12)
    x, a = r.standard_normal((2, 3, 4)), r.standard_normal(3)
    close(F.prelu(T(x, device), T(a, device)), np.where(x > 0, x, a[None, :, None] * x))
    close(F.prelu(T(x, device), T(a[:1], device)), np.where(x > 0, x, a[0] * x))
    xt, at = T(x, device, rg=True), T(a, device, rg=True)
    assert gradcheck(projected(F.prelu), (xt, at))
    with pytest.raises(RuntimeError, match="Found parameter numbers = 2 and channel size = 3"):
        F.prelu(T(x, device), T(a[:2], device))


def test_activation_modules_vs_torch(device):
    torch = torch_or_skip()
    r = rng_(13)
    x = r.standard_normal((2, 3, 4)) * 4
    mods = [("LeakyReLU", (0.2,)), ("ELU", (0.5,)), ("CELU", (1.5,)), ("SELU", ()),
            ("Softplus", (2.0, 5.0)), ("Mish", ()), ("Hardtanh", (-2.0, 3.0)), ("ReLU6", ()),
            ("Hardswish", ()), ("Hardsigmoid", ()), ("PReLU", (3,)), ("Softsign", ()),
            ("Tanhshrink", ()), ("LogSigmoid", ()), ("Softmin", (1,)), ("Hardshrink", (0.7,)),
            ("Softshrink", (0.7,)), ("Threshold", (0.1, 20.0)), ("GLU", (2,))]
    for name, args in mods:
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args).double()
        assert repr(ours) == repr(theirs), name
        ours = ours.to(device)
        if name == "PReLU":
            copy_params(theirs, ours, device)
        close(ours(T(x, device)), theirs(torch.tensor(x)).detach().numpy(), atol=1e-12)


def test_inplace_activation_modules(device):
    x = T(np.array([-4.0, -1.0, 0.5, 4.0]), device)
    y = nn.Hardswish(inplace=True)(x)
    assert y is x
    close(x, np.array([-4.0, -1.0, 0.5, 4.0]) * np.clip(np.array([-1.0, 2.0, 3.5, 7.0]), 0, 6) / 6)
    assert repr(nn.LeakyReLU(0.1, inplace=True)) == "LeakyReLU(negative_slope=0.1, inplace=True)"


# -- channel dropout ----------------------------------------------------------------------


def test_dropout2d_zeros_whole_channels(device):
    rc.manual_seed(0)
    x = T(np.ones((8, 16, 3, 3)), device)
    out = A(F.dropout2d(x, 0.25))
    per_channel = out.reshape(8, 16, 9)
    # each channel is all zeros or all 1 / (1 - p)
    assert np.all((per_channel == 0).all(-1) | np.isclose(per_channel, 1 / 0.75).all(-1))
    frac = (per_channel[..., 0] == 0).mean()
    assert 0.1 < frac < 0.4
    m = nn.Dropout2d(0.25)
    m.eval()
    assert m(x) is x
    assert repr(m) == "Dropout2d(p=0.25, inplace=False)"
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        out3 = A(F.dropout2d(T(np.ones((4, 6, 5)), device), 0.5))
    assert np.all((out3 == 0).all(-1) | (out3 == 2.0).all(-1))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout2d(x, 1.5)


def test_dropout2d_grad_uses_the_mask(device):
    rc.manual_seed(1)
    x = T(np.ones((2, 6, 2, 2)), device, rg=True)
    out = F.dropout2d(x, 0.5)
    out.sum().backward()
    close(x.grad, A(out))  # d(x * mask)/dx = mask, and x = 1


def test_dropout1d(device):
    rc.manual_seed(2)
    out = A(F.dropout1d(T(np.ones((5, 7)), device), 0.5))  # unbatched (C, L)
    assert np.all((out == 0).all(-1) | (out == 2.0).all(-1))
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(T(np.ones((2, 2, 2, 2)), device))


# -- group / instance norm ----------------------------------------------------------------


def np_group_norm(x, g, w, b, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    y = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    y = y.reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


def test_group_norm_values_and_grad(device):
    r = rng_(14)
    x, w, b = r.standard_normal((2, 6, 3, 2)), r.standard_normal(6), r.standard_normal(6)
    close(F.group_norm(T(x, device), 3, T(w, device), T(b, device)), np_group_norm(x, 3, w, b))
    x3 = r.standard_normal((2, 4, 5))
    close(F.group_norm(T(x3, device), 2), np_group_norm(x3, 2, np.ones(4), np.zeros(4)))
    xt, wt, bt = (T(v, device, rg=True) for v in (x[:1], w, b))
    assert gradcheck(projected(lambda x, w, b: F.group_norm(x, 2, w, b)), (xt, wt, bt))
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be divisible "
                                           "by num_groups"):
        F.group_norm(T(x, device), 4)


def test_group_norm_module(device):
    torch = torch_or_skip()
    r = rng_(15)
    ours, theirs = nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)
    assert repr(ours) == repr(theirs)
    with torch.no_grad():
        theirs.weight.uniform_()
        theirs.bias.uniform_()
    ours = ours.to(device)
    copy_params(theirs, ours, device)
    x = r.standard_normal((3, 4, 5, 5)).astype(np.float32)
    close(ours(T(x, device)), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(3, 4)


def test_instance_norm_values_stats_and_grad(device):
    r = rng_(16)
    x = r.standard_normal((3, 2, 4, 5))
    mu, var = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    w, b = r.standard_normal(2), r.standard_normal(2)
    rm, rv = T(np.zeros(2), device), T(np.ones(2), device)
    out = F.instance_norm(T(x, device), rm, rv, T(w, device), T(b, device), momentum=0.3)
    close(out, (x - mu) / np.sqrt(var + 1e-5) * w[None, :, None, None] + b[None, :, None, None])
    # running stats: batch mean of the per-instance mean and unbiased variance
    close(rm, 0.3 * mu.mean(axis=(0, 2, 3)))
    close(rv, 0.7 + 0.3 * (var * 20 / 19).mean(axis=(0, 2, 3)))
    # evaluation with the running stats
    ev = F.instance_norm(T(x, device), rm, rv, use_input_stats=False)
    close(ev, (x - A(rm)[None, :, None, None]) / np.sqrt(A(rv)[None, :, None, None] + 1e-5))
    xt, wt, bt = T(x[:2, :, :3, :3], device, rg=True), T(w, device, rg=True), T(b, device, rg=True)
    assert gradcheck(projected(lambda x, w, b: F.instance_norm(x, weight=w, bias=b)), (xt, wt, bt))
    with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
        F.instance_norm(T(np.zeros((2, 2, 1, 1)), device))


def test_instance_norm_modules_vs_torch(device):
    torch = torch_or_skip()
    r = rng_(17)
    for kw in (dict(), dict(affine=True), dict(track_running_stats=True),
               dict(affine=True, track_running_stats=True, momentum=None)):
        ours, theirs = nn.InstanceNorm2d(3, **kw), torch.nn.InstanceNorm2d(3, **kw)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        ours = ours.to(device)
        for step in range(2):
            x = r.standard_normal((2, 3, 4, 4)).astype(np.float32)
            close(ours(T(x, device)), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5,
                  rtol=1e-5)
        for k, v in theirs.state_dict().items():
            close(ours.state_dict()[k], v.numpy(), atol=1e-6, rtol=1e-5)
        ours.eval()
        theirs.eval()
        x = r.standard_normal((3, 4, 4)).astype(np.float32)  # unbatched
        close(ours(T(x, device)), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features"):
        nn.InstanceNorm2d(4, affine=True)(rc.zeros(1, 3, 2, 2))
    with pytest.raises(ValueError, match=r"expected 3D or 4D input \(got 2D input\)"):
        nn.InstanceNorm2d(4)(rc.zeros(3, 2))


# -- padding modules ----------------------------------------------------------------------


def test_pad_modules(device):
    r = rng_(18)
    x = r.standard_normal((1, 2, 4, 5))
    cases = [(nn.ZeroPad2d((1, 2, 0, 3)), np.pad(x, ((0, 0), (0, 0), (0, 3), (1, 2)))),
             (nn.ConstantPad2d(1, 2.5), np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)),
                                               constant_values=2.5)),
             (nn.ReflectionPad2d((2, 1, 3, 0)), np.pad(x, ((0, 0), (0, 0), (3, 0), (2, 1)),
                                                       mode="reflect")),
             (nn.ReplicationPad2d(2), np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)), mode="edge")),
             (nn.ReflectionPad1d(2), np.pad(x, ((0, 0), (0, 0), (0, 0), (2, 2)), mode="reflect"))]
    for m, ref in cases:
        close(m(T(x, device)), ref)
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert repr(nn.ConstantPad2d(1, 2.5)) == "ConstantPad2d(padding=(1, 1, 1, 1), value=2.5)"


# -- pixel shuffle ------------------------------------------------------------------------


def test_pixel_shuffle_values_inverse_and_grad(device):
    r = rng_(19)
    x = r.standard_normal((2, 8, 3, 4))
    ref = np.zeros((2, 2, 6, 8))
    for c in range(2):
        for i in range(6):
            for j in range(8):
                ref[:, c, i, j] = x[:, c * 4 + (i % 2) * 2 + (j % 2), i // 2, j // 2]
    out = F.pixel_shuffle(T(x, device), 2)
    close(out, ref)
    close(F.pixel_unshuffle(out, 2), x)
    close(nn.PixelShuffle(2)(T(x[0], device)), ref[0])  # (C, H, W)
    close(nn.PixelUnshuffle(2)(T(ref, device)), x)
    xt = T(x[:1, :, :2, :2], device, rg=True)
    assert gradcheck(projected(lambda v: F.pixel_shuffle(v, 2)), (xt,))
    with pytest.raises(RuntimeError, match=r"input.size\(-3\)=8 is not divisible by 9"):
        F.pixel_shuffle(T(x, device), 3)


# -- interpolate --------------------------------------------------------------------------


def np_nearest_index(n_in, n_out, scale=None):
    """PyTorch's nearest source index, in float32."""
    if n_out == n_in:
        return np.arange(n_out)
    s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * s).astype(int), n_in - 1)


def np_bilinear(x, oh, ow, align_corners, scales=(None, None)):
    """Bilinear resize by the formula: for each output pixel, the source point,
    its 4 neighbours and their weights, one pixel at a time."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))

    def src(o, n_in, n_out, scale):
        if align_corners:
            return o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        s = 1.0 / scale if scale else n_in / n_out
        return max((o + 0.5) * s - 0.5, 0.0)

    for i in range(oh):
        y = src(i, h, oh, scales[0])
        y0 = min(int(math.floor(y)), h - 1)
        y1, ly = min(y0 + 1, h - 1), y - y0
        for j in range(ow):
            xx = src(j, w, ow, scales[1])
            x0 = min(int(math.floor(xx)), w - 1)
            x1, lx = min(x0 + 1, w - 1), xx - x0
            out[:, :, i, j] = ((1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1])
                               + ly * ((1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]))
    return out


@pytest.mark.parametrize("kw,oshape", [(dict(size=(7, 3)), (7, 3)), (dict(scale_factor=2), (8, 10)),
                                       (dict(scale_factor=(1.5, 0.7)), (6, 3)),
                                       (dict(size=1), (1, 1))], ids=str)
def test_interpolate_nearest_and_bilinear_by_hand(device, kw, oshape):
    r = rng_(20)
    x = r.standard_normal((2, 3, 4, 5))
    sc = kw.get("scale_factor")
    scales = (sc, sc) if isinstance(sc, (int, float)) else (sc or (None, None))
    ih = np_nearest_index(4, oshape[0], scales[0])
    iw = np_nearest_index(5, oshape[1], scales[1])
    close(F.interpolate(T(x, device), **kw), x[:, :, ih][:, :, :, iw])
    for ac in (False, True):
        out = F.interpolate(T(x, device), mode="bilinear", align_corners=ac, **kw)
        close(out, np_bilinear(x, *oshape, ac, (None, None) if ac else scales))
    # nearest on a 3-D (N, C, L) input
    close(F.interpolate(T(x[:, :, 0], device), size=oshape[1]),
          x[:, :, 0][:, :, np_nearest_index(5, oshape[1])])


def test_interpolate_vs_torch(device):
    torch = torch_or_skip()
    r = rng_(21)
    x = r.standard_normal((1, 2, 5, 7)).astype(np.float32)
    for kw in (dict(scale_factor=1.7), dict(scale_factor=(0.6, 2.3)), dict(size=(3, 13)),
               dict(scale_factor=3), dict(scale_factor=1.7, recompute_scale_factor=True)):
        for mode, ac in (("nearest", None), ("nearest-exact", None), ("bilinear", False),
                         ("bilinear", True)):
            out = F.interpolate(T(x, device), mode=mode, align_corners=ac, **kw)
            ref = torch.nn.functional.interpolate(torch.tensor(x), mode=mode, align_corners=ac,
                                                  **kw)
            close(out, ref.numpy(), atol=2e-6, rtol=1e-5)
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    assert repr(up) == repr(torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True))
    ref = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(torch.tensor(x))
    close(up(T(x, device)), ref.numpy(), atol=2e-6)


def test_interpolate_grad(device):
    r = rng_(22)
    x = T(r.standard_normal((1, 2, 3, 4)), device, rg=True)
    for ac in (False, True):
        assert gradcheck(projected(lambda v: F.interpolate(v, size=(5, 3), mode="bilinear",
                                                           align_corners=ac)), (x,))
    assert gradcheck(projected(lambda v: F.interpolate(v, scale_factor=2)), (x,))
    assert gradcheck(projected(lambda v: F.interpolate(v, size=(2, 7))), (x,))


def test_interpolate_errors(device):
    x = T(np.zeros((1, 1, 4, 4)), device)
    with pytest.raises(ValueError, match="only one of size or scale_factor should be defined"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set with the "
                                         "interpolating modes"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D input"):
        F.interpolate(T(np.zeros((1, 1, 4)), device), size=2, mode="bilinear")
    with pytest.raises(ValueError, match="Input and output must have the same number of spatial"):
        F.interpolate(x, size=(2, 2, 2))
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=2, recompute_scale_factor=True)
    xi = rc.arange(16, device=device).reshape(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="mode 'bilinear' needs a floating point input"):
        F.interpolate(xi, size=2, mode="bilinear")
    close(F.interpolate(xi, scale_factor=0.5), np.arange(16).reshape(1, 1, 4, 4)[:, :, ::2, ::2])


# -- pools --------------------------------------------------------------------------------


def test_pool_modules(device):
    r = rng_(23)
    x = r.standard_normal((2, 3, 7, 5))
    out = nn.AdaptiveAvgPool2d((3, 2)).to(device)(T(x, device))
    ref = np.zeros((2, 3, 3, 2))
    amax_ref = np.zeros((2, 3, 3, 2))
    for i in range(3):
        a, b = (i * 7) // 3, -(-((i + 1) * 7) // 3)
        for j in range(2):
            c, d = (j * 5) // 2, -(-((j + 1) * 5) // 2)
            ref[:, :, i, j] = x[:, :, a:b, c:d].mean((2, 3))
            amax_ref[:, :, i, j] = x[:, :, a:b, c:d].max((2, 3))
    close(out, ref)
    close(nn.AdaptiveMaxPool2d((3, 2))(T(x, device)), amax_ref)
    v, idx = F.adaptive_max_pool2d(T(x, device), (3, 2), return_indices=True)
    picked = np.take_along_axis(x.reshape(2, 3, -1), A(idx).reshape(2, 3, -1), -1)
    close(picked.reshape(v.shape), A(v))
    x1 = r.standard_normal((2, 3, 9))
    starts = (0, 2, 4, 6)
    close(nn.MaxPool1d(3, 2)(T(x1, device)),
          np.stack([x1[..., i:i + 3].max(-1) for i in starts], -1))
    close(nn.AvgPool1d(2)(T(x1, device)), np.stack([x1[..., i:i + 2].mean(-1) for i in starts], -1))
    close(nn.AdaptiveAvgPool1d(1)(T(x1, device)), x1.mean(-1, keepdims=True))
    xt = T(x[:1, :1], device, rg=True)
    assert gradcheck(projected(lambda v: F.adaptive_max_pool2d(v, (3, 2))), (xt,))


def test_pool_modules_vs_torch(device):
    torch = torch_or_skip()
    r = rng_(24)
    x = r.standard_normal((2, 3, 9))
    for ours, theirs in ((nn.MaxPool1d(3, 2, 1, ceil_mode=True),
                          torch.nn.MaxPool1d(3, 2, 1, ceil_mode=True)),
                         (nn.AvgPool1d(3, 2, 1, count_include_pad=False),
                          torch.nn.AvgPool1d(3, 2, 1, count_include_pad=False)),
                         (nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4))):
        close(ours(T(x, device)), theirs(torch.tensor(x)).numpy())
        assert repr(ours) == repr(theirs)


# -- nn.utils -----------------------------------------------------------------------------


def _params_with_grads(device, grads):
    ps = []
    for g in grads:
        p = nn.Parameter(rc.zeros(g.shape, dtype=F64, device=device))
        p.grad = T(g, device)
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_values(device, norm_type):
    r = rng_(25)
    grads = [r.standard_normal((3, 4)), r.standard_normal(5), r.standard_normal((2, 2, 2))]
    flat = np.concatenate([g.ravel() for g in grads])
    total = np.abs(flat).max() if norm_type == math.inf else \
        (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    ps = _params_with_grads(device, grads)
    ps.append(nn.Parameter(rc.zeros(2, device=device)))  # no grad: skipped
    ret = clip_grad_norm_(ps, max_norm=0.5, norm_type=norm_type)
    assert isinstance(ret, rc.Tensor) and ret.ndim == 0
    close(ret, total)
    coef = min(1.0, 0.5 / (total + 1e-6))
    for p, g in zip(ps, grads):
        close(p.grad, g * coef)
    # a large max_norm leaves the gradients as they are
    ps = _params_with_grads(device, grads)
    clip_grad_norm_(iter(ps), max_norm=1e6, norm_type=norm_type)
    for p, g in zip(ps, grads):
        close(p.grad, g)


def test_clip_grad_norm_vs_torch(device):
    torch = torch_or_skip()
    r = rng_(26)
    grads = [r.standard_normal((4, 3)).astype(np.float32), r.standard_normal(3).astype(np.float32)]
    ps = [nn.Parameter(rc.zeros(g.shape, device=device)) for g in grads]
    tps = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
    for p, tp, g in zip(ps, tps, grads):
        p.grad, tp.grad = T(g, device), torch.tensor(g)
    close(clip_grad_norm_(ps, 1.0), torch.nn.utils.clip_grad_norm_(tps, 1.0).numpy(), atol=1e-6)
    for p, tp in zip(ps, tps):
        close(p.grad, tp.grad.numpy(), atol=1e-7, rtol=1e-6)


def test_clip_grad_norm_nonfinite_and_empty(device):
    ps = _params_with_grads(device, [np.array([1.0, np.inf]), np.array([2.0])])
    with pytest.raises(RuntimeError, match=r"The total norm of order 2.0 for gradients from "
                                           r"`parameters` is non-finite, so it cannot be clipped"):
        clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    close(ps[1].grad, np.array([2.0]))  # nothing scaled
    ps = _params_with_grads(device, [np.array([np.nan, 1.0])])
    with pytest.raises(RuntimeError, match="order inf"):
        clip_grad_norm_(ps, 1.0, norm_type="inf", error_if_nonfinite=True)
    # without the check the gradients are scaled by the non-finite norm, as PyTorch
    ret = clip_grad_norm_(_params_with_grads(device, [np.array([1.0, np.inf])]), 1.0)
    assert math.isinf(float(ret.item()))
    empty = clip_grad_norm_([nn.Parameter(rc.ones(2, device=device))], 1.0)
    assert float(empty.item()) == 0.0
    with pytest.warns(UserWarning, match="empty generator"):
        clip_grad_norm_((p for p in []), 1.0)


def test_clip_grad_norm_does_not_read_back(device, monkeypatch):
    """Without error_if_nonfinite, no value travels to the host (no sync)."""
    ps = _params_with_grads(device, [np.full(4, 3.0), np.full(3, 4.0)])

    def no_host(*a, **k):
        raise AssertionError("clip_grad_norm_ read a value back to the host")

    for name in ("item", "numpy", "tolist", "__bool__", "__float__"):
        monkeypatch.setattr(rc.Tensor, name, no_host)
    total = clip_grad_norm_(ps, 1.0)
    monkeypatch.undo()
    expected = math.sqrt(4 * 9 + 3 * 16)
    close(total, expected)
    close(ps[0].grad, np.full(4, 3.0) / (expected + 1e-6))


def test_clip_grad_value(device):
    g = np.array([-3.0, -0.5, 0.2, 4.0])
    ps = _params_with_grads(device, [g])
    assert clip_grad_value_(ps, 1.0) is None
    close(ps[0].grad, np.clip(g, -1, 1))
    p = _params_with_grads(device, [g])[0]
    clip_grad_value_(p, 0.3)  # a single tensor
    close(p.grad, np.clip(g, -0.3, 0.3))


def test_parameters_vector_round_trip(device):
    lin = nn.Linear(3, 2).to(device)
    vec = parameters_to_vector(lin.parameters())
    close(vec, np.concatenate([A(lin.weight).ravel(), A(lin.bias)]))
    new = np.arange(8.0)
    vector_to_parameters(T(new, device, dtype=rc.float32), lin.parameters())
    close(lin.weight, new[:6].reshape(2, 3))
    close(lin.bias, new[6:])
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        vector_to_parameters([1.0], lin.parameters())


def test_nn_utils_import_paths():
    import rtxcore.nn.utils as U
    from rtxcore.nn.utils import clip_grad_norm_ as c

    assert rc.nn.utils.clip_grad_norm_ is c is U.clip_grad_norm_
    with pytest.warns(FutureWarning, match="clip_grad_norm` is now deprecated"):
        U.clip_grad_norm([nn.Parameter(rc.ones(1))], 1.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clip_grad_norm_s_kernel_path_gives_the_op_path_s_bits(dtype, monkeypatch, device):
    """Gradients of one device and dtype take the kernels directly (no op per
    gradient); the same bits as the ops, a bumped version on each gradient."""
    from rtxcore.nn.utils import clip_grad as CG

    shapes = [(5, 7), (), (0, 3), (64,), (3, 4, 5)]

    def run():
        rng = np.random.default_rng(7)
        ps = []
        for s in shapes + [(8, 6)]:
            g = rc.tensor(rng.standard_normal(s) * 3, dtype=getattr(rc, dtype), device=device)
            if s == (8, 6):
                g = g.t()  # (not contiguous)
            p = rc.zeros(g.shape, dtype=g.dtype, device=device, requires_grad=True)
            p.grad = g
            ps.append(p)
        versions = [p.grad._storage.version for p in ps]
        total = rc.nn.utils.clip_grad_norm_(ps, 1.0)
        assert all(p.grad._storage.version > v for p, v in zip(ps, versions))
        return total, [p.grad for p in ps]

    t_fast, g_fast = run()
    monkeypatch.setattr(CG, "_one_kind", lambda ts: False)
    t_ops, g_ops = run()
    np.testing.assert_array_equal(t_fast.cpu().numpy(), t_ops.cpu().numpy())
    for a, b in zip(g_fast, g_ops):
        np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    assert float(t_fast.cpu()) > 1.0  # (clipped: the gradients were scaled)


def test_clip_grad_norm_refuses_an_expanded_gradient_as_mul__does(device):
    """Its elements share memory: scaling each would scale the shared ones again
    (PyTorch refuses the in-place write too)."""
    p = rc.zeros(4, 3, device=device, requires_grad=True)
    p.grad = rc.tensor([[1.0, 2.0, 3.0]], device=device).expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        rc.nn.utils.clip_grad_norm_([p], 1.0)
    q = rc.zeros(3, device=device, requires_grad=True)
    q.grad = rc.tensor([3.0, 4.0, 0.0], device=device)
    # a total norm of another shape than 0-d takes the op path (elementwise, as PyTorch)
    rc.nn.utils.clip_grads_with_norm_([q], 1.0, rc.tensor([4.0, 9.0, 1.0], device=device))
    np.testing.assert_allclose(q.grad.cpu().numpy(), [3.0 / (4.0 + 1e-6), 4.0 / (9.0 + 1e-6), 0.0],
                               rtol=1e-6)
