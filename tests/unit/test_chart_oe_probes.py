"""The OE's probes as the chart renders them (issue 35): readiness asks `/readyz`, which answers 503 while
the OE's store is unreachable (the Service stops sending it clients); liveness asks `/healthz`, which stays
200 then, so Kubernetes does not restart a replica for an outage a restart cannot cure."""

from __future__ import annotations

from pathlib import Path

from agent_runtime import contract
from tests.unit.test_chart_render import OE, helm, one, pod, render

__all__ = ["helm"]  # the fixture, used by name


def test_the_oe_is_ready_by_readyz_and_alive_by_healthz_on_every_store(helm: Path) -> None:
    postgres = {"oe__store__type": "postgres", "oe__store__postgres__urlSecret__name": "oe-pg"}
    for values in ({}, postgres):
        container = pod(one(render(helm, **values), "Deployment", OE))["containers"][0]
        assert container["readinessProbe"]["httpGet"] == {"path": contract.READY_PATH, "port": "http"}
        assert container["livenessProbe"]["httpGet"] == {"path": contract.HEALTH_PATH, "port": "http"}
        # A store outage fails readiness within seconds; liveness is never asked about the store at all.
        assert container["readinessProbe"]["periodSeconds"] <= 5
