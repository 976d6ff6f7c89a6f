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
    The ``safetensors`` package writes and parses it; rtxcore adds the metadata
    below and checks what the package doesn't (the checksums, the metadata,
    names given twice, files in other formats).

    * Every tensor is stored under its own name, made from its path in the saved
      object joined with ``.``: a ``state_dict`` {"fc.weight": w} is stored as the
      tensor ``fc.weight``, so other safetensors readers (``safetensors.torch.
      load_file``) see the same names; ``{"state": {0: {"exp_avg": t}}}`` stores
      ``state.0.exp_avg``; a lone tensor is ``tensor``. A name already taken gets
      a ``#2``, ``#3``, ... suffix. Tensors are written as their values, C-ordered:
      a non-contiguous view saves the elements it shows, and two tensors sharing
      memory are saved (and loaded) as two independent tensors.
    * The header's ``__metadata__`` holds five strings::

          {"format": "rtxcore", "version": "1", "structure": "<JSON>",
           "tensor_crc32": "<hex>,<hex>,...", "header_crc32": "<hex>"}

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

    * ``tensor_crc32`` lists the CRC-32 of each tensor's bytes (8 hex digits), in
      the order their data lies in the file; ``header_crc32`` is the CRC-32 of the
      header without that entry, as JSON with sorted keys, no spaces and ASCII
      escapes (``json.dumps(h, sort_keys=True, separators=(",", ":"))``), so it
      doesn't depend on how the header is spaced. Files from older rtxcore
      versions have neither, and load unchecked.
    * The layout is the safetensors package's: tensors ordered by itemsize
      (widest first), then by name, so each one's data is aligned; the header
      padded with spaces to a multiple of 8 bytes. rtxcore writes the header's
      ``__metadata__`` in the order above (the package writes it in hash order).

    Saving the same object twice writes the same bytes. Saving to a path writes a
    temporary file in the same folder, syncs it to disk and renames it over the
    target, so a save that fails (disk full, KeyboardInterrupt) or is killed
    leaves the previous file intact (a killed one may leave a ``.NAME.*.tmp``
    file behind); the file keeps the mode of the one it replaces.

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
    same way. In particular:

    * the checksums are verified: a changed header, or a tensor whose bytes
      changed, is refused naming it (``verify=False`` loads such a file anyway);
    * tensors' byte ranges must cover the data exactly, without overlaps (which
      would alias two tensors) or holes, as the safetensors specification says:
      the package refuses such files, and rtxcore names the tensors involved;
    * a tensor name given twice in the header is refused (the package would
      keep the last);
    * rtxcore metadata whose ``format`` isn't exactly ``"rtxcore"`` is refused
      rather than loaded as a foreign file;
    * PyTorch checkpoints (zip or legacy pickle), NumPy ``.npy``/``.npz`` files and
      pickles are recognized and named, with how to convert them, before the
      package parses anything.

    Each tensor gets memory of its own: from a path, ``safetensors.safe_open``
    reads it with pread(2) (a file cut short while it is read is a ValueError,
    where a memory map would kill the process with SIGBUS); from a file object,
    which is read whole, ``safetensors.deserialize`` copies it out of the bytes.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import secrets
import stat
import sys
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable
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

_NUMPY_TO_ST = {np.dtype(v): k for k, v in _ST_TO_NUMPY.items()}

_MAX_DEPTH = 200
_MAX_HEADER = 100_000_000  # the safetensors package refuses longer headers too

# __metadata__ checksums: crc32 of the header (as canonical JSON, without this
# entry) and of each tensor's bytes (comma-separated, in the order of the data)
_HEADER_CRC = "header_crc32"
_DATA_CRC = "tensor_crc32"
_OWN_KEYS = frozenset({"structure", _HEADER_CRC, _DATA_CRC})  # only rtxcore files have these
_KNOWN_KEYS = frozenset({"format", "version"}) | _OWN_KEYS

# first bytes of files that aren't safetensors: NumPy's .npy, and torch.save's
# legacy format (a protocol-2 pickle of the long 0x1950a86a20f9469cfc6c)
_NPY_MAGIC = b"\x93NUMPY"
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


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


def _header_crc(header: dict[str, Any], name: str = "") -> str:
    """The crc32 of ``header`` without its ``header_crc32`` entry, as canonical
    JSON: two headers that parse to the same JSON have the same checksum."""
    meta = header.get("__metadata__")
    if type(meta) is dict and _HEADER_CRC in meta:
        header = {**header, "__metadata__": {k: v for k, v in meta.items() if k != _HEADER_CRC}}
    try:
        text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (RecursionError, ValueError):
        raise ValueError(f"can't load {name}: the file is corrupt: its header is nested too deeply") from None
    return f"{zlib.crc32(text.encode('ascii')):08x}"


