"""Reach the OE of a kubeconfig's cluster as `kubectl port-forward` does, opened and closed by the CLI.

Find: the OE's Service is the one labelled `app.kubernetes.io/component=oe` (the chart's), in
$AGENTENGINE_OE_NAMESPACE or, when the user may list Services everywhere, wherever it is; then one Ready pod
of its selector and the container port its `http` port targets.

Forward: a loopback listener on a free port; each connection accepted is one websocket to the API server's
`pods/{pod}/portforward?ports=N` (subprotocol `v4.channel.k8s.io`: every binary message starts with its
channel, 0 data and 1 error; each channel's first message carries the port). Bytes are pumped both ways
until either side closes. The decisions (`pick_service`, `ready_pod`, `target_port`, `frames`) are pure.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from agent_runtime.cli.errors import ERROR, NOT_FOUND, CliError
from agent_runtime.cli.kubeapi import SERVER_FIX, KubeAPI, forbidden, unexpected

OE_LABEL = "app.kubernetes.io/component=oe"
OE_NAMESPACE_ENV = "AGENTENGINE_OE_NAMESPACE"
PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR_CHANNEL = 0, 1
INSTALL_FIX = (
    "install the chart (helm install agent-engine charts/agent-engine -n agent-engine --create-namespace), "
    f"set {OE_NAMESPACE_ENV} to the namespace it runs in, or " + SERVER_FIX
)


@dataclass(frozen=True)
class OEPod:
    namespace: str
    service: str
    pod: str
    port: int


def pick_service(items: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The OE Service among those labelled for it: the one with an `http` port (first by namespace, name)."""
    candidates = [
        item
        for item in items
        if any(port.get("name") == "http" for port in (item.get("spec") or {}).get("ports") or [])
    ]
    candidates.sort(
        key=lambda item: (item["metadata"].get("namespace", ""), item["metadata"].get("name", ""))
    )
    return candidates[0] if candidates else None


def ready_pod(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """A Running pod whose Ready condition is True, not being deleted (the first by name)."""
    ready = [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") == "Running"
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
    ]
    ready.sort(key=lambda pod: pod["metadata"]["name"])
    return ready[0] if ready else None


def target_port(service: Mapping[str, Any], pod: Mapping[str, Any]) -> int | None:
    """The pod's port behind the Service's `http` port: a number as given, or the named container port."""
    port = next(p for p in service["spec"]["ports"] if p.get("name") == "http")
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared["containerPort"])
    return None


def find_oe(api: KubeAPI, *, environ: Mapping[str, str]) -> OEPod:
    """The OE pod to forward to, or a one-line error naming the fix."""
    namespace = environ.get(OE_NAMESPACE_ENV, "").strip()
    params = {"labelSelector": OE_LABEL}
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/services" if namespace else "/api/v1/services"
    status, body = api.get(path, params=params)
    if status == 403:
        if namespace:
            raise forbidden(api, what="list services", namespace=namespace)
        raise CliError(
            "the kubeconfig's user may not list Services in every namespace "
            f"(context {api.context.name!r}), so the OE cannot be found: set {OE_NAMESPACE_ENV} to the "
            "namespace Agent Engine runs in, or " + SERVER_FIX,
            exit_code=4,
        )
    if status != 200:
        raise unexpected(api, status=status, what=f"GET {path}")
    service = pick_service(body.get("items") or [])
    where = f"namespace {namespace}" if namespace else f"the cluster of context {api.context.name!r}"
    if service is None:
        raise CliError(
            f"no Agent Engine OE in {where} (no Service labelled {OE_LABEL}): " + INSTALL_FIX,
            exit_code=NOT_FOUND,
        )
    meta = service["metadata"]
    ns, name = meta["namespace"], meta["name"]
    selector = ",".join(
        f"{k}={v}" for k, v in sorted(((service.get("spec") or {}).get("selector") or {}).items())
    )
    status, pods = api.get(
        f"/api/v1/namespaces/{quote(ns, safe='')}/pods", params={"labelSelector": selector}
    )
    if status == 403:
        raise forbidden(api, what="list pods (to port-forward to the OE)", namespace=ns)
    if status != 200:
        raise unexpected(api, status=status, what=f"GET pods of {ns}/{name}")
    pod = ready_pod(pods.get("items") or [])
    if pod is None:
        raise CliError(
            f"the OE Service {ns}/{name} has no Ready pod; see kubectl -n {ns} get pods -l {selector}",
            exit_code=ERROR,
        )
    port = target_port(service, pod)
    if port is None:
        raise CliError(f"the OE Service {ns}/{name} targets a port its pod does not declare; fix the Service")
    return OEPod(namespace=ns, service=name, pod=pod["metadata"]["name"], port=port)


