"""The four distributions' metadata agree: one version (rtxcore/VERSION), backends
requiring a core range that holds it, the core's extras naming each backend in
that range, a license. scripts/check_install.py builds and installs them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib: Python 3.11+")

ROOT = Path(__file__).resolve().parent.parent
VERSION = (ROOT / "rtxcore" / "VERSION").read_text().strip()
BACKENDS = {"rtx-cpu": "rtx_cpu", "rtx-opencl": "rtx_opencl", "rtx-cuda": "rtx_cuda"}


def project(folder: str) -> dict:
    return tomllib.loads((ROOT / folder / "pyproject.toml").read_text())


def in_range(spec: str, version: str) -> bool:
    """Whether ``version`` satisfies ``>=A,<B`` (the only form used here)."""
    lo = re.search(r">=([\d.]+)", spec).group(1)
    hi = re.search(r"<([\d.]+)", spec).group(1)
    v = tuple(int(x) for x in version.split("."))
    return tuple(int(x) for x in lo.split(".")) <= v < tuple(int(x) for x in hi.split("."))


def test_one_version_source():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION
    core = project(".")
    assert core["project"]["dynamic"] == ["version"]
    assert core["tool"]["setuptools"]["dynamic"]["version"] == {"file": "rtxcore/VERSION"}
    import rtxcore

    assert rtxcore.__version__ == VERSION
    for pkg in BACKENDS.values():
        meta = project(f"backends/{pkg}")
        assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"file": f"{pkg}/VERSION"}
        link = ROOT / "backends" / pkg / pkg / "VERSION"
        assert link.is_symlink() and link.resolve() == (ROOT / "rtxcore" / "VERSION").resolve()
        assert "VERSION" in meta["tool"]["setuptools"]["package-data"][pkg]


@pytest.mark.parametrize("dist", sorted(BACKENDS))
def test_backend_requires_a_core_range_holding_the_version(dist):
    meta = project(f"backends/{BACKENDS[dist]}")["project"]
    assert meta["name"] == dist
    (core,) = [d for d in meta["dependencies"] if d.startswith("rtxcore")]
    assert re.fullmatch(r"rtxcore>=[\d.]+,<[\d.]+", core), core
    assert in_range(core, VERSION), (core, VERSION)
    major, minor = (int(x) for x in VERSION.split(".")[:2])
    assert not in_range(core, f"{major}.{minor + 1}.0"), "the range should end before the next minor"
    assert meta["license"] == "MIT" and meta["license-files"] == ["LICENSE"]
    assert (ROOT / "backends" / BACKENDS[dist] / "LICENSE").resolve() == (ROOT / "LICENSE").resolve()
    assert meta["requires-python"] and meta["classifiers"] and meta["authors"]


def test_core_extras_install_each_backend_in_range():
    meta = project(".")["project"]
    extras = meta["optional-dependencies"]
    want = {"cpu": "rtx-cpu", "opencl": "rtx-opencl", "pocl": "rtx-opencl[pocl]",
            "cuda12": "rtx-cuda[cuda12]", "cuda13": "rtx-cuda[cuda13]"}
    for extra, req in want.items():
        (dep,) = extras[extra]
        assert dep.startswith(req + ">="), (extra, dep)
        assert in_range(dep, VERSION), (extra, dep)
    assert any(d.startswith("pytest") for d in extras["testing"])
    assert any(d.startswith("pytest-xdist") for d in extras["test"])
    assert extras["mpi"]
    assert meta["license"] == "MIT"
    assert "Copyright (c) " in (ROOT / "LICENSE").read_text()
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_backend_versions_come_from_the_one_file():
    import rtx_cpu
    import rtx_cuda
    import rtx_opencl

    assert rtx_cpu.__version__ == rtx_opencl.__version__ == rtx_cuda.__version__ == VERSION
