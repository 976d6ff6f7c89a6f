"""``rtxcore.save`` / ``rtxcore.load``: tensors and nested containers of them in
the safetensors format. No pickle, ever: loading a file can't run code.

    rc.save(model.state_dict(), "model.safetensors")
    model.load_state_dict(rc.load("model.safetensors", map_location="cpu"))

What can be saved
    A Tensor (or ``nn.Parameter``), or any nesting of ``dict`` / ``OrderedDict`` /
    ``list`` / ``tuple`` whose leaves are tensors, ``int``, ``float`` (nan and
    infinities included), ``bool``, ``str``, ``None``, dtypes (``rc.float32``) and
    devices. Dict keys may be ``str``, ``int``, ``float``, ``bool``, ``None`` or
    tuples of these. NumPy scalars are saved as the Python number they hold.
    Anything else (a set, a lambda, an object of your own class, a dict
    subclass other than OrderedDict) is refused with a ``TypeError`` naming where
    it sits, e.g. ``obj['state'][2]: cannot save object of type set``.

File format
    A plain safetensors file (https://github.com/huggingface/safetensors): an
    8-byte little-endian header length, a JSON header, then the raw tensor data.

    * Every tensor is stored under its own name, made from its path in the saved
      object joined with ``.``: a ``state_dict`` {"fc.weight": w} is stored as the
      tensor ``fc.weight``, so other safetensors readers (``safetensors.torch.
      load_file``) see the same names; ``{"state": {0: {"exp_avg": t}}}`` stores
      ``state.0.exp_avg``; a lone tensor is ``tensor``. A name already taken gets
      a ``#2``, ``#3``, ... suffix. Tensors are written as their values, C-ordered:
      a non-contiguous view saves the elements it shows, and two tensors sharing
      memory are saved (and loaded) as two independent tensors.
    * The header's ``__metadata__`` holds three strings::

          {"format": "rtxcore", "version": "1", "structure": "<JSON>"}

      ``structure`` describes the saved object as JSON, node by node:

      ========================================  ===================================
      ``null``, ``true``, ``3``, ``2.5``, ``"s"``  None, bools, ints, finite floats, str
      ``{"float": "nan" | "inf" | "-inf"}``      a non-finite float
      ``{"tensor": NAME, "device": "cpu"}``      a tensor (plus ``"requires_grad":
                                                 true`` and ``"parameter": true``
                                                 when they apply)
      ``{"list": [NODE, ...]}``                  a list
      ``{"tuple": [NODE, ...]}``                 a tuple
      ``{"dict": [[KEY, NODE], ...]}``           a dict, keys as nodes, in order
      ``{"odict": [[KEY, NODE], ...]}``          an OrderedDict
      ``{"dtype": "float32"}``                   an rtxcore dtype
      ``{"device": "cpu"}``                      an rtxcore device
      ========================================  ===================================

    Saving the same object twice writes the same bytes.

Loading
    Tensors come back on the device they were saved from (the ``device`` of each
    tensor node), as in PyTorch. ``map_location`` changes that: a device (string
    or ``rtxcore.device``) puts every tensor there; a dict ``{"saved": "new"}``
    remaps the devices it names; a callable ``f(tensor_on_cpu, saved_device_str)``
    returns the tensor to use, a device to move it to, or ``None`` for the default.
    A tensor saved on a device that isn't available here raises a RuntimeError
    naming the device and suggesting ``map_location="cpu"``.

    A safetensors file written by another program (no rtxcore metadata) loads as
    a dict name -> tensor on cpu (or per ``map_location``). An empty, truncated,
    corrupt or foreign file raises a ``ValueError`` naming the file and what is
    wrong with it; a dtype rtxcore lacks (bfloat16, uint32, ...) is reported the
    same way.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["FORMAT", "VERSION", "load", "save"]

FORMAT = "rtxcore"
VERSION = "1"

# safetensors dtype codes <-> rtxcore dtype names / numpy dtypes
_ST_TO_NUMPY = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "I32": np.int32,
    "I64": np.int64, "F16": np.float16, "F32": np.float32, "F64": np.float64,
}

_MAX_DEPTH = 200


# -- saving -----------------------------------------------------------------------------


def _key_repr(k: Any) -> str:
    return repr(k)


class _Saver:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._active: set[int] = set()

    def _name(self, parts: list[str]) -> str:
        base = ".".join(parts) if parts else "tensor"
        # safetensors names are UTF-8: escape what isn't (lone surrogates)
        base = base.encode("utf-8", "backslashreplace").decode("utf-8")
        name, n = base, 1
        while name in self.arrays or name == "__metadata__":
            n += 1
            name = f"{base}#{n}"
        return name

    def tensor(self, x: Any, parts: list[str]) -> dict[str, Any]:
        pmod = sys.modules.get("rtxcore.nn.parameter")  # no Parameter can exist before it loads
        arr = x.detach().numpy()  # on cpu a view of x's memory, elsewhere a host copy
        if not arr.flags.c_contiguous:
            arr = np.array(arr, order="C")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        name = self._name(parts)
        self.arrays[name] = arr
        node: dict[str, Any] = {"tensor": name, "device": str(x.device)}
        if x.requires_grad:
            node["requires_grad"] = True
        if pmod is not None and isinstance(x, pmod.Parameter):
            node["parameter"] = True
        return node

    def key(self, k: Any, where: str) -> Any:
        t = type(k)
        if k is None or t is bool or t is int or t is str:
            return k
        if t is float:
            return k if math.isfinite(k) else {"float": repr(k)}
        if isinstance(k, np.generic) and k.dtype.kind in "biuf":
            return self.key(k.item(), where)
        if t is tuple:
            return {"tuple": [self.key(v, where) for v in k]}
        raise TypeError(f"{where}: cannot save a dict key of type {t.__name__} ({k!r}); "
                        "keys may be str, int, float, bool, None or tuples of these")

    def node(self, obj: Any, where: str, parts: list[str], depth: int = 0) -> Any:
        from .device import Device
        from .dispatch.types import DType
        from .tensor import Tensor

        if depth > _MAX_DEPTH:
            raise ValueError(f"{where}: nested more than {_MAX_DEPTH} levels deep")
        t = type(obj)
        if obj is None or t is bool or t is int or t is str:
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {"float": repr(obj)}
        if isinstance(obj, Tensor):
            return self.tensor(obj, parts)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return self.node(obj.item(), where, parts, depth)
        if t is DType:
            return {"dtype": obj.name}
        if t is Device:
            return {"device": str(obj)}
        if t in (dict, OrderedDict, list, tuple):
            if id(obj) in self._active:
                raise ValueError(f"{where}: the object contains itself; cannot save a cycle")
            self._active.add(id(obj))
            try:
                if t is list or t is tuple:
                    items = [self.node(v, f"{where}[{i}]", parts + [str(i)], depth + 1)
                             for i, v in enumerate(obj)]
                    return {"list" if t is list else "tuple": items}
                pairs = []
                for k, v in obj.items():
                    sub = f"{where}[{_key_repr(k)}]"
                    pairs.append([self.key(k, sub), self.node(v, sub, parts + [str(k)], depth + 1)])
                return {"dict" if t is dict else "odict": pairs}
            finally:
                self._active.discard(id(obj))
        raise TypeError(
            f"{where}: cannot save object of type {t.__qualname__}; rtxcore.save stores tensors, numbers, "
            "str, None, dtypes and devices in dicts, OrderedDicts, lists and tuples (no pickle)"
        )


def _encode(obj: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    s = _Saver()
    structure = s.node(obj, "obj", [])
    meta = {"format": FORMAT, "version": VERSION,
            "structure": json.dumps(structure, separators=(",", ":"), allow_nan=False)}
    return s.arrays, meta


def _canonical(data: bytes, meta: dict[str, str]) -> bytes:
    """``data`` with its metadata entries in our order, so that saving the same
    object always writes the same bytes (safetensors writes them in hash order)."""
    n = int.from_bytes(data[:8], "little")
    header = data[8:8 + n]
    try:
        written = json.loads(header)["__metadata__"]
    except (ValueError, KeyError):
        return data

    def dump(d: dict[str, str]) -> bytes:
        return json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    found, wanted = dump(written), dump(meta)
    if len(found) != len(wanted) or header.count(found) != 1:
        return data  # not the text we expected: leave the file as safetensors wrote it
    return data[:8] + header.replace(found, wanted) + data[8 + n:]


def save(obj: Any, f: Any) -> None:
    """Save ``obj`` (a tensor or nested containers of tensors and plain values) to
    ``f``, a path (str or ``os.PathLike``) or a binary file object, as safetensors.
    See the module docstring for what can be saved and the format."""
    from safetensors.numpy import save as st_save

    arrays, meta = _encode(obj)
    data = _canonical(st_save(arrays, metadata=meta), meta)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    elif hasattr(f, "write"):
        f.write(data)
    else:
        raise TypeError(f"save() needs a path or a binary file object to write to, got {type(f).__name__}")


# -- loading -----------------------------------------------------------------------------


class _Corrupt(ValueError):
    pass


def _norm_loc(loc: Any) -> str:
    """A device given as a string or Device, as ``type:index`` (for comparing)."""
    s = str(loc).strip()
    typ, sep, idx = s.partition(":")
    return f"{typ}:{idx if sep else '0'}"


class _Loader:
    def __init__(self, name: str, arrays: dict[str, np.ndarray], map_location: Any) -> None:
        self.name = name
        self.arrays = arrays
        self.map_location = map_location
        self._devices: dict[str, Any] = {}
        if isinstance(map_location, dict):
            self._remap = {_norm_loc(k): v for k, v in map_location.items()}

    def _device(self, loc: Any, saved: str, key: str) -> Any:
        from .device import Device

        s = str(loc)
        dev = self._devices.get(s)
        if dev is not None:
            return dev
        try:
            dev = Device(loc) if not isinstance(loc, Device) else loc
            dev.supports("float32")  # binds the backend: raises if not available
        except RuntimeError as exc:
            raise RuntimeError(
                f"can't load {self.name}: tensor {key!r} was saved on device {saved!r} and would "
                f"load on {s!r}, which is not available here ({exc}). Pass map_location='cpu' "
                "(or another available device) to rtxcore.load to load it elsewhere."
            ) from None
        self._devices[s] = dev
        return dev

    def tensor(self, key: str, saved: str, requires_grad: bool = False, parameter: bool = False) -> Any:
        from .ops.creation import from_numpy, tensor
        from .tensor import Tensor

        arr = self.arrays.get(key) if isinstance(key, str) else None
        if arr is None:
            raise _Corrupt(f"the structure refers to a tensor {key!r} that the file doesn't hold")
        ml = self.map_location
        target: Any = saved
        if ml is None:
            pass
        elif isinstance(ml, dict):
            target = self._remap.get(_norm_loc(saved), saved)
        elif callable(ml):
            got = ml(from_numpy(arr), saved)
            if isinstance(got, Tensor):
                return self._finish(got, requires_grad, parameter)
            if got is not None:
                target = got
        else:
            target = ml
        dev = self._device(target, saved, key)
        dt = arr.dtype.name if arr.dtype != np.bool_ else "bool"
        if not dev.supports(dt):
            raise RuntimeError(
                f"can't load {self.name}: tensor {key!r} has dtype {dt}, which device {dev} "
                "doesn't support; pass a map_location that puts it on a device that does "
                "(e.g. map_location='cpu')"
            )
        t = from_numpy(arr) if dev.type == "cpu" and dev.index == 0 else tensor(arr, device=dev)
        return self._finish(t, requires_grad, parameter)

    @staticmethod
    def _finish(t: Any, requires_grad: bool, parameter: bool) -> Any:
        if parameter:
            from .nn.parameter import Parameter

            return Parameter(t, requires_grad=bool(requires_grad) and t.is_floating_point())
        if requires_grad and t.is_floating_point():
            t = t.detach().requires_grad_()
        return t

    def key(self, node: Any) -> Any:
        if node is None or type(node) in (bool, int, str, float):
            return node
        if type(node) is dict and len(node) == 1:
            (kind, v), = node.items()
            if kind == "float":
                return _nonfinite(v)
            if kind == "tuple" and type(v) is list:
                return tuple(self.key(x) for x in v)
        raise _Corrupt(f"bad dict key node {node!r:.80}")

    def node(self, node: Any, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise _Corrupt(f"the structure is nested more than {_MAX_DEPTH} levels deep")
        if node is None or type(node) in (bool, int, str, float):
            return node
        if type(node) is not dict:
            raise _Corrupt(f"bad node {node!r:.80}")
        if "tensor" in node:
            saved = node.get("device", "cpu")
            if type(saved) is not str:
                raise _Corrupt(f"bad device in tensor node {node!r:.80}")
            return self.tensor(node["tensor"], saved, node.get("requires_grad") is True,
                               node.get("parameter") is True)
        if len(node) != 1:
            raise _Corrupt(f"bad node {node!r:.80}")
        (kind, v), = node.items()
        if kind in ("list", "tuple") and type(v) is list:
            items = [self.node(x, depth + 1) for x in v]
            return items if kind == "list" else tuple(items)
        if kind in ("dict", "odict") and type(v) is list:
            out: Any = {} if kind == "dict" else OrderedDict()
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise _Corrupt(f"bad dict entry {pair!r:.80}")
                out[self.key(pair[0])] = self.node(pair[1], depth + 1)
            return out
        if kind == "float":
            return _nonfinite(v)
        if kind == "dtype":
            from . import dtype as D

            if type(v) is not str or v not in D.BY_NAME:
                raise _Corrupt(f"unknown dtype {v!r:.40}")
            return D.BY_NAME[v]
        if kind == "device" and type(v) is str:
            from .device import Device

            try:
                return Device(v)
            except RuntimeError as exc:
                raise RuntimeError(f"can't load {self.name}: it holds the device {v!r}: {exc}") from None
        raise _Corrupt(f"bad node {node!r:.80}")


def _nonfinite(v: Any) -> float:
    if v not in ("nan", "inf", "-inf"):
        raise _Corrupt(f"bad float {v!r:.40}")
    return float(v)


def _read(f: Any) -> tuple[bytes, str]:
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read(), repr(os.fspath(f))
    if hasattr(f, "read"):
        data = f.read()
        name = getattr(f, "name", None)
        label = repr(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__} object>"
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load() needs a binary file object; {label}.read() returned "
                            f"{type(data).__name__}")
        return bytes(data), label
    raise TypeError(f"load() needs a path or a binary file object to read, got {type(f).__name__}")


def _parse(data: bytes, name: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of a safetensors file, or a ValueError saying why not."""
    from safetensors import deserialize

    def bad(what: str) -> ValueError:
        return ValueError(f"can't load {name}: {what}")

    size = len(data)
    if size == 0:
        raise bad("the file is empty")
    if size < 8:
        raise bad(f"the file is only {size} bytes long: truncated, or not a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if n > size - 8 or n < 2:
        raise bad(f"it is not a safetensors file, or it is truncated: its first 8 bytes give a "
                  f"header of {n} bytes, but the file has {size - 8} bytes after them")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise bad(f"its header is not valid JSON ({exc}); the file is corrupt or not a "
                  "safetensors file") from None
    if type(header) is not dict:
        raise bad("its header is not a JSON object; the file is corrupt or not a safetensors file")
    try:
        raw = deserialize(data)
    except Exception as exc:  # noqa: BLE001  (SafetensorError, or whatever else Rust raises)
        raise bad(f"the file is corrupt or truncated ({exc})") from None
    arrays: dict[str, np.ndarray] = {}
    try:
        for key, info in raw:
            code = info["dtype"]
            npdt = _ST_TO_NUMPY.get(code)
            if npdt is None:
                raise bad(f"tensor {key!r} has dtype {code}, which rtxcore doesn't support "
                          f"(supported: {', '.join(_ST_TO_NUMPY)})")
            arrays[key] = np.frombuffer(info["data"], dtype=npdt).reshape(info["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        if str(exc).startswith("can't load"):
            raise
        raise bad(f"the file is corrupt ({exc})") from None
    return header, arrays


def load(f: Any, map_location: Any = None, weights_only: Any = None) -> Any:
    """Load what ``save`` wrote to ``f`` (a path or a binary file object).

    ``map_location``: None (each tensor on the device it was saved from), a device
    for all tensors, a dict ``{saved_device: device}``, or a callable
    ``f(cpu_tensor, saved_device_str) -> tensor | device | None``. ``weights_only``
    is accepted for PyTorch compatibility and changes nothing: loading never runs
    code. A safetensors file without rtxcore metadata loads as a dict of tensors.
    """
    del weights_only
    data, name = _read(f)
    header, arrays = _parse(data, name)
    meta = header.get("__metadata__")
    if not (type(meta) is dict and meta.get("format") == FORMAT):
        # a plain safetensors file from another program: its tensors by name, in file order
        loader = _Loader(name, arrays, map_location)
        return {k: loader.tensor(k, "cpu") for k in header if k != "__metadata__" and k in arrays}
    version = meta.get("version")
    if version != VERSION:
        raise ValueError(f"can't load {name}: it is in rtxcore format version {version!r}, and this "
                         f"rtxcore reads version {VERSION!r} (written by a newer rtxcore?)")
    try:
        structure = json.loads(meta["structure"])
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"can't load {name}: its rtxcore metadata is corrupt "
                         f"({type(exc).__name__}: {exc})") from None
    loader = _Loader(name, arrays, map_location)
    try:
        return loader.node(structure)
    except _Corrupt as exc:
        raise ValueError(f"can't load {name}: the file is corrupt: {exc}") from None
    except RecursionError:
        raise ValueError(f"can't load {name}: the file is corrupt: its structure is nested "
                         "too deeply") from None

