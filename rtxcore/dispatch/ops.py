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

``rtxcore.testing`` checks every kernel a backend supplies against the NumPy
reference of its ``OpSpec`` (``python -m rtxcore.testing mydev`` prints the
table); running
rtxcore's whole test suite on a device (``RTX_TEST_DEVICES=mydev pytest tests``
in a checkout) checks the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["OpSpec", "PRIMITIVES", "COMPOSITES", "UNARY", "BINARY", "COMPARE",
           "REDUCE", "DOMAINS", "is_known_op", "kernel_dtypes", "reference", "spec"]

# The dtype domains a kernel may receive (after the core's promotion): OpSpec.dtypes.
_FLOATS = ("float16", "float32", "float64")
_INTS = ("uint8", "int8", "int16", "int32", "int64")
DOMAINS: dict[str, tuple[str, ...]] = {
    "all": ("bool", *_INTS, *_FLOATS),
    "nonbool": (*_INTS, *_FLOATS),
    "float": _FLOATS,
    "wide": ("int64", *_FLOATS),  # sum/prod: the core widens bool and ints to int64 first
}


@dataclass(frozen=True)
class OpSpec:
    """Everything the project knows about one kernel-level op, in one place.

    ``result``: what the front-end makes of integer and bool inputs -- ``same``
    (the promoted dtype), ``float`` (ints and bool promote to the default float
    before the kernel runs), ``bool`` (computed in the promoted dtype, result
    bool), ``int64`` (an index), or ``""`` (memory ops). ``inplace``: the name of
    the in-place tensor method that writes straight through the kernel (``add_``),
    or None. ``operands``: the kernel's input names, after its outputs (atan2 would
    say ``("y", "x")``). ``dtypes``: a key of :data:`DOMAINS`, the dtypes the
    core sends the kernel. ``ref``: the NumPy reference, a callable or a dotted
    name (``"numpy.add"``) resolved by :func:`reference`; for a reduction it takes
    ``axis`` and ``keepdims``. ``aliases``: other public names of the front-end.
    """

    name: str
    family: str
    signature: str
    doc: str
    result: str = ""
    inplace: str | None = None
    operands: tuple[str, ...] = ()
    dtypes: str = "all"
    ref: str | Callable[..., Any] | None = None
    aliases: tuple[str, ...] = ()


def _e(name: str, family: str, doc: str, *, result: str = "same", inplace: str | None = None,
       operands: tuple[str, ...] = ("x",), dtypes: str = "all", ref: Any = None,
       aliases: tuple[str, ...] = (), outs: str = "out", note: str = "") -> OpSpec:
    """An elementwise / reduction spec; its signature is built from its operands."""
    sig = f"{name}({outs}, {', '.join(operands)})" + (f"  # {note}" if note else "")
    return OpSpec(name, family, sig, doc, result, inplace, operands, dtypes,
                  ref if ref is not None else f"numpy.{name}", aliases)


# -- NumPy references the numpy namespace lacks under the op's name -------------------


def _int_pow(x: Any, y: Any) -> Any:
    """``x ** y`` with C's integer rule for negative powers (1 for x = 1, +-1 for
    x = -1, else 0); floats as numpy.power."""
    import numpy as np

    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind not in "iu" and y.dtype.kind not in "iu":
        return np.power(x, y)
    dt = np.result_type(x, y)
    x, y = np.broadcast_arrays(x.astype(dt), y.astype(dt))
    neg = y < 0
    with np.errstate(all="ignore"):
        out = np.power(x, np.where(neg, 0, y))
    odd = (y % 2) != 0
    special = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0)).astype(dt)
    return np.where(neg, special, out).astype(dt)


def _sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """numpy.sum, float16 accumulated in float32 (PyTorch's rule)."""
    import numpy as np

    acc = np.float32 if x.dtype == np.float16 else x.dtype
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=acc).astype(x.dtype)


def _prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """numpy.prod, float16 accumulated in float32 (PyTorch's rule)."""
    import numpy as np

    acc = np.float32 if x.dtype == np.float16 else x.dtype
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=acc).astype(x.dtype)


def _sigmoid(x: Any) -> Any:
    import numpy as np

    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


