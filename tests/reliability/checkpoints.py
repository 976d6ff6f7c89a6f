"""Shared by the reliability tests: small rtxcore checkpoints of several dtypes
and nesting, and an exact comparison of what was loaded with what was saved."""

from __future__ import annotations

import io
import json
import zlib
from collections import OrderedDict
from typing import Any

import numpy as np

import rtxcore as rc


def sample_objects() -> list[Any]:
    """Objects to save: tensors of every dtype (0-d and empty ones too) inside
    nested dicts, lists and tuples with plain values."""
    rng = np.random.default_rng(7)
    first = {
        "w": rc.from_numpy(rng.standard_normal((3, 4)).astype(np.float32)),
        "b": rc.from_numpy(np.array([0.5, -2.0, np.inf, np.nan], dtype=np.float16)),
        "steps": rc.tensor(12345678901, dtype=rc.int64),
        "mask": rc.from_numpy(np.array([True, False, True, True, False])),
        "meta": {"name": "run-1", "lr": 0.1, "nested": {"list": [1, (2, "three"), None, float("inf")]}},
    }
    second = OrderedDict([
        ("layer.0.weight", rc.from_numpy(rng.standard_normal((2, 3)))),  # float64
        ("layer.0.idx", rc.from_numpy(np.arange(-4, 4, dtype=np.int8))),
        ("layer.1.bytes", rc.from_numpy(np.arange(250, 256, dtype=np.uint8))),
        ("layer.1.short", rc.from_numpy(np.array([-32768, 32767, 0], dtype=np.int16))),
        ("layer.1.int", rc.from_numpy(np.array([[1, -1], [2**31 - 1, -2**31]], dtype=np.int32))),
        ("empty", rc.from_numpy(np.zeros((0, 3), dtype=np.float32))),
        ("scalar", rc.tensor(2.5)),
        ("groups", [{"params": [0, 1], "betas": (0.9, 0.999)}]),
    ])
    third = rc.from_numpy(np.arange(10, dtype=np.float32).reshape(2, 5) / 3)
    return [first, second, third]


def to_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    rc.save(obj, buf)
    return buf.getvalue()


def header_of(data: bytes) -> tuple[dict[str, Any], int]:
    """The parsed JSON header of a safetensors file and where its data starts."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]), 8 + n


def with_header(header: dict[str, Any], data_section: bytes) -> bytes:
    """A safetensors file from a header (written as given) and a data section."""
    text = json.dumps(header).encode("utf-8")
    return len(text).to_bytes(8, "little") + text + data_section


def header_crc32(header: dict[str, Any]) -> str:
    """The ``header_crc32`` a header should carry, as the format specifies it: the
    crc32 of the header without that entry, as JSON with sorted keys, no spaces
    and ASCII escapes."""
    meta = {k: v for k, v in header["__metadata__"].items() if k != "header_crc32"}
    text = json.dumps({**header, "__metadata__": meta}, sort_keys=True, separators=(",", ":"))
    return f"{zlib.crc32(text.encode('ascii')):08x}"


def same(got: Any, want: Any) -> bool:
    """Whether ``got`` is exactly ``want``: the same container types and keys, equal
    plain values (nan equal to nan), tensors of the same dtype, shape and bytes."""
    if isinstance(want, rc.Tensor):
        if not isinstance(got, rc.Tensor) or got.dtype is not want.dtype or got.shape != want.shape:
            return False
        return got.numpy().tobytes() == want.numpy().tobytes()
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return list(got) == list(want) and all(same(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(want, float) and want != want:
        return got != got
    return got == want
