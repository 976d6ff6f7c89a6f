"""The plugin registry: finds backends, compiles their kernels into a table.

One ``pluggy.PluginManager("rtxcore")``. Entry points in the group
``rtxcore.backends`` load lazily, the first time a device is needed, each inside
its own ``try`` so one broken plugin cannot stop the others; ``rtx_backends``
(cheap descriptors) is then called on every plugin. ``rtx_kernels`` is called
per device type, the first time that device type is used (``table()``), and
compiled into ``{device_type: {op: kernel}}``: using cpu never runs another
backend's kernel-table code. Ops look kernels up in that table (a dict lookup,
never a hook call). Registering or removing a plugin rebuilds the tables already
built; the others stay unbuilt until their device is used.
"""

from __future__ import annotations

import os
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from . import ops as _ops
from .backend import FUNCTIONAL_FAMILIES, Backend, destination_form

ENTRY_POINT_GROUP = "rtxcore.backends"

# Device types rtxcore knows of even when their backend isn't installed, with
# the command that installs it.
# (From a checkout first: the distributions are not on the package index yet.)
KNOWN_BACKENDS = {
    "cpu": "pip install ./backends/rtx_cpu from a checkout of rtxcore "
           "(once published: pip install 'rtxcore[cpu]')",
    "opencl": "pip install './backends/rtx_opencl[pocl]' from a checkout of rtxcore "
              "(once published: pip install 'rtxcore[pocl]', or 'rtxcore[opencl]' with your "
              "own OpenCL driver)",
    "cuda": "pip install './backends/rtx_cuda[cuda13]' from a checkout of rtxcore (CUDA 12 "
            "drivers: [cuda12]; once published: pip install 'rtxcore[cuda13]')",
}

# The built-in device names belong to rtxcore's own distributions: another plugin
# returning a backend of that name is refused (whatever order plugins load in),
# so an installed package can't take "cpu" over. Adding or overriding kernels of
# a built-in device stays open to everyone through rtx_kernels (tryfirst wins).
RESERVED_NAMES = {"cpu": "rtx-cpu", "opencl": "rtx-opencl", "cuda": "rtx-cuda"}


def _plugin_error(exc: BaseException) -> bool:
    """Whether plugin code's ``exc`` is the plugin's failure (to isolate and
    report) rather than the user's: everything but KeyboardInterrupt. A plugin
    calling ``sys.exit()`` on import must not end the program that imported it."""
    return not isinstance(exc, KeyboardInterrupt)


@dataclass
class BackendEntry:
    """Everything the registry knows about one device type. The kernel facts
    (``kernels``, ``providers``, ``shadowed``) are gathered from the plugins'
    ``rtx_kernels`` on first access, not before (``built`` says whether they were)."""

    backend: Backend
    plugin: str
    _kernels: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False)
    _providers: dict[str, str] = field(default_factory=dict, repr=False)  # op -> plugin name
    _shadowed: dict[str, list[str]] = field(default_factory=dict, repr=False)  # op -> losers
    _build: Callable[["BackendEntry"], None] | None = field(default=None, repr=False)
    built: bool = False

    def _ensure_built(self) -> None:
        if not self.built and self._build is not None:
            self._build(self)

    @property
    def kernels(self) -> dict[str, Callable[..., Any]]:
        self._ensure_built()
        return self._kernels

    @property
    def providers(self) -> dict[str, str]:
        self._ensure_built()
        return self._providers

    @property
    def shadowed(self) -> dict[str, list[str]]:
        self._ensure_built()
        return self._shadowed


@dataclass
class PluginProblem:
    plugin: str
    what: str


class Registry:
    def __init__(self) -> None:
        self._pm: Any = None
        self._lock = threading.RLock()
        self._loaded = False
        self.backends: dict[str, BackendEntry] = {}
        # Kernel dicts by device type. The dict objects are kept across rebuilds
        # (cleared and refilled) so Device objects may hold on to them.
        self.tables: dict[str, dict[str, Callable[..., Any]]] = {}
        self.failed: dict[str, str] = {}  # plugin name -> import error text
        self.problems: list[PluginProblem] = []
        self.blocked: list[str] = []
        self.distributions: dict[str, tuple[str, str]] = {}  # plugin -> (dist, ver)
        # device type -> messages about plugins refused its name; warned about
        # (RuntimeWarning) the first time the device is used
        self.conflicts: dict[str, list[str]] = {}
        self.warned: set[str] = set()  # conflict messages already warned about

    # -- plugin manager -------------------------------------------------------

    @property
    def pm(self) -> Any:
        if self._pm is None:
            import pluggy

            from . import hookspecs

            pm = pluggy.PluginManager("rtxcore")
            pm.add_hookspecs(hookspecs)
            self._pm = pm
        return self._pm

    def _disabled(self) -> set[str]:
        raw = os.environ.get("RTX_DISABLE_BACKENDS", "")
        return {s.strip() for s in raw.split(",") if s.strip()}

    def ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._load_entry_points()
            self._loaded = True
            self._rebuild()

    def _load_entry_points(self) -> None:
        from importlib.metadata import entry_points

        disabled = self._disabled()
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            if ep.name in disabled:
                self.blocked.append(ep.name)
                continue
            if self.pm.get_plugin(ep.name) is not None:
                continue
            dist = getattr(ep, "dist", None)
            if dist is not None:
                self.distributions[ep.name] = (dist.metadata["Name"], dist.version)
            try:
                plugin = ep.load()
                self.pm.register(plugin, name=ep.name)
            except BaseException as exc:  # a broken plugin must not stop the others
                if not _plugin_error(exc):
                    raise
                self.failed[ep.name] = _describe(exc)

    def register(self, plugin: Any, name: str | None = None) -> str:
        with self._lock:
            self.ensure_loaded()
            name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
            if name in self._disabled():
                raise RuntimeError(
                    f"plugin {name!r} is disabled by RTX_DISABLE_BACKENDS="
                    f"{os.environ.get('RTX_DISABLE_BACKENDS', '')!r}; not registered"
                )
            self.pm.register(plugin, name=name)
            self._rebuild()
            return name

    def unregister(self, plugin_or_name: Any) -> None:
        with self._lock:
            self.ensure_loaded()
            if isinstance(plugin_or_name, str):
                self.pm.unregister(name=plugin_or_name)
            else:
                self.pm.unregister(plugin_or_name)
            self._rebuild()

    # -- compiling the table --------------------------------------------------

    def _impls(self, hook_name: str) -> list[Any]:
        # pluggy calls impls in reverse order of get_hookimpls(); we call them
        # one by one ourselves so each result keeps its plugin's name and a
        # failing impl is reported instead of breaking the whole build.
        return list(reversed(getattr(self.pm.hook, hook_name).get_hookimpls()))

    def _rebuild(self) -> None:
        self.problems = []
        self.conflicts = {}
        backends: dict[str, BackendEntry] = {}
        # Backends in registration order: a device name stays with the plugin that
        # had it first (a later plugin cannot take "cpu" over).
        for impl in reversed(self._impls("rtx_backends")):
            try:
                found = list(impl.function() or [])
            except BaseException as exc:
                if not _plugin_error(exc):
                    raise
                self.problems.append(
                    PluginProblem(impl.plugin_name, f"rtx_backends() raised {_describe(exc)}")
                )
                continue
            for b in found:
                err = _check_descriptor(b)
                if err:
                    self.problems.append(PluginProblem(impl.plugin_name, err))
                elif (refused := self._reserved_refusal(b.name, impl.plugin_name)):
                    self.problems.append(PluginProblem(impl.plugin_name, refused))
                    self.conflicts.setdefault(b.name, []).append(
                        f"plugin {impl.plugin_name!r}: {refused}")
                elif b.name in backends:
                    self.problems.append(
                        PluginProblem(
                            impl.plugin_name,
                            f"backend name {b.name!r} is already provided by plugin "
                            f"{backends[b.name].plugin!r}; this one is ignored",
                        )
                    )
                else:
                    backends[b.name] = BackendEntry(b, impl.plugin_name)

        built = {name for name, e in self.backends.items() if e.built}
        for entry in backends.values():
            entry._build = self._build_kernels
        self.backends = backends
        for name in backends:
            self.tables.setdefault(name, {})
        for name, table in self.tables.items():
            table.clear()
        # Device types in use get their tables again now; the rest on first use.
        for name in built & set(backends):
            backends[name]._ensure_built()
        # Devices cache per-device facts; let them refresh.
        from . import _listeners

        for fn in list(_listeners):
            fn()

    def _build_kernels(self, entry: BackendEntry) -> None:
        """Ask every plugin's ``rtx_kernels`` for ``entry``'s device type and fill
        its table (the first time the device type is used)."""
        with self._lock:
            if entry.built:
                return
            name = entry.backend.name
            kernels, providers, shadowed = entry._kernels, entry._providers, entry._shadowed
            kernels.clear()
            providers.clear()
            shadowed.clear()
            for impl in self._impls("rtx_kernels"):
                try:
                    found = impl.function(backend=name)
                    items = list(found.items()) if found else []
                except BaseException as exc:
                    if not _plugin_error(exc):
                        raise
                    self.problems.append(
                        PluginProblem(
                            impl.plugin_name,
                            f"rtx_kernels(backend={name!r}) raised {_describe(exc)}",
                        )
                    )
                    continue
                for op, fn in items:
                    if not _ops.is_known_op(op):
                        self.problems.append(
                            PluginProblem(
                                impl.plugin_name,
                                f"kernel for unknown op {op!r} on {name!r} ignored "
                                "(op names are listed in rtxcore.dispatch.ops)",
                            )
                        )
                    elif not callable(fn):
                        self.problems.append(
                            PluginProblem(
                                impl.plugin_name,
                                f"kernel {op!r} for {name!r} is not callable",
                            )
                        )
                    elif op in kernels:
                        shadowed.setdefault(op, []).append(impl.plugin_name)
                    elif getattr(fn, "rtx_functional", False) and not _functional_ok(op):
                        self.problems.append(
                            PluginProblem(
                                impl.plugin_name,
                                f"kernel {op!r} for {name!r} is marked functional, which only "
                                "unary, binary, compare, where, reduce, matmul and cast "
                                "kernels may be; ignored",
                            )
                        )
                    else:
                        if getattr(fn, "rtx_functional", False):
                            fn = destination_form(entry.backend, op, fn)
                        kernels[op] = fn
                        providers[op] = impl.plugin_name
            entry.built = True
            if self.backends.get(name) is entry:
                table = self.tables.setdefault(name, {})
                table.clear()
                table.update(kernels)

    def table(self, device_type: str) -> dict[str, Callable[..., Any]]:
        """``device_type``'s kernel table, asking the plugins for it on first use.
        The same dict object across rebuilds (devices may hold on to it)."""
        self.entry(device_type)._ensure_built()
        return self.tables[device_type]

    def build_all(self) -> None:
        """Every backend's kernel table, now (a profile wraps them all)."""
        self.ensure_loaded()
        for entry in list(self.backends.values()):
            entry._ensure_built()

    def _reserved_refusal(self, name: str, plugin: str) -> str | None:
        """Why ``plugin`` may not provide the built-in device ``name``, or None."""
        owner = RESERVED_NAMES.get(name)
        if owner is None:
            return None
        dist = self.distributions.get(plugin, ("", ""))[0]
        if dist.lower().replace("_", "-") == owner:
            return None
        where = f"distribution {dist!r}" if dist else "registered in-process"
        return (f"backend name {name!r} belongs to rtxcore's {owner} distribution; "
                f"this plugin ({where}) may not provide it and is ignored for {name!r} "
                f"(to add or override {name} kernels, implement rtx_kernels(backend={name!r}), "
                f"with tryfirst=True to win)")

    def warn_conflicts(self, device_type: str) -> None:
        """Warn about plugins that were refused ``device_type``'s name, each
        conflict once per process."""
        new = [c for c in self.conflicts.get(device_type, ()) if c not in self.warned]
        if not new:
            return
        self.warned.update(new)
        import warnings

        warnings.warn(f"device type {device_type!r}: " + "; ".join(new), RuntimeWarning,
                      stacklevel=4)

    # -- queries --------------------------------------------------------------

    def entry(self, device_type: str) -> BackendEntry:
        """The registry entry for a device type, or a RuntimeError a person can act on."""
        self.ensure_loaded()
        entry = self.backends.get(device_type)
        if entry is not None:
            return entry
        raise RuntimeError(self.missing_backend_message(device_type))

    def missing_backend_message(self, device_type: str) -> str:
        if device_type in self.failed:
            return (
                f"the {device_type!r} backend failed to load: "
                f"{self.failed[device_type]}"
            )
        if device_type in self.blocked:
            return (
                f"the {device_type!r} backend is disabled by "
                f"RTX_DISABLE_BACKENDS={os.environ.get('RTX_DISABLE_BACKENDS', '')!r}"
            )
        if device_type in KNOWN_BACKENDS:
            return (
                f"device type {device_type!r} needs a backend that is not installed; "
                f"install it with: {KNOWN_BACKENDS[device_type]}"
            )
        known = sorted(set(self.backends) | set(KNOWN_BACKENDS))
        return (
            f"unknown device type {device_type!r}; known device types: "
            + ", ".join(known)
        )


def _functional_ok(op: str) -> bool:
    spec = _ops.PRIMITIVES.get(op)
    return spec is not None and (spec.family in FUNCTIONAL_FAMILIES or op == "cast")


def _describe(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _check_descriptor(b: Any) -> str | None:
    if not isinstance(b, Backend):
        return (
            f"rtx_backends() returned {b!r}, which is not a rtxcore.dispatch.Backend"
        )
    if not isinstance(b.name, str) or not b.name.isidentifier():
        return f"backend {b!r} has an invalid name {b.name!r} (want an identifier)"
    return None


registry = Registry()
