"""Where the OE learns each Agent (Decision 12): a Registry fed by a directory (dev) or by Secrets (cluster).

The operator publishes one registration per Agent as a Secret in the OE's own namespace, labelled
`REGISTRATION_LABEL=true`; the OE lists and watches only those. Dev mode and tests write the same document as
a file. A bad document is logged and skipped, and the last good version from the same file or Secret stays in
service. No log line or error ever carries a token: documents are parsed here and reported by field only.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import yaml
from pydantic import SecretStr, ValidationError

from agent_runtime.execution_token import StatementSigner, signer_from_env
from agent_runtime.oe.registration import (
    REGISTRATION_KEY,
    REGISTRATION_LABEL,
    AgentRegistration,
    token_digest,
)
from agent_runtime.oe.settings import REGISTRATIONS_DIR_ENV, REGISTRATIONS_INTERVAL_ENV
from agent_runtime.token_file import DEFAULT_GRACE_S

logger = logging.getLogger(__name__)

NAMESPACE_ENV = "OE_NAMESPACE"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
REGISTRATION_SUFFIXES = frozenset({".json", ".yaml", ".yml"})
LABEL_SELECTOR = f"{REGISTRATION_LABEL}=true"


class RegistrationError(ValueError):
    """A registration that cannot be used. Names the file or Secret and the field; never the token."""

    def __init__(self, *, source: str, field: str, problem: str) -> None:
        super().__init__(f"registration {source}: {field}: {problem}")
        self.source = source
        self.field = field
        self.problem = problem


class RegistrationSourceError(RuntimeError):
    """The OE's environment names no place to read registrations from."""


# -- parsing -------------------------------------------------------------------------------------------------


