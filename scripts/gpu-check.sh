#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one go (a few minutes):
#   1. install rtxcore, rtx-cpu and rtx-cuda from this checkout, offline
#      (pip --no-deps --no-build-isolation: the machine has CuPy, NumPy, pluggy
#      and pytest, and maybe no network);
#   2. rtx info;
#   3. the conformance suite on the device (every primitive, dtype and layout
#      against cpu, then composites, gradcheck, training), ending with its table;
#   4. the device-generic test suite with the device under test (test modules
#      whose extra libraries are missing here are left out, and named);
#   5. benchmarks/ops.py --device cuda (beside CuPy's own calls).
# It ends with a summary of each step. Usage:
#   scripts/gpu-check.sh [DEVICE]       # DEVICE defaults to cuda:0
# Environment: PYTHON (default python3), GPU_CHECK_QUICK=1 for a short benchmark.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEV=${1:-cuda:0}
LOG=${GPU_CHECK_LOG:-gpu-check.log}
: > "$LOG"
declare -a SUMMARY=()
status=0

step() {  # step NAME TIMEOUT_SECONDS COMMAND...: run, log, remember the outcome
    local name=$1 limit=$2
    shift 2
    echo "=== $name" | tee -a "$LOG"
    local t0=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    SUMMARY+=("$(printf '%-34s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
    [ "$rc" = 0 ] || status=1
}

step "install (offline, editable)" 120 \
    "$PY" -m pip install -q --no-deps --no-build-isolation -e . -e backends/rtx_cpu -e backends/rtx_cuda

step "rtx info" 60 "$PY" -m rtxcore info

step "conformance suite (table per op)" 150 env RTX_FALLBACK=error "$PY" -m rtxcore.testing "$DEV"

# modules that need a library this machine may lack are left out, and said so
IGNORE=$("$PY" - <<'EOF'
import importlib.util, pathlib, re
need = {"hypothesis": "hypothesis", "safetensors": "safetensors", "sklearn": "scikit-learn",
        "tqdm": "tqdm", "pyopencl": "pyopencl", "torch": "torch"}
missing = {m for m in need if importlib.util.find_spec(m) is None}
for f in sorted(pathlib.Path("tests").glob("test_*.py")):
    text = f.read_text()
    # only top-level imports make a module unimportable; the rest skip or fail by themselves
    top = {m for m in missing if re.search(rf"^(import|from) {m}\b", text, re.M)}
    if f.name == "test_serialization.py" and "safetensors" in missing:
        top.add("safetensors")
    if top:
        print(f"--ignore={f} ", end="")
        import sys; print(f"left out {f.name}: needs {', '.join(sorted(top))}", file=sys.stderr)
EOF
)
# shellcheck disable=SC2086
step "test suite on $DEV" 300 env RTX_TEST_DEVICES="$DEV" "$PY" -m pytest -q -p no:cacheprovider \
    --maxfail=20 $IGNORE tests

BENCH=()
[ "${GPU_CHECK_QUICK:-0}" = 1 ] && BENCH+=(--quick)
step "benchmarks/ops.py --device $DEV" 240 "$PY" benchmarks/ops.py --device "$DEV" --no-torch "${BENCH[@]}"

echo
echo "=== summary ($DEV)" | tee -a "$LOG"
for line in "${SUMMARY[@]}"; do echo "$line" | tee -a "$LOG"; done
grep -E "^[0-9]+ (passed|failed)|(passed|failed).* in [0-9.]+s" "$LOG" | tail -1
exit $status
