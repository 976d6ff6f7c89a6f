"""rtxcore.save / rtxcore.load: safetensors files, no pickle, clear errors."""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import stat
from collections import OrderedDict, defaultdict

import numpy as np
import pytest

import rtxcore as rc
from rtxcore.serialization import FORMAT, VERSION
from rtxcore.testing import assert_close

from .conftest import _devices
from .dtypes_table import ALL, need, npdt, rdt


def _values(name: str, shape=(2, 3)) -> np.ndarray:
    n = int(np.prod(shape))
    if name == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    if name == "uint8":
        return (np.arange(n) * 37 % 256).astype(np.uint8).reshape(shape)
    if name.startswith("int"):
        info = np.iinfo(npdt(name))
        vals = np.array([info.min, info.max, 0, -1, 5, 7] * n)[:n]
        return vals.astype(npdt(name)).reshape(shape)
    vals = np.array([-1.5, 0.0, 2.25, np.inf, -np.inf, np.nan] * n)[:n]
    return vals.astype(npdt(name)).reshape(shape)


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    rc.save(obj, buf)
    buf.seek(0)
    return rc.load(buf, **kw)


def _other_devices(device):
    return [d for d in _devices() if rc.device(d) != rc.device(device)] + ["cpu"]


# -- values -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_every_dtype_round_trips(device, name):
    need(device, name)
    arr = _values(name)
    t = rc.tensor(arr, dtype=rdt(name), device=device)
    out = _roundtrip({"x": t, "y": t[0]})
    for got, want in ((out["x"], arr), (out["y"], arr[0])):
        assert got.dtype is rdt(name)
        assert got.device == rc.device(device)
        assert_close(got, want)
    # the same file onto every other device and onto cpu
    for other in _other_devices(device):
        if not rc.device(other).supports(rdt(name)):
            continue
        moved = _roundtrip({"x": t}, map_location=other)["x"]
        assert moved.device == rc.device(other) and moved.dtype is rdt(name)
        assert_close(moved, arr)


def test_all_dtypes_in_one_file(device):
    names = [n for n in ALL if rc.device(device).supports(rdt(n))]
    obj = {n: rc.tensor(_values(n, (5,)), dtype=rdt(n), device=device) for n in names}
    out = _roundtrip(obj)
    assert list(out) == names
    for n in names:
        assert out[n].dtype is rdt(n)
        assert_close(out[n], _values(n, (5,)))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1,), (2, 1, 3)])
def test_zero_d_and_empty(device, shape):
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 0.5
    t = rc.tensor(arr, device=device)
    out = _roundtrip(t)
    assert tuple(out.shape) == shape and out.device == rc.device(device)
    assert_close(out, arr)
    assert tuple(_roundtrip(t, map_location="cpu").shape) == shape


def test_non_contiguous_saves_the_values_it_shows(device):
    base = rc.arange(24, dtype=rc.float32, device=device).reshape(2, 3, 4)
    views = {
        "transposed": base.transpose(0, 2),
        "stepped": base[:, ::2, 1::2],
        "offset": base[1, 1:],
        "expanded": rc.tensor([1.0, 2.0], device=device).reshape(2, 1).expand(2, 5),
        "permuted": base.permute(2, 0, 1),
    }
    out = _roundtrip(views)
    for k, v in views.items():
        assert not v.is_contiguous() or k == "offset"
        assert_close(out[k], v.cpu().numpy())
        assert out[k].is_contiguous()


def test_shared_storage_loads_as_independent_tensors(device):
    a = rc.arange(6, dtype=rc.float32, device=device)
    out = _roundtrip({"a": a, "view": a[2:5], "same": a})
    assert_close(out["view"], [2.0, 3.0, 4.0], check_dtype=False)
    out["a"].add_(100.0)
    assert_close(out["view"], [2.0, 3.0, 4.0], check_dtype=False)
    assert_close(out["same"], np.arange(6, dtype=np.float32))
    assert_close(a, np.arange(6, dtype=np.float32))  # saving didn't touch the original


