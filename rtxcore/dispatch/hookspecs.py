"""Every hook a backend plugin can implement, in the order rtxcore calls them.

A plugin is a module or object with functions marked ``@rtxcore.dispatch.hookimpl``.
rtxcore finds installed plugins through the entry point group
``rtxcore.backends``; ``rtxcore.register_backend(obj)`` adds one in-process.

Hooks are called once, when rtxcore builds its dispatch table (the first time a
device is used, and again whenever a plugin is registered or removed). They are
never called per op: an op costs one dict lookup.

Profiling is not a hook but two optional methods of the backend descriptor,
called once when ``rtxcore.profiler.profile()`` starts and once when it ends:
``Backend.profiling_start(current)`` (begin timing kernels on the device, e.g.
with OpenCL profiling events; ``current()`` tags each kernel with the rtxcore
op that launched it; return False if unsupported) and
``Backend.profiling_stop()`` (wait, stop, return ``(tag, kernel name, start_ns,
end_ns)`` per kernel on the host's ``perf_counter_ns`` clock). The profiler
shows those as the device-time columns. A backend whose kernels finish before
they return (rtx_cpu) leaves both alone: host time is its device time.
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

hookspec = pluggy.HookspecMarker("rtxcore")


@hookspec
def rtx_backends() -> list[Any]:
    """Return the backends (device types) this plugin provides.

    Returns:
        A list of :class:`rtxcore.dispatch.Backend` instances; ``[]`` if the plugin
        only contributes kernels to other backends.

    Called: once per table build. If two plugins return a backend with the same
    ``name``, the one registered first keeps it; the other is reported by
    ``rtx info`` as a conflict and ignored.

    Example::

        @hookimpl
        def rtx_backends():
            return [MyBackend()]   # MyBackend(Backend): name = "mydev"
    """


@hookspec
def rtx_kernels(backend: str) -> dict[str, Callable[..., Any]] | None:
    """Return kernels this plugin contributes to the backend named ``backend``.

    Args:
        backend: a device type, e.g. ``"cpu"``; the hook is called once per
            backend known after ``rtx_backends``.

    Returns:
        ``{op_name: kernel}`` (op names from ``rtxcore.dispatch.ops``: the
        ``PRIMITIVES`` and, as overrides, the ``COMPOSITES``), or ``None`` for a
        backend this plugin doesn't serve.

    Who wins: several plugins may return a kernel for the same op; the first in
    pluggy's call order wins (``@hookimpl(tryfirst=True)`` runs before plain
    impls, plain impls run last-registered first, ``trylast=True`` runs last).
    Every shadowed kernel is recorded and shown by ``rtx info --kernels``. An op
    name that is not in ``ops.py`` is reported, not installed.

    Example::

        @hookimpl(tryfirst=True)
        def rtx_kernels(backend):
            if backend == "cpu":
                return {"matmul": my_fast_matmul}   # override one cpu kernel
    """


@hookspec
def rtx_comm_backends() -> list[Any]:
    """Return the communication backends this plugin provides, for
    ``rtxcore.distributed``.

    Returns:
        A list of :class:`rtxcore.dispatch.comm.CommBackend` subclasses
        (``[]`` or ``None`` for none). A name already taken (``mpi`` is built
        in) is ignored.

    Called: when ``init_process_group`` looks for a backend, never per
    collective. See "Communication backends" in docs/authoring-backends.md.

    Example::

        @hookimpl
        def rtx_comm_backends():
            return [MyFabricBackend]   # MyFabricBackend(CommBackend): name = "fabric"
    """
