"""Which host a runtime component listens on."""

from __future__ import annotations

import socket
from collections.abc import Mapping

DUAL_STACK_HOST = "::"
IPV4_HOST = "0.0.0.0"  # noqa: S104 - pods must accept traffic on every interface


def dual_stack_available() -> bool:
    """True when the kernel has IPv6 and a socket with IPV6_V6ONLY=0 can be bound."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((DUAL_STACK_HOST, 0))
    except OSError:
        return False
    return True


def choose_listen_host(*, app_host: str | None, dual_stack: bool) -> str:
    """`APP_HOST` wins; otherwise dual stack when the kernel allows it, else IPv4 on every interface."""
    if app_host and app_host.strip():
        return app_host.strip()
    return DUAL_STACK_HOST if dual_stack else IPV4_HOST


def resolve_listen_host(env: Mapping[str, str]) -> str:
    """Probe only when APP_HOST does not decide."""
    app_host = env.get("APP_HOST")
    if app_host and app_host.strip():
        return choose_listen_host(app_host=app_host, dual_stack=False)
    return choose_listen_host(app_host=None, dual_stack=dual_stack_available())


def bind_listener(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket; the IPv6 wildcard is made dual stack explicitly, not left to the sysctl."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host == DUAL_STACK_HOST:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock
