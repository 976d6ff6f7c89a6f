"""``rtxcore.nn.functional`` against NumPy references written here (and against
``torch.nn.functional`` too, where torch imports: only that part is skipped
without it), on every device; gradients by ``gradcheck`` in float64; dropout's
statistics; batch_norm's running stats; the error messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.testing import raise_device_errors
import rtxcore.nn.functional as F
from rtxcore.autograd import gradcheck, gradgradcheck

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the NumPy references still run
    torch = None
    TF = None

F64 = rc.float64

# torch's own note on padding='same' with even kernels (its reference side only)
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


# -- helpers ------------------------------------------------------------------------------


def T(a, device, dtype=None, rg=False):
    """A tensor on ``device`` from array-like ``a``, in the array's dtype (Python floats:
    float64) unless ``dtype`` says otherwise."""
    arr = np.asarray(a)
    if dtype is None and arr.dtype.kind == "f":
        dtype = rc.float32 if arr.dtype == np.float32 else F64
    t = rc.tensor(arr, dtype=dtype, device=device)
    return t.requires_grad_() if rg else t


def A(t):
    """A tensor (or None) as a NumPy array."""
    if t is None:
        return None
    return np.asarray(t.detach().cpu().numpy())


def close(actual, expected, atol=1e-6, rtol=1e-5):
    a = A(actual) if isinstance(actual, rc.Tensor) else np.asarray(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, equal_nan=True)


def tt(a):
    """NumPy -> torch (keeps int/float dtype)."""
    return torch.tensor(np.asarray(a))


def vs_torch(actual, fn, atol=1e-6, rtol=1e-5):
    """Compare with ``fn()`` (a torch computation) when torch is installed."""
    if torch is None:
        return
    expected = fn()
    if isinstance(expected, tuple):
        for a, e in zip(actual, expected):
            close(a, e.detach().numpy(), atol, rtol)
    else:
        close(actual, expected.detach().numpy(), atol, rtol)


def rng_(seed=0):
    return np.random.default_rng(seed)


def projected(fn, shape_seed=1):
    """``fn``'s output as one number, a fixed random projection of it: gradcheck then
    needs one backward instead of one per output element."""
    cache = {}

    def wrapped(*args):
        out = fn(*args)
        key = (tuple(out.shape), out.device)
        if key not in cache:
            proj = rng_(shape_seed).standard_normal(tuple(out.shape))
            cache[key] = rc.tensor(proj, dtype=out.dtype, device=out.device)
        return (out * cache[key]).sum()

    return wrapped


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    s = x - m
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# -- linear -------------------------------------------------------------------------------


@pytest.mark.parametrize("xshape", [(3, 4), (4,), (2, 3, 4)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_values(device, xshape, with_bias):
    r = rng_()
    x, w, b = r.standard_normal(xshape), r.standard_normal((5, 4)), r.standard_normal(5)
    out = F.linear(T(x, device), T(w, device), T(b, device) if with_bias else None)
    expected = x @ w.T + (b if with_bias else 0)
    close(out, expected)
    vs_torch(out, lambda: TF.linear(tt(x), tt(w), tt(b) if with_bias else None))


def test_linear_float32(device):
    r = rng_(1)
    x, w, b = (r.standard_normal(s).astype(np.float32) for s in ((6, 3), (2, 3), (2,)))
    out = F.linear(T(x, device), T(w, device), T(b, device))
    assert out.dtype == rc.float32
    close(out, x @ w.T + b, atol=1e-5)


def test_linear_grad(device):
    r = rng_(2)
    x, w, b = (T(r.standard_normal(s), device, rg=True) for s in ((3, 4), (2, 4), (2,)))
    assert gradcheck(F.linear, (x, w, b))
    x3 = T(r.standard_normal((2, 2, 4)), device, rg=True)
    assert gradcheck(projected(F.linear), (x3, w, b))


def test_linear_errors(device):
    x, w = T(np.zeros((2, 5)), device), T(np.zeros((3, 4)), device)
    with pytest.raises(RuntimeError, match=r"linear: input has 5 features \(shape \(2, 5\)\) but "
                                           r"weight expects 4 \(weight shape \(3, 4\)\)"):
        F.linear(x, w)
    with pytest.raises(RuntimeError, match="bias of shape"):
        F.linear(T(np.zeros((2, 4)), device), w, T(np.zeros(2), device))
    with pytest.raises(RuntimeError, match="weight must be 2-D"):
        F.linear(x, T(np.zeros((1, 3, 5)), device))
    with pytest.raises(TypeError, match="must be a Tensor"):
        F.linear([[1.0]], w)


# -- conv2d -------------------------------------------------------------------------------


def np_conv2d(x, w, b, stride=1, padding=0, dilation=1):
    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    kh, kw = w.shape[2:]
    if padding == "same":
        th, tw_ = dh * (kh - 1), dw * (kw - 1)
        pads = (th // 2, th - th // 2, tw_ // 2, tw_ - tw_ // 2)
    elif padding == "valid":
        pads = (0, 0, 0, 0)
    else:
        ph, pw = pair(padding)
        pads = (ph, ph, pw, pw)
    xp = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


CONV_CASES = [
    dict(n=1, c=1, oc=1, hw=(5, 5), k=(3, 3)),
    dict(n=2, c=3, oc=4, hw=(6, 7), k=(3, 2), stride=2),
    dict(n=2, c=2, oc=3, hw=(5, 6), k=(3, 3), padding=1),
    dict(n=1, c=2, oc=2, hw=(6, 5), k=(2, 3), padding="same"),
    dict(n=2, c=2, oc=3, hw=(7, 7), k=(3, 3), dilation=2, padding=(2, 1)),
    dict(n=3, c=2, oc=2, hw=(8, 6), k=(2, 2), stride=(2, 1), dilation=(1, 2), padding="valid"),
    dict(n=1, c=3, oc=2, hw=(7, 8), k=(3, 3), stride=2, padding=1, dilation=2),
    dict(n=2, c=1, oc=2, hw=(4, 4), k=(1, 1), bias=False),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_conv2d_values(device, case):
    case = dict(case)
    r = rng_(3)
    n, c, oc, (h, w_), k = case.pop("n"), case.pop("c"), case.pop("oc"), case.pop("hw"), case.pop("k")
    bias = case.pop("bias", True)
    x = r.standard_normal((n, c, h, w_))
    w = r.standard_normal((oc, c) + k)
    b = r.standard_normal(oc) if bias else None
    out = F.conv2d(T(x, device), T(w, device), T(b, device) if bias else None, **case)
    close(out, np_conv2d(x, w, b, **case), atol=1e-10)
    assert out.is_contiguous()
    vs_torch(out, lambda: TF.conv2d(tt(x), tt(w), tt(b) if bias else None, **case))


def test_conv2d_unbatched_and_float32(device):
    r = rng_(4)
    x = r.standard_normal((2, 5, 5)).astype(np.float32)
    w = r.standard_normal((3, 2, 3, 3)).astype(np.float32)
    out = F.conv2d(T(x, device), T(w, device), padding=1)
    assert out.shape == (3, 5, 5) and out.dtype == rc.float32
    close(out, np_conv2d(x[None], w, None, padding=1)[0], atol=1e-4, rtol=1e-4)
    # the result is a plain contiguous tensor: .view works as after PyTorch's conv
    assert F.conv2d(T(x[None], device), T(w, device)).view(1, -1).shape == (1, 27)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, dilation=2), dict(padding="same")])
def test_conv2d_grad(device, kw):
    r = rng_(5)
    x = T(r.standard_normal((2, 2, 5, 4)), device, rg=True)
    w = T(r.standard_normal((2, 2, 2, 3)), device, rg=True)
    b = T(r.standard_normal(2), device, rg=True)
    assert gradcheck(projected(lambda x, w, b: F.conv2d(x, w, b, **kw)), (x, w, b))


def test_conv2d_grad_matches_torch(device):
    r = rng_(6)
    x, w, b = r.standard_normal((2, 3, 6, 5)), r.standard_normal((4, 3, 3, 2)), r.standard_normal(4)
    g = r.standard_normal((2, 4, 3, 6))
    xs, ws, bs = T(x, device, rg=True), T(w, device, rg=True), T(b, device, rg=True)
    F.conv2d(xs, ws, bs, stride=(2, 1), padding=1).backward(T(g, device))
    if torch is not None:
        tx, tw, tb = (tt(a).requires_grad_() for a in (x, w, b))
        TF.conv2d(tx, tw, tb, stride=(2, 1), padding=1).backward(tt(g))
        for ours, theirs in ((xs, tx), (ws, tw), (bs, tb)):
            close(ours.grad, theirs.grad.numpy(), atol=1e-10)
    # the input gradient against the NumPy reference's transpose (a finite check: the
    # gradient of <conv(x), g> in x is linear, so it's exact on basis vectors)
    e = np.zeros_like(x)
    e[1, 2, 3, 4] = 1.0
    ref = (np_conv2d(e, w, None, stride=(2, 1), padding=1) * g).sum()
    assert abs(A(xs.grad)[1, 2, 3, 4] - ref) < 1e-10


def test_conv2d_double_backward(device):
    r = rng_(7)
    x = T(r.standard_normal((1, 1, 3, 3)), device, rg=True)
    w = T(r.standard_normal((1, 1, 2, 2)), device, rg=True)
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, padding=1, stride=2), (x, w))


def test_conv2d_errors(device):
    x = T(np.zeros((2, 3, 5, 5)), device)
    with pytest.raises(RuntimeError, match=r"input has 3 channels .* weight expects 6 .*groups=3"):
        F.conv2d(x, T(np.zeros((3, 2, 3, 3)), device), groups=3)
    with pytest.raises(RuntimeError, match=r"input has 3 channels \(input shape \(2, 3, 5, 5\)\) but "
                                           r"weight expects 2 \(weight shape \(4, 2, 3, 3\)\)"):
        F.conv2d(x, T(np.zeros((4, 2, 3, 3)), device))
    with pytest.raises(RuntimeError, match=r"padded input size per channel: \(2 x 2\). Kernel size: "
                                           r"\(3 x 3\)"):
        F.conv2d(T(np.zeros((1, 3, 2, 2)), device), T(np.zeros((4, 3, 3, 3)), device))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        F.conv2d(x, T(np.zeros((4, 3, 3, 3)), device), stride=2, padding="same")
    with pytest.raises(ValueError, match="invalid padding string 'full'"):
        F.conv2d(x, T(np.zeros((4, 3, 3, 3)), device), padding="full")
    with pytest.raises(RuntimeError, match=r"expected a 3-D \(C, H, W\) or 4-D .* got shape \(5, 5\)"):
        F.conv2d(T(np.zeros((5, 5)), device), T(np.zeros((4, 3, 3, 3)), device))
    with pytest.raises(RuntimeError, match="weight must be 4-D"):
        F.conv2d(x, T(np.zeros((4, 3, 3)), device))
    with pytest.raises(RuntimeError, match="bias has 3 elements"):
        F.conv2d(x, T(np.zeros((4, 3, 3, 3)), device), T(np.zeros(3), device))


# -- pooling ------------------------------------------------------------------------------


def np_out_size(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def np_max_pool(x, k, s=None, p=0, d=1, ceil_mode=False):
    (kh, kw), (ph, pw), (dh, dw) = pair(k), pair(p), pair(d)
    sh, sw = pair(s) if s is not None else (kh, kw)
    n, c, h, w = x.shape
    oh, ow = np_out_size(h, kh, sh, ph, dh, ceil_mode), np_out_size(w, kw, sw, pw, dw, ceil_mode)
    vals = np.full((n, c, oh, ow), -np.inf)
    idx = np.zeros((n, c, oh, ow), dtype=np.int64)
    for a in range(oh):
        for b in range(ow):
            for i in range(kh):
                for j in range(kw):
                    r, q = a * sh - ph + i * dh, b * sw - pw + j * dw
                    if 0 <= r < h and 0 <= q < w:
                        v = x[:, :, r, q]
                        better = v > vals[:, :, a, b]
                        vals[:, :, a, b] = np.where(better, v, vals[:, :, a, b])
                        idx[:, :, a, b] = np.where(better, r * w + q, idx[:, :, a, b])
    return vals, idx


def np_avg_pool(x, k, s=None, p=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    (kh, kw), (ph, pw) = pair(k), pair(p)
    sh, sw = pair(s) if s is not None else (kh, kw)
    n, c, h, w = x.shape
    oh, ow = np_out_size(h, kh, sh, ph, 1, ceil_mode), np_out_size(w, kw, sw, pw, 1, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for a in range(oh):
        for b in range(ow):
            h0, w0 = a * sh - ph, b * sw - pw
            h1, w1 = min(h0 + kh, h + ph), min(w0 + kw, w + pw)
            size = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            total = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
            if divisor_override:
                div = divisor_override
            else:
                div = size if count_include_pad else (h1 - h0) * (w1 - w0)
            out[:, :, a, b] = total / div
    return out


POOL_CASES = [
    dict(k=2),
    dict(k=3, s=2, p=1),
    dict(k=(3, 2), s=(2, 1)),
    dict(k=(3, 2), s=(2, 1), ceil_mode=True),
    dict(k=3, s=2, p=1, ceil_mode=True),
    dict(k=2, s=3, ceil_mode=True),
    dict(k=3, s=1, p=1),
]


def _pool_kw(case):
    kw = dict(kernel_size=case["k"], stride=case.get("s"), padding=case.get("p", 0),
              ceil_mode=case.get("ceil_mode", False))
    return kw


@pytest.mark.parametrize("case", POOL_CASES + [dict(k=2, d=2, p=1), dict(k=(2, 3), d=(2, 1), s=1)],
                         ids=str)
def test_max_pool2d_values(device, case):
    r = rng_(8)
    x = r.standard_normal((2, 3, 7, 6))
    kw = _pool_kw(case)
    kw["dilation"] = case.get("d", 1)
    vals, idx = np_max_pool(x, case["k"], case.get("s"), case.get("p", 0), kw["dilation"],
                            kw["ceil_mode"])
    out = F.max_pool2d(T(x, device), **kw)
    close(out, vals, atol=0)
    v2, i2 = F.max_pool2d(T(x, device), return_indices=True, **kw)
    close(v2, vals, atol=0)
    assert i2.dtype == rc.int64
    close(i2, idx, atol=0)
    vs_torch((out, i2), lambda: TF.max_pool2d(tt(x), return_indices=True, **kw), atol=0)


def test_max_pool2d_unbatched_float32_and_int(device):
    r = rng_(9)
    x = r.standard_normal((2, 5, 5)).astype(np.float32)
    out = F.max_pool2d(T(x, device), 2, padding=1)
    close(out, np_max_pool(x[None], 2, None, 1)[0][0], atol=0)
    assert out.dtype == rc.float32
    xi = r.integers(-5, 5, (1, 1, 4, 4))
    close(F.max_pool2d(T(xi, device), 2), np_max_pool(xi.astype(float), 2)[0].astype(np.int64), atol=0)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True)])
def test_max_pool2d_grad(device, kw):
    # distinct values: no ties, where the max isn't differentiable
    vals = (rng_(10).permutation(2 * 2 * 5 * 5) * 0.37 + 0.1).reshape(2, 2, 5, 5)
    x = T(vals, device, rg=True)
    assert gradcheck(projected(lambda x: F.max_pool2d(x, **kw)), (x,))
    x2 = T(vals, device, rg=True)
    assert gradcheck(projected(lambda x: F.max_pool2d(x, return_indices=True, **kw)[0]), (x2,))


def test_max_pool2d_indices_grad_matches_torch_with_ties(device):
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = 1.0
    xs = T(x, device, rg=True)
    v, _ = F.max_pool2d(xs, 2, return_indices=True)
    v.sum().backward()
    expected = np.zeros_like(x)
    expected[0, 0, 1, 1] = 1.0
    expected[0, 0, 0, 2] = expected[0, 0, 2, 0] = expected[0, 0, 2, 2] = 1.0  # first of the tied zeros
    close(xs.grad, expected, atol=0)
    if torch is not None:
        tx = tt(x).requires_grad_()
        TF.max_pool2d(tx, 2).sum().backward()
        close(xs.grad, tx.grad.numpy(), atol=0)
    # without indices, tied maxima share the gradient (as amax)
    xs.grad = None
    F.max_pool2d(xs, 2).sum().backward()
    assert abs(A(xs.grad)[0, 0, 2:, 2:].sum() - 1.0) < 1e-12


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_values(device, case, count_include_pad):
    r = rng_(11)
    x = r.standard_normal((2, 2, 7, 6))
    kw = _pool_kw(case)
    out = F.avg_pool2d(T(x, device), count_include_pad=count_include_pad, **kw)
    close(out, np_avg_pool(x, case["k"], case.get("s"), case.get("p", 0), kw["ceil_mode"],
                           count_include_pad), atol=1e-12)
    vs_torch(out, lambda: TF.avg_pool2d(tt(x), count_include_pad=count_include_pad, **kw))


def test_avg_pool2d_divisor_override_and_unbatched(device):
    x = rng_(12).standard_normal((3, 5, 5))
    out = F.avg_pool2d(T(x, device), 3, stride=2, padding=1, divisor_override=4)
    close(out, np_avg_pool(x[None], 3, 2, 1, divisor_override=4)[0], atol=1e-12)
    vs_torch(out, lambda: TF.avg_pool2d(tt(x), 3, stride=2, padding=1, divisor_override=4))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1,
                                                           count_include_pad=False, ceil_mode=True)])
def test_avg_pool2d_grad(device, kw):
    x = T(rng_(13).standard_normal((1, 2, 5, 5)), device, rg=True)
    assert gradcheck(projected(lambda x: F.avg_pool2d(x, **kw)), (x,))


def test_pool_errors(device):
    x = T(np.zeros((1, 1, 5, 5)), device)
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size, "
                                           "but got pad=2, kernel_size=2 and dilation=1"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.max_pool2d(T(np.zeros((1, 1, 2, 2)), device), 3, padding=1, dilation=2)
    with pytest.raises(RuntimeError, match="expected a 3-D"):
        F.avg_pool2d(T(np.zeros((5, 5)), device), 2)


@pytest.mark.parametrize("size", [1, (2, 3), (3, 4), (5, 2)])
def test_adaptive_avg_pool2d(device, size):
    x = rng_(14).standard_normal((2, 2, 6, 5))
    oh, ow = pair(size)
    expected = np.zeros((2, 2, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * 6) // oh, -(-((i + 1) * 6) // oh)
            w0, w1 = (j * 5) // ow, -(-((j + 1) * 5) // ow)
            expected[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    out = F.adaptive_avg_pool2d(T(x, device), size)
    close(out, expected, atol=1e-12)
    vs_torch(out, lambda: TF.adaptive_avg_pool2d(tt(x), size))
    xg = T(x[:1, :1], device, rg=True)
    assert gradcheck(projected(lambda x: F.adaptive_avg_pool2d(x, size)), (xg,))


def test_unfold(device):
    r = rng_(15)
    x = r.standard_normal((2, 2, 5, 6))
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=2)
    out = F.unfold(T(x, device), **kw)
    # im2col: conv2d is unfold followed by a matmul with the flattened weight
    w = r.standard_normal((3, 2, 2, 3))
    conv = np_conv2d(x, w, None, stride=2, padding=1, dilation=(1, 2))
    close(np.einsum("ok,nkl->nol", w.reshape(3, -1), A(out)), conv.reshape(2, 3, -1), atol=1e-10)
    vs_torch(out, lambda: TF.unfold(tt(x), **kw))
    xg = T(x[:1], device, rg=True)
    assert gradcheck(projected(lambda x: F.unfold(x, **kw)), (xg,))


# -- activations --------------------------------------------------------------------------


def _erf(x):
    return np.vectorize(math.erf)(x)


ACTIVATIONS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0), "relu"),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6), "relu6"),
    "hardtanh": (F.hardtanh, lambda x: np.clip(x, -1, 1), "hardtanh"),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x),
                   lambda t: TF.leaky_relu(t, 0.2)),
    "elu": (lambda x: F.elu(x, 1.5), lambda x: np.where(x > 0, x, 1.5 * np.expm1(np.minimum(x, 0))),
            lambda t: TF.elu(t, 1.5)),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "gelu"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                  lambda t: TF.gelu(t, approximate="tanh")),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x)), "silu"),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "sigmoid"),
    "tanh": (F.tanh, np.tanh, "tanh"),
    "softplus": (lambda x: F.softplus(x, beta=2.0, threshold=3.0),
                 lambda x: np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2),
                 lambda t: TF.softplus(t, beta=2.0, threshold=3.0)),
    "logsigmoid": (F.logsigmoid, lambda x: -np.logaddexp(0, -x), "logsigmoid"),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_values_and_grad(device, name):
    ours, ref, theirs = ACTIVATIONS[name]
    r = rng_(16)
    # away from the kinks at 0 (relu, ...), +-1 (hardtanh) and 6 (relu6)
    x = r.choice([-1.0, 1.0], (3, 4)) * r.uniform(0.1, 0.9, (3, 4)) * 3 + 0.05
    x[0, :2] = [7.5, -30.0]
    out = ours(T(x, device))
    close(out, ref(x), atol=1e-7, rtol=1e-6)
    if torch is not None:
        tf = getattr(TF, theirs) if isinstance(theirs, str) else theirs
        close(out, tf(tt(x)).numpy(), atol=1e-7, rtol=1e-6)
    xg = T(x, device, rg=True)
    assert gradcheck(projected(ours), (xg,))


def test_activation_extremes_and_inplace(device):
    # large inputs: finite values and gradients (no inf * 0 in an unused branch)
    x = T([-1000.0, -50.0, 0.0, 50.0, 1000.0], device, rg=True)
    for fn in (F.logsigmoid, F.softplus, F.elu, F.silu, F.sigmoid):
        x.grad = None
        y = fn(x)
        y.sum().backward()
        assert np.isfinite(A(x.grad)).all(), fn.__name__
    close(F.logsigmoid(x), [-1000.0, -50.0, -math.log(2), -math.exp(-50), 0.0], rtol=1e-12)
    y = T([-1.0, 2.0], device)
    assert F.relu(y, inplace=True) is y
    close(y, [0.0, 2.0])
    y = T([-1.0, 2.0], device)
    F.leaky_relu(y, 0.5, inplace=True)
    close(y, [-0.5, 2.0])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(device, dim):
    x = rng_(17).standard_normal((3, 4, 2)) * 3
    close(F.softmax(T(x, device), dim), np.exp(np_log_softmax(x, dim)), atol=1e-12)
    close(F.log_softmax(T(x, device), dim), np_log_softmax(x, dim), atol=1e-12)
    close(F.softmin(T(x, device), dim), np.exp(np_log_softmax(-x, dim)), atol=1e-12)
    vs_torch(F.log_softmax(T(x, device), dim), lambda: TF.log_softmax(tt(x), dim))
    out = F.softmax(T(x.astype(np.float32), device, dtype=rc.float32), dim, dtype=rc.float64)
    assert out.dtype == rc.float64
    xg = T(x[:2, :3], device, rg=True)
    assert gradcheck(projected(lambda x: F.softmax(x, dim)), (xg,))
    assert gradcheck(projected(lambda x: F.log_softmax(x, dim)), (xg,))


def test_softmax_implicit_dim_warns(device):
    x = rng_(18).standard_normal((2, 3))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        out = F.softmax(T(x, device))
    close(out, np.exp(np_log_softmax(x, 1)), atol=1e-12)  # 2-D: dim 1, as PyTorch


# -- dropout ------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_statistics(device, p):
    rc.manual_seed(123)
    x = T(np.full((200, 100), 3.0), device, dtype=rc.float32)
    out = A(F.dropout(x, p))
    zero = out == 0
    assert abs(zero.mean() - p) < 0.02
    # survivors scaled exactly as PyTorch: x * (1 / (1 - p)) in the tensor's dtype
    np.testing.assert_array_equal(out[~zero], np.float32(3.0) * np.float32(1.0 / (1.0 - p)))


def test_dropout_modes(device):
    x = T(rng_(19).standard_normal((4, 5)), device)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    close(F.dropout(x, 1.0), np.zeros((4, 5)))
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=f"dropout probability has to be between 0 and 1, but got {bad}"):
            F.dropout(x, bad)
    # reproducible under manual_seed
    rc.manual_seed(7)
    a = A(F.dropout(x, 0.5))
    rc.manual_seed(7)
    b = A(F.dropout(x, 0.5))
    np.testing.assert_array_equal(a, b)
    c = A(F.dropout(x, 0.5))  # the generator moved on
    assert not np.array_equal(a == 0, c == 0)
    # gradient: the same mask, the same scale
    xg = T(rng_(20).standard_normal((4, 5)), device, rg=True)
    rc.manual_seed(8)
    y = F.dropout(xg, 0.25)
    y.sum().backward()
    kept = A(y) != 0
    close(xg.grad, np.where(kept, 1 / 0.75, 0.0), atol=1e-12)
    # in place
    z = T(np.ones((50,)), device)
    assert F.dropout(z, 0.5, inplace=True) is z
    assert set(np.unique(A(z))) <= {0.0, 2.0}


# -- normalization ------------------------------------------------------------------------


@pytest.mark.parametrize("shape,ns", [((3, 5), 5), ((2, 3, 4), (3, 4)), ((2, 3, 4), [4])])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_values(device, shape, ns, affine):
    r = rng_(21)
    x = r.standard_normal(shape) * 2 + 1
    nst = (ns,) if isinstance(ns, int) else tuple(ns)
    w, b = r.standard_normal(nst), r.standard_normal(nst)
    axes = tuple(range(-len(nst), 0))
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    expected = (x - mu) / np.sqrt(var + 1e-5)
    if affine:
        expected = expected * w + b
    out = F.layer_norm(T(x, device), ns, T(w, device) if affine else None,
                       T(b, device) if affine else None)
    close(out, expected, atol=1e-10)
    vs_torch(out, lambda: TF.layer_norm(tt(x), nst, tt(w) if affine else None,
                                        tt(b) if affine else None))


def test_layer_norm_grad_and_errors(device):
    r = rng_(22)
    x = T(r.standard_normal((2, 3, 4)), device, rg=True)
    w = T(r.standard_normal(4), device, rg=True)
    b = T(r.standard_normal(4), device, rg=True)
    assert gradcheck(projected(lambda x, w, b: F.layer_norm(x, (4,), w, b)), (x, w, b))
    x2 = T(r.standard_normal((2, 2, 3)), device, rg=True)
    assert gradcheck(projected(lambda x: F.layer_norm(x, (2, 3), eps=1e-3)), (x2,))
    with pytest.raises(RuntimeError, match=r"given normalized_shape=\[4\], expected input with shape "
                                           r"\[\*, 4\], but got input of size \[2, 3\]"):
        F.layer_norm(T(np.zeros((2, 3)), device), (4,))


def np_batch_norm_train(x, w, b, eps=1e-5):
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w.reshape(shape) + b.reshape(shape)
    return y, mu.reshape(-1), x.var(axis=axes, ddof=1).reshape(-1)


@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 4, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training(device, shape, affine):
    r = rng_(23)
    x = r.standard_normal(shape) * 2 + 0.5
    c = shape[1]
    w, b = r.standard_normal(c), r.standard_normal(c)
    rm0, rv0 = r.standard_normal(c), r.uniform(0.5, 2, c)
    rm, rv = T(rm0, device), T(rv0, device)
    out = F.batch_norm(T(x, device), rm, rv, T(w, device) if affine else None,
                       T(b, device) if affine else None, training=True, momentum=0.3)
    y, mu, uvar = np_batch_norm_train(x, w if affine else None, b if affine else None)
    close(out, y, atol=1e-10)
    # running stats: toward the batch mean and the UNBIASED batch variance
    close(rm, 0.7 * rm0 + 0.3 * mu, atol=1e-12)
    close(rv, 0.7 * rv0 + 0.3 * uvar, atol=1e-12)
    if torch is not None:
        trm, trv = tt(rm0), tt(rv0)
        ty = TF.batch_norm(tt(x), trm, trv, tt(w) if affine else None, tt(b) if affine else None,
                           training=True, momentum=0.3)
        close(out, ty.numpy(), atol=1e-10)
        close(rm, trm.numpy(), atol=1e-12)
        close(rv, trv.numpy(), atol=1e-12)


def test_batch_norm_training_is_one_node_that_differentiates_twice(device):
    # the closed-form backward (one node) and, under create_graph, the statistics
    # recomputed as recorded ops, so the gradient has a gradient
    r = rng_(26)
    x = T(r.standard_normal((3, 2, 2, 2)), device, rg=True)
    w = T(r.standard_normal(2), device, rg=True)
    b = T(r.standard_normal(2), device, rg=True)
    y = F.batch_norm(x, None, None, w, b, training=True)
    assert all(type(e[0]).__name__ == "AccumulateGrad" for e in y.grad_fn.next_functions[:3])
    fn = projected(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True))
    assert gradgradcheck(fn, (x, w, b))
    assert gradgradcheck(projected(lambda x: F.batch_norm(x, None, None, training=True)), (x,))


def test_batch_norm_eval_and_no_running_stats(device):
    r = rng_(24)
    x = r.standard_normal((3, 2, 4))
    rm, rv, w, b = r.standard_normal(2), r.uniform(0.5, 2, 2), r.standard_normal(2), r.standard_normal(2)
    out = F.batch_norm(T(x, device), T(rm, device), T(rv, device), T(w, device), T(b, device))
    sh = (1, 2, 1)
    expected = (x - rm.reshape(sh)) / np.sqrt(rv.reshape(sh) + 1e-5) * w.reshape(sh) + b.reshape(sh)
    close(out, expected, atol=1e-10)
    vs_torch(out, lambda: TF.batch_norm(tt(x), tt(rm), tt(rv), tt(w), tt(b)))
    # training without running stats: batch statistics only
    close(F.batch_norm(T(x, device), None, None, training=True), np_batch_norm_train(x, None, None)[0],
          atol=1e-10)
    # float32 running stats with float64 input: updated in their own dtype
    rm32 = T(np.zeros(2, np.float32), device)
    F.batch_norm(T(x, device), rm32, None, training=True)
    assert rm32.dtype == rc.float32
    close(rm32, 0.1 * x.mean(axis=(0, 2)), atol=1e-6)


def test_batch_norm_grad_and_errors(device):
    r = rng_(25)
    x = T(r.standard_normal((3, 2, 2)), device, rg=True)
    w = T(r.standard_normal(2), device, rg=True)
    b = T(r.standard_normal(2), device, rg=True)
    assert gradcheck(projected(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
                     (x, w, b))
    x2 = T(r.standard_normal((4, 3)), device, rg=True)
    assert gradcheck(projected(lambda x: F.batch_norm(x, None, None, training=True)), (x2,))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training, got "
                                         r"input size \(1, 3\)"):
        F.batch_norm(T(np.zeros((1, 3)), device), None, None, training=True)
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined in "
                                           "evaluation mode"):
        F.batch_norm(T(np.zeros((2, 3)), device), None, None)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements"):
        F.batch_norm(T(np.zeros((2, 3)), device), T(np.zeros(4), device), T(np.ones(3), device))


def test_normalize(device):
    x = rng_(26).standard_normal((3, 4))
    x[1] = 0.0
    for p, dim in ((2.0, 1), (1.0, 0)):
        norm = np.maximum((np.abs(x) ** p).sum(axis=dim, keepdims=True) ** (1 / p), 1e-12)
        out = F.normalize(T(x, device), p=p, dim=dim)
        close(out, x / norm, atol=1e-12)
        vs_torch(out, lambda p=p, dim=dim: TF.normalize(tt(x), p=p, dim=dim))
    xg = T(x[:2] + 0.1, device, rg=True)
    assert gradcheck(projected(lambda x: F.normalize(x, dim=1)), (xg,))


# -- embedding, one_hot, pad --------------------------------------------------------------


def test_embedding_values_and_grad(device):
    r = rng_(27)
    w = r.standard_normal((6, 3))
    idx = np.array([[0, 5, 2], [2, 2, 1]])
    out = F.embedding(T(idx, device), T(w, device))
    close(out, w[idx], atol=0)
    vs_torch(out, lambda: TF.embedding(tt(idx), tt(w)))
    wg = T(w, device, rg=True)
    assert gradcheck(projected(lambda w: F.embedding(T(idx, device), w)), (wg,))
    # int32 indices, negative padding_idx
    close(F.embedding(T(idx.astype(np.int32), device), T(w, device), padding_idx=-1), w[idx], atol=0)


def test_embedding_padding_idx_gets_no_grad(device):
    r = rng_(28)
    w = T(r.standard_normal((5, 2)), device, rg=True)
    idx = T(np.array([[1, 2, 2], [4, 2, 1]]), device)
    g = r.standard_normal((2, 3, 2))
    F.embedding(idx, w, padding_idx=2).backward(T(g, device))
    expected = np.zeros((5, 2))
    for (i, j), k in np.ndenumerate(np.array([[1, 2, 2], [4, 2, 1]])):
        if k != 2:
            expected[k] += g[i, j]
    close(w.grad, expected, atol=1e-12)
    assert not A(w.grad)[2].any()
    if torch is not None:
        tw = tt(A(w)).requires_grad_()
        TF.embedding(tt(np.array([[1, 2, 2], [4, 2, 1]])), tw, padding_idx=2).backward(tt(g))
        close(w.grad, tw.grad.numpy(), atol=1e-12)


def test_embedding_max_norm_and_errors(device):
    w0 = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    w = T(w0, device)
    out = F.embedding(T(np.array([0, 1]), device), w, max_norm=1.0)
    close(out[0], [0.6, 0.8], atol=1e-6)
    close(w, [[0.6, 0.8], [0.3, 0.4], [6.0, 8.0]], atol=1e-6)  # only referenced rows renormed
    with pytest.raises(IndexError, match="out of bounds"):
        F.embedding(T(np.array([7]), device), w)
        raise_device_errors()  # a queued device (cuda) raises at its next read
    with pytest.raises(RuntimeError, match="expected input of integer indices"):
        F.embedding(T(np.array([0.0]), device), w)
    with pytest.raises(ValueError, match="padding_idx 3 must be within num_embeddings"):
        F.embedding(T(np.array([0]), device), w, padding_idx=3)


def test_one_hot(device):
    idx = np.array([[0, 3], [1, 1]])
    out = F.one_hot(T(idx, device))
    assert out.dtype == rc.int64 and out.shape == (2, 2, 4)
    close(out, np.eye(4, dtype=np.int64)[idx], atol=0)
    close(F.one_hot(T(idx, device), 6), np.eye(6, dtype=np.int64)[idx], atol=0)
    vs_torch(out, lambda: TF.one_hot(tt(idx)))
    with pytest.raises(RuntimeError, match="class values must be smaller than num_classes"):
        F.one_hot(T(np.array([1, 5]), device), 3)
    with pytest.raises(RuntimeError, match="class values must be non-negative"):
        F.one_hot(T(np.array([1, -1]), device), 3)
    with pytest.raises(RuntimeError, match="only applicable to index tensor of type int64"):
        F.one_hot(T(np.array([1.0]), device))


@pytest.mark.parametrize("pad,value", [((1, 2), 0.0), ((1, 0, 2, 3), 2.5), ((0, 1, 1, 0, 1, 1), -1.0),
                                       ((-1, 2, 1, -2), 0.0), ((-1, -1), 0.0)])
def test_pad_constant(device, pad, value):
    x = rng_(29).standard_normal((2, 3, 4))
    out = F.pad(T(x, device), pad, value=value)
    # reference: crop the negative amounts, then np.pad the positive ones
    ref = x
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        sl = [slice(None)] * x.ndim
        sl[d] = slice(max(0, -lo), ref.shape[d] - max(0, -hi))
        ref = ref[tuple(sl)]
        widths[d] = (max(0, lo), max(0, hi))
    ref = np.pad(ref, widths, constant_values=value)
    close(out, ref, atol=0)
    vs_torch(out, lambda: TF.pad(tt(x), pad, value=value))
    xg = T(x[:1], device, rg=True)
    assert gradcheck(projected(lambda x: F.pad(x, pad, value=value)), (xg,))


@pytest.mark.parametrize("mode,npmode", [("reflect", "reflect"), ("replicate", "edge"),
                                         ("circular", "wrap")])
def test_pad_modes(device, mode, npmode):
    x = rng_(30).standard_normal((1, 2, 4, 5))
    pad = (2, 1, 1, 3)
    out = F.pad(T(x, device), pad, mode=mode)
    close(out, np.pad(x, ((0, 0), (0, 0), (1, 3), (2, 1)), mode=npmode), atol=0)
    vs_torch(out, lambda: TF.pad(tt(x), pad, mode=mode))
    xg = T(x[:, :1, :3, :3], device, rg=True)
    assert gradcheck(projected(lambda x: F.pad(x, (1, 1, 2, 0), mode=mode)), (xg,))


def test_pad_errors(device):
    x = T(np.zeros((2, 3)), device)
    with pytest.raises(RuntimeError, match="padding length must be divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="should be less than or equal to two times the input dimension"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match="padding size should be less than the corresponding input dimension"):
        F.pad(T(np.zeros((1, 2, 3)), device), (3, 3), mode="reflect")
    with pytest.raises(NotImplementedError, match="mode 'bogus' is not supported"):
        F.pad(x, (1, 1), mode="bogus")


# -- attention, bilinear ------------------------------------------------------------------


@pytest.mark.parametrize("mask", [None, "causal", "bool", "float"])
def test_scaled_dot_product_attention(device, mask):
    r = rng_(31)
    q, k, v = r.standard_normal((2, 3, 4)), r.standard_normal((2, 5, 4)), r.standard_normal((2, 5, 2))
    scores = q @ k.transpose(0, 2, 1) / 2.0
    kw, tkw = {}, {}
    if mask == "causal":
        k, v = k[:, :3], v[:, :3]
        scores = q @ k.transpose(0, 2, 1) / 2.0
        scores = np.where(np.tril(np.ones((3, 3), bool)), scores, -np.inf)
        kw = tkw = dict(is_causal=True)
    elif mask == "bool":
        m = r.random((3, 5)) < 0.7
        m[:, 0] = True
        scores = np.where(m, scores, -np.inf)
        kw, tkw = dict(attn_mask=T(m, device)), (dict(attn_mask=tt(m)) if torch else {})
    elif mask == "float":
        m = r.standard_normal((3, 5))
        scores = scores + m
        kw, tkw = dict(attn_mask=T(m, device)), (dict(attn_mask=tt(m)) if torch else {})
    expected = np.exp(np_log_softmax(scores, -1)) @ v
    out = F.scaled_dot_product_attention(T(q, device), T(k, device), T(v, device), **kw)
    close(out, expected, atol=1e-12)
    vs_torch(out, lambda: TF.scaled_dot_product_attention(tt(q), tt(k), tt(v), **tkw))
    qg, kg, vg = (T(a[:1], device, rg=True) for a in (q, k, v))
    assert gradcheck(projected(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)),
                     (qg, kg, vg))


def test_bilinear(device):
    r = rng_(32)
    x1, x2, w, b = (r.standard_normal(s) for s in ((3, 4), (3, 2), (5, 4, 2), (5,)))
    out = F.bilinear(T(x1, device), T(x2, device), T(w, device), T(b, device))
    close(out, np.einsum("ni,oij,nj->no", x1, w, x2) + b, atol=1e-12)
    vs_torch(out, lambda: TF.bilinear(tt(x1), tt(x2), tt(w), tt(b)))
    args = (T(x1[:2], device, rg=True), T(x2[:2], device, rg=True), T(w[:2], device, rg=True),
            T(b[:2], device, rg=True))
    assert gradcheck(projected(F.bilinear), args)


# -- regression losses --------------------------------------------------------------------

REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}


def _reg_losses():
    def smooth(d, beta):
        ad = np.abs(d)
        return np.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)

    def huber(d, delta):
        ad = np.abs(d)
        return np.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))

    return {
        "mse_loss": (F.mse_loss, lambda d: d * d, {}),
        "l1_loss": (F.l1_loss, np.abs, {}),
        "smooth_l1_loss": (lambda a, b, **k: F.smooth_l1_loss(a, b, beta=0.7, **k),
                           lambda d: smooth(d, 0.7), dict(beta=0.7)),
        "smooth_l1_loss_beta0": (lambda a, b, **k: F.smooth_l1_loss(a, b, beta=0.0, **k), np.abs,
                                 dict(beta=0.0)),
        "huber_loss": (lambda a, b, **k: F.huber_loss(a, b, delta=0.8, **k),
                       lambda d: huber(d, 0.8), dict(delta=0.8)),
    }


@pytest.mark.parametrize("name", list(_reg_losses()))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(device, name, reduction):
    ours, ref, tkw = _reg_losses()[name]
    r = rng_(33)
    x, y = r.standard_normal((3, 4)), r.standard_normal((3, 4))
    out = ours(T(x, device), T(y, device), reduction=reduction)
    close(out, REDUCE[reduction](ref(x - y)), atol=1e-12)
    tname = name.replace("_beta0", "")
    vs_torch(out, lambda: getattr(TF, tname)(tt(x), tt(y), reduction=reduction, **tkw))
    # gradients in input and in target (PyTorch differentiates both)
    xg, yg = T(x, device, rg=True), T(y, device, rg=True)
    f = (lambda a, b: ours(a, b, reduction=reduction))
    assert gradcheck(projected(f) if reduction == "none" else f, (xg, yg))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_regression_losses_weight(device, name, reduction):
    r = rng_(34)
    x, y, w = r.standard_normal((3, 4)), r.standard_normal((3, 4)), r.uniform(0.1, 2, (3, 4))
    d = x - y
    elem = {"mse_loss": d * d, "l1_loss": np.abs(d),
            "huber_loss": np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5)}[name] * w
    # mse/l1: a weighted mean divides by the weights' sum; huber: by the count (as PyTorch)
    expected = elem.sum() if reduction == "sum" else (
        elem.mean() if name == "huber_loss" else elem.sum() / w.sum())
    out = getattr(F, name)(T(x, device), T(y, device), reduction=reduction, weight=T(w, device))
    close(out, expected, atol=1e-12)
    vs_torch(out, lambda: getattr(TF, name)(tt(x), tt(y), reduction=reduction, weight=tt(w)))


def test_regression_loss_errors_and_broadcast_warning(device):
    x = T(np.zeros((2, 3)), device)
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match="elementwise is not a valid value for reduction"):
        F.cross_entropy(x, T(np.array([0, 1]), device), reduction="elementwise")
    with pytest.warns(UserWarning, match="Using a target size"):
        out = F.l1_loss(x, T(np.ones(3), device))
    close(out, 1.0)
    with pytest.raises(RuntimeError, match="does not support negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        out = F.mse_loss(x, T(np.ones((2, 3)), device), reduce=False)
    assert out.shape == (2, 3)


# -- classification losses ----------------------------------------------------------------


def np_cross_entropy(x, target, weight=None, ignore_index=-100, reduction="mean", ls=0.0,
                     log_probs=False):
    """PyTorch's cross_entropy (or with log_probs, nll_loss) for (N, C, ...) input."""
    logp = x if log_probs else np_log_softmax(x, 1)
    c = x.shape[1]
    wb = (np.ones(c) if weight is None else weight).reshape((c,) + (1,) * (x.ndim - 2))
    if target.dtype.kind == "f":
        t = target * (1 - ls) + ls / c
        elem = -(logp * t * wb).sum(axis=1)
        if reduction == "mean":
            return elem.sum() / (x.size / c)
        return REDUCE[reduction](elem)
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    w = np.ones(c) if weight is None else weight
    wt = w[safe] * valid
    nll = -np.take_along_axis(logp, safe[:, None], axis=1)[:, 0] * wt
    smooth = -(logp * wb).sum(axis=1) * valid
    if reduction == "mean":
        nll, smooth = nll.sum() / wt.sum(), smooth.sum() / wt.sum()
    elif reduction == "sum":
        nll, smooth = nll.sum(), smooth.sum()
    return (1 - ls) * nll + ls / c * smooth


