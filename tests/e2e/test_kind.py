"""End to end on kind: tests/install_flow.py's journey, the same steps the real-node tier runs."""

from __future__ import annotations

from tests.install_flow import Platform, run_journey


def test_install_run_call_police_upgrade_delete(kind_platform: Platform) -> None:
    report = run_journey(kind_platform)
    assert report["connections"], report
