#!/usr/bin/env python3
"""Set up a virtual environment and run rtxcore's main job or its tests.

    python3 dev.py demo     # set up .venv, install rtxcore + rtx-cpu, train the digits model
    python3 dev.py test     # set up .venv with the test tools, run the whole suite
    python3 dev.py bench    # set up (with PyTorch for comparison), run benchmarks/ops.py

Needs only python3 (3.10+). Installs are skipped when nothing they depend on changed.
Extra arguments after the command go to the program it runs (pytest, the demo, ...).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")

PACKAGES = [".", "backends/rtx_cpu", "backends/rtx_opencl", "backends/rtx_cuda"]
# the third-party backend template, installed for the tests (its conformance run)
TEST_PACKAGES = ["examples/rtx_template"]
# PoCL: an OpenCL driver for the CPU, so the opencl backend runs (and is tested)
# anywhere. A PoCL installed system-wide (apt install pocl-opencl-icd) is used
# instead where there is one: PyPI's (PoCL 3.0, LLVM 14) can't compile for CPUs
# newer than LLVM 14 (AMD Zen 5, ...), and two PoCLs would run the opencl tests twice.
SYSTEM_POCL = Path("/etc/OpenCL/vendors/pocl.icd")
OPENCL = [] if SYSTEM_POCL.exists() else ["pocl-binary-distribution>=3.0"]
EXAMPLES = ["tqdm>=4.60", "scikit-learn>=1.3"]  # what examples/train_digits.py needs
# CuPy for CUDA 13, in the tests only: without a GPU (or driver) the cuda backend
# must still import and explain itself, and that is tested with CuPy present;
# NVRTC (no driver needed) compiles the backend's CUDA C in the tests, as CuPy does
CUDA = ["cupy-cuda13x>=13", "nvidia-cuda-nvrtc==13.*"]
# rtxcore.distributed's tests run under mpiexec: mpi4py and MPICH's wheel (rtxcore[mpi])
MPI = ["mpi4py>=4.0", "mpich>=4.2"]
EXTRAS = {
    "demo": [*EXAMPLES, *OPENCL],
    # PyTorch (the CPU wheel) is a reference some tests compare against
    # pytest-xdist: the suite's files spread over the machine's cores (see main)
    "test": ["pytest>=7", "pytest-xdist>=3.5", "hypothesis>=6", "torch==2.13.0", *EXAMPLES,
             *OPENCL, *CUDA, *MPI],
    "bench": ["torch==2.13.0", *MPI],
}


def run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)  # type: ignore[arg-type]


# setuptools warns once per editable package that a folder named like the package
# may shadow it ("Editable installation. ... !!"); that is the point of an editable
# install here. The filter silences that warning only: errors still show.
PIP_ENV = {**os.environ, "PYTHONWARNINGS": ",".join(
    w for w in (os.environ.get("PYTHONWARNINGS"), "ignore:Editable installation:UserWarning") if w)}


def setup(kind: str) -> None:
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
        run([str(PY), "-m", "pip", "install", "--upgrade", "pip"])
    extras = EXTRAS[kind]
    packages = PACKAGES + (TEST_PACKAGES if kind == "test" else [])
    key = hashlib.sha256()
    for pkg in packages:
        key.update((ROOT / pkg / "pyproject.toml").read_bytes())
    key.update(" ".join(extras).encode())
    stamp = VENV / f".rtx-installed-{kind}"
    if stamp.exists() and stamp.read_text() == key.hexdigest():
        return
    editable = [a for pkg in packages for a in ("-e", pkg)]
    # pip's own progress (each download, its bar), not -q: the first `dev.py test`
    # fetches about 1.5 GB (README.md, "What dev.py installs") and would be
    # minutes of silence
    print(f"installing rtxcore (editable) and {len(extras)} packages for {kind!r}; "
          "the first time takes a few minutes", flush=True)
    run([str(PY), "-m", "pip", "install", *editable, *extras], env=PIP_ENV)
    if kind == "test" and _have_clblast():
        # optional: CLBlast's GEMM for the opencl backend (RTX_OPENCL_MATMUL=clblast);
        # pyclblast builds only where the CLBlast library is installed
        run([str(PY), "-m", "pip", "install", "pyclblast>=1.4"])
    stamp.write_text(key.hexdigest())


def _have_clblast() -> bool:
    return any(Path(d, "clblast_c.h").exists() for d in ("/usr/include", "/usr/local/include"))


# at most this many pytest processes: each holds about 1.4 GB (PyTorch, PoCL)
MAX_WORKERS = 4


def _workers(rest: list[str]) -> list[str]:
    """pytest-xdist's options for one test process per core (up to MAX_WORKERS),
    each taking whole files (``--dist loadfile``: a file's fixtures and compiled
    kernels serve all its tests); none where the caller chose (``-n``, ``-p``),
    asked for the debugger, or there is one core."""
    n = min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1)
    if n < 2 or any(a == "-n" or a.startswith(("-n", "--numprocesses", "-p", "--pdb")) for a in rest):
        return []
    return ["-n", str(n), "--dist", "loadfile"]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "bench", "setup"):
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    setup("test" if cmd == "setup" else cmd)
    if cmd == "demo":
        run([str(PY), "examples/train_digits.py", *rest])
    elif cmd == "test":
        # a line per test file (counts, time) rather than a screen of dots;
        # off under -v / -q (see _rtxcore_pytestplugin.py)
        run([str(PY), "-m", "pytest", "--rtx-progress", *_workers(rest), *rest])
    elif cmd == "bench":
        setup("test")
        run([str(PY), "benchmarks/ops.py", *rest])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
