"""Devices, queues, memory and compiled programs.

Everything that touches PyOpenCL lives here and is set up on first use, so
importing rtx_opencl never fails: without PyOpenCL or without any OpenCL
platform the backend reports why (``problem()``) and stays unavailable.

One context, one in-order queue and one memory pool per device. Kernels are
enqueued and never waited for; only reads to the host wait. A freed buffer goes
back to the pool and may be handed out again at once: the queue is in order, so
kernels still using the old contents run before any that write the new ones.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np

from rtxcore.dispatch import OutOfMemoryError as _CoreOutOfMemoryError
from rtxcore.dispatch import optional_import

cl: Any = None  # pyopencl, once imported

_lock = threading.RLock()
# The first compile of a kernel in a process says so on stderr, once. Where the
# driver's cache can't be read (drivers other than PoCL), a build longer than
# this is taken for a compile
ANNOUNCE_AFTER_S = 0.5
_announced = False
_announce_lock = threading.Lock()
_devices: list["Device"] | None = None
_problem: str | None = None
_skipped: list[str] = []  # devices left out, each with the reason

FIX_NO_PYOPENCL = "install it with: pip install 'rtx-opencl[pocl]' (PyOpenCL and PoCL, a CPU OpenCL)"
FIX_NO_PLATFORM = ("install an OpenCL driver for your hardware, or PoCL for the CPU: "
                   "pip install pocl-binary-distribution")
FIX_POCL_CPU = ("this PoCL's LLVM doesn't know this CPU; install a newer PoCL "
                "(Debian/Ubuntu: apt install pocl-opencl-icd)")
POCL = "Portable Computing Language"
_PROBE = "__kernel void probe(__global int *x) { x[get_global_id(0)] = 1; }"


class OutOfMemoryError(_CoreOutOfMemoryError):
    """An allocation on an OpenCL device failed (``rtxcore.OutOfMemoryError``,
    a RuntimeError, as in PyTorch)."""


class Buffer:
    """One allocation: the pooled OpenCL buffer and the device it lives on."""

    __slots__ = ("mem", "dev", "nbytes", "arrays", "__weakref__")

    def __init__(self, mem: Any, dev: "Device", nbytes: int) -> None:
        self.mem = mem
        self.dev = dev
        self.nbytes = nbytes
        self.arrays: dict[str, Any] | None = None  # pyopencl Arrays for pyclblast


def _gib(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n} bytes"


class Device:
    """One OpenCL device: its context, queue, memory pool and compiled programs."""

    def __init__(self, index: int, cl_device: Any) -> None:
        self.index = index
        self.cl_device = cl_device
        self.name = cl_device.name.strip()
        self.platform = cl_device.platform.name.strip()
        ext = set(cl_device.extensions.split())
        self.fp64 = "cl_khr_fp64" in ext or cl_device.double_fp_config != 0
        self.fp16 = "cl_khr_fp16" in ext
        self.max_alloc = int(cl_device.max_mem_alloc_size)
        self.global_mem = int(cl_device.global_mem_size)
        self.max_work_group = int(cl_device.max_work_group_size)
        self.compute_units = int(cl_device.max_compute_units)
        self.local_mem = int(cl_device.local_mem_size)
        # a CPU driver (PoCL): work-groups are loops on a core, a barrier is costly
        self.is_cpu = bool(cl_device.type & cl.device_type.CPU)
        self._ctx: Any = None
        self._queue: Any = None
        self._pool: Any = None
        # key -> what build() made (programs), shared by every thread
        self.built: dict[Any, Any] = {}
        self._local = threading.local()  # .programs: this thread's kernel objects
        self.compile_seconds = 0.0  # total time spent building programs
        self.compiles = 0
        # small host-to-device writes queued without waiting (``write``): their
        # events, each keeping its private copy of the data alive until done
        self.pending_writes: list[Any] = []

    def __repr__(self) -> str:
        return f"opencl:{self.index}"

    def _open(self) -> None:
        from pyopencl.tools import ImmediateAllocator, MemoryPool

        with _lock:
            if self._ctx is None:
                ctx = cl.Context([self.cl_device])
                queue = cl.CommandQueue(ctx)
                self._pool = MemoryPool(ImmediateAllocator(queue))
                self._queue = queue
                self._ctx = ctx

    @property
    def programs(self) -> dict[Any, Any]:
        """This thread's launchers, key -> kernel object(s). A pyopencl Kernel
        keeps its arguments between ``set_args`` and the enqueue, so two threads
        sharing one can run each other's arguments: each thread binds its own
        from the programs in ``built``."""
        try:
            return self._local.programs
        except AttributeError:
            self._local.programs = programs = {}
            return programs

    def launcher(self, key: Any, build: Any, bind: Any, program: Any = None) -> Any:
        """This thread's launcher for ``key``: ``build()`` compiles once per
        device (under the lock, so threads never build the same program twice),
        ``bind(built)`` makes the kernel objects once per thread. ``program``:
        the key of the program ``build()`` makes when it holds kernels for
        other keys too (built once for all of them); else ``key``."""
        program = key if program is None else program
        built = self.built.get(program)
        if built is None:
            with _lock:
                built = self.built.get(program)
                if built is None:
                    built = self.built[program] = build()
        launcher = self.programs[key] = bind(built)
        return launcher

    @property
    def ctx(self) -> Any:
        if self._ctx is None:
            self._open()
        return self._ctx

    @property
    def queue(self) -> Any:
        if self._queue is None:
            self._open()
        return self._queue

    def alloc(self, nbytes: int, what: Any) -> Buffer:
        """A buffer of ``nbytes`` from the pool. ``what`` ("4096 x float32", or
        the dtype of its elements, so formatted only for an error) names the
        request in the error if it can't be had."""
        pool = self._pool
        if pool is None:
            self._open()
            pool = self._pool
        if nbytes > self.max_alloc:
            raise OutOfMemoryError(
                f"opencl:{self.index} ({self.name}): out of memory: tried to allocate "
                f"{_gib(nbytes)} ({_what(nbytes, what)}); the device allows at most "
                f"{_gib(self.max_alloc)} in one buffer ({_gib(self.global_mem)} in all)"
            )
        try:
            return Buffer(pool.allocate(nbytes if nbytes > 8 else 8), self, nbytes)
        except cl.Error as exc:  # MEM_OBJECT_ALLOCATION_FAILURE and friends
            pool.free_held()
            try:
                mem = pool.allocate(max(nbytes, 8))
            except cl.Error:
                raise OutOfMemoryError(
                    f"opencl:{self.index} ({self.name}): out of memory: tried to allocate "
                    f"{_gib(nbytes)} ({_what(nbytes, what)}) with {_gib(self.held_bytes())} in "
                    f"use of {_gib(self.global_mem)}; free some tensors or use smaller batches "
                    f"({exc})"
                ) from None
        return Buffer(mem, self, nbytes)

    def held_bytes(self) -> int:
        return 0 if self._pool is None else int(self._pool.active_bytes)

    def empty_cache(self) -> None:
        if self._pool is not None:
            self._pool.free_held()

    def build(self, source: str, what: str) -> Any:
        """Compile ``source``; a failure names ``what`` (op and dtypes) and shows
        the compiler's log."""
        import time

        from .codegen import with_helpers

        source = with_helpers(source)
        options = ["-cl-std=CL1.2"]
        t0 = time.perf_counter()
        before = None if _announced else self._kernel_cache_state()
        try:
            prg = cl.Program(self.ctx, source).build(options=options)
        except cl.RuntimeError as exc:
            log = str(exc)
            raise RuntimeError(
                f"opencl:{self.index}: the kernel for {what} failed to build on {self.name}.\n"
                f"compiler log:\n{log}\n--- source ---\n{_numbered(source)}"
            ) from None
        dt = time.perf_counter() - t0
        self.compile_seconds += dt
        self.compiles += 1
        if not _announced and self._compiled(before, dt):
            # a first run on a device compiles kernels for up to a minute, in
            # silence otherwise: say so once, at the first real compile
            self._announce()
        return prg

    def _kernel_cache_state(self) -> Any:
        """What tells a compile from a cache hit: on PoCL, its kernel cache
        folder's entries' mtimes (a compile adds a program there; a hit only
        reads it), as ``(time, folder)``; elsewhere None (the build's length
        decides). PyOpenCL itself doesn't cache for PoCL (it leaves that to the
        driver), so it can't say."""
        if POCL not in self.platform:
            return None
        folder = os.environ.get("POCL_CACHE_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "pocl", "kcache")
        import time

        return (time.time(), folder)

    @staticmethod
    def _compiled(before: Any, seconds: float) -> bool:
        """Whether the build just done compiled (see ``_kernel_cache_state``)."""
        if before is None:
            return seconds > ANNOUNCE_AFTER_S
        t0, folder = before
        try:
            with os.scandir(folder) as entries:  # PoCL: <2 letters>/<program hash>/program.bc
                return any(e.is_dir() and e.stat().st_mtime >= t0 - 0.01 for e in entries)
        except OSError:  # no cache folder (caching off, or elsewhere): the length decides
            return seconds > ANNOUNCE_AFTER_S

    def _announce(self) -> None:
        global _announced
        with _announce_lock:
            if _announced:
                return
            _announced = True
        sys.stderr.write(f"opencl:{self.index} ({self.name}): compiling OpenCL kernels for this "
                         "device, cached for later runs\n")
        sys.stderr.flush()


def _what(nbytes: int, what: Any) -> str:
    """An allocation's description: ``what`` itself, or "<count> x <dtype>"."""
    return what if isinstance(what, str) else f"{nbytes // what.itemsize} x {what.name}"


def _numbered(src: str) -> str:
    return "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(src.splitlines()))


def _discover() -> None:
    global _devices, _problem, cl
    with _lock:
        if _devices is not None:
            return
        cl, _problem = optional_import("pyopencl", "PyOpenCL", FIX_NO_PYOPENCL)
        if cl is None:
            _devices = []
            return
        try:
            platforms = cl.get_platforms()
        except Exception as exc:  # no ICD loader entry, PLATFORM_NOT_FOUND_KHR
            platforms = []
            detail = f" ({exc})"
        else:
            detail = ""
        found = []
        # a stable order: by platform name, then the platform's own device order
        for p in sorted(platforms, key=lambda p: (p.name, p.vendor, p.version)):
            try:
                found.extend(p.get_devices())
            except Exception:  # a platform with no devices raises DEVICE_NOT_FOUND
                continue
        if not found:
            _devices = []
            _problem = f"no OpenCL platform or device found{detail}; {FIX_NO_PLATFORM}"
            return
        kept = []
        for d in found:
            why = _cannot_compile(d) if d.platform.name.strip() == POCL else None
            if why is None:
                kept.append(d)
            else:
                _skipped.append(f"{d.name.strip()} ({d.platform.version.strip()}): {why}")
        _devices = [Device(i, d) for i, d in enumerate(kept)]
        _problem = None if kept else "no usable OpenCL device: " + "; ".join(_skipped)


def _cannot_compile(cl_device: Any) -> str | None:
    """Why ``cl_device`` can't build a trivial kernel, or None if it can.

    Only PoCL's CPU devices are tried (a few ms, the build is cached on disk):
    the PoCL on PyPI is built with LLVM 14, which fails every build on CPUs
    newer than it ("unknown target CPU 'generic'", e.g. AMD Zen 5), while
    listing the device as usable. A device that can't compile is left out,
    so it can't fail later in the middle of a program."""
    try:
        ctx = cl.Context([cl_device])
        cl.Program(ctx, _PROBE).build()
    except Exception as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if "error" in ln.lower()]
        detail = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else str(exc))
        fix = FIX_POCL_CPU if "unknown target CPU" in detail else "check the OpenCL driver"
        return f"it can't compile a kernel ({detail}); {fix}"
    return None