def frames(message: bytes, *, seen: set[int]) -> tuple[int, bytes] | None:
    """One websocket message as (channel, payload); None for a channel's first message (its port number)."""
    if not message:
        return None
    channel, payload = message[0], message[1:]
    if channel not in seen:
        seen.add(channel)
        payload = payload[2:]  # the port, little-endian (the one asked for)
        if not payload:
            return None
    return channel, payload


@dataclass
class Forward:
    """A loopback listener whose every connection is port-forwarded to `target`; `close()` ends them all."""

    api: KubeAPI
    target: OEPod
    _listener: socket.socket = field(init=False)
    _closing: threading.Event = field(default_factory=threading.Event)
    _open: set[Any] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        threading.Thread(target=self._accept, name="port-forward", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def _websocket(self) -> Any:
        from websockets.exceptions import InvalidStatus, WebSocketException
        from websockets.sync.client import connect

        pod = self.target
        path = (
            f"/api/v1/namespaces/{quote(pod.namespace, safe='')}/pods/{quote(pod.pod, safe='')}"
            f"/portforward?ports={pod.port}"
        )
        url = self.api.websocket_url(path)
        try:
            return connect(
                url,
                ssl=self.api.tls if url.startswith("wss://") else None,
                additional_headers=dict(self.api.headers),
                subprotocols=[PROTOCOL],  # type: ignore[list-item]
                open_timeout=30,  # a loaded API server may take its time to refuse
                max_size=None,
                compression=None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status == 403:
                raise forbidden(
                    self.api, what="port-forward to the OE (pods/portforward)", namespace=pod.namespace
                ) from None
            raise unexpected(
                self.api, status=status, what=f"the port-forward to {pod.namespace}/{pod.pod}"
            ) from None
        except (OSError, WebSocketException) as exc:
            raise CliError(
                f"the port-forward to the OE pod {pod.namespace}/{pod.pod} failed "
                f"({exc.__class__.__name__}); " + SERVER_FIX
            ) from None

    def check(self) -> None:
        """Open (and close) one forwarded stream, so a refusal is told before any request is sent."""
        self._websocket().close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            ws = self._websocket()
        except CliError as exc:
            self.errors.append(exc.format_message())
            conn.close()
            return
        self._open.add(ws)
        done = threading.Event()

        def upstream() -> None:
            with contextlib.suppress(Exception):
                while chunk := conn.recv(65536):
                    ws.send(bytes([DATA]) + chunk)
            done.set()
            with contextlib.suppress(Exception):
                ws.close()

        threading.Thread(target=upstream, daemon=True).start()
        seen: set[int] = set()
        with contextlib.suppress(Exception):
            for message in ws:
                frame = frames(message if isinstance(message, bytes) else message.encode(), seen=seen)
                if frame is None:
                    continue
                channel, payload = frame
                if channel == DATA:
                    conn.sendall(payload)
                elif channel == ERROR_CHANNEL and payload:
                    self.errors.append(payload.decode("utf-8", errors="replace")[:300])
                    break
        self._open.discard(ws)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for ws in list(self._open):
            with contextlib.suppress(Exception):
                ws.close()


@contextlib.contextmanager
def forwarded(api: KubeAPI, *, environ: Mapping[str, str]) -> Iterator[Forward]:
    """A port-forward to the cluster's OE for the block; closed (listener and streams) when it ends."""
    forward = Forward(api=api, target=find_oe(api, environ=environ))
    try:
        forward.check()
        yield forward
    finally:
        forward.close()
