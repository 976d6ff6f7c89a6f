"""``rtxcore.backends.cuda``: PyTorch's CUDA math switches
(``matmul.allow_tf32``, the scaled-dot-product-attention kernel choices).
Stored, and changing nothing: rtxcore's matmul computes in the dtype of its
inputs (never TF32) and ``scaled_dot_product_attention`` has one implementation.
``is_built()`` says whether the rtx-cuda backend is installed."""

from __future__ import annotations

from typing import Any


class _Flags:
    """An object with a fixed set of boolean switches; an unknown name is an
    AttributeError, as in PyTorch (a typo must not pass silently)."""

    def __init__(self, what: str, **defaults: bool) -> None:
        object.__setattr__(self, "_what", what)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"{self._what} has no attribute {name!r}; known: {', '.join(values)}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._values:
            raise AttributeError(f"Unknown attribute {name!r} of {self._what}; known: "
                                 f"{', '.join(self._values)}")
        self._values[name] = value

    def __repr__(self) -> str:
        return f"<{self._what}: {self._values}>"


matmul = _Flags("rtxcore.backends.cuda.matmul", allow_tf32=False,
                allow_fp16_reduced_precision_reduction=True,
                allow_bf16_reduced_precision_reduction=True)

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """Whether the rtx-cuda backend is installed (it may still have no device:
    see ``rtxcore.cuda.is_available()``)."""
    from ..dispatch.registry import registry

    registry.ensure_loaded()
    return "cuda" in registry.backends


def enable_flash_sdp(enabled: bool) -> None:
    _sdp["flash"] = bool(enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]
