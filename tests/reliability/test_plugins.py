"""Installed plugins that misbehave can't take the program, or a built-in device
name, with them. Each case is a real distribution (dist-info + entry point) in
a site folder of its own, loaded by a fresh interpreter next to the real
backends; the table below is what the registry and ``rtx info`` must say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# entry-point name -> (module source, what rtx info / the registry must report)
PLUGINS = {
    "raises": ("raise RuntimeError('rtx-raises is broken on purpose')",
               "RuntimeError: rtx-raises is broken on purpose"),
    "exits": ("import sys\nsys.exit(3)", "SystemExit: 3"),
    # sorts before "cpu", so it registers first: it must still not get the name
    "aaa_takeover": ("""
        from rtxcore.dispatch import Backend, hookimpl

        class Impostor(Backend):
            name = "cpu"

        @hookimpl
        def rtx_backends():
            return [Impostor()]
    """, "backend name 'cpu' belongs to rtxcore's rtx-cpu distribution"),
    "slow": ("""
        import time
        time.sleep(0.5)
        from rtxcore.dispatch import Backend, hookimpl

        class Slow(Backend):
            name = "slow"

        @hookimpl
        def rtx_backends():
            return [Slow()]
    """, None),
    "badsig": ("""
        from rtxcore.dispatch import hookimpl

        @hookimpl
        def rtx_kernels(backend, colour):
            return {}
    """, "colour"),
    "exits_in_hook": ("""
        import sys
        from rtxcore.dispatch import hookimpl

        @hookimpl
        def rtx_kernels(backend):
            sys.exit("no kernels today")
    """, "SystemExit: no kernels today"),
}

PROBE = """
    import json, warnings
    import rtxcore as rc
    from rtxcore.dispatch.registry import registry
    from rtxcore._cli import render
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = (rc.arange(4) * 2 + 1).tolist()
    registry.ensure_loaded()
    print(json.dumps({
        "value": value,
        "cpu_plugin": registry.backends["cpu"].plugin,
        "failed": registry.failed,
        "problems": [[p.plugin, p.what] for p in registry.problems],
        "backends": sorted(registry.backends),
        "warnings": [str(w.message) for w in caught if w.category is RuntimeWarning],
        "info": render(),
    }))
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict:
    site = tmp_path_factory.mktemp("site")
    for name, (src, _) in PLUGINS.items():
        dist = site / f"rtx_{name}-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: rtx-{name.replace('_', '-')}\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[rtxcore.backends]\n{name} = rtx_{name}\n")
        (site / f"rtx_{name}.py").write_text(textwrap.dedent(src))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, f"the program did not survive its plugins: {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_program_runs_on_with_every_plugin_installed(outcome: dict) -> None:
    assert outcome["value"] == [1, 3, 5, 7]
    assert "slow" in outcome["backends"]  # a slow import is just slow


@pytest.mark.parametrize("name", [n for n, (_, msg) in PLUGINS.items() if msg])
def test_each_misbehaving_plugin_is_reported_by_name(outcome: dict, name: str) -> None:
    msg = PLUGINS[name][1]
    reports = [w for p, w in outcome["failed"].items() if p == name]
    reports += [w for p, w in outcome["problems"] if p == name]
    assert any(msg in r for r in reports), (name, outcome["failed"], outcome["problems"])
    assert name in outcome["info"] and msg in outcome["info"]


def test_a_plugin_cannot_take_a_built_in_device_name(outcome: dict) -> None:
    assert outcome["cpu_plugin"] == "cpu"
    assert any("'cpu'" in w and "aaa_takeover" in w for w in outcome["warnings"]), \
        outcome["warnings"]


def test_keyboard_interrupt_in_a_plugin_still_stops_the_program(tmp_path: Path) -> None:
    from rtxcore.dispatch.registry import _plugin_error

    assert _plugin_error(SystemExit(1)) and _plugin_error(ValueError())
    assert not _plugin_error(KeyboardInterrupt())
