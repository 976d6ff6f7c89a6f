"""Upsampling layers: ``PixelShuffle`` / ``PixelUnshuffle`` and ``Upsample`` (with
``UpsamplingNearest2d`` / ``UpsamplingBilinear2d``), over ``rtxcore.nn.functional``."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from ._layer_base import _FunctionalLayer
from .module import Module


class PixelShuffle(_FunctionalLayer):
    """(*, C * r * r, H, W) to (*, C, H * r, W * r), ``r`` the ``upscale_factor``."""

    _fn = "pixel_shuffle"

    def __init__(self, upscale_factor: int) -> None:
        super().__init__(upscale_factor=upscale_factor)


class PixelUnshuffle(_FunctionalLayer):
    """(*, C, H * r, W * r) to (*, C * r * r, H, W), ``r`` the ``downscale_factor``."""

    _fn = "pixel_unshuffle"

    def __init__(self, downscale_factor: int) -> None:
        super().__init__(downscale_factor=downscale_factor)


class Upsample(Module):
    """``F.interpolate`` with fixed arguments."""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
