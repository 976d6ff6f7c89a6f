"""The names PyTorch scripts reach for: the Tensor ``is_*`` predicates,
``Tensor.__format__``, and the out-of-scope names, which raise the clear
``UnbuiltAttributeError`` wherever PyTorch has them (rtxcore/_unbuilt.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rtxcore as rc
import rtxcore.nn as nn
from rtxcore._unbuilt import OUT_OF_SCOPE, REASONS, UnbuiltAttributeError
from rtxcore.autograd import gradcheck
from rtxcore.ops.predicates import METHODS, NEVER

try:
    import torch
except ImportError:  # the reference is optional; the checks without it still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the optional reference) "
                                                       "is not installed")

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]


def _both(dtype: str, values: list) -> tuple:
    return rc.tensor(values, dtype=getattr(rc, dtype)), torch.tensor(values, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("name", NEVER)
def test_never_predicates_are_false_properties(device, name):
    x = rc.ones(3, device=device)
    assert getattr(x, name) is False
    assert isinstance(getattr(rc.Tensor, name), property)


def test_device_predicates_follow_the_device(device):
    x = rc.ones(2, device=device)
    assert x.is_cpu == (x.device.type == "cpu")
    assert x.is_cuda == (x.device.type == "cuda")


@needs_torch
@pytest.mark.parametrize("name", [n for n in NEVER + ("is_cpu", "is_cuda")
                                  if torch is None or hasattr(torch.Tensor, n)])
def test_property_predicates_agree_with_torch_on_cpu(name):
    assert getattr(rc.ones(2), name) == getattr(torch.ones(2), name)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_method_predicates_agree_with_torch(dtype):
    r, t = _both(dtype, [1, 0, 1])
    for name in ("is_complex", "is_conj", "is_neg", "is_inference", "is_signed",
                 "is_floating_point", "is_distributed"):
        assert getattr(r, name)() == getattr(t, name)(), name
    for name in ("is_complex", "is_conj", "is_neg", "is_inference", "is_signed"):
        assert getattr(rc, name)(r) == getattr(torch, name)(t), name


@needs_torch
@pytest.mark.parametrize("values", [[0.0], [2.5], [[True]], [0], 3.0, 0])
def test_is_nonzero_agrees_with_torch(values):
    assert rc.tensor(values).is_nonzero() == torch.tensor(values).is_nonzero()
    assert rc.is_nonzero(rc.tensor(values)) == torch.is_nonzero(torch.tensor(values))


@pytest.mark.parametrize("shape", [(0,), (2,), (2, 1)])
def test_is_nonzero_refuses_anything_but_one_element(shape):
    with pytest.raises(RuntimeError, match="ambiguous"):
        rc.zeros(shape).is_nonzero()


def test_is_signed_by_dtype():
    signed = {name: getattr(rc, name).is_signed for name in DTYPES}
    assert signed == {"bool": False, "uint8": False, "int8": True, "int32": True,
                      "int64": True, "float16": True, "float32": True, "float64": True}
    for name, want in signed.items():
        assert rc.zeros(1, dtype=getattr(rc, name)).is_signed() is want


def test_is_same_size_and_is_set_to(device):
    x = rc.arange(6.0, device=device).reshape(2, 3)
    assert x.is_same_size(rc.zeros(2, 3, device=device))
    assert not x.is_same_size(rc.zeros(3, 2, device=device))
    assert rc.is_same_size(x, x.clone())
    assert x.is_set_to(x) and x.is_set_to(x.view(2, 3)) and x.is_set_to(x[:])
    assert not x.is_set_to(x.clone())          # same values, other memory
    assert not x.is_set_to(x.t())              # same memory, other strides
    assert not x.is_set_to(x.view(6))          # other shape
    assert not x[1:].is_set_to(x[:1])          # other offset


@needs_torch
def test_is_set_to_agrees_with_torch():
    r, t = rc.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    for f in (lambda a: a, lambda a: a.view(2, 3), lambda a: a.t(), lambda a: a.view(6),
              lambda a: a.clone(), lambda a: a[:]):
        assert r.is_set_to(f(r)) == t.is_set_to(f(t))


def test_is_coalesced_is_refused_for_dense_tensors_as_in_pytorch():
    with pytest.raises(RuntimeError, match="sparse coordinate tensor layout"):
        rc.zeros(2).is_coalesced()


@needs_torch
def test_every_pytorch_tensor_predicate_exists():
    missing = [n for n in dir(torch.Tensor) if n.startswith("is_") and not hasattr(rc.Tensor, n)]
    assert missing == []


def test_predicate_methods_are_bound(device):
    x = rc.ones(1, device=device)
    for name in METHODS:
        assert callable(getattr(x, name)), name


# -- __format__ ---------------------------------------------------------------------


@pytest.mark.parametrize("value,dtype", [(90.0, "float32"), (0.1, "float32"), (0.1, "float64"),
                                         (3, "int64"), (True, "bool"), (-2.5, "float16")])
@pytest.mark.parametrize("spec", ["", ".2f", ">10", "e", ".3g"])
def test_format_of_a_0d_tensor_formats_its_number(device, value, dtype, spec):
    x = rc.tensor(value, dtype=getattr(rc, dtype), device=device)
    if dtype == "bool" and spec in ("e", ".2f", ".3g"):
        want = format(bool(value), spec)       # Python formats True as the number 1
    else:
        want = format(x.item(), spec)
    assert format(x, spec) == want
    assert f"{x}" == format(x.item(), "")


@needs_torch
@pytest.mark.parametrize("value,dtype", [(90.0, "float32"), (0.1, "float32"), (7, "int64"),
                                         (False, "bool")])
@pytest.mark.parametrize("spec", ["", ".2f", "^12", ".1e"])
def test_format_agrees_with_torch(value, dtype, spec):
    r = rc.tensor(value, dtype=getattr(rc, dtype))
    t = torch.tensor(value, dtype=getattr(torch, dtype))
    assert format(r, spec) == format(t, spec)
    g = rc.tensor(1.5, requires_grad=True)
    assert f"{g:.3f}" == f"{torch.tensor(1.5, requires_grad=True):.3f}" == "1.500"


def test_format_of_other_tensors(device):
    x = rc.tensor([1.0, 2.0], device=device)
    assert f"{x}" == str(x) == repr(x)
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        format(x, ".2f")


# -- out-of-scope names -------------------------------------------------------------


def _owner(owner: str):
    import importlib

    if owner == "Tensor":
        return rc.ones(2)
    if owner == "Module":
        return nn.Linear(2, 2)
    return importlib.import_module(owner)


@pytest.mark.parametrize("owner,name", [(o, n) for o, names in OUT_OF_SCOPE.items()
                                        for n in names])
def test_every_out_of_scope_name_raises_the_clear_error(owner, name):
    obj = _owner(owner)
    with pytest.raises(UnbuiltAttributeError) as info:
        getattr(obj, name)
    msg = str(info.value)
    assert f".{name} is out of scope for rtxcore: " in msg
    assert REASONS[OUT_OF_SCOPE[owner][name]] in msg
    assert info.value.name == name
    assert isinstance(info.value, AttributeError)
    assert not hasattr(obj, name)  # hasattr() still answers False


def test_out_of_scope_names_are_not_also_provided():
    """A name is either there or refused: the table must not shadow a real name."""
    for owner, names in OUT_OF_SCOPE.items():
        obj = _owner(owner)
        cls = type(obj)
        for name in names:
            provided = name in dir(cls) if owner in ("Tensor", "Module") else name in vars(obj)
            assert not provided, f"{owner}.{name} exists and is listed as out of scope"


@pytest.mark.parametrize("owner", ["rtxcore", "rtxcore.nn", "rtxcore.nn.functional",
                                   "rtxcore.optim", "Tensor", "Module"])
def test_unknown_names_keep_the_plain_error_and_its_hint(owner):
    obj = _owner(owner)
    with pytest.raises(AttributeError) as info:
        getattr(obj, "no_such_name_here")
    assert not isinstance(info.value, UnbuiltAttributeError)
    assert "has no attribute 'no_such_name_here'" in str(info.value)
    assert info.value.name == "no_such_name_here"


@pytest.mark.parametrize("expr,hint", [("rc.ones(1).is_cud", "'is_cuda'"),
                                        ("nn.Linear(2, 2).wieght", "'weight'"),
                                        ("rc.zeross", "'zeros'"),
                                        ("nn.Linaer", "'Linear'")])
def test_a_typo_still_gets_pythons_suggestion(expr, hint):
    import subprocess
    import sys

    code = f"import rtxcore as rc, rtxcore.nn as nn\n{expr}\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"Did you mean: {hint}?" in r.stderr.splitlines()[-1]


def test_module_attributes_still_resolve_first():
    m = nn.Linear(2, 2)
    assert m.weight.shape == (2, 2)
    m.register_buffer("values", rc.zeros(1))   # a name the Tensor table refuses: fine here
    assert m.values.shape == (1,)


def test_numpy_arrays_of_tensors_are_unaffected():
    """NumPy probes attributes (``__array_interface__`` ...) through getattr."""
    a = np.asarray(rc.arange(3.0))
    assert a.tolist() == [0.0, 1.0, 2.0]


# -- Module methods scripts call --------------------------------------------------


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh())
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.body(x))


def test_get_parameter_get_buffer_set_submodule():
    m = _Net()
    assert m.get_parameter("body.0.weight") is m.body[0].weight
    assert m.get_parameter("head.bias") is m.head.bias
    assert m.get_buffer("body.1.running_mean") is m.body[1].running_mean
    with pytest.raises(AttributeError, match="no parameter 'nope'"):
        m.get_parameter("head.nope")
    with pytest.raises(AttributeError, match="no buffer 'weight'"):
        m.get_buffer("head.weight")
    new = nn.Linear(4, 5)
    m.set_submodule("head", new)
    assert m.head is new and m(rc.ones(2, 3)).shape == (2, 5)
    with pytest.raises(AttributeError, match="no submodule 'extra'"):
        m.set_submodule("extra", nn.Identity(), strict=True)
    m.set_submodule("body.extra", nn.Identity())
    assert isinstance(m.body.extra, nn.Identity)
    with pytest.raises(TypeError, match="expected a Module"):
        m.set_submodule("head", 3)


def test_module_cuda_says_why_without_cuda():
    if rc.cuda.is_available():
        assert next(_Net().cuda().parameters()).device.type == "cuda"
        return
    with pytest.raises(RuntimeError, match="(?i)cuda"):
        _Net().cuda()


def test_module_type_to_empty_share_memory(device):
    m = _Net()
    assert m.type(rc.float64) is m
    assert {p.dtype for p in m.parameters()} == {rc.float64}
    assert m.share_memory() is m
    params = list(m.parameters())
    m.to_empty(device=device)
    assert [p for p in m.parameters()] == params          # same Parameter objects
    assert {p.device.type for p in m.parameters()} == {rc.device(device).type}
    assert {b.device.type for b in m.buffers()} == {rc.device(device).type}


def test_module_compile_in_place_matches_eager_and_trains():
    rc.manual_seed(0)
    eager = _Net()
    compiled = _Net()
    compiled.load_state_dict(eager.state_dict())
    assert compiled.compile() is None
    assert isinstance(compiled, _Net) and list(compiled.state_dict()) == list(eager.state_dict())
    x = rc.randn(8, 3)
    for m in (eager, compiled):
        opt = rc.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
    for (k, a), b in zip(eager.state_dict().items(), compiled.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(compiled.__dict__["_compiled_forward"]._cache) >= 1  # it ran traced graphs


def test_a_compiled_module_keeps_its_hooks_eager_and_copies():
    import copy
    import pickle

    m = _Net()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(1))
    m.compile()
    x = rc.randn(4, 3)
    for _ in range(3):
        m(x)
    m.register_forward_pre_hook(lambda mod, args: seen.append(2))
    m(x)
    assert seen == [1, 1, 1, 2, 1]  # every call, before and after the graph exists
    twin = copy.deepcopy(m)
    assert "_compiled_forward" not in twin.__dict__ and twin(x).shape == (4, 2)
    plain = _Net()  # (hooks that are lambdas don't pickle, here as in PyTorch)
    plain.compile()
    plain(x)
    again = pickle.loads(pickle.dumps(plain))
    np.testing.assert_allclose(again(x).detach().numpy(), plain(x).detach().numpy(), rtol=1e-6)


def test_data_parallel_runs_the_module_and_prefixes_state_dict(device):
    rc.manual_seed(1)
    inner = _Net().to(device)
    dp = nn.DataParallel(inner)
    x = rc.randn(4, 3, device=device)
    np.testing.assert_array_equal(dp(x).detach().numpy(), inner(x).detach().numpy())
    assert list(dp.state_dict()) == ["module." + k for k in inner.state_dict()]
    assert dp.module is inner
    np.testing.assert_array_equal(nn.parallel.data_parallel(inner, x).detach().numpy(),
                                  inner(x).detach().numpy())
    with pytest.raises(ValueError, match="DistributedDataParallel"):
        nn.DataParallel(inner, device_ids=[0, 1])
    with pytest.raises(TypeError, match="wraps a Module"):
        nn.DataParallel(lambda v: v)


@needs_torch
def test_data_parallel_state_dict_keys_match_torch():
    t = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    r = nn.DataParallel(nn.Sequential(nn.Linear(2, 2)))
    assert list(r.state_dict()) == list(t.state_dict())


# -- the sweep of public training code ------------------------------------------------

_SWEEP = Path(__file__).parent / "data" / "pytorch_names_used.txt"


def _load_script():
    import importlib.util

    path = Path(__file__).parents[1] / "scripts" / "pytorch_names.py"
    spec = importlib.util.spec_from_file_location("pytorch_names", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_name_public_training_code_uses_is_there_or_refused():
    names = [ln for ln in _SWEEP.read_text().splitlines() if ln and not ln.startswith("#")]
    assert len(names) > 200
    status = _load_script().status
    missing = [n for n in names if status(n) == "MISSING"]
    assert missing == []


def test_the_sweep_reads_imports_and_method_names():
    mod = _load_script()
    src = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
           "from torch.utils.data import DataLoader\nfrom torch import optim\n"
           "x = torch.zeros(3).view(1, 3)\nm = nn.Linear(2, 2)\ny = F.relu(x)\n"
           "opt = optim.lr_scheduler.StepLR\nm.eval()\nparser.add_argument('--a')\n")
    found = mod.names_in(src, {"Tensor": {"view", "relu"}, "Module": {"eval"}})
    assert set(found) == {"torch.zeros", "torch.nn.Linear", "torch.nn.functional.relu",
                          "torch.utils.data.DataLoader", "torch.optim.lr_scheduler.StepLR",
                          "Tensor.view", "Module.eval"}
    assert mod.status("torch.nn.functional.relu") == "ok"
    assert mod.status("torch.sparse_coo_tensor") == "refused"
    assert mod.status("torch.onnx.export") == "refused"
    assert mod.status("torch.nn.NoSuchLayer") == "MISSING"
    assert mod.status("Tensor.no_such_method") == "MISSING"
    assert mod.status("Optimizer.param_groups") == "ok"


def test_variable_is_a_tensor_as_since_pytorch_0_4():
    from rtxcore.autograd import Variable

    t = rc.ones(2)
    v = Variable(t, requires_grad=True)
    assert type(v) is rc.Tensor and v is not t
    assert v.requires_grad and v.is_leaf and not t.requires_grad
    assert v.data_ptr() == t.data_ptr()
    assert isinstance(t, Variable) and not isinstance([1.0], Variable)
    b = rc.ones(2, requires_grad=True) * 2
    assert Variable(b).grad_fn is None and not Variable(b).requires_grad
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        Variable([1.0])
    with pytest.warns(UserWarning, match="volatile was removed"):
        Variable(t, volatile=True)


# -- PyTorch's other names for ops rtxcore has (rtxcore/ops/aliases.py) ---------------

_VALUES = [-1.5, -0.0, 0.0, 2.0, 0.25, float("inf"), -float("inf"), float("nan")]
_UNARY = ["absolute", "angle", "negative", "positive", "sgn", "exp2", "deg2rad", "rad2deg", "isreal",
          "isposinf", "isneginf", "conj", "resolve_conj", "resolve_neg", "real"]


def _numpy_reference(name, a):
    return {"absolute": np.abs, "negative": np.negative,
            "angle": lambda v: np.where(np.isnan(v), v, np.where(v < 0, np.pi, 0.0)).astype(v.dtype), "positive": lambda v: v,
            "sgn": np.sign, "exp2": np.exp2, "deg2rad": lambda v: v * (np.pi / 180),
            "rad2deg": lambda v: v * (180 / np.pi), "isreal": lambda v: np.ones(v.shape, bool),
            "isposinf": np.isposinf, "isneginf": np.isneginf, "conj": lambda v: v,
            "resolve_conj": lambda v: v, "resolve_neg": lambda v: v,
            "real": lambda v: v}[name](a)


@pytest.mark.parametrize("name", _UNARY)
def test_alias_values_against_numpy(device, name):
    a = np.array(_VALUES, np.float32)
    x = rc.tensor(a, device=device)
    want = _numpy_reference(name, a)
    np.testing.assert_allclose(getattr(rc, name)(x).numpy(), want, rtol=1e-6)
    method = x.real if name == "real" else getattr(x, name)()
    np.testing.assert_allclose(method.numpy(), want, rtol=1e-6)


@needs_torch
@pytest.mark.parametrize("name", _UNARY)
def test_alias_values_against_torch(name):
    a = np.array(_VALUES, np.float32)
    if name == "sgn":  # sign(NaN): NaN here (NumPy's), 0 in PyTorch (docs/porting.md)
        a = a[~np.isnan(a)]
    got, want = getattr(rc, name)(rc.tensor(a)), getattr(torch, name)(torch.tensor(a))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")


def test_alias_in_place_forms(device):
    y = rc.full((3,), 4.0, device=device)
    assert y.multiply_(2) is y and y.subtract_(1, alpha=2) is y and y.divide_(3) is y
    assert y.true_divide_(2) is y and y.negative_() is y and y.absolute_() is y
    np.testing.assert_allclose(y.numpy(), [1.0, 1.0, 1.0])
    z = rc.tensor([7.0], device=device)
    z.divide_(2, rounding_mode="floor")
    assert z.item() == 3.0


def test_alias_gradients():
    x = rc.tensor(np.linspace(-1, 1, 5), dtype=rc.float64, requires_grad=True)
    for fn in (rc.exp2, rc.deg2rad, rc.rad2deg, rc.absolute, rc.negative,
               lambda v: rc.std_mean(v.reshape(1, 5), 1)[0],
               lambda v: rc.std_mean(v, 0, correction=0)[1]):
        assert gradcheck(fn, (x,))


def test_std_mean_and_get_device(device):
    a = np.arange(12.0).reshape(3, 4)
    s, m = rc.std_mean(rc.tensor(a, device=device), 1, keepdim=True)
    np.testing.assert_allclose(s.numpy(), a.std(1, ddof=1, keepdims=True))
    np.testing.assert_allclose(m.numpy(), a.mean(1, keepdims=True))
    x = rc.ones(1, device=device)
    assert x.get_device() == (-1 if x.device.type == "cpu" else (x.device.index or 0))


def test_positive_of_bool_is_refused_as_in_pytorch():
    with pytest.raises(TypeError, match="bool tensor"):
        rc.positive(rc.ones(1, dtype=rc.bool))


@needs_torch
@pytest.mark.parametrize("args,kwargs", [((), {}), ((1,), {}), ((1, False), {}), ((False,), {}),
                                         ((0,), {"correction": 0, "keepdim": True}),
                                         (((0, 1),), {"unbiased": True})])
def test_var_mean_and_std_mean_take_pytorchs_arguments(args, kwargs):
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4) ** 1.5
    for name in ("var_mean", "std_mean"):
        got = getattr(rc, name)(rc.tensor(a), *args, **kwargs)
        want = getattr(torch, name)(torch.tensor(a), *args, **kwargs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
