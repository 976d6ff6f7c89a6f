"""``--rtx-progress`` (what ``python3 dev.py test`` passes): a line per test file
with its counts and time instead of a character per test; failures named as
they happen; pytest's own summary unchanged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FILES = {
    "test_many.py": """
import pytest

@pytest.mark.parametrize("i", range(25))
def test_ok(i):
    assert i >= 0

def test_skip():
    pytest.skip("not here")

@pytest.mark.xfail(reason="known")
def test_known():
    assert 0
""",
    "test_some_fail.py": """
import pytest

def test_fine():
    pass

def test_wrong():
    assert 1 == 2

@pytest.fixture
def broken():
    raise RuntimeError("fixture")

def test_broken(broken):
    pass
""",
}


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)


def test_one_line_per_file_with_counts_and_time(tmp_path):
    r = _run(tmp_path, "--rtx-progress", "-ra")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    many = [ln for ln in lines if re.match(r"test_many\.py\s+\d", ln)]
    some = [ln for ln in lines if re.match(r"test_some_fail\.py\s+\d", ln)]
    assert len(many) == 1 and len(some) == 1, r.stdout
    assert re.search(r"25 passed, 1 skipped, 1 xfailed\s+\d+\.\d s\s+\[ *\d+%\s+0:\d\d\]", many[0])
    assert re.search(r"1 failed, 1 error, 1 passed\s+\d+\.\d s\s+\[100%", some[0])
    # no per-test characters, and the failures named as they happen, before their file's line
    assert not any(re.fullmatch(r"test_\w+\.py [.sxFE]+.*", ln) for ln in lines)
    at = lines.index(some[0])
    assert "FAILED test_some_fail.py::test_wrong" in lines[:at]
    assert "ERROR test_some_fail.py::test_broken" in lines[:at]
    # pytest's summary keeps its words and counts
    assert "FAILED test_some_fail.py::test_wrong - assert 1 == 2" in r.stdout
    assert "SKIPPED [1] test_many.py" in r.stdout and "XFAIL test_many.py::test_known" in r.stdout
    assert re.search(r"1 failed, 26 passed, 1 skipped, 1 xfailed, 1 error in", lines[-1])


def test_off_without_the_option_and_under_verbose(tmp_path):
    plain = _run(tmp_path)
    assert "test_many.py ......................." in plain.stdout  # pytest's own dots
    verbose = _run(tmp_path, "--rtx-progress", "-v")
    assert "test_many.py::test_ok[0] PASSED" in verbose.stdout
    assert not re.search(r"^test_many\.py\s+25 passed", verbose.stdout, re.M)