def parse_registration(raw: bytes, *, source: str, yaml_allowed: bool = True) -> AgentRegistration:
    """One registration document (JSON, or YAML when allowed), camelCase or snake_case keys."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RegistrationError(source=source, field="(document)", problem="not UTF-8 text") from None
    data = _load_yaml(text, source=source) if yaml_allowed else _load_json(text, source=source)
    if not isinstance(data, dict):
        raise RegistrationError(source=source, field="(document)", problem="must be a mapping")
    try:
        return AgentRegistration.model_validate(data)
    except ValidationError as exc:
        # include_input=False: the offending value may be the token itself.
        error = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        field = ".".join(str(part) for part in error["loc"]) or "(document)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise RegistrationError(source=source, field=field, problem=f"{error['msg']}{more}") from None


def _load_json(text: str, *, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # JSONDecodeError's own message quotes no document text, but its .doc holds all of it.
        raise RegistrationError(
            source=source, field="(document)", problem=f"not JSON: {exc.msg} at line {exc.lineno}"
        ) from None


def _load_yaml(text: str, *, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # str(exc) would quote the offending line, which may hold the token: report the position only.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise RegistrationError(
            source=source, field="(document)", problem=f"not YAML: {problem}{where}"
        ) from None


# -- the registry --------------------------------------------------------------------------------------------


class Registry:
    """Every known Agent, by name and by the sha256 digest of its runtime token.

    When an Agent's token changes, the one before stays accepted (and is offered to its runtimes after a
    401) for `grace_s` seconds: its pods read the rotated Secret each at their own pace.
    """

    def __init__(
        self,
        registrations: Iterable[AgentRegistration] = (),
        *,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
        signer: StatementSigner | None = None,
    ) -> None:
        # The OE's signing key: every registration carries it, so each call to an Agent's runtimes is
        # made with a statement for that call (issue 27); None: with the Agent's runtime token only.
        self._signer = signer
        self._by_agent: dict[str, AgentRegistration] = {}
        self._by_digest: dict[str, AgentRegistration] = {}
        self._grace_s = grace_s
        self._clock = clock
        # Digest of a token an Agent held before its current one -> (Agent, that token, end of grace).
        self._retired: dict[str, tuple[str, SecretStr, float]] = {}
        for registration in registrations:
            self.upsert(registration)

    def __len__(self) -> int:
        return len(self._by_agent)

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_agent))

    def get(self, agent: str) -> AgentRegistration | None:
        return self._by_agent.get(agent)

    @property
    def signer(self) -> StatementSigner | None:
        return self._signer

    def use_signer(self, signer: StatementSigner | None) -> None:
        """Sign the calls to every Agent's runtimes with `signer` from now on."""
        self._signer = signer
        self._retire(dict(self._by_agent))

    def by_token(self, token: str) -> AgentRegistration | None:
        """The Agent a runtime token belongs to: one dict lookup by digest, no comparison loop; a token the
        Agent held before counts until its grace period ends."""
        digest = token_digest(token)
        registration = self._by_digest.get(digest)
        if registration is not None:
            return registration
        retired = self._retired.get(digest)
        if retired is None or self._clock() >= retired[2]:
            return None
        return self._by_agent.get(retired[0])

    def upsert(self, registration: AgentRegistration) -> None:
        """Add or replace one Agent. A token another Agent holds is refused: it would be ambiguous."""
        digest = registration.token_digest()
        holder = self._by_digest.get(digest)
        if holder is not None and holder.agent != registration.agent:
            raise RegistrationError(
                source=registration.agent, field="token", problem=f"Agent {holder.agent} has the same token"
            )
        previous = self._by_agent.get(registration.agent)
        before = dict(self._by_agent)
        if previous is not None:
            self._by_digest.pop(previous.token_digest(), None)
        self._by_agent[registration.agent] = registration
        self._by_digest[digest] = registration
        self._retire(before)

    def remove(self, agent: str) -> AgentRegistration | None:
        before = dict(self._by_agent)
        registration = self._by_agent.pop(agent, None)
        if registration is not None:
            self._by_digest.pop(registration.token_digest(), None)
        self._retire(before)
        return registration

    def replace_all(self, registrations: Mapping[str, AgentRegistration]) -> list[RegistrationError]:
        """Serve exactly `registrations` (keyed by the file or Secret each came from), swapped in at once.

        In source order, a registration naming an Agent or a token already taken is left out and reported,
        so the outcome never depends on the order events arrived in.
        """
        by_agent: dict[str, AgentRegistration] = {}
        by_digest: dict[str, AgentRegistration] = {}
        owner: dict[str, str] = {}
        errors: list[RegistrationError] = []
        for source in sorted(registrations):
            registration = registrations[source]
            digest = registration.token_digest()
            if registration.agent in by_agent:
                problem = f"Agent {registration.agent} is already registered by {owner[registration.agent]}"
                errors.append(RegistrationError(source=source, field="agent", problem=problem))
                continue
            if digest in by_digest:
                problem = f"Agent {by_digest[digest].agent} has the same token"
                errors.append(RegistrationError(source=source, field="token", problem=problem))
                continue
            by_agent[registration.agent] = registration
            by_digest[digest] = registration
            owner[registration.agent] = source
        before = self._by_agent
        self._by_agent, self._by_digest = by_agent, by_digest
        self._retire(before)
        return errors

    def _retire(self, before: Mapping[str, AgentRegistration]) -> None:
        """Keep each token an Agent held before a change for the grace period, and give each registration
        the tokens its runtimes may still expect (`AgentRegistration.tokens`)."""
        now = self._clock()
        for agent, old in before.items():
            new = self._by_agent.get(agent)
            if new is not None and new.token_digest() != old.token_digest() and self._grace_s > 0:
                self._retired[old.token_digest()] = (agent, old.token, now + self._grace_s)
        for digest, (agent, _, until) in list(self._retired.items()):
            # Expired, some Agent's current token again, or its Agent gone: no longer a retired token.
            if until <= now or digest in self._by_digest or agent not in self._by_agent:
                del self._retired[digest]
        held: dict[str, list[tuple[SecretStr, float]]] = {}
        for agent, token, until in self._retired.values():
            held.setdefault(agent, []).append((token, until))
        for agent, registration in list(self._by_agent.items()):
            retired = tuple(held.get(agent, ()))
            if registration.retired != retired or registration.signer is not self._signer:
                # A copy: the source keeps the registration as parsed, to compare the next version with.
                updated = registration.with_retired(retired).with_signer(self._signer)
                self._by_agent[agent] = updated
                self._by_digest[updated.token_digest()] = updated


# -- sources -------------------------------------------------------------------------------------------------


class RegistrationSource(Protocol):
    """Keeps a Registry in step with where registrations live. `run()` is the OE's background loop."""

    @property
    def registry(self) -> Registry: ...

    @property
    def synced(self) -> bool: ...

    async def refresh(self) -> None: ...

    async def run(self) -> None: ...