def _erf(x: Any) -> Any:
    import math

    import numpy as np

    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _softmax(x: Any, axis: int) -> Any:
    import numpy as np

    w = x.astype(np.float64)
    if not w.size:
        return x.copy()
    e = np.exp(w - np.max(w, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def _log_softmax(x: Any, axis: int) -> Any:
    import numpy as np

    w = x.astype(np.float64)
    if not w.size:
        return x.copy()
    m = np.max(w, axis=axis, keepdims=True)
    return (w - m - np.log(np.sum(np.exp(w - m), axis=axis, keepdims=True))).astype(x.dtype)


def _cumsum(x: Any, axis: int) -> Any:
    import numpy as np

    acc = np.float32 if x.dtype == np.float16 else x.dtype
    return np.cumsum(x, axis=axis, dtype=acc).astype(x.dtype)


def _arg(fn: str) -> Callable[..., Any]:
    def ref(x: Any, axis: int, keepdims: bool = True) -> Any:
        import numpy as np

        return getattr(np, fn)(x, axis=axis, keepdims=keepdims).astype(np.int64)

    ref.__name__ = f"_{fn}"
    return ref


def reference(spec: OpSpec) -> Callable[..., Any] | None:
    """The spec's NumPy reference as a callable (a dotted name is imported)."""
    ref = spec.ref
    if ref is None or callable(ref):
        return ref
    import importlib

    module, _, attr = ref.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def kernel_dtypes(spec: OpSpec) -> tuple[str, ...]:
    """The dtype names the core may send ``spec``'s kernel."""
    return DOMAINS[spec.dtypes]


def spec(name: str) -> OpSpec:
    """The OpSpec of a primitive or a composite kernel."""
    s = PRIMITIVES.get(name) or COMPOSITES.get(name)
    if s is None:
        raise KeyError(f"no op named {name!r} in rtxcore.dispatch.ops")
    return s


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
    "prod": "product over axes (float16 accumulates in float32)",
    "max": "largest over axes (nan propagates)",
    "min": "smallest over axes (nan propagates)",
}

# the per-op facts of the elementwise and reduction primitives (docs above)
_FLOAT_UNARY = ("exp", "log", "sqrt", "sin", "cos", "tanh", "reciprocal")
_UNARY_SPECS = [
    _e("neg", "unary", UNARY["neg"], inplace="neg_", dtypes="nonbool", ref="numpy.negative"),
    _e("abs", "unary", UNARY["abs"], inplace="abs_", ref="numpy.abs"),
    _e("sign", "unary", UNARY["sign"], inplace="sign_", dtypes="nonbool"),
    *[_e(n, "unary", UNARY[n], result="float", inplace=n + "_", dtypes="float")
      for n in _FLOAT_UNARY],
    _e("floor", "unary", UNARY["floor"], inplace="floor_", dtypes="float"),
    _e("logical_not", "unary", UNARY["logical_not"], result="bool", inplace="logical_not_"),
]
_BINARY_SPECS = [
    _e("add", "binary", BINARY["add"], inplace="add_", operands=("x", "y")),
    _e("sub", "binary", BINARY["sub"], inplace="sub_", operands=("x", "y"), dtypes="nonbool",
       ref="numpy.subtract", aliases=("subtract",)),
    _e("mul", "binary", BINARY["mul"], inplace="mul_", operands=("x", "y"),
       ref="numpy.multiply", aliases=("multiply",)),
    _e("div", "binary", BINARY["div"], result="float", inplace="div_", operands=("x", "y"),
       dtypes="float", ref="numpy.true_divide", aliases=("true_divide", "divide")),
    _e("pow", "binary", BINARY["pow"], inplace="pow_", operands=("x", "y"), dtypes="nonbool",
       ref=_int_pow),
    _e("maximum", "binary", BINARY["maximum"], inplace="maximum_", operands=("x", "y")),
    _e("minimum", "binary", BINARY["minimum"], inplace="minimum_", operands=("x", "y")),
    _e("logical_and", "binary", BINARY["logical_and"], result="bool", inplace="logical_and_",
       operands=("x", "y")),
    _e("logical_or", "binary", BINARY["logical_or"], result="bool", inplace="logical_or_",
       operands=("x", "y")),
]
_COMPARE_NP = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
               "gt": "greater", "ge": "greater_equal"}
