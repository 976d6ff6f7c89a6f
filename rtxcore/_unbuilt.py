"""PyTorch modules rtxcore does not have, and what to do instead: the one place
that says so. ``rtxcore.onnx`` (attribute access) raises ``UnbuiltAttributeError``
(an AttributeError), ``import rtxcore.onnx`` raises ``UnbuiltModuleError`` (an
ImportError); both carry the message below."""

from __future__ import annotations

UNBUILT: dict[str, str] = {
    "utils.tensorboard": "is out of scope for rtxcore: log scalars with the standalone "
                         "`tensorboard`/`tensorboardX` packages, passing them tensor.item() "
                         "or tensor.numpy() values",
    "sparse": "is out of scope for rtxcore (only dense strided tensors exist): keep sparse "
              "data as index/value tensors and use index_select / scatter_add / index_add",
    "onnx": "is out of scope for rtxcore: export from PyTorch, or save weights with "
            "rtxcore.save and load them there",
}


class UnbuiltAttributeError(AttributeError):
    """``rtxcore.<name>`` for a PyTorch module rtxcore does not have."""


class UnbuiltModuleError(ImportError):
    """``import rtxcore.<name>`` for a PyTorch module rtxcore does not have."""


def _message(qualname: str) -> str:
    key = qualname.partition(".")[2]
    return f"{qualname} {UNBUILT[key]}"


def refuse_attribute(module: str, name: str) -> UnbuiltAttributeError:
    qual = f"{module}.{name}"
    return UnbuiltAttributeError(_message(qual), name=name)


def refuse_import(module: str) -> UnbuiltModuleError:
    """What a stub module raises when imported: ``raise refuse_import(__name__)``."""
    return UnbuiltModuleError(_message(module), name=module)
