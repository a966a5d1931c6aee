import socket

import pytest

from agent_runtime.listen import bind_listener, choose_listen_host, dual_stack_available, resolve_listen_host


def test_probe_decision_for_both_kernel_answers_and_app_host() -> None:
    assert choose_listen_host(app_host=None, dual_stack=True) == "::"
    assert choose_listen_host(app_host=None, dual_stack=False) == "0.0.0.0"
    assert choose_listen_host(app_host="127.0.0.1", dual_stack=True) == "127.0.0.1"
    assert resolve_listen_host({"APP_HOST": "::1"}) == "::1"


def test_bind_listener_ipv4_loopback() -> None:
    with bind_listener("127.0.0.1", 0) as sock:
        port = sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass


@pytest.mark.skipif(not dual_stack_available(), reason="kernel without IPv6")
def test_bind_listener_ipv6_loopback() -> None:
    with bind_listener("::1", 0) as sock:
        assert sock.family == socket.AF_INET6
        port = sock.getsockname()[1]
        with socket.create_connection(("::1", port), timeout=2):
            pass


def test_kernel_without_ipv6_falls_back_to_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "has_ipv6", False)
    assert dual_stack_available() is False
    assert resolve_listen_host({}) == "0.0.0.0"
    assert resolve_listen_host({"APP_HOST": "::1"}) == "::1"


def test_kernel_refusing_dual_stack_falls_back_to_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    real_socket = socket.socket

    class NoDualStack(real_socket):
        def setsockopt(self, level: int, option: int, value: object) -> None:  # type: ignore[override]
            if option == socket.IPV6_V6ONLY:
                raise OSError("IPV6_V6ONLY=0 not supported")
            super().setsockopt(level, option, value)  # type: ignore[call-overload]

    monkeypatch.setattr(socket, "socket", NoDualStack)
    assert dual_stack_available() is False
    assert resolve_listen_host({}) == "0.0.0.0"
