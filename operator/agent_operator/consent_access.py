"""What the OE may touch for a person's console consent to an Agent's MCP connectors (issue 37).

For each Connector of the Agent with `auth.grant: authorization_code` the operator makes sure the Secret
`mcp-oauth-NAME` exists (created empty, never rewritten: it holds a person's consent, and `agentengine
connectors login` may have made it already), and grants the OE's ServiceAccount, in a Role of the Agent's
own (`<agent>-mcp-consent`, owned by the Agent, so it goes with it):

- `get` on that Agent and on those Connectors, by name: the OE reads the connector's URL and pinned
  authorization server from the resource, never from the form;
- `update` on those Secrets, by name: the OE replaces the token file, and can write no other Secret and
  read none (Kubernetes cannot scope `create` by name, hence the pre-created Secret).

An Agent with no such connector gets no Role (a rule with no resourceNames would mean every name). The
operator holds each granted verb itself (RBAC refuses a grant beyond the granter's own), and `get, create,
patch, delete` on Roles and RoleBindings. Decisions are pure; `converge` is the thin I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agent_operator.kube import ApiError, ApiUnreachable, KubeApi, object_path
from agent_operator.models import Agent, Connector
from agent_operator.render import MANAGED_BY, owner_reference
from agent_operator.settings import RenderSettings
from agent_runtime.connectors.mcp.oauth import (
    AUTHORIZATION_CODE,
    OAUTH,
    SEED_SECRET_LABEL,
    SEED_SECRET_PREFIX,
)

log = logging.getLogger(__name__)

FIELD_MANAGER = "agent-engine-operator"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
CONSENT_LABEL = "agentengine.io/mcp-consent"


def consent_connectors(agent: Agent, connectors: Mapping[str, Connector | None]) -> list[str]:
    """The Agent's MCP Connectors that wait for a person's consent (`auth.grant: authorization_code`)."""
    names = []
    for name in agent.spec.connectors:
        connector = connectors.get(name)
        if connector is None or connector.spec.source.type != "mcp":
            continue
        auth = connector.spec.config.get("auth")
        if not isinstance(auth, Mapping):
            continue
        if auth.get("type") == OAUTH and auth.get("grant") == AUTHORIZATION_CODE:
            names.append(name)
    return sorted(set(names))


def role_name(agent: Agent) -> str:
    return f"{agent.meta.name}-mcp-consent"[:253]


def token_secret(namespace: str, connector: str) -> dict[str, Any]:
    """The empty Secret the OE's consent fills (the Tool Pod mounts it, optional, as its seed)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"{SEED_SECRET_PREFIX}{connector}",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, SEED_SECRET_LABEL: connector},
        },
        "type": "Opaque",
    }


def consent_role(agent: Agent, connectors: Sequence[str]) -> dict[str, Any]:
    if not connectors:
        raise ValueError("a consent Role needs at least one connector: empty resourceNames grant every name")
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(agent),
        "rules": [
            {"apiGroups": ["agentengine.io"], "resources": ["agents"], "verbs": ["get"],
             "resourceNames": [agent.meta.name]},
            {"apiGroups": ["agentengine.io"], "resources": ["connectors"], "verbs": ["get"],
             "resourceNames": list(connectors)},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["update"],
             "resourceNames": [f"{SEED_SECRET_PREFIX}{c}" for c in connectors]},
        ],
    }  # fmt: skip


def consent_binding(agent: Agent, settings: RenderSettings) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(agent),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(agent)},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": settings.oe_service_account,
                "namespace": settings.oe_namespace,
            }
        ],
    }


def _metadata(agent: Agent) -> dict[str, Any]:
    return {
        "name": role_name(agent),
        "namespace": agent.meta.namespace,
        "labels": {"app.kubernetes.io/managed-by": MANAGED_BY, CONSENT_LABEL: agent.meta.name},
        "ownerReferences": [owner_reference(agent)],
    }


def _differs(live: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    if live is None:
        return True
    fields = ("rules", "roleRef", "subjects")
    owners = [o.get("uid") for o in (live.get("metadata") or {}).get("ownerReferences") or []]
    return owners != [agent_uid(wanted)] or any(live.get(f) != wanted.get(f) for f in fields if f in wanted)


def agent_uid(manifest: Mapping[str, Any]) -> str:
    return str(manifest["metadata"]["ownerReferences"][0]["uid"])


async def converge(
    api: KubeApi,
    agent: Agent,
    connectors: Mapping[str, Connector | None],
    *,
    secret_meta: Callable[[str, str], Awaitable[object | None]],
    settings: RenderSettings,
) -> str | None:
    """Make the Secrets, the Role and its binding what `agent` needs; None when done, else why not (a
    refused write: the chart's RBAC is older than this operator). Writes only what differs, so a restart
    writes nothing. `secret_meta(namespace, name)`: a Secret's metadata (the reader's, so a deleted token
    Secret reconciles the Agent again), None when it does not exist."""
    ns = agent.meta.namespace
    names = consent_connectors(agent, connectors)
    role_path = f"{RBAC}/namespaces/{ns}/roles/{role_name(agent)}"
    binding_path = f"{RBAC}/namespaces/{ns}/rolebindings/{role_name(agent)}"
    try:
        if not names:
            # One read for an Agent with no such connector; both go when a Role is left from before.
            if await api.get(role_path) is not None:
                await api.delete(binding_path)
                await api.delete(role_path)
            return None
        for name in names:
            secret = f"{SEED_SECRET_PREFIX}{name}"
            if await secret_meta(ns, secret) is None:
                await api.create(
                    object_path("v1", "Secret", ns), token_secret(ns, name), field_manager=FIELD_MANAGER
                )  # None: it exists (a login's, or made meanwhile): left as it is
        role = consent_role(agent, names)
        if _differs(await api.get(role_path), role):
            await api.apply(role_path, role, field_manager=FIELD_MANAGER)
        binding = consent_binding(agent, settings)
        if _differs(await api.get(binding_path), binding):
            await api.apply(binding_path, binding, field_manager=FIELD_MANAGER)
    except ApiUnreachable:
        raise
    except ApiError as exc:
        log.warning(
            "mcp consent access not written",
            extra={"agent": agent.meta.name, "namespace": ns, "status": exc.status},
        )
        return f"cannot grant the OE the console consent to connectors {names} (HTTP {exc.status})"
    return None
