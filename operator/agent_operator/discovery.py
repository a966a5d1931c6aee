"""Discovery of a `mcp` Connector's tools at reconcile time (Decision 18), as kagent's RemoteMCPServer does.

The operator asks the server (`initialize`, `tools/list` through every page) with the token from the
Connector's Secret, and records what it found in the Connector's status: `status.discovery` holds the
count, the names (`mcp.<id8>.<tool>`), a digest, when this list was first seen, the tools it skipped and
why, and the catalog the bundle is built from, so no run ever needs a discovery call. A `Discovered`
condition says how the last attempt went; a server that is down keeps the last good list in service.

A discovery happens when the Connector is new to this process, when its spec changes (its generation),
when the `agentengine.io/rediscover` annotation changes, and every `AGENT_OPERATOR_MCP_DISCOVERY_SECONDS`
(default 600; 0: never on a period); after a failure, again after `AGENT_OPERATOR_MCP_RETRY_SECONDS` (30).
The token is read from the Secret for the call only: it is never logged, stored or put in a message.
A Connector with `config.auth: {type: oauth}` (B-23) is asked with an OAuth token instead: the
operator's own from `client_credentials`, or the access token of a person's login (the Secret
`mcp-oauth-<name>`), which the operator never refreshes (the Tool Pod holds that refresh token).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from agent_operator.a2a_agents import is_a2a_agent
from agent_operator.bundle import metadata_address_problem
from agent_operator.kube import ApiError, ApiUnreachable, KubeApi, object_path
from agent_operator.mcp import (
    DISCOVERED,
    DISCOVERY_KEY,
    REDISCOVER_ANNOTATION,
    is_mcp,
    recorded,
)
from agent_operator.models import Connector
from agent_operator.status import Condition, merge_conditions
from agent_runtime.connectors.builtin.agent import AGENT_TYPE, card_json, card_record, fetch_card
from agent_runtime.connectors.framework import BuiltinToolError, ConnectorConfigError
from agent_runtime.connectors.mcp.catalog import catalog_digest, select, server_id, tool_name, usable
from agent_runtime.connectors.mcp.client import McpClient
from agent_runtime.connectors.mcp.oauth import (
    AUTHORIZATION_CODE,
    SEED_SECRET_PREFIX,
    CachedServer,
    OAuthError,
    OAuthSettings,
    same_url,
    usable_token,
)
from agent_runtime.connectors.mcp.oauth import DIR_ENV as OAUTH_DIR_ENV
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import TokenStore
from agent_runtime.connectors.transport import tls_context

log = logging.getLogger("agent_operator")
AttemptKey = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class DiscoverySettings:
    period_seconds: float = 600.0
    retry_seconds: float = 30.0
    timeout_seconds: float = 15.0
    max_catalog_bytes: int = 512 * 1024  # the status holds the catalog; etcd holds objects up to 1.5 MiB
    # The operator's own request must not reach a cloud metadata service (its pod's credentials) either.
    allow_metadata_addresses: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DiscoverySettings:
        """AGENT_OPERATOR_MCP_* variables; ValueError naming the variable when one is not a number."""
        values: dict[str, Any] = {}
        for variable, name in (
            ("AGENT_OPERATOR_MCP_DISCOVERY_SECONDS", "period_seconds"),
            ("AGENT_OPERATOR_MCP_RETRY_SECONDS", "retry_seconds"),
            ("AGENT_OPERATOR_MCP_TIMEOUT_SECONDS", "timeout_seconds"),
        ):
            if raw := env.get(variable, "").strip():
                try:
                    values[name] = float(raw)
                except ValueError:
                    raise ValueError(f"{variable}={raw!r}: write a number of seconds") from None
                if values[name] < 0:
                    raise ValueError(f"{variable}={raw!r}: write 0 or more seconds")
        allow = env.get("AGENT_OPERATOR_ALLOW_METADATA_ADDRESSES", "").strip().lower()
        values["allow_metadata_addresses"] = allow in ("true", "1", "yes")
        return cls(**values)


@dataclass
class _Attempt:
    fingerprint: tuple[str, int, str]  # uid, generation, rediscover annotation
    at: float  # monotonic
    ok: bool
    condition: Condition
    record: dict[str, Any] | None


@dataclass(frozen=True)
class DiscoveryOutcome:
    """What a reconcile merges into the Connector's status: the record and the Discovered condition."""

    record: dict[str, Any] | None
    condition: Condition
    connector: Connector = field(compare=False)

    def status(
        self, status: Mapping[str, Any], *, previous: Mapping[str, Any], generation: int, now: str
    ) -> dict[str, Any]:
        """`status` (as connector_status made it) with `discovery` and the Discovered condition added."""
        before = [c for c in previous.get("conditions") or [] if c.get("type") == DISCOVERED]
        merged = merge_conditions(before, [self.condition], generation=generation, now=now)
        out = {**status, "conditions": [*status.get("conditions", []), *merged]}
        if self.record is not None:
            out[DISCOVERY_KEY] = self.record
        return out


