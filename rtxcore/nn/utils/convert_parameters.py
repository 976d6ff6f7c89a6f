"""Parameters to one flat vector and back, as ``torch.nn.utils``."""

from __future__ import annotations

from typing import Any, Iterable

from ...autograd.grad_mode import no_grad
from ...ops.indexing import cat
from ...tensor import Tensor


def _check_same_device(param: Tensor, old: Any) -> Any:
    """The parameters' device; TypeError when they are on different devices."""
    dev = param.device
    if old is not None and dev != old:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return dev


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one vector (recorded, as PyTorch)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    dev = None
    vec = []
    for p in parameters:
        dev = _check_same_device(p, dev)
        vec.append(p.reshape(-1))
    return cat(vec)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of ``vec`` into the parameters' data, in order."""
    if not isinstance(vec, Tensor):
        mod = type(vec).__module__
        name = type(vec).__qualname__ if mod == "builtins" else f"{mod}.{type(vec).__qualname__}"
        raise TypeError(f"expected torch.Tensor, but got: {name}")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    dev = None
    pointer = 0
    with no_grad():
        for p in parameters:
            dev = _check_same_device(p, dev)
            n = p.numel()
            p.data = vec[pointer:pointer + n].view_as(p).data
            pointer += n
