"""The OE's settings, read once from its environment (the chart renders them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STORE_TYPE_ENV = "OE_STORE_TYPE"
SQLITE_PATH_ENV = "OE_SQLITE_PATH"
MONGODB_URI_ENV = "OE_MONGODB_URI"
MONGODB_DATABASE_ENV = "OE_MONGODB_DATABASE"
POSTGRES_URL_ENV = "OE_POSTGRES_URL"  # from a Secret: it holds the password
POSTGRES_POOL_SIZE_ENV = "OE_POSTGRES_POOL_SIZE"
POSTGRES_STATEMENT_TIMEOUT_ENV = "OE_POSTGRES_STATEMENT_TIMEOUT_S"
REPLICAS_ENV = "OE_REPLICAS"  # how many OEs share the store (the chart renders oe.replicas)
REGISTRATIONS_DIR_ENV = "OE_REGISTRATIONS_DIR"
# Seconds between reads of that directory (default 1).
REGISTRATIONS_INTERVAL_ENV = "OE_REGISTRATIONS_INTERVAL_S"
CLIENT_TOKEN_ENV = "OE_CLIENT_TOKEN"  # noqa: S105 - the variable's name
CLIENT_TOKEN_FILE_ENV = "OE_CLIENT_TOKEN_FILE"  # noqa: S105
# How long the client token read before a change of that file stays accepted (seconds).
CLIENT_TOKEN_GRACE_ENV = "OE_CLIENT_TOKEN_GRACE_S"  # noqa: S105
WATCHDOG_INTERVAL_ENV = "OE_WATCHDOG_INTERVAL_S"
AER_LOST_AFTER_ENV = "OE_AER_LOST_AFTER_S"
RUN_RESTARTS_ENV = "OE_RUN_RESTARTS"
TOOL_POD_RETRY_ENV = "OE_TOOL_POD_RETRY_S"
# Client authentication (docs/oe.md, "Who may call"): `kubernetes` (TokenReview + SubjectAccessReview),
# `static` (the development token), or both, comma-separated.
CLIENT_AUTH_ENV = "OE_CLIENT_AUTH"
# The namespaces the static development token may act in, comma-separated; `*` for every namespace.
CLIENT_TOKEN_NAMESPACES_ENV = "OE_CLIENT_TOKEN_NAMESPACES"  # noqa: S105
CLIENT_AUTH_AUDIENCES_ENV = "OE_CLIENT_AUTH_AUDIENCES"
# OIDC issuers the API server trusts whose tokens for our audience the OE accepts (see client_auth).
CLIENT_AUTH_OIDC_ISSUERS_ENV = "OE_CLIENT_AUTH_OIDC_ISSUERS"
CLIENT_AUTH_CACHE_TTL_ENV = "OE_CLIENT_AUTH_CACHE_TTL_S"
CLIENT_AUTH_CACHE_SIZE_ENV = "OE_CLIENT_AUTH_CACHE_SIZE"
# A local run outside a pod points at a directory laid out like a pod's ServiceAccount mount (token, ca.crt).
SERVICE_ACCOUNT_DIR_ENV = "OE_SERVICEACCOUNT_DIR"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

DEFAULT_SQLITE_PATH = "/var/lib/agent-engine/oe/oe.sqlite3"
DEFAULT_MONGODB_DATABASE = "agent_engine_oe"


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable and the fix."""


@dataclass(frozen=True)
class OESettings:
    store_type: str
    sqlite_path: str
    mongodb_uri: str | None
    mongodb_database: str
    client_token: str | None
    watchdog_interval_s: float
    aer_lost_after_s: float
    run_restarts: int = 3
    tool_pod_retry_s: float = 15.0
    client_auth: ClientAuthSettings | None = None
    postgres_url: str | None = None
    postgres_pool_size: int = 10
    postgres_statement_timeout_s: float = 10.0
    replicas: int = 1

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OESettings:
        auth = ClientAuthSettings.from_env(env)
        return cls(
            store_type=env.get(STORE_TYPE_ENV, "sqlite").strip().lower() or "sqlite",
            sqlite_path=env.get(SQLITE_PATH_ENV, "").strip() or DEFAULT_SQLITE_PATH,
            mongodb_uri=env.get(MONGODB_URI_ENV, "").strip() or None,
            mongodb_database=env.get(MONGODB_DATABASE_ENV, "").strip() or DEFAULT_MONGODB_DATABASE,
            client_token=_client_token(env) if auth.static else None,
            watchdog_interval_s=_seconds(env, WATCHDOG_INTERVAL_ENV, 10.0),
            aer_lost_after_s=_seconds(env, AER_LOST_AFTER_ENV, 30.0),
            run_restarts=_count(env, RUN_RESTARTS_ENV, 3),
            tool_pod_retry_s=_seconds(env, TOOL_POD_RETRY_ENV, 15.0),
            client_auth=auth,
            postgres_url=env.get(POSTGRES_URL_ENV, "").strip() or None,
            postgres_pool_size=_count(env, POSTGRES_POOL_SIZE_ENV, 10),
            postgres_statement_timeout_s=_seconds(env, POSTGRES_STATEMENT_TIMEOUT_ENV, 10.0),
            replicas=max(1, _count(env, REPLICAS_ENV, 1)),
        )


