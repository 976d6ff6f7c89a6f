"""The Tensor methods of the op families that rtxcore/tensor.py does not bind one
by one: special functions, comparisons, statistics, scans, counting, writes at
indices, matrices, triangles, reordering, norms, sampling and memory placement.

``METHODS`` names them all; each name is also an attribute here (the function
of the family module that holds it), and ``is_cuda`` is the function behind the
``Tensor.is_cuda`` property.
"""

from __future__ import annotations

from . import (comparison, conversion, counting, matrices, norms, reorder, sampling, scans, scatter,
               special, statistics, triangular)

FAMILIES = (special, comparison, statistics, scans, counting, scatter, matrices, triangular, reorder,
            norms, sampling, conversion)

METHODS: list[str] = []
for _family in FAMILIES:
    for _name in _family.METHODS:
        globals()[_name] = getattr(_family, _name)
        METHODS.append(_name)
del _family, _name

is_cuda = conversion.is_cuda
