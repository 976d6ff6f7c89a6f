"""DLPack: zero-copy exchange with NumPy (and anything else that speaks it) on
cpu; a clear refusal where the backend's memory can't be shared that way. CuPy
on cuda is tested in test_cuda.py."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc


def test_numpy_reads_a_tensor_without_copying():
    t = rc.arange(12.0).reshape(3, 4)
    a = np.from_dlpack(t)
    assert a.shape == (3, 4) and a.dtype == np.float32
    a[1, 2] = -5
    assert t[1, 2].item() == -5
    assert t.__dlpack_device__() == (1, 0)


def test_strided_views_travel_with_their_strides():
    t = rc.arange(24, dtype=rc.int64).reshape(4, 6)
    v = t.T[1:5:2]  # non-contiguous, offset
    a = np.from_dlpack(v)
    np.testing.assert_array_equal(a, v.numpy())
    a[0, 0] = 100
    assert t[0, 1].item() == 100


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32", "int64",
                                   "float16", "float32", "float64"])
def test_from_dlpack_shares_numpy_memory(dtype):
    src = (np.arange(20) % 3).astype(dtype).reshape(4, 5)
    t = rc.from_dlpack(src)
    assert t.device == rc.device("cpu") and t.dtype.name == dtype and t.shape == (4, 5)
    np.testing.assert_array_equal(t.numpy(), src)
    src[2, 3] = 1 if dtype != "bool" else False
    assert t[2, 3].item() == src[2, 3]


def test_from_dlpack_of_a_strided_numpy_view():
    base = np.arange(30, dtype=np.float64).reshape(5, 6)
    view = base[1:4, ::2]
    t = rc.from_dlpack(view)
    np.testing.assert_array_equal(t.numpy(), view)
    base[2, 2] = -1.0
    assert t[1, 1].item() == -1.0  # shared
    assert (t * 2).sum().item() == pytest.approx(2 * view.sum())


def test_from_dlpack_round_trip_and_tensors():
    t = rc.randn(3, 4)
    assert rc.from_dlpack(t) is not t
    np.testing.assert_array_equal(rc.from_dlpack(np.from_dlpack(t)).numpy(), t.numpy())


def test_refusals_name_the_problem():
    w = rc.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="require gradient.*detach"):
        w.__dlpack__()
    np.from_dlpack(w.detach())  # fine once detached
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        rc.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError, match="complex64 is not supported"):
        rc.from_dlpack(np.ones(3, np.complex64))


def test_opencl_tensors_say_to_go_through_cpu():
    if "opencl:0" not in rc.testing.available_devices():
        pytest.skip("no opencl device")  # (CI requires one: RTX_REQUIRE_DEVICES)
    t = rc.ones(3, device="opencl")
    with pytest.raises(BufferError, match=r"opencl:0 tensors can't be exchanged through DLPack.*\.cpu\(\)"):
        np.from_dlpack(t)
    np.testing.assert_array_equal(np.from_dlpack(t.cpu()), [1, 1, 1])


def test_negative_strides_are_refused_not_silently_copied():
    a = np.arange(6.0)
    with pytest.raises(BufferError, match="negative strides"):
        rc.from_dlpack(a[::-1])
    t = rc.from_dlpack(np.ascontiguousarray(a[::-1]))
    assert t.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]


@pytest.fixture
def hostmem():
    """A second backend whose memory is the host's (DLPack kCPU), beside cpu."""
    from .host_backend import HostMemPlugin

    name = rc.register_backend(HostMemPlugin(), name="hostmem-plugin")
    HostMemPlugin.imported = 0
    try:
        yield HostMemPlugin
    finally:
        rc.unregister_backend(name)


def test_a_second_host_backend_takes_host_memory_when_named(hostmem):
    """Host memory goes to cpu by default; ``device=`` reaches another backend
    whose dlpack_device is kCPU, through its own from_dlpack, sharing memory."""
    src = np.arange(12.0).reshape(3, 4)
    t = rc.from_dlpack(src)
    assert t.device == rc.device("cpu") and hostmem.imported == 0
    h = rc.from_dlpack(src, device="hostmem")
    assert h.device == rc.device("hostmem") and hostmem.imported == 1
    np.testing.assert_array_equal(h.numpy(), src)
    src[1, 2] = -8.0
    assert h[1, 2].item() == -8.0  # shared, not copied
    # strided views keep their strides on the way in
    v = rc.from_dlpack(src[:, 1::2], device=rc.device("hostmem"))
    assert v.shape == (3, 2) and v[1, 1].item() == src[1, 3]
    # and out again: a hostmem tensor is kCPU memory NumPy can read in place
    assert h.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(h)
    out[0, 0] = 42.0
    assert src[0, 0] == 42.0
    # an rtxcore tensor: itself (detached), or moved when another device is named
    assert rc.from_dlpack(h).device == rc.device("hostmem")
    moved = rc.from_dlpack(h, device="cpu")
    assert moved.device == rc.device("cpu") and moved.tolist() == h.tolist()


def test_from_dlpack_device_without_dlpack_copies(device):
    """A device whose backend can't take that memory gets a copy, as
    torch.from_dlpack(x, device=...) does."""
    src = np.arange(6, dtype=np.float32)
    t = rc.from_dlpack(src, device=device)
    assert t.device == rc.device(device)
    np.testing.assert_array_equal(t.cpu().numpy(), src)
    if t.device.backend.dlpack_device != 1:
        src[0] = 5.0
        assert t[0].item() == 0.0
