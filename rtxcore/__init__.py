"""rtxcore: PyTorch-style tensors on interchangeable, separately installed backends.

    import rtxcore as rc
    x = rc.tensor([[1.0, 2.0], [3.0, 4.0]])
    (x @ x.T).sum()

Kernels come from backend plugins (``rtx-cpu``, ``rtx-opencl``, ``rtx-cuda``, or a
third party's) found through the ``rtxcore.backends`` entry point group the first
time a device is used. ``rtx info`` lists what is installed.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__  # rtxcore/VERSION

from .dtype import (bool_, double, float, float16, float32, float64, get_default_dtype,  # noqa: A004
                    half, int, int8, int16, int32, int64, long, promote_types, result_type,
                    set_default_dtype, short, uint8)
from .dtype import bool  # noqa: A004  (rtxcore.bool, PyTorch's name; bool_ stays)
from .dtype import bfloat16, cdouble, cfloat, complex64, complex128  # named, refused when used
from .dtype import channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format
from ._format import get_printoptions, set_printoptions
from .dispatch.types import DType, OutOfMemoryError
from .device import Device, device, get_default_device, set_default_device
from .dispatch.fallback import FallbackWarning, fallback_report, set_fallback
from .shape import Shape, Size, broadcast_shapes as _broadcast_pair
from .tensor import Tensor
from ._tensor_api import CPU_TYPES as _CPU_TYPES

(FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor,
 ByteTensor, BoolTensor) = (_CPU_TYPES[n] for n in (
    "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
    "CharTensor", "ByteTensor", "BoolTensor"))
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .ops.creation import (arange, as_tensor, asarray, empty, empty_like, eye, from_dlpack, from_numpy, full,
                           full_like, linspace, logspace, ones, ones_like, rand, rand_like, randint,
                           randint_like, randn, randn_like, randperm, tensor, zeros, zeros_like,
                           clone, numpy as _numpy)
from .ops.elementwise import (abs, add, bitwise_not, ceil, clamp, clip, cos, div, divide, eq, erf,  # noqa: A004
                              exp, expm1, fix, floor, floor_divide, ge, gelu, greater, greater_equal,
                              gt, isfinite, isinf, isnan, le, lerp, less, less_equal, log, log1p,
                              log2, log10, logical_and, logical_not, logical_or, logical_xor, lt,
                              maximum, minimum, mul, multiply, nan_to_num, ne, neg,
                              not_equal, pow, reciprocal, relu, remainder, round, rsqrt, sigmoid,
                              sign, silu, sin, softplus, sqrt, square, sub, subtract, tan, tanh,
                              true_divide, trunc, where)
from .ops.reduction import (all, amax, amin, any, argmax, argmin, count_nonzero, cumprod,  # noqa: A004
                            cumsum, log_softmax, logsumexp, max, mean, min, norm, softmax, std,
                            sum, var, var_mean)
from .ops.reduction import prod_ as prod
from .ops.views import (broadcast_to, chunk, tile, diagonal, expand, flatten, movedim, moveaxis, narrow,
                        permute, ravel, reshape, split, squeeze, swapaxes, swapdims, t,
                        tensor_split, transpose, unbind, unflatten, unsqueeze)
from .ops.indexing import (argsort, argwhere, cat, tril, triu, concat, concatenate, gather, hstack,
                           index_select, masked_fill, masked_select, nonzero, scatter, scatter_add,
                           sort, stack, take_along_dim, topk, vstack)
from .ops.reorder import flip, fliplr, flipud, roll, rot90
from .ops.linalg import (addbmm, addmm, addmv, addr, baddbmm, bmm, cross, dot, inner, kron, matmul, mm,
                         mv, outer, trace)
from .ops.einsum import einsum
from .ops.elementwise import (addcdiv, addcmul, clamp_max, clamp_max_, clamp_min, clamp_min_, fmod,
                              frac)
from .ops.special import (acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, asin,
                          asinh, atan, atan2, atanh, cosh, erfc, erfinv, hypot, logaddexp, logit, sinh,
                          xlogy)
from .ops.comparison import allclose, bitwise_and, bitwise_or, bitwise_xor, equal, heaviside, isclose
from .ops.statistics import (kthvalue, median, mode, nanmean, nanmedian, nanquantile, nansum,
                             quantile)
from .ops.scans import cummax, cummin, diff, trapezoid, trapz
from .ops.counting import (bincount, bucketize, histc, repeat_interleave, searchsorted, unique,
                           unique_consecutive)
from .ops.scatter import index_add, index_copy, index_fill, index_put, masked_scatter, put, take
from .ops.matrices import block_diag, cartesian_prod, diag, diag_embed, meshgrid
from .ops.triangular import tril_indices, triu_indices
from .ops.views import atleast_1d, atleast_2d, atleast_3d, broadcast_tensors, select
from .ops.joining import column_stack, dstack
from .ops.norms import cdist, cosine_similarity, dist, pairwise_distance
from .ops.sampling import bernoulli, multinomial, normal
from .ops.aliases import (absolute, angle, conj, deg2rad, exp2, isneginf, isposinf, isreal, negative,
                          positive, rad2deg, real, resolve_conj, resolve_neg, sgn, std_mean)
from .ops.predicates import (is_complex, is_conj, is_inference, is_neg, is_nonzero, is_same_size,
                             is_signed)
from . import _settings

globals().update({_n: getattr(_settings, _n) for _n in _settings.NAMES})  # finfo, iinfo, ...
from .ops.out import FUNCTIONS as _with_out

globals().update(_with_out)  # the functions above that take PyTorch's out= keyword

from . import autograd  # noqa: F401
from .autograd import rules as _rules  # noqa: F401  (registers every backward rule)
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                 is_inference_mode_enabled, no_grad, set_grad_enabled)


def __getattr__(name: str) -> Any:
    # rc.nn, rc.optim, rc.utils, rc.save/rc.load load on first use: `import rtxcore`
    # stays as cheap as the tensor core
    import importlib

    if name in ("nn", "optim", "utils", "linalg", "profiler", "distributions", "jit"):
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("save", "load"):
        return getattr(importlib.import_module(f"{__name__}.serialization"), name)
    if name in ("accelerator", "cuda", "backends", "amp", "distributed", "multiprocessing"):
        return importlib.import_module(f"{__name__}.{name}")
    if name == "compile":
        return importlib.import_module(f"{__name__}.jit").compile
    if name in ("autocast", "is_autocast_enabled", "get_autocast_dtype"):
        return getattr(importlib.import_module(f"{__name__}.amp"), name)
    from ._unbuilt import UNBUILT, missing_attribute, refuse_attribute

    if name in UNBUILT:
        raise refuse_attribute(__name__, name)
    raise missing_attribute(__name__, name)


def register_backend(plugin: Any, name: str | None = None) -> str:
    """Register an in-process backend plugin (a module or object with hookimpls).

    The dispatch table is rebuilt at once. Returns the name it was registered
    under: ``name``, else the module's ``__name__``, else the class name. A name
    listed in ``RTX_DISABLE_BACKENDS`` is refused with a RuntimeError.
    """
    from .dispatch.registry import registry

    return registry.register(plugin, name)


def unregister_backend(plugin_or_name: Any) -> None:
    from .dispatch.registry import registry

    registry.unregister(plugin_or_name)


def broadcast_shapes(*shapes: Any) -> Shape:
    out: tuple[int, ...] = ()
    for s in shapes:
        out = _broadcast_pair(out, (s,) if isinstance(s, type(1)) else tuple(s))
    return Shape(out)


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def numel(x: Tensor) -> type(1):  # type: ignore[valid-type]
    return x.numel()


def is_floating_point(x: Tensor) -> bool:
    return x.is_floating_point()


def backends_info() -> list[dict[str, Any]]:
    """What ``rtx info`` prints, as data."""
    from ._cli import collect

    return collect()