def _serialize(arrays: dict[str, np.ndarray], meta: dict[str, str]) -> tuple[bytes, memoryview]:
    """The file for ``arrays`` as its header (with the checksums added to ``meta``)
    and its data section.

    The safetensors package lays the file out and writes it (widest dtypes first,
    then by name, so every tensor's data is aligned; the header padded to 8
    bytes). The checksums, of the bytes it wrote, depend on that layout, so the
    package first writes zeros of the same width in their place; rtxcore then
    writes the header again with them filled in and its metadata in a fixed
    order (the package writes it in hash order, which would change the bytes from
    one save to the next)."""
    from safetensors import TensorSpec, serialize

    specs = {}
    for name, arr in arrays.items():
        if arr.dtype not in _NUMPY_TO_ST:
            raise TypeError(f"save(): tensor {name!r} has dtype {arr.dtype}, which safetensors "
                            "can't store")
        specs[name] = TensorSpec(dtype=arr.dtype.name, shape=arr.shape, data_ptr=arr.ctypes.data,
                                 data_len=arr.nbytes)
    blank = {**meta, _DATA_CRC: ",".join(["0" * 8] * len(arrays)), _HEADER_CRC: "0" * 8}
    data = serialize(specs, blank)  # ``arrays`` keeps the memory that ``specs`` points to alive
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    ranges = sorted(v["data_offsets"] for k, v in header.items() if k != "__metadata__")
    meta[_DATA_CRC] = ",".join(f"{zlib.crc32(body[b:e]):08x}" for b, e in ranges)
    header["__metadata__"] = meta
    meta[_HEADER_CRC] = _header_crc(header)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(text) > n:  # the same JSON with fixed-width values in place of the zeros: never longer
        raise RuntimeError("save(): the safetensors package wrote a header rtxcore can't "
                           f"complete: {data[8:8 + n]!r:.200}")
    return data[:8] + text + b" " * (n - len(text)), body


def _write_atomic(path: str | os.PathLike, head: bytes, body: memoryview) -> None:
    """Write the file to a temporary file next to ``path``, fsync it, then rename
    it over ``path``: the old file stays whole until the new one is complete, and
    a failure (disk full, KeyboardInterrupt, ...) leaves it untouched."""
    target = os.path.realpath(path)  # through a symlink, as open() would write
    folder, base = os.path.split(target)
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)  # 0o666 less the umask, as for a new file
            break
        except FileExistsError:
            continue
        except OSError as exc:  # no such folder, no permission: name the file asked for
            raise type(exc)(exc.errno, exc.strerror, os.fspath(path)) from None
    try:
        with open(fd, "wb", closefd=True) as fh:
            if mode is not None:  # keep the mode of the file it replaces
                with contextlib.suppress(OSError):
                    os.chmod(fd if os.chmod in os.supports_fd else tmp, mode)
            fh.write(head)
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if os.name == "posix":  # make the rename itself durable
        with contextlib.suppress(OSError):
            dfd = os.open(folder or ".", os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)


def save(obj: Any, f: Any) -> None:
    """Save ``obj`` (a tensor or nested containers of tensors and plain values) to
    ``f``, a path (str or ``os.PathLike``) or a binary file object, as safetensors.

    A path is written atomically: to a temporary file in the same folder, synced to
    disk, then renamed over ``f``, so a save that fails or is killed leaves the old
    file as it was. See the module docstring for what can be saved and the format."""
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save() needs a path or a binary file object to write to, got {type(f).__name__}")
    arrays, meta = _encode(obj)
    head, body = _serialize(arrays, meta)
    if isinstance(f, (str, os.PathLike)):
        _write_atomic(f, head, body)
    else:
        f.write(head)
        f.write(body)


# -- loading -----------------------------------------------------------------------------


class _Corrupt(ValueError):
    pass


class _Unsupported(ValueError):
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


