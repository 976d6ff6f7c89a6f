"""``rtxcore.backends.cpu``: PyTorch's CPU capability query."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """The SIMD level NumPy (the rtx-cpu backend) dispatches to, e.g. ``'AVX2'``;
    ``'DEFAULT'`` when NumPy does not say."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats  # type: ignore
    except ImportError:
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as feats  # type: ignore
        except ImportError:
            return "DEFAULT"
    for name in ("AVX512F", "AVX2", "NEON", "VSX"):
        if feats.get(name):
            return {"AVX512F": "AVX512"}.get(name, name)
    return "DEFAULT"