CE_CASES = [
    dict(),
    dict(weight=True),
    dict(ignore=True),
    dict(weight=True, ignore=True),
    dict(ls=0.2),
    dict(ls=0.3, weight=True, ignore=True),
    dict(ignore_index=1),
    dict(kdim=True),
    dict(kdim=True, weight=True, ignore=True, ls=0.1),
]


def _ce_inputs(case, seed=35):
    r = rng_(seed)
    shape = (3, 4, 2, 3) if case.get("kdim") else (5, 4)
    x = r.standard_normal(shape) * 2
    tshape = (shape[0],) + shape[2:]
    target = r.integers(0, 4, tshape)
    ignore_index = case.get("ignore_index", -100)
    if case.get("ignore"):
        target.reshape(-1)[[1, 3]] = -100
    w = r.uniform(0.2, 2.0, 4) if case.get("weight") else None
    return x, target, w, ignore_index, case.get("ls", 0.0)


@pytest.mark.parametrize("case", CE_CASES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_indices(device, case, reduction):
    x, target, w, ii, ls = _ce_inputs(case)
    out = F.cross_entropy(T(x, device), T(target, device), None if w is None else T(w, device),
                          ignore_index=ii, reduction=reduction, label_smoothing=ls)
    close(out, np_cross_entropy(x, target, w, ii, reduction, ls), atol=1e-12)
    vs_torch(out, lambda: TF.cross_entropy(tt(x), tt(target), None if w is None else tt(w),
                                           ignore_index=ii, reduction=reduction, label_smoothing=ls))


@pytest.mark.parametrize("case", [dict(), dict(weight=True, ignore=True), dict(ls=0.25, ignore=True),
                                  dict(kdim=True, weight=True)], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_grad(device, case, reduction):
    x, target, w, ii, ls = _ce_inputs(case, seed=36)
    x = x[:3, :, :1] if x.ndim == 4 else x[:4]
    target = target[:3, :1] if target.ndim == 3 else target[:4]
    xg = T(x, device, rg=True)
    tg, wg = T(target, device), None if w is None else T(w, device)

    def f(x):
        return F.cross_entropy(x, tg, wg, ignore_index=ii, reduction=reduction, label_smoothing=ls)

    assert gradcheck(projected(f) if reduction == "none" else f, (xg,))
    if torch is not None:
        xg.grad = None
        f(xg).sum().backward()
        tx = tt(x).requires_grad_()
        TF.cross_entropy(tx, tt(target), None if w is None else tt(w), ignore_index=ii,
                         reduction=reduction, label_smoothing=ls).sum().backward()
        close(xg.grad, tx.grad.numpy(), atol=1e-12)


def test_cross_entropy_double_backward(device):
    x = T(rng_(37).standard_normal((2, 3)), device, rg=True)
    t = T(np.array([2, 0]), device)
    assert gradgradcheck(lambda x: F.cross_entropy(x, t), (x,))
    assert gradgradcheck(lambda x: F.cross_entropy(x, t, T(np.array([1.0, 2.0, 0.5]), device),
                                                   reduction="sum"), (x,))


@pytest.mark.parametrize("case", [dict(), dict(weight=True), dict(ls=0.2), dict(weight=True, ls=0.1)],
                         ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probabilities(device, case, reduction):
    r = rng_(38)
    x = r.standard_normal((4, 3, 2))
    p = r.random((4, 3, 2))
    p /= p.sum(axis=1, keepdims=True)
    w = r.uniform(0.5, 2, 3) if case.get("weight") else None
    ls = case.get("ls", 0.0)
    out = F.cross_entropy(T(x, device), T(p, device), None if w is None else T(w, device),
                          reduction=reduction, label_smoothing=ls)
    close(out, np_cross_entropy(x, p, w, reduction=reduction, ls=ls), atol=1e-12)
    vs_torch(out, lambda: TF.cross_entropy(tt(x), tt(p), None if w is None else tt(w),
                                           reduction=reduction, label_smoothing=ls))
    # differentiable in the input and in the target probabilities, as PyTorch
    xg, pg = T(x[:2], device, rg=True), T(p[:2], device, rg=True)
    wt = None if w is None else T(w, device)

    def f(a, b):
        return F.cross_entropy(a, b, wt, reduction=reduction, label_smoothing=ls)

    assert gradcheck(projected(f) if reduction == "none" else f, (xg, pg))


def test_cross_entropy_unbatched_and_float32(device):
    r = rng_(39)
    x = r.standard_normal(5)
    out = F.cross_entropy(T(x, device), T(np.array(3), device))
    close(out, -np_log_softmax(x, 0)[3], atol=1e-12)
    out = F.cross_entropy(T(x, device), T(np.array(3), device), reduction="none", label_smoothing=0.1)
    assert out.shape == ()
    vs_torch(out, lambda: TF.cross_entropy(tt(x), tt(np.array(3)), reduction="none", label_smoothing=0.1))
    x32 = r.standard_normal((6, 4)).astype(np.float32)
    t = r.integers(0, 4, 6)
    out = F.cross_entropy(T(x32, device), T(t, device))
    assert out.dtype == rc.float32
    close(out, np_cross_entropy(x32.astype(np.float64), t), atol=1e-5)
    # all targets ignored: the mean is 0 / 0 = nan, as PyTorch
    assert math.isnan(float(F.cross_entropy(T(x32, device), T(np.full(6, -100), device))))


def test_cross_entropy_errors(device):
    x = T(np.zeros((3, 4)), device)
    with pytest.raises(IndexError, match=r"Target 7 is out of bounds \(input has 4 classes"):
        F.cross_entropy(x, T(np.array([0, 1, 7]), device))
        raise_device_errors()
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.cross_entropy(x, T(np.array([0, -1, 2]), device))
        raise_device_errors()
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(x, T(np.array([0, 4, 2]), device), T(np.ones(4), device))
        raise_device_errors()
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.cross_entropy(x, T(np.array([0, 1]), device))
    with pytest.raises(RuntimeError, match=r"Expected target size \[3, 5\], got \[3, 4\]"):
        F.cross_entropy(T(np.zeros((3, 4, 5)), device), T(np.zeros((3, 4), np.int64), device))
    with pytest.raises(RuntimeError, match="expected target of class indices with dtype int64, but got float64"):
        F.cross_entropy(x, T(np.array([0.0, 1.0, 2.0]), device))
    with pytest.raises(RuntimeError, match="expected floating point type for target with class probabilities"):
        F.cross_entropy(x, T(np.zeros((3, 4), np.int64), device))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 4 classes"):
        F.cross_entropy(x, T(np.array([0, 1, 2]), device), T(np.ones(3), device))
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(x, T(np.array([0, 1, 2]), device), label_smoothing=1.5)
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        F.nll_loss(x, T(np.array([0, 9, 1]), device))
        raise_device_errors()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", [dict(), dict(weight=True, ignore=True), dict(kdim=True, ignore=True)],
                         ids=str)
def test_nll_loss(device, case, reduction):
    x, target, w, ii, _ = _ce_inputs(case, seed=40)
    logp = np_log_softmax(x, 1)
    out = F.nll_loss(T(logp, device), T(target, device), None if w is None else T(w, device),
                     ignore_index=ii, reduction=reduction)
    close(out, np_cross_entropy(logp, target, w, ii, reduction, log_probs=True), atol=1e-12)
    vs_torch(out, lambda: TF.nll_loss(tt(logp), tt(target), None if w is None else tt(w),
                                      ignore_index=ii, reduction=reduction))
    lg = T(logp[:2] if logp.ndim == 2 else logp[:2, :, :1], device, rg=True)
    tg = T(target[:2] if target.ndim == 1 else target[:2, :1], device)
    wg = None if w is None else T(w, device)
    f = (lambda a: F.nll_loss(a, tg, wg, ignore_index=ii, reduction=reduction))
    assert gradcheck(projected(f) if reduction == "none" else f, (lg,))


def np_bce(x, t, w=None):
    with np.errstate(divide="ignore"):
        elem = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))
    return elem * (1 if w is None else w)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(device, reduction, weighted):
    r = rng_(41)
    x, t, w = r.uniform(0.05, 0.95, (3, 4)), r.random((3, 4)), r.uniform(0.5, 2, (3, 4))
    ws = T(w, device) if weighted else None
    out = F.binary_cross_entropy(T(x, device), T(t, device), ws, reduction=reduction)
    close(out, REDUCE[reduction](np_bce(x, t, w if weighted else None)), atol=1e-12)
    vs_torch(out, lambda: TF.binary_cross_entropy(tt(x), tt(t), tt(w) if weighted else None,
                                                  reduction=reduction))
    xg, tg = T(x, device, rg=True), T(t, device, rg=True)
    f = (lambda a, b: F.binary_cross_entropy(a, b, ws, reduction=reduction))
    assert gradcheck(projected(f) if reduction == "none" else f, (xg, tg))