def _open(f: Any, stack: contextlib.ExitStack) -> tuple[Any, int, str, str | bytes]:
    """A seekable binary stream over ``f`` (to read its header), its size, the file's
    name for messages, and what the safetensors package reads the tensors from: the
    path of a file, or the bytes read from a file object."""
    if isinstance(f, (str, os.PathLike)):
        fh = stack.enter_context(open(f, "rb"))
        return fh, os.fstat(fh.fileno()).st_size, repr(os.fspath(f)), os.fsdecode(f)
    if hasattr(f, "read"):
        data = f.read()
        name = getattr(f, "name", None)
        label = repr(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__} object>"
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load() needs a binary file object; {label}.read() returned "
                            f"{type(data).__name__}")
        data = bytes(data)  # no copy when it is bytes already
        return io.BytesIO(data), len(data), label, data
    raise TypeError(f"load() needs a path or a binary file object to read, got {type(f).__name__}")


_PT_ADVICE = ("rtxcore never unpickles (loading a pickle can run code). If you trust the file, "
              "load it with torch.load and convert it: rc.save({k: rc.tensor(v.numpy()) for k, v "
              "in torch.load(path).items()}, 'model.safetensors'), or write it with "
              "safetensors.torch.save_file")


def _what_is(stream: Any, head: bytes) -> str | None:
    """What a file that is not safetensors is, with what to do about it, when its
    first bytes tell (PyTorch, NumPy, pickle, zip); None when they don't."""
    if head.startswith(_NPY_MAGIC):
        return ("it is a NumPy .npy file, not a safetensors file; load it with "
                "rc.from_numpy(np.load(path))")
    if head.startswith(_TORCH_LEGACY_MAGIC):
        return ("it is a PyTorch checkpoint in torch.save's legacy pickle format, not a "
                f"safetensors file; {_PT_ADVICE}")
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return ("it is a Python pickle, not a safetensors file; rtxcore never unpickles "
                "(loading a pickle can run code)")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        try:
            stream.seek(0)
            names = zipfile.ZipFile(stream).namelist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return "it is a zip archive (a damaged one), not a safetensors file"
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return ("it is a PyTorch checkpoint (torch.save's zip format), not a safetensors "
                    f"file; {_PT_ADVICE}")
        if names and all(n.endswith(".npy") for n in names):
            return ("it is a NumPy .npz archive, not a safetensors file; load it with "
                    "{k: rc.from_numpy(v) for k, v in np.load(path).items()}")
        return "it is a zip archive, not a safetensors file"
    return None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Corrupt(f"its header names {k!r:.80} twice")
        out[k] = v
    return out


def _near_format(value: str) -> bool:
    """Whether a "format" value is rtxcore's with a few characters changed."""
    if value.lower() == FORMAT:
        return True
    return len(value) == len(FORMAT) and sum(a != b for a, b in zip(value, FORMAT)) <= 2


def _explain(header: dict[str, Any], data_size: int) -> None:
    """Raise _Corrupt or _Unsupported saying which tensor of ``header`` the
    safetensors package refused, and why: a malformed entry, a dtype rtxcore
    lacks, a shape that doesn't match its bytes, or byte ranges that don't cover
    the data section exactly (overlapping ranges would alias two tensors; holes
    and trailing bytes are refused by the specification). Returns if it finds
    none of these."""
    ranges = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if type(info) is not dict:
            raise _Corrupt(f"the entry of tensor {name!r:.80} is not a JSON object")
        code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if type(code) is not str:
            raise _Corrupt(f"tensor {name!r:.80} has no dtype")
        if (type(shape) is not list or any(type(d) is not int or d < 0 for d in shape)
                or type(offsets) is not list or len(offsets) != 2
                or any(type(o) is not int for o in offsets)):
            raise _Corrupt(f"tensor {name!r:.80} has a bad shape or data_offsets")
        if code not in _ST_TO_NUMPY:
            raise _Unsupported(_unsupported(name, code))
        begin, end = offsets
        if not 0 <= begin <= end:
            raise _Corrupt(f"tensor {name!r:.80} has data_offsets [{begin}, {end}]")
        if end > data_size:
            raise _Corrupt(f"tensor {name!r:.80} lies outside the data section (its bytes "
                           f"[{begin}, {end}) of {data_size}): the file is truncated or its header "
                           "is corrupt")
        count = math.prod(shape)
        if count * np.dtype(_ST_TO_NUMPY[code]).itemsize != end - begin:
            raise _Corrupt(f"tensor {name!r:.80} has shape {shape} of {code} ({count} "
                           f"elements) but {end - begin} bytes")
        ranges.append((begin, end, name))
    ranges.sort()
    pos, prev = 0, None
    for begin, end, name in ranges:
        if begin < pos:
            assert prev is not None
            raise _Corrupt(f"tensors {prev[2]!r:.80} and {name!r:.80} claim the same bytes "
                           f"([{prev[0]}, {prev[1]}) and [{begin}, {end}))")
        if begin > pos:
            raise _Corrupt(f"bytes [{pos}, {begin}) of the data section belong to no tensor "
                           f"(before tensor {name!r:.80})")
        pos, prev = end, (begin, end, name)
    if pos != data_size:
        raise _Corrupt(f"the last {data_size - pos} bytes of the file belong to no tensor "
                       "(trailing data, or a corrupt header)")


