"""Autograd: the tape, backward rules and the engine (built in the next stage).

Every differentiable op front-end funnels through a few drivers in
``rtxcore/ops/core.py`` (``unary``, ``binary``, ``where``, ``reduce``,
``as_view``) and ``ops/linalg.matmul``; recording a graph node hooks in there.
"""