class _Entries:
    """The last good registration per file or Secret, published to the Registry as a whole."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.good: dict[str, AgentRegistration] = {}
        self._reported: set[str] = set()

    def skip(self, error: RegistrationError) -> None:
        kept = " (its previous version stays in service)" if error.source in self.good else ""
        logger.warning("%s skipped: %s: %s%s", error.source, error.field, error.problem, kept)

    def publish(self) -> None:
        conflicts = self.registry.replace_all(self.good)
        # A conflict persists across many publishes: say so once, not on every event.
        messages = {str(error) for error in conflicts}
        for message in sorted(messages - self._reported):
            logger.warning("%s; left out", message)
        self._reported = messages


@dataclass(frozen=True)
class _FileSignature:
    mtime_ns: int
    size: int
    inode: int


class DirectorySource:
    """Every `*.json`, `*.yaml` and `*.yml` file in one directory, re-read when a file changes."""

    def __init__(
        self, path: str | Path, *, registry: Registry | None = None, interval_s: float = 1.0
    ) -> None:
        self.path = Path(path)
        self.interval_s = interval_s
        self._entries = _Entries(registry if registry is not None else Registry())
        self._seen: dict[str, _FileSignature] = {}
        self._missing_reported = False
        self._synced = False
        self._lock = asyncio.Lock()

    @property
    def registry(self) -> Registry:
        return self._entries.registry

    @property
    def synced(self) -> bool:
        return self._synced

    async def refresh(self) -> None:
        """Re-read new and changed files, drop removed ones, and publish if anything changed."""
        async with self._lock:
            if await asyncio.to_thread(self._scan):
                self._entries.publish()
            self._synced = True

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.interval_s)

    def _scan(self) -> bool:
        present = self._listing()
        changed = False
        for name in [n for n in self._seen if n not in present]:
            del self._seen[name]
            changed |= self._entries.good.pop(self._source(name), None) is not None
        for name, signature in sorted(present.items()):
            if self._seen.get(name) == signature:
                continue
            self._seen[name] = signature
            source = self._source(name)
            try:
                raw = (self.path / name).read_bytes()
                registration = parse_registration(raw, source=source, yaml_allowed=not name.endswith(".json"))
            except OSError as exc:
                self._entries.skip(
                    RegistrationError(source=source, field="(file)", problem=type(exc).__name__)
                )
                continue
            except RegistrationError as error:
                self._entries.skip(error)
                continue
            changed |= self._entries.good.get(source) != registration
            self._entries.good[source] = registration
        return changed

    def _listing(self) -> dict[str, _FileSignature]:
        try:
            names = os.listdir(self.path)
        except OSError as exc:
            if not self._missing_reported:
                logger.warning(
                    "registrations directory %s cannot be read (%s)", self.path, type(exc).__name__
                )
                self._missing_reported = True
            return dict(self._seen)  # keep serving what was read before
        self._missing_reported = False
        present: dict[str, _FileSignature] = {}
        for name in names:
            # Dot files include Kubernetes' `..data` links and editors' swap files.
            if name.startswith(".") or Path(name).suffix not in REGISTRATION_SUFFIXES:
                continue
            with contextlib.suppress(OSError):  # removed between listdir and stat
                stat = (self.path / name).stat()
                present[name] = _FileSignature(stat.st_mtime_ns, stat.st_size, stat.st_ino)
        return present

    def _source(self, name: str) -> str:
        return f"file {self.path / name}"


class _Gone(Exception):
    """410 Gone: the resourceVersion is too old to watch from; list again."""


class _ApiError(Exception):
    """The API server refused or broke a request; retried with backoff."""


SERVICE_ACCOUNT_DIR_ENV = "OE_SERVICEACCOUNT_DIR"


class KubernetesSecretSource:
    """Registration Secrets in one namespace, through the Kubernetes API: list, then watch from there on."""

    def __init__(
        self,
        *,
        api_url: str,
        namespace: str,
        token_path: str | Path,
        ca_path: str | Path | None,
        registry: Registry | None = None,
        watch_timeout_s: int = 290,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.namespace = namespace
        self.token_path = Path(token_path)
        self.ca_path = Path(ca_path) if ca_path is not None else None
        self.watch_timeout_s = watch_timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._entries = _Entries(registry if registry is not None else Registry())
        self._logged_bad: set[tuple[str, str]] = set()
        self._synced = False

    @classmethod
    def in_cluster(
        cls, env: Mapping[str, str], *, registry: Registry | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR
    ) -> KubernetesSecretSource:
        """From KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount's token and CA, and OE_NAMESPACE."""
        host = env["KUBERNETES_SERVICE_HOST"].strip()
        port = env.get("KUBERNETES_SERVICE_PORT", "443").strip() or "443"
        host = f"[{host}]" if ":" in host else host
        namespace = env.get(NAMESPACE_ENV, "").strip()
        if not namespace:
            try:
                namespace = (sa_dir / "namespace").read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise RegistrationSourceError(
                    f"set {NAMESPACE_ENV} to the OE's namespace; the ServiceAccount's namespace file "
                    f"{sa_dir / 'namespace'} cannot be read ({type(exc).__name__})"
                ) from None
        return cls(
            api_url=f"https://{host}:{port}",
            namespace=namespace,
            token_path=sa_dir / "token",
            ca_path=sa_dir / "ca.crt",
            registry=registry,
        )

    @property
    def registry(self) -> Registry:
        return self._entries.registry

    @property
    def synced(self) -> bool:
        """True once one full list has been published."""
        return self._synced

    async def refresh(self) -> None:
        """One full list, published."""
        async with self._client() as client:
            await self._list(client)

    async def run(self) -> None:
        """List, then watch from the list's resourceVersion; re-list on 410 Gone; back off on errors."""
        delay = self.backoff_initial_s
        resource_version: str | None = None
        async with self._client() as client:
            while True:
                try:
                    if resource_version is None:
                        resource_version = await self._list(client)
                    resource_version = await self._watch(client, resource_version)
                    delay = self.backoff_initial_s
                except _Gone:
                    logger.info("registration watch expired (410 Gone); listing Secrets again")
                    resource_version = None
                except (httpx.HTTPError, _ApiError, OSError) as exc:
                    wait = delay * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not cryptography
                    logger.warning(
                        "registration Secrets in %s: %s; retrying in %.1fs",
                        self.namespace,
                        _describe(exc),
                        wait,
                    )
                    await asyncio.sleep(wait)
                    delay = min(delay * 2, self.backoff_max_s)

    # -- Kubernetes API

    @contextlib.asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx.AsyncClient]:
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(self.ca_path)) if self.ca_path is not None else True
        )
        timeout = httpx.Timeout(10.0, read=self.watch_timeout_s + 30.0)
        async with httpx.AsyncClient(base_url=self.api_url, verify=verify, timeout=timeout) as client:
            yield client

    def _headers(self) -> dict[str, str]:
        # Re-read on every request: projected ServiceAccount tokens are rotated in place by the kubelet.
        token = self.token_path.read_text(encoding="utf-8").strip()
        return {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    @property
    def _secrets_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    async def _list(self, client: httpx.AsyncClient) -> str:
        good: dict[str, AgentRegistration] = {}
        params: dict[str, str] = {"labelSelector": LABEL_SELECTOR, "limit": "500"}
        while True:
            response = await client.get(self._secrets_path, params=params, headers=self._headers())
            if response.status_code == 410:
                raise _Gone
            if response.status_code != 200:
                raise _ApiError(f"list answered {response.status_code}: {_status_message(response.content)}")
            try:
                body = response.json()
            except ValueError:
                raise _ApiError("list answered with something that is not JSON") from None
            for item in body.get("items") or ():
                source, registration = self._registration(item)
                if registration is not None:
                    good[source] = registration
                elif source in self._entries.good:
                    good[source] = self._entries.good[source]
            metadata = body.get("metadata") or {}
            if not metadata.get("continue"):
                break
            params["continue"] = metadata["continue"]
        self._entries.good = good
        self._entries.publish()
        self._synced = True
        return str(metadata.get("resourceVersion", ""))

    async def _watch(self, client: httpx.AsyncClient, resource_version: str) -> str:
        params = {
            "watch": "true",
            "labelSelector": LABEL_SELECTOR,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            # Each watch lasts a few minutes, then reconnects from where it stopped.
            "timeoutSeconds": str(self.watch_timeout_s),
        }
        started = time.monotonic()
        async with client.stream(
            "GET", self._secrets_path, params=params, headers=self._headers()
        ) as response:
            if response.status_code == 410:
                raise _Gone
            if response.status_code != 200:
                body = await response.aread()
                raise _ApiError(f"watch answered {response.status_code}: {_status_message(body)}")
            async for line in response.aiter_lines():
                if line.strip():
                    resource_version = self._event(line) or resource_version
        if time.monotonic() - started < 1.0:
            raise _ApiError("the watch ended at once")  # back off instead of reconnecting in a tight loop
        return resource_version

    def _event(self, line: str) -> str | None:
        """Apply one watch event; return its resourceVersion. The line is never logged: it holds Secrets."""
        try:
            event = json.loads(line)
            kind, obj = event["type"], event["object"]
        except (ValueError, KeyError, TypeError):
            raise _ApiError("the watch stream sent something that is not a watch event") from None
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Gone
            raise _ApiError(f"watch error {obj.get('code')}: {obj.get('message', '')}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED"):
            source, registration = self._registration(obj)
            if registration is not None:
                self._entries.good[source] = registration
                self._entries.publish()
            elif self._entries.good.get(source) is not None and not _labelled(obj):
                self._delete(source)
        elif kind == "DELETED":
            self._delete(self._source(obj))
        return str(version) if version else None

    def _delete(self, source: str) -> None:
        self._logged_bad = {seen for seen in self._logged_bad if seen[0] != source}
        if self._entries.good.pop(source, None) is not None:
            self._entries.publish()

    def _source(self, secret: Mapping[str, Any]) -> str:
        name = (secret.get("metadata") or {}).get("name", "?")
        return f"Secret {self.namespace}/{name}"

    def _registration(self, secret: Mapping[str, Any]) -> tuple[str, AgentRegistration | None]:
        source = self._source(secret)
        if not _labelled(secret):
            return source, None
        try:
            encoded = (secret.get("data") or {}).get(REGISTRATION_KEY)
            if not isinstance(encoded, str):
                raise RegistrationError(source=source, field=f"data.{REGISTRATION_KEY}", problem="missing")
            try:
                raw = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise RegistrationError(
                    source=source, field=f"data.{REGISTRATION_KEY}", problem="not base64"
                ) from None
            return source, parse_registration(raw, source=source, yaml_allowed=False)
        except RegistrationError as error:
            # One line per version of a bad Secret, however often it is listed again.
            version = str((secret.get("metadata") or {}).get("resourceVersion", ""))
            if (source, version) not in self._logged_bad:
                self._logged_bad.add((source, version))
                self._entries.skip(error)
            return source, None


def _labelled(secret: Mapping[str, Any]) -> bool:
    labels = (secret.get("metadata") or {}).get("labels") or {}
    return labels.get(REGISTRATION_LABEL) == "true"


def _status_message(body: bytes) -> str:
    """A Kubernetes Status's message (it names the object and the verb, never a Secret's data)."""
    try:
        status = json.loads(body)
    except ValueError:
        return "(no Status body)"
    return str(status.get("message", "")) if isinstance(status, dict) else "(no Status body)"


def _describe(exc: BaseException) -> str:
    # httpx and OSError messages name the URL or the file, never a header or the token file's content.
    if isinstance(exc, _ApiError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def from_env(env: Mapping[str, str], *, registry: Registry | None = None) -> RegistrationSource:
    """`OE_REGISTRATIONS_DIR` set: that directory (dev mode); else, in a cluster, its namespace's Secrets."""
    signer = signer_from_env(env)  # AGENTIC_OE_SIGNING_KEY_FILE: the OE's own credential for runtimes
    if signer is not None:
        registry = registry if registry is not None else Registry()
        registry.use_signer(signer)
    directory = env.get(REGISTRATIONS_DIR_ENV, "").strip()
    if directory:
        # How often the directory is re-read: `agentengine dev` asks for less than the default second.
        interval = env.get(REGISTRATIONS_INTERVAL_ENV, "").strip()
        try:
            interval_s = float(interval) if interval else 1.0
        except ValueError:
            raise RegistrationSourceError(
                f"{REGISTRATIONS_INTERVAL_ENV}={interval!r}: write seconds, e.g. 0.1"
            ) from None
        if not 0.01 <= interval_s <= 3600:
            raise RegistrationSourceError(
                f"{REGISTRATIONS_INTERVAL_ENV}={interval!r}: use 0.01 to 3600 seconds"
            )
        return DirectorySource(directory, registry=registry, interval_s=interval_s)
    if env.get("KUBERNETES_SERVICE_HOST", "").strip():
        # A local run outside a pod (make run, tests) points at a directory laid out like the pod's.
        sa_dir = env.get(SERVICE_ACCOUNT_DIR_ENV, "").strip()
        return KubernetesSecretSource.in_cluster(
            env, registry=registry, sa_dir=Path(sa_dir) if sa_dir else SERVICE_ACCOUNT_DIR
        )
    raise RegistrationSourceError(
        f"no registrations: set {REGISTRATIONS_DIR_ENV} to a directory of registration files, or run the OE "
        "in a cluster, where it reads its namespace's registration Secrets"
    )


__all__ = [
    "LABEL_SELECTOR",
    "NAMESPACE_ENV",
    "DirectorySource",
    "KubernetesSecretSource",
    "RegistrationError",
    "RegistrationSource",
    "RegistrationSourceError",
    "Registry",
    "from_env",
    "parse_registration",
]
