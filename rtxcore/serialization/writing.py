"""Writing a file: the saved object walked into its tensors (each named from
its path) and its structure, the safetensors package's layout with rtxcore's
checksums and metadata filled in, and the write to a path made atomic.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import stat
import sys
import zlib
from collections import OrderedDict
from typing import Any

import numpy as np

from .header import _DATA_CRC, _HEADER_CRC, _MAX_DEPTH, _NUMPY_TO_ST, FORMAT, VERSION, _header_crc


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

    def ndarray(self, a: np.ndarray, where: str, parts: list[str]) -> dict[str, Any]:
        """A NumPy array, stored as a tensor of the file tagged to load back as an
        array (data, not code: no pickle)."""
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        if a.dtype not in _NUMPY_TO_ST:
            raise TypeError(f"{where}: cannot save a NumPy array of dtype {a.dtype}; "
                            f"rtxcore.save stores arrays of bool, int and float dtypes")
        name = self._name(parts)
        self.arrays[name] = np.ascontiguousarray(a)
        return {"ndarray": name}

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
        from ..device import Device
        from ..dispatch.types import DType
        from ..tensor import Tensor

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
        if t is np.ndarray:
            return self.ndarray(obj, where, parts)
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
            f"{where}: cannot save object of type {t.__qualname__}; rtxcore.save stores tensors, "
            "NumPy arrays, numbers, str, None, dtypes and devices in dicts, OrderedDicts, lists "
            f"and tuples (no pickle){_what_to_save(obj, where)}"
        )


def _what_to_save(obj: Any, where: str) -> str:
    """For a model or an optimizer, the sentence that says what to save instead."""
    for module, cls, noun in (("rtxcore.nn.module", "Module", "model"),
                              ("rtxcore.optim.optimizer", "Optimizer", "optimizer")):
        mod = sys.modules.get(module)
        if mod is not None and isinstance(obj, getattr(mod, cls)):
            return (f". Save the {noun}'s state_dict() instead: rtxcore.save({where}.state_dict(), "
                    f"path), and later {noun}.load_state_dict(rtxcore.load(path)) on one built the "
                    f"same way")
    return ""


def _encode(obj: Any) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    s = _Saver()
    structure = s.node(obj, "obj", [])
    meta = {"format": FORMAT, "version": VERSION,
            "structure": json.dumps(structure, separators=(",", ":"), allow_nan=False)}
    return s.arrays, meta


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
