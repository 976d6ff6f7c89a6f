"""Autograd: the tape, backward rules and the engine (the next stage).

Recording hooks in where the op front-ends call kernels; ``rtxcore/ops/core.py``'s
docstring lists those places. Tensors already carry an ``_ag`` slot (None
outside any graph) and every storage a ``version`` counter that in-place
writes bump.
"""
