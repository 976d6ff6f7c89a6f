#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one command of at most 8 minutes, with
# no network (nothing is downloaded: the machine has CuPy, NumPy, pluggy and
# pytest). Every stage has its own timeout; they add up to 440 s (454 s with
# the 2 s each is given to stop after its TERM).
#
#   1. device facts (nvidia-smi, CuPy's view of the device)             20 s
#   2. install rtxcore, rtx-cpu, rtx-cuda from this checkout, offline    40 s
#      (pip --no-deps --no-build-isolation: entry points only)
#   3. the CUDA-specific tests (tests/test_cuda.py)                      60 s
#   4. scripts/gpu_probe.py: cuda against cpu on the edge cases of
#      float // and %, casts, indexing; a tiny op, an indexing op and a
#      4096^2 matmul timed against raw CuPy                              60 s
#   5. the conformance suite on the device (pytest-xdist over the CPU
#      cores when present: pytest's counts, not the per-op table;
#      else one process stopping at the first failure, with the table)  140 s
#   6. as much of the device-generic suite as fits                     110 s
#   7. the CuPy kernel cache packed for the next run                    10 s
#
# CuPy compiles one kernel per (op, dtype, ndim, layout), 0.2-0.3 s each from
# an empty cache, so a cold run spends most of stages 5-6 compiling: the cache
# of the last run is unpacked first when given, and packed again at the end.
#
# Everything goes under $OUT (default ./gpu-check-out): summary.txt (one line
# per stage: name, exit status, seconds, result line), log.txt (the full log),
# cupy-cache.tar.gz. Usage:
#   OUT=/some/dir scripts/gpu-check.sh [DEVICE]      # DEVICE defaults to cuda:0
# Environment: PYTHON (default python3); GPU_CHECK_CACHE=path/to/cupy-cache.tar.gz
# (a previous run's, to start warm); GPU_CHECK_SCALE=0.1 shrinks every timeout
# and GPU_CHECK_SKIP_INSTALL=1 leaves the install out (rehearsals).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEV=${1:-cuda:0}
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/log.txt"
SUMMARY="$OUT/summary.txt"
: > "$LOG"
: > "$SUMMARY"
SCALE=${GPU_CHECK_SCALE:-1}
export CUPY_CACHE_DIR="$OUT/cupy-cache"
mkdir -p "$CUPY_CACHE_DIR"
if [ -n "${GPU_CHECK_CACHE:-}" ] && [ -f "$GPU_CHECK_CACHE" ]; then
    tar -xzf "$GPU_CHECK_CACHE" -C "$CUPY_CACHE_DIR" 2>>"$LOG" && echo "warm CuPy cache: $GPU_CHECK_CACHE" >> "$LOG"
fi
status=0

limit() {  # the stage's timeout, scaled (at least 1 s)
    "$PY" -c "import sys; print(max(1, int(float(sys.argv[1]) * float(sys.argv[2]))))" "$1" "$SCALE"
}

stage() {  # stage NAME TIMEOUT_SECONDS COMMAND...: run, log, one summary line
    local name=$1 secs
    secs=$(limit "$2")
    shift 2
    echo "=== $name (timeout ${secs}s)" >> "$LOG"
    local t0=$SECONDS
    timeout -k 2 "$secs" "$@" > "$OUT/.stage" 2>&1
    local rc=$?
    cat "$OUT/.stage" >> "$LOG"
    # the result: pytest's last count line, else the stage's last line
    local last
    last=$(grep -E "[0-9]+ (passed|failed|error)" "$OUT/.stage" | tail -1)
    [ -n "$last" ] || last=$(grep -v '^\s*$' "$OUT/.stage" | tail -1)
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && last="TIMED OUT after ${secs}s; last: $last"
    printf '%-28s rc=%-3s %4ss  %s\n' "$name" "$rc" $((SECONDS - t0)) "${last:0:160}" >> "$SUMMARY"
    [ "$rc" = 0 ] || status=1
    rm -f "$OUT/.stage"
    return "$rc"
}

stage "device facts" 20 bash -c "$PY -c 'import cupy; cupy.show_config()' 2>&1 | head -30; \
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tail -1"

if [ "${GPU_CHECK_SKIP_INSTALL:-0}" = 1 ]; then  # (rehearsals in an installed checkout)
    stage "install (offline)" 40 echo "skipped: GPU_CHECK_SKIP_INSTALL=1"
else
    stage "install (offline)" 40 \
        "$PY" -m pip install -q --no-deps --no-build-isolation -e . -e backends/rtx_cpu -e backends/rtx_cuda
fi

stage "cuda tests" 60 "$PY" -m pytest -q -p no:cacheprovider tests/test_cuda.py

stage "probe: cuda vs cpu, vs cupy" 60 "$PY" scripts/gpu_probe.py "$DEV"

XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n "$(nproc 2>/dev/null || echo 4)")
[ ${#XDIST[@]} = 0 ] && XDIST=(-x)
stage "conformance on $DEV" 140 env RTX_FALLBACK=error "$PY" -m rtxcore.testing "$DEV" "${XDIST[@]}"

# test modules that need a library this machine lacks (or opencl) are left out
IGNORE=$("$PY" scripts/gpu_probe.py --ignore-list 2>>"$LOG")
# shellcheck disable=SC2086
stage "device-generic suite" 110 env RTX_TEST_DEVICES="$DEV" "$PY" -m pytest -q -p no:cacheprovider \
    $IGNORE tests

stage "pack CuPy cache" 10 tar -czf "$OUT/cupy-cache.tar.gz" -C "$CUPY_CACHE_DIR" .
rm -rf "$CUPY_CACHE_DIR"

cat "$SUMMARY"
exit $status
