"""One backward rule per recorded op, written with rtxcore ops, one module per op
family: pointwise math, reductions, views and selection, matrix products, and
the in-place changes through a view. Importing this package registers them all.

Because rules call the same recorded ops as user code, a backward run with
``create_graph=True`` records too: every rule differentiates again.

Ops without a rule here (``softplus``, ``std``, ``einsum``, ``stack``,
``roll``, ...) are composites of ops that have one.
"""

from __future__ import annotations

from . import linalg, pointwise, reductions, selection  # noqa: F401  (each registers its rules)
from .inplace_views import AsStridedBackward, CopySlices, copy_slices, view_of_base  # noqa: F401
from .registry import arg, in_shape, rule  # noqa: F401
from .selection import positions  # noqa: F401
