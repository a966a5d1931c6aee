"""What both HTTP paths share below the request: the TLS trust they verify with and quiet client logs.

Trust is explicit: the CA certificates tool.yaml's `tls` names, else certifi's public roots. Nothing comes
from the process environment (SSL_CERT_FILE, SSL_CERT_DIR), which aiohttp's default context would read
and httpx's would not, so the two paths used to trust different things.

The clients log every request (httpx at INFO with the full URL, query credential included; httpcore at
DEBUG with response headers). While a connector call runs, their records are dropped: a credential
must not reach any log line, at any level.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import ssl
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

import httpx

from agent_runtime.connectors.definitions import TlsSpec
from agent_runtime.connectors.errors import ConnectorError

# Every logger the sync (httpx, httpcore, h11, h2) and async (aiohttp) clients write through.
CLIENT_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "hpack",
    "hpack.hpack",
    "aiohttp",
    "aiohttp.client",
    "aiohttp.internal",
)
_PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
_in_call: ContextVar[bool] = ContextVar("agent_engine_connector_call", default=False)


class _DropDuringCalls(logging.Filter):
    """Drops a client library's records made inside a connector call (this thread or task only)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _in_call.get()


_FILTER = _DropDuringCalls()


def quiet_client_logs() -> None:
    """Install the filter on the clients' loggers (idempotent); other code's client logs are untouched.

    A logger's filters apply only to records made on that very logger, so each one is named.
    """
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


@contextlib.contextmanager
def connector_call() -> Iterator[None]:
    """Marks the current thread or task as inside a connector call, for the log filter."""
    token = _in_call.set(True)
    try:
        yield
    finally:
        _in_call.reset(token)


@functools.cache
def _public_roots() -> ssl.SSLContext:
    # certifi's bundle as cafile: the OpenSSL default paths (which read SSL_CERT_FILE) are never loaded.
    return httpx.create_ssl_context(trust_env=False)


def tls_context(tls: TlsSpec | None, *, env: Mapping[str, str], connector: str) -> ssl.SSLContext:
    """The context every https request of one connector verifies with, on both paths."""
    if tls is None:
        return _public_roots()
    if tls.ca_file is not None:
        field, where = "tls.ca_file", repr(tls.ca_file)
        try:
            with open(tls.ca_file, encoding="ascii", errors="replace") as handle:
                pem = handle.read()
        except FileNotFoundError:
            raise ConnectorError(
                f"connector {connector}: {field} {where} does not exist here; mount the CA certificate "
                "there or point tls.ca_file at it"
            ) from None
        except OSError as exc:
            raise ConnectorError(
                f"connector {connector}: {field} {where} cannot be read ({exc.strerror or exc}); "
                "make it a readable PEM file"
            ) from None
    else:
        field, where = "tls.ca_env", str(tls.ca_env)
        pem = env.get(str(tls.ca_env), "")
        if not pem.strip():
            raise ConnectorError(
                f"connector {connector}: {field} names {where}, which is not set; set it to the PEM text "
                "of the CA certificate(s) that sign the provider's certificate"
            )
    if _PEM_CERTIFICATE not in pem:
        raise ConnectorError(
            f"connector {connector}: {field} {where} holds no PEM certificate ({_PEM_CERTIFICATE} ...); "
            "give it the CA certificate(s) in PEM form"
        )
    try:
        return ssl.create_default_context(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise ConnectorError(
            f"connector {connector}: {field} {where} is not a valid PEM CA certificate "
            f"({getattr(exc, 'reason', None) or type(exc).__name__}); give it the CA in PEM form"
        ) from None
