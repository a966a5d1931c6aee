"""A console consent in a cluster (issue 37), the decisions: the URL and issuer come from the Agent's own
Connector, the issuer must be on the OE's list, every request stays on its origin, and the Secret written
carries the token file and the operator's labels only."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agent_runtime.connectors.mcp.oauth import CachedServer, TokenSet
from agent_runtime.console.connector_consent import (
    ConsentRefused,
    allowed_issuers,
    consent_request,
    consent_target,
    issuer_problem,
    token_secret,
    url_problem,
)

ISSUER = "https://auth.example.com"
AGENT = {"spec": {"connectors": ["crm", "other"]}}


def _connector(**auth: Any) -> dict[str, Any]:
    auth = {"type": "oauth", "grant": "authorization_code", "authorization_server": ISSUER, **auth}
    return {
        "spec": {"source": {"type": "mcp"}, "config": {"url": "https://MCP.example.com/mcp", "auth": auth}}
    }


def _request(connector: str = "crm", **extra: str) -> Any:
    return consent_request({"agent": "team-a/bot", "connector": connector, **extra}, url_typed=False)


def test_the_target_comes_from_the_connector_and_a_typed_url_is_ignored() -> None:
    target = consent_target(
        _request(url="http://169.254.169.254/latest"), agent=AGENT, connector=_connector(scope="read")
    )
    assert (target.url, target.issuer, target.scope) == ("https://mcp.example.com/mcp", ISSUER, "read")
    assert (target.namespace, target.secret_name) == ("team-a", "mcp-oauth-crm")


@pytest.mark.parametrize(
    ("agent", "connector", "names"),
    [
        (None, _connector(), "no MCP connector waiting"),
        ({"spec": {"connectors": ["other"]}}, _connector(), "does not use connector crm"),
        (AGENT, None, "cannot be read by the OE"),
        (AGENT, _connector(grant="client_credentials"), "no person's consent"),
        (AGENT, _connector(authorization_server=""), "set spec.config.auth.authorization_server"),
        (AGENT, {"spec": {"source": {"type": "http"}}}, "not an MCP connector"),
    ],
)
def test_a_consent_the_resources_do_not_allow_is_refused_saying_why(
    agent: Any, connector: Any, names: str
) -> None:
    with pytest.raises(ConsentRefused, match=names):
        consent_target(_request(), agent=agent, connector=connector)


def test_only_listed_issuers_and_only_their_origin() -> None:
    allowed = allowed_issuers(f" {ISSUER}/ ,http://127.0.0.1:9000")
    assert issuer_problem(ISSUER, allowed=allowed) is None
    assert "oe.connectorConsent.authorizationServers" in (
        issuer_problem("https://evil.example", allowed=allowed) or ""
    )
    check = url_problem(ISSUER)
    assert check(f"{ISSUER}/.well-known/oauth-authorization-server") is None
    for elsewhere in ("https://evil.example/token", "http://auth.example.com/token", f"{ISSUER}:8443/t"):
        assert check(elsewhere) is not None
    with pytest.raises(ValueError, match="OE_CONNECTOR_CONSENT_ISSUERS"):
        allowed_issuers("not a url")


def test_the_secret_holds_the_token_file_under_the_connectors_key() -> None:
    target = consent_target(_request(), agent=AGENT, connector=_connector())
    kept = CachedServer(
        resource=target.url, issuer=ISSUER, token_endpoint=f"{ISSUER}/token", grant="authorization_code",
        tokens=TokenSet(access_token="at-1", refresh_token="rt-1"), consented_at=1.0,
    )  # fmt: skip
    secret = token_secret(target, kept)
    assert secret["metadata"] == {
        "name": "mcp-oauth-crm",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "agent-engine-operator",
                   "agentengine.io/mcp-oauth-connector": "crm"},
    }  # fmt: skip
    assert list(secret["data"]) == ["crm.json"]
    file = json.loads(base64.b64decode(secret["data"]["crm.json"]))
    assert CachedServer.model_validate(file) == kept
