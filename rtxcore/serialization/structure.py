"""Rebuilding a saved object from its structure: containers, keys and plain
values as they were, and each tensor on the device it was saved from or where
``map_location`` puts it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from .header import _MAX_DEPTH, _Corrupt


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
        from ..device import Device

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
        from ..ops.creation import from_numpy, tensor
        from ..tensor import Tensor

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
        if target is saved and _norm_loc(saved) == "cpu:0":
            # saved on cpu, and no map_location says otherwise: where the cpu
            # backend isn't installed, the host device (the default device)
            from ..device import host_device

            target = host_device()
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
            from ..nn.parameter import Parameter

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
        if kind == "ndarray":  # a NumPy array: data back as an array, wherever map_location says
            arr = self.arrays.get(v) if type(v) is str else None
            if arr is None:
                raise _Corrupt(f"the structure refers to an array {v!r:.80} that the file doesn't hold")
            return np.array(arr)
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
            from .. import dtype as D

            if type(v) is not str or v not in D.BY_NAME:
                raise _Corrupt(f"unknown dtype {v!r:.40}")
            return D.BY_NAME[v]
        if kind == "device" and type(v) is str:
            from ..device import Device

            try:
                return Device(v)
            except RuntimeError as exc:
                raise RuntimeError(f"can't load {self.name}: it holds the device {v!r}: {exc}") from None
        raise _Corrupt(f"bad node {node!r:.80}")


def _nonfinite(v: Any) -> float:
    if v not in ("nan", "inf", "-inf"):
        raise _Corrupt(f"bad float {v!r:.40}")
    return float(v)
