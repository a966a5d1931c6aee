"""A Connector's spec.tls: the CA from a ConfigMap or Secret key reaches only the Tool Pod, under
TLS_CA_<NAME>, and the bundle's connector file trusts exactly it (`tls.ca_env`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_operator.bundle import BUNDLE
from agent_operator.controller import _connector_refs
from agent_operator.inputs import InputProblem, SecretMeta, agent_references, connector_ca_env
from agent_operator.models import Agent, Connector
from agent_operator.reconcile import Plan, plan_agent
from agent_operator.settings import RenderSettings
from agent_runtime.contract import is_platform_env
from tests.unit.operator.specimens import agent_body, connector_body, inputs, petstore_text

SETTINGS = RenderSettings()
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"
FROM_CONFIG_MAP = {"caConfigMapKeyRef": {"name": "petstore-ca", "key": "ca.crt"}}
FROM_SECRET = {"caSecretKeyRef": {"name": "petstore-ca-secret", "key": "ca.crt"}}


def _config_maps(ca: dict[str, str] | None = None) -> dict[str, dict[str, str] | None]:
    return {
        "petstore-openapi": {"openapi.json": petstore_text()},
        "petstore-ca": {"ca.crt": CA_PEM} if ca is None else ca,
    }


def _secrets(**extra: SecretMeta | None) -> dict[str, SecretMeta | None]:
    return {
        "llm-keys": SecretMeta(resource_version="11", keys=frozenset({"openai"})),
        "petstore-creds": SecretMeta(resource_version="12", keys=frozenset({"token"})),
        **extra,
    }


def _plan(tls: dict[str, Any], **kwargs: Any) -> Plan:
    kwargs.setdefault("config_maps", _config_maps())
    kwargs.setdefault(
        "secrets",
        _secrets(**{"petstore-ca-secret": SecretMeta(resource_version="7", keys=frozenset({"ca.crt"}))}),
    )
    return plan_agent(inputs(connectors=[connector_body(tls=tls)], **kwargs), settings=SETTINGS)


def _env(plan: Plan) -> dict[str, dict[str, Any]]:
    return {
        d.manifest["metadata"]["name"]: {
            e["name"]: e for e in d.manifest["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        for d in plan.objects
        if d.manifest["kind"] == "Deployment"
    }


def _connector_file(plan: Plan) -> dict[str, Any]:
    files = {k: v for part in plan.bundle.parts for k, v in part.data.items()}
    return json.loads(files["petstore.yaml"])


@pytest.mark.parametrize(
    "name", ["petstore", "agent-api", "runtime-x", "python-svc", "lc-data", "kubernetes"]
)
def test_the_ca_variable_is_deterministic_and_never_a_platform_name(name: str) -> None:
    env = connector_ca_env(name)
    assert env == "TLS_CA_" + name.upper().replace("-", "_")
    assert not is_platform_env(env)


def test_a_config_map_ca_reaches_only_the_tool_pod_and_the_bundle_trusts_it() -> None:
    plan = _plan(FROM_CONFIG_MAP)
    env = _env(plan)
    assert env["support-bot-tool"]["TLS_CA_PETSTORE"] == {"name": "TLS_CA_PETSTORE", "value": CA_PEM}
    assert "TLS_CA_PETSTORE" not in env["support-bot-aer"]
    assert _connector_file(plan)["tls"] == {"ca_env": "TLS_CA_PETSTORE"}


def test_a_secret_ca_reaches_only_the_tool_pod_by_secret_key_ref() -> None:
    plan = _plan(FROM_SECRET)
    env = _env(plan)
    assert env["support-bot-tool"]["TLS_CA_PETSTORE"]["valueFrom"] == {
        "secretKeyRef": {"name": "petstore-ca-secret", "key": "ca.crt"}
    }
    assert "TLS_CA_PETSTORE" not in env["support-bot-aer"]
    assert _connector_file(plan)["tls"] == {"ca_env": "TLS_CA_PETSTORE"}


def test_without_tls_nothing_changes() -> None:
    plan = plan_agent(inputs(), settings=SETTINGS)
    assert "tls" not in _connector_file(plan) or _connector_file(plan)["tls"] is None
    assert not any(name.startswith("TLS_CA_") for env in _env(plan).values() for name in env)


def test_a_changed_ca_rolls_the_tool_pod() -> None:
    def template(plan: Plan) -> Any:
        return next(
            d.manifest["spec"]["template"]
            for d in plan.objects
            if d.manifest["metadata"]["name"] == "support-bot-tool" and d.manifest["kind"] == "Deployment"
        )

    before = _plan(FROM_CONFIG_MAP)
    after = _plan(FROM_CONFIG_MAP, config_maps=_config_maps({"ca.crt": CA_PEM.replace("test", "next")}))
    assert template(before) != template(after)
    secret_before = _plan(FROM_SECRET)
    secret_after = _plan(
        FROM_SECRET,
        secrets=_secrets(
            **{"petstore-ca-secret": SecretMeta(resource_version="8", keys=frozenset({"ca.crt"}))}
        ),
    )
    assert template(secret_before) != template(secret_after)


@pytest.mark.parametrize(
    ("tls", "config_maps", "secret", "reason", "field"),
    [
        (
            FROM_CONFIG_MAP,
            {"petstore-openapi": {"openapi.json": petstore_text()}},
            None,
            "CaMissing",
            "spec.tls.caConfigMapKeyRef.name",
        ),
        (
            FROM_CONFIG_MAP,
            _config_maps({"other": CA_PEM}),
            None,
            "CaKeyMissing",
            "spec.tls.caConfigMapKeyRef.key",
        ),
        (FROM_SECRET, _config_maps(), None, "CaMissing", "spec.tls.caSecretKeyRef.name"),
        (
            FROM_SECRET,
            _config_maps(),
            SecretMeta(resource_version="7", keys=frozenset({"tls.crt"})),
            "CaKeyMissing",
            "spec.tls.caSecretKeyRef.key",
        ),
    ],
)
def test_a_missing_ca_object_or_key_is_a_condition_naming_the_field(
    tls: dict[str, Any],
    config_maps: dict[str, dict[str, str] | None],
    secret: SecretMeta | None,
    reason: str,
    field: str,
) -> None:
    with pytest.raises(InputProblem) as caught:
        _plan(tls, config_maps=config_maps, secrets=_secrets(**{"petstore-ca-secret": secret}))
    assert caught.value.reason == reason
    assert caught.value.condition == BUNDLE
    assert f"Connector petstore: {field}" in caught.value.message
    assert CA_PEM not in caught.value.message


def test_tls_needs_an_https_base_url() -> None:
    connector = connector_body(
        tls=FROM_CONFIG_MAP, source={"type": "openapi", "baseUrl": "http://x.example/v1"}
    )
    with pytest.raises(InputProblem, match=r"spec\.tls applies only to an https spec\.source\.baseUrl"):
        plan_agent(inputs(connectors=[connector], config_maps=_config_maps()), settings=SETTINGS)


def test_the_ca_config_map_and_secret_are_watched_references() -> None:
    agent = Agent.from_body(agent_body())
    for tls, kind, name in (
        (FROM_CONFIG_MAP, "ConfigMap", "petstore-ca"),
        (FROM_SECRET, "Secret", "petstore-ca-secret"),
    ):
        body = connector_body(tls=tls)
        refs = agent_references(agent, {"petstore": Connector.from_body(body)})
        assert name in (refs.config_maps if kind == "ConfigMap" else refs.secrets)
        assert name in _connector_refs(body, kind)
