"""The elementwise primitives as C expressions, written once for backends that generate C code.

rtx_opencl (OpenCL C) and rtx_cuda (CUDA C, through NVRTC) build their
elementwise and fused kernels from these tables; each copies them and adds or
replaces what its language does differently (OpenCL's integer ``pow`` helper
and float ``floor_divide``/``remainder``).

Each op maps to ``(expression for float dtypes, expression for integer and
bool dtypes)``, None where the op is not defined there (the core promotes
integers to float for those first). In an expression ``a``, ``b``, ``c`` are
the operands, already of the compute type ``CT``; ``ISNAN(x)`` is true where
``x`` is NaN -- the backend defines both (OpenCL: ``#define ISNAN(v) ((v) !=
(v))`` and ``CT`` per kernel; CUDA: replaced by ``isnan`` and the C type). The
math functions (``exp``, ``fabs``, ...) are C's, overloaded on float and
double in both languages.
"""

from __future__ import annotations

__all__ = ["UNARY", "BINARY", "TERNARY", "COMPARISONS", "pick"]

UNARY: dict[str, tuple[str | None, str | None]] = {
    "neg": ("-a", "-a"),
    "abs": ("fabs(a)", "(a < 0 ? -a : a)"),
    "sign": ("(ISNAN(a) ? a : (CT)((a > 0) - (a < 0)))", "(CT)((a > 0) - (a < 0))"),
    "exp": ("exp(a)", None),
    "log": ("log(a)", None),
    "sqrt": ("sqrt(a)", None),
    "sin": ("sin(a)", None),
    "cos": ("cos(a)", None),
    "tanh": ("tanh(a)", None),
    "reciprocal": ("(CT)1 / a", None),
    "floor": ("floor(a)", "a"),
    "logical_not": ("!a", "!a"),
    "copy": ("a", "a"),
    "cast": ("a", "a"),
}
BINARY: dict[str, tuple[str | None, str | None]] = {
    "add": ("a + b", "a + b"),
    "sub": ("a - b", "a - b"),
    "mul": ("a * b", "a * b"),
    "div": ("a / b", None),
    "pow": ("pow(a, b)", None),  # (C has no integer pow: a backend may add a helper)
    "maximum": ("(ISNAN(a) || a > b) ? a : b", "(a > b ? a : b)"),
    "minimum": ("(ISNAN(a) || a < b) ? a : b", "(a < b ? a : b)"),
    "logical_and": ("(a != 0) && (b != 0)", "(a != 0) && (b != 0)"),
    "logical_or": ("(a != 0) || (b != 0)", "(a != 0) || (b != 0)"),
    "eq": ("a == b", "a == b"), "ne": ("a != b", "a != b"),
    "lt": ("a < b", "a < b"), "le": ("a <= b", "a <= b"),
    "gt": ("a > b", "a > b"), "ge": ("a >= b", "a >= b"),
}
TERNARY: dict[str, tuple[str | None, str | None]] = {"where": ("a ? b : c", "a ? b : c")}

# the binary ops whose operands' dtype is not their (bool) result's
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"})


def pick(table: dict[str, tuple[str | None, str | None]], op: str, dtype: str, floating: bool,
         who: str) -> str:
    """``op``'s expression in ``table`` for operands of ``dtype``: the float form
    where ``floating``, else the integer/bool one; a TypeError, naming ``who``
    (the backend) and the dtype, where the op is not defined there."""
    expr = table[op][0 if floating else 1]
    if expr is None:
        raise TypeError(f"{who}: {op} is not defined for {dtype}")
    return expr
