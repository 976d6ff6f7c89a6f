"""What the layer modules are built from: factory arguments, n-tuples, the
input-shape error, PyTorch's default weight and bias initialisation, and
``_FunctionalLayer``, the base of the layers that are one function of ``F``.

Every layer module imports from here and nothing here imports a layer module,
so the families (linear, conv, pooling, ...) never import each other for these."""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..ops import creation as C
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def _factory(device: Any, dtype: Any) -> dict[str, Any]:
    return {"device": device, "dtype": dtype}


def _ntuple(v: Any, n: int) -> tuple[int, ...]:
    """``v`` as an ``n``-tuple of ints (an int or a 1-tuple repeated)."""
    if isinstance(v, int):
        return (v,) * n
    t = tuple(int(a) for a in v)
    return t * n if len(t) == 1 else t


def _shape_error(layer: Module, expected: str, x: Any) -> RuntimeError:
    got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
    return RuntimeError(f"{layer!r}: expected input {expected}, got shape {got}")


def _check_image(layer: Module, x: Any) -> None:
    """A (N, C, H, W) or (C, H, W) input, or the layer's shape error."""
    if not isinstance(x, Tensor) or x.ndim not in (3, 4):
        raise _shape_error(layer, "(N, C, H, W) or (C, H, W)", x)


# -- parameters and their default initialisation ---------------------------------------------


def _weight_and_bias(layer: Module, weight_shape: tuple[int, ...], bias_size: int, bias: bool,
                     device: Any, dtype: Any) -> None:
    """``layer.weight`` and ``layer.bias`` (registered as None without ``bias``),
    uninitialised: the layer's ``reset_parameters`` fills them."""
    fk = _factory(device, dtype)
    layer.weight = Parameter(C.empty(weight_shape, **fk))
    if bias:
        layer.bias = Parameter(C.empty(bias_size, **fk))
    else:
        layer.register_parameter("bias", None)


def _uniform_bound_(tensors: Iterable[Tensor], fan: int) -> None:
    """U(-1/sqrt(fan), 1/sqrt(fan)) in place on each tensor (zeros for ``fan`` 0):
    PyTorch's bias bound, and its recurrent layers' bound for every parameter."""
    bound = 1.0 / math.sqrt(fan) if fan > 0 else 0
    for t in tensors:
        init.uniform_(t, -bound, bound)


def _reset_weight_and_bias(weight: Parameter, bias: Parameter | None) -> None:
    """PyTorch's Linear/Conv initialisation: kaiming_uniform(a=sqrt(5)) for the
    weight, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        _uniform_bound_([bias], fan_in)


# -- layers that are one function ----------------------------------------------------------


class _FunctionalLayer(Module):
    """A layer that calls one function of ``F`` on its input and the arguments it
    was built with: a subclass's ``__init__`` passes them by keyword, in the
    function's order, and they become attributes. ``extra_repr`` shows each as
    ``name=value``, then ``inplace=True`` when that is set; ``_shown`` names the
    ones to show where that is not all of them."""

    _fn = ""  # the function's name in F, looked up per call (the profiler swaps F's names)
    _shown: tuple[str, ...] | None = None

    def __init__(self, **args: Any) -> None:
        super().__init__()
        self._args = tuple(args)
        for name, value in args.items():
            setattr(self, name, value)

    def forward(self, x: Tensor) -> Any:
        return getattr(F, self._fn)(x, *[getattr(self, a) for a in self._args])

    def extra_repr(self) -> str:
        shown = self._shown if self._shown is not None else self._args
        parts = [f"{a}={getattr(self, a)}" for a in shown if a != "inplace"]
        if getattr(self, "inplace", False):
            parts.append("inplace=True")
        return ", ".join(parts)