def skipped() -> list[str]:
    """Devices found but left out (they can't compile), each with the reason."""
    devices()
    return list(_skipped)


def devices() -> list[Device]:
    if _devices is None:
        _discover()
    return _devices  # type: ignore[return-value]


def problem() -> str | None:
    """Why there is no usable OpenCL device, with the fix; None when there is one."""
    if _devices is None:
        _discover()
    return _problem


def device(index: int) -> Device:
    return devices()[index]


# -- transfers ------------------------------------------------------------------------------


# host-to-device writes up to this size go through a private copy, queued
# without waiting: a blocking write waits for every command queued before it
# (an optimizer's scalars or a batch uploaded mid-step drained the queue); the
# caller may change its array as soon as ``write`` returns either way
ASYNC_WRITE_MAX = 4 << 20
PENDING_WRITES_MAX = 64  # beyond this many unfinished writes, wait for the oldest


def write(buf: Buffer, arr: np.ndarray) -> None:
    """Copy a C-contiguous host array into the start of ``buf``."""
    if not arr.nbytes:
        return
    dev = buf.dev
    if arr.nbytes > ASYNC_WRITE_MAX:
        cl.enqueue_copy(dev.queue, buf.mem, arr, is_blocking=True)
        return
    # (the event keeps the copy alive; dropping it before the write is done
    # would wait for it, so the device keeps it until the queue has drained)
    ev = cl.enqueue_copy(dev.queue, buf.mem, np.array(arr, copy=True), is_blocking=False)
    pending = dev.pending_writes
    pending.append(ev)
    if len(pending) > PENDING_WRITES_MAX:
        pending.pop(0).wait()


