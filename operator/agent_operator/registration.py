"""What the OE needs to know about one Agent (Decision 12), as the Secret the operator publishes.

Pure: the Agent, its runtime token and the settings in, one Secret manifest out. The Secret lives in the
OE's namespace (the OE reads nothing else), so it cannot be owned by the Agent: the operator deletes it
when the Agent goes. It lists no tools: the tenant's own tools live in the image's code, which only the
AER can list, so the OE asks the AER (`GET /tools`) for them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from agent_operator.models import Agent
from agent_operator.render import AGENT_LABEL, MANAGED_BY, MODES, component_name
from agent_operator.settings import RenderSettings
from agent_runtime import contract
from agent_runtime.oe.agent_status import status_summary
from agent_runtime.oe.registration import (
    REGISTRATION_KEY,
    REGISTRATION_LABEL,
    AgentRef,
    AgentRegistration,
)

AGENT_NAMESPACE_LABEL = "agentengine.io/agent-namespace"
_MAX_NAME = 253


def registration_secret_name(namespace: str, name: str) -> str:
    """`reg-<namespace>-<name>`, unique per Agent; shortened with a digest when too long for a name."""
    full = f"reg-{namespace}-{name}"
    if len(full) <= _MAX_NAME:
        return full
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:12]
    return f"{full[: _MAX_NAME - 13]}-{digest}"


def registration_document(agent: Agent, *, token: str) -> AgentRegistration:
    """The registration itself: identity, token, the runtimes' Service URLs and the tool policy."""
    ns, name = agent.meta.namespace, agent.meta.name

    def url(component: str) -> str:
        port = contract.PORTS[MODES[component]]
        return f"http://{component_name(name, component)}.{ns}.svc:{port}"

    return AgentRegistration(
        agent=f"{ns}/{name}",
        token=token,  # type: ignore[arg-type]  # pydantic makes the SecretStr
        aer_url=url("aer"),
        tool_url=url("tool"),
        memory_url=url("memory") if agent.spec.components.memory.enabled else None,
        policy=agent.spec.tools,
        limits=agent.spec.limits,
        prices=agent.spec.pricing,  # spec.pricing, over the OE's own table (issue 33)
        agent_refs=agent_refs(agent),
    )


def agent_refs(agent: Agent) -> tuple[AgentRef, ...]:
    """spec.agentRefs as the OE routes them (issue 38): each a tool name and the Agent it starts."""
    own = agent.meta.namespace
    refs = []
    for ref in agent.spec.agent_refs:
        namespace = ref.namespace or own
        default = f"agent.{ref.name}" if namespace == own else f"agent.{namespace}.{ref.name}"
        refs.append(
            AgentRef(
                tool=ref.tool or default,
                agent=f"{namespace}/{ref.name}",
                description=ref.description,
                sensitive=ref.sensitive,
            )
        )
    return tuple(refs)


def render_registration(
    agent: Agent, *, token: str, settings: RenderSettings, notify: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The registration Secret in the OE's namespace, labelled so the OE's watch selects it. `notify`:
    spec.notify resolved, secret values included (agent_operator/notify_targets.py `notify_document`)."""
    document = registration_document(agent, token=token).model_dump(mode="json", by_alias=True)
    document["notify"] = notify or []
    # Unset limits and notify targets stay out: the document is what it was for an Agent without them.
    document["limits"] = agent.spec.limits.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    # The Agent's status as last written (conditions, bundle digest): the console's Agents page shows it.
    summary = status_summary(agent.status)
    document["status"] = summary.model_dump(mode="json", by_alias=True) if summary is not None else None
    for empty in ("limits", "notify", "status", "memoryUrl", "agentRefs"):
        if not document.get(empty):
            document.pop(empty, None)
    document["token"] = token  # the dump masks a SecretStr; the OE needs the value
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": registration_secret_name(agent.meta.namespace, agent.meta.name),
            "namespace": settings.registration_namespace,
            "labels": {
                "app.kubernetes.io/managed-by": MANAGED_BY,
                REGISTRATION_LABEL: "true",
                AGENT_LABEL: agent.meta.name,
                AGENT_NAMESPACE_LABEL: agent.meta.namespace,
            },
        },
        "type": "Opaque",
        "data": {REGISTRATION_KEY: base64.b64encode(text.encode()).decode()},
    }
