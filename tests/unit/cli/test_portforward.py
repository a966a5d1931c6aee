"""The port-forward's pure decisions: which Service is the OE, which pod and port, the channel frames."""

from __future__ import annotations

from typing import Any

from agent_runtime.cli.portforward import frames, pick_service, ready_pod, target_port


def service(namespace: str, name: str, *, target: Any = "http", port_name: str = "http") -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "selector": {"app": "oe"},
            "ports": [{"name": port_name, "port": 8080, "targetPort": target}],
        },
    }


def pod(name: str, *, phase: str = "Running", ready: str = "True", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
    }


def test_the_oe_service_is_the_labelled_one_with_an_http_port() -> None:
    assert pick_service([]) is None
    assert pick_service([service("a", "x", port_name="metrics")]) is None
    chosen = pick_service([service("b", "oe"), service("a", "oe")])
    assert chosen is not None and chosen["metadata"]["namespace"] == "a"


def test_only_a_running_ready_pod_not_being_deleted_is_chosen() -> None:
    assert ready_pod([pod("p", phase="Pending"), pod("q", ready="False"), pod("r", deleting=True)]) is None
    chosen = ready_pod([pod("z"), pod("b"), pod("a", ready="False")])
    assert chosen is not None and chosen["metadata"]["name"] == "b"


def test_the_target_port_by_number_or_by_the_containers_port_name() -> None:
    assert target_port(service("a", "oe", target=9090), pod("p")) == 9090
    assert target_port(service("a", "oe", target="9091"), pod("p")) == 9091
    assert target_port(service("a", "oe", target="http"), pod("p")) == 8080
    assert target_port(service("a", "oe", target="grpc"), pod("p")) is None


def test_each_channels_first_message_carries_the_port_then_data() -> None:
    seen: set[int] = set()
    assert frames(b"\x00\x90\x1f", seen=seen) is None  # data channel, port 8080
    assert frames(b"\x01\x90\x1f", seen=seen) is None  # error channel, port 8080
    assert frames(b"\x00HTTP/1.1 200 OK", seen=seen) == (0, b"HTTP/1.1 200 OK")
    assert frames(b"\x01boom", seen=seen) == (1, b"boom")
    assert frames(b"", seen=seen) is None
    fresh: set[int] = set()
    assert frames(b"\x00\x90\x1fearly", seen=fresh) == (0, b"early")
