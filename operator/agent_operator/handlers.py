"""kopf handlers: thin. Each watch event updates the Operator's view and calls its reconcile.

Only raw event handlers are used, so kopf itself never writes to Agents (no progress annotations, no
finalizers): deleting an Agent leaves everything to ownerReferences and the garbage collector. kopf watches
Agents, Connectors and the operator's own children; ConfigMaps and Secrets are watched for metadata only
(watches.py), which kopf cannot do. A reconcile that fails is retried with backoff; nothing here stops on
one object's failure, least of all the periodic resync.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import functools
import logging
import os
from collections.abc import Coroutine
from typing import Any

import kopf

from agent_operator.controller import Operator
from agent_operator.kube import ApiError, Connection, KubeApi
from agent_operator.login import ApiAuth, login_info, token_file
from agent_operator.models import AGENT_PLURAL, CONNECTOR_PLURAL, GROUP, VERSION
from agent_operator.peering import outranked
from agent_operator.reader import ABSENT
from agent_operator.render import MANAGED_BY
from agent_operator.settings import OperatorSettings
from agent_operator.watches import Change, MetadataWatch, ObjectWatch
from agent_operator.writer import AgentKey
from agent_runtime.oe.registration import REGISTRATION_LABEL

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
    return login_info(settings=kwargs["settings"], logger=kwargs.get("logger", log))


@kopf.on.login()
def login(**kwargs: Any) -> Any:
    """In a pod the ServiceAccount; else the kubeconfig, through the kubernetes client library only when its
    user needs a program or a refresh (an exec plugin, an auth-provider). kopf calls it again on a 401."""
    return _login_info(**kwargs)


def configure(settings: OperatorSettings, *, identity: str) -> None:
    """Settings and kopf identity chosen by `__main__` (else read from the environment at startup)."""
    _state.update(settings=settings, identity=identity)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, **kwargs: Any) -> None:
    config: OperatorSettings = _state.get("settings") or OperatorSettings.from_env(os.environ)
    settings.posting.enabled = False  # our own Events say what matters; kopf's would be writes per handler
    settings.batching.worker_limit = 256
    # A worker holds one of those slots until idle this long: kopf's 5 s turned 1,000 Agents into waves of
    # 256 five seconds apart. Ours return in milliseconds; a later event starts a new worker.
    settings.batching.idle_timeout = 0.2
    # Only raw event handlers here: kopf's per-event diff base (a deep copy of every body) is never used.
    settings.persistence.diffbase_storage = _NoDiffBase()
    logger = kwargs.get("logger", log)
    # In a thread: an exec credential plugin is a program, and the loop has other work.
    info = await asyncio.to_thread(_login_info, settings=settings, logger=logger)
    if info is None:
        raise kopf.PermanentError(
            "no Kubernetes credentials: run in a pod with a ServiceAccount, or set KUBECONFIG to a kubeconfig"
        )
    # The operator's own client follows a rotated token file and logs in again on a 401, as kopf does.
    relogin = functools.partial(_login_info, settings=settings, logger=logger)
    auth = ApiAuth.for_login(info, relogin=relogin, token_file=await asyncio.to_thread(token_file))
    api = KubeApi(Connection.from_kopf(info, auth=auth), max_connections=config.api_connections)
    watches = {
        (kind, ns): MetadataWatch(api, kind=kind, namespace=ns, on_change=_on_referenced_change)
        for kind in ("ConfigMap", "Secret")
        for ns in (config.namespaces or (None,))
    }
    op = Operator(api, config, watched_version=functools.partial(_watched_version, watches))
    # The registrations' namespace, when no Secret watch above covers it: a registration edited or deleted
    # by hand is put back when it happens (issue 43), not at the next resync.
    where = config.render.registration_namespace
    registrations = (
        [
            MetadataWatch(
                api,
                kind="Secret",
                namespace=where,
                on_change=_on_referenced_change,
                label_selector=f"{REGISTRATION_LABEL}=true",
            )
        ]
        if config.namespaces and where not in config.namespaces
        else []
    )
    _state.update(operator=op, retries={}, generations={}, tasks=set())
    children = [
        ObjectWatch(
            api,
            api_version=api_version,
            kind=kind,
            namespace=ns,
            label_selector=f"app.kubernetes.io/managed-by={MANAGED_BY}",
            on_object=_on_child,
        )
        for api_version, kind in CHILD_KINDS
        for ns in (config.namespaces or (None,))
    ]
    children_listed = asyncio.Event()
    op.writer.follow(frozenset(kind for _, kind in CHILD_KINDS), children_listed)
    _state["background"] = [
        asyncio.create_task(w.run()) for w in [*watches.values(), *registrations, *children]
    ] + [asyncio.create_task(_all_listed(children, children_listed))]
    if config.resync_seconds > 0:
        _state["background"].append(asyncio.create_task(_resync_loop(op, config.resync_seconds)))


def _watched_version(
    watches: dict[tuple[str, str | None], MetadataWatch], kind: str, namespace: str, name: str
) -> str | None:
    """The resourceVersion the metadata watch holds for an object ("" when it has none); None before the
    watch's first listing, so readers fall back to a GET."""
    watch = watches.get((kind, namespace)) or watches.get((kind, None))
    if watch is None or not watch.listed.is_set():
        return None
    return watch.known.get((namespace, name), ABSENT)


