"""Sample Agents, Connectors, catalogs and Secret metadata for the operator's pure tests."""

from __future__ import annotations

import json
from typing import Any

from agent_operator.inputs import AgentInputs, SecretMeta
from agent_operator.models import Agent, Connector

NAMESPACE = "team-a"

PETSTORE_OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Petstore", "version": "1.0.0"},
    "servers": [{"url": "https://petstore.example.com/v1"}],
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "ok"}},
            },
            "post": {
                "operationId": "createPet",
                "summary": "Create a pet",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {"name": {"type": "string"}},
                            }
                        }
                    },
                },
                "responses": {"201": {"description": "created"}},
            },
        },
        "/pets/{petId}": {
            "get": {
                "operationId": "getPet",
                "summary": "Get one pet",
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
    },
}


def petstore_text(**changes: Any) -> str:
    doc = json.loads(json.dumps(PETSTORE_OPENAPI))
    doc["info"].update(changes)
    return json.dumps(doc, indent=2)


def agent_body(name: str = "support-bot", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "image": "registry.example.com/team-a/support-bot:1.4.2",
        "entrypoint": "support_bot.app:agent",
        "connectors": ["petstore"],
        "llm": {
            "baseUrl": "https://llm.example.com:8443/v1",
            "model": "support-model",
            "credentials": [
                {"name": "OPENAI_API_KEY", "secretKeyRef": {"name": "llm-keys", "key": "openai"}}
            ],
        },
    }
    base.update(spec)
    return {
        "apiVersion": "agentengine.io/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": 3},
        "spec": base,
    }


def connector_body(name: str = "petstore", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "source": {"type": "openapi", "baseUrl": "https://petstore.example.com/v1"},
        "catalog": {"configMapKeyRef": {"name": f"{name}-openapi", "key": "openapi.json"}},
        "expose": {"allow": ["listPets", "getPet"]},
        "auth": {
            "type": "bearer",
            "env": "PETSTORE_TOKEN",
            "secretKeyRef": {"name": "petstore-creds", "key": "token"},
        },
    }
    base.update(spec)
    return {
        "apiVersion": "agentengine.io/v1alpha1",
        "kind": "Connector",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "generation": 1},
        "spec": base,
    }


def inputs(
    agent: dict[str, Any] | None = None,
    *,
    connectors: list[dict[str, Any]] | None = None,
    config_maps: dict[str, dict[str, str] | None] | None = None,
    secrets: dict[str, SecretMeta | None] | None = None,
) -> AgentInputs:
    agent_model = Agent.from_body(agent or agent_body())
    connector_models = {
        c["metadata"]["name"]: Connector.from_body(c) for c in (connectors or [connector_body()])
    }
    return AgentInputs(
        agent=agent_model,
        connectors={name: connector_models.get(name) for name in agent_model.spec.connectors},
        config_maps=config_maps
        if config_maps is not None
        else {"petstore-openapi": {"openapi.json": petstore_text()}},
        secrets=secrets
        if secrets is not None
        else {
            "llm-keys": SecretMeta(resource_version="11", keys=frozenset({"openai"})),
            "petstore-creds": SecretMeta(resource_version="12", keys=frozenset({"token"})),
            "memory-db": SecretMeta(resource_version="13", keys=frozenset({"uri"})),
        },
    )
