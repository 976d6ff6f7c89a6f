"""One ``device`` fixture runs every test that asks for it on every available
device of every installed backend, so a new backend inherits the whole suite.

The set also holds ``prims``, an in-process backend with the primitive kernels
only (tests/fake_backend.py): on it every composite op runs as the core's
decomposition, so those are tested as thoroughly as the backends' own kernels.

RTX_TEST_DEVICES=cpu,opencl:0 restricts the set.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

import rtxcore
from rtxcore.testing import available_devices

from .fake_backend import PrimsPlugin

rtxcore.register_backend(PrimsPlugin(), name="prims")

# Property tests draw the same examples on every run (a counterexample found once
# is found every time; what one found is also pinned with @example). A profile
# can't raise a test's own max_examples; RTX_HYPOTHESIS=explore draws at random,
# for looking for new counterexamples by hand.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("RTX_HYPOTHESIS", "ci"))


def _devices() -> list[str]:
    raw = os.environ.get("RTX_TEST_DEVICES")
    if raw:
        return [d.strip() for d in raw.split(",") if d.strip()]
    # backends that lack primitives (examples/rtx_template) run the conformance
    # suite instead (`pytest --rtx-backend NAME`), not this one
    return available_devices(complete=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", _devices())


def pytest_sessionstart(session: pytest.Session) -> None:
    # CI sets RTX_REQUIRE_DEVICES=cpu,opencl: a device that is missing there
    # is a failure, not a reason to run fewer tests
    required = [d.strip() for d in os.environ.get("RTX_REQUIRE_DEVICES", "").split(",") if d.strip()]
    have = available_devices()
    missing = [d for d in required if d not in have and f"{d}:0" not in have]
    if missing:
        from rtxcore.dispatch.registry import registry

        def why(d: str) -> str:
            if d not in registry.backends:
                return registry.missing_backend_message(d)
            return registry.backends[d].backend.unavailable_reason() or "no reason given"

        reasons = "; ".join(f"{d}: {why(d)}" for d in missing)
        raise pytest.UsageError(f"required test devices missing: {reasons}")


def pytest_report_header(config: pytest.Config) -> str:
    return "rtxcore devices under test: " + ", ".join(_devices())


def supports(device: str, dtype) -> bool:
    import rtxcore

    return rtxcore.device(device).supports(dtype)


@pytest.fixture
def submitted(monkeypatch):
    """The (first, end) of each run of rows or blocks handed to rtx_cpu's pool
    (test_cpu_backend.py, test_cpu_ckernels.py)."""
    from rtx_cpu import fused

    runs = []
    real_pool = fused.pool

    class Spy:
        def submit(self, *a, **k):
            runs.append(a[1:])
            return real_pool().submit(*a, **k)

    monkeypatch.setattr(fused, "pool", lambda: Spy())
    return runs


@pytest.fixture
def opencl_calls(monkeypatch):
    """``spy(op)``: a list that records each call of the opencl device's kernel
    ``op`` (which still runs) (test_opencl_activations, _pool, _conv)."""
    import rtxcore

    table = rtxcore.tensor([0.0], device="opencl")._device.kernels

    def spy(op):
        calls = []
        real = table[op]
        monkeypatch.setitem(table, op, lambda *a: calls.append(op) or real(*a))
        return calls

    return spy
