"""Host data as a NumPy array under rtxcore's dtype rules: what ``tensor()``, ``as_tensor()``
and NumPy operands (``tensor + ndarray``) are built from.

Python numbers and nested lists take the default float dtype for floats, int64
for integers and bool for bools; NumPy arrays keep their dtype when rtxcore has
it; tensors are read back from their device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as D
from ..tensor import Tensor


def numpy_from_data(data: Any, dtype: D.DType | None) -> np.ndarray:
    """A new C-contiguous numpy array holding ``data`` with rtxcore's dtype rules."""
    if isinstance(data, Tensor):
        arr = data.detach().numpy()
        return np.array(arr, dtype=(dtype or data._dtype).numpy, copy=True, order="C")
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.array(data, copy=True, order="C")
        if dtype is None:
            if arr.dtype not in D._BY_NUMPY:
                raise TypeError(
                    f"can't convert a numpy array of dtype {arr.dtype}; rtxcore supports "
                    f"{', '.join(d.name for d in D.ALL)}"
                )
            return arr
        return arr.astype(dtype.numpy, copy=False)
    try:
        arr = np.array(data, order="C")
    except ValueError as exc:
        raise ValueError(f"can't make a tensor from ragged or malformed data: {exc}") from None
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise TypeError(
            f"can't make a tensor from data of type {type(data).__name__}: expected numbers, "
            "nested lists of numbers, numpy arrays or tensors"
        )
    if dtype is None:
        if arr.dtype.kind == "f":
            dtype = D.get_default_dtype()
        elif arr.dtype.kind in "iu":
            dtype = D.int64
        elif arr.dtype.kind == "b":
            dtype = D.bool_
        else:
            raise TypeError(f"unsupported data type {arr.dtype} in tensor()")
    if dtype.kind in "iu" and arr.dtype.kind == "f":
        arr = np.trunc(arr)
    return np.require(arr.astype(dtype.numpy, copy=False), requirements="C")