_COMPARE_ALIASES = {"ne": ("not_equal",), "lt": ("less",), "le": ("less_equal",),
                    "gt": ("greater",), "ge": ("greater_equal",)}
_COMPARE_SPECS = [
    _e(n, "compare", COMPARE[n], result="bool", operands=("x", "y"), note="out is bool",
       ref=f"numpy.{_COMPARE_NP[n]}", aliases=_COMPARE_ALIASES.get(n, ()))
    for n in COMPARE
]
_REDUCE_SPECS = [
    _e("sum", "reduce", REDUCE["sum"], operands=("x", "axes"), dtypes="wide", ref=_sum),
    _e("prod", "reduce", REDUCE["prod"], operands=("x", "axes"), dtypes="wide", ref=_prod),
    _e("max", "reduce", REDUCE["max"], operands=("x", "axes"), ref="numpy.max",
       aliases=("amax",)),
    _e("min", "reduce", REDUCE["min"], operands=("x", "axes"), ref="numpy.min",
       aliases=("amin",)),
]

_MEMORY = [
    OpSpec("empty", "memory", "empty(shape, dtype, index) -> (buffer, View)",
           "allocate a contiguous buffer for prod(shape) elements on device "
           "`index`; return it and a contiguous View of `shape` over it"),
    OpSpec("from_host", "memory", "from_host(array, dtype, index) -> (buffer, View)",
           "copy a C-contiguous numpy array (of `dtype`, a DType) to device "
           "`index`; return the buffer and a contiguous View of array.shape. "
           "A backend with shares_host_memory = True keeps the array (no copy)"),
    OpSpec("to_host", "memory", "to_host(x) -> numpy.ndarray",
           "x's elements as a numpy array of x's shape: a new array, except on a "
           "backend with shares_host_memory = True, where it is a view of x "
           "(that is how numpy() is zero-copy on cpu)"),
    OpSpec("full", "memory", "full(out, value)", "fill out with a scalar", operands=("value",)),
    OpSpec("arange", "memory", "arange(out, start, step)",
           "out (1-D) [i] = start + i*step, computed wide (float64/int64 where "
           "the device has them) and stored in out's dtype", operands=("start", "step")),
    OpSpec("copy", "memory", "copy(out, x)",
           "out = x, same dtype and shape, any strides on both sides", operands=("x",)),
    OpSpec("cast", "memory", "cast(out, x)",
           "out = x converted to out's dtype (C casts: float->int truncates toward zero; "
           "to bool is x != 0). Unspecified, and not checked: float->int of nan, +-inf or "
           "a value outside the target's range (a negative value to an unsigned type "
           "included), and int->int narrowing", operands=("x",)),
    OpSpec("uniform", "memory", "uniform(out, low, high, seed, offset)",
           "floats in [low, high) (mind float16: a float32 draw near 1 rounds "
           "to 1.0); the same (seed, offset) gives the same numbers; between "
           "calls the core advances offset by at least out's size", dtypes="float",
           operands=("low", "high", "seed", "offset")),
    OpSpec("normal", "memory", "normal(out, mean, std, seed, offset)",
           "normally distributed floats, seeded like uniform", dtypes="float",
           operands=("mean", "std", "seed", "offset")),
]

_INDEXING = [
    OpSpec("gather", "indexing", "gather(out, x, dim, index)",
           "out[i][j] = x[index[i][j]][j] for dim=0 (PyTorch's gather); index "
           "is int64 and has out's shape; indices are in range", result="same",
           operands=("x", "dim", "index")),
    OpSpec("scatter_add", "indexing", "scatter_add(out, dim, index, src)",
           "out[index[i][j]][j] += src[i][j] for dim=0, accumulating repeats; "
           "index has src's shape; float16 sums in float32 or wider, rounded once",
           result="same", operands=("dim", "index", "src")),
    OpSpec("index", "indexing", "index(out, x, indices)",
           "advanced indexing on x's leading dims: `indices` is a tuple of k "
           "int64 Views of one shape S (in range, non-negative); "
           "out (S + x.shape[k:]) = x[indices]", result="same", operands=("x", "indices")),
    OpSpec("masked_select", "indexing", "masked_select(out, x, mask)",
           "out (1-D, length = number of True) = x's elements where mask "
           "(bool, x's shape) is True, in row-major order", result="same",
           operands=("x", "mask")),
]

