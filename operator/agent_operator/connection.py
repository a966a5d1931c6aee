"""A Connector's `Connected` condition (issue 36), pure: which Agent to ask, when to ask, and the condition
from what the OE answered.

The connector's credential lives in the Tool Pods of the Agents that use it, and nowhere else; so the
operator does not test a connection itself. It asks the OE's connector-test route (the one `agentengine
connectors test` uses) with its own identity, for one Ready Agent of the namespace that lists the
Connector; the OE asks that Agent's Tool Pod, which runs the connector's `test_connection` with its
credentials and redacts the detail. The condition's reason is the failure's category, its message that
redacted detail: never the credential.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_operator.status import Condition, merge_conditions

CONNECTED = "Connected"
TOKEN_FILE_ENV = "AGENT_OPERATOR_OE_TOKEN_FILE"  # noqa: S105 - the name of a setting
PERIOD_ENV = "AGENT_OPERATOR_CONNECTION_TEST_SECONDS"
RETRY_ENV = "AGENT_OPERATOR_CONNECTION_RETRY_SECONDS"
MAX_MESSAGE = 500

# The connectors' own failure categories (a test's detail starts with "<category>: ", see
# agent_runtime.connectors.classify) as condition reasons.
_REASONS = {
    "auth": "Unauthorized",
    "forbidden": "Forbidden",
    "connection": "Unreachable",
    "timeout": "Unreachable",
    "privileges": "Privileges",
    "credential_missing": "CredentialMissing",
    "rate_limited": "RateLimited",
    "not_found": "NotFound",
    "server_error": "ProviderError",
    "client_error": "Refused",
}
_CATEGORY = re.compile(r"^([a-z_]+):\s")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")


class ConnectionSettings(BaseModel):
    """How the operator tests connections: its token for the OE (none: no test), and how often."""

    model_config = ConfigDict(frozen=True)

    token_file: str = ""  # a projected ServiceAccount token for the OE's audience (the chart mounts one)
    period_seconds: float = 600.0  # a Connector is tested again this long after its last answer; 0: never
    retry_seconds: float = 30.0  # after an answer that says nothing of the provider (Unknown)
    timeout_seconds: float = 30.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ConnectionSettings:
        fields: dict[str, Any] = {}
        if value := env.get(TOKEN_FILE_ENV, "").strip():
            fields["token_file"] = value
        for name, field in ((PERIOD_ENV, "period_seconds"), (RETRY_ENV, "retry_seconds")):
            if value := env.get(name, "").strip():
                try:
                    fields[field] = float(value)
                except ValueError:
                    raise ValueError(f"{name}={value!r}: write seconds, e.g. 600") from None
                if fields[field] < 0:
                    raise ValueError(f"{name}={value!r}: write 0 or more seconds")
        return cls(**fields)


@dataclass(frozen=True)
class LastTest:
    """The last test of one Connector: for which generation, when (monotonic), and what it said."""

    generation: int
    at: float
    status: str


def due(
    last: LastTest | None, *, generation: int, now: float, settings: ConnectionSettings, asked: bool = False
) -> bool:
    """Whether the Connector is tested at this reconcile: never tested (by this process), changed, asked
    for (an Agent using it became Ready), or its last answer is old (Unknown: sooner)."""
    if last is None or asked or last.generation != generation:
        return True
    wait = settings.retry_seconds if last.status == "Unknown" else settings.period_seconds
    return wait > 0 and now - last.at >= wait


def _ready(body: Mapping[str, Any]) -> bool:
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def users(namespace: str, connector: str, agents: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[str]:
    """The Agents of `namespace` whose Tool Pod holds `connector` (spec.connectors), by name, sorted."""
    return sorted(
        key[1]
        for key, body in agents.items()
        if key[0] == namespace
        and not (body.get("metadata") or {}).get("deletionTimestamp")
        and connector in ((body.get("spec") or {}).get("connectors") or [])
    )


def pick_agent(
    namespace: str, connector: str, agents: Mapping[tuple[str, str], Mapping[str, Any]]
) -> str | Condition:
    """The Agent whose Tool Pod tests the connection (the first Ready user by name), or the condition
    saying why there is none."""
    names = users(namespace, connector, agents)
    if not names:
        return Condition(
            CONNECTED,
            "Unknown",
            "NoAgentUsesIt",
            "no Agent in this namespace lists this Connector in spec.connectors; its connection is tested "
            "in the Tool Pod of an Agent that uses it (only that pod holds the credential)",
        )
    ready = [n for n in names if _ready(agents[(namespace, n)])]
    if not ready:
        listed = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        return Condition(
            CONNECTED,
            "Unknown",
            "NoReadyAgent",
            f"no Agent using this Connector is Ready yet ({listed}); it is tested when one is",
        )
    return ready[0]


def not_configured() -> Condition:
    return Condition(
        CONNECTED,
        "Unknown",
        "NotConfigured",
        f"the operator has no token for the Orchestration Engine ({TOKEN_FILE_ENV} is unset; the chart sets "
        "it when oe.enabled); test on demand with `agentengine connectors test`",
    )


def _clean(text: str) -> str:
    return _URL_CREDENTIALS.sub("***@", " ".join(text.split()))[:MAX_MESSAGE]


def reason_of(detail: str) -> str:
    """A failed test's reason: its category (the detail's leading `<category>: `), else TestFailed."""
    found = _CATEGORY.match(detail)
    return _REASONS.get(found.group(1), "TestFailed") if found else "TestFailed"


def token_unreadable(path: str, error: str) -> Condition:
    """The operator's token file cannot be read (not mounted yet, or a wrong path)."""
    return Condition(
        CONNECTED,
        "Unknown",
        "TokenUnreadable",
        _clean(f"the operator cannot read its token for the OE at {path} ({error}); check {TOKEN_FILE_ENV}"),
    )


