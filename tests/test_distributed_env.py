"""The RTX_* variables the distributed code reads are checked when first read:
out-of-range or malformed values are refused naming the variable and its range."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rtxcore.distributed import env


@pytest.mark.parametrize("value,want", [("65536", 65536), ("0", 0), ("2097152", 2 << 20),
                                        ("0x10000", 65536), (" 1048576 ", 1 << 20),
                                        ("", 2 << 20), (None, 2 << 20)])
def test_chunk_accepts_its_range(monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv("RTX_MPI_ALLREDUCE_CHUNK", raising=False)
    else:
        monkeypatch.setenv("RTX_MPI_ALLREDUCE_CHUNK", value)
    assert env.allreduce_chunk() == want


@pytest.mark.parametrize("value,why", [("1", "out of range"), ("65535", "out of range"),
                                       ("-4", "out of range"), (str(2 << 30), "out of range"),
                                       ("abc", "not an integer"), ("1.5e6", "not an integer")])
def test_chunk_refuses_outside_it(monkeypatch, value, why):
    monkeypatch.setenv("RTX_MPI_ALLREDUCE_CHUNK", value)
    with pytest.raises(ValueError) as info:
        env.allreduce_chunk()
    msg = str(info.value)
    assert msg.startswith(f"RTX_MPI_ALLREDUCE_CHUNK={value!r} is {why}")
    assert "0 or 65,536 .. 1,073,741,824 bytes" in msg


@pytest.mark.parametrize("value,want", [("1", True), ("detail", True), ("INFO", True),
                                        ("yes", True), ("0", False), ("off", False),
                                        ("False", False), ("", None), (None, None)])
def test_flags(monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv("RTX_DDP_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("RTX_DDP_PROGRESS", value)
    assert env.env_flag("RTX_DDP_PROGRESS", None) is want


def test_a_flag_refuses_other_words(monkeypatch):
    monkeypatch.setenv("RTX_DISTRIBUTED_DEBUG", "2")
    with pytest.raises(ValueError, match=r"RTX_DISTRIBUTED_DEBUG='2' is not a yes/no value"):
        env.env_flag("RTX_DISTRIBUTED_DEBUG")


def test_mpiexec_override(monkeypatch, tmp_path):
    monkeypatch.setenv("RTX_MPIEXEC", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="RTX_MPIEXEC=.* is not an executable file"):
        env.mpiexec_override()
    plain = tmp_path / "plain"
    plain.write_text("")
    monkeypatch.setenv("RTX_MPIEXEC", str(plain))
    with pytest.raises(ValueError, match="not an executable file"):
        env.mpiexec_override()
    plain.chmod(0o755)
    assert env.mpiexec_override() == str(plain)
    monkeypatch.setenv("RTX_MPIEXEC", "sh")  # a name found on PATH
    assert os.path.basename(env.mpiexec_override()) == "sh"
    monkeypatch.delenv("RTX_MPIEXEC")
    assert env.mpiexec_override() is None


def _run(args, **extra):
    e = dict(os.environ, **extra)
    return subprocess.run([sys.executable, "-m", "rtxcore.distributed.run", *args],
                          capture_output=True, text=True, timeout=120, env=e)


def test_a_job_with_a_bad_chunk_ends_at_once_naming_the_variable(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import rtxcore.distributed as dist\ndist.init_process_group('mpi')\n"
                      "print('never reached')\n")
    res = _run(["-n", "2", str(script)], RTX_MPI_ALLREDUCE_CHUNK="1")
    assert res.returncode != 0
    assert "never reached" not in res.stdout
    assert "RTX_MPI_ALLREDUCE_CHUNK='1' is out of range" in res.stderr


def test_the_launcher_refuses_a_bad_mpiexec(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("print('never reached')\n")
    res = _run(["-n", "2", str(script)], RTX_MPIEXEC=str(tmp_path / "nope"))
    assert res.returncode == 2
    assert "RTX_MPIEXEC=" in res.stderr and "is not an executable file" in res.stderr
