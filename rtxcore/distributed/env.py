"""The ``RTX_*`` environment variables the distributed code reads, each checked
when first read: a value out of its range (or not a number, or not one of the
words a flag takes) raises a ``ValueError`` naming the variable, the value and
what it takes, before anything runs with it.

========================== ===================================================
``RTX_MPI_ALLREDUCE_CHUNK``  bytes per piece of a large all-reduce: 0 (one
                             piece) or 64 KiB .. 1 GiB; default 2 MiB
``RTX_DISTRIBUTED_DEBUG``    check every collective's arguments across ranks:
                             0/1, OFF/INFO/DETAIL, true/false, yes/no
``RTX_DDP_PROGRESS``         DDP's progress thread on (1) or off (0); unset:
                             on when the node has a CPU to spare
``RTX_MPIEXEC``              the MPI launcher: an executable file
========================== ===================================================
"""

from __future__ import annotations

import os
import shutil

CHUNK_MIN, CHUNK_MAX = 64 << 10, 1 << 30


def _value(name: str) -> str | None:
    v = os.environ.get(name)
    return None if v is None or v.strip() == "" else v.strip()


def env_int(name: str, default: int, lo: int, hi: int, *, zero_ok: bool = False,
            unit: str = "") -> int:
    """``int($name)``, else ``default``; refused outside ``lo .. hi`` (0 also
    allowed with ``zero_ok``)."""
    v = _value(name)
    if v is None:
        return default
    allowed = (f"0 or " if zero_ok else "") + f"{lo:,} .. {hi:,}{unit}"
    try:
        n = int(v, 0)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not an integer; it takes {allowed}") from None
    if not (lo <= n <= hi or (zero_ok and n == 0)):
        raise ValueError(f"{name}={v!r} is out of range; it takes {allowed}")
    return n


_TRUE = ("1", "TRUE", "YES", "ON", "INFO", "DETAIL")
_FALSE = ("0", "FALSE", "NO", "OFF")


def env_flag(name: str, default: bool | None = False) -> bool | None:
    """A yes/no variable; unset (or empty) gives ``default``."""
    v = _value(name)
    if v is None:
        return default
    if v.upper() in _TRUE:
        return True
    if v.upper() in _FALSE:
        return False
    raise ValueError(f"{name}={v!r} is not a yes/no value; it takes one of "
                     f"{', '.join(_TRUE + _FALSE)}")


def allreduce_chunk() -> int:
    return env_int("RTX_MPI_ALLREDUCE_CHUNK", 2 << 20, CHUNK_MIN, CHUNK_MAX, zero_ok=True,
                   unit=" bytes")


def mpiexec_override() -> str | None:
    """``RTX_MPIEXEC`` when set: an executable file, given as a path or found on PATH."""
    v = _value("RTX_MPIEXEC")
    if v is None:
        return None
    found = v if os.path.sep in v else shutil.which(v)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ValueError(f"RTX_MPIEXEC={v!r} is not an executable file; it takes the path of "
                         "an MPI launcher (mpiexec), or unset it to use the one installed with "
                         "rtxcore[mpi]")
    return found
