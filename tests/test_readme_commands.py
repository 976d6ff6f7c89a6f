"""The README's shell blocks: every one is marked ``<!-- check-install -->`` and
run as written by scripts/check_install.py (in CI, in a fresh venv: the installs
are too slow for the suite). Here: the blocks are found, each ``pip install``
names folders and extras that exist, and the other commands run in this
environment."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def check_install():
    spec = importlib.util.spec_from_file_location("check_install", ROOT / "scripts" / "check_install.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def commands() -> list[str]:
    out = []
    for block in check_install().readme_blocks():
        for line in block.splitlines():
            cmd = line.split("#", 1)[0].strip()
            if cmd:
                out.append(cmd)
    return out


def test_every_shell_block_in_the_readme_is_run_by_the_install_check():
    text = (ROOT / "README.md").read_text()
    shell = re.findall(r"^```(?:sh|bash|console)\n", text, re.M)
    marked = re.findall(r"<!-- check-install -->\s*\n```(?:sh|bash|console)\n", text)
    assert len(marked) >= 2 and len(marked) == len(shell), (len(marked), len(shell))
    cmds = commands()
    assert any(c.startswith("pip install") for c in cmds) and "rtx info" in cmds


def test_the_readme_installs_name_real_folders_and_extras():
    installs = [c for c in commands() if c.startswith("pip install")]
    backends = set()
    for cmd in installs:
        for arg in shlex.split(cmd)[2:]:
            folder, _, extras = arg.partition("[")
            path = ROOT / folder
            assert (path / "pyproject.toml").exists(), f"{arg}: no project at {path}"
            meta = tomllib.loads((path / "pyproject.toml").read_text())["project"]
            for extra in filter(None, extras.rstrip("]").split(",")):
                assert extra in meta.get("optional-dependencies", {}), f"{arg}: no extra {extra!r}"
            backends.add(meta["name"])
    assert {"rtxcore", "rtx-cpu", "rtx-opencl", "rtx-cuda"} <= backends, backends


def test_the_readme_commands_other_than_installs_run_here():
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = 0
    for cmd in commands():
        if cmd.startswith("pip install"):
            continue
        r = subprocess.run(cmd, shell=True, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
        if cmd == "rtx info":
            assert "default device: " in r.stdout
        ran += 1
    assert ran >= 2
