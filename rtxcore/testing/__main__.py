"""``python -m rtxcore.testing DEVICE [pytest options]``: the backend conformance
suite on DEVICE, with its table at the end (the same as ``pytest --rtx-backend
DEVICE``)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip())
        return 2
    import pytest
    from importlib.metadata import entry_points

    # (rtxcore is imported already, so pytest could not rewrite its asserts: say nothing)
    args = ["--rtx-backend", argv[0], "-q", "-p", "no:cacheprovider",
            "-W", "ignore::pytest.PytestAssertRewriteWarning", *argv[1:]]
    if not any(ep.value == "_rtxcore_pytestplugin" for ep in entry_points(group="pytest11")):
        args = ["-p", "_rtxcore_pytestplugin", *args]  # (rtxcore not installed as a package)
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
