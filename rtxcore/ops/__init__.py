"""Op front-ends, one module per family. Public names are re-exported by
``rtxcore`` itself; import from there.

From the bottom up (a module imports only modules listed before it):

- ``host_data`` (host data as NumPy arrays) and ``core`` (allocation, views,
  casts, the elementwise and reduction drivers)
- pointwise: ``arithmetic`` (the primitives, integer division, rounding),
  ``comparison``, ``elementwise`` (pointwise math, and the namespace of all
  three); ``checks`` (index bounds checks); ``special`` (inverse trig,
  erfc/erfinv, atan2, ...)
- ``views``; making tensors: ``factory_args``, ``random``, ``conversion``,
  ``creation``
- ``joining``, ``sorting``, ``triangular``, ``reduction``, ``indexing``,
  ``reorder``
- ``linalg``, ``einsum``, ``norms``; ``scans``, ``statistics``, ``counting``,
  ``scatter``, ``matrices``, ``sampling``
- ``out`` (PyTorch's ``out=``) and ``tensor_methods`` (the methods that
  rtxcore/tensor.py binds from the later families)
"""
