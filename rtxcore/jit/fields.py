"""Reading a graph file's fields strictly: the limits on what a file may hold,
the ``ValueError`` naming a field that breaks them, ints, names and scalars
checked by type and range, and kernel arguments decoded from their JSON.

What ``rtxcore.jit.validate`` and its node, kernel and program checks share.
The limits are defined here and read through ``rtxcore.jit.validate`` (its
``MAX_*`` names, which a caller may raise) when a document's check begins
(``Limits``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .. import dtype as D
from .ir import Ref

# -- limits ----------------------------------------------------------------------------

MAX_NODES = 1_000_000
MAX_VALUES = 4_000_000
MAX_RANK = 32
MAX_INT = 2**62  # any id, stride, offset, count in a file
MAX_NUMEL = 2**59  # elements of one value (its bytes stay below 2**62)
MAX_BYTES = 16 * 2**30  # all buffers together (see validate.max_bytes)
MAX_ARG_INDEX = 65535  # an argument position
MAX_ARG_DEPTH = 4  # nesting of a kernel argument (a tuple of refs is depth 2)
MAX_OUTPUT_DEPTH = 32  # nesting of the outputs (tuples of lists of dicts ...)
MAX_FUSED_STEPS = 1024
MAX_FUSED_INPUTS = 256
MAX_NAME = 256
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")  # const and external input names
_FLOAT_TEXT = re.compile(r"-?(nan|inf|[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)")

DTYPES: dict[str, D.DType] = {d.name: d for d in D.ALL}  # canonical names only


@dataclass(frozen=True)
class Limits:
    """The limits the node, kernel and program checks of one document run under
    (``rtxcore.jit.validate`` reads its ``MAX_*`` into one as a check begins)."""

    rank: int = MAX_RANK
    numel: int = MAX_NUMEL
    arg_index: int = MAX_ARG_INDEX
    arg_depth: int = MAX_ARG_DEPTH
    fused_steps: int = MAX_FUSED_STEPS
    fused_inputs: int = MAX_FUSED_INPUTS
    name: int = MAX_NAME


LIMITS = Limits()  # as defined here


# -- reading one field -------------------------------------------------------------------


def _show(x: Any) -> str:
    try:
        r = repr(x)
    except Exception:  # pragma: no cover - JSON values always have a repr
        r = f"<{type(x).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


class _Bad(ValueError):
    pass


def _fail(where: str, what: str, expect: str, got: Any) -> _Bad:
    return _Bad(f"{where}: {what} must be {expect}, got {_show(got)}")


def _is_int(x: Any) -> bool:
    return type(x) is int


def _int(x: Any, where: str, what: str, lo: int = 0, hi: int = MAX_INT) -> int:
    if type(x) is not int or not lo <= x <= hi:
        bound = f"an int >= {lo}" if hi == MAX_INT else f"an int in [{lo}, {hi}]"
        raise _fail(where, what, bound, x)
    return x


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _is_scalar(x: Any) -> bool:
    return type(x) in (bool, int, float)


def _scalar_fits(v: Any, dt: str) -> bool:
    """Whether Python scalar ``v`` is a valid operand of a kernel computing in
    dtype ``dt`` (the core converts scalars to the op's dtype first)."""
    t = type(v)
    if t is bool:
        return True
    d = DTYPES[dt]
    if t is int:
        if d.kind == "b":
            return False
        if d.kind == "f":
            return -2**64 <= v <= 2**64
        import numpy as np

        info = np.iinfo(d.numpy)
        return int(info.min) <= v <= int(info.max)
    if t is float:
        return d.kind == "f"
    return False


def _keys(attrs: dict[str, Any], want: set[str], where: str) -> None:
    if set(attrs) != want:
        raise _Bad(f"{where}: attrs must have the keys {sorted(want)}, got "
                   f"{sorted(map(str, attrs))}")


def _name(x: Any, where: str, what: str, longest: int = 0) -> str:
    longest = longest or MAX_NAME
    if type(x) is not str or len(x) > longest or not NAME.fullmatch(x):
        raise _fail(where, what, f"a name of letters, digits, '_', '.' and '-' (at most "
                    f"{longest}, not starting with '.' or '-')", x)
    return x


# -- kernel arguments --------------------------------------------------------------------


def decode_arg(a: Any, where: str, depth: int = 0, limits: "Limits | None" = None) -> Any:
    """A kernel argument from its JSON (``ir.encode_arg``'s encoding), strictly:
    refs, bools, ints of at most 64 bits, floats (non-finite ones and integral
    ones tagged ``{"float": text}``), tuples, lists, null, strings, dtypes."""
    lim = limits or LIMITS
    if depth > lim.arg_depth:
        raise _Bad(f"{where}: nests deeper than {lim.arg_depth}")
    t = type(a)
    if a is None or t in (bool, str, float):
        if t is str and len(a) > lim.name:
            raise _fail(where, "a string argument", f"at most {lim.name} characters", a)
        return a
    if t is int:
        if not -2**63 <= a < 2**64:
            raise _fail(where, "an int argument", "within 64 bits", a)
        return a
    if t is list:
        return [decode_arg(x, f"{where}[{i}]", depth + 1, lim) for i, x in enumerate(a)]
    if t is dict and len(a) == 1:
        (k, v), = a.items()
        if k == "ref":
            return Ref(_int(v, where, "ref", 0))
        if k == "float":
            if type(v) is not str or len(v) > 40 or not _FLOAT_TEXT.fullmatch(v):
                raise _fail(where, "float", "a float's text ('nan', 'inf', '-inf', '2.0')", v)
            return float(v)
        if k == "tuple":
            if type(v) is not list:
                raise _fail(where, "tuple", "a list", v)
            return tuple(decode_arg(x, f"{where}[{i}]", depth + 1, lim) for i, x in enumerate(v))
        if k == "dtype":
            if type(v) is not str or v not in DTYPES:
                raise _fail(where, "dtype", f"one of {', '.join(DTYPES)}", v)
            return DTYPES[v]
    raise _fail(where, "an argument", 'a ref {"ref": id}, a scalar, a list, a tuple '
                '{"tuple": [...]}, a float {"float": text}, a dtype {"dtype": name}, a string '
                "or null", a)
