"""Block-alternated timing, shared by ``benchmarks/ops.py`` and ``benchmarks/compile.py``.

The sides being compared take turns in blocks: one side runs ``block``
consecutive measurements, the first of which is not timed, then the next side
its block, and so on round after round. At the default thread counts PyTorch's
OpenMP workers spin on for a while after its last op, so a call timed right
after one of PyTorch's shares the cores with them (and vice versa); per-call
alternation made rtxcore's MLP step read 3.7-3.9 ms next to PyTorch's against
2.2-2.5 ms with ``OMP_WAIT_POLICY=PASSIVE``. ``benchmarks/models.py`` alternates
its steps the same way (``BLOCK``). A block should last at least a few ms: a
caller with very short calls makes one measurement many calls (as ops.py does)
or passes a larger ``block``.
"""

from __future__ import annotations

import random
import statistics
from typing import Callable, Optional, Sequence

BLOCK = 4  # measurements of one side between the others' (the first one untimed)


def blocks(fns: Sequence[Callable[[], Optional[float]]], rounds: int, block: int = BLOCK,
           shuffle: random.Random | None = None) -> list[float | None]:
    """The median of ``rounds`` timed measurements of each fn, the fns taking turns in blocks.

    Each ``fn()`` makes one measurement and returns its time in seconds (any unit
    works: the median is of what it returns), or None when it failed: that fn is
    then dropped from the rest of the run. A block is ``block`` consecutive
    measurements of one fn whose first is not timed; blocks go round the fns
    (in a new order each round if ``shuffle``, a ``random.Random``, is given)
    until each fn has ``rounds`` timed measurements (the last round's blocks are
    shorter if ``rounds`` is not a multiple of ``block - 1``). Returns the
    medians in the order of ``fns``, None for a fn without a timed measurement.
    """
    if block < 2:
        raise ValueError("block must be at least 2 (one untimed measurement, one timed)")
    times: list[list[float]] = [[] for _ in fns]
    live = list(range(len(fns)))
    done = 0
    while done < rounds and live:
        n = min(block - 1, rounds - done)  # timed measurements in this round's blocks
        order = shuffle.sample(live, len(live)) if shuffle is not None else list(live)
        for k in order:
            for j in range(n + 1):
                dt = fns[k]()
                if dt is None:
                    live.remove(k)
                    break
                if j:  # the block's first measurement is not timed
                    times[k].append(dt)
        done += n
    return [statistics.median(t) if t else None for t in times]
