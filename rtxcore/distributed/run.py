"""Start a script on N processes: ``python -m rtxcore.distributed.run -n 4 train.py ARGS``.

A thin wrapper around the MPI launcher of this environment (the ``mpiexec``
next to this Python, which the mpich wheel installs, else the first on PATH).
Each process runs the script under a guard: an uncaught exception or a
non-zero exit status in any rank ends the whole job with that status, naming
the rank, instead of leaving the others blocked in a collective.

Options before the script go to ``mpiexec`` as they are, so multi-node runs
use the launcher's own host options, e.g. (MPICH's Hydra)::

    python -m rtxcore.distributed.run -n 8 -hosts node1,node2 -ppn 4 train.py
    python -m rtxcore.distributed.run -n 64 -f hostfile train.py

``mpiexec -n 4 python train.py`` works too; the guard is then installed by
``init_process_group`` (it catches ``sys.exit(n)`` and uncaught exceptions, not
``raise SystemExit(n)``).
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path

INSTALL = "pip install 'rtxcore[mpi]'   (mpi4py and the mpich wheel, which brings mpiexec)"


def find_mpiexec() -> str | None:
    """The launcher: $RTX_MPIEXEC, the mpiexec beside this Python, or PATH's."""
    env = os.environ.get("RTX_MPIEXEC")
    if env:
        return env
    for name in ("mpiexec", "mpirun"):
        here = Path(sys.executable).parent / name
        if here.exists():
            return str(here)
    return shutil.which("mpiexec") or shutil.which("mpirun")


def _rank() -> str:
    for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if v in os.environ:
            return os.environ[v]
    return "?"


def _abort(code: int, why: str) -> None:
    sys.stderr.write(f"rtxcore.distributed.run: rank {_rank()}: {why}; "
                     f"aborting the job (exit status {code})\n")
    sys.stderr.flush()
    time.sleep(0.2)  # let the launcher forward that before it kills every rank
    try:
        from mpi4py import MPI

        MPI.COMM_WORLD.Abort(code)
    finally:
        os._exit(code)


def run_rank(script: str, args: list[str]) -> None:
    """One rank: run ``script`` (or ``-m module``) as ``__main__``; any failure
    aborts the job."""
    module = None
    if script == "-m":
        if not args:
            raise SystemExit("-m needs a module name")
        module, args = args[0], args[1:]
        sys.argv = [module, *args]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [script, *args]
        sys.path.insert(0, str(Path(script).resolve().parent))
    try:
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or code == 0:
            return
        if not isinstance(code, int):
            sys.stderr.write(f"{code}\n")
            code = 1
        _abort(code, f"exited with status {exc.code!r}")
    except BaseException as exc:  # the traceback first, then end every rank
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        sys.stderr.write("".join(f"[rank {_rank()}] {line}\n" for line in text.rstrip().splitlines()))
        _abort(130 if isinstance(exc, KeyboardInterrupt) else 1, f"uncaught {type(exc).__name__}")


USAGE = """usage: python -m rtxcore.distributed.run -n N [mpiexec options] script.py [args]
       python -m rtxcore.distributed.run -n N [mpiexec options] -m module [args]

Runs script.py on N processes with the mpiexec of this environment; a failing
rank ends the whole job with its exit status."""


def main(argv: list[str]) -> int:
    if argv[:1] == ["--rank"]:  # inside one process the launcher started
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        run_rank(argv[1], argv[2:])
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    # launcher options run up to the first argument ending in .py (or after "--")
    if "--" in argv:
        cut = argv.index("--")
        opts, rest = argv[:cut], argv[cut + 1:]
    else:
        cut = next((i for i, a in enumerate(argv) if a.endswith(".py") or a == "-m"), None)
        if cut is None:
            print(f"no script given (an argument ending in .py, or one after --)\n\n{USAGE}",
                  file=sys.stderr)
            return 2
        opts, rest = argv[:cut], argv[cut:]
    if not rest:
        print(USAGE, file=sys.stderr)
        return 2
    if rest[0] != "-m" and not Path(rest[0]).exists():
        print(f"rtxcore.distributed.run: no such script: {rest[0]}", file=sys.stderr)
        return 2
    mpiexec = find_mpiexec()
    if mpiexec is None:
        print(f"rtxcore.distributed.run: no mpiexec found (next to {sys.executable} or on PATH).\n"
              f"Install MPI with: {INSTALL}\nor set RTX_MPIEXEC to your MPI's launcher.",
              file=sys.stderr)
        return 127
    cmd = [mpiexec, *opts, sys.executable, "-m", "rtxcore.distributed.run", "--rank", *rest]
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
