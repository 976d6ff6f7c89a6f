#!/usr/bin/env python3
"""Build rtxcore's four distributions and install each backend alone, as a user would.

    python3 scripts/check_install.py                 # everything (a few minutes)
    python3 scripts/check_install.py --only cpu      # one backend
    python3 scripts/check_install.py --work /tmp/ci  # where venvs and wheels go

1. ``python -m build``: an sdist, then a wheel built from that sdist, for rtxcore,
   rtx-cpu, rtx-opencl and rtx-cuda; each checked for its LICENSE, its version
   (``rtxcore/VERSION``) and, for backends, the ``rtxcore`` range it requires.
2. Per backend, a fresh venv with only the core and that backend installed from
   the wheels (``rtxcore[cpu]`` etc.: the extras are what is tested), then
   ``rtx info`` and ``scripts/install_smoke.py`` (create, print, compute,
   autograd, optimizer steps, data loading, save/load); cuda: import and
   ``rtx info`` only, as there may be no GPU; with ``rtxcore[testing]`` added,
   the conformance runner on cpu.
3. Bad input: ``rtx info`` with only the core exits non-zero with the install
   hint; a backend with a core outside its range fails at install time with
   pip's resolver message.
4. The README's shell blocks marked ``<!-- check-install -->`` run, in a fresh venv.

Needs python3 (3.10+) and the package index (or pip's cache). Prints a line per
step with its time; exits non-zero at the first failure. Run by .ci/run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = (ROOT / "rtxcore" / "VERSION").read_text().strip()
DISTS = {"rtxcore": ".", "rtx_cpu": "backends/rtx_cpu", "rtx_opencl": "backends/rtx_opencl",
         "rtx_cuda": "backends/rtx_cuda"}
SYSTEM_POCL = Path("/etc/OpenCL/vendors/pocl.icd")
# what a user installs for each backend (the core's extras); opencl with PoCL's
# wheel only where no PoCL is installed system-wide (as dev.py does)
EXTRA = {"cpu": "cpu", "opencl": "opencl" if SYSTEM_POCL.exists() else "pocl", "cuda": "cuda13"}
# the environment of every command: nothing of the checkout or of the dev setup
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if not k.startswith("RTX_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}

TIMES: list[tuple[str, float]] = []


class Failed(Exception):
    pass


def step(name: str, cmd: list[str], *, cwd: Path, expect_rc: int = 0, quiet: bool = False,
         env: dict[str, str] | None = None) -> str:
    """Run ``cmd``; fail unless it exits ``expect_rc``. Returns its output."""
    t0 = time.perf_counter()
    print(f"--- {name}: {' '.join(str(c) for c in cmd)}", flush=True)
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or CLEAN_ENV, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    dt = time.perf_counter() - t0
    TIMES.append((name, dt))
    if r.returncode != expect_rc:
        print(r.stdout)
        raise Failed(f"{name}: exit status {r.returncode}, expected {expect_rc}")
    if not quiet:
        print(r.stdout, end="" if r.stdout.endswith("\n") else "\n")
    print(f"    ({dt:.1f} s)", flush=True)
    return r.stdout


def venv(path: Path) -> Path:
    """A fresh venv without pip (the tools venv's pip installs into it)."""
    if path.exists():
        shutil.rmtree(path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def check_dists(dist: Path) -> dict[str, Path]:
    wheels = {}
    for name in DISTS:
        whl = dist / f"{name}-{VERSION}-py3-none-any.whl"
        sdist = dist / f"{name.replace('_', '-')}-{VERSION}.tar.gz"
        if not sdist.exists():
            sdist = dist / f"{name}-{VERSION}.tar.gz"
        if not whl.exists() or not sdist.exists():
            raise Failed(f"{name}: expected {whl.name} and an sdist in {dist}, found "
                         f"{sorted(p.name for p in dist.iterdir())}")
        with zipfile.ZipFile(whl) as z:
            meta = z.read(f"{name}-{VERSION}.dist-info/METADATA").decode()
            names = z.namelist()
        with tarfile.open(sdist) as t:
            members = {m.name.split("/", 1)[-1]: m for m in t.getmembers()}
        problems = []
        for m in ("LICENSE", "PKG-INFO"):
            if m not in members or not members[m].isfile():
                problems.append(f"sdist lacks {m} as a file")
        pkg = "rtxcore" if name == "rtxcore" else name
        if f"{pkg}/VERSION" not in names:
            problems.append(f"wheel lacks {pkg}/VERSION")
        if "License-Expression: MIT" not in meta:
            problems.append("no License-Expression: MIT")
        if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
            problems.append("wheel lacks its LICENSE")
        if "Requires-Python: >=3.10" not in meta or "Classifier:" not in meta:
            problems.append("no Requires-Python or classifiers")
        if name != "rtxcore" and not re.search(r"^Requires-Dist: rtxcore<0\.\d+,>=0\.\d+$|"
                                               r"^Requires-Dist: rtxcore>=[\d.]+,<[\d.]+$", meta, re.M):
            problems.append("no Requires-Dist on rtxcore with a version range")
        if name == "rtxcore":
            for extra in ("cpu", "opencl", "pocl", "cuda12", "cuda13", "mpi", "testing", "test"):
                if f"Provides-Extra: {extra}" not in meta:
                    problems.append(f"no extra {extra!r}")
        if problems:
            raise Failed(f"{whl.name}: " + "; ".join(problems))
        print(f"    {whl.name}, {sdist.name}: metadata ok")
        wheels[name] = whl
    return wheels


def check_backend(kind: str, work: Path, tools: Path, wheels: dict[str, Path],
                  core_only: bool = False) -> None:
    env_dir = work / f"venv-{kind}"
    t0 = time.perf_counter()
    py = venv(env_dir)
    TIMES.append((f"{kind}: venv", time.perf_counter() - t0))
    pip = [tools, "-m", "pip", "--python", py, "install", "--progress-bar", "off"]
    core = wheels["rtxcore"]
    if core_only:
        # bad input first: the core alone runs nothing, and rtx info says what to install
        step(f"{kind}: install the core alone", [*pip, core], cwd=work, quiet=True)
        out = step("core alone: rtx info exits 1", [env_dir / "bin" / "rtx", "info"], cwd=work,
                   expect_rc=1)
        if "no backend is installed" not in out or "pip install" not in out:
            raise Failed("rtx info without a backend gives no install hint")
    backend = wheels[f"rtx_{kind}"]
    step(f"{kind}: install rtxcore[{EXTRA[kind]}] from the wheels",
         [*pip, f"{core}[{EXTRA[kind]}]", backend], cwd=work, quiet=True)
    listed = step(f"{kind}: pip list", [tools, "-m", "pip", "--python", py, "list",
                                        "--format=freeze"], cwd=work, quiet=True)
    others = [b for b in ("rtx-cpu", "rtx-opencl", "rtx-cuda")
              if b != f"rtx-{kind}" and re.search(rf"^{b}==", listed, re.M)]
    if others or not re.search(rf"^rtx-{kind}=={re.escape(VERSION)}$", listed, re.M):
        raise Failed(f"{kind}: the venv should hold rtx-{kind} {VERSION} alone, holds:\n{listed}")
    where = step(f"{kind}: rtxcore comes from the venv",
                 [py, "-c", "import rtxcore; print(rtxcore.__file__, rtxcore.__version__)"], cwd=work)
    if not where.startswith(str(env_dir)) or VERSION not in where:
        raise Failed(f"{kind}: rtxcore imported from {where.strip()}, not from {env_dir}")
    smoke = ROOT / "scripts" / "install_smoke.py"
    if kind == "cuda":
        step("cuda: import and rtx info", [py, smoke, "--info-only"], cwd=work)
    else:
        step(f"{kind}: smoke script", [py, smoke, "--device", kind], cwd=work)
    if kind == "cpu":
        # rtxcore[testing]: what the backend conformance runner needs, and no more
        step("cpu: install rtxcore[testing]", [*pip, f"{core}[testing]"], cwd=work, quiet=True)
        out = step("cpu: python -m rtxcore.testing cpu", [py, "-m", "rtxcore.testing", "cpu"],
                   cwd=work, quiet=True, env={**CLEAN_ENV, "RTX_FALLBACK": "error"})
        if "conformance: PASS" not in out:
            raise Failed("the conformance runner did not end with 'conformance: PASS'")
        print("    " + out.strip().splitlines()[-3])


def fake_core_wheel(work: Path, tools: Path, version: str) -> Path:
    """An empty distribution named rtxcore at ``version``: a core a backend's range excludes."""
    src = work / f"fake-rtxcore-{version}"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "rtxcore"\nversion = "{version}"\n[tool.setuptools]\npy-modules = []\n')
    out = work / "fake-dist"
    step(f"build a core {version}", [tools, "-m", "build", "--wheel", "-n", "--outdir", out, src],
         cwd=work, quiet=True)
    return out


def check_out_of_range(work: Path, tools: Path, wheels: dict[str, Path]) -> None:
    major, minor = (int(x) for x in VERSION.split(".")[:2])
    other = f"{major}.{minor + 1}.0"
    fake = fake_core_wheel(work, tools, other)
    py = work / "venv-cpu" / "bin" / "python"
    out = step(f"rtx-cpu {VERSION} with rtxcore {other}: pip refuses",
               [tools, "-m", "pip", "--python", py, "install", "--dry-run", "--no-index",
                "--find-links", fake, f"rtxcore=={other}", wheels["rtx_cpu"]],
               cwd=work, expect_rc=1)
    if "ResolutionImpossible" not in out and "conflicting dependencies" not in out:
        raise Failed("pip did not refuse the core outside the backend's range with its resolver")
    if f"rtx-cpu {VERSION} depends on rtxcore" not in out:
        raise Failed("pip's message does not name the backend's requirement on rtxcore")


def readme_blocks() -> list[str]:
    """The README's shell blocks marked ``<!-- check-install -->`` (their commands)."""
    text = (ROOT / "README.md").read_text()
    return [m.group(1) for m in
            re.finditer(r"<!-- check-install -->\s*\n```(?:sh|bash|console)\n(.*?)```", text, re.S)]


def check_readme(work: Path) -> None:
    """Run the README's install blocks as written, from the checkout, in a fresh venv
    (activated: ``pip`` and ``python`` are the venv's)."""
    blocks = readme_blocks()
    if not blocks:
        raise Failed("README.md has no shell block marked <!-- check-install -->")
    env_dir = work / "venv-readme"
    if env_dir.exists():
        shutil.rmtree(env_dir)
    env = {**CLEAN_ENV, "VIRTUAL_ENV": str(env_dir),
           "PATH": f"{env_dir / 'bin'}{os.pathsep}{CLEAN_ENV.get('PATH', '')}"}
    # (copies the checkout's sources without its build outputs, so builds start clean)
    src = work / "checkout"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
        ".hypothesis", "checkpoints"))
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    for i, block in enumerate(blocks, 1):
        step(f"README block {i}", ["bash", "-euo", "pipefail", "-c", block], cwd=src, env=env)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, default=ROOT / "build" / "check-install",
                   help="where the wheels and venvs go (default: build/check-install)")
    p.add_argument("--only", choices=["cpu", "opencl", "cuda"], action="append",
                   help="check only this backend (repeatable)")
    p.add_argument("--no-readme", action="store_true", help="skip the README's install blocks")
    args = p.parse_args(argv)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        t0 = time.perf_counter()
        tools = venv(work / "tools")
        subprocess.run([tools, "-m", "ensurepip", "--upgrade", "--default-pip"], check=True,
                       stdout=subprocess.DEVNULL, env=CLEAN_ENV)
        TIMES.append(("tools venv", time.perf_counter() - t0))
        step("tools: build, setuptools", [tools, "-m", "pip", "install", "--progress-bar", "off",
                                          "build>=1.0", "setuptools>=77"], cwd=work, quiet=True)
        dist = work / "dist"
        if dist.exists():
            shutil.rmtree(dist)
        for name, folder in DISTS.items():
            # sdist, then the wheel from the sdist (so the sdist is known to be complete);
            # -n: in the tools venv, which has the build requirements
            step(f"build {name}", [tools, "-m", "build", "-n", "--outdir", dist, ROOT / folder],
                 cwd=work, quiet=True)
        wheels = check_dists(dist)
        kinds = args.only or ["cpu", "opencl", "cuda"]
        for kind in kinds:
            check_backend(kind, work, tools, wheels, core_only=(kind == "cuda"))
        if "cpu" in kinds:
            check_out_of_range(work, tools, wheels)
        if not args.no_readme:
            check_readme(work)
    except Failed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        print("\ntimes:")
        for name, dt in TIMES:
            print(f"  {dt:6.1f} s  {name}")
        print(f"  {time.perf_counter() - start:6.1f} s  in all", flush=True)
    print("check_install: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