def test_loaded_tensor_does_not_alias_the_original(device):
    a = rc.zeros(3, device=device)
    b = _roundtrip(a)
    b.add_(1.0)
    assert_close(a, np.zeros(3, dtype=np.float32))


def test_requires_grad_is_kept(device):
    w = rc.ones(2, 2, device=device).requires_grad_()
    y = (w * 2).sum()  # a non-leaf in the same object
    out = _roundtrip({"w": w, "y": y, "plain": rc.ones(1, device=device)})
    assert out["w"].requires_grad and out["w"].is_leaf
    assert not out["plain"].requires_grad
    assert_close(out["y"].detach(), np.array(8.0, dtype=np.float32))


# -- structure ----------------------------------------------------------------------------


def test_nested_structure(device):
    t = rc.tensor([[1, 2], [3, 4]], device=device)
    obj = {
        "ints": {0: t, 1: [t.T, None], -5: "neg"},
        "seq": [1, 2.5, -0.0, True, False, None, "text", "", (1, (2, "x")), []],
        "floats": [float("nan"), float("inf"), float("-inf"), 1e-300, 2**70],
        "tuple": (t, 3, {"deep": [[[t[0]]]]}),
        "ordered": OrderedDict([("z", 1), ("a", t)]),
        (1, "tuple key"): "v",
        2.5: "float key",
        None: "none key",
        True: "bool key",
        "dtype": rc.float16,
        "device": rc.device(device),
        "np": np.float32(1.5),
        "odd \ud800 \"name\"\n": [rc.zeros(1, device=device), "\ud800\x00\u2028"],
    }
    out = _roundtrip(obj)
    assert type(out) is dict and list(out) == list(obj)
    assert type(out["ordered"]) is OrderedDict and list(out["ordered"]) == ["z", "a"]
    assert set(out["ints"]) == {0, 1, -5} and all(type(k) is int for k in out["ints"])
    assert_close(out["ints"][0], [[1, 2], [3, 4]], check_dtype=False)
    assert out["ints"][0].device == rc.device(device)
    assert_close(out["ints"][1][0], [[1, 3], [2, 4]], check_dtype=False)
    assert out["ints"][1][1] is None
    seq = out["seq"]
    assert seq[:3] == [1, 2.5, -0.0] and math.copysign(1, seq[2]) == -1
    assert [type(v) for v in seq[:6]] == [int, float, float, bool, bool, type(None)]
    assert seq[6:] == ["text", "", (1, (2, "x")), []]
    f = out["floats"]
    assert math.isnan(f[0]) and f[1] == math.inf and f[2] == -math.inf and f[3] == 1e-300
    assert f[4] == 2**70 and type(f[4]) is int
    assert type(out["tuple"]) is tuple and out["tuple"][1] == 3
    assert_close(out["tuple"][2]["deep"][0][0][0], [1, 2], check_dtype=False)
    assert out[(1, "tuple key")] == "v" and out[2.5] == "float key"
    assert out[None] == "none key" and out[True] == "bool key"
    assert out["dtype"] is rc.float16 and out["device"] == rc.device(device)
    assert out["np"] == 1.5
    assert out["odd \ud800 \"name\"\n"][1] == "\ud800\x00\u2028"


def test_optimizer_like_state_dict(device):
    p0 = rc.randn(3, 4, device=device)
    state = {
        "state": {
            0: {"step": rc.tensor(7.0, device=device), "exp_avg": p0, "exp_avg_sq": p0 * p0},
            1: {"step": 3, "momentum_buffer": None},
        },
        "param_groups": [
            {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
             "amsgrad": False, "maximize": False, "foreach": None, "params": [0, 1]},
        ],
    }
    out = _roundtrip(state)
    s0 = out["state"][0]
    assert_close(s0["exp_avg"], p0.cpu().numpy())
    assert_close(s0["exp_avg_sq"], (p0 * p0).cpu().numpy())
    assert s0["step"].item() == 7.0 and s0["step"].ndim == 0
    assert out["state"][1] == {"step": 3, "momentum_buffer": None}
    assert out["param_groups"] == state["param_groups"]
    assert type(out["param_groups"][0]["betas"]) is tuple