def test_binary_cross_entropy_endpoints_and_errors(device):
    # inputs of exactly 0 and 1 (a saturated sigmoid): the loss is clamped at 100 and the
    # gradient is PyTorch's finite (x - t) / max(x (1 - x), 1e-12), never nan
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.3])
    xs = T(x, device, rg=True)
    out = F.binary_cross_entropy(xs, T(t, device), reduction="sum")
    close(out, np_bce(x, t).sum(), atol=1e-9)
    out.backward()
    expected = (x - t) / np.maximum(x * (1 - x), float(np.float32(1e-12)))  # torch's float EPSILON
    close(xs.grad, expected, rtol=1e-12)
    if torch is not None:
        tx = tt(x).requires_grad_()
        TF.binary_cross_entropy(tx, tt(t), reduction="sum").backward()
        close(xs.grad, tx.grad.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"all elements of input should be between 0 and 1 "
                                           r"\(got values in \[0.5, 1.5\]\)"):
        F.binary_cross_entropy(T([0.5, 1.5], device), T([0.0, 1.0], device))
        raise_device_errors()  # (a device that queues its work: at the next read)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(T([0.5, np.nan], device), T([0.0, 1.0], device))
        raise_device_errors()
    with pytest.raises(ValueError, match=r"using a target size \(\(2, 1\)\) that is different to the "
                                         r"input size \(\(2,\)\)"):
        F.binary_cross_entropy(T([0.5, 0.5], device), T([[0.0], [1.0]], device))


