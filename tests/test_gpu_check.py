"""scripts/gpu-check.sh, rehearsed here: its stages fit one command of 8 minutes,
and it leaves its summary, log and CuPy cache under $OUT even where the device
is unavailable (as on a machine without a GPU, where every GPU stage fails fast)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def stages() -> list[tuple[str, int]]:
    text = SCRIPT.read_text()
    found = re.findall(r'^\s*stage "([^"]+)" (\d+)', text, re.M)
    seen: dict[str, int] = {}
    for name, secs in found:  # (the install stage appears in both arms of an if)
        seen[name] = max(seen.get(name, 0), int(secs))
    return list(seen.items())


def test_the_stage_timeouts_fit_eight_minutes():
    names = [n for n, _ in stages()]
    assert len(names) == 7, names
    total = sum(s for _, s in stages())
    # each stage's timeout -k adds 2 s at most for a stage that ignores TERM
    assert "timeout -k 2 " in SCRIPT.read_text()
    assert total + 2 * len(names) <= 8 * 60 - 15, total
    text = SCRIPT.read_text()
    assert "--no-deps --no-build-isolation" in text  # never reaches for the network
    assert "dev.py" not in text


def test_a_rehearsal_writes_everything_under_out(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "GPU_CHECK_SCALE": "0.05",
           "GPU_CHECK_SKIP_INSTALL": "1"}
    p = subprocess.run(["bash", str(SCRIPT), "cuda:0"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=180)
    summary = (out / "summary.txt").read_text().splitlines()
    assert [line.split(" rc=")[0].strip() for line in summary] == [
        "device facts", "install (offline)", "cuda tests", "probe: cuda vs cpu, vs cupy",
        "conformance on cuda:0", "device-generic suite", "pack CuPy cache"], summary
    assert p.stdout.splitlines()[-len(summary):] == summary  # and it is printed at the end
    log = (out / "log.txt").read_text()
    for name in ("device facts", "cuda tests", "conformance on cuda:0"):
        assert f"=== {name}" in log
    assert "rc=0" in summary[-1]
    with tarfile.open(out / "cupy-cache.tar.gz") as tar:
        tar.getnames()  # a readable archive (empty where nothing was compiled)
    assert not (out / "cupy-cache").exists()
    assert not any(ROOT.glob("gpu-check*.log"))  # nothing written outside $OUT
    if p.returncode != 0:  # no GPU here: the GPU stages fail, and say so
        assert any("rc=0" not in line for line in summary[2:6])
