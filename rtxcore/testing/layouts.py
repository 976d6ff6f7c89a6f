"""Every kernel a device supplies, on every dtype it claims and every layout a
kernel must handle, each op in isolation.

A row calls one kernel and nothing else: its inputs are NumPy arrays, copied to
the device (``from_host``) and laid out there with views (no kernels); its
outputs are allocated with ``empty`` and read back with ``to_host``. So a
missing or wrong kernel fails its own row and no other. Elementwise ops,
reductions, scans and indexing are compared with the NumPy reference their
``OpSpec`` names (``rtxcore.dispatch.ops``) on the values the layout holds;
the memory ops, whose front-ends call just their kernel, with the same calls
on ``cpu``; the composites without a NumPy reference with the core's own
decomposition on ``cpu``. Input sets include the special values (see
:func:`values`). Layouts:

    contiguous   a fresh tensor
    transposed   .t() of a contiguous one (strides reversed)
    sliced       every other column of a wider tensor (a step in the strides)
    offset       rows 1.. of a taller tensor (a storage offset)
    broadcast    one row expanded to all (a stride-0 dimension)
    empty        zero rows
    scalar       a 0-d tensor

Elementwise rows also pass Python scalars as operands and run in place (the
target, possibly strided, as both ``out`` and ``x``).

The pieces: ``arrays`` (the values, the layouts, comparing), ``calls`` (one
kernel called alone), ``rows`` (each op's calls and references, the memory
ops' cases), ``composites`` (the composites without a NumPy reference); this
module runs one op, dtype and layout of them (``check``, ``composite_check``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dispatch import ops as OPS
from .arrays import (_LOOSE_OPS, _SUM_OPS, LAYOUTS, LOOSE, NA, RTOL, SHAPE,  # noqa: F401
                     SUMS, claimed_dtypes, compare, dtype_named, host_values, laid_out, logical,
                     special_values, stable_seed, values)
from .calls import Arr, Call, _Batch, run_call  # noqa: F401
from .composites import check_composite_front, decomposed_on_cpu  # noqa: F401
from .rows import CASES, COMPOSITE_ROWS, ROWS, Case, Row  # noqa: F401


def calls_for(op: str, dtype: Any, layout: str) -> Any:
    """The kernel calls of ``op``'s row (or NA)."""
    row = ROWS.get(op) or COMPOSITE_ROWS[op]
    return row(op, dtype, layout)


def check(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    """("pass" | "fail" | "n/a", worst difference, detail) of one op, dtype, layout."""
    if op in CASES:
        return _check_case(device, op, dtype, layout)
    try:
        calls = calls_for(op, dtype, layout)
    except Exception as exc:  # the reference itself: a bug in the suite, said loudly
        return "fail", float("inf"), f"the reference raised {type(exc).__name__}: {exc}".splitlines()[0][:160]
    if calls is NA:
        return "n/a", 0.0, ""
    worst = 0.0
    for call in calls:
        try:
            got = run_call(device, op, call)
        except Exception as exc:
            return "fail", float("inf"), f"{call.label}: {type(exc).__name__}: {exc}".splitlines()[0][:160]
        want = call.want if isinstance(call.want, tuple) else (call.want,)
        want = tuple(np.asarray(e) for e in want)
        loose = call.loose or op in _LOOSE_OPS
        ok, w, what = compare(got, want, loose)
        worst = max(worst, w)
        if not ok:  # again, to show the inputs at the first difference
            _, _, what = compare(got, want, loose, inputs=_call_inputs(op, call))
            return "fail", w, f"{call.label}: {what}"
    return "pass", worst, ""


def _call_inputs(op: str, call: Any) -> list[tuple[str, Any]]:
    """(operand name, logical host value) of a call's inputs, for a failure message."""
    try:
        names = [n for n in OPS.spec(op).operands if n != "out"]
    except KeyError:
        names = []
    out = []
    for k, a in enumerate(call.args):
        name = names[k] if k < len(names) else f"arg{k}"
        if isinstance(a, Arr):
            out.append((name, a.value))
        elif isinstance(a, (bool, int, float)):
            out.append((name, a))
    return out


def _check_case(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    case = CASES[op]
    inputs = None
    try:
        want = case("cpu", dtype, layout, device)
        if want is not NA:
            inputs = [(n, host_values(v)) for n, v in getattr(want, "inputs", None) or []]
            want = host_values(want)
    except Exception as exc:
        # never "not applicable" by accident: a case says NA itself
        return "fail", float("inf"), f"the cpu reference raised {type(exc).__name__}: {exc}".splitlines()[0][:160]
    if want is NA:
        return "n/a", 0.0, ""
    try:
        got = host_values(case(device, dtype, layout, device))
    except Exception as exc:
        return "fail", float("inf"), f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    ok, worst, what = compare(got, want, inputs=inputs)
    return ("pass" if ok else "fail"), worst, what


def composite_check(device: str, op: str, dtype: Any, layout: str) -> tuple[str, float, str]:
    """One composite kernel a device supplies, one dtype, one layout."""
    if op in COMPOSITE_ROWS:
        return check(device, op, dtype, layout)
    if layout != "contiguous":
        return "n/a", 0.0, ""
    return check_composite_front(device, op, dtype)