class McpDiscovery:
    """Discovers, remembers when it last tried each Connector, and says when the next try is due."""

    def __init__(self, api: KubeApi, settings: DiscoverySettings | None = None) -> None:
        self.api = api
        self.settings = settings or DiscoverySettings()
        self.attempts: dict[AttemptKey, _Attempt] = {}
        self._seen: dict[AttemptKey, tuple[str, str]] = {}
        self._oauth_dir: str | None = None  # client_credentials tokens of this process (B-23)

    @staticmethod
    def fingerprint(body: Mapping[str, Any]) -> tuple[str, int, str]:
        meta = body.get("metadata") or {}
        annotation = (meta.get("annotations") or {}).get(REDISCOVER_ANNOTATION, "")
        return (str(meta.get("uid", "")), int(meta.get("generation") or 0), str(annotation))

    def due(self, key: AttemptKey, body: Mapping[str, Any], *, now: float | None = None) -> bool:
        """Whether `body` (an `mcp` Connector) needs a discovery now."""
        spec = body.get("spec") or {}
        if (spec.get("source") or {}).get("type") not in ("mcp", AGENT_TYPE):
            return False
        last = self.attempts.get(key)
        if last is None or last.fingerprint != self.fingerprint(body):
            return True
        elapsed = (time.monotonic() if now is None else now) - last.at
        if not last.ok:
            return elapsed >= self.settings.retry_seconds
        return self.settings.period_seconds > 0 and elapsed >= self.settings.period_seconds

    def noticed(self, key: AttemptKey, body: Mapping[str, Any]) -> bool:
        """For the watch: True when the rediscover annotation or the recorded tools changed since the last
        event seen (a status-only change the Connector's Agents must follow, or a user's request)."""
        meta = body.get("metadata") or {}
        annotation = str((meta.get("annotations") or {}).get(REDISCOVER_ANNOTATION, ""))
        digest = str(((body.get("status") or {}).get(DISCOVERY_KEY) or {}).get("digest", ""))
        before = self._seen.get(key)
        self._seen[key] = (annotation, digest)
        return before is not None and before != (annotation, digest)

    def forget(self, key: AttemptKey) -> None:
        self.attempts.pop(key, None)
        self._seen.pop(key, None)

    async def refresh(
        self, key: AttemptKey, body: Mapping[str, Any], *, attempt: bool = True
    ) -> DiscoveryOutcome | None:
        """The Connector's discovery for this reconcile: a new one when due (and `attempt`), else the last.
        None for a Connector of another type."""
        connector = Connector.from_body(dict(body))
        if not is_mcp(connector) and not is_a2a_agent(connector):
            return None
        previous = recorded(connector.status)
        if attempt and self.due(key, body):
            outcome = await self._discover(connector, previous)
            ok = outcome.condition.status == "True"
            self.attempts[key] = _Attempt(
                fingerprint=self.fingerprint(body),
                at=time.monotonic(),
                ok=ok,
                condition=outcome.condition,
                record=outcome.record,
            )
            return outcome
        last = self.attempts.get(key)
        if last is not None and last.fingerprint == self.fingerprint(body):
            record = last.record if last.record is not None else previous
            return _outcome(connector, record, last.condition)
        condition = _previous_condition(connector.status) or Condition(
            DISCOVERED, "Unknown", "NotAttempted", "the operator has not asked the server for its tools yet"
        )
        return _outcome(connector, previous, condition)

    async def _discover(self, connector: Connector, previous: dict[str, Any] | None) -> DiscoveryOutcome:
        if is_a2a_agent(connector):
            return await self._discover_card(connector, previous)
        name = connector.meta.name
        try:
            config = connector.spec.config
            url = config.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise _Failed("ConfigInvalid", "spec.config.url must be the server's http:// or https:// URL")
            host = urlsplit(url).hostname or ""
            if not self.settings.allow_metadata_addresses and (problem := metadata_address_problem(host)):
                # Checked before the token is read: neither the request nor the Secret read happens.
                raise _Failed(
                    "BaseUrlForbidden",
                    f"spec.config.url: {problem}; the operator does not call it unless the platform allows "
                    "such addresses (Helm value agents.allowMetadataAddresses)",
                )
            timeout = float(config.get("timeout_s") or self.settings.timeout_seconds)
            auth = config.get("auth")
            if isinstance(auth, Mapping):
                token = await self._oauth_token(connector, url, auth, timeout_s=timeout)
            else:
                token = await self._credential(connector, "token")
            client = McpClient(
                url,
                timeout_s=min(timeout, self.settings.timeout_seconds),
                ssl_context=tls_context(None, env={}, connector=name),
                provider="the MCP server",
                max_connections=2,
            )
            try:
                refused = False
                try:
                    found = await client.list_tools(token=token)
                except BuiltinToolError as exc:
                    if exc.status_code != 401 or not isinstance(auth, Mapping):
                        raise
                    refused = True  # an OAuth token the server refused: one fresh one (B-23)
                if refused:
                    token = await self._oauth_token(connector, url, auth, timeout_s=timeout, rejected=token)
                    found = await client.list_tools(token=token)
                await client.close_session(token=token)
            finally:
                await client.aclose()
            id8 = server_id(connector.meta.uid)
            kept, skipped = usable(found.tools, id8=id8)
            chosen = select(kept, id8=id8, allow=connector.spec.expose.allow)
        except _Failed as failure:
            return self._failed(connector, previous, failure.reason, failure.message)
        except BuiltinToolError as exc:
            reason = "ServerUnreachable" if exc.category in ("connection", "timeout") else "ServerRefused"
            return self._failed(connector, previous, reason, f"{exc.category}: {exc.explanation}")
        except ConnectorConfigError as exc:
            reason = "ExposeAllowUnknown" if exc.field == "expose.allow" else "ConfigInvalid"
            where = exc.field if exc.field.startswith("metadata.") else f"spec.{exc.field}"
            return self._failed(connector, previous, reason, f"{where}: {exc.problem}")
        catalog = [t.model_dump(mode="json", by_alias=True) for t in chosen]
        size = len(json.dumps(catalog, separators=(",", ":")).encode())
        if size > self.settings.max_catalog_bytes:
            return self._failed(
                connector,
                previous,
                "DiscoveryTooLarge",
                f"the server's tools take {size} bytes, over {self.settings.max_catalog_bytes}; list only "
                "the tools the agents need in spec.expose.allow",
            )
        digest = catalog_digest(chosen)
        now = _now()
        same = previous is not None and previous.get("digest") == digest
        record = {
            "toolCount": len(chosen),
            "tools": [tool_name(id8, t.name) for t in chosen],
            "digest": digest,
            "discoveredAt": previous.get("discoveredAt", now) if same and previous else now,
            "server": {k: v for k, v in found.server_info.items() if k in ("name", "version")},
            "protocolVersion": found.protocol_version,
            "skipped": [s.model_dump() for s in skipped[:50]],
            "catalog": catalog,
        }
        if not same:
            log.info(
                "mcp tools discovered",
                extra={"connector": name, "namespace": connector.meta.namespace, "tools": len(chosen)},
            )
        message = f"{len(chosen)} tools discovered" + (f", {len(skipped)} skipped" if skipped else "")
        return _outcome(connector, record, Condition(DISCOVERED, "True", "Discovered", message))

    async def _discover_card(self, connector: Connector, previous: dict[str, Any] | None) -> DiscoveryOutcome:
        """An `agent` Connector (issue 38): its A2A card fetched with the `token` credential, its skills
        recorded as the catalog (a2a_agents.py builds the bundle file from it)."""
        try:
            url = connector.spec.config.get("card_url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise _Failed("ConfigInvalid", "spec.config.card_url must be an http:// or https:// URL")
            host = urlsplit(url).hostname or ""
            if not self.settings.allow_metadata_addresses and (problem := metadata_address_problem(host)):
                raise _Failed(
                    "BaseUrlForbidden",
                    f"spec.config.card_url: {problem}; the operator does not call it unless the platform "
                    "allows such addresses (Helm value agents.allowMetadataAddresses)",
                )
            token = await self._credential(connector, "token")
            headers = {"authorization": f"Bearer {token}"} if token else {}
            async with httpx.AsyncClient(headers=headers, timeout=self.settings.timeout_seconds) as http:
                card = card_json(await fetch_card(http, url))
            record = card_record(
                card,
                connector=connector.meta.name,
                allow=connector.spec.expose.allow,
                previous=previous,
                now=_now(),
            )
        except _Failed as failure:
            return self._failed(connector, previous, failure.reason, failure.message)
        except BuiltinToolError as exc:
            reason = "ServerUnreachable" if exc.category in ("connection", "timeout") else "ServerRefused"
            return self._failed(connector, previous, reason, f"{exc.category}: {exc.explanation}")
        except ConnectorConfigError as exc:
            reason = "ExposeAllowUnknown" if exc.field == "expose.allow" else "ConfigInvalid"
            return self._failed(connector, previous, reason, f"spec.{exc.field}: {exc.problem}")
        message = f"{record['toolCount']} skills discovered" + (
            f", {len(record['skipped'])} skipped" if record["skipped"] else ""
        )
        return _outcome(connector, record, Condition(DISCOVERED, "True", "Discovered", message))

    def _failed(
        self, connector: Connector, previous: dict[str, Any] | None, reason: str, detail: str
    ) -> DiscoveryOutcome:
        if previous is not None:
            kept = (
                f"the last good list ({previous.get('toolCount', 0)} tools, discovered at "
                f"{previous.get('discoveredAt', '?')}) stays in service"
            )
        else:
            kept = "no tools are in service until a discovery succeeds"
        message = f"discovering the MCP server's tools failed: {detail}; {kept}; the operator tries again"
        log.warning(
            "mcp discovery failed",
            extra={"connector": connector.meta.name, "namespace": connector.meta.namespace, "reason": reason},
        )
        return _outcome(connector, previous, Condition(DISCOVERED, "False", reason, message[:1000]))

    async def _oauth_token(
        self,
        connector: Connector,
        url: str,
        auth: Mapping[str, Any],
        *,
        timeout_s: float,
        rejected: str | None = None,
    ) -> str:
        """An OAuth access token for this discovery (`config.auth`, B-23).

        client_credentials: the operator's own token from the Connector's client_id/client_secret, kept in
        a directory of this process. authorization_code: the access token of the person's login (the Secret
        `mcp-oauth-<name>`), used while it is good and never refreshed here: a refresh would rotate the
        refresh token the Tool Pod holds."""
        name = connector.meta.name
        try:
            settings = OAuthSettings.model_validate(dict(auth))
        except ValidationError:
            raise _Failed(
                "ConfigInvalid", "spec.config.auth must be {type: oauth, grant, scope, authorization_server}"
            ) from None
        if settings.grant == AUTHORIZATION_CODE:
            return await self._login_token(connector, url, rejected=rejected)
        if self._oauth_dir is None:
            self._oauth_dir = tempfile.mkdtemp(prefix="agent-operator-mcp-oauth-")
        session = OAuthSession(
            server=name,
            mcp_url=url,
            settings=settings,
            store=TokenStore(f"{connector.meta.namespace}.{name}", env={OAUTH_DIR_ENV: self._oauth_dir}),
            ssl_context=tls_context(None, env={}, connector=name),
            timeout_s=min(timeout_s, self.settings.timeout_seconds),
            host_problem=None if self.settings.allow_metadata_addresses else metadata_address_problem,
        )
        client_id = await self._credential(connector, "client_id")
        client_secret = await self._credential(connector, "client_secret")
        try:
            return await session.token(client_id=client_id, client_secret=client_secret, rejected=rejected)
        except OAuthError as exc:
            reason = "ServerUnreachable" if exc.category in ("connection", "timeout") else "OAuthFailed"
            message = f"OAuth: {exc.explanation}"
        raise _Failed(reason, message)

    async def _login_token(self, connector: Connector, url: str, *, rejected: str | None) -> str:
        name = connector.meta.name
        secret = f"{SEED_SECRET_PREFIX}{name}"
        fix = f"run `agentengine connectors login {name} --url URL` and create the Secret it names"
        try:
            body = await self.api.get(object_path("v1", "Secret", connector.meta.namespace, secret))
        except ApiUnreachable:
            raise
        except ApiError as exc:
            raise _Failed(
                "ConsentUnreadable", f"Secret {secret!r} cannot be read (HTTP {exc.status})"
            ) from None
        raw = ((body or {}).get("data") or {}).get(f"{name}.json")
        if raw is None:
            raise _Failed("ConsentNeeded", f"Secret {secret!r} with key {name}.json does not exist; {fix}")
        try:
            state = CachedServer.model_validate_json(base64.b64decode(raw, validate=True))
        except (binascii.Error, ValueError):
            raise _Failed(
                "ConsentInvalid", f"Secret {secret!r} key {name}.json is not a login's file; {fix}"
            ) from None
        fits = same_url(state.resource, url)
        token = usable_token(state.tokens, now=time.time(), rejected=rejected) if fits else None
        if token is None:
            raise _Failed(
                "ConsentExpired",
                f"the access token in Secret {secret!r} has expired or is for another URL (the operator does "
                f"not refresh it: the Tool Pod does); {fix} again to discover the tools",
            )
        return token

    async def _credential(self, connector: Connector, field: str) -> str | None:
        """The `field` credential's value, read for this discovery only; None when it has none."""
        credential = next((c for c in connector.spec.credentials if c.field == field), None)
        if credential is None:
            return None
        ref = credential.secret_key_ref
        where = f"spec.credentials[{field}].secretKeyRef: Secret {ref.name!r}"
        try:
            body = await self.api.get(object_path("v1", "Secret", connector.meta.namespace, ref.name))
        except ApiUnreachable:
            raise  # an outage, not a refused read: the reconcile is retried
        except ApiError as exc:
            raise _Failed("TokenUnreadable", f"{where} cannot be read (HTTP {exc.status})") from None
        if body is None:
            raise _Failed("TokenMissing", f"{where} does not exist; create it or fix the name")
        data = body.get("data") or {}
        if ref.key not in data:
            raise _Failed("TokenMissing", f"{where} has no key {ref.key!r}; add it or fix secretKeyRef.key")
        try:
            return base64.b64decode(data[ref.key], validate=True).decode("utf-8").strip() or None
        except (binascii.Error, UnicodeDecodeError):
            raise _Failed("TokenInvalid", f"{where} key {ref.key!r} is not UTF-8 text") from None


class _Failed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _outcome(connector: Connector, record: dict[str, Any] | None, condition: Condition) -> DiscoveryOutcome:
    status = dict(connector.status)
    if record is not None:
        status[DISCOVERY_KEY] = record
    else:
        status.pop(DISCOVERY_KEY, None)
    updated = connector.model_copy(update={"status": status})
    return DiscoveryOutcome(record=record, condition=condition, connector=updated)


def _previous_condition(status: Mapping[str, Any]) -> Condition | None:
    old = next((c for c in status.get("conditions") or [] if c.get("type") == DISCOVERED), None)
    if old is None:
        return None
    return Condition(DISCOVERED, old.get("status", "Unknown"), old.get("reason", ""), old.get("message", ""))


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
