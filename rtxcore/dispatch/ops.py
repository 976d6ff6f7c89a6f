"""The closed list of primitive ops: what a backend must implement.

Everything else in rtxcore is composite: written in terms of these, so a backend
that supplies the primitives is complete. A backend may also supply any op in
``COMPOSITES`` under the same name; the core then calls it instead of the
decomposition (faster, or more accurate: ``expm1`` near 0).

Conventions every kernel follows (``View`` below means whatever the backend's
``Backend.view`` returns; by default :class:`rtxcore.dispatch.View`):

* The core allocates outputs. A kernel writes into ``out`` and returns nothing,
  except the allocating kernels ``empty``/``from_host`` and ``to_host``. A new
  output is contiguous, but in-place ops pass their target as ``out``, so ``out``
  may have any strides and offset (``x.t().add_(1)``, ``x[:, 1:].fill_(0)``);
  it never has a stride-0 dim of size > 1 (the core refuses those writes).
* Inputs arrive already broadcast to ``out``'s shape (stride-0 dims) and already
  type-promoted: in binary and ternary ops both operands share one dtype; ``out``
  has that dtype, or ``bool`` for comparisons and logical ops.
* Either operand of a binary op (and ``x``/``y`` of ``where``) may instead be a
  Python scalar already converted to the op's dtype (``2.0`` for float32).
* Views may overlap ``out`` exactly (in-place ops: ``a.add_(b)`` passes ``a`` as
  both ``out`` and ``x``); elementwise kernels must tolerate that.
* Reductions get ``axes``, a sorted tuple of distinct non-negative ints;
  ``out`` has ``x``'s shape with those axes set to 1.

``rtxcore.testing.conformance`` checks every primitive against NumPy through the
core (``python -m rtxcore.testing.conformance mydev`` prints the table); running
rtxcore's whole test suite on a device (``RTX_TEST_DEVICES=mydev pytest tests``
in a checkout) checks the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OpSpec", "PRIMITIVES", "COMPOSITES", "UNARY", "BINARY", "COMPARE",
           "REDUCE", "is_known_op"]


@dataclass(frozen=True)
class OpSpec:
    name: str
    family: str
    signature: str
    doc: str


def _specs(family: str, signature: str, names_docs: dict[str, str]) -> list[OpSpec]:
    return [OpSpec(n, family, signature.format(op=n), d) for n, d in names_docs.items()]


UNARY = {
    "neg": "-x", "abs": "|x|", "sign": "-1, 0 or 1 (0 for 0 and nan->nan)",
    "exp": "e**x", "log": "natural log", "sqrt": "square root",
    "sin": "sine", "cos": "cosine", "tanh": "hyperbolic tangent",
    "reciprocal": "1/x", "floor": "round down",
    "logical_not": "out (bool) = not x",
}
BINARY = {
    "add": "x + y (logical or for bool)", "sub": "x - y", "mul": "x * y",
    "div": "x / y (float dtypes only: the core promotes ints)",
    "pow": "x ** y; integers to negative powers as in C: 1 for x = 1, "
           "+-1 for x = -1, else 0",
    "maximum": "larger, nan propagates",
    "minimum": "smaller, nan propagates",
    "logical_and": "out (bool) = x and y", "logical_or": "out (bool) = x or y",
}
COMPARE = {
    "eq": "x == y", "ne": "x != y", "lt": "x < y", "le": "x <= y",
    "gt": "x > y", "ge": "x >= y",
}
REDUCE = {
    "sum": "sum over axes (float16 accumulates in float32)",
    "prod": "product over axes",
    "max": "largest over axes (nan propagates)",
    "min": "smallest over axes (nan propagates)",
}

_MEMORY = [
    OpSpec("empty", "memory", "empty(shape, dtype, index) -> (buffer, View)",
           "allocate a contiguous buffer for prod(shape) elements on device "
           "`index`; return it and a contiguous View of `shape` over it"),
    OpSpec("from_host", "memory", "from_host(array, dtype, index) -> (buffer, View)",
           "copy a C-contiguous numpy array (of `dtype`, a DType) to device "
           "`index`; return the buffer and a contiguous View of array.shape. "
           "Only a backend with shares_host_memory = True may keep the array"),
    OpSpec("to_host", "memory", "to_host(x) -> numpy.ndarray",
           "x's elements as a numpy array of x's shape: a new array, except on a "
           "backend with shares_host_memory = True, where it may be a view of x "
           "(that is how numpy() is zero-copy on cpu)"),
    OpSpec("full", "memory", "full(out, value)", "fill out with a scalar"),
    OpSpec("arange", "memory", "arange(out, start, step)",
           "out (1-D) [i] = start + i*step, computed wide (float64/int64 where "
           "the device has them) and stored in out's dtype"),
    OpSpec("copy", "memory", "copy(out, x)",
           "out = x, same dtype and shape, any strides on both sides"),
    OpSpec("cast", "memory", "cast(out, x)",
           "out = x converted to out's dtype (C casts: float->int truncates; "
           "to bool is x != 0)"),
    OpSpec("uniform", "memory", "uniform(out, low, high, seed, offset)",
           "floats in [low, high) (mind float16: a float32 draw near 1 rounds "
           "to 1.0); the same (seed, offset) gives the same numbers; between "
           "calls the core advances offset by at least out's size"),
    OpSpec("normal", "memory", "normal(out, mean, std, seed, offset)",
           "normally distributed floats, seeded like uniform"),
]

_INDEXING = [
    OpSpec("gather", "indexing", "gather(out, x, dim, index)",
           "out[i][j] = x[index[i][j]][j] for dim=0 (PyTorch's gather); index "
           "is int64 and has out's shape; indices are in range"),
    OpSpec("scatter_add", "indexing", "scatter_add(out, dim, index, src)",
           "out[index[i][j]][j] += src[i][j] for dim=0, accumulating repeats; "
           "index has src's shape"),
    OpSpec("index", "indexing", "index(out, x, indices)",
           "advanced indexing on x's leading dims: `indices` is a tuple of k "
           "int64 Views of one shape S (in range, non-negative); "
           "out (S + x.shape[k:]) = x[indices]"),
    OpSpec("masked_select", "indexing", "masked_select(out, x, mask)",
           "out (1-D, length = number of True) = x's elements where mask "
           "(bool, x's shape) is True, in row-major order"),
]

PRIMITIVES: dict[str, OpSpec] = {
    s.name: s
    for s in [
        *_MEMORY,
        *_specs("unary", "{op}(out, x)", UNARY),
        *_specs("binary", "{op}(out, x, y)", BINARY),
        *_specs("compare", "{op}(out, x, y)  # out is bool", COMPARE),
        OpSpec("where", "ternary", "where(out, cond, x, y)",
               "out = x where cond (bool) else y"),
        *_specs("reduce", "{op}(out, x, axes)", REDUCE),
        OpSpec("argmax", "reduce", "argmax(out, x, axis)",
               "int64 index of the first largest value along one axis; out "
               "keeps that axis with size 1"),
        OpSpec("argmin", "reduce", "argmin(out, x, axis)",
               "int64 index of the first smallest value along one axis"),
        OpSpec("matmul", "matmul", "matmul(out, a, b)",
               "a (*B, n, k) @ b (*B, k, m) -> out (*B, n, m); batch dims "
               "already equal (broadcast by the core with stride-0 views)"),
        *_INDEXING,
    ]
}

# Ops the core builds from primitives, which a backend may implement directly
# under the same name and signature (the core prefers the backend's kernel).
COMPOSITES: dict[str, str] = {
    "expm1": "expm1(out, x)", "log1p": "log1p(out, x)", "log2": "log2(out, x)",
    "tan": "tan(out, x)", "ceil": "ceil(out, x)", "round": "round(out, x)  # half to even",
    "trunc": "trunc(out, x)", "isnan": "isnan(out, x)", "isinf": "isinf(out, x)",
    "sigmoid": "sigmoid(out, x)", "erf": "erf(out, x)",
    "floor_divide": "floor_divide(out, x, y)", "remainder": "remainder(out, x, y)",
    "logical_xor": "logical_xor(out, x, y)",
    "cumsum": "cumsum(out, x, axis)",
    "softmax": "softmax(out, x, axis)  # float x; each slice along axis sums to 1",
    "log_softmax": "log_softmax(out, x, axis)  # float x",
    "gelu": "gelu(out, x, approximate)  # approximate: 'none' (x * Phi(x)) or 'tanh'",
    "gelu_backward": "gelu_backward(out, g, x, y, approximate)  # out = g * gelu'(x), "
                     "y = gelu(x)",
    "layer_norm": "layer_norm(out, mean, rstd, x, weight, bias, eps)  # x (M, N) contiguous, "
                  "normalized per row (biased variance); mean, rstd (M, 1); weight, bias "
                  "(N,) or None",
    "max_pool2d_tiled": "max_pool2d_tiled(values, indices, x, kh, kw)  # x (N, C, H, W); "
                        "values, indices (N, C, H // kh, W // kw): each kh x kw tile's max and "
                        "the flat index into H*W of its first maximum (or first NaN)",
    "max_pool2d_tiled_backward": "max_pool2d_tiled_backward(out, g, indices)  # out (N, C, H, "
                                 "W) zeros with g (N, C, OH, OW) at indices (into H*W, no "
                                 "repeats within a plane)",
    "sort": "sort(values, indices, x, axis, descending)  # stable",
    "index_put": "index_put(out, indices, values)  # out[indices] = values, "
                 "indices as for `index`, values broadcast to the indexed shape",
}


# Without these no tensor can exist on a device (and the CPU fallback can't stand
# in for them: it is made of them); every other primitive may be missing.
REQUIRED = ("empty", "from_host", "to_host")


def is_known_op(name: str) -> bool:
    return name in PRIMITIVES or name in COMPOSITES
