"""How the operator logs in to the API server: kopf's login handler and the operator's own client (kube.py).

Tried in order:

- in a pod, the ServiceAccount's projected token (the kubelet rotates the file in place);
- a kubeconfig whose current user holds a static token, a `tokenFile` or a client certificate: read here
  without the client library (kopf's own reader, plus `tokenFile`), the light path;
- a kubeconfig whose user needs a program or a refresh to get a token: an `exec` credential plugin (EKS's
  `aws eks get-token`, GKE's `gke-gcloud-auth-plugin`, AKS's `kubelogin`) or an `auth-provider` (OIDC):
  the official `kubernetes` client library, through kopf's `login_via_client`, which runs the plugin.

kopf logs in again by calling its login handler when the API server answers 401. The operator's own client
does the same (`ApiAuth`): it reads a token file again when the file changes, and on a 401 (an expired or
revoked token) logs in again and sends the request once more. No log line or error carries a token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import kopf
import yaml

log = logging.getLogger("agent_operator.login")

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
# `load_kube_config` sets the client library's process-wide default configuration: one login at a time.
_CLIENT_LIBRARY = threading.Lock()


@dataclasses.dataclass(frozen=True)
class KubeconfigUser:
    """The current context's user, as the first kubeconfig file naming it defines it."""

    name: str
    fields: Mapping[str, Any]
    directory: Path  # of the file that defined it: a relative `tokenFile` is relative to it

    @property
    def token_file(self) -> Path | None:
        value = self.fields.get("tokenFile")
        if not value or self.fields.get("token"):
            return None  # a static token wins over a token file, as in kubectl
        path = Path(os.path.expanduser(str(value)))
        return path if path.is_absolute() else self.directory / path


def kubeconfig_paths(env: Mapping[str, str]) -> list[Path]:
    """KUBECONFIG's files (`:`-separated), else ~/.kube/config when it exists."""
    value = env.get("KUBECONFIG", "").strip()
    if value:
        return [Path(os.path.expanduser(part.strip())) for part in value.split(os.pathsep) if part.strip()]
    default = Path(os.path.expanduser("~/.kube/config"))
    return [default] if default.exists() else []


def kubeconfig_user(env: Mapping[str, str]) -> KubeconfigUser | None:
    """The current context's user across the kubeconfig files (the first file to name a thing wins)."""
    paths = kubeconfig_paths(env)
    current: str | None = None
    contexts: dict[str, Mapping[str, Any]] = {}
    users: dict[str, tuple[Mapping[str, Any], Path]] = {}
    for path in paths:
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise kopf.LoginError(
                f"KUBECONFIG names {path}, which cannot be read ({type(exc).__name__}); fix KUBECONFIG"
            ) from None
        except yaml.YAMLError:
            # The parser's message may quote the file, and the file holds credentials.
            raise kopf.LoginError(f"{path} is not a kubeconfig (not YAML); fix KUBECONFIG") from None
        if not isinstance(document, dict):
            raise kopf.LoginError(f"{path} is not a kubeconfig (not a mapping); fix KUBECONFIG")
        current = current or document.get("current-context")
        for item in document.get("contexts") or ():
            contexts.setdefault(item.get("name"), item.get("context") or {})
        for item in document.get("users") or ():
            users.setdefault(item.get("name"), (item.get("user") or {}, path.parent))
    if not paths:
        return None
    if current is None or current not in contexts:
        raise kopf.LoginError(
            "the kubeconfig has no current context; run `kubectl config use-context NAME` or set KUBECONFIG"
        )
    name = contexts[current].get("user")
    if name not in users:
        raise kopf.LoginError(
            f"the kubeconfig's context {current!r} names no user it defines; fix the kubeconfig"
        )
    fields, directory = users[name]
    return KubeconfigUser(name=str(name), fields=fields, directory=directory)


def needs_client_library(user: Mapping[str, Any]) -> str | None:
    """Why a kubeconfig user needs the client library (a program to run, a token to refresh), or None."""
    if user.get("exec"):
        command = str((user.get("exec") or {}).get("command") or "?")
        return f"an exec credential plugin ({Path(command).name})"  # the command's name, never its arguments
    if user.get("auth-provider"):
        return f"the {(user.get('auth-provider') or {}).get('name') or 'unnamed'} auth-provider"
    return None


def login_info(
    *, settings: kopf.OperatorSettings, logger: Any, env: Mapping[str, str] | None = None
) -> kopf.ConnectionInfo | None:
    """Credentials for kopf and the operator's client: the ServiceAccount in a pod, else the kubeconfig."""
    env = os.environ if env is None else env
    info = kopf.login_with_service_account(settings=settings, logger=logger)
    if info is not None:
        return info
    user = kubeconfig_user(env)
    if user is None:
        return None
    reason = needs_client_library(user.fields)
    if reason is not None:
        return _via_client_library(settings=settings, logger=logger, user=user, reason=reason)
    info = kopf.login_with_kubeconfig(settings=settings, logger=logger)
    if info is not None and not info.token and user.token_file is not None:
        info = dataclasses.replace(info, token=read_token_file(user.token_file, user=user.name))
    return info