PRIMITIVES: dict[str, OpSpec] = {
    s.name: s
    for s in [
        *_MEMORY,
        *_UNARY_SPECS,
        *_BINARY_SPECS,
        *_COMPARE_SPECS,
        OpSpec("where", "ternary", "where(out, cond, x, y)",
               "out = x where cond (bool) else y", result="same",
               operands=("cond", "x", "y"), ref="numpy.where"),
        *_REDUCE_SPECS,
        OpSpec("argmax", "reduce", "argmax(out, x, axis)",
               "int64 index of the first largest value along one axis; out "
               "keeps that axis with size 1", result="int64", operands=("x", "axis"),
               ref=_arg("argmax")),
        OpSpec("argmin", "reduce", "argmin(out, x, axis)",
               "int64 index of the first smallest value along one axis",
               result="int64", operands=("x", "axis"), ref=_arg("argmin")),
        OpSpec("matmul", "matmul", "matmul(out, a, b)",
               "a (*B, n, k) @ b (*B, k, m) -> out (*B, n, m); batch dims "
               "already equal (broadcast by the core with stride-0 views)",
               result="same", operands=("a", "b"), dtypes="nonbool", ref="numpy.matmul"),
        *_INDEXING,
    ]
}

# Ops the core builds from primitives, which a backend may implement directly
# under the same name and signature (the core prefers the backend's kernel).
def _c(name: str, family: str, signature: str, doc: str = "", **kw: Any) -> OpSpec:
    return OpSpec(name, family, signature, doc or signature, **kw)


_FLOAT_COMPOSITES = {"expm1": "numpy.expm1", "log1p": "numpy.log1p", "log2": "numpy.log2",
                     "tan": "numpy.tan", "sigmoid": _sigmoid, "erf": _erf}
