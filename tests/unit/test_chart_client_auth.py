"""The installed OE authenticates its clients as the cluster's own users only (issue 28): the chart renders
`OE_CLIENT_AUTH=kubernetes`, its audiences, OIDC issuers and cache TTL, and no static client token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent_runtime.oe.settings import OESettings
from tests.cluster.controlplane import cache_root, pinned_versions
from tests.unit.test_chart_render import CHART, one, pod, refused, render

OE = "agent-engine-oe"


@pytest.fixture(scope="module")
def helm() -> Path:
    path = cache_root() / f"k8s-{pinned_versions()['K8S_VERSION']}" / "bin" / "helm"
    if not path.exists():
        pytest.skip(f"no helm at {path}: run `make cluster-bins`")
    return path


def _oe_env(docs: list[dict]) -> dict[str, str]:
    container = pod(one(docs, "Deployment", OE))["containers"][0]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_the_installed_oe_takes_kubernetes_identities_and_no_static_token(helm: Path) -> None:
    docs = render(helm)
    env = _oe_env(docs)
    assert env["OE_CLIENT_AUTH"] == "kubernetes"
    assert env["OE_CLIENT_AUTH_AUDIENCES"] == "agent-engine"
    assert env["OE_CLIENT_AUTH_CACHE_TTL_S"] == "10"
    assert "OE_CLIENT_AUTH_OIDC_ISSUERS" not in env
    # Nothing of the development token: no variable, no Secret, no volume.
    assert not {"OE_CLIENT_TOKEN", "OE_CLIENT_TOKEN_FILE", "OE_CLIENT_TOKEN_NAMESPACES"} & set(env)
    assert "client-token" not in json.dumps(docs)
    # What the OE makes of that env in its pod: the cluster's identities, the static token off.
    auth = OESettings.from_env({**env, "KUBERNETES_SERVICE_HOST": "10.96.0.1"}).client_auth
    assert auth is not None and auth.kubernetes and not auth.static
    assert auth.audiences == ("agent-engine",) and auth.cache_ttl_s == 10.0


def test_audiences_issuers_and_ttl_are_values(helm: Path) -> None:
    env = _oe_env(
        render(
            helm,
            oe__clientAuth__audiences="{agent-engine,console}",
            oe__clientAuth__oidcIssuers="{https://login.example.test,https://sso.example.test/realms/a}",
            oe__clientAuth__cacheTTLSeconds="30",
        )
    )
    assert env["OE_CLIENT_AUTH_AUDIENCES"] == "agent-engine,console"
    assert (
        env["OE_CLIENT_AUTH_OIDC_ISSUERS"] == "https://login.example.test,https://sso.example.test/realms/a"
    )
    assert env["OE_CLIENT_AUTH_CACHE_TTL_S"] == "30"
    auth = OESettings.from_env({**env, "KUBERNETES_SERVICE_HOST": "10.96.0.1"}).client_auth
    assert auth is not None
    assert auth.oidc_issuers == {"https://login.example.test", "https://sso.example.test/realms/a"}


def test_bad_client_auth_values_are_refused_naming_the_field(helm: Path) -> None:
    assert "/oe/clientAuth/oidcIssuers/0" in refused(helm, {"oe.clientAuth.oidcIssuers": "{http://plain}"})
    assert "/oe/clientAuth/cacheTTLSeconds" in refused(helm, {"oe.clientAuth.cacheTTLSeconds": "0"})
    assert "oe.clientAuth.audiences" in refused(helm, {"oe.clientAuth.audiences": "null"})
    # The development token is no chart value: an old values file naming it is told so.
    assert "clientToken" in refused(helm, {"oe.clientToken.existingSecret": "mine"})


def test_values_yaml_documents_the_client_auth_keys() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["oe"]["clientAuth"] == {
        "audiences": ["agent-engine"],
        "oidcIssuers": [],
        "cacheTTLSeconds": 10,
    }
    assert "clientToken" not in values["oe"]