def test_state_dict_names_are_the_tensor_names():
    import safetensors

    sd = OrderedDict([("fc.weight", rc.ones(2, 2)), ("fc.bias", rc.zeros(2))])
    buf = io.BytesIO()
    rc.save(sd, buf)
    names = {k for k, _ in safetensors.deserialize(buf.getvalue())}
    assert names == {"fc.weight", "fc.bias"}
    nested = {"state": {0: {"exp_avg": rc.ones(1)}}, "tensor": rc.ones(1), "a.b": rc.ones(1),
              "a": {"b": rc.ones(1)}, "__metadata__": rc.ones(1)}
    buf = io.BytesIO()
    rc.save(nested, buf)
    names = {k for k, _ in safetensors.deserialize(buf.getvalue())}
    assert "state.0.exp_avg" in names and "a.b" in names and "a.b#2" in names
    assert len(names) == 5
    buf.seek(0)
    out = rc.load(buf)
    assert set(out) == set(nested)


def test_module_state_dict_round_trip(tmp_path):
    from rtxcore import nn

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    path = tmp_path / "model.safetensors"
    rc.save(model.state_dict(), path)
    sd = rc.load(path)
    assert type(sd) is OrderedDict and list(sd) == list(model.state_dict())
    for k, v in model.state_dict().items():
        assert_close(sd[k], v.numpy())
    # parameters themselves keep their class and requires_grad
    params = _roundtrip(dict(model.named_parameters()))
    for k, p in model.named_parameters():
        assert isinstance(params[k], nn.Parameter) and params[k].requires_grad


# -- where tensors land -------------------------------------------------------------------


def test_map_location_forms(device):
    t = rc.arange(4, dtype=rc.float32, device=device)
    others = _other_devices(device)
    for target in [None, "cpu", rc.device("cpu"), device, rc.device(device), *others]:
        out = _roundtrip({"t": t}, map_location=target)["t"]
        assert out.device == (rc.device(device) if target is None else rc.device(target))
        assert_close(out, [0, 1, 2, 3], check_dtype=False)
    saved = str(rc.device(device))
    for other in others:
        assert _roundtrip(t, map_location={saved: other}).device == rc.device(other)
        assert _roundtrip(t, map_location={rc.device(device): other}).device == rc.device(other)
    assert _roundtrip(t, map_location={"nonexistent:3": "cpu"}).device == rc.device(device)

    seen = []

    def fn(cpu_tensor, location):
        seen.append(location)
        assert cpu_tensor.device == rc.device("cpu")

    assert _roundtrip(t, map_location=fn).device == rc.device(device)
    assert seen == [saved]
    assert _roundtrip(t, map_location=lambda s, loc: "cpu").device == rc.device("cpu")
    got = _roundtrip(t, map_location=lambda s, loc: s * 2)
    assert_close(got, [0, 2, 4, 6], check_dtype=False)


def _rtx_file(structure, arrays=None) -> bytes:
    from safetensors.numpy import save

    arrays = arrays if arrays is not None else {"t": np.arange(3, dtype=np.float32)}
    return save(arrays, {"format": FORMAT, "version": VERSION, "structure": json.dumps(structure)})


def test_saved_on_unavailable_device(tmp_path):
    path = tmp_path / "from_gpu.safetensors"
    path.write_bytes(_rtx_file({"dict": [["w", {"tensor": "t", "device": "cuda:0"}]]}))
    with pytest.raises(RuntimeError) as info:
        rc.load(path)
    msg = str(info.value)
    assert "cuda:0" in msg and "map_location='cpu'" in msg and str(path) in msg
    for ml in ("cpu", {"cuda:0": "cpu"}, {"cuda": "cpu"}, lambda s, loc: "cpu"):
        out = rc.load(path, map_location=ml)
        assert out["w"].device == rc.device("cpu")
        assert_close(out["w"], [0.0, 1.0, 2.0], check_dtype=False)


def test_unknown_device_type_names_it(tmp_path):
    path = tmp_path / "odd.safetensors"
    path.write_bytes(_rtx_file({"tensor": "t", "device": "quantum:0"}))
    with pytest.raises(RuntimeError, match="quantum:0"):
        rc.load(path)
    assert rc.load(path, map_location="cpu").device == rc.device("cpu")


