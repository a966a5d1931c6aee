"""PID 1 of one real node: `python -m tests.cluster.realnode_init PLAN.json`, started by
tests/cluster/realnode.py with `unshare --pid --mount --net`: a PID, mount and network namespace of its own.

It makes the node's private mounts (tmpfs on /run and /var/lib: containerd's pod network namespaces, the
kubelet's device-plugins directory and CNI's cache never reach the host), sets up the node's network
(loopback, the CNI bridge holding the node IP, a route for the Service range, forwarding and bridge
netfilter), then runs the plan's processes in order (socat relay to the API server, containerd, kubelet,
kube-proxy, CoreDNS), each started once the one before it is ready. It also serves an HTTP CONNECT proxy on a
unix socket: the API server's egress selector dials the kubelet (logs, exec, port-forward) through it, since
the node IP exists only in here.

When this process exits, the kernel kills everything left in its PID namespace (containerd's shims, the pods'
processes) and the namespaces go away with every mount made in them: nothing of the node outlives it.
`state.json` in the node directory says what runs and what failed.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_stop = threading.Event()


def _run(*argv: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")


def _write(path: str, value: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        Path(path).write_text(value)


def setup_mounts(plan: dict[str, Any]) -> None:
    # Private already (unshare --propagation private); tmpfs hides the host's paths from the node only.
    for target in plan["tmpfs"]:
        _run("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", target)
    Path("/run/netns").mkdir(parents=True, exist_ok=True)


def setup_network(plan: dict[str, Any]) -> None:
    net = plan["network"]
    _run("ip", "link", "set", "lo", "up")
    _run("ip", "link", "add", net["bridge"], "type", "bridge")
    _run("ip", "addr", "add", f"{net['node_ip']}/{net['prefix']}", "dev", net["bridge"])
    _run("ip", "link", "set", net["bridge"], "up")
    # Service IPs are rewritten by kube-proxy after routing: they need a route to exist at all.
    _run("ip", "route", "add", net["service_cidr"], "dev", net["bridge"], "src", net["node_ip"])
    _write("/proc/sys/net/ipv4/ip_forward", "1")
    _write("/proc/sys/net/bridge/bridge-nf-call-iptables", "1")
    _write("/proc/sys/net/bridge/bridge-nf-call-ip6tables", "1")


# ------------------------------------------------------------------------------------ the CONNECT proxy


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def _serve_connect(client: socket.socket, allowed: list[ipaddress.IPv4Network]) -> None:
    with client:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk or len(head) > 16384:
                return
            head += chunk
        request, _, rest = head.partition(b"\r\n\r\n")
        parts = request.split(b"\r\n", 1)[0].split()
        if len(parts) < 2 or parts[0] != b"CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            return
        host, _, port = parts[1].decode().rpartition(":")
        try:
            address = ipaddress.ip_address(host.strip("[]"))
            if not any(address in network for network in allowed):
                raise ValueError(host)
            upstream = socket.create_connection((str(address), int(port)), timeout=10)
        except (ValueError, OSError):
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            return
        with upstream:
            upstream.settimeout(None)
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join()


def start_connect_proxy(path: str, allowed: list[str]) -> None:
    networks = [ipaddress.ip_network(cidr) for cidr in allowed]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o600)
    server.listen(64)

    def accept() -> None:
        while not _stop.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_serve_connect, args=(client, networks), daemon=True).start()

    threading.Thread(target=accept, daemon=True, name="connect-proxy").start()


# ---------------------------------------------------------------------------------------- the processes


def _ready(check: dict[str, Any] | None) -> bool:
    if not check:
        return True
    if "path" in check:
        return Path(check["path"]).exists()
    with contextlib.suppress(OSError), socket.create_connection((check["host"], check["port"]), timeout=0.5):
        return True
    return False


class Supervisor:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.node_dir = Path(plan["node_dir"])
        self.logs = self.node_dir / "logs"
        self.children: dict[int, str] = {}
        self.popens: list[subprocess.Popen[bytes]] = []  # kept only so they are not collected early
        self.failed: dict[str, int] = {}
        self.state: dict[str, Any] = {"pid_in_host": None, "started": [], "failed": {}, "ready": False}

    def publish(self, **changes: Any) -> None:
        self.state.update(changes)
        self.state["failed"] = self.failed
        tmp = self.node_dir / "state.json.tmp"
        tmp.write_text(json.dumps(self.state))
        tmp.replace(self.node_dir / "state.json")

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        self.popens.append(popen)
        self.children[popen.pid] = name

    def reap(self) -> None:
        """Collect every exited process (as PID 1, orphans are ours too); note our children's deaths."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if (name := self.children.pop(pid, None)) is not None and not _stop.is_set():
                self.failed[name] = os.waitstatus_to_exitcode(status)
                self.publish()

    def start(self, spec: dict[str, Any]) -> None:
        """Start one process and wait until it is ready."""
        self.spawn(spec["name"], spec["argv"], spec.get("env"))
        deadline = time.monotonic() + spec.get("timeout", 60)
        while not _ready(spec.get("ready")):
            self.reap()
            if spec["name"] in self.failed:
                raise RuntimeError(f"{spec['name']} exited {self.failed[spec['name']]} before it was ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{spec['name']} was not ready after {spec.get('timeout', 60)}s")
            time.sleep(0.1)
        self.publish(started=[*self.state["started"], spec["name"]])

    def start_all(self) -> None:
        for spec in self.plan["processes"]:
            self.start(spec)
        self.publish(ready=True)

    def start_requested(self) -> None:
        """Start the plan's on-request processes whose request file (`start/<name>`) the host wrote."""
        for name, spec in self.plan.get("on_request", {}).items():
            request = self.node_dir / "start" / name
            if request.exists():
                request.unlink()
                try:
                    self.start(spec)
                except RuntimeError as error:
                    self.failed[name] = -1
                    self.publish(error=str(error))

    def restart_requested(self) -> None:
        """SIGKILL and start again the plan's processes whose request file (`restart/<name>`) the host wrote
        (a kubelet restarted under running pods); `restarts` in the state counts each."""
        for spec in self.plan["processes"]:
            request = self.node_dir / "restart" / spec["name"]
            if not request.exists():
                continue
            request.unlink()
            for pid, name in list(self.children.items()):
                if name == spec["name"]:
                    self.children.pop(pid)  # its death is the request's, not a failure
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
            try:
                self.start(spec)
            except RuntimeError as error:
                self.failed[spec["name"]] = -1
                self.publish(error=str(error))
            restarts = self.state.setdefault("restarts", {})
            restarts[spec["name"]] = restarts.get(spec["name"], 0) + 1
            self.publish()

    def stop_all(self, grace: float = 5.0) -> None:
        for pid in reversed(list(self.children)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.05)
        # Whatever is left, shims and pods included, dies with this PID namespace when we return.


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[0]).read_text())
    supervisor = Supervisor(plan)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: _stop.set())
    try:
        setup_mounts(plan)
        setup_network(plan)
        start_connect_proxy(plan["egress_socket"], plan["egress_allow"])
        supervisor.start_all()
    except Exception as error:
        supervisor.publish(error=str(error))
        print(f"node start failed: {error}", file=sys.stderr, flush=True)
        supervisor.stop_all(grace=2.0)
        return 1
    while not _stop.wait(0.2):
        supervisor.reap()
        supervisor.start_requested()
        supervisor.restart_requested()
    supervisor.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