def _via_client_library(
    *, settings: kopf.OperatorSettings, logger: Any, user: KubeconfigUser, reason: str
) -> kopf.ConnectionInfo:
    try:
        import kubernetes  # noqa: F401 - only to say what is missing
    except ImportError:
        raise kopf.LoginError(
            f"the kubeconfig's user {user.name!r} uses {reason}, which needs the kubernetes client library; "
            "install the operator's extra: pip install 'agent-engine[operator]'"
        ) from None
    with _CLIENT_LIBRARY:
        info = kopf.login_via_client(settings=settings, logger=logger)
    if info is None or not (info.token or info.certificate_path):
        raise kopf.LoginError(
            f"the kubeconfig's user {user.name!r} uses {reason}, which gave no credentials; run "
            "`kubectl get namespaces` with the same KUBECONFIG to see the plugin's own error"
        )
    log.info("logged in through the kubernetes client library", extra={"user": user.name, "uses": reason})
    return info


def read_token_file(path: Path, *, user: str = "") -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise kopf.LoginError(
            f"the token file {path} of kubeconfig user {user!r} cannot be read ({type(exc).__name__}); "
            "fix the user's tokenFile"
        ) from None
    if not token:
        raise kopf.LoginError(
            f"the token file {path} of kubeconfig user {user!r} is empty; put the token in it"
        )
    return token


def token_file(env: Mapping[str, str] | None = None) -> Path | None:
    """The file the current token comes from (the ServiceAccount's, or the kubeconfig's `tokenFile`)."""
    if SERVICE_ACCOUNT_TOKEN.exists():
        return SERVICE_ACCOUNT_TOKEN
    user = kubeconfig_user(os.environ if env is None else env)
    return user.token_file if user is not None else None


class ApiAuth:
    """The operator client's bearer token: read again when its file changes, renewed by a new login on 401.

    Transport-neutral (kube.KubeApi uses it): `header()` before each request; after a 401, `renew()` with
    the refused header, then the request once more if `header()` changed (a refused request did nothing).
    Concurrent requests refused with the same token share one new login.
    """

    def __init__(
        self,
        token: str,
        *,
        relogin: Callable[[], str | None],
        token_file: Path | None = None,
        check_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token = token
        self._header = f"Bearer {token}"
        self._relogin = relogin
        self._file = token_file
        self._interval = check_interval_s
        self._clock = clock
        self._looked = clock()
        self._signature = self._stat()
        self._lock = asyncio.Lock()
        self.renewals = 0  # new logins after a 401

    @classmethod
    def for_login(
        cls, info: Any, *, relogin: Callable[[], Any], token_file: Path | None = None
    ) -> ApiAuth | None:
        """For kopf's ConnectionInfo `info` (None when it holds no token: a client certificate)."""
        if not getattr(info, "token", None):
            return None
        return cls(info.token, relogin=lambda: getattr(relogin(), "token", None), token_file=token_file)

    async def header(self) -> str:
        """The Authorization header's value: the current token, its file looked at once per interval."""
        if self._file is not None and self._clock() - self._looked >= self._interval:
            self._reread()
        return self._header

    async def renew(self, refused: str) -> None:
        """One new login for every request refused (401) with the header `refused`; a request refused with
        an older token finds the newer one in `header()` and logs in no more."""
        async with self._lock:
            if self._header != refused:
                return  # another request logged in again (or the file changed) meanwhile
            try:
                renewed = await asyncio.to_thread(self._relogin)  # an exec plugin is a blocking program
            except Exception as exc:
                # kopf's LoginError messages are ours; anything else is named by its type only.
                detail = str(exc) if isinstance(exc, kopf.LoginError) else type(exc).__name__
                log.warning("logging in again after a 401 failed", extra={"error": detail[:300]})
                return
            if not renewed or renewed == self._token:
                log.warning("the API server refused the token (401) and a new login gave the same one")
                return
            self._use(renewed)
            self._signature = self._stat()
            self.renewals += 1
            log.info("logged in again after a 401 (an expired or revoked token)")

    def _use(self, token: str) -> None:
        self._token = token
        self._header = f"Bearer {token}"

    def _reread(self) -> None:
        self._looked = self._clock()
        signature = self._stat()
        if self._file is None or signature is None or signature == self._signature:
            return
        try:
            text = self._file.read_text(encoding="utf-8").strip()
        except OSError:
            return  # mid-update: the next look reads it
        if text:
            self._signature = signature
            if text != self._token:
                self._use(text)
                log.info("API token file changed; using the new token", extra={"file": str(self._file)})

    def _stat(self) -> tuple[int, int, int, int] | None:
        if self._file is None:
            return None
        try:
            st = os.stat(self._file)  # follows the kubelet's `..data` link
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
