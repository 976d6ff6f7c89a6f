"""The entry point of rtxcore's pytest plugin (group ``pytest11``).

Kept outside the rtxcore package so that pytest runs which don't ask for the
conformance suite don't import rtxcore and NumPy (a third of a second): this
module only adds ``--rtx-backend``; when it is given, the suite's plugin
(``rtxcore.testing.plugin``) is loaded and registered.

It also adds ``--rtx-progress`` (``python3 dev.py test`` passes it): one line
per test file, with its counts and time, instead of a screen of dots::

    tests/test_elementwise.py         2412 passed, 6 skipped        41.3 s   [ 31%  3:05]

A failure is named on its own line as it happens; pytest's summary at the end
is unchanged. It stays off under ``-v`` / ``-q`` (their own formats).
"""

from __future__ import annotations

import time
from typing import Any

import pytest


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("rtxcore", "rtxcore backend conformance")
    group.addoption("--rtx-backend", metavar="DEVICE", default=None,
                    help="run rtxcore's backend conformance suite on DEVICE (a device type "
                         "such as opencl or mydev, or one device: opencl:1)")
    group.addoption("--rtx-progress", action="store_true", default=False,
                    help="report progress as one line per test file (counts and time) "
                         "instead of a character per test")


@pytest.hookimpl(trylast=True)  # (after the terminal reporter is made)
def pytest_configure(config: Any) -> None:
    if config.getoption("rtx_backend", None):
        from rtxcore.testing import plugin

        # pytest_configure is a historic hook: registering calls the plugin's now
        config.pluginmanager.register(plugin, "rtxcore-conformance")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if (config.getoption("rtx_progress", False) and reporter is not None
            and config.getoption("verbose", 0) == 0
            and not hasattr(config, "workerinput")):  # (an xdist worker reports nothing)
        config.pluginmanager.register(FileProgress(config, reporter), "rtxcore-progress")


# what each outcome is called in a file's line, in this order
_ORDER = ("failed", "error", "passed", "skipped", "xfailed", "xpassed")


class FileProgress:
    """Prints a line per test file as each file finishes; per-test characters
    and pytest's percentage column are turned off."""

    def __init__(self, config: Any, reporter: Any) -> None:
        self.config = config
        self.tr = reporter
        reporter.showfspath = False  # no "tests/test_x.py ....." lines
        if hasattr(reporter, "_show_progress_info"):
            reporter._show_progress_info = False  # no "[ 12%]" column
        self.t0 = time.perf_counter()
        self.total = 0
        self.done = 0
        # file -> {"counts": {outcome: n}, "items": n, "left": n, "start": t, "seconds": s}
        self.files: dict[str, dict[str, Any]] = {}
        self.width = 40
        self.lines = 0

    def pytest_collection_finish(self, session: Any) -> None:
        self._collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # under pytest-xdist (-n N) the workers collect; each collects the same ids
        if not self.total:
            self._collected(ids)

    def _collected(self, ids: list[str]) -> None:
        self.total = len(ids)
        for nodeid in ids:
            f = self.files.setdefault(nodeid.split("::", 1)[0],
                                      {"counts": {}, "items": 0, "left": 0, "start": None})
            f["items"] += 1
            f["left"] += 1
        if self.files:
            self.width = min(60, max(len(name) for name in self.files) + 2)

    def pytest_report_teststatus(self, report: Any, config: Any) -> Any:
        # pytest's categories and words (its summary uses them), without the character
        xfail = hasattr(report, "wasxfail")
        if report.failed:
            return ("failed", "", "FAILED") if report.when == "call" else ("error", "", "ERROR")
        if report.skipped:
            return ("xfailed", "", "XFAIL") if xfail else ("skipped", "", "SKIPPED")
        if report.when == "call":
            return ("xpassed", "", "XPASS") if xfail else ("passed", "", "PASSED")
        return None  # a passing setup or teardown: pytest's own (nothing shown)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        f = self.files.get(nodeid.split("::", 1)[0])
        if f is not None and f["start"] is None:
            f["start"] = time.perf_counter()

    def pytest_runtest_logreport(self, report: Any) -> None:
        f = self.files.get(report.nodeid.split("::", 1)[0])
        if f is None:
            return
        outcome = None
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            self.tr.write_line(f"{outcome.upper()} {report.nodeid}", red=True)
        elif report.when == "call":
            outcome = ("xpassed" if hasattr(report, "wasxfail") else "passed") if report.passed \
                else ("xfailed" if hasattr(report, "wasxfail") else "skipped")
        elif report.skipped:  # skipped in setup
            outcome = "skipped"
        if outcome is not None:
            f.setdefault("outcomes", {})[report.nodeid] = outcome

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        name = nodeid.split("::", 1)[0]
        f = self.files.get(name)
        if f is None:
            return
        self.done += 1
        f["left"] -= 1
        if f["left"] == 0:
            self._line(name, f)

    def pytest_sessionfinish(self, session: Any) -> None:
        # files cut short (-x, Ctrl-C): their line with what did run
        for name, f in self.files.items():
            if f["start"] is not None and f["left"]:
                self._line(name, f)

    def _line(self, name: str, f: dict[str, Any]) -> None:
        counts: dict[str, int] = {}
        for outcome in f.get("outcomes", {}).values():
            counts[outcome] = counts.get(outcome, 0) + 1
        what = ", ".join(f"{counts[k]} {k}" for k in _ORDER if counts.get(k))
        seconds = time.perf_counter() - (f["start"] or self.t0)
        elapsed = int(time.perf_counter() - self.t0)
        pct = 100 * self.done // max(self.total, 1)
        bad = bool(counts.get("failed") or counts.get("error"))
        if not self.lines:
            self.tr.write_line("")  # (after pytest's "collected N items")
        self.lines += 1
        self.tr.write_line(f"{name:<{self.width}}{what:<34}{seconds:7.1f} s   "
                           f"[{pct:3d}%  {elapsed // 60}:{elapsed % 60:02d}]",
                           red=bad, green=not bad)