@kopf.on.cleanup()
async def cleanup(**_: Any) -> None:
    for task in _state.pop("background", []):
        task.cancel()
    if op := _state.pop("operator", None):
        await op.aclose()


@kopf.on.probe(id="agents_reconciled")
def agents_reconciled(**_: Any) -> int:
    """How many Agents were converged at least once since this process started (steady state after a
    restart: all of them)."""
    return len(operator().reconciled) if "operator" in _state else 0


@kopf.on.probe(id="api_requests")
def api_requests(**_: Any) -> dict[str, int]:
    """The operator's own API requests by verb (served on the liveness endpoint)."""
    return dict(operator().api.requests) if "operator" in _state else {}


async def _resync_loop(op: Operator, interval: float) -> None:
    """Every `interval`: list the managed objects again and reconcile everything. A failing object is
    retried on its own; the loop itself survives anything but cancellation."""
    while True:
        await asyncio.sleep(interval)
        try:
            if await _paused(op):
                continue
            op.forget_applied()
            for key in list(op.connectors):
                await _guarded(op.reconcile_connector, key, what="connector")
            for key in list(op.agents):
                await _guarded(op.reconcile_agent, key, what="agent")
            op.collect_everywhere()
            try:
                await op.prune_registrations()
            except ApiError as exc:  # e.g. no rights in the OE's namespace: say so, go on
                log.warning("registrations not pruned", extra={"error": type(exc).__name__})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("resync round failed; the next round runs as planned")


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
    except ApiError:
        return True
    status = (body or {}).get("status") or {}
    now = datetime.datetime.now(datetime.UTC)
    return outranked(status, identity=_state.get("identity", ""), priority=config.priority, now=now)


async def _guarded(func: Any, key: AgentKey, *, what: str, attempt: int = 0) -> None:
    """Run one reconcile (which reports its own failures); when it failed, retry later with backoff."""
    if await func(key):
        _state["retries"].pop((what, key), None)
        return
    delay = _RETRY_DELAYS[min(attempt, len(_RETRY_DELAYS) - 1)]
    retries: dict[tuple[str, AgentKey], asyncio.Task[None]] = _state.setdefault("retries", {})
    if (what, key) not in retries:
        retries[(what, key)] = asyncio.create_task(
            _retry(func, key, what=what, attempt=attempt + 1, delay=delay)
        )


async def _retry(func: Any, key: AgentKey, *, what: str, attempt: int, delay: float) -> None:
    await asyncio.sleep(delay)
    _state["retries"].pop((what, key), None)
    await _guarded(func, key, what=what, attempt=attempt)


def _spawn(work: Coroutine[Any, Any, None]) -> None:
    """Run `work` in a task of its own (kept until done), so the watch that asked for it reads on."""
    task = asyncio.create_task(work)
    tasks: set[asyncio.Task[None]] = _state["tasks"]
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _on_referenced_change(change: Change) -> None:
    """From the metadata watches."""
    _spawn(_referenced_changed(change))


async def _referenced_changed(change: Change) -> None:
    op = operator()
    try:
        agents, connectors = await op.referenced_changed(change)
    except ApiError as exc:  # the next change or the resync gets it
        log.warning("could not handle a change", extra={"kind": change.kind, "error": str(exc)[:300]})
        return
    except Exception:  # a bug: logged, and the watch goes on
        log.exception("could not handle a change", extra={"kind": change.kind, "object": change.name})
        return
    if (agents or connectors) and await _paused(op):
        return
    for key in connectors:
        await _guarded(op.reconcile_connector, key, what="connector")
    for key in agents:
        await _guarded(op.repair_agent if change.deleted else op.reconcile_agent, key, what="agent")


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
        try:
            await op.withdraw_registration(key)
        except ApiError as exc:  # the resync's prune gets it
            log.warning("registration not withdrawn", extra={"agent": name, "error": type(exc).__name__})
        return
    op.agents[key] = _plain(body)
    if (body.get("metadata") or {}).get("deletionTimestamp"):
        return  # being deleted: no writes, the garbage collector removes the children
    if _spec_unchanged("agent", key, body):
        return
    await _guarded(op.reconcile_agent, key, what="agent")


