"""``rtx info``: every backend found, whether it runs here, and why not."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .dispatch import ops as _ops


def collect(kernels: bool = False) -> list[dict[str, Any]]:
    """One row per backend. A backend's kernel table is built at its device's first
    use (a backend may import a large library, or set a process-wide switch, then);
    its coverage is counted here only when it was built already, or ``kernels``."""
    from .dispatch.registry import registry

    registry.ensure_loaded()
    rows = []
    total = len(_ops.PRIMITIVES)
    for name, entry in sorted(registry.backends.items()):
        b = entry.backend
        row: dict[str, Any] = {"name": name, "plugin": entry.plugin}
        dist = registry.distributions.get(entry.plugin)
        row["distribution"] = f"{dist[0]} {dist[1]}" if dist else f"{b.distribution or entry.plugin} {b.version}"
        try:
            ok = bool(b.is_available())
            row["available"] = ok
            row["reason"] = None if ok else (b.unavailable_reason() or "no reason given")
            devices = []
            if ok:
                for i in range(b.device_count()):
                    devices.append({"index": i, "name": b.device_name(i),
                                    "dtypes": sorted(b.dtypes(i)), **b.properties(i)})
            row["devices"] = devices
            row["notes"] = list(b.notes())
        except BaseException as exc:  # a misbehaving descriptor must not hide the others
            if isinstance(exc, KeyboardInterrupt):
                raise
            row["available"] = False
            row["reason"] = f"descriptor raised {type(exc).__name__}: {exc}"
            row["devices"] = []
        row["built"] = entry.built
        if row["available"] and not (kernels or entry.built):
            row["primitives"] = None  # (not built yet: `rtx info --kernels` builds it)
            row["missing"], row["composites"], row["providers"], row["shadowed"] = [], [], {}, {}
        elif row["available"]:
            # (the plugins' rtx_kernels for this device type: asked here if not yet)
            prims = [op for op in _ops.PRIMITIVES if op in entry.kernels]
            row["primitives"] = (len(prims), total)
            row["missing"] = [op for op in _ops.PRIMITIVES if op not in entry.kernels]
            row["composites"] = sorted(op for op in entry.kernels if op in _ops.COMPOSITES)
            row["providers"] = dict(entry.providers)
            row["shadowed"] = {op: list(v) for op, v in entry.shadowed.items()}
        else:
            # an unavailable backend's kernel coverage means nothing (a plugin may
            # supply none without its library): its row says why it is unavailable
            row["primitives"] = None
            row["missing"], row["composites"], row["providers"], row["shadowed"] = [], [], {}, {}
        rows.append(row)
    for plugin, err in sorted(registry.failed.items()):
        rows.append({"name": plugin, "plugin": plugin, "failed": err,
                     "distribution": " ".join(registry.distributions.get(plugin, ("?", ""))).strip()})
    return rows


def render(kernels: bool = False) -> str:
    from .dispatch.registry import registry

    rows = collect(kernels)
    lines = ["rtxcore backends", ""]
    w = max([10] + [len(r["name"]) for r in rows])
    wd = max([22] + [len(r["distribution"]) for r in rows])
    header = f"{'backend':<{w}} {'distribution':<{wd}} {'status':<12} {'kernels':<9} devices"
    lines += [header, "-" * len(header)]
    for r in rows:
        if "failed" in r:
            lines.append(f"{r['name']:<{w}} {r['distribution']:<{wd}} {'FAILED':<12} {'-':<9} -")
            lines.append(f"{'':<{w}} import error: {r['failed']}")
            continue
        status = "available" if r["available"] else "unavailable"
        k = f"{r['primitives'][0]}/{r['primitives'][1]}" if r["primitives"] else \
            "unbuilt" if r["available"] else "-"
        devs = ", ".join(f"{r['name']}:{d['index']}" if r['name'] != 'cpu' else "cpu" for d in r["devices"]) or "-"
        lines.append(f"{r['name']:<{w}} {r['distribution']:<{wd}} {status:<12} {k:<9} {devs}")
        if not r["available"]:
            lines.append(f"{'':<{w}} why: {r['reason']}")
        for d in r["devices"]:
            extra = {k2: v for k2, v in d.items() if k2 not in ("index", "name", "dtypes")}
            facts = ", ".join(f"{k2}={v}" for k2, v in extra.items())
            lines.append(f"{'':<{w}} [{d['index']}] {d['name']}" + (f" ({facts})" if facts else ""))
            lines.append(f"{'':<{w}}     dtypes: {' '.join(d['dtypes'])}")
        for note in r.get("notes", []):
            lines.append(f"{'':<{w}} note: {note}")
        if r["missing"]:
            lines.append(f"{'':<{w}} missing primitives: {', '.join(r['missing'])}")
        if r["composites"]:
            lines.append(f"{'':<{w}} own kernels for composites: {', '.join(r['composites'])}")
        if kernels:
            for op, plugin in sorted(r["providers"].items()):
                if plugin != r["plugin"] or op in r["shadowed"]:
                    lost = r["shadowed"].get(op, [])
                    lines.append(f"{'':<{w}} kernel {op}: from {plugin}" + (f" (shadows {', '.join(lost)})" if lost else ""))
    if any(r.get("available") and r.get("primitives") is None for r in rows):
        lines += ["", "kernels 'unbuilt': a backend's kernel table is built when its device is "
                      "first used; `rtx info --kernels` builds every table to count them"]
    if registry.blocked:
        lines += ["", "disabled by RTX_DISABLE_BACKENDS: " + ", ".join(sorted(set(registry.blocked)))]
    if registry.problems:
        lines += ["", "plugin problems:"]
        lines += [f"  {p.plugin}: {p.what}" for p in registry.problems]
    if not any("failed" not in r for r in rows):
        lines += ["", NO_BACKEND_HINT.format(python=sys.executable)]
    else:
        lines += ["", default_device_line()]
    return "\n".join(lines)


NO_BACKEND_HINT = (
    "no backend is installed for {python}: rtxcore needs at least one to run anything.\n"
    "Install one (any one is enough), from a checkout of the repository:\n"
    "    pip install ./backends/rtx_cpu                  # cpu, on NumPy\n"
    "    pip install './backends/rtx_opencl[pocl]'       # opencl (PoCL runs it on CPUs)\n"
    "    pip install './backends/rtx_cuda[cuda13]'       # cuda (CUDA 12 drivers: [cuda12])\n"
    "or, once published: pip install 'rtxcore[cpu]' (or [opencl], [cuda13]).\n"
    "Or run this with the Python of the environment that has them."
)


def default_device_line() -> str:
    """``default device: opencl:0 (the cpu backend is not installed; ...)``."""
    from .device import default_device_reason

    try:
        dev, why = default_device_reason()
    except RuntimeError as exc:  # e.g. RTX_DEVICE names an unknown device type
        return f"default device: none ({exc})"
    problem = _unusable(dev)
    if problem:
        return f"default device: {dev} ({why}), which can't be used here: {problem}"
    return f"default device: {dev} ({why})"


def _unusable(dev: Any) -> str | None:
    """Why ``dev`` can't be used, from its backend's descriptor (as binding it would
    say, without building its kernel table or warning), or None."""
    from .dispatch.registry import registry

    entry = registry.backends.get(dev.type)
    if entry is None:
        return registry.missing_backend_message(dev.type)
    b = entry.backend
    try:
        if not b.is_available():
            return f"device {dev} is not available: {b.unavailable_reason() or 'no reason given'}"
        n = b.device_count()
    except Exception as exc:  # a misbehaving descriptor
        return f"its backend's descriptor raised {type(exc).__name__}: {exc}"
    if dev.index >= n:
        return f"device {dev.type}:{dev.index} does not exist; {dev.type} has {n} device{'s' if n != 1 else ''}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rtx", description="rtxcore tools")
    sub = parser.add_subparsers(dest="cmd")
    info = sub.add_parser("info", help="list backends, devices and kernel coverage")
    info.add_argument("--kernels", action="store_true",
                      help="build every backend's kernel table: count each one's kernels and "
                           "show which plugin supplies overridden ones")
    args = parser.parse_args(argv)
    if args.cmd != "info":
        parser.print_help()
        return 2
    try:
        print(render(kernels=args.kernels), flush=True)
        if not any("failed" not in r for r in collect()):
            return 1  # nothing can run: a script checking `rtx info` must see it
    except BrokenPipeError:
        # the reader went away (``rtx info | head``): stop quietly, as other
        # command-line tools do; stdout goes to devnull so the interpreter's
        # final flush doesn't raise again
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
