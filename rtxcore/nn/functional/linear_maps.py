"""Linear maps: ``linear`` (one recorded node, ``rtxcore.ops.linalg.linear``) and
``bilinear``."""

from __future__ import annotations

from ...amp.autocast_mode import autocast_inputs, regions as _autocast_regions
from ...ops.linalg import linear as _linear
from ...ops.linalg import matmul
from ...tensor import Tensor
from ._args import _check_tensor, _shape

__all__ = ["linear", "bilinear"]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``: one matmul and one add, recorded as one node
    (``rtxcore.ops.linalg.linear``) whose backward gives ``weight`` a contiguous
    gradient."""
    if _autocast_regions[0]:  # autocast: computed in float16
        input, weight, bias = autocast_inputs("linear", input, weight, bias)
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        _check_tensor("linear", "input", input)
        _check_tensor("linear", "weight", weight)
    ishape = input._shape
    wshape = weight._shape
    if len(wshape) == 1:  # PyTorch accepts a vector weight: input @ weight
        if not ishape or ishape[-1] != wshape[0]:
            raise RuntimeError(
                f"linear: input has {ishape[-1] if ishape else 0} features (shape "
                f"{tuple(ishape)}) but weight expects {wshape[0]} (weight shape {tuple(wshape)})")
        out = matmul(input, weight)
        if bias is not None:
            _check_tensor("linear", "bias", bias)
            out = out + bias
        return out
    if len(wshape) != 2:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{tuple(wshape)}")
    k = wshape[1]
    if not ishape or ishape[-1] != k:
        raise RuntimeError(
            f"linear: input has {ishape[-1] if ishape else 0} features (shape "
            f"{tuple(ishape)}) but weight expects {k} (weight shape {tuple(wshape)})")
    if bias is not None:
        _check_tensor("linear", "bias", bias)
        bshape = bias._shape
        if bshape and bshape[-1] not in (1, wshape[0]):
            raise RuntimeError(
                f"linear: bias of shape {tuple(bshape)} does not match the {wshape[0]} output "
                f"features (weight shape {tuple(wshape)})")
    if len(ishape) <= 2:
        return _linear(input, weight, bias)
    # (..., k): one 2-D product over all leading dims
    return _linear(input.reshape(-1, k), weight, bias).reshape(ishape[:-1] + (wshape[0],))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = input1 @ weight[o] @ input2 + bias[o]`` (weight (out, in1, in2))."""
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear: weight must be 3-D (out, in1, in2), got shape {_shape(weight)}")
    o, i1, i2 = weight._shape
    if input1._shape[-1] != i1 or input2._shape[-1] != i2:
        raise RuntimeError(
            f"bilinear: input1 has {input1._shape[-1]} features and input2 {input2._shape[-1]} "
            f"(shapes {_shape(input1)} and {_shape(input2)}) but weight of shape "
            f"{_shape(weight)} expects {i1} and {i2}")
    lead = input1._shape[:-1]
    a = input1.reshape(-1, i1)
    b = input2.reshape(-1, i2)
    t = matmul(a, weight.permute(1, 0, 2).reshape(i1, o * i2)).reshape(-1, o, i2)
    out = (t * b.unsqueeze(1)).sum(-1).reshape(lead + (o,))
    return out + bias if bias is not None else out