@dataclass(frozen=True)
class ClientAuthSettings:
    """How clients authenticate: TokenReview + SubjectAccessReview, the static dev token, or both."""

    kubernetes: bool
    static: bool
    static_namespaces: frozenset[str] | None  # None: every namespace
    audiences: tuple[str, ...]
    cache_ttl_s: float
    cache_size: int
    api_url: str | None
    service_account_dir: Path
    oidc_issuers: frozenset[str] = frozenset()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClientAuthSettings:
        host = env.get("KUBERNETES_SERVICE_HOST", "").strip()
        has_static = bool(env.get(CLIENT_TOKEN_FILE_ENV, "").strip() or env.get(CLIENT_TOKEN_ENV, "").strip())
        raw = env.get(CLIENT_AUTH_ENV, "").strip().lower()
        if raw:
            modes = {part.strip() for part in raw.split(",") if part.strip()}
            unknown = modes - {"kubernetes", "static"}
            if unknown or not modes:
                raise SettingsError(
                    f"{CLIENT_AUTH_ENV}={raw!r}: write kubernetes, static, or kubernetes,static"
                )
        else:
            # In a cluster the cluster's identities; the static token only where one is configured.
            modes = ({"kubernetes"} if host else set()) | ({"static"} if has_static or not host else set())
        if "kubernetes" in modes and not host:
            raise SettingsError(
                f"{CLIENT_AUTH_ENV} names kubernetes but KUBERNETES_SERVICE_HOST is not set; run the OE in a "
                f"cluster, or set KUBERNETES_SERVICE_HOST/PORT and {SERVICE_ACCOUNT_DIR_ENV} for a local run"
            )
        port = env.get("KUBERNETES_SERVICE_PORT", "443").strip() or "443"
        bracketed = f"[{host}]" if ":" in host else host
        raw_audiences = env.get(CLIENT_AUTH_AUDIENCES_ENV, "agent-engine")
        audiences = tuple(part.strip() for part in raw_audiences.split(",") if part.strip())
        if not audiences:
            raise SettingsError(f"{CLIENT_AUTH_AUDIENCES_ENV} is empty; name one audience, e.g. agent-engine")
        size = _count(env, CLIENT_AUTH_CACHE_SIZE_ENV, 4096)
        if size < 1:
            raise SettingsError(f"{CLIENT_AUTH_CACHE_SIZE_ENV}=0: the cache holds at least one entry")
        return cls(
            kubernetes="kubernetes" in modes,
            static="static" in modes,
            static_namespaces=_namespaces(env.get(CLIENT_TOKEN_NAMESPACES_ENV, "*")),
            audiences=audiences,
            cache_ttl_s=_seconds(env, CLIENT_AUTH_CACHE_TTL_ENV, 10.0),
            cache_size=size,
            oidc_issuers=_issuers(env.get(CLIENT_AUTH_OIDC_ISSUERS_ENV, "")),
            api_url=f"https://{bracketed}:{port}" if host else None,
            service_account_dir=Path(env.get(SERVICE_ACCOUNT_DIR_ENV, "").strip() or SERVICE_ACCOUNT_DIR),
        )


def _issuers(raw: str) -> frozenset[str]:
    issuers = frozenset(part.strip() for part in raw.split(",") if part.strip())
    for issuer in issuers:
        if not issuer.startswith("https://"):
            raise SettingsError(
                f"{CLIENT_AUTH_OIDC_ISSUERS_ENV}: {issuer!r} is not an https:// issuer URL (the API server "
                "trusts only https issuers); write each issuer's URL exactly as its tokens' iss claim"
            )
    return issuers


def _namespaces(raw: str) -> frozenset[str] | None:
    names = {part.strip() for part in raw.split(",") if part.strip()}
    if not names or "*" in names:
        return None
    return frozenset(names)


def _client_token(env: Mapping[str, str]) -> str:
    file_name = env.get(CLIENT_TOKEN_FILE_ENV, "").strip()
    if file_name:
        try:
            token = Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SettingsError(
                f"{CLIENT_TOKEN_FILE_ENV}={file_name}: cannot read it ({type(exc).__name__})"
            ) from None
        if token:
            return token
        raise SettingsError(
            f"{CLIENT_TOKEN_FILE_ENV}={file_name}: the file is empty; put the client token in it"
        )
    token = env.get(CLIENT_TOKEN_ENV, "").strip()
    if token:
        return token
    raise SettingsError(
        f"no client token: set {CLIENT_TOKEN_FILE_ENV} to a file holding the token clients present on "
        f"/invoke and the execution API, or {CLIENT_TOKEN_ENV} for a local run"
    )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise SettingsError(f"{name}={raw!r} is not a positive number of seconds")
    return value


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit():
        raise SettingsError(f"{name}={raw!r} is not a whole number (0 or more)")
    return int(raw)
