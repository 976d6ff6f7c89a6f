"""The ``is_*`` questions PyTorch scripts ask of a tensor, answered for rtxcore's
tensors: dense, strided, on one device, never quantized, sparse, nested, conjugated
or negated lazily.

``PROPERTIES`` are attributes (``x.is_sparse``), ``METHODS`` are called
(``x.is_signed()``), as in PyTorch. ``is_cpu`` and ``is_cuda`` (properties) and
``is_contiguous``, ``is_floating_point``, ``is_pinned``, ``is_shared`` (methods) live
with the tensor and its conversions.
"""

from __future__ import annotations

from math import prod
from typing import Any

# Device kinds and layouts PyTorch tensors can have and rtxcore's can't: each is
# False for every tensor (a script's `if x.is_mps:` takes the other branch).
NEVER = ("is_xpu", "is_mps", "is_ipu", "is_hpu", "is_maia", "is_mtia", "is_xla", "is_vulkan",
         "is_meta", "is_mkldnn", "is_nested", "is_quantized", "is_sparse", "is_sparse_csr")


def _never(self: Any) -> bool:
    return False


def is_complex(input: Any) -> bool:  # noqa: A002
    """False: rtxcore has no complex tensors (a complex dtype is refused)."""
    return input._dtype.is_complex


def is_conj(input: Any) -> bool:  # noqa: A002
    """False: there is no lazy conjugation."""
    return False


def is_neg(input: Any) -> bool:  # noqa: A002
    """False: there is no lazy negation."""
    return False


def is_inference(input: Any) -> bool:  # noqa: A002
    """False: ``inference_mode()`` is ``no_grad()`` here and makes ordinary tensors."""
    return False


def is_distributed(input: Any) -> bool:  # noqa: A002
    return False


def is_signed(input: Any) -> bool:  # noqa: A002
    """True for signed integer and floating-point dtypes (False for bool and uint8)."""
    return input._dtype.is_signed


def is_nonzero(input: Any) -> bool:  # noqa: A002
    """The one element's truth; a tensor of no element or of several raises, as
    PyTorch's."""
    n = prod(input._shape)
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def is_same_size(input: Any, other: Any) -> bool:  # noqa: A002
    return tuple(input._shape) == tuple(other._shape)


def is_set_to(input: Any, tensor: Any) -> bool:  # noqa: A002
    """True when both tensors view the same memory the same way: one storage, offset,
    shape and strides."""
    return (input._storage is tensor._storage and input._offset == tensor._offset
            and tuple(input._shape) == tuple(tensor._shape)
            and tuple(input._strides) == tuple(tensor._strides))


def is_coalesced(input: Any) -> bool:  # noqa: A002
    """Asked of a sparse tensor only; rtxcore's are dense, so PyTorch's error for a
    dense tensor."""
    raise RuntimeError("is_coalesced expected sparse coordinate tensor layout but got Strided")


PROPERTIES: dict[str, Any] = {name: property(_never) for name in NEVER}
METHODS = ["is_complex", "is_conj", "is_neg", "is_inference", "is_distributed", "is_signed",
           "is_nonzero", "is_same_size", "is_set_to", "is_coalesced"]
# The module-level forms: rtxcore.is_complex(x), rtxcore.is_nonzero(x), ...
FUNCTIONS = ["is_complex", "is_conj", "is_neg", "is_inference", "is_signed", "is_nonzero",
             "is_same_size"]