def np_bce_logits(x, t, w=None, pw=None):
    log_sig = -np.logaddexp(0, -x)
    log_1m_sig = -np.logaddexp(0, x)
    pw = 1.0 if pw is None else pw
    elem = -(pw * t * log_sig + (1 - t) * log_1m_sig)
    return elem * (1 if w is None else w)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("extras", ["", "weight", "pos_weight", "both"])
def test_binary_cross_entropy_with_logits(device, reduction, extras):
    r = rng_(42)
    x, t = r.standard_normal((3, 4)) * 3, r.random((3, 4))
    x[0, :3] = [80.0, -80.0, 0.0]  # stable far out, and the gradient right at 0
    w = r.uniform(0.5, 2, (3, 4)) if extras in ("weight", "both") else None
    pw = r.uniform(0.5, 3, 4) if extras in ("pos_weight", "both") else None
    kw = dict(weight=None if w is None else T(w, device), pos_weight=None if pw is None else T(pw, device))
    out = F.binary_cross_entropy_with_logits(T(x, device), T(t, device), reduction=reduction, **kw)
    close(out, REDUCE[reduction](np_bce_logits(x, t, w, pw)), atol=1e-12)
    vs_torch(out, lambda: TF.binary_cross_entropy_with_logits(
        tt(x), tt(t), None if w is None else tt(w), reduction=reduction,
        pos_weight=None if pw is None else tt(pw)))
    xg, tg = T(x, device, rg=True), T(t, device, rg=True)
    f = (lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction, **kw))
    assert gradcheck(projected(f) if reduction == "none" else f, (xg, tg))
    # d/dx = (sigmoid(x) (1 + (pw - 1) t) - pw t) w: at x = 0 that's 0.5 (1 + (pw-1) t) - pw t
    xg.grad = None
    F.binary_cross_entropy_with_logits(xg, T(t, device), reduction="sum", **kw).backward()
    pwv = 1.0 if pw is None else pw[2]
    wv = 1.0 if w is None else w[0, 2]
    expected = (0.5 * (1 + (pwv - 1) * t[0, 2]) - pwv * t[0, 2]) * wv
    assert abs(A(xg.grad)[0, 2] - expected) < 1e-12


