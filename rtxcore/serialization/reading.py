"""Reading a file: what a file that isn't safetensors is (PyTorch, NumPy,
pickle, zip), the header parsed and checked (checksums, rtxcore metadata,
names given twice), which tensor the safetensors package refused and why, and
each tensor read into memory of its own and checked against its checksum.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .header import (_DATA_CRC, _HEADER_CRC, _KNOWN_KEYS, _MAX_HEADER, _OWN_KEYS, _ST_TO_NUMPY,
                     FORMAT, VERSION, _Corrupt, _header_crc, _Unsupported)

# first bytes of files that aren't safetensors: NumPy's .npy, and torch.save's
# legacy format (a protocol-2 pickle of the long 0x1950a86a20f9469cfc6c)
_NPY_MAGIC = b"\x93NUMPY"
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


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
