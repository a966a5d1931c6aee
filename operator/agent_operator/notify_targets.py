"""An Agent's `spec.notify` (issue 34), pure: which Secrets and Connectors it references, whether they are
usable, and the targets the OE's registration carries once their values are read.

A webhook target names its HMAC key's Secret (`signingSecretRef`); a Slack target names a Connector of
source.type slack in the Agent's namespace, whose `token` credential and `base_url` config are used. The
values reach only the registration Secret in the OE's namespace (the OE reads nothing else, Decision 12);
never a condition, an Event or a log.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from agent_operator.models import Agent, Connector, NotifySpec, SecretKeyRef
from agent_runtime.oe.notify import NotifyTarget

SLACK_TYPE = "slack"
SLACK_TOKEN_FIELD = "token"  # noqa: S105  # the credential's field name, not a secret
SLACK_DEFAULT_BASE_URL = "https://slack.com/api"

SecretValues = Mapping[tuple[str, str], str]  # (Secret name, key) -> value


def notify_connectors(agent: Agent) -> tuple[str, ...]:
    """The Connectors spec.notify names (Slack targets), in order, once each."""
    return tuple(dict.fromkeys(t.connector for t in agent.spec.notify if t.type == "slack" and t.connector))


def _slack_token_ref(connector: Connector | None) -> SecretKeyRef | None:
    if connector is None or connector.spec.source.type != SLACK_TYPE:
        return None
    return next((c.secret_key_ref for c in connector.spec.credentials if c.field == SLACK_TOKEN_FIELD), None)


def notify_secret_refs(
    agent: Agent, connectors: Mapping[str, Connector | None]
) -> list[tuple[str, SecretKeyRef]]:
    """(field path, Secret key) for each Secret value spec.notify needs."""
    refs: list[tuple[str, SecretKeyRef]] = []
    for n, target in enumerate(agent.spec.notify):
        if target.type == "webhook" and target.signing_secret_ref is not None:
            refs.append((f"spec.notify[{n}].signingSecretRef", target.signing_secret_ref))
        elif target.type == "slack" and (ref := _slack_token_ref(connectors.get(target.connector or ""))):
            refs.append((f"spec.notify[{n}].connector", ref))
    return refs


def notify_problem(
    agent: Agent,
    connectors: Mapping[str, Connector | None],
    secret_keys: Mapping[str, Collection[str] | None],
) -> tuple[str, str] | None:
    """(reason, message) for the first unusable target, naming its field and the fix; None when all are.
    `secret_keys`: each referenced Secret's key names (None: it does not exist)."""
    ns = agent.meta.namespace
    for n, target in enumerate(agent.spec.notify):
        where = f"spec.notify[{n}]"
        if target.type == "webhook":
            if not target.url or target.signing_secret_ref is None:
                return (
                    "NotifyInvalid",
                    f"{where}: a webhook target needs url and signingSecretRef; add both",
                )
            problem = _secret_problem(f"{where}.signingSecretRef", target.signing_secret_ref, secret_keys, ns)
            if problem:
                return problem
            continue
        if not target.connector or not target.channel:
            return ("NotifyInvalid", f"{where}: a slack target needs connector and channel; add both")
        connector = connectors.get(target.connector)
        if connector is None:
            return (
                "NotifyConnectorMissing",
                f"{where}.connector: Connector {target.connector!r} does not exist in namespace {ns}; create "
                "a Connector of source.type slack or fix the name",
            )
        if connector.spec.source.type != SLACK_TYPE:
            return (
                "NotifyConnectorInvalid",
                f"{where}.connector: Connector {target.connector!r} is of source.type "
                f"{connector.spec.source.type!r}, not slack; name a slack Connector",
            )
        ref = _slack_token_ref(connector)
        if ref is None:
            return (
                "NotifyConnectorInvalid",
                f"{where}.connector: Connector {target.connector!r} has no credential with field token; add "
                "one (credentials: [{field: token, env: SLACK_TOKEN, secretKeyRef: ...}])",
            )
        problem = _secret_problem(f"{where}.connector ({target.connector} token)", ref, secret_keys, ns)
        if problem:
            return problem
    return None


def _secret_problem(
    where: str, ref: SecretKeyRef, secret_keys: Mapping[str, Collection[str] | None], namespace: str
) -> tuple[str, str] | None:
    keys = secret_keys.get(ref.name)
    if keys is None:
        return (
            "NotifySecretMissing",
            f"{where}: Secret {ref.name!r} does not exist in namespace {namespace}; create it or fix "
            "the name",
        )
    if ref.key not in keys:
        return (
            "NotifySecretKeyMissing",
            f"{where}: Secret {ref.name!r} has no key {ref.key!r}; add the key or fix the reference",
        )
    return None


def notify_targets(
    agent: Agent, connectors: Mapping[str, Connector | None], values: SecretValues
) -> tuple[NotifyTarget, ...]:
    """The targets as the OE's registration carries them. Raises KeyError naming no value when a Secret
    value is not in `values` (it vanished since the reconcile checked it)."""
    targets: list[NotifyTarget] = []
    for target in agent.spec.notify:
        targets.append(_target(target, connectors, values))
    return tuple(targets)


def _target(
    target: NotifySpec, connectors: Mapping[str, Connector | None], values: SecretValues
) -> NotifyTarget:
    if target.type == "webhook":
        ref = target.signing_secret_ref
        assert ref is not None  # notify_problem and the CRD refuse a webhook without one
        return NotifyTarget(
            type="webhook",
            url=target.url,
            signing_secret=values[(ref.name, ref.key)],  # type: ignore[arg-type]  # pydantic makes the SecretStr
        )
    connector = connectors.get(target.connector or "")
    ref = _slack_token_ref(connector)
    if connector is None or ref is None:
        raise KeyError(f"Connector {target.connector}")
    base_url = str(connector.spec.config.get("base_url") or SLACK_DEFAULT_BASE_URL)
    return NotifyTarget(
        type="slack",
        channel=target.channel,
        token=values[(ref.name, ref.key)],  # type: ignore[arg-type]
        base_url=base_url,
    )


def notify_document(targets: tuple[NotifyTarget, ...]) -> list[dict[str, str]]:
    """The registration's `notify` list, secret values in the clear (the dump masks a SecretStr; the OE
    needs them)."""
    out: list[dict[str, str]] = []
    for target in targets:
        entry: dict[str, str] = target.model_dump(mode="json", by_alias=True, exclude_none=True)
        if target.signing_secret is not None:
            entry["signingSecret"] = target.signing_secret.get_secret_value()
        if target.token is not None:
            entry["token"] = target.token.get_secret_value()
        if target.type == "webhook":
            entry.pop("baseUrl", None)
        out.append(entry)
    return out


__all__ = [
    "SecretValues",
    "notify_connectors",
    "notify_document",
    "notify_problem",
    "notify_secret_refs",
    "notify_targets",
]
