"""The file's header as rtxcore writes and reads it: the metadata's format name
and version, safetensors dtype codes, the checksum keys and the header's own
checksum, the limits on nesting and header size, and the two errors a reader
raises for a damaged file and for a dtype rtxcore lacks.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np

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


class _Corrupt(ValueError):
    pass


class _Unsupported(ValueError):
    pass


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