def _unsupported(name: str, code: str) -> str:
    return (f"tensor {name!r} has dtype {code:.20}, which rtxcore doesn't support "
            f"(supported: {', '.join(_ST_TO_NUMPY)})")


def _tensors(source: str | bytes, header: dict[str, Any],
             stack: contextlib.ExitStack) -> list[tuple[str, str, Callable[[], np.ndarray]]]:
    """The file's tensors as the safetensors package parses them, in the order of
    their data: (name, dtype code, a function returning the tensor's array in
    memory of its own). The package checks the header against the file: every
    entry well formed, shapes matching byte counts, byte ranges covering the data
    section exactly, without overlaps; it raises SafetensorError otherwise.

    A path is opened with ``safe_open``, which reads each tensor with pread(2)
    (a file that shrinks meanwhile is an error, where a memory map would crash
    the process with SIGBUS); bytes are parsed with ``deserialize``."""
    from safetensors import deserialize, safe_open

    if isinstance(source, str):
        st = stack.enter_context(safe_open(source, framework="numpy", backend="pread"))
        if (st.metadata() or {}) != header.get("__metadata__", {}):  # opened twice: the same file?
            raise _Corrupt("it changed while it was read (replaced by another save?)")
        return [(k, st.get_slice(k).get_dtype(), functools.partial(st.get_tensor, k))
                for k in st.offset_keys()]

    def array(info: dict[str, Any]) -> np.ndarray:  # a view of the bytearray made for it
        return np.frombuffer(info["data"], _ST_TO_NUMPY[info["dtype"]]).reshape(info["shape"])

    parsed = dict(deserialize(source))  # in hash order: sort by the (validated) offsets
    order = sorted(parsed, key=lambda k: header[k]["data_offsets"] if k in header else [-1, -1])
    return [(k, parsed[k]["dtype"], functools.partial(array, parsed[k])) for k in order]


def _read_arrays(tensors: list[tuple[str, str, Callable[[], np.ndarray]]], crcs: list[str] | None,
                 name: str) -> dict[str, np.ndarray]:
    """Each tensor's array, checked against ``crcs`` (one per tensor, in data
    order) when given: the CRC-32 of the bytes the safetensors package returned."""
    from safetensors import SafetensorError

    for key, code, _ in tensors:
        if code not in _ST_TO_NUMPY:
            raise _Unsupported(_unsupported(key, code))
    if crcs is not None and len(crcs) != len(tensors):
        raise _Corrupt(f"it holds {len(tensors)} tensors and {len(crcs)} checksums")
    arrays: dict[str, np.ndarray] = {}
    for i, (key, _, get) in enumerate(tensors):
        try:
            arr = get()
        except SafetensorError as exc:
            raise _Corrupt(f"it ends inside tensor {key!r:.80}: the file is truncated (or "
                           f"changed while it was read): {exc}") from None
        if crcs is not None and f"{zlib.crc32(arr):08x}" != crcs[i]:
            raise ValueError(
                f"can't load {name}: the data of tensor {key!r} changed after it was saved (its "
                f"crc32 checksum doesn't match): the file is corrupt. rc.load(..., verify=False) "
                "loads it anyway")
        arrays[key] = arr
    return arrays