# -- paths and files ----------------------------------------------------------------------


def test_paths_and_file_objects(tmp_path, device):
    obj = {"a": rc.ones(2, device=device), "n": 3}
    for path in (tmp_path / "p.safetensors", str(tmp_path / "s.safetensors")):
        rc.save(obj, path)
        out = rc.load(path)
        assert out["n"] == 3 and out["a"].device == rc.device(device)
        assert_close(out["a"], [1.0, 1.0], check_dtype=False)
    path = tmp_path / "f.safetensors"
    with open(path, "wb") as f:
        rc.save(obj, f)
    with open(path, "rb") as f:
        assert rc.load(f)["n"] == 3
    assert path.read_bytes() == (tmp_path / "p.safetensors").read_bytes()


def test_same_object_same_bytes():
    obj = {"b": rc.ones(2), "a": {"x": [1, "é\n"], 3: rc.zeros(1, dtype=rc.int8)}}
    first = io.BytesIO()
    rc.save(obj, first)
    for _ in range(5):
        again = io.BytesIO()
        rc.save(obj, again)
        assert again.getvalue() == first.getvalue()


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        rc.load(tmp_path / "nope.safetensors")


# -- broken and foreign files ---------------------------------------------------------------


def _valid_bytes() -> bytes:
    buf = io.BytesIO()
    rc.save({"w": rc.arange(10, dtype=rc.float32), "state": {0: [1.5, "x", rc.ones(2, 2)]}}, buf)
    return buf.getvalue()


def _load_file(tmp_path, data: bytes, name="broken.safetensors"):
    path = tmp_path / name
    path.write_bytes(data)
    return path, (lambda: rc.load(path))


@pytest.mark.parametrize("what,data", [
    ("empty", b""),
    ("tiny", b"\x01\x02"),
    ("random", np.random.default_rng(0).bytes(4096)),
    ("json", json.dumps({"a": [1, 2, 3], "b": "c"}).encode()),
    ("text", b"hello world, this is not a tensor file\n"),
    ("pickle", pickle.dumps({"a": 1})),
    ("zero header", (0).to_bytes(8, "little") + b"{}"),
    ("huge header", (2**63).to_bytes(8, "little") + b"{}"),
    ("header not json", (5).to_bytes(8, "little") + b"{abc}"),
    ("header a list", (2).to_bytes(8, "little") + b"[]"),
])
def test_garbage_raises_a_clear_error(tmp_path, what, data):
    path, load = _load_file(tmp_path, data)
    with pytest.raises(ValueError) as info:
        load()
    assert str(path) in str(info.value)
    if what == "empty":
        assert "empty" in str(info.value)


