"""kopf handlers: thin. Each watch event updates the Operator's view and calls its reconcile.

Only raw event handlers are used, so kopf itself never writes to Agents (no progress annotations, no
finalizers): deleting an Agent leaves everything to ownerReferences and the garbage collector.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
import os
from typing import Any

import httpx
import kopf

from agent_operator.apply import AgentKey, Operator
from agent_operator.kube import ApiError, Connection, KubeApi
from agent_operator.models import AGENT_PLURAL, CONNECTOR_PLURAL, GROUP, VERSION
from agent_operator.peering import outranked
from agent_operator.render import MANAGED_BY, WATCHED_LABEL
from agent_operator.settings import OperatorSettings

log = logging.getLogger("agent_operator")

_state: dict[str, Any] = {}
_RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)


class _NoDiffBase(kopf.DiffBaseStorage):
    """A diff base that stores nothing: no change-detecting handlers, so no diff is ever read."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


def operator() -> Operator:
    return _state["operator"]


def _login_info(**kwargs: Any) -> Any:
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.login()
def login(**kwargs: Any) -> Any:
    """In-cluster service account first, else the kubeconfig; never the heavy client library."""
    return _login_info(**kwargs)


def configure(settings: OperatorSettings, *, identity: str) -> None:
    """Settings and kopf identity chosen by `__main__` (else read from the environment at startup)."""
    _state.update(settings=settings, identity=identity)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, **kwargs: Any) -> None:
    config: OperatorSettings = _state.get("settings") or OperatorSettings.from_env(os.environ)
    settings.posting.enabled = False  # our own Events say what matters; kopf's would be writes per handler
    settings.watching.label_selectors["configmaps"] = f"{WATCHED_LABEL}=true"
    settings.watching.label_selectors["secrets"] = f"{WATCHED_LABEL}=true"
    settings.watching.label_selectors["deployments"] = f"app.kubernetes.io/managed-by={MANAGED_BY}"
    settings.batching.worker_limit = 256
    # Only raw event handlers here: kopf's per-event diff base (a deep copy of every body) is never used.
    settings.persistence.diffbase_storage = _NoDiffBase()
    info = _login_info(settings=settings, logger=kwargs.get("logger", log))
    if info is None:
        raise kopf.PermanentError("no Kubernetes credentials: neither a service account nor a kubeconfig")
    api = KubeApi(Connection.from_kopf(info), max_connections=config.api_connections)
    op = Operator(api, config)
    _state.update(operator=op, retries={}, generations={}, versions={})
    if config.resync_seconds > 0:
        _state["resync"] = asyncio.create_task(_resync_loop(op, config.resync_seconds))


@kopf.on.cleanup()
async def cleanup(**_: Any) -> None:
    if task := _state.pop("resync", None):
        task.cancel()
    if op := _state.pop("operator", None):
        await op.api.aclose()


@kopf.on.probe(id="api_requests")
def api_requests(**_: Any) -> dict[str, int]:
    """The operator's own API requests by verb (served on the liveness endpoint)."""
    return dict(operator().api.requests) if "operator" in _state else {}