def _parse(stream: Any, size: int, name: str, verify: bool, source: str | bytes,
           stack: contextlib.ExitStack) -> tuple[dict[str, Any] | None, dict[str, np.ndarray]]:
    """The rtxcore metadata (None for a foreign safetensors file) and the arrays of
    the file, or a ValueError saying why not.

    rtxcore reads the header itself first: to recognize files in other formats
    before parsing them, and to check the header's checksum and its rtxcore
    metadata, which the safetensors package doesn't (nor does it refuse a name
    given twice). The package then parses and validates the file and reads the
    tensors; rtxcore checks each one's checksum."""

    def bad(what: str) -> ValueError:
        return ValueError(f"can't load {name}: {what}")

    if size == 0:
        raise bad("the file is empty")
    head = stream.read(16)
    n = int.from_bytes(head[:8], "little")
    if size < 8 or n > size - 8 or n < 2 or n > _MAX_HEADER:
        what = _what_is(stream, head)
        if what is not None:
            raise bad(what)
        if size < 8:
            raise bad(f"the file is only {size} bytes long: truncated, or not a safetensors file")
        if n > _MAX_HEADER and n <= size - 8:
            raise bad(f"it is not a safetensors file, or it is corrupt: its first 8 bytes give a "
                      f"header of {n} bytes, more than the {_MAX_HEADER} safetensors allows")
        raise bad(f"it is not a safetensors file, or it is truncated: its first 8 bytes give a "
                  f"header of {n} bytes, but the file has {size - 8} bytes after them")
    stream.seek(8)
    text = stream.read(n)
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except _Corrupt as exc:
        raise bad(f"the file is corrupt: {exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        what = _what_is(stream, head)
        raise bad(what or f"its header is not valid JSON ({exc}); the file is corrupt or not a "
                  "safetensors file") from None
    if type(header) is not dict:
        raise bad("its header is not a JSON object; the file is corrupt or not a safetensors file")
    meta = header.get("__metadata__", {})
    if type(meta) is not dict or any(type(v) is not str for v in meta.values()):
        raise bad("the file is corrupt: its __metadata__ is not a JSON object of strings")
    fmt = meta.get("format")
    ours = fmt == FORMAT
    if not ours and (fmt is not None and (type(fmt) is not str or _near_format(fmt))
                     or any(k in meta for k in _OWN_KEYS)):
        said = "missing" if fmt is None else f"{fmt!r:.40}"
        raise bad(f"the file is corrupt: its metadata key 'format' is {said}, not {FORMAT!r}, "
                  "though the rest of its metadata is rtxcore's")
    crcs: list[str] | None = None
    if ours:
        have = [k in meta for k in (_HEADER_CRC, _DATA_CRC)]
        if any(have) and not all(have):
            raise bad("the file is corrupt: its metadata has one of the checksums "
                      f"{_HEADER_CRC!r} and {_DATA_CRC!r} without the other")
        if all(have) and verify and _header_crc(header, name) != meta[_HEADER_CRC]:
            raise bad("the file is corrupt: its header changed after it was saved (its crc32 "
                      "checksum doesn't match)")
        version = meta.get("version")
        if version != VERSION:
            raise bad(f"it is in rtxcore format version {version!r:.40}, and this rtxcore reads "
                      f"version {VERSION!r} (written by a newer rtxcore?)")
        unknown = sorted(set(meta) - _KNOWN_KEYS)
        if unknown:
            raise bad(f"the file is corrupt: its rtxcore metadata has the unknown key {unknown[0]!r:.40}")
        if all(have) and verify:
            crcs = meta[_DATA_CRC].split(",") if meta[_DATA_CRC] else []
    from safetensors import SafetensorError

    try:
        try:
            tensors = _tensors(source, header, stack)
        except SafetensorError as exc:
            _explain(header, size - 8 - n)  # raises, naming the tensors, when it can
            raise _Corrupt(f"the safetensors package refuses it ({exc})") from None
        if sorted(k for k, _, _ in tensors) != sorted(k for k in header if k != "__metadata__"):
            raise _Corrupt("it changed while it was read (replaced by another save?)")
        arrays = _read_arrays(tensors, crcs, name)
    except _Corrupt as exc:
        raise bad(f"the file is corrupt: {exc}") from None
    except _Unsupported as exc:
        raise bad(str(exc)) from None
    if not ours:  # a foreign file's tensors in the order its header lists them
        arrays = {k: arrays[k] for k in header if k != "__metadata__"}
    return (meta if ours else None), arrays


def load(f: Any, map_location: Any = None, weights_only: Any = None, *, verify: bool = True) -> Any:
    """Load what ``save`` wrote to ``f`` (a path or a binary file object).

    ``map_location``: None (each tensor on the device it was saved from), a device
    for all tensors, a dict ``{saved_device: device}``, or a callable
    ``f(cpu_tensor, saved_device_str) -> tensor | device | None``. ``weights_only``
    is accepted for PyTorch compatibility and changes nothing: loading never runs
    code. A safetensors file without rtxcore metadata loads as a dict of tensors.
    ``verify=False`` skips the checksums, to load a damaged file as it is.
    """
    del weights_only
    with contextlib.ExitStack() as stack:
        stream, size, name, source = _open(f, stack)
        meta, arrays = _parse(stream, size, name, verify, source, stack)
    if meta is None:
        # a plain safetensors file from another program: its tensors by name
        loader = _Loader(name, arrays, map_location)
        return {k: loader.tensor(k, "cpu") for k in arrays}
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
