"""The backend conformance suite as a pytest plugin.

    pytest --rtx-backend mydev          # or: python -m rtxcore.testing mydev

runs ``rtxcore/testing/suite.py`` against device ``mydev`` (any installed
backend; ``opencl:1`` picks a device): every primitive on every dtype the
device claims, on every layout (``rtxcore.testing.layouts``), against the CPU
backend; each primitive's semantics checks (``rtxcore.testing.conformance``);
then composites, autograd and a short training loop on the device. It ends with
a table per op: pass, fail (with the worst difference) or missing (and whether
the CPU fallback serves it).

The ``pytest11`` entry point is the top-level module ``_rtxcore_pytestplugin``,
which adds the option and registers this module only when it is given, so
other pytest runs don't import rtxcore.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SUITE = Path(__file__).with_name("suite.py")

# op -> list of (what, status, worst difference, detail), filled by the suite
RESULTS: dict[str, list[tuple[str, str, float, str]]] = {}


def pytest_configure(config: pytest.Config) -> None:
    device = config.getoption("rtx_backend", None)
    if not device:
        return
    import rtxcore as rc

    try:
        dev = rc.device(device)
        if not dev._ready:
            dev._resolve()
    except Exception as exc:
        raise pytest.UsageError(f"--rtx-backend {device}: {exc}") from None
    config.stash[_DEVICE] = str(dev)
    RESULTS.clear()
    # run the suite; when no paths were given, only the suite
    explicit = getattr(config, "args_source", None) == pytest.Config.ArgsSource.ARGS
    config.args = [*config.args, str(SUITE)] if explicit else [str(SUITE)]


_DEVICE = pytest.StashKey[str]()


def device_under_test(config: pytest.Config) -> str:
    return config.stash[_DEVICE]


def record(op: str, what: str, status: str, worst: float = 0.0, detail: str = "") -> None:
    RESULTS.setdefault(op, []).append((what, status, worst, detail))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _DEVICE not in config.stash or not RESULTS:
        return
    terminalreporter.write_sep("=", f"rtxcore conformance: {config.stash[_DEVICE]}")
    terminalreporter.write_line(format_table(RESULTS, config.stash[_DEVICE]))


def summarize(entries: list[tuple[str, str, float, str]]) -> tuple[str, float, str]:
    """One op's status from its entries: fail beats missing beats pass."""
    worst = max((w for _, s, w, _ in entries if s in ("pass", "fail")), default=0.0)
    fails = [(what, d) for what, s, _, d in entries if s == "fail"]
    if fails:
        what, d = fails[0]
        more = f" (+{len(fails) - 1} more)" if len(fails) > 1 else ""
        return "fail", worst, f"{what}: {d}{more}"
    missing = [d for _, s, _, d in entries if s == "missing"]
    if missing:
        return "missing", 0.0, missing[0]
    return "pass", worst, ""


def format_table(results: dict[str, list[tuple[str, str, float, str]]], device: str) -> str:
    from ..dispatch import ops as OPS

    order = [op for op in OPS.PRIMITIVES if op in results] + sorted(
        op for op in results if op not in OPS.PRIMITIVES)
    width = max(len(op) for op in order)
    lines = [f"{'op':<{width}}  {'status':<8} {'cases':>5}  {'worst diff':>10}  detail",
             "-" * (width + 40)]
    counts = {"pass": 0, "fail": 0, "missing": 0}
    for op in order:
        entries = results[op]
        status, worst, detail = summarize(entries)
        n = sum(1 for _, s, _, _ in entries if s in ("pass", "fail"))
        shown = "-" if status == "missing" else ("inf" if worst == float("inf") else f"{worst:.3g}")
        lines.append(f"{op:<{width}}  {status:<8} {n:>5}  {shown:>10}  {detail}".rstrip())
        if op in OPS.PRIMITIVES:
            counts[status] += 1
    lines.append("")
    lines.append(f"{sum(counts.values())} primitives on {device}: {counts['pass']} pass, "
                 f"{counts['fail']} fail, {counts['missing']} missing")
    return "\n".join(lines)
