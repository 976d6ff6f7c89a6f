"""Shared by the tests: dtype names, PyTorch's promotion table, and a skip for
devices that lack a dtype."""

from __future__ import annotations

import numpy as np
import pytest

import rtxcore as rc

ALL = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]

# torch.promote_types(row, column), columns in the order of ALL (written from
# PyTorch's documented rules: bool < integers < floats; uint8 with int8 gives int16)
PROMOTE = {
    "bool":    ["bool",    "uint8",   "int8",    "int16",   "int32",   "int64",   "float16", "float32", "float64"],
    "uint8":   ["uint8",   "uint8",   "int16",   "int16",   "int32",   "int64",   "float16", "float32", "float64"],
    "int8":    ["int8",    "int16",   "int8",    "int16",   "int32",   "int64",   "float16", "float32", "float64"],
    "int16":   ["int16",   "int16",   "int16",   "int16",   "int32",   "int64",   "float16", "float32", "float64"],
    "int32":   ["int32",   "int32",   "int32",   "int32",   "int32",   "int64",   "float16", "float32", "float64"],
    "int64":   ["int64",   "int64",   "int64",   "int64",   "int64",   "int64",   "float16", "float32", "float64"],
    "float16": ["float16", "float16", "float16", "float16", "float16", "float16", "float16", "float32", "float64"],
    "float32": ["float32", "float32", "float32", "float32", "float32", "float32", "float32", "float32", "float64"],
    "float64": ["float64", "float64", "float64", "float64", "float64", "float64", "float64", "float64", "float64"],
}


def torch_promote(a: str, b: str) -> str:
    return PROMOTE[a][ALL.index(b)]


def rdt(name: str):
    return rc.bool_ if name == "bool" else getattr(rc, name)


def npdt(name: str) -> np.dtype:
    return np.dtype(np.bool_ if name == "bool" else name)


def need(device, *names) -> None:
    for n in names:
        if not rc.device(device).supports(rdt(n)):
            pytest.skip(f"{device} does not support {n}")
