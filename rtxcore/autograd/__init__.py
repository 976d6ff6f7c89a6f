"""Define-by-run automatic differentiation.

Recording (``tape.py``) happens in the op front-ends; ``rules/`` holds one
backward rule per recorded op; ``engine.py`` runs backward. Public API, as in
PyTorch: ``backward``, ``grad``, ``Function``, ``no_grad``/``enable_grad``/
``set_grad_enabled``/``inference_mode``, ``gradcheck``/``gradgradcheck``, and
``to_dot``/``render`` to draw a graph.
"""

from __future__ import annotations

from typing import Any

from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
# eager: the submodule is named like the function, so once imported (e.g. for
# GradcheckError) it would shadow a lazily bound ``gradcheck``
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

_LAZY = {
    "backward": ("engine", "backward"),
    "grad": ("engine", "grad"),
    "Function": ("function", "Function"),
    "FunctionCtx": ("function", "FunctionCtx"),
    "once_differentiable": ("function", "once_differentiable"),
    "to_dot": ("graph", "to_dot"),
    "render": ("graph", "render"),
    "Variable": ("variable_legacy", "Variable"),
}

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "gradcheck", "gradgradcheck", "GradcheckError", *_LAZY]


def __getattr__(name: str) -> Any:
    # the engine and friends import the op modules, which import this package
    # (for the tape): load them on first use
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{mod}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
