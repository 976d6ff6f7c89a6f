"""PyTorch's top-level API surface: ``rtxcore.bool``, memory formats, the typed
tensor classes, print options, ``Tensor.type/data_ptr/cuda``, ``rtxcore.accelerator``,
``rtxcore.cuda``, ``rtxcore.backends`` and the modules rtxcore does not have."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.dispatch.registry import registry

TYPED = [("FloatTensor", "float32"), ("DoubleTensor", "float64"), ("HalfTensor", "float16"),
         ("LongTensor", "int64"), ("IntTensor", "int32"), ("ShortTensor", "int16"),
         ("CharTensor", "int8"), ("ByteTensor", "uint8"), ("BoolTensor", "bool")]


def run_py(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60)


# -- rtxcore.bool ------------------------------------------------------------------------


def test_bool_is_the_bool_dtype_and_builtins_still_work(device):
    assert rc.bool is rc.bool_
    t = rc.tensor([1, 0, 2], dtype=rc.bool, device=device)
    assert t.dtype is rc.bool_
    np.testing.assert_array_equal(t.cpu().numpy(), np.array([1, 0, 2], dtype=np.bool_))
    # inside rtxcore the builtin is still the builtin: Python's bool maps to rc.bool
    assert rc.tensor([True], device=device).dtype is rc.bool
    assert rc.dtype.as_dtype(True.__class__) is rc.bool
    assert bool(rc.tensor(1.0, device=device)) is True
    assert repr(rc.bool) == "rtxcore.bool"


def test_bool_matches_torch():
    torch = pytest.importorskip("torch")
    assert repr(rc.bool).replace("rtxcore", "torch") == repr(torch.bool)


# -- memory formats -------------------------------------------------------------------------


def test_channels_last_strides_match_torch():
    torch = pytest.importorskip("torch")
    for shape in [(2, 3, 4, 5), (1, 3, 1, 2), (2, 1, 3, 3)]:
        want = torch.empty(shape).contiguous(memory_format=torch.channels_last).stride()
        got = rc.empty(*shape).contiguous(memory_format=rc.channels_last).stride()
        assert got == want, shape
        assert rc.empty(*shape).is_contiguous() == torch.empty(shape).is_contiguous()


def test_memory_formats_keep_values_and_set_layouts(device):
    x = rc.randn(2, 3, 4, 5, device=device)
    ref = x.cpu().numpy()
    cl = x.contiguous(memory_format=rc.channels_last)
    n, c, h, w = x.shape
    assert cl.stride() == (h * w * c, 1, w * c, c)
    assert cl.is_contiguous(memory_format=rc.channels_last) and not cl.is_contiguous()
    assert not x.is_contiguous(memory_format=rc.channels_last)
    np.testing.assert_array_equal(cl.cpu().numpy(), ref)
    assert cl.contiguous(memory_format=rc.channels_last) is cl
    assert cl.contiguous().is_contiguous()
    np.testing.assert_array_equal(cl.contiguous().cpu().numpy(), ref)
    # preserve_format (the default) keeps channels_last and makes the rest row-major
    for fn in (lambda t: t.clone(), rc.empty_like, rc.zeros_like, rc.ones_like,
               lambda t: rc.full_like(t, 2.0), rc.rand_like, rc.randn_like):
        assert fn(cl).stride() == cl.stride()
        assert fn(x).is_contiguous()
    np.testing.assert_array_equal(cl.clone().cpu().numpy(), ref)
    np.testing.assert_array_equal(rc.full_like(cl, 2.0).cpu().numpy(), np.full(ref.shape, 2.0, np.float32))
    np.testing.assert_array_equal(rc.zeros_like(cl).cpu().numpy(), np.zeros(ref.shape, np.float32))
    assert rc.zeros_like(cl, memory_format=rc.contiguous_format).is_contiguous()
    assert rc.ones_like(x, memory_format=rc.channels_last).stride() == cl.stride()
    y = x.clone(memory_format=rc.channels_last)
    assert y.stride() == cl.stride()
    np.testing.assert_array_equal(y.cpu().numpy(), ref)
    z = x.to(memory_format=rc.channels_last)
    assert z.stride() == cl.stride()
    np.testing.assert_array_equal(z.cpu().numpy(), ref)
    assert x.to(rc.float64, memory_format=rc.channels_last).dtype is rc.float64 if \
        rc.device(device).supports(rc.float64) else True
    # ops on channels_last inputs give the same values
    np.testing.assert_allclose((cl * 2 + 1).cpu().numpy(), ref * 2 + 1, rtol=1e-6)


def test_memory_format_gradients_flow(device):
    x = rc.randn(1, 2, 3, 3, device=device, requires_grad=True)
    (x.clone(memory_format=rc.channels_last) * 3).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.full((1, 2, 3, 3), 3.0, np.float32))
    x.grad = None
    (x.contiguous(memory_format=rc.channels_last) * 2).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.full((1, 2, 3, 3), 2.0, np.float32))


def test_memory_format_errors(device):
    x = rc.ones(2, 3, device=device)
    with pytest.raises(RuntimeError, match=r"contiguous\(\): required rank 4 tensor to use channels_last"):
        x.contiguous(memory_format=rc.channels_last)
    with pytest.raises(RuntimeError, match=r"clone\(\): required rank 4"):
        x.clone(memory_format=rc.channels_last)
    with pytest.raises(RuntimeError, match=r"empty_like\(\): required rank 4"):
        rc.empty_like(x, memory_format=rc.channels_last)
    with pytest.raises(TypeError, match=r"clone\(\): argument 'memory_format' must be rtxcore.memory_format"):
        x.clone(memory_format="channels_last")
    with pytest.raises(TypeError, match=r"zeros_like\(\): argument 'memory_format'"):
        rc.zeros_like(x, memory_format=1)
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        x.contiguous(memory_format=rc.preserve_format)
    with pytest.raises(RuntimeError, match=r"required rank 5 tensor to use channels_last_3d"):
        rc.ones(1, 2, 3, 4, device=device).contiguous(memory_format=rc.channels_last_3d)
    with pytest.raises(TypeError, match=r"to\(\): argument 'memory_format'"):
        rc.nn.Linear(2, 2).to(memory_format="x")
    rc.nn.Linear(2, 2).to(memory_format=rc.channels_last)  # accepted, as by PyTorch


def test_channels_last_3d(device):
    x = rc.randn(1, 2, 2, 3, 2, device=device)
    y = x.contiguous(memory_format=rc.channels_last_3d)
    assert y.stride() == (2 * 3 * 2 * 2, 1, 3 * 2 * 2, 2 * 2, 2)
    np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())


# -- typed tensor classes -------------------------------------------------------------------


@pytest.mark.parametrize("name,dt", TYPED)
def test_typed_constructors(name, dt):
    cls = getattr(rc, name)
    t = cls(2, 3)
    assert t.dtype is rc.dtype.BY_NAME[dt] and tuple(t.shape) == (2, 3) and t.device == "cpu"
    assert tuple(cls(rc.Size([4, 1])).shape) == (4, 1)
    assert tuple(cls().shape) == (0,)
    data = cls([1, 0, 2])
    np.testing.assert_array_equal(data.numpy(), np.array([1, 0, 2]).astype(rc.dtype.BY_NAME[dt].numpy))
    assert cls(data) is data
    assert isinstance(data, cls) and isinstance(t, cls) and isinstance(data, rc.Tensor)
    for other, odt in TYPED:
        assert isinstance(data, getattr(rc, other)) == (odt == dt)
    assert not isinstance(np.zeros(2), cls) and not isinstance(3, cls)
    assert not isinstance(data, getattr(rc.cuda, name))
    assert repr(cls) == f"<class 'rtxcore.{name}'>"


def test_typed_constructor_matches_torch():
    torch = pytest.importorskip("torch")
    for name, _ in TYPED:
        a, b = getattr(rc, name)([[1, 2], [3, 0]]), getattr(torch, name)([[1, 2], [3, 0]])
        assert a.type().replace("rtxcore", "torch") == b.type()
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_typed_constructor_errors(device):
    with pytest.raises(TypeError, match=r"FloatTensor\(\): expected a tensor of type FloatTensor"):
        rc.FloatTensor(rc.LongTensor([1]))
    with pytest.raises(TypeError, match=r"LongTensor\(\): expected sizes"):
        rc.LongTensor(1.5)
    if device != "cpu":
        with pytest.raises(RuntimeError, match="legacy constructor expects device type cpu"):
            rc.FloatTensor(2, device=device)
        t = rc.ones(2, device=device)
        assert not isinstance(t, rc.FloatTensor)


# -- print options --------------------------------------------------------------------------


@pytest.fixture
def printopts():
    yield
    rc.set_printoptions(profile="default", sci_mode=None)


@pytest.mark.parametrize("opts", [
    dict(precision=2), dict(precision=6), dict(threshold=5), dict(threshold=5, edgeitems=1),
    dict(linewidth=30), dict(sci_mode=True), dict(sci_mode=False), dict(profile="short"),
    dict(profile="full"), dict(profile="short", precision=3),
], ids=repr)
def test_printoptions_match_torch(opts, printopts):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    cases = [np.array([1.12345, -2.5, 3.0], np.float32), np.arange(10),
             rng.standard_normal((4, 6)).astype(np.float32), np.array([1e-5, 1.0], np.float32),
             np.arange(2000, dtype=np.float32).reshape(40, 50), np.array([1.0, 20.0], np.float32)]
    torch.set_printoptions(**opts)
    rc.set_printoptions(**opts)
    try:
        for arr in cases:
            assert str(rc.tensor(arr)) == str(torch.tensor(arr)), (opts, arr.shape)
    finally:
        torch.set_printoptions(profile="default", sci_mode=None)


def test_printoptions_change_repr(device, printopts):
    x = rc.tensor([1.123456, 2.5], device=device)
    rc.set_printoptions(precision=2)
    assert f"{1.123456:.2f}" in repr(x) and f"{1.123456:.4f}" not in repr(x)
    assert rc.get_printoptions()["precision"] == 2
    rc.set_printoptions(threshold=4, edgeitems=1)
    r = repr(rc.arange(10, device=device))
    assert "..." in r and "0" in r and "9" in r and "5" not in r
    rc.set_printoptions(profile="default")
    assert rc.get_printoptions() == {"precision": 4, "threshold": 1000, "edgeitems": 3,
                                     "linewidth": 80, "sci_mode": None}
    assert "..." not in repr(rc.arange(10, device=device))
    rc.set_printoptions(sci_mode=True)
    assert "e+00" in repr(x)


def test_printoptions_errors(printopts):
    with pytest.raises(ValueError, match="set_printoptions\\(\\): unknown profile 'long'"):
        rc.set_printoptions(profile="long")
    with pytest.raises(TypeError, match="argument 'precision' must be a non-negative int"):
        rc.set_printoptions(precision=-1)
    with pytest.raises(TypeError, match="argument 'sci_mode'"):
        rc.set_printoptions(sci_mode="yes")
    assert rc.get_printoptions()["precision"] == 4  # a refused call changed nothing


# -- Tensor.type / data_ptr / cuda -------------------------------------------------------------


def test_type_strings(device):
    dev = rc.device(device)
    prefix = "rtxcore." if dev.type == "cpu" else f"rtxcore.{dev.type}."
    for name, dt in TYPED:
        if not dev.supports(dt):
            continue
        assert rc.zeros(2, dtype=rc.dtype.BY_NAME[dt], device=device).type() == prefix + name


def test_type_strings_match_torch():
    torch = pytest.importorskip("torch")
    for name, dt in TYPED:
        assert rc.zeros(1, dtype=rc.dtype.BY_NAME[dt]).type() == \
            torch.zeros(1, dtype=getattr(torch, dt)).type().replace("torch", "rtxcore")


def test_type_casts(device):
    x = rc.tensor([1.7, -2.2, 0.0], device=device)
    ref = x.cpu().numpy()
    assert x.type(rc.float32) is x and x.type(x.type()) is x
    y = x.type(rc.int64)  # a dtype: same device
    assert y.dtype is rc.int64 and y.device == x.device
    np.testing.assert_array_equal(y.cpu().numpy(), ref.astype(np.int64))
    for spec in ("torch.LongTensor", "rtxcore.LongTensor"):  # a cpu type, as in PyTorch
        y = x.type(spec)
        assert y.dtype is rc.int64 and y.device == "cpu"
        np.testing.assert_array_equal(y.numpy(), ref.astype(np.int64))
    y = x.type(rc.IntTensor)  # a typed class: its device type too
    assert y.dtype is rc.int32 and y.device == "cpu"
    np.testing.assert_array_equal(y.numpy(), ref.astype(np.int32))
    with pytest.raises(ValueError, match=r"type\(\): invalid type 'torch.Float'"):
        x.type("torch.Float")
    with pytest.raises(ValueError, match=r"type\(\): invalid type 'float32'"):
        x.type("float32")  # a dtype name is not a type string, as in PyTorch
    with pytest.raises(TypeError, match="unsupported dtype"):
        x.type(3.5)


def test_type_cuda_string_needs_cuda():
    x = rc.ones(2)
    if rc.cuda.is_available():
        assert x.type("torch.cuda.FloatTensor").device.type == "cuda"
    else:
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            x.type("torch.cuda.FloatTensor")


def test_data_ptr(device):
    itemsize = 4
    x = rc.arange(12, dtype=rc.float32, device=device).reshape(3, 4)
    p = x.data_ptr()
    assert isinstance(p, int) and p == x.data_ptr()
    assert x[1].data_ptr() - p == 4 * itemsize
    assert x[:, 2].data_ptr() - p == 2 * itemsize
    assert x.t().data_ptr() == p and x.view(12).data_ptr() == p
    assert x.clone().data_ptr() != p
    if device == "cpu":
        arr = x.numpy()
        assert p == arr.__array_interface__["data"][0]
        assert x[2, 1:].data_ptr() == arr[2, 1:].__array_interface__["data"][0]


def test_data_ptr_matches_torch_through_numpy():
    torch = pytest.importorskip("torch")
    x = rc.arange(6, dtype=rc.float64)
    t = torch.from_numpy(x.numpy())  # shares memory: same address
    assert x.data_ptr() == t.data_ptr()
    assert x[2:].data_ptr() == t[2:].data_ptr()


def test_cuda_method_explains_why_cuda_is_missing():
    x = rc.ones(2)
    if rc.cuda.is_available():
        y = x.cuda()
        assert y.device.type == "cuda" and y.cpu().tolist() == [1.0, 1.0]
        return
    entry = registry.backends.get("cuda")
    reason = entry.backend.unavailable_reason() if entry else registry.missing_backend_message("cuda")
    with pytest.raises(RuntimeError) as info:
        x.cuda()
    assert "cuda(): CUDA is not available" in str(info.value)
    assert reason in str(info.value)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        x.cuda(0, non_blocking=True)
    with pytest.raises(RuntimeError, match=r"cuda\(\): invalid device opencl:0: expected a cuda device"):
        x.cuda("opencl:0")


# -- rtxcore.accelerator --------------------------------------------------------------------


def _expected_accelerator():
    from rtxcore.dispatch import ops as OPS

    registry.ensure_loaded()
    names = sorted((n for n in registry.backends if n != "cpu"), key=lambda n: (n != "cuda", n))
    for n in names:
        e = registry.backends[n]
        if e.backend.is_available() and all(op in e.kernels for op in OPS.PRIMITIVES) \
                and any(e.backend.is_accelerator(i) for i in range(e.backend.device_count())):
            return n, e.backend.device_count()
    return None, 0


def test_accelerator_answers_from_the_registry():
    name, count = _expected_accelerator()
    assert rc.accelerator.is_available() == (name is not None)
    assert rc.accelerator.device_count() == count
    cur = rc.accelerator.current_accelerator()
    if name is None:
        assert cur is None and rc.accelerator.current_device_index() == -1
        return
    assert cur.type == name and cur.index == 0
    if count > 1:
        rc.accelerator.set_device_index(1)
        try:
            assert rc.accelerator.current_accelerator() == rc.device(name, 1)
            assert rc.accelerator.current_device_index() == 1
        finally:
            rc.accelerator.set_device_index(0)
    with pytest.raises(RuntimeError, match="invalid device index"):
        rc.accelerator.set_device_index(count)
    rc.accelerator.synchronize()


def test_a_host_cpu_device_is_not_an_accelerator_and_a_real_one_is():
    from .fake_backend import AcceleratorPlugin

    registry.ensure_loaded()
    for name, e in registry.backends.items():  # cpu, PoCL's opencl, prims: all the host CPU
        if name == "cpu" or name == "prims" or (name == "opencl" and e.backend.is_available()
                                                and "Portable" in e.backend.properties(0)["platform"]):
            assert not any(e.backend.is_accelerator(i) for i in range(e.backend.device_count()))
    before = rc.accelerator.current_accelerator()
    name = rc.register_backend(AcceleratorPlugin(), name="fakeacc")
    try:
        if before is None or before.type != "cuda":
            assert rc.accelerator.current_accelerator() == rc.device("fakeacc", 0)
            assert rc.accelerator.is_available() and rc.accelerator.device_count() == 1
    finally:
        rc.unregister_backend(name)
    assert rc.accelerator.current_accelerator() == before


# -- rtxcore.cuda -----------------------------------------------------------------------------


def test_cuda_queries_answer_truthfully():
    registry.ensure_loaded()
    entry = registry.backends.get("cuda")
    really = bool(entry and entry.backend.is_available() and entry.backend.device_count())
    assert rc.cuda.is_available() is really
    assert rc.cuda.is_bf16_supported() is False
    if really:
        n = entry.backend.device_count()
        assert rc.cuda.device_count() == n
        assert rc.cuda.current_device() == 0
        assert rc.cuda.get_device_name() == entry.backend.device_name(0)
        rc.cuda.synchronize()
        assert rc.cuda.memory_allocated() >= 0
        return
    reason = entry.backend.unavailable_reason() if entry else registry.missing_backend_message("cuda")
    assert rc.cuda.device_count() == 0
    assert rc.cuda.memory_allocated() == 0 and rc.cuda.max_memory_allocated() == 0
    assert rc.cuda.memory_reserved() == 0
    rc.cuda.empty_cache()
    rc.cuda.reset_peak_memory_stats()
    state = rc.get_rng_state()
    rc.cuda.manual_seed(123)
    rc.cuda.manual_seed_all(123)
    assert rc.get_rng_state() == state  # no CUDA: nothing to seed, as PyTorch
    for fn, args in [(rc.cuda.current_device, ()), (rc.cuda.get_device_name, ()),
                     (rc.cuda.synchronize, ()), (rc.cuda.set_device, (0,)),
                     (rc.cuda.get_device_properties, (0,))]:
        with pytest.raises(RuntimeError) as info:
            fn(*args)
        assert f"rtxcore.cuda.{fn.__name__}(): CUDA is not available" in str(info.value)
        assert reason in str(info.value)
    with rc.cuda.device(None):  # no device asked for: nothing to switch
        pass
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        with rc.cuda.device(0):
            pass


def test_cuda_is_available_never_raises(monkeypatch):
    from rtxcore import cuda

    def boom():
        raise OSError("driver crashed")

    monkeypatch.setattr(cuda, "_why_not", boom)
    assert cuda.is_available() is False
    assert cuda.device_count() == 0


def test_cuda_typed_classes():
    t = rc.ones(2)
    assert not isinstance(t, rc.cuda.FloatTensor)
    assert repr(rc.cuda.LongTensor) == "<class 'rtxcore.cuda.LongTensor'>"
    if not rc.cuda.is_available():
        with pytest.raises(RuntimeError, match="not available"):
            rc.cuda.FloatTensor(2)


# -- rtxcore.backends -------------------------------------------------------------------------


def test_backends_flags_are_stored():
    b = rc.backends
    saved = (b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.enabled, b.cudnn.allow_tf32,
             b.cuda.matmul.allow_tf32, b.opt_einsum.enabled, b.opt_einsum.strategy)
    try:
        b.cudnn.benchmark = True
        b.cudnn.deterministic = True
        b.cudnn.enabled = False
        b.cudnn.allow_tf32 = False
        b.cuda.matmul.allow_tf32 = True
        b.opt_einsum.enabled = False
        b.opt_einsum.strategy = "greedy"
        import rtxcore.backends.cudnn as cudnn

        assert (cudnn.benchmark, cudnn.deterministic, cudnn.enabled, cudnn.allow_tf32) == \
            (True, True, False, False)
        assert b.cuda.matmul.allow_tf32 is True and b.opt_einsum.strategy == "greedy"
        with b.cudnn.flags(enabled=True, benchmark=False):
            assert cudnn.enabled is True and cudnn.benchmark is False
        assert cudnn.enabled is False and cudnn.benchmark is True
        # the flags change nothing: a matmul gives the same values either way
        a = rc.randn(5, 5)
        np.testing.assert_array_equal((a @ a).numpy(), a.numpy() @ a.numpy())
    finally:
        (b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.enabled, b.cudnn.allow_tf32,
         b.cuda.matmul.allow_tf32, b.opt_einsum.enabled, b.opt_einsum.strategy) = saved
    with pytest.raises(AttributeError, match="Unknown attribute 'allow_tf33'"):
        b.cuda.matmul.allow_tf33 = True
    assert b.mps.is_available() is False and b.mps.is_built() is False
    assert b.cudnn.is_available() is False and b.opt_einsum.is_available() is False
    assert b.cuda.is_built() == ("cuda" in registry.backends)
    b.cuda.enable_flash_sdp(False)
    assert b.cuda.flash_sdp_enabled() is False
    b.cuda.enable_flash_sdp(True)
    assert isinstance(b.cpu.get_cpu_capability(), str)


def test_new_modules_load_lazily():
    r = run_py("""
        import sys
        import rtxcore
        lazy = ["rtxcore.backends", "rtxcore.cuda", "rtxcore.accelerator", "pluggy"]
        print([m for m in lazy if m in sys.modules])
        rtxcore.backends.cudnn.benchmark = True
        print(rtxcore.backends.cudnn.benchmark, "rtxcore.backends" in sys.modules)
        print(rtxcore.cuda.is_available() in (True, False), rtxcore.autocast.__name__)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["[]", "True True", "True autocast"]