def read(arr: np.ndarray, buf: Buffer, byte_offset: int) -> None:
    """Copy ``arr.nbytes`` bytes from ``buf`` at ``byte_offset`` into ``arr``; waits."""
    if arr.nbytes:
        dev = buf.dev
        cl.enqueue_copy(dev.queue, arr, buf.mem, src_offset=byte_offset, is_blocking=True)
        # (an in-order queue: every write queued before the read is done)
        dev.pending_writes.clear()


def synchronize(index: int | None = None) -> None:
    for d in devices() if index is None else [device(index)]:
        if d._queue is not None:
            d._queue.finish()
            d.pending_writes.clear()


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() not in ("", "0", "false", "off", "no")


# -- profiling (rtxcore.profiler) -------------------------------------------------------------

# While a profile runs: (tag, kernel name or kernel, event, host ns at enqueue) per
# command, and each opened device's own queue, replaced by one with profiling on.
_profiling: list[tuple[Any, Any, Any, int]] | None = None
_plain_queues: dict[int, Any] = {}
_plain_enqueue: dict[str, Any] = {}
_TIMED = {"enqueue_nd_range_kernel": None, "_enqueue_copy_buffer": "copy_buffer"}


def profiling_start(current: Any) -> bool:
    """Time every kernel and buffer copy on the device until ``profiling_stop``.

    Each opened device gets, for the profile, an in-order queue with
    ``PROFILING_ENABLE`` in place of its own (after the old one drains), and
    PyOpenCL's enqueue functions are wrapped to keep each command's event with
    ``current()``'s tag. Nothing changes on the path taken when not profiling.
    A device first opened during the profile has host times only."""
    global _profiling
    import time

    if cl is None or _devices is None:
        return False  # OpenCL never used in this process: nothing to time
    with _lock:
        if _profiling is not None or not all(hasattr(cl._cl, n) for n in _TIMED):
            return False
        events: list[tuple[Any, Any, Any, int]] = []
        for d in _devices:
            if d._queue is not None:
                d._queue.finish()
                _plain_queues[d.index] = d._queue
                d._queue = cl.CommandQueue(
                    d._ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        clock = time.perf_counter_ns
        for fname, label in _TIMED.items():
            plain = _plain_enqueue[fname] = getattr(cl._cl, fname)

            def timed(queue: Any, what: Any, *args: Any, _plain: Any = plain,
                      _label: Any = label, **kwargs: Any) -> Any:
                t = clock()
                ev = _plain(queue, what, *args, **kwargs)
                events.append((current(), _label or what, ev, t))
                return ev

            setattr(cl._cl, fname, timed)
        _profiling = events
    return True


def profiling_stop() -> list[tuple[Any, str, int, int]]:
    """Undo ``profiling_start``, wait for the timed commands, and return
    ``(tag, name, start_ns, end_ns)`` for each, on the host's perf_counter_ns
    clock (the device's times, shifted by each command's enqueue time)."""
    global _profiling
    with _lock:
        events = _profiling
        if events is None:
            return []
        _profiling = None
        for fname, plain in _plain_enqueue.items():
            setattr(cl._cl, fname, plain)
        _plain_enqueue.clear()
        for d in _devices or ():
            q = _plain_queues.pop(d.index, None)
            if q is not None:
                d._queue.finish()
                d._queue = q
    out = []
    names: dict[int, str] = {}
    for tag, what, ev, t in events:
        try:
            p = ev.profile
            queued, start, end = p.queued, p.start, p.end
        except cl.Error:  # a queue without profiling (its device opened meanwhile)
            continue
        if isinstance(what, str):
            name = what
        else:
            name = names.get(id(what)) or names.setdefault(id(what), what.function_name)
        out.append((tag, name, t + start - queued, t + end - queued))
    return out
