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

Scripts written for ``torchrun`` run unchanged: its common flags are taken
(``--nproc_per_node N`` / ``--nproc-per-node=N``, ``auto`` or ``cpu`` for one per
core; ``--nnodes 1``, ``--node_rank 0``, ``--standalone``, ``--master_addr``,
``--master_port``; the ``--rdzv_*`` and ``--max_restarts`` options are accepted
and unused) and every rank gets torchrun's environment: ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT`` (so ``int(os.environ["LOCAL_RANK"])`` and
``init_process_group("gloo")`` work)::

    python -m rtxcore.distributed.run --standalone --nproc_per_node=2 ddp_train.py

With several processes a node each gets ``OMP_NUM_THREADS`` and
``rtxcore.set_num_threads`` of its share of the cores (at least 1; torchrun sets
1), unless ``OMP_NUM_THREADS`` is already set.

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
from typing import Any

INSTALL = "pip install 'rtxcore[mpi]'   (mpi4py and the mpich wheel, which brings mpiexec)"


def find_mpiexec() -> str | None:
    """The launcher: $RTX_MPIEXEC, the mpiexec beside this Python, or PATH's."""
    from .env import mpiexec_override

    env = mpiexec_override()  # a path that is no executable is refused, naming the variable
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


# (rank, size, local rank, local size) as MPICH's Hydra, Open MPI and PMIx say them
_LAUNCHER_ENV = (("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                 ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                  "OMPI_COMM_WORLD_LOCAL_SIZE"),
                 ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"))


def torchrun_environment(env: dict[str, str]) -> dict[str, str]:
    """The variables torchrun gives each process, from what the MPI launcher set
    in ``env`` (the launcher's rank and sizes win over inherited values;
    ``MASTER_ADDR``/``MASTER_PORT`` keep the user's, else torchrun's defaults)."""
    for rank, size, local, local_size in _LAUNCHER_ENV:
        if rank in env:
            r, n = env[rank], env.get(size, "1")
            out = {"RANK": r, "WORLD_SIZE": n, "LOCAL_RANK": env.get(local, r),
                   "LOCAL_WORLD_SIZE": env.get(local_size, n)}
            break
    else:
        out = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    out.update(GROUP_RANK=env.get("GROUP_RANK", "0"), ROLE_RANK=out["RANK"],
               ROLE_WORLD_SIZE=out["WORLD_SIZE"],
               MASTER_ADDR=env.get("MASTER_ADDR", "127.0.0.1"),
               MASTER_PORT=env.get("MASTER_PORT", "29500"))
    return out


def thread_share(env: dict[str, str], cpus: int) -> int | None:
    """The threads each of a node's ``LOCAL_WORLD_SIZE`` processes gets: its share
    of the node's cores, where there are several processes and the user set no
    ``OMP_NUM_THREADS``; else None (nothing set). torchrun sets 1 in that case
    "to avoid the system being overloaded"; a share keeps a node's cores busy
    and still never runs more threads than cores (every backend pool, rtx_cpu's
    spinning C threads among them, and PyTorch's OpenMP, which read it)."""
    try:
        local = int(env.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        return None
    if local <= 1 or env.get("OMP_NUM_THREADS", "").strip():
        return None
    return max(1, cpus // local)


def run_rank(script: str, args: list[str]) -> None:
    """One rank: run ``script`` (or ``-m module``) as ``__main__`` with torchrun's
    environment and its share of the node's cores; any failure aborts the job."""
    os.environ.update(torchrun_environment(dict(os.environ)))
    share = thread_share(dict(os.environ), _cpus())
    if share is not None:
        import rtxcore

        os.environ["OMP_NUM_THREADS"] = str(share)  # (libraries the script loads later)
        rtxcore.set_num_threads(share)
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
       python -m rtxcore.distributed.run --nproc_per_node=N [torchrun options] script.py [args]

Runs script.py on N processes with the mpiexec of this environment; a failing
rank ends the whole job with its exit status."""


_IGNORED = ("rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "max_restarts",
            "monitor_interval", "redirects", "tee", "log_dir", "role")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def torchrun_options(opts: list[str], env: Any) -> list[str]:
    """``opts`` with torchrun's flags turned into mpiexec's (``--nproc_per_node N``
    -> ``-n N``); ``--master_addr``/``--master_port`` are put into ``env`` for the
    ranks. Anything else passes to mpiexec as it is. ValueError for a flag
    whose value can't be run here (more than one node: use mpiexec's hosts)."""
    out: list[str] = []
    i = 0
    while i < len(opts):
        flag = opts[i]
        if not flag.startswith("--"):
            out.append(flag)
            i += 1
            continue
        key, eq, value = flag[2:].partition("=")
        key = key.replace("-", "_")
        if key == "standalone" and not eq:  # one node, a local rendezvous: what this is
            i += 1
            continue
        takes = key in ("nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port",
                        *_IGNORED)
        if not takes:
            out.append(flag)
            i += 1
            continue
        if not eq:
            if i + 1 >= len(opts):
                raise ValueError(f"--{key} needs a value")
            value = opts[i + 1]
            i += 1
        i += 1
        if key == "nproc_per_node":
            if value in ("auto", "cpu"):
                n = _cpus()
            elif value.isdigit() and int(value) > 0:
                n = int(value)
            else:
                raise ValueError(f"--nproc_per_node {value!r}: expected a positive number, "
                                 f"'auto' or 'cpu'")
            out += ["-n", str(n)]
        elif key == "nnodes":
            if value not in ("1", "1:1"):
                raise ValueError(f"--nnodes {value}: this launcher starts one node's processes; "
                                 f"for several nodes give mpiexec's host options "
                                 f"(e.g. -n 8 -hosts node1,node2 -ppn 4)")
        elif key == "node_rank":
            if value != "0":
                raise ValueError(f"--node_rank {value}: one node only (see --nnodes)")
        elif key == "master_addr":
            env["MASTER_ADDR"] = value
        elif key == "master_port":
            if not value.isdigit() or not 0 < int(value) < 65536:
                raise ValueError(f"--master_port {value!r}: expected a port number")
            env["MASTER_PORT"] = value
        # _IGNORED: rendezvous and restarts are MPI's business here
    return out


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
    try:
        opts = torchrun_options(opts, os.environ)
    except ValueError as exc:
        print(f"rtxcore.distributed.run: {exc}\n\n{USAGE}", file=sys.stderr)
        return 2
    if rest[0] != "-m" and not Path(rest[0]).exists():
        print(f"rtxcore.distributed.run: no such script: {rest[0]}", file=sys.stderr)
        return 2
    try:
        mpiexec = find_mpiexec()
    except ValueError as exc:
        print(f"rtxcore.distributed.run: {exc}", file=sys.stderr)
        return 2
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