# -- modules rtxcore does not have --------------------------------------------------------------


@pytest.mark.parametrize("name,what", [("sparse", "out of scope"), ("onnx", "out of scope"),
                                       ("hub", "out of scope")])
def test_unbuilt_attributes(name, what):
    from rtxcore._unbuilt import UnbuiltAttributeError

    with pytest.raises(AttributeError) as info:
        getattr(rc, name)
    assert isinstance(info.value, UnbuiltAttributeError)
    assert f"rtxcore.{name} is {what}" in str(info.value)
    assert not hasattr(rc, name)


@pytest.mark.parametrize("module,what", [
    ("rtxcore.sparse", "out of scope"), ("rtxcore.onnx", "out of scope"),
    ("rtxcore.hub", "out of scope"), ("rtxcore.utils.tensorboard", "out of scope")])
def test_unbuilt_imports(module, what):
    import importlib

    from rtxcore._unbuilt import UnbuiltModuleError

    with pytest.raises(ImportError) as info:
        importlib.import_module(module)
    assert isinstance(info.value, UnbuiltModuleError)
    assert f"{module} is {what}" in str(info.value)
    assert module not in sys.modules


def test_distributed_is_built_and_lazy():
    import rtxcore.distributed as dist

    assert rc.distributed is dist
    assert dist.is_available() is True and dist.is_initialized() is False
    from rtxcore.nn.parallel import DistributedDataParallel

    assert rc.nn.parallel.DistributedDataParallel is DistributedDataParallel


