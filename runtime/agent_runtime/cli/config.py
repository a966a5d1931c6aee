"""Where the CLI talks to and as whom: flags over environment over the kubeconfig."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from agent_runtime.cli.errors import USAGE, CliError

if TYPE_CHECKING:
    from agent_runtime.cli.kubeconfig import Context

SERVER_ENV = "AGENTENGINE_SERVER"
TOKEN_ENV = "AGENTENGINE_TOKEN"  # noqa: S105 (the variable's name, not a token)
DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class Options:
    """The global flags as given (None when not given)."""

    server: str | None = None
    token: str | None = None
    namespace: str | None = None
    context: str | None = None
    kubeconfig: str | None = None


@dataclass(frozen=True)
class Target:
    """The OE's URL (None: find it through the kubeconfig's cluster), the bearer token and the namespace
    commands default to; the kubeconfig context, and the token it gave (None when the token came from
    --token or the environment)."""

    server: str | None
    token: str
    namespace: str
    context: Context | None = None
    context_token: str | None = None


def server_url(options: Options, environ: Mapping[str, str], *, required: bool = True) -> str | None:
    """The OE's base URL; without one, None (the kubeconfig's cluster may have it), or when `required` an
    error naming both ways to give it."""
    url = options.server or environ.get(SERVER_ENV, "")
    if not url and not required:
        return None
    if not url:
        raise CliError(
            f"no OE address: pass --server URL or set {SERVER_ENV} "
            "(e.g. http://127.0.0.1:8080, or a kubectl port-forward to the OE's Service)",
            exit_code=USAGE,
        )
    if not url.startswith(("http://", "https://")):
        raise CliError(f"--server {url!r} is not an http(s) URL; e.g. http://127.0.0.1:8080", exit_code=USAGE)
    return url.rstrip("/")


def sends_token_in_clear(url: str) -> bool:
    """Whether a bearer token to `url` would cross a network unencrypted (http:// to a non-loopback host)."""
    parsed = urlsplit(url)
    if parsed.scheme != "http":
        return False
    host = parsed.hostname or ""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def resolve(options: Options, environ: Mapping[str, str]) -> Target:
    """The target: --token, then AGENTENGINE_TOKEN, then the kubeconfig context's user."""
    from agent_runtime.cli import kubeconfig  # here: it imports subprocess, which --help never needs

    server = server_url(options, environ, required=False)
    context = None
    token = options.token or environ.get(TOKEN_ENV) or None
    if token is None or options.namespace is None or server is None:
        documents = kubeconfig.load_documents(kubeconfig.kubeconfig_paths(options.kubeconfig, environ))
        context = kubeconfig.select_context(documents, options.context)
    if server is None and context is None:
        server_url(options, environ)  # raises: no --server, no AGENTENGINE_SERVER and no kubeconfig
    context_token = None
    if token is None and context is not None:
        token = context_token = kubeconfig.token_from_user(
            context.user, base_dir=context.base_dir, cluster=context.cluster
        )
    if not token:
        where = f"kubeconfig context {context.name!r} has no token" if context else "no kubeconfig context"
        raise CliError(f"no credentials ({where}): {kubeconfig.TOKEN_FIX}", exit_code=4)
    namespace = options.namespace or (context.namespace if context else None) or DEFAULT_NAMESPACE
    return Target(
        server=server, token=token, namespace=namespace, context=context, context_token=context_token
    )
