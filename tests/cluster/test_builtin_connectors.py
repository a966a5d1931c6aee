"""Built-in connector types on the real control plane (Decision 15): a postgres Connector's credential is a
Secret the API server stores encrypted (read straight from etcd), that reaches only the Tool Pod, and that
no status, Event, operator log or other stored object ever carries; a bad config is a condition naming
the field."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import httpx

from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import GROUP, VERSION, Api, RunningOperator, manifests, ready, wait_for

CANARY = "pg-Canary-etcd-5d41c0ffee"  # the connector credential; it must never be readable as text


def _objects(namespace: str) -> dict[str, dict[str, Any]]:
    objs = manifests(namespace)
    objs["db-creds"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "shop-db", "namespace": namespace},
        "stringData": {"password": CANARY},
    }
    objs["db"] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": "shop-db", "namespace": namespace},
        "spec": {
            "source": {"type": "postgres"},
            "config": {"host": "db.example.internal", "port": 5432, "database": "shop", "user": "agent"},
            "credentials": [
                {
                    "field": "password",
                    "env": "SHOP_DB_PASSWORD",
                    "secretKeyRef": {"name": "shop-db", "key": "password"},
                }
            ],
        },
    }
    objs["agent"]["spec"]["connectors"] = ["shop-db"]
    return objs


def _etcd(cluster: ControlPlane) -> str:
    etcd = next(c for c in cluster.children if c.name == "etcd")
    flag = next(a for a in etcd.argv if a.startswith("--listen-client-urls="))
    return flag.split("=", 1)[1]


def _etcd_values(cluster: ControlPlane, key: str, *, prefix: bool = False) -> dict[str, bytes]:
    """Raw values from etcd's v3 JSON gateway: what is on disk, before the API server decrypts anything."""
    body: dict[str, str] = {"key": base64.b64encode(key.encode()).decode()}
    if prefix:
        end = key[:-1] + chr(ord(key[-1]) + 1)
        body["range_end"] = base64.b64encode(end.encode()).decode()
    answer = httpx.post(f"{_etcd(cluster)}/v3/kv/range", json=body, timeout=30)
    answer.raise_for_status()
    return {
        base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", ""))
        for kv in answer.json().get("kvs", [])
    }


def test_connector_credentials_are_encrypted_at_rest_and_reach_only_the_tool_pod(
    cluster: ControlPlane, api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    operator = start_operator()
    objs = _objects(api.namespace)
    for key in ("db-creds", "llm", "db", "agent"):
        api.must_apply(objs[key])
    ready(api)
    connector = wait_for(
        "Connector shop-db Ready",
        lambda: (
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in ((api.get("connectors", "shop-db") or {}).get("status") or {}).get("conditions")
                or []
            )
            and api.get("connectors", "shop-db")
        ),
    )
    assert connector["status"]["toolCount"] == 2

    # Only the Tool Pod receives the credential, as a reference to the Secret (never its value).
    for name in ("bot-tool", "bot-aer"):
        deployment = api.get("deployments", name) or {}
        env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        if name == "bot-tool":
            assert env["SHOP_DB_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
                "name": "shop-db",
                "key": "password",
            }
        else:
            assert "SHOP_DB_PASSWORD" not in env

    # etcd holds the Secret encrypted (AES-CBC under the control plane's EncryptionConfiguration)...
    stored = _etcd_values(cluster, f"/registry/secrets/{api.namespace}/shop-db")
    raw = stored[f"/registry/secrets/{api.namespace}/shop-db"]
    assert raw.startswith(b"k8s:enc:aescbc:v1:key1:")
    # ...and no stored object at all (Secrets, the Connector, the bundle ConfigMap, status, Events) holds the
    # credential as text, nor does the operator's log.
    everything = _etcd_values(cluster, "/registry/", prefix=True)
    assert len(everything) > 50
    assert not [key for key, value in everything.items() if CANARY.encode() in value]
    assert CANARY not in operator.process.output()
    # The API still serves it to whoever may read the Secret: encryption is at rest only.
    secret = api.get("secrets", "shop-db") or {}
    assert base64.b64decode(secret["data"]["password"]).decode() == CANARY


def test_a_bad_builtin_config_is_a_condition_naming_the_field(
    api: Api, start_operator: Callable[..., RunningOperator]
) -> None:
    start_operator()
    objs = _objects(api.namespace)
    objs["db"]["spec"]["config"]["port"] = "5432"  # a string: the type's schema wants an integer
    for key in ("db-creds", "llm", "db", "agent"):
        api.must_apply(objs[key])

    def connector_condition() -> dict[str, Any] | None:
        status = (api.get("connectors", "shop-db") or {}).get("status") or {}
        return next(
            (c for c in status.get("conditions") or [] if c["type"] == "Ready" and c["status"] == "False"),
            None,
        )

    condition = wait_for("Connector shop-db not Ready", connector_condition)
    assert "spec.config.port" in condition["message"] and "integer" in condition["message"]
    agent_condition = wait_for(
        "Agent not Ready for the Connector",
        lambda: (
            (c := api.condition("bot")).get("status") == "False"
            and "spec.config.port" in c.get("message", "")
            and c
        ),
    )
    assert agent_condition["reason"] == "ConfigInvalid"
    # The API server refuses what the CRD itself can tell: an unknown type.
    objs["db"]["spec"]["source"]["type"] = "oracle"
    refused = api.apply(objs["db"])
    assert refused.status_code == 422 and "source.type" in refused.text
