"""The backend conformance suite as a pytest plugin.

    pytest --rtx-backend mydev          # or: python -m rtxcore.testing mydev

runs ``rtxcore/testing/suite.py`` against device ``mydev`` (any installed
backend; ``opencl:1`` picks a device): every primitive, and every composite the
backend overrides, on every dtype the device claims and every layout, each
kernel alone (``rtxcore.testing.layouts``), against NumPy; each primitive's
semantics checks (``rtxcore.testing.conformance``); then composites, autograd
and a short training loop on the device. It ends with a table per op: pass,
fail (with the worst difference) or missing (and whether the CPU fallback
serves it), whose last line agrees with the exit status.

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
    _FAILS[0] = _DESELECTED[0] = 0  # (a second run in one process starts afresh)
    _AT_START.clear()
    # run the suite; when no paths were given, only the suite
    explicit = getattr(config, "args_source", None) == pytest.Config.ArgsSource.ARGS
    config.args = [*config.args, str(SUITE)] if explicit else [str(SUITE)]


_DEVICE = pytest.StashKey[str]()


def device_under_test(config: pytest.Config) -> str:
    return config.stash[_DEVICE]


_FAILS = [0]  # fail entries recorded so far
_DESELECTED = [0]  # suite tests left out by -k / -m / --deselect
_AT_START: dict[str, int] = {}


def record(op: str, what: str, status: str, worst: float = 0.0, detail: str = "") -> None:
    RESULTS.setdefault(op, []).append((what, status, worst, detail))
    if status == "fail":
        _FAILS[0] += 1


def _row_of(item: Any) -> str:
    """The table row a test of the suite reports under."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for key in ("op_dtype", "composite_dtype"):
        if key in params:
            return params[key][0]
    if "op" in params:
        return params["op"]
    if "name" in params:
        return f"smoke: {params['name']}"
    return getattr(getattr(item, "function", None), "row", item.name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """A test that fails without saying so in the table (an error before its
    comparison, a broken fixture) gets a failing row all the same: the table
    and the exit status always agree."""
    outcome = yield
    if _DEVICE not in item.config.stash:
        return
    rep = outcome.get_result()
    if rep.when == "setup":
        _AT_START[item.nodeid] = _FAILS[0]
    if rep.failed and _FAILS[0] == _AT_START.get(item.nodeid, _FAILS[0] - 1 if rep.when != "setup" else 0):
        line = str(call.excinfo.value).splitlines()[0][:160] if call.excinfo else rep.when
        name = call.excinfo.typename if call.excinfo else "error"
        record(_row_of(item), "error" if rep.when != "call" else "test", "fail", float("inf"),
               f"{name}: {line}")


def pytest_deselected(items: list[Any]) -> None:
    _DESELECTED[0] += len(items)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:  # (before the summary)
    if session.shouldstop or session.shouldfail:
        _DESELECTED[0] += 1  # stopped early (-x, --maxfail): some of the suite never ran


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _DEVICE not in config.stash or not RESULTS:
        return
    terminalreporter.write_sep("=", f"rtxcore conformance: {config.stash[_DEVICE]}")
    terminalreporter.write_line(format_table(RESULTS, config.stash[_DEVICE],
                                             partial=_DESELECTED[0] > 0))


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


def format_table(results: dict[str, list[tuple[str, str, float, str]]], device: str,
                 partial: bool = False) -> str:
    """One table: the primitives, the composite kernels the backend supplies,
    then the smoke tests; a count per section, and the total of failures (the
    run fails exactly when it is not 0). ``partial``: part of the suite was left
    out (``-k``, ``-x``), which the last line says: it passed, not conformance."""
    from ..dispatch import ops as OPS

    sections = [
        ("primitives", [op for op in OPS.PRIMITIVES if op in results]),
        ("composite kernels", [op for op in OPS.COMPOSITES if op in results]),
        ("fused groups", [op for op in ("fuse",) if op in results]),
        ("smoke tests", sorted(op for op in results if op not in OPS.PRIMITIVES
                               and op not in OPS.COMPOSITES and op != "fuse")),
    ]
    width = max([len(op) for op in results] + [20])
    lines = [f"{'op':<{width}}  {'status':<8} {'cases':>5}  {'worst diff':>10}  detail"]
    summary = []
    fails = 0
    for title, ops in sections:
        if not ops:
            continue
        lines += [f"-- {title} " + "-" * (width + 36 - len(title))]
        counts = {"pass": 0, "fail": 0, "missing": 0}
        for op in ops:
            entries = results[op]
            status, worst, detail = summarize(entries)
            n = sum(1 for _, s, _, _ in entries if s in ("pass", "fail"))
            shown = "-" if status == "missing" else ("inf" if worst == float("inf") else f"{worst:.3g}")
            lines.append(f"{op:<{width}}  {status:<8} {n:>5}  {shown:>10}  {detail}".rstrip())
            counts[status] += 1
        fails += counts["fail"]
        missing = f", {counts['missing']} missing" \
            if title == "primitives" or counts["missing"] else ""
        summary.append(f"{len(ops)} {title}: {counts['pass']} pass, {counts['fail']} fail{missing}")
    lines.append("")
    run = len(sections[0][1])
    total = len(OPS.PRIMITIVES)
    counted = f"{total}" if run == total else f"{run} of {total}"
    head = f"{counted} primitives on {device}: " + summary[0].split(": ", 1)[1] \
        if sections[0][1] else f"0 of {total} primitives on {device}"
    lines.append("; ".join([head, *summary[1:]]) if sections[0][1] else
                 "; ".join([head, *summary]))
    verdict = "PASS" if fails == 0 else f"FAIL ({fails} rows fail)"
    if partial:
        verdict += " -- a partial run (tests deselected or stopped early): not the whole suite"
    lines.append("conformance: " + verdict)
    return "\n".join(lines)
