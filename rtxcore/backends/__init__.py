"""``rtxcore.backends``: the switches PyTorch scripts set on ``torch.backends``
(``cudnn.benchmark``, ``cuda.matmul.allow_tf32``, ``mps.is_available()``, ...).

rtxcore does not use cuDNN, TF32, MPS or opt_einsum, so the flags are stored
(a script reads back what it set) and change nothing; the ``is_available()``
queries answer False for what rtxcore does not use. Devices and their backends
are ``rtxcore.device`` and ``rtx info``; this package is not the plugin registry.
"""

from __future__ import annotations

from . import cpu, cuda, cudnn, mps, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mps", "opt_einsum"]
