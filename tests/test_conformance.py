"""The per-primitive conformance suite (rtxcore/testing/conformance.py) on every
device: one test per primitive in rtxcore/dispatch/ops.py."""

from __future__ import annotations

import pytest

from rtxcore.dispatch import ops
from rtxcore.testing import conformance


def test_every_primitive_has_a_check():
    assert set(conformance.CHECKS) == set(ops.PRIMITIVES)


@pytest.mark.parametrize("op", sorted(ops.PRIMITIVES))
def test_primitive(device, op):
    conformance.CHECKS[op](device)


def test_table_reports_missing_and_failing(monkeypatch):
    import rtxcore as rc

    from . import fake_backend

    name = rc.register_backend(fake_backend, name="fake-conf")
    try:
        res = conformance.run("fake:0")
        assert res["cos"] == ("missing", "no kernel")
        assert all(status == "pass" for op, (status, _) in res.items() if op != "cos"), res
        # a kernel that computes the wrong thing is reported as a failure
        monkeypatch.setitem(rc.device("fake:0").kernels, "sin", rc.device("fake:0").kernels["tanh"])
        res = conformance.run("fake:0")
        assert res["sin"][0] == "fail" and "differ" in res["sin"][1]
        table = conformance.format_table(res, "fake:0")
        assert "1 fail, 1 missing" in table
    finally:
        rc.unregister_backend(name)
