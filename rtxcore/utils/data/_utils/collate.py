"""``default_collate`` and ``default_convert``, as ``torch.utils.data._utils.collate``:
how a ``DataLoader`` turns a list of samples into a batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["default_collate", "default_convert"]


def _rc() -> Any:
    import rtxcore

    return rtxcore


def default_convert(data: Any) -> Any:
    """What a loader with ``batch_size=None`` yields per sample: numpy arrays and
    scalars become tensors, containers are converted recursively."""
    rc = _rc()
    if isinstance(data, rc.Tensor):
        return data
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        return rc.as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind in "biuf":
        return rc.as_tensor(np.asarray(data))
    if isinstance(data, Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, as PyTorch's ``default_collate``:
    tensors (and numpy arrays) are stacked along a new dim 0; Python floats give a
    float64 tensor, ints an int64 one, bools a bool one; str are kept as a list;
    dicts, named tuples, tuples and lists are collated field by field (a tuple
    gives a list)."""
    rc = _rc()
    if not len(batch):
        raise ValueError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, rc.Tensor):
        return rc.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind not in "biuf":
            raise TypeError(f"default_collate: can't batch numpy arrays of dtype {elem.dtype}")
        return rc.stack([rc.as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic) and elem.dtype.kind in "biuf":
        return rc.as_tensor(np.asarray(batch))
    if isinstance(elem, bool):
        return rc.tensor(list(batch), dtype=rc.bool_)
    if isinstance(elem, float):
        return rc.tensor(list(batch), dtype=rc.float64)
    if isinstance(elem, int):
        return rc.tensor(list(batch), dtype=rc.int64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        n = len(elem)
        if any(len(b) != n for b in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        cols = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return cols
        try:
            return type(elem)(cols)
        except TypeError:
            return cols
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, str, dicts or "
        f"lists; found {type(elem).__name__}"
    )


