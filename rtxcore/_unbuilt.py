"""PyTorch names rtxcore does not have on purpose, and what to do instead: the one
place that says so.

Modules (``UNBUILT``): ``rtxcore.onnx`` (attribute access) raises
``UnbuiltAttributeError`` (an AttributeError), ``import rtxcore.onnx`` raises
``UnbuiltModuleError`` (an ImportError); both carry the message below.

Names (``OUT_OF_SCOPE``): functions, classes and Tensor/Module methods, by where
PyTorch has them. Each owner's ``__getattr__`` (``rtxcore``, ``rtxcore.nn``,
``rtxcore.nn.functional``, ``rtxcore.optim``, ``Tensor``, ``nn.Module``) asks
``missing_attribute`` once ordinary lookup has failed, so a known name raises
``UnbuiltAttributeError`` naming the reason, and any other name the usual
AttributeError (with Python's "Did you mean" hint).
"""

from __future__ import annotations

UNBUILT: dict[str, str] = {
    "utils.tensorboard": "is out of scope for rtxcore: log scalars with the standalone "
                         "`tensorboard`/`tensorboardX` packages, passing them tensor.item() "
                         "or tensor.numpy() values",
    "sparse": "is out of scope for rtxcore (only dense strided tensors exist): keep sparse "
              "data as index/value tensors and use index_select / scatter_add / index_add",
    "onnx": "is out of scope for rtxcore: export from PyTorch, or save weights with "
            "rtxcore.save and load them there",
    "hub": "is out of scope for rtxcore: it downloads no models or code; load weights saved "
           "with rtxcore.save (or converted from PyTorch: see docs/porting.md), and take "
           "progress bars from tqdm itself",
}


# why a family of PyTorch names is not here, and what to use instead
REASONS: dict[str, str] = {
    "sparse": "only dense strided tensors exist: keep sparse data as index/value tensors "
              "and use index_select / scatter_add / index_add",
    "complex": "there are no complex dtypes: keep real and imaginary parts as two real "
               "tensors (or a trailing dim of 2)",
    "quantized": "there are no quantized tensors: quantize with PyTorch, or compute in "
                 "float16 under rtxcore.autocast",
    "layouts": "tensors have one layout, dense strided memory",
    "storage": "tensors expose no storage objects: compare memory with data_ptr(), read it "
               "with numpy()",
    "linalg": "rtxcore.linalg has norms and matmul only: decompose on the host with "
              "numpy.linalg on x.numpy() and bring the result back with rtxcore.from_numpy",
    "spectral": "there are no signal transforms: use numpy.fft on x.numpy()",
    "torchscript": "TorchScript is not here: rtxcore.jit.trace records a function as a graph "
                   "of kernels and rtxcore.compile runs it fused (docs/compile.md)",
    "bfloat16": "there is no bfloat16 dtype: use half() (float16) or float()",
    "nested": "nested (ragged) tensors are not here: pad to a common length "
              "(nn.utils.rnn.pad_sequence) and mask",
    "lazy": "lazy modules are not here: give the layer its input size",
    "named": "named tensors are not here: keep dims in a fixed order",
    "fake_devices": "rtxcore's devices are cpu, opencl and cuda",
    "resize": "tensors don't change size in place: make a new tensor (new_empty, cat, pad)",
}

