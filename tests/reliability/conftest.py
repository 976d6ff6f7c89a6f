"""Shows the checkpoint fuzzer's outcome table in the terminal summary."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        if report.when != "call":
            continue
        for key, value in report.user_properties:
            if key == "checkpoint_fuzz_outcomes":
                terminalreporter.section("checkpoint fuzz outcomes")
                for what, count in sorted(value.items(), key=lambda kv: -kv[1]):
                    terminalreporter.write_line(f"{count:6d}  {what}")
