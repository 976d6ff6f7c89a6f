"""Fused elementwise groups on NumPy: the group's kernels run block by block.

Each block of ``BLOCK`` elements goes through every step before the next block
starts, so the intermediates live in small scratch arrays that stay in cache,
and a step's result that nothing outside the group reads is never written to a
full-size buffer. The steps are this backend's own kernels, so results equal
the unfused ones bit for bit -- but for a group ending in a sum of everything
(``"reduce": "all"``), which sums each block and then the blocks' sums: the
same float rounding, another order. A sum over rows (``"reduce": "rows"``) runs
on blocks of whole rows, row by row as the unfused sum does.

A group of ``PARALLEL_MIN`` elements or more spreads its blocks over threads
(``threads()``): NumPy releases the GIL inside each ufunc call, so on two
cores a 4M-element GELU group runs in about 0.6 of its one-thread time.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

import numpy as np
from rtxcore.dispatch.fused import elementwise_steps
from rtxcore.dispatch.threads import DEFAULT as DEFAULT_THREADS
from rtxcore.dispatch.threads import requested as requested_threads

BLOCK = 1 << 16


def runner(program: dict[str, Any], kernels: dict[str, Callable[..., None]]) -> Callable[..., None] | None:
    steps = program["steps"]
    if elementwise_steps(program) is None or any(op not in kernels for op, _, _ in steps):
        return None
    from . import cfused

    compiled = cfused.runner(program, threads, pool, C_PARALLEL_MIN)
    if compiled is not None:  # one C loop, where every step allows it
        return compiled
    n = program["n"]
    reduce = program.get("reduce")
    last_step = len(steps) - 1 if reduce else -1  # the sum ending the group
    outputs = {k: j for j, k in enumerate(program["outputs"])}
    plan = [(kernels[op], np.dtype(dt if dt != "bool" else np.bool_), operands)
            for op, dt, operands in steps]

    # scratch slots, reused once a step's result has had its last reader (fewer
    # block-sized arrays: the working set stays in cache). A ufunc step may write
    # over an operand that dies at it: a ufunc reads each element before writing
    # it, and a result in the slot its operand just used stays hot. Other kernels
    # may not (``where`` fills its output from y, then copies x over it), so their
    # dying operands' slots are freed only after theirs is picked.
    last = {}
    for k, (_, _, operands) in enumerate(plan):
        for kind, v in operands:
            if kind == "step":
                last[v] = k
    slot_of: dict[int, int] = {}
    slot_dtype: list[np.dtype] = []
    free: list[int] = []
    for k, (kern, dt, operands) in enumerate(plan):
        dying = [slot_of[v] for kind, v in operands
                 if kind == "step" and last.get(v) == k and v in slot_of]
        in_place_ok = getattr(kern, "ufunc", None) is not None
        if in_place_ok:
            free += [s for s in dict.fromkeys(dying) if s not in free]
        if k not in outputs and k != last_step:
            pick = next((s for s in free if slot_dtype[s] == dt), None)
            if pick is None:
                slot_dtype.append(dt)
                pick = len(slot_dtype) - 1
            else:
                free.remove(pick)
            slot_of[k] = pick
        if not in_place_ok:
            free += [s for s in dict.fromkeys(dying) if s not in free]

    # the block loop as straight-line Python, made once per program: one call per
    # step and block, no per-operand dispatch (at 4M elements and 64K blocks a
    # ten-step group makes ~650 calls, and interpreting the plan each time cost
    # a third of the group's time). A kernel that is a plain ufunc (``.ufunc``,
    # see ``rtxcore.dispatch.xp``) is called directly, with a float constant
    # made the step's own float type, as NumPy would convert it anyway.
    # With row/column operands (``cols``) blocks are whole rows, (m, cols)
    # arrays, and NumPy broadcasts a row vector, a column slice or a scalar
    # against them; otherwise blocks are flat runs of elements.
    kinds: dict[int, str] = {}
    for _, _, operands in plan:
        for kind, v in operands:
            if kind in ("in", "scalar", "row", "col"):
                kinds[v] = kind
    cols = program.get("cols", 0)
    env: dict[str, Any] = {"np": np, "BLOCK": BLOCK, "__name__": __name__}  # warnings filter
    if cols:
        rows = n // cols
        whole, per = f"({rows}, {cols})", max(1, BLOCK // cols)
        shape_of = {"scalar": "(1, 1)", "row": f"(1, {cols})", "col": f"({rows}, 1)"}
        lines = ["def run(outs, ins, lo, hi, R):",
                 *(f"    I{v} = ins[{v}].reshape({whole if k == 'in' else shape_of[k]})"
                   for v, k in sorted(kinds.items())),
                 *(f"    O{j} = outs[{j}].reshape({whole if k != last_step else (rows, 1) if reduce == 'rows' else (1,)})"
                   for k, j in outputs.items()),
                 *(f"    S{s} = np.empty(({min(per, rows)}, {cols}), D{s})"
                   for s in range(len(slot_dtype))),
                 f"    for i in range(lo, hi, {per}):",
                 f"        j = min(i + {per}, hi)",
                 "        m = j - i"]
        block_shape = f"(m, {cols})"
        blocks, per_block, keep, total = -(-rows // per), per, "(1, 1)", rows
    else:
        lines = ["def run(outs, ins, lo, hi, R):",
                 *(f"    I{v} = ins[{v}].reshape(-1)" for v in sorted(kinds)),
                 *(f"    O{j} = outs[{j}].reshape(-1)" for j in range(len(outputs))),
                 f"    size = min(BLOCK, {n})",
                 *(f"    S{s} = np.empty(size, D{s})" for s in range(len(slot_dtype))),
                 "    for i in range(lo, hi, BLOCK):",
                 "        j = min(i + BLOCK, hi)",
                 "        m = j - i"]
        block_shape = "(m,)"
        blocks, per_block, keep, total = -(-n // BLOCK), BLOCK, "(1,)", n
    partials = reduce == "all" and blocks > 1  # each block's sum into R, then theirs
    # an input's block: its rows (or run) of this block; a row vector or a
    # scalar is the same array for every block
    lines += [f"        i{v} = I{v}[i:j]" if k in ("in", "col") else f"        i{v} = I{v}"
              for v, k in sorted(kinds.items())]
    for s, dt in enumerate(slot_dtype):
        env[f"D{s}"] = dt
    for k, (kern, dt, operands) in enumerate(plan):
        if k == last_step:
            env["KSUM"] = kern
            (_, src), = operands
            if reduce == "rows":
                lines.append(f"        KSUM(O{outputs[k]}[i:j], v{src}, (1,))")
            elif blocks == 1:  # one block: its sum is the sum
                lines.append(f"        KSUM(O{outputs[k]}.reshape({keep}), v{src}, "
                             f"{'(0, 1)' if cols else '(0,)'})")
            else:
                b = f"i // {per_block}"
                lines.append(f"        KSUM(R[{b}:{b} + 1].reshape({keep}), v{src}, "
                             f"{'(0, 1)' if cols else '(0,)'})")
            continue
        ufunc = getattr(kern, "ufunc", None)
        env[f"K{k}"] = ufunc or kern
        args = []
        for kind, v in operands:
            if kind == "in" or (kind in ("scalar", "row", "col") and ufunc is not None):
                args.append(f"i{v}")
            elif kind in ("scalar", "row", "col"):  # other kernels take views broadcast
                args.append(f"np.broadcast_to(i{v}, {block_shape})")  # to the output's shape
            elif kind == "step":
                args.append(f"v{v}")
            else:
                if ufunc is not None and isinstance(v, float) and dt.kind == "f" \
                        and all(kd in ("const", "step") or program["inputs"][w] == dt.name
                                for kd, w in operands):
                    v = dt.type(v)
                env[f"C{k}_{len(args)}"] = v
                args.append(f"C{k}_{len(args)}")
        dst = f"O{outputs[k]}[i:j]" if k in outputs else f"S{slot_of[k]}[:m]"
        lines.append(f"        v{k} = {dst}")
        lines.append(f"        K{k}({', '.join(args)}, out=v{k})" if ufunc is not None
                     else f"        K{k}(v{k}, {', '.join(args)})")
    exec(compile("\n".join(lines), f"<fused cpu program of {len(plan)} steps>", "exec"), env)
    return _parallel(env["run"], n, total, per_block, blocks,
                     (plan[-1][0], plan[-1][1], outputs[last_step]) if partials else None)


PARALLEL_MIN = 1 << 19  # elements: a smaller group runs on the calling thread alone
C_PARALLEL_MIN = 1 << 20  # the same for a compiled group (its whole loop lets go of the GIL)
_pool: Any = None
_WORKER = "rtx-cpu-fused"  # the pool's threads' names start so
hush: Callable[[], None] | None = None  # ``cpool``'s, once it is loaded


def threads() -> int:
    """Threads a large group's blocks are spread over: ``rtxcore.set_num_threads``'
    value, else the default (``OMP_NUM_THREADS``, else the CPUs this process may
    run on; at most 8 here)."""
    return requested_threads() or _CPUS


def in_pool() -> bool:
    """Whether the calling thread is one of ``pool()``'s: work it hands out runs on
    it alone (it would wait on its own pool)."""
    return threading.current_thread().name.startswith(_WORKER)


def split(units: int, run: Callable[[int, int], Any], parallel: bool) -> list[Any]:
    """``run(lo, hi)`` over ``range(units)`` in contiguous runs, one a thread of
    ``threads()`` where ``parallel`` (never from one of the pool's own threads: it
    would wait on its own pool); the runs' results in order. Every run handed
    out is waited for, whatever fails (the C loops write through raw pointers)."""
    parts = min(threads(), units) if parallel else 1
    if parts <= 1 or in_pool():
        return [run(0, units)]
    step = -(-units // parts)
    futures = []
    try:
        for lo in range(step, units, step):
            futures.append(pool().submit(run, lo, min(lo + step, units)))
        first = run(0, min(step, units))
    finally:
        rest = [f.result() for f in futures]
    return [first, *rest]


def pool() -> Any:
    """The backend's worker threads (7: with the calling thread, ``threads()``'
    most), made at first use; shared by fused groups and blocked kernels
    (``kernels.layer_norm``)."""
    global _pool
    if hush is not None:
        hush()  # (the C pool's spinning workers leave the cores to this one's)
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(max_workers=7, thread_name_prefix=_WORKER)
    return _pool


_CPUS = min(8, DEFAULT_THREADS)


def _forget_pool() -> None:
    """In a child made by ``fork`` the pool's threads are gone (fork copies the
    calling thread alone), and work handed to them would wait forever: the child
    makes a pool of its own at first use."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _parallel(run: Callable[..., None], n: int, total: int, unit: int, blocks: int,
              partial: tuple[Any, np.dtype, int] | None) -> Callable[..., None]:
    """``run(outs, ins)`` over all blocks: ``run_range`` over contiguous runs of
    whole blocks, one per thread for a large group (NumPy lets go of the GIL
    inside each ufunc call, and a 64K-element call is long enough to overlap
    well). Every element belongs to one block and every block to one thread, so
    the result is the same whatever the thread count; a sum of everything adds
    its blocks' sums, each in its own slot of ``R``, in block order."""
    ksum, rdt, j = partial or (None, None, 0)

    def call(outs: list[Any], ins: list[Any]) -> None:
        R = np.empty(blocks, rdt) if partial else None
        parts = min(threads(), blocks // 2) if n >= PARALLEL_MIN else 1
        if parts > 1:
            step = -(-blocks // parts) * unit
            futures = [pool().submit(run, outs, ins, lo, min(lo + step, total), R)
                       for lo in range(step, total, step)]
            run(outs, ins, 0, min(step, total), R)
            for f in futures:
                f.result()
        else:
            run(outs, ins, 0, total, R)
        if partial:
            ksum(outs[j].reshape(1), R, (0,))

    return call