def unreachable(oe_url: str, error: str) -> Condition:
    """The OE could not be asked at all."""
    return Condition(
        CONNECTED,
        "Unknown",
        "OEUnreachable",
        _clean(f"the Orchestration Engine at {oe_url} did not answer ({error}); tried again shortly"),
    )


def from_answer(*, agent: str, status: int, body: Mapping[str, Any] | None) -> Condition:
    """The condition from the OE's answer to `POST .../agents/{agent}/connectors/{name}/test`."""
    body = body or {}
    via = f"tested in the Tool Pod of Agent {agent}"
    if status == 200:
        detail = str(body.get("detail") or "")
        if body.get("ok") is True:
            return Condition(CONNECTED, "True", "Connected", _clean(f"{detail} ({via})" if detail else via))
        return Condition(
            CONNECTED, "False", reason_of(detail), _clean(f"{detail or 'the test failed'} ({via})")
        )
    said = str(body.get("detail") or body.get("message") or "")
    error = str(body.get("error") or "")
    if status == 401:
        return Condition(
            CONNECTED,
            "Unknown",
            "OperatorUnauthorized",
            _clean(
                f"the Orchestration Engine refused the operator's token ({said}); mount a token for the "
                f"OE's audience and name it in {TOKEN_FILE_ENV}"
            ),
        )
    if status == 403:
        return Condition(
            CONNECTED,
            "Unknown",
            "OperatorForbidden",
            _clean(
                f"{said}; grant the operator's ServiceAccount create on agents/invoke "
                "(the chart's operator Role does)"
            ),
        )
    if status == 404:
        reason = "ConnectorNotInBundle" if error == "connector_not_found" else "AgentNotRegistered"
        return Condition(CONNECTED, "Unknown", reason, _clean(f"{said} ({via}); tried again shortly"))
    if status == 502 and error == "tool_pod_unreachable":
        return Condition(CONNECTED, "Unknown", "ToolPodUnreachable", _clean(f"{said}; tried again shortly"))
    return Condition(
        CONNECTED,
        "Unknown",
        "TestNotRun",
        _clean(f"the Orchestration Engine answered HTTP {status} {error}: {said}; tried again shortly"),
    )


# Unknown for a reason that is no fault: said in a Normal Event, not a Warning.
_QUIET = frozenset({"NoAgentUsesIt", "NoReadyAgent", "NotConfigured"})


def with_connected(
    status: Mapping[str, Any],
    *,
    previous: Mapping[str, Any],
    connected: Condition | None,
    generation: int,
    now: str,
) -> dict[str, Any]:
    """`status` with the Connected condition: `connected` when tested now, else the one `previous` has."""
    before = [c for c in previous.get("conditions") or [] if c.get("type") == CONNECTED]
    merged = (
        before if connected is None else merge_conditions(before, [connected], generation=generation, now=now)
    )
    return {**status, "conditions": [*status.get("conditions", []), *merged]}


def connected_event(
    previous: Mapping[str, Any], connected: Condition
) -> tuple[str, str, Literal["Normal", "Warning"]] | None:
    """(reason, message, type) for an Event when the connection's status or reason changed; else None."""
    old = next((c for c in previous.get("conditions") or [] if c.get("type") == CONNECTED), {})
    if (old.get("status"), old.get("reason")) == (connected.status, connected.reason):
        return None
    quiet = connected.status == "True" or connected.reason in _QUIET
    return (connected.reason, connected.message, "Normal" if quiet else "Warning")
