"""Fused elementwise groups on NumPy: the group's kernels run block by block.

Each block of ``BLOCK`` elements goes through every step before the next block
starts, so the intermediates live in small scratch arrays that stay in cache,
and a step's result that nothing outside the group reads is never written to a
full-size buffer. The steps are this backend's own kernels, so results equal
the unfused ones bit for bit.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

BLOCK = 1 << 15


def runner(program: dict[str, Any], kernels: dict[str, Callable[..., None]]) -> Callable[..., None] | None:
    steps = program["steps"]
    if any(op not in kernels for op, _, _ in steps):
        return None
    n = program["n"]
    outputs = {k: j for j, k in enumerate(program["outputs"])}
    plan = [(kernels[op], np.dtype(dt if dt != "bool" else np.bool_), operands)
            for op, dt, operands in steps]

    # scratch slots, reused once a step's result has had its last reader (fewer
    # block-sized arrays: the working set stays in cache)
    last = {}
    for k, (_, _, operands) in enumerate(plan):
        for kind, v in operands:
            if kind == "step":
                last[v] = k
    slot_of: dict[int, int] = {}
    slot_dtype: list[np.dtype] = []
    free: list[int] = []
    for k, (_, dt, operands) in enumerate(plan):
        dying = [v for kind, v in operands if kind == "step" and last.get(v) == k
                 and v in slot_of]
        if k not in outputs:
            pick = next((s for s in free if slot_dtype[s] == dt), None)
            if pick is None:
                slot_dtype.append(dt)
                pick = len(slot_dtype) - 1
            else:
                free.remove(pick)
            slot_of[k] = pick
        free.extend(slot_of[v] for v in dying if slot_of[v] not in free and v != k)

    def run(outs: list[np.ndarray], ins: list[np.ndarray]) -> None:
        flat_in = [a.reshape(-1) for a in ins]
        flat_out = [a.reshape(-1) for a in outs]
        size = min(BLOCK, n)
        slots = [np.empty(size, dt) for dt in slot_dtype]
        scratch = [None if k in outputs else slots[slot_of[k]] for k in range(len(plan))]
        for i in range(0, n, BLOCK):
            j = min(i + BLOCK, n)
            m = j - i
            vals: list[Any] = []
            for k, (kern, _, operands) in enumerate(plan):
                args = []
                for kind, v in operands:
                    if kind == "in":
                        args.append(flat_in[v][i:j])
                    elif kind == "step":
                        args.append(vals[v])
                    else:
                        args.append(v)
                o = flat_out[outputs[k]][i:j] if k in outputs else scratch[k][:m]
                kern(o, *args)
                vals.append(o)

    return run
