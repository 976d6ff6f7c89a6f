"""The graph passes, each a small function returning a new Graph, and
``optimize(graph)``, which runs them in this order:

``dead_code``, ``cse`` and ``fold_constants`` take work out (``simplify``);
``fuse_elementwise`` makes runs of elementwise kernels one ``fused`` node
(``fusion``); ``plan_memory`` lets buffers share memory (``memory_plan``).
"""

from __future__ import annotations

from .fusion import (ELEMENTWISE, MAX_BUFFERS, MAX_STEPS, NOT_IN_PLACE, REDUCIBLE,  # noqa: F401
                     fuse_elementwise)
from .graph import Graph
from .graph import root_of as _root  # noqa: F401  (passes._root)
from .memory_plan import plan_memory
from .simplify import PURE_SKIP, cse, dead_code, fold_constants  # noqa: F401

__all__ = ["dead_code", "cse", "fold_constants", "fuse_elementwise", "plan_memory", "optimize"]


def optimize(g: Graph) -> Graph:
    return plan_memory(fuse_elementwise(fold_constants(cse(dead_code(g)))))