def test_bce_with_logits_shape_error(device):
    with pytest.raises(ValueError, match=r"target size \(\(3,\)\) must be the same as input size \(\(3, 1\)\)"):
        F.binary_cross_entropy_with_logits(T(np.zeros((3, 1)), device), T(np.zeros(3), device))


@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(device, reduction, log_target):
    r = rng_(43)
    logq = np_log_softmax(r.standard_normal((3, 4)), 1)
    p = np.exp(np_log_softmax(r.standard_normal((3, 4)), 1))
    if not log_target:
        p[0, 0] = 0.0  # 0 log 0 = 0 (log space has no 0: exp(-inf) * -inf is nan, in PyTorch too)
    tgt = np.log(p) if log_target else p
    with np.errstate(divide="ignore"):
        elem = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1)) - logq), 0.0)
    expected = elem.sum() / 3 if reduction == "batchmean" else REDUCE[reduction](elem)
    out = F.kl_div(T(logq, device), T(tgt, device), reduction=reduction, log_target=log_target)
    close(out, expected, atol=1e-12)
    vs_torch(out, lambda: TF.kl_div(tt(logq), tt(tgt), reduction=reduction, log_target=log_target))
    xg, tg = T(logq, device, rg=True), T(tgt if log_target else p + 0.05, device, rg=True)
    f = (lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target))
    assert gradcheck(projected(f) if reduction == "none" else f, (xg, tg))