def test_truncated_file_raises_at_every_cut(tmp_path):
    data = _valid_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    cuts = sorted({1, 4, 7, 8, 9, 20, header_end // 2, header_end - 1, header_end,
                   header_end + 1, (header_end + len(data)) // 2, len(data) - 1})
    for cut in cuts:
        path, load = _load_file(tmp_path, data[:cut])
        with pytest.raises(ValueError) as info:
            load()
        assert str(path) in str(info.value), cut


def test_extra_trailing_bytes_are_refused(tmp_path):
    _, load = _load_file(tmp_path, _valid_bytes() + b"\x00" * 3)
    with pytest.raises(ValueError, match="broken.safetensors"):
        load()


def test_flipped_header_bytes_never_leak_a_raw_error(tmp_path):
    data = _valid_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    must_fail = {0, 1, 2, 7, 8, header_end - 1}  # the length and the braces
    for i in range(header_end):
        flipped = bytearray(data)
        flipped[i] ^= 0x5A
        path, load = _load_file(tmp_path, bytes(flipped))
        try:
            load()
        except (ValueError, RuntimeError) as exc:
            assert str(path) in str(exc), (i, exc)
        else:
            assert i not in must_fail, i


def test_newer_format_version_is_refused(tmp_path):
    from safetensors.numpy import save

    data = save({"t": np.zeros(1, np.float32)},
                {"format": FORMAT, "version": "99", "structure": '{"tensor":"t","device":"cpu"}'})
    _, load = _load_file(tmp_path, data)
    with pytest.raises(ValueError, match="version"):
        load()


@pytest.mark.parametrize("structure", [
    {"tensor": "missing", "device": "cpu"},
    {"tensor": 3, "device": "cpu"},
    {"tensor": "t", "device": 5},
    {"weird": 1},
    {"dict": [[["list key"], 1]]},
    {"dict": [[1]]},
    {"list": "not a list"},
    {"float": "one"},
    {"dtype": "complex128"},
    {"dtype": ["float32"]},
    [1, 2],
])
def test_malformed_structure(tmp_path, structure):
    path, load = _load_file(tmp_path, _rtx_file(structure))
    with pytest.raises(ValueError) as info:
        load()
    assert str(path) in str(info.value) and "corrupt" in str(info.value)


def test_foreign_safetensors_file_loads_as_flat_dict(tmp_path, device):
    from safetensors.numpy import save

    arrays = {"layer.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
              "layer.mask": np.array([True, False]),
              "count": np.array(5, dtype=np.int64)}
    for meta in (None, {"format": "pt"}):
        path, load = _load_file(tmp_path, save(arrays, meta), "foreign.safetensors")
        out = load()
        assert set(out) == set(arrays)
        for k, v in arrays.items():
            assert out[k].device == rc.device("cpu")
            assert_close(out[k], v)
        moved = rc.load(path, map_location=device)
        assert all(t.device == rc.device(device) for t in moved.values())


def test_foreign_file_with_unsupported_dtype(tmp_path):
    from safetensors.numpy import save

    path, load = _load_file(tmp_path, save({"u": np.arange(3, dtype=np.uint32)}))
    with pytest.raises(ValueError) as info:
        load()
    assert "U32" in str(info.value) and str(path) in str(info.value)


# -- what can't be saved ----------------------------------------------------------------------


class Custom:
    pass


@pytest.mark.parametrize("obj,where,typename", [
    ({"state": {"layers": [1, 2, {3}]}}, "obj['state']['layers'][2]", "set"),
    ({"fn": lambda x: x}, "obj['fn']", "function"),
    ([Custom()], "obj[0]", "Custom"),
    ({0: {"a": b"bytes"}}, "obj[0]['a']", "bytes"),
    (defaultdict(list), "obj", "defaultdict"),
    ({"c": 1 + 2j}, "obj['c']", "complex"),
    ({frozenset(): 1}, "obj[frozenset()]", "frozenset"),
    (np.array([1 + 2j]), "obj", "NumPy array of dtype complex128"),  # (number arrays save)
])
def test_unsupported_objects_name_their_place(obj, where, typename):
    buf = io.BytesIO()
    with pytest.raises(TypeError) as info:
        rc.save(obj, buf)
    msg = str(info.value)
    assert msg.startswith(where + ":") and typename in msg, msg
    assert buf.getvalue() == b""  # nothing half-written


def test_cycles_are_refused():
    a: list = [1]
    a.append(a)
    with pytest.raises(ValueError, match="contains itself"):
        rc.save(a, io.BytesIO())


# -- no pickle ----------------------------------------------------------------------------------


def test_no_pickle_anywhere(tmp_path, monkeypatch, device):
    obj = {"w": rc.ones(3, device=device), "meta": {"step": 1, "names": ("a", "b")}}
    path = tmp_path / "x.safetensors"
    rc.save(obj, path)
    data = path.read_bytes()
    assert not data.startswith(b"\x80") and not data.startswith(b"PK")  # not pickle, not zip
    assert b"\x80\x04\x95" not in data and b"\x80\x02" not in data

    def refuse(*a, **k):
        raise AssertionError("pickle used")

    for name in ("loads", "load", "Unpickler", "dumps", "dump", "Pickler"):
        monkeypatch.setattr(pickle, name, refuse)
    out = rc.load(path)
    rc.save(out, tmp_path / "again.safetensors")
    assert out["meta"] == {"step": 1, "names": ("a", "b")}
    assert_close(out["w"], [1.0, 1.0, 1.0], check_dtype=False)


# -- other readers --------------------------------------------------------------------------------


def test_torch_reads_a_saved_flat_dict(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    arrays = {n: _values(n, (3, 2)) for n in ALL}
    sd = {n: rc.tensor(a, dtype=rdt(n)) for n, a in arrays.items()}
    sd["strided"] = rc.arange(12, dtype=rc.float32).reshape(3, 4).T
    path = tmp_path / "for_torch.safetensors"
    rc.save(sd, path)
    got = load_file(str(path))
    assert set(got) == set(sd)
    for n, a in arrays.items():
        assert str(got[n].dtype) == f"torch.{n}"
        np.testing.assert_array_equal(got[n].numpy(), a)
    np.testing.assert_array_equal(got["strided"].numpy(), np.arange(12.0).reshape(3, 4).T)

    # and back: a file written by torch loads as a flat dict
    back = tmp_path / "from_torch.safetensors"
    save_file({"w": torch.arange(6, dtype=torch.float16).reshape(2, 3)}, str(back))
    w = rc.load(back)["w"]
    assert w.dtype is rc.float16
    assert_close(w, np.arange(6, dtype=np.float16).reshape(2, 3))


# -- saving in place, checksums, layout ------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_saved_file_modes(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    new = tmp_path / "new.safetensors"
    rc.save(rc.ones(2), new)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask  # as open() would make it
    kept = tmp_path / "kept.safetensors"
    rc.save(rc.ones(2), kept)
    kept.chmod(0o640)
    rc.save(rc.zeros(3), kept)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    assert_close(rc.load(kept), np.zeros(3, dtype=np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.safetensors", "new.safetensors"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_saving_through_a_symlink_replaces_its_target(tmp_path):
    target = tmp_path / "real.safetensors"
    rc.save(rc.ones(1), target)
    link = tmp_path / "link.safetensors"
    link.symlink_to(target)
    rc.save(rc.full((2,), 7.0), link)
    assert link.is_symlink()
    assert_close(rc.load(target), [7.0, 7.0], check_dtype=False)


def test_file_without_checksums_still_loads(tmp_path):
    """Files from older rtxcore versions (no checksums) and from the safetensors
    package (no rtxcore metadata at all) load; a foreign file's tensors come in
    its header's order."""
    from safetensors.numpy import save

    path, load = _load_file(tmp_path, _rtx_file({"dict": [["w", {"tensor": "t", "device": "cpu"}]]}))
    assert_close(load()["w"], [0.0, 1.0, 2.0], check_dtype=False)
    arrays = {"b": np.arange(3, dtype=np.int8), "a": np.ones((2, 2), np.float64)}
    path, load = _load_file(tmp_path, save(arrays, {"format": "pt"}))
    out = load()
    names = [k for k in json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8], "little")])
             if k != "__metadata__"]
    assert list(out) == names and set(names) == set(arrays)
    for k, v in arrays.items():
        assert_close(out[k], v)


def _file(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


@pytest.mark.parametrize("a,b,words", [
    ([0, 4], [8, 16], ["[4, 8)", "no tensor"]),  # a hole between the tensors
    ([0, 8], [8, 12], ["last 4 bytes", "no tensor"]),  # bytes after the last one
    ([0, 8], [8, 24], ["'b'", "outside the data section"]),
])
def test_byte_ranges_must_cover_the_data_exactly(tmp_path, a, b, words):
    import safetensors

    data = _file({"a": {"dtype": "F32", "shape": [(a[1] - a[0]) // 4], "data_offsets": a},
                  "b": {"dtype": "F32", "shape": [(b[1] - b[0]) // 4], "data_offsets": b}},
                 np.arange(4, dtype=np.float32).tobytes())
    with pytest.raises(Exception):  # the safetensors package refuses these files too
        safetensors.deserialize(data)
    path, load = _load_file(tmp_path, data)
    with pytest.raises(ValueError) as info:
        load()
    assert all(w in str(info.value) for w in words) and str(path) in str(info.value)


def test_shape_and_byte_count_must_agree(tmp_path):
    data = _file({"a": {"dtype": "F32", "shape": [10**12], "data_offsets": [0, 16]}},
                 np.arange(4, dtype=np.float32).tobytes())
    _, load = _load_file(tmp_path, data)
    with pytest.raises(ValueError, match="'a' has shape"):
        load()


def test_unknown_rtxcore_metadata_key_is_refused(tmp_path):
    from safetensors.numpy import save

    meta = {"format": FORMAT, "version": VERSION, "structure": '{"tensor":"t","device":"cpu"}',
            "strucutre": "x"}
    _, load = _load_file(tmp_path, save({"t": np.zeros(1, np.float32)}, meta))
    with pytest.raises(ValueError, match="strucutre"):
        load()


def test_header_change_is_caught_unless_verify_is_off(tmp_path):
    buf = io.BytesIO()
    rc.save({"a": rc.ones(2), "n": 5}, buf)
    data = buf.getvalue().replace(b'\\"n\\",5', b'\\"n\\",6')
    assert data != buf.getvalue()
    _, load = _load_file(tmp_path, data)
    with pytest.raises(ValueError, match="header changed"):
        load()
    assert rc.load(io.BytesIO(data), verify=False)["n"] == 6


# -- the safetensors package reads and writes the files -------------------------------------------


def test_the_safetensors_package_writes_and_reads_the_files(tmp_path, monkeypatch):
    """save lays files out with safetensors.serialize (the same tensor entries and
    data as safetensors.numpy.save writes); load parses them with
    safetensors.deserialize (bytes) and safe_open (paths)."""
    import safetensors
    from safetensors.numpy import save as st_save

    calls: list[str] = []

    def spy(fn: str):
        real = getattr(safetensors, fn)
        return lambda *a, **k: calls.append(fn) or real(*a, **k)

    for fn in ("serialize", "deserialize", "safe_open"):
        monkeypatch.setattr(safetensors, fn, spy(fn))
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, -2], np.int8),
              "d": np.full((2, 2), 0.5), "m": np.array([True, False, True])}
    obj = {k: rc.from_numpy(v) for k, v in arrays.items()}
    buf = io.BytesIO()
    rc.save(obj, buf)
    assert calls == ["serialize"]
    out = rc.load(io.BytesIO(buf.getvalue()))
    assert calls == ["serialize", "deserialize"]
    path = tmp_path / "m.safetensors"
    rc.save(obj, path)
    assert rc.load(path).keys() == obj.keys()
    assert calls == ["serialize", "deserialize", "serialize", "safe_open"]
    for k, v in arrays.items():
        assert_close(out[k], v)

    def parts(data: bytes) -> tuple[dict, bytes]:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        header.pop("__metadata__", None)
        return header, data[8 + n:]

    ours, reference = parts(buf.getvalue()), parts(st_save(arrays))
    assert list(ours[0].items()) == list(reference[0].items())  # same entries, in the same order
    assert ours[1] == reference[1]


def test_a_name_given_twice_is_refused(tmp_path):
    """The safetensors package takes the last of two entries with the same name;
    rtxcore refuses the file."""
    import safetensors

    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    text = json.dumps({"a": entry})[:-1] + ", " + json.dumps({"a": entry})[1:]
    data = len(text).to_bytes(8, "little") + text.encode() + np.ones(2, np.float32).tobytes()
    assert [k for k, _ in safetensors.deserialize(data)] == ["a"]
    path, load = _load_file(tmp_path, data)
    for source in (lambda: rc.load(io.BytesIO(data)), load):
        with pytest.raises(ValueError, match="names 'a' twice"):
            source()


@pytest.mark.parametrize("code,count", [("U32", 1), ("BF16", 2), ("U16", 2), ("F8_E4M3", 4)])
def test_valid_file_with_a_dtype_rtxcore_lacks(tmp_path, code, count):
    import safetensors

    data = _file({"ok": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                  "x": {"dtype": code, "shape": [count], "data_offsets": [4, 8]}}, bytes(8))
    safetensors.deserialize(data)  # a valid safetensors file
    path, load = _load_file(tmp_path, data)
    for source in (lambda: rc.load(io.BytesIO(data)), load):
        with pytest.raises(ValueError) as info:
            source()
        msg = str(info.value)
        assert code in msg and "'x'" in msg and "doesn't support" in msg


def test_file_shrinking_while_it_is_read(tmp_path, monkeypatch):
    """A file cut short after the safetensors package opened it is a ValueError
    (it reads with pread(2); with a memory map the process would die of SIGBUS)."""
    from rtxcore.serialization import reading as ser

    path = tmp_path / "model.safetensors"
    rc.save({"a": rc.ones(1000), "b": rc.zeros(1000)}, path)
    real = ser._tensors

    def then_truncate(*args, **kwargs):
        got = real(*args, **kwargs)
        os.truncate(path, os.path.getsize(path) - 2000)
        return got

    monkeypatch.setattr(ser, "_tensors", then_truncate)
    with pytest.raises(ValueError) as info:
        rc.load(path)
    assert str(path) in str(info.value) and "truncated" in str(info.value)


def test_file_replaced_while_it_is_read(tmp_path, monkeypatch):
    """rtxcore reads the header, then the safetensors package opens the file: one
    replaced in between by another save is refused as changed, not loaded mixed."""
    import safetensors

    path = tmp_path / "model.safetensors"
    rc.save({"a": rc.ones(4), "step": 1}, path)
    real = safetensors.safe_open

    def replaced_first(*args, **kwargs):
        rc.save({"a": rc.zeros(4), "step": 2}, path)
        return real(*args, **kwargs)

    monkeypatch.setattr(safetensors, "safe_open", replaced_first)
    with pytest.raises(ValueError, match="changed while it was read"):
        rc.load(path)
    monkeypatch.undo()
    assert rc.load(path)["step"] == 2


def test_numpy_arrays_are_saved_as_data_and_load_back_as_arrays(tmp_path):
    # a data set kept as NumPy arrays, as scripts save it with torch.save
    data = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2],  # a strided view
            "y": np.array([3, 1, 2], dtype=np.int64), "mask": np.array([True, False]),
            "big": np.arange(3, dtype=">i4"), "w": rc.ones(2), "empty": np.zeros((0, 2))}
    path = tmp_path / "data.rtx"
    rc.save(data, path)
    back = rc.load(path)
    for k in ("x", "y", "mask", "empty"):
        assert type(back[k]) is np.ndarray and back[k].dtype == data[k].dtype, k
        np.testing.assert_array_equal(back[k], data[k])
    assert back["big"].dtype == np.dtype("<i4") and back["big"].tolist() == [0, 1, 2]
    assert isinstance(back["w"], rc.Tensor)
    back["x"][0, 0] = 99  # a writable array of its own
    assert rc.load(path)["x"][0, 0] == 0


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.array([object()]),
                                 np.array([1 + 2j])])
