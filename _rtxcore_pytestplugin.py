"""The entry point of rtxcore's pytest plugin (group ``pytest11``).

Kept outside the rtxcore package so that pytest runs which don't ask for the
conformance suite don't import rtxcore and NumPy (a third of a second): this
module only adds ``--rtx-backend``; when it is given, the suite's plugin
(``rtxcore.testing.plugin``) is loaded and registered.
"""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("rtxcore", "rtxcore backend conformance")
    group.addoption("--rtx-backend", metavar="DEVICE", default=None,
                    help="run rtxcore's backend conformance suite on DEVICE (a device type "
                         "such as opencl or mydev, or one device: opencl:1)")


def pytest_configure(config: Any) -> None:
    if config.getoption("rtx_backend", None):
        from rtxcore.testing import plugin

        # pytest_configure is a historic hook: registering calls the plugin's now
        config.pluginmanager.register(plugin, "rtxcore-conformance")