# -- the module --------------------------------------------------------------------------


def test_public_names():
    for name in F.__all__:
        assert callable(getattr(F, name)), name
    from rtxcore import nn

    assert nn.functional is F


def test_training_step_composes(device):
    """A small conv net's step end to end: every function's backward together, and the
    loss going down."""
    r = rng_(44)
    x = T(r.standard_normal((4, 1, 6, 6)), device, dtype=rc.float32)
    y = T(r.integers(0, 3, 4), device)
    params = [T(r.standard_normal(s) * 0.3, device, dtype=rc.float32, rg=True)
              for s in ((4, 1, 3, 3), (4,), (3, 4 * 3 * 3), (3,), (4,), (4,))]
    cw, cb, lw, lb, bw, bb = params

    def loss_fn():
        h = F.conv2d(x, cw, cb, padding=1)
        h = F.batch_norm(h, None, None, bw, bb, training=True)
        h = F.max_pool2d(F.relu(h), 2)
        return F.cross_entropy(F.linear(h.reshape(4, -1), lw, lb), y)

    first = float(loss_fn())
    for _ in range(15):
        for p in params:
            p.grad = None
        loss = loss_fn()
        loss.backward()
        with rc.no_grad():
            for p in params:
                p -= 0.1 * p.grad
    assert float(loss_fn()) < first * 0.7