COMPOSITES: dict[str, OpSpec] = {
    s.name: s
    for s in [
        *[_e(n, "unary", n, result="float", inplace=n + "_", dtypes="float", ref=r)
          for n, r in _FLOAT_COMPOSITES.items()],
        _e("ceil", "unary", "round up", inplace="ceil_", dtypes="float"),
        _e("round", "unary", "round half to even", inplace="round_", dtypes="float",
           note="half to even"),
        _e("trunc", "unary", "round towards 0", inplace="trunc_", dtypes="float",
           aliases=("fix",)),
        _e("isnan", "unary", "out (bool) = x is nan", result="bool", dtypes="float"),
        _e("isinf", "unary", "out (bool) = x is +-inf", result="bool", dtypes="float"),
        _e("floor_divide", "binary", "the floor of the exact quotient, as PyTorch: floats "
           "through fmod, not floor(x / y) (1.0 // 0.1 is 9); integer division by 0 never "
           "reaches the kernel", inplace="floor_divide_", operands=("x", "y"), dtypes="nonbool"),
        _e("remainder", "binary", "the divisor's sign, as PyTorch: fmod(x, y), plus y where "
           "their signs differ (5 % inf is 5, 1.0 % 0.1 is 0.0999...)",
           inplace="remainder_", operands=("x", "y"), dtypes="nonbool"),
        _e("logical_xor", "binary", "out (bool) = x xor y", result="bool",
           inplace="logical_xor_", operands=("x", "y")),
        _e("cumsum", "scan", "running sum along axis", operands=("x", "axis"),
           dtypes="wide", ref=_cumsum),
        _e("softmax", "scan", "each slice along axis sums to 1", operands=("x", "axis"),
           dtypes="float", ref=_softmax, note="float x; each slice along axis sums to 1"),
        _e("log_softmax", "scan", "log of softmax", operands=("x", "axis"), dtypes="float",
           ref=_log_softmax, note="float x"),
        _c("softmax_backward", "scan", "softmax_backward(out, g, y, axis)  # y = softmax(x) "
           "along axis, g (y's shape) any strides; out = y * (g - sum(g * y)) (sums along "
           "axis: the gradient of x)", operands=("g", "y", "axis"), dtypes="float"),
        _c("log_softmax_backward", "scan", "log_softmax_backward(out, g, y, axis)  # y = "
           "log_softmax(x) along axis, g (y's shape) any strides; out = g - exp(y) * sum(g) "
           "(sums along axis: the gradient of x)", operands=("g", "y", "axis"), dtypes="float"),
        _c("gelu", "activation",
           "gelu(out, x, approximate)  # approximate: 'none' (x * Phi(x)) or 'tanh'",
           operands=("x", "approximate"), dtypes="float"),
        _c("gelu_backward", "activation", "gelu_backward(out, g, x, y, approximate)  # out = g "
           "* gelu'(x), y = gelu(x)", operands=("g", "x", "y", "approximate"), dtypes="float"),
        _c("layer_norm", "norm", "layer_norm(out, mean, rstd, x, weight, bias, eps)  # x (M, N) "
           "contiguous, normalized per row (biased variance); mean, rstd (M, 1); weight, bias "
           "(N,) or None", operands=("x", "weight", "bias", "eps"), dtypes="float"),
        _c("layer_norm_backward", "norm", "layer_norm_backward(out, g, x, mean, rstd, weight)  "
           "# x (M, N) contiguous, g (M, N) any strides, mean and rstd (M, 1) as layer_norm "
           "wrote them, weight (N,) or None; with xhat = (x - mean) * rstd and gw = g * "
           "weight (g without weight), out's rows :M = rstd * (gw - mean(gw) - xhat * "
           "mean(gw * xhat)) (means along each row: the gradient of x). out is (M, N), or "
           "(M + 2, N) for the parameters' gradients too: row M = the sum over rows of g * "
           "xhat (weight's), row M + 1 = that of g (bias's)",
           operands=("g", "x", "mean", "rstd", "weight"), dtypes="float"),
        _c("batch_norm", "norm", "batch_norm(out, mean, var, rstd, x, weight, bias, eps)  # x "
           "(N, C, S) contiguous, normalized per channel over N and S (training: the batch's "
           "statistics); mean, var (biased), rstd = 1 / sqrt(var + eps) (C,); out = (x - "
           "mean) * (rstd * weight) + bias; weight, bias (C,) or None",
           operands=("x", "weight", "bias", "eps"), dtypes="float"),
        _c("batch_norm_backward", "norm", "batch_norm_backward(dx, sums, g, x, mean, rstd, "
           "weight)  # x, g (N, C, S) contiguous, mean and rstd (C,) as batch_norm wrote "
           "them, weight (C,) or None; with xhat = (x - mean) * rstd and sums over N and S: "
           "sums (2, C) = sum(g * xhat) (weight's gradient), sum(g) (bias's); dx (x's shape) "
           "= (g - mean(g) - xhat * mean(g * xhat)) * rstd * weight",
           operands=("g", "x", "mean", "rstd", "weight"), dtypes="float"),
        _c("lstm_cell", "rnn", "lstm_cell(h, c, act, gi, gh, c_prev)  # gi, gh (B, 4H) any "
           "strides, gates i, f, g, o of gi + gh; c_prev (B, H); act (4, B, H) = sigmoid(i), "
           "sigmoid(f), tanh(g), sigmoid(o); c = f * c_prev + i * g, h = o * tanh(c) (B, H)",
           operands=("gi", "gh", "c_prev"), dtypes="float"),
        _c("lstm_cell_backward", "rnn", "lstm_cell_backward(dgates, dc_prev, dh, dc, act, c, "
           "c_prev)  # act, c, c_prev as lstm_cell had them, dh (B, H), dc (B, H) or None "
           "(zeros); with dct = dc + dh * o * (1 - tanh(c)**2): dgates (B, 4H) = dct * g * "
           "i(1-i), dct * c_prev * f(1-f), dct * i * (1-g**2), dh * tanh(c) * o(1-o) (the "
           "gradient of gi and of gh); dc_prev = dct * f",
           operands=("dh", "dc", "act", "c", "c_prev"), dtypes="float"),
        _c("gru_cell", "rnn", "gru_cell(h, act, gi, gh, h_prev)  # gi, gh (B, 3H) any "
           "strides, gates r, z, n (gh with its bias); act (3, B, H) = r, z = sigmoid(gi + gh), "
           "n = tanh(gi_n + r * gh_n); h = n + z * (h_prev - n) (B, H)",
           operands=("gi", "gh", "h_prev"), dtypes="float"),
        _c("gru_cell_backward", "rnn", "gru_cell_backward(dgi, dgh, dh_prev, dh, act, gh, "
           "h_prev)  # act, gh, h_prev as gru_cell had them, dh (B, H); dn = dh * (1 - z) * "
           "(1 - n**2), dz = dh * (h_prev - n) * z(1-z), dr = dn * gh_n * r(1-r): dgi (B, 3H) "
           "= dr, dz, dn; dgh (B, 3H) = dr, dz, dn * r; dh_prev = dh * z (the caller adds "
           "dgh @ W_hh)", operands=("dh", "act", "gh", "h_prev"), dtypes="float"),
        _c("max_pool2d_tiled", "pool", "max_pool2d_tiled(values, indices, x, kh, kw)  # x (N, C, "
           "H, W); values, indices (N, C, H // kh, W // kw): each kh x kw tile's max and the "
           "flat index into H*W of its first maximum (or first NaN)",
           operands=("x", "kh", "kw"), dtypes="float"),
        _c("max_pool2d_tiled_backward", "pool", "max_pool2d_tiled_backward(out, g, indices)  # "
           "out (N, C, H, W) zeros with g (N, C, OH, OW) at indices (into H*W, no repeats "
           "within a plane)", operands=("g", "indices"), dtypes="float"),
        _c("conv2d", "conv", "conv2d(out, cols, x, weight, bias, stride, padding, dilation)  # "
           "x (N, C, H, W), weight (OC, C, kh, kw), bias (OC,) or None, stride/dilation (h, w), "
           "padding (top, bottom, left, right) zeros; out (N, OC, OH, OW); cols (C*kh*kw, "
           "N*OH*OW) the im2col matrix, row (c, i, j) = channel c at kernel offset (i, j) "
           "for every output position in (N, OH, OW) order, or None where the backend has "
           "conv2d_weight_grad_x (the core then writes no cols outside traced graphs). "
           "float16 accumulates in float32, rounded once. Used with the two below, all "
           "three or none", operands=("x", "weight", "bias", "stride", "padding", "dilation"),
           dtypes="float"),
        _c("conv2d_input_grad", "conv", "conv2d_input_grad(dx, g, weight, stride, padding, "
           "dilation)  # dx (N, C, H, W) = the gradient of conv2d's x for output gradient g",
           operands=("g", "weight", "stride", "padding", "dilation"), dtypes="float"),
        _c("conv2d_weight_grad", "conv", "conv2d_weight_grad(dweight, g, cols)  # dweight (OC, "
           "C, kh, kw) = g as (OC, N*OH*OW) times cols^T (cols from conv2d)",
           operands=("g", "cols"), dtypes="float"),
        _c("conv2d_weight_grad_x", "conv", "conv2d_weight_grad_x(dweight, g, x, stride, "
           "padding, dilation)  # dweight (OC, C, kh, kw) = conv2d_weight_grad of x's im2col "
           "(conv2d's geometry), formed as the backend goes; optional, beside the three "
           "above: with it conv2d gets cols=None", operands=("g", "x", "stride", "padding",
                                                           "dilation"), dtypes="float"),
        _c("sort", "scan", "sort(values, indices, x, axis, descending)  # stable",
           operands=("x", "axis", "descending"), dtypes="nonbool"),
        _c("index_put", "indexing", "index_put(out, indices, values)  # out[indices] = values, "
           "indices as for `index`, values broadcast to the indexed shape",
           operands=("indices", "values")),
    ]
}


# Without these no tensor can exist on a device (and the CPU fallback can't stand
# in for them: it is made of them); every other primitive may be missing.
REQUIRED = ("empty", "from_host", "to_host")


def is_known_op(name: str) -> bool:
    return name in PRIMITIVES or name in COMPOSITES