def test_numpy_arrays_that_are_not_numbers_are_refused(tmp_path, bad):
    with pytest.raises(TypeError, match="cannot save a NumPy array of dtype"):
        rc.save({"a": bad}, tmp_path / "x.rtx")
    assert not (tmp_path / "x.rtx").exists()


def test_saving_a_model_or_optimizer_says_save_the_state_dict(tmp_path):
    model = rc.nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"Save the model's state_dict\(\) instead"):
        rc.save(model, tmp_path / "m.rtx")
    with pytest.raises(TypeError, match=r"Save the optimizer's state_dict\(\) instead: "
                                        r"rtxcore.save\(obj\['opt'\].state_dict\(\)"):
        rc.save({"opt": rc.optim.SGD(model.parameters(), lr=0.1)}, tmp_path / "o.rtx")


def test_an_ndarray_node_naming_no_array_is_corrupt(tmp_path):
    path = tmp_path / "a.rtx"
    rc.save({"a": np.arange(3)}, path)
    raw = path.read_bytes()
    hostile = raw.replace(b'{\\"ndarray\\":\\"a\\"}', b'{\\"ndarray\\":\\"zz\\"}')
    assert hostile != raw
    path.write_bytes(hostile)
    with pytest.raises(Exception, match="array 'zz'|checksum|corrupt|crc"):
        rc.load(path)