@kopf.on.event(GROUP, VERSION, CONNECTOR_PLURAL)
async def connector_event(event: dict[str, Any], body: Any, namespace: str, name: str, **_: Any) -> None:
    op, key = operator(), (namespace, name)
    if event.get("type") == "DELETED":
        op.connectors.pop(key, None)
        _state["generations"].pop(("connector", key), None)
        op.discovery.forget(key)
        op.connection.forget(key)
    else:
        op.connectors[key] = _plain(body)
        # Beside spec changes: a user's rediscover annotation, and newly discovered MCP tools its Agents need.
        noticed = op.discovery.noticed(key, op.connectors[key])
        if _spec_unchanged("connector", key, body) and not noticed:
            return
        await _guarded(op.reconcile_connector, key, what="connector")
        if event.get("type") is None:
            return  # the initial listing: every Agent reconciles on its own initial event anyway
    for agent in op.agents_using_connector(namespace, name):
        await _guarded(op.reconcile_agent, agent, what="agent")


@kopf.on.startup()
async def start_mcp_discovery(**_: Any) -> None:
    """After `startup`: the periodic re-discovery of `mcp` Connectors (discovery.py), when a period is set."""
    op = _state.get("operator")
    if op is None:  # kopf runs startup handlers one by one; `startup` has not finished (or is retried)
        raise kopf.TemporaryError("the operator is not started yet", delay=1)
    if op.discovery.settings.period_seconds > 0:
        _state.setdefault("background", []).append(asyncio.create_task(_discovery_loop(op)))
    tests = op.connection.settings
    if tests.token_file and (tests.period_seconds > 0 or tests.retry_seconds > 0):
        _state.setdefault("background", []).append(asyncio.create_task(_connection_loop(op)))


async def _discovery_loop(op: Operator) -> None:
    """Reconcile each `mcp` Connector whose discovery is due; its status change then reaches its Agents."""
    settings = op.discovery.settings
    tick = max(1.0, min(settings.period_seconds, settings.retry_seconds) / 2)
    while True:
        await asyncio.sleep(tick)
        try:
            due = [key for key, body in list(op.connectors.items()) if op.discovery.due(key, body)]
            if due and not await _paused(op):
                for key in due:
                    await _guarded(op.reconcile_connector, key, what="connector")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("mcp discovery round failed; the next round runs as planned")


async def _connection_loop(op: Operator) -> None:
    """Reconcile each Connector whose connection test is due (connection.py `due`): the slow period after
    an answer, sooner after one that said nothing of the provider."""
    settings = op.connection.settings
    periods = [s for s in (settings.period_seconds, settings.retry_seconds) if s > 0]
    tick = max(1.0, min(periods) / 2)
    while True:
        await asyncio.sleep(tick)
        try:
            due = [key for key, body in list(op.connectors.items()) if op.connection.due(key, body)]
            if due and not await _paused(op):
                for key in due:
                    await _guarded(op.reconcile_connector, key, what="connector")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("connection test round failed; the next round runs as planned")


# The operator's own children (watches.ObjectWatch): a deletion or a hand edit is put back when reported.
CHILD_KINDS = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("policy/v1", "PodDisruptionBudget"),
)


async def _all_listed(watches: list[ObjectWatch], done: asyncio.Event) -> None:
    await asyncio.gather(*(w.listed.wait() for w in watches))
    done.set()


async def _on_child(api_version: str, kind: str, body: dict[str, Any], deleted: bool, initial: bool) -> None:
    """From the child watches: bookkeeping in place (the body is read, not kept); a reconcile it calls for
    runs in a task of its own, so the watch reads on."""
    try:
        agents = operator().child_changed(api_version, kind, body, deleted=deleted, initial=initial)
    except Exception:  # a bug: logged, and the watch goes on
        log.exception("could not handle a child's change", extra={"kind": kind})
        return
    op = operator()
    for key in agents:  # a child deleted: put back only if its Agent is not being deleted
        _spawn(_guarded(op.repair_agent if deleted else op.reconcile_agent, key, what="agent"))


_META_KEYS = (
    "name",
    "namespace",
    "uid",
    "generation",
    "resourceVersion",
    "labels",
    "annotations",
    "deletionTimestamp",
)


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