def test_unbuilt_from_imports():
    with pytest.raises(ImportError, match="rtxcore.utils.tensorboard is out of scope"):
        from rtxcore.utils.tensorboard import SummaryWriter  # noqa: F401
    from rtxcore import jit  # built: tracing into graphs

    assert jit.trace is rc.jit.trace
    with pytest.raises(AttributeError, match="rtxcore.utils.tensorboard is out of scope"):
        rc.utils.tensorboard  # noqa: B018
    assert rc.utils.data is not None  # the rest of utils is untouched


# -- dtypes rtxcore names but does not have --------------------------------------------------


@pytest.mark.parametrize("name", ["bfloat16", "complex64", "complex128", "cfloat", "cdouble"])
def test_missing_dtypes_exist_as_names_and_are_refused_when_used(name):
    dt = getattr(rc, name)
    assert repr(dt).startswith("rtxcore.")
    with pytest.raises(TypeError, match=f"rtxcore has no {dt.name} dtype; use "):
        rc.zeros(2, dtype=dt)
    with pytest.raises(TypeError, match=f"rtxcore has no {dt.name} dtype"):
        rc.ones(2).to(dt)
    with pytest.raises(TypeError, match=f"rtxcore has no {dt.name} dtype"):
        rc.tensor([1.0], dtype=dt.name)


def test_autocast_disabled_accepts_any_dtype_and_changes_nothing():
    x = rc.ones(2, 2)
    with rc.autocast("cpu", dtype=rc.bfloat16, enabled=False):
        assert (x @ x).dtype is rc.float32
    with pytest.raises(RuntimeError, match="bfloat16 is not available"):
        rc.autocast("cpu", dtype=rc.bfloat16)