async def _resync_loop(op: Operator, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        if await _paused(op):
            continue
        op.forget_applied()
        for key in list(op.connectors):
            await _guarded(op.reconcile_connector, key, what="connector")
        for key in list(op.agents):
            await _guarded(op.reconcile_agent, key, what="agent")


async def _paused(op: Operator) -> bool:
    """With peering, only the replica kopf lets watch may resync; a failed read counts as paused."""
    config = op.settings
    if not config.peering or config.priority is None:
        return False
    path = (
        f"/apis/kopf.dev/v1/namespaces/{config.namespaces[0]}/kopfpeerings/{config.peering}"
        if config.namespaces
        else f"/apis/kopf.dev/v1/clusterkopfpeerings/{config.peering}"
    )
    try:
        body = await op.api.get(path)
    except (ApiError, httpx.HTTPError):
        return True
    status = (body or {}).get("status") or {}
    now = datetime.datetime.now(datetime.UTC)
    return outranked(status, identity=_state.get("identity", ""), priority=config.priority, now=now)


async def _guarded(func: Any, key: AgentKey, *, what: str, attempt: int = 0) -> None:
    """Run one reconcile; on API or transport errors retry later with backoff instead of crashing."""
    try:
        await func(key)
    except (ApiError, httpx.HTTPError) as exc:
        delay = _RETRY_DELAYS[min(attempt, len(_RETRY_DELAYS) - 1)]
        log.warning(
            "reconcile failed; retrying",
            extra={
                "kind": what,
                "namespace": key[0],
                "object": key[1],
                "error": str(exc)[:300],
                "retry_in": delay,
            },
        )
        retries: dict[tuple[str, AgentKey], asyncio.Task[None]] = _state.setdefault("retries", {})
        if (what, key) not in retries:
            retries[(what, key)] = asyncio.create_task(
                _retry(func, key, what=what, attempt=attempt + 1, delay=delay)
            )


async def _retry(func: Any, key: AgentKey, *, what: str, attempt: int, delay: float) -> None:
    await asyncio.sleep(delay)
    _state["retries"].pop((what, key), None)
    await _guarded(func, key, what=what, attempt=attempt)


def _spec_unchanged(kind: str, key: AgentKey, body: Any) -> bool:
    """True for events that only changed status (our own writes): nothing to re-render."""
    generation = (body.get("metadata") or {}).get("generation")
    seen: dict[tuple[str, AgentKey], Any] = _state["generations"]
    unchanged = seen.get((kind, key)) == generation
    seen[(kind, key)] = generation
    return unchanged


@kopf.on.event(GROUP, VERSION, AGENT_PLURAL)
async def agent_event(event: dict[str, Any], body: Any, namespace: str, name: str, **_: Any) -> None:
    op, key = operator(), (namespace, name)
    if event.get("type") == "DELETED":
        op.forget_agent(key)
        _state["generations"].pop(("agent", key), None)
        return
    op.agents[key] = _plain(body)
    if _spec_unchanged("agent", key, body):
        return
    await _guarded(op.reconcile_agent, key, what="agent")


@kopf.on.event(GROUP, VERSION, CONNECTOR_PLURAL)
async def connector_event(event: dict[str, Any], body: Any, namespace: str, name: str, **_: Any) -> None:
    op, key = operator(), (namespace, name)
    if event.get("type") == "DELETED":
        op.connectors.pop(key, None)
        _state["generations"].pop(("connector", key), None)
    else:
        op.connectors[key] = _plain(body)
        if _spec_unchanged("connector", key, body):
            return
        await _guarded(op.reconcile_connector, key, what="connector")
        if event.get("type") is None:
            return  # the initial listing: every Agent reconciles on its own initial event anyway
    for agent in op.agents_using_connector(namespace, name):
        await _guarded(op.reconcile_agent, agent, what="agent")


async def _referenced_changed(kind: str, event: dict[str, Any], body: Any, namespace: str, name: str) -> None:
    op = operator()
    version = (body.get("metadata") or {}).get("resourceVersion")
    versions: dict[tuple[str, str, str], str] = _state["versions"]
    first_sight = (kind, namespace, name) not in versions
    versions[(kind, namespace, name)] = version
    # The initial listing only repeats what every Agent's own first reconcile reads anyway.
    if first_sight and event.get("type") is None:
        return
    agents, connectors = op.affected_by(namespace, kind, name)
    for key in connectors:
        await _guarded(op.reconcile_connector, key, what="connector")
    for key in agents:
        await _guarded(op.reconcile_agent, key, what="agent")


@kopf.on.event("v1", "configmaps")
async def config_map_event(event: dict[str, Any], body: Any, namespace: str, name: str, **_: Any) -> None:
    await _referenced_changed("ConfigMap", event, body, namespace, name)


@kopf.on.event("v1", "secrets")
async def secret_event(event: dict[str, Any], body: Any, namespace: str, name: str, **_: Any) -> None:
    await _referenced_changed("Secret", event, body, namespace, name)


@kopf.on.event("apps", "v1", "deployments")
async def deployment_event(event: dict[str, Any], body: Any, **_: Any) -> None:
    try:
        # Read in place (no copy): deployment_changed takes what it needs before its first await.
        await operator().deployment_changed(body, deleted=event.get("type") == "DELETED")
    except (ApiError, httpx.HTTPError) as exc:  # the next Deployment event or resync refreshes status
        log.warning("status refresh failed", extra={"error": str(exc)[:300]})


_META_KEYS = ("name", "namespace", "uid", "generation", "resourceVersion", "labels", "annotations")


def _plain(body: Any) -> dict[str, Any]:
    """A plain copy of what the operator reads: metadata (without managedFields), spec and status.

    Copying whole bodies (managedFields included) was the operator's largest CPU cost at scale.
    """
    meta = body.get("metadata") or {}
    return {
        "metadata": {k: copy.deepcopy(meta[k]) for k in _META_KEYS if k in meta},
        "spec": copy.deepcopy(dict(body.get("spec") or {})),
        "status": copy.deepcopy(dict(body.get("status") or {})),
    }