# owner -> {name: reason}; owners are "rtxcore", "rtxcore.nn", "rtxcore.nn.functional",
# "rtxcore.optim", "Tensor" and "Module"
OUT_OF_SCOPE: dict[str, dict[str, str]] = {
    "rtxcore": {
        **dict.fromkeys(("sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor",
                         "sparse_bsr_tensor", "sparse_bsc_tensor", "sparse_compressed_tensor",
                         "smm", "hspmm", "sspaddmm"), "sparse"),
        **dict.fromkeys(("view_as_complex", "view_as_real", "complex", "polar", "conj_physical",
                         "imag"),
                        "complex"),
        **dict.fromkeys(("quantize_per_tensor", "quantize_per_channel", "dequantize",
                         "quantize_per_tensor_dynamic", "quantization", "ao"), "quantized"),
        **dict.fromkeys(("det", "logdet", "slogdet", "inverse", "pinverse", "svd", "qr",
                         "cholesky", "cholesky_solve", "cholesky_inverse", "lu", "lu_solve",
                         "lu_unpack", "triangular_solve", "matrix_exp", "lstsq", "geqrf",
                         "orgqr", "ormqr"), "linalg"),
        **dict.fromkeys(("fft", "stft", "istft"), "spectral"),
        **dict.fromkeys(("Storage", "UntypedStorage", "TypedStorage", "FloatStorage",
                         "DoubleStorage", "HalfStorage", "LongStorage", "IntStorage",
                         "ByteStorage", "BoolStorage"), "storage"),
        **dict.fromkeys(("sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc",
                         "_mkldnn"), "layouts"),
        "nested": "nested", "xpu": "fake_devices", "mps": "fake_devices",
        "mtia": "fake_devices", "xla": "fake_devices",
    },
    "rtxcore.nn": {
        **dict.fromkeys(("LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
                         "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
                         "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
                         "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
                         "UninitializedParameter", "UninitializedBuffer"), "lazy"),
        **dict.fromkeys(("quantized", "quantizable", "qat", "intrinsic"), "quantized"),
    },
    "rtxcore.nn.functional": {},
    "rtxcore.optim": {"SparseAdam": "sparse"},
    "Tensor": {
        **dict.fromkeys(("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc",
                         "to_sparse_bsr", "to_sparse_bsc", "sparse_mask", "sparse_dim",
                         "dense_dim", "indices", "values", "crow_indices", "col_indices",
                         "ccol_indices", "row_indices", "coalesce", "sparse_resize_",
                         "sparse_resize_and_clear_", "resize_as_sparse_", "smm", "sspaddmm",
                         "to_padded_tensor"), "sparse"),
        **dict.fromkeys(("imag", "cfloat", "cdouble", "chalf", "conj_physical",
                         "conj_physical_"), "complex"),
        **dict.fromkeys(("q_scale", "q_zero_point", "q_per_channel_scales",
                         "q_per_channel_zero_points", "q_per_channel_axis", "qscheme",
                         "int_repr", "dequantize"), "quantized"),
        **dict.fromkeys(("det", "logdet", "slogdet", "inverse", "pinverse", "svd", "qr",
                         "cholesky", "cholesky_solve", "cholesky_inverse", "lu", "lu_solve",
                         "triangular_solve", "matrix_exp", "lstsq", "geqrf", "orgqr", "ormqr",
                         "eig", "symeig", "solve"), "linalg"),
        **dict.fromkeys(("stft", "istft"), "spectral"),
        **dict.fromkeys(("storage", "untyped_storage", "storage_type", "set_"), "storage"),
        **dict.fromkeys(("to_mkldnn", "layout", "dim_order"), "layouts"),
        **dict.fromkeys(("resize_", "resize", "resize_as_", "resize_as"), "resize"),
        "bfloat16": "bfloat16", "names": "named", "name": "named", "rename": "named", "refine_names": "named",
        "align_to": "named", "xpu": "fake_devices", "mtia": "fake_devices",
        "ipu": "fake_devices",
    },
    "Module": {
        "bfloat16": "bfloat16", "xpu": "fake_devices", "mtia": "fake_devices",
        "ipu": "fake_devices",
    },
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


def missing_attribute(owner: str, name: str, obj: object = None) -> AttributeError:
    """The error for ``owner.name`` once ordinary lookup has failed: the reason it is
    out of scope when it is a known PyTorch name, else the usual AttributeError
    (``obj`` lets Python suggest a near name)."""
    reason = OUT_OF_SCOPE.get(owner, {}).get(name)
    if reason is not None:
        shown = "rtxcore.Tensor" if owner == "Tensor" else (
            "rtxcore.nn.Module" if owner == "Module" else owner)
        return UnbuiltAttributeError(f"{shown}.{name} is out of scope for rtxcore: "
                                     f"{REASONS[reason]}", name=name, obj=obj)
    if owner in ("Tensor", "Module"):
        kind = "Tensor" if obj is None else type(obj).__name__
        return AttributeError(f"'{kind}' object has no attribute '{name}'", name=name, obj=obj)
    import sys

    return AttributeError(f"module {owner!r} has no attribute {name!r}", name=name,
                          obj=sys.modules.get(owner) if obj is None else obj)
