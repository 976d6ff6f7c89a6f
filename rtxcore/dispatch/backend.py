"""The device descriptor a backend subclasses (``Backend``), and helpers to declare a plugin.

A plugin (see ``rtxcore.dispatch.hookspecs``) returns ``Backend`` instances
from its ``rtx_backends`` hook and kernel tables from ``rtx_kernels``;
:func:`backend_hooks` writes those two hooks for the common plugin that serves
one backend with one table, and :func:`optional_import` imports the library a
backend runs on without ever failing the plugin's own import.
"""

from __future__ import annotations

from typing import Any, Callable

from .types import DType, View

__all__ = ["Backend", "BackendPlugin", "backend_hooks", "optional_import"]


class Backend:
    """Describes one kind of device. Subclass it and return an instance from
    the ``rtx_backends`` hook.

    Attributes a subclass sets:
        name: the device type users write (``"cpu"``, ``"opencl"``). Name the
            plugin's entry point (group ``rtxcore.backends``) the same, so that
            an import error can be quoted when the device is used and
            ``RTX_DISABLE_BACKENDS`` reads naturally.
        distribution: the installed distribution that ships it (for ``rtx info``).
        version: the backend's version string.
        shares_host_memory: True only when buffers are host memory the core may
            hand to NumPy (rtx_cpu). Then ``from_host`` keeps the array it is
            given and ``to_host`` returns a view, so ``numpy()`` and
            ``as_tensor`` share memory on the device; otherwise ``from_host``
            copies and ``to_host`` returns a new array.
        dlpack_device: the DLPack device type of this backend's memory (1 CPU,
            2 CUDA), or None when it can't exchange tensors through DLPack. A
            backend that sets it implements ``to_dlpack`` and ``from_dlpack``.
        async_errors: True when the device queues work and reading a value back
            stops the host (CUDA, OpenCL): the core then checks index bounds
            (and binary_cross_entropy's input range) with a kernel whose flag it
            reads at the next ``to_host`` or ``synchronize()``, raising the
            ``IndexError`` (``RuntimeError``) there, as PyTorch's device-side
            asserts do (``rtxcore.ops.checks``). The kernels must then not
            fault on an out-of-range index (wrap or clamp it; an index into a
            dim of size 0 raises at once).

    Methods a subclass may override (defaults in brackets):
        is_available() [True], unavailable_reason() [None], device_count() [1],
        device_name(i) [name:i], dtypes(i) [all nine], op_dtypes(i) [{}: no per-op
        limits], properties(i) [{}], is_accelerator(i) [True but for cpu],
        notes() [[]: lines for ``rtx info``, e.g. devices found but left out],
        view(buffer, shape, strides, offset, dtype) [a :class:`View`],
        to_dlpack(view, **kw) / from_dlpack(obj, index) [refuse],
        profiling_start(current) / profiling_stop() [no device-side times],
        adopt(array, dtype, index) / write(out, array) [refuse: needed only by a
        backend with functional kernels, see :func:`functional`],
        release(buffer) [nothing: the core's last reference to a buffer is gone].
    """

    name: str = ""
    distribution: str = ""
    version: str = "0"
    shares_host_memory: bool = False
    dlpack_device: int | None = None
    async_errors: bool = False

    def is_available(self) -> bool:
        return True

    def unavailable_reason(self) -> str | None:
        """Why the backend can't run here, and what to do about it; None if it can."""
        return None

    def device_count(self) -> int:
        return 1

    def device_name(self, index: int) -> str:
        return f"{self.name}:{index}"

    def properties(self, index: int) -> dict[str, Any]:
        """Extra facts about device ``index`` shown by ``rtx info``."""
        return {}

    def dtypes(self, index: int) -> frozenset[str]:
        """Names of the dtypes device ``index`` supports."""
        return frozenset(
            ["bool", "uint8", "int8", "int16", "int32", "int64",
             "float16", "float32", "float64"]
        )

    def view(self, buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
             dtype: DType) -> Any:
        """Build the object kernels receive for one strided window on ``buffer``."""
        return View(buffer, shape, strides, offset, dtype)

    def op_dtypes(self, index: int) -> dict[str, frozenset[str]]:
        """Per-op dtype limits on device ``index``, narrower than ``dtypes``:
        ``{"matmul": frozenset({"float32", "float64"})}``. The core refuses other
        dtypes for those ops with a TypeError before the kernel runs (or sends
        them to the CPU fallback when it is on); the conformance suite tests
        exactly what is claimed."""
        return {}

    def is_accelerator(self, index: int) -> bool:
        """Whether device ``index`` is an accelerator, not the host's own CPU:
        ``rtxcore.accelerator`` (and so ``torch.accelerator``-style scripts)
        picks only such devices. The default is True for every backend but cpu."""
        return self.name != "cpu"

    def notes(self) -> list[str]:
        """Facts ``rtx info`` shows under the backend (a device left out and why)."""
        return []

    def fuse(self, program: dict[str, Any], index: int) -> Callable[[list[Any], list[Any]], None] | None:
        """Optional: a runner for a fused group of elementwise ops (``rtxcore.jit``'s
        ``fuse_elementwise`` pass makes them), or None to have the core run the
        group's ops one by one through the kernel table.

        ``program`` (JSON-like, hashable once dumped): ``n`` elements; ``inputs``,
        the dtype names of the input operands; ``steps``, each ``[op, dtype,
        operands]`` with ``op`` an elementwise primitive (unary, binary, compare,
        ``where``, ``cast``, ``copy``), ``dtype`` its result's dtype name and each
        operand ``["in", i]`` (element ``k`` of input ``i`` for element ``k``),
        ``["scalar", i]`` (input ``i`` is one element, the same for every ``k``),
        ``["row", i]`` (element ``k % cols`` of input ``i``: a row vector),
        ``["col", i]`` (element ``k // cols``: one per row), where the program's
        ``cols`` is its row length (present only with row or col operands),
        ``["step", j]`` (an earlier step's result) or ``["const", value]`` (a
        Python scalar already of the op's dtype); and ``outputs``, the steps
        whose results are written out. Operands follow the kernel conventions
        (``rtxcore.dispatch.ops``): a binary op's operands share the result's
        dtype except comparisons and logical ops (bool results), ``where`` reads
        a bool condition. The runner is called as ``run(outs, ins)``: ``outs``
        one contiguous View of ``n`` elements per output, ``ins`` one contiguous
        View of ``n`` elements per input (one element for a scalar input,
        ``cols`` for a row input, ``n // cols`` for a col input).
        An output may be the very memory of an ``"in"`` input (an update in
        place): write element ``k`` of an output only after reading element
        ``k`` of the inputs (a broadcast input is never written by its program).
        A program with ``"reduce"`` ends in a sum, its last step ``["sum",
        dtype, [["step", j]]]``: over rows of ``cols`` (``"rows"``: that
        output has ``n // cols`` elements) or over everything (``"all"``: one
        element). Return None for a ``"reduce"`` the runner doesn't handle.
        The core asks once per (program, device) and keeps the answer."""
        return None

    def to_dlpack(self, view: Any, **kwargs: Any) -> Any:
        """A DLPack capsule sharing ``view``'s memory (``kwargs`` are those of
        ``__dlpack__``: stream, max_version, ...)."""
        raise BufferError(f"the {self.name} backend can't export tensors through DLPack")

    def from_dlpack(self, obj: Any, index: int) -> tuple[Any, tuple[int, ...], tuple[int, ...], int]:
        """(buffer, shape, strides, offset) sharing the memory of ``obj`` (an
        object with ``__dlpack__`` on this backend's device ``index``); the
        buffer's ``dtype`` is a NumPy dtype."""
        raise BufferError(f"the {self.name} backend can't import tensors through DLPack")

    def profiling_start(self, current: Callable[[], Any]) -> bool:
        """Start timing, on the device, every kernel this backend launches, for
        ``rtxcore.profiler``; return False when the backend can't (the default:
        the profiler then has host times only, which is right for a backend
        whose kernels finish before they return, like rtx_cpu).

        ``current()``, called on the launching thread, returns a tag naming the
        rtxcore op that launches the kernel: keep it with the kernel's timing.
        Called once when a profile starts; the path taken when no profile runs
        should cost nothing extra."""
        return False

    def profiling_stop(self) -> list[tuple[Any, str, int, int]]:
        """Stop what ``profiling_start`` started, wait for the kernels it timed,
        and return one ``(tag, kernel name, start_ns, end_ns)`` per kernel run,
        times on the host's ``time.perf_counter_ns()`` clock."""
        return []

    # -- functional kernels (optional; see :func:`functional`) -----------------------
    def adopt(self, array: Any, dtype: Any, index: int) -> tuple[Any, Any]:
        """(buffer, View) of a fresh native ``array`` a functional kernel returned,
        contiguous, of ``dtype`` on device ``index``: the array becomes the buffer,
        no copy."""
        raise NotImplementedError(f"backend {self.name!r} declares functional kernels but no "
                                  "adopt(array, dtype, index)")

    def write(self, out: Any, array: Any) -> None:
        """Write native ``array`` (out's shape and dtype) into the view ``out``: how
        the core runs a functional kernel where it must fill a given ``out`` (an
        in-place op, ``out=``, a strided target)."""
        raise NotImplementedError(f"backend {self.name!r} declares functional kernels but no "
                                  "write(out, array)")

    release: Callable[[Any], None] | None = None
    """Optional: ``release(buffer)`` is called when no tensor or view uses
    ``buffer`` any more (its storage was collected), so a backend may donate or
    reuse it. Called at most once per buffer, from whatever thread dropped the
    last reference; it must not raise."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def hookimpl_marker() -> Any:
    """pluggy's marker for rtxcore's hooks (``rtxcore.dispatch.hookimpl``), made
    on first use so that ``import rtxcore`` does not import pluggy."""
    import pluggy

    return pluggy.HookimplMarker("rtxcore")


def backend_hooks(descriptor: type[Backend], kernels: Any) -> tuple[Callable[..., Any], ...]:
    """The two hooks of a plugin that serves one backend with one kernel table,
    for the plugin module's top level::

        rtx_backends, rtx_kernels = backend_hooks(MyBackend, KERNELS)

    does what these do (a new descriptor at each table build, as written here)::

        @hookimpl
        def rtx_backends():
            return [MyBackend()]

        @hookimpl
        def rtx_kernels(backend):
            return KERNELS if backend == MyBackend.name else None

    ``kernels`` may instead be a function returning the table, called the
    first time the backend's device is used (a table that imports a large
    library). A plugin with more to say (kernels for other backends,
    ``tryfirst``, ``rtx_comm_backends``) writes its hooks itself."""
    mark = hookimpl_marker()

    @mark
    def rtx_backends() -> list[Backend]:
        return [descriptor()]

    @mark
    def rtx_kernels(backend: str) -> dict[str, Callable[..., Any]] | None:
        if backend != descriptor.name:
            return None
        return kernels() if callable(kernels) else kernels

    return rtx_backends, rtx_kernels


class BackendPlugin:
    """:func:`backend_hooks` as an object, for a plugin registered in-process:
    ``rtxcore.register_backend(BackendPlugin(MyBackend, KERNELS))``."""

    def __init__(self, descriptor: type[Backend], kernels: Any) -> None:
        self.rtx_backends, self.rtx_kernels = backend_hooks(descriptor, kernels)


def optional_import(module: str, label: str, fix: str) -> tuple[Any, str | None]:
    """``(the module, None)``, or ``(None, why it can't be imported and how to
    fix it)`` -- never an exception: a backend whose library is missing or
    broken still imports, and says why it is unavailable
    (``Backend.unavailable_reason``). ``label`` names the library for people
    ("CuPy"), ``fix`` is the sentence that installs it."""
    try:  # (``module`` a top-level name: what ``import`` binds)
        return __import__(module), None
    except Exception as exc:  # ImportError, or a broken install
        return None, f"{label} is not importable ({type(exc).__name__}: {exc}); {fix}"


# families whose kernels may be functional: one result of a shape and dtype the
# core knows before the call
FUNCTIONAL_FAMILIES = frozenset({"unary", "binary", "compare", "ternary", "reduce", "matmul"})


class Out(tuple):
    """What a functional kernel is asked to produce: ``(shape, dtype)``, a rtxcore
    DType (``.shape``, ``.dtype`` read the same)."""

    __slots__ = ()

    def __new__(cls, shape: tuple[int, ...], dtype: Any) -> "Out":
        return super().__new__(cls, (tuple(shape), dtype))

    shape = property(lambda self: self[0])
    dtype = property(lambda self: self[1])


def functional(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a kernel functional: it is called ``fn(like, *inputs)`` -- the
    destination form's arguments with ``out`` replaced by ``like``, an
    :class:`Out` ``(shape, dtype)`` -- and returns a fresh native array of that
    shape and dtype instead of writing into ``out``: new memory, never one of its
    inputs (the core makes it a new tensor's buffer; an op that could return its
    input unchanged still returns a copy). For a library whose calls
    return new arrays (JAX, immutable arrays) this is one library call where the
    destination form needs several.

    Allowed for the unary, binary, compare, ternary (``where``), reduce and
    matmul primitives, and ``cast``. The backend then implements
    ``Backend.adopt`` (the result becomes a buffer) and ``Backend.write``: the
    core calls the functional form wherever the result is a fresh tensor, and
    where it must fill a given ``out`` (in-place ops, ``out=``, a strided
    target) it calls ``write(out, fn(like, *inputs))``."""
    fn.rtx_functional = True  # type: ignore[attr-defined]
    return fn


def destination_form(backend: Backend, op: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The kernel the table holds for a functional ``fn``: the destination form
    ``kernel(out, *inputs)`` by ``backend.write``, with ``fn`` as its
    ``functional`` attribute (what the core's fresh-result paths call)."""
    write = backend.write

    def kernel(out: Any, *inputs: Any) -> None:
        write(out, fn(Out(out.shape, out.dtype), *inputs))

    kernel.functional = fn  # type: ignore[attr-defined]
    kernel.__name__ = kernel.__qualname__ = op
    return kernel
