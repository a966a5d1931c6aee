"""The chart's side of the console consent in a cluster (issue 37): the OE is told which authorization
servers it may ask and its NetworkPolicy opens egress to those alone; the operator may make the per-Agent
Roles (it grants only what it holds) and is told the OE's ServiceAccount; nothing of it without values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_runtime.console.consent_cluster import ConsentCluster
from tests.unit.test_chart_client_auth import OE, _oe_env, helm  # noqa: F401 - the fixture
from tests.unit.test_chart_render import OPERATOR, one, pod, refused, render

ISSUER = "https://auth.example.test"
VALUES = {
    "oe__connectorConsent__authorizationServers[0].issuer": ISSUER,
    "oe__connectorConsent__authorizationServers[0].cidrs[0]": "203.0.113.7/32",
    "oe__connectorConsent__authorizationServers[0].port": "8443",
}


def _egress(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(one(docs, "NetworkPolicy", OE)["spec"]["egress"])


def _consent_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = [
        d for d in docs if d["kind"] in ("ClusterRole", "Role") and d["metadata"]["name"].endswith("operator")
    ]
    return [r for role in roles for r in role["rules"] if "rolebindings" in r.get("resources", [])]


def test_the_listed_issuer_is_the_oes_only_consent_egress_and_its_setting(helm: Path) -> None:  # noqa: F811
    docs = render(helm, **VALUES)
    env = _oe_env(docs)
    assert env["OE_CONNECTOR_CONSENT_ISSUERS"] == ISSUER
    cluster = ConsentCluster.from_env({**env, "KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert cluster is not None and cluster.issuers == (ISSUER,)
    rules = [r for r in _egress(docs) if any(p.get("port") == 8443 for p in r.get("ports", []))]
    assert rules == [
        {"to": [{"ipBlock": {"cidr": "203.0.113.7/32"}}], "ports": [{"protocol": "TCP", "port": 8443}]}
    ]
    operator_env = {
        e["name"]: e.get("value") for e in pod(one(docs, "Deployment", OPERATOR))["containers"][0]["env"]
    }
    assert operator_env["AGENT_OPERATOR_OE_SERVICE_ACCOUNT"] == OE
    assert _consent_rules(docs) == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
         "verbs": ["get", "create", "patch", "delete"]}
    ]  # fmt: skip


def test_without_values_no_consent_egress_and_no_setting(helm: Path) -> None:  # noqa: F811
    docs = render(helm)
    assert "OE_CONNECTOR_CONSENT_ISSUERS" not in _oe_env(docs)
    assert len(_egress(render(helm, **VALUES))) == len(_egress(docs)) + 1  # that one rule, nothing else


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"oe.connectorConsent.authorizationServers[0].issuer": ISSUER}, "cidrs"),
        ({"oe.connectorConsent.authorizationServers[0].issuer": "ftp://x",
          "oe.connectorConsent.authorizationServers[0].cidrs[0]": "10.0.0.1/32"}, "issuer"),
    ],
)  # fmt: skip
def test_a_bad_entry_is_refused_naming_it(helm: Path, values: dict[str, str], names: str) -> None:  # noqa: F811
    assert names in refused(helm, values)
