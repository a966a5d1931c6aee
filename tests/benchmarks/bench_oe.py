"""The Orchestration Engine on the step path: OE `/tool/execute` -> Tool Pod vs the Tool Pod called directly.

Real processes on loopback: a Tool Pod with a no-I/O tenant tool, an AER whose runs only wait (so the
executions stay running while this benchmark plays the AER's part), and the OE (SQLite, then MongoDB
through FerretDB). Prints, each against a baseline measured in the same run:
- added latency per step at p50/p99 (OE + its store + one more hop) over calling the Tool Pod directly;
- steps/s with 32 executions stepping concurrently, for SQLite and for MongoDB via FerretDB;
- replay hits (a cached step answered without executing anything), p50;
- the OE's peak RSS serving a store that holds 10,000 executions;
- the latency a client request gains from Kubernetes authentication and authorization (TokenReview and
  SubjectAccessReview against the test control plane's real API server), on a cache hit and on a miss,
  against the same request with the static development token (issue 28).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from tests.benchmarks.bench_toolpod import _percentile, _run
from tests.conftest import REPO_ROOT, free_port, wait_for_port

if TYPE_CHECKING:
    from tests.cluster.controlplane import ControlPlane

RUNTIME_TOKEN = "bench-oe-runtime-token"
CLIENT_TOKEN = "bench-oe-client-token"
AGENT = "bench/agent"
SEQUENTIAL_STEPS = 1000
WARMUP_STEPS = 100
CONCURRENT_EXECUTIONS = 32
CONCURRENT_SECONDS = 5.0
STORED_EXECUTIONS = 10_000


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.3f} ms"


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Stack:
    """Tool Pod + AER once; OEs come and go (one per store)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tool_port, self.aer_port = free_port(), free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.base_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "PYTHONPATH": str(REPO_ROOT),
        }

    def _launch(self, mode: str, port: int, extra: dict[str, str]) -> subprocess.Popen[bytes]:
        env = {
            **self.base_env,
            "RUNNER_MODE": mode,
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(port),
            "STRUCTURED_LOGGING": "true",
            **extra,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_runtime.launcher"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.processes.append(proc)
        wait_for_port("127.0.0.1", port, proc=proc, timeout=60)
        deadline = time.monotonic() + 30
        while httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30).status_code != 200:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{mode} not ready")
            time.sleep(0.05)
        return proc

    def start_runtimes(
        self, *, tenant: str = "tests.benchmarks.oe_tenant:app", extra: dict[str, str] | None = None
    ) -> None:
        env = {"RUNTIME_TOKEN": RUNTIME_TOKEN, "AGENT_ENTRYPOINT": tenant, **(extra or {})}
        self._launch("tool", self.tool_port, env)
        self.oe_port = free_port()
        self._launch("aer", self.aer_port, {**env, "AGENTIC_OE_URL": f"http://127.0.0.1:{self.oe_port}"})
        regs = self.tmp / "registrations"
        regs.mkdir()
        (regs / "bench.json").write_text(
            json.dumps(
                {
                    "agent": AGENT,
                    "token": RUNTIME_TOKEN,
                    "aerUrl": f"http://127.0.0.1:{self.aer_port}",
                    "toolUrl": f"http://127.0.0.1:{self.tool_port}",
                    "tools": [{"name": "noop", "location": "remote"}],
                }
            )
        )

    def start_oe(self, store_env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
        # Always the port the AER was told: OEs for different stores take turns on it.
        port = self.oe_port
        extra = {
            "OE_REGISTRATIONS_DIR": str(self.tmp / "registrations"),
            "OE_CLIENT_TOKEN": CLIENT_TOKEN,
            **store_env,
        }
        return self._launch("oe", port, extra), port

    def stop(self, proc: subprocess.Popen[bytes] | None = None) -> None:
        for each in [proc] if proc is not None else list(reversed(self.processes)):
            each.terminate()
            try:
                each.wait(timeout=30)
            except subprocess.TimeoutExpired:
                each.kill()
                each.wait()
            if each in self.processes:
                self.processes.remove(each)


async def _executions(client: httpx.AsyncClient, count: int) -> list[str]:
    """Invoke `count` executions and wait until the OE has handed each to the AER (running)."""
    ids = []
    for _ in range(count):
        response = await client.post("/invoke", json={"agent": AGENT, "input": {"hold_s": 3600}})
        ids.append(response.json()["execution_id"])
    for execution_id in ids:
        # Polling another process's state: there is no event to wait on here.
        while (await client.get(f"/execution/{execution_id}")).json()["status"] != "running":  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    return ids


def _step_body(execution_id: str, step: int) -> bytes:
    return json.dumps(
        {"execution_id": execution_id, "step": step, "tool": "noop", "args": {"item_id": str(step)}}
    ).encode()


async def _timed(call: Callable[[], Awaitable[httpx.Response]], marker: bytes) -> float:
    started = time.perf_counter()
    response = await call()
    elapsed = time.perf_counter() - started
    if response.status_code != 200 or marker not in response.content:
        raise RuntimeError(f"{response.status_code} {response.text[:300]}")
    return elapsed


async def _latency(oe_port: int, tool_port: int) -> None:
    auth = {"authorization": f"Bearer {RUNTIME_TOKEN}", "content-type": "application/json"}
    client_auth = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{oe_port}", headers=client_auth, timeout=30) as client,
        httpx.AsyncClient(timeout=30) as caller,
    ):
        (execution_id,) = await _executions(client, 1)
        direct_url = f"http://127.0.0.1:{tool_port}/execute"
        oe_url = f"http://127.0.0.1:{oe_port}/tool/execute"
        direct, through, cached = [], [], []
        for step in range(1, SEQUENTIAL_STEPS + WARMUP_STEPS + 1):
            tool_body = json.dumps({"tool": "noop", "arguments": {"item_id": str(step)}}).encode()
            d = await _timed(
                lambda b=tool_body: caller.post(direct_url, content=b, headers=auth), b'"success"'
            )
            o = await _timed(
                lambda s=step: caller.post(oe_url, content=_step_body(execution_id, s), headers=auth),
                b'"success"',
            )
            if step > WARMUP_STEPS:
                direct.append(d)
                through.append(o)
        for step in range(WARMUP_STEPS + 1, SEQUENTIAL_STEPS + WARMUP_STEPS + 1):
            cached.append(
                await _timed(
                    lambda s=step: caller.post(oe_url, content=_step_body(execution_id, s), headers=auth),
                    b'"from_cache":true',
                )
            )
    print(
        f"one caller, {SEQUENTIAL_STEPS} steps (+{WARMUP_STEPS} warm-up), direct and through the OE in turn:"
    )
    print(f"  Tool Pod direct      p50 {_ms(_percentile(direct, 0.5))}  p99 {_ms(_percentile(direct, 0.99))}")
    print(
        f"  OE -> Tool Pod       p50 {_ms(_percentile(through, 0.5))}  p99 {_ms(_percentile(through, 0.99))}"
    )
    added = _percentile(through, 0.5) - _percentile(direct, 0.5)
    added99 = _percentile(through, 0.99) - _percentile(direct, 0.99)
    print(f"  added by the OE      p50 {_ms(added)}  p99 {_ms(added99)}   (target p50 < 2 ms)")
    print(
        f"  replay hit (cached)  p50 {_ms(_percentile(cached, 0.5))}  p99 {_ms(_percentile(cached, 0.99))}"
        "   (target p50 < 1 ms)"
    )


async def _throughput(oe_port: int, label: str) -> float:
    """Steps/s with CONCURRENT_EXECUTIONS executions, one keep-alive connection each, stepping in turn."""
    client_auth = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{oe_port}", headers=client_auth, timeout=60
    ) as client:
        ids = await _executions(client, CONCURRENT_EXECUTIONS)
    done = 0
    deadline = time.perf_counter() + CONCURRENT_SECONDS

    async def execution(execution_id: str) -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", oe_port)
        step = 0
        try:
            while time.perf_counter() < deadline:
                step += 1
                body = _step_body(execution_id, step)
                head = (
                    "POST /tool/execute HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                    f"authorization: Bearer {RUNTIME_TOKEN}\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
                ).encode()
                writer.write(head + body)
                response_head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in response_head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                payload = await reader.readexactly(length)
                if response_head[9:12] != b"200" or b'"success"' not in payload:
                    raise RuntimeError(f"{response_head[:12]!r} {payload[:300]!r}")
                done += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(execution(i) for i in ids))
    rate = done / (time.perf_counter() - started)
    print(f"  {label:28s} {rate:7.0f} steps/s with {CONCURRENT_EXECUTIONS} concurrent executions")
    return rate


def _fill_store(path: Path, count: int) -> None:
    """Write `count` finished executions (3 steps, 3 audit records, 5 events each) straight into the store."""
    code = f"""
import asyncio, time
from agent_runtime.oe.store import SqliteStore, ExecutionRecord, StepRecord, AuditRecord
from agent_runtime.protocol import CallOutcome, ExecutionState
async def main():
    store = SqliteStore({str(path)!r})
    await store.open()
    now = time.time()
    for n in range({count}):
        eid = f"stored-{{n:06d}}"
        await store.create_execution(ExecutionRecord(execution_id=eid, agent={AGENT!r}, project_id="bench",
            workspace_id="bench.agent", session_id=eid, input={{"n": n}}, status=ExecutionState.COMPLETED,
            result={{"ok": n}}, created_at=now + n / 1000, updated_at=now, finished_at=now,
            step_count=3, runs=1))
        for step in (1, 2, 3):
            await store.claim_step(StepRecord(execution_id=eid, step=step, tool="noop", fingerprint="f" * 64,
                created_at=now, updated_at=now))
            outcome = CallOutcome(status="success", result={{"item_id": str(step)}})
            await store.finish_step(eid, step, outcome, at=now)
            await store.append_audit(AuditRecord(execution_id=eid, step=step, agent={AGENT!r},
                workspace_id="bench.agent", kind="tool", tool="noop", decision="allow",
                status="success", at=now))
        for kind in ("created", "running", "step_finished", "step_finished", "completed"):
            await store.append_event(eid, type=kind, step=None, data={{}}, at=now)
    await store.close()
asyncio.run(main())
"""
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


async def _browse(oe_port: int) -> None:
    """A client paging through the stored executions and reading some of them."""
    client_auth = {"authorization": f"Bearer {CLIENT_TOKEN}"}
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{oe_port}", headers=client_auth, timeout=60
    ) as client:
        cursor = None
        pages = 0
        while pages < 50:
            params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
            page = (await client.get("/executions", params=params)).json()
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        for n in range(0, STORED_EXECUTIONS, 97):
            await client.get(f"/execution/stored-{n:06d}/audit")


def main() -> None:
    print("load average before: {:.2f} {:.2f} {:.2f} (2 cores shared)".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="bench-oe-") as tmp:
        stack = Stack(Path(tmp))
        try:
            stack.start_runtimes()
            oe, port = stack.start_oe({"OE_SQLITE_PATH": str(Path(tmp) / "oe.sqlite3")})
            _run(_latency(port, stack.tool_port))
            print("throughput:")
            sqlite_rate = 0.0
            sqlite_rate = _run_value(_throughput(port, "SQLite"))
            print(f"  target: >= 500 steps/s with SQLite (measured {sqlite_rate:.0f})")
            stack.stop(oe)

            big = Path(tmp) / "big.sqlite3"
            started = time.perf_counter()
            _fill_store(big, STORED_EXECUTIONS)
            print(f"stored {STORED_EXECUTIONS} executions in {time.perf_counter() - started:.1f} s")
            oe, port = stack.start_oe({"OE_SQLITE_PATH": str(big)})
            _run(_browse(port))
            _run_value(_throughput(port, "SQLite, 10,000 stored"))
            print(
                f"  OE peak RSS with {STORED_EXECUTIONS} stored executions: {_peak_rss_mb(oe.pid):.0f} MB"
                "   (target < 150 MB)"
            )
            stack.stop(oe)

            from tests.integration.ferretdb import running_ferretdb

            with running_ferretdb() as uri:
                oe, port = stack.start_oe(
                    {"OE_STORE_TYPE": "mongodb", "OE_MONGODB_URI": uri, "OE_MONGODB_DATABASE": "bench_oe"}
                )
                mongo_rate = _run_value(_throughput(port, "MongoDB (FerretDB/SQLite)"))
                print(f"  MongoDB via FerretDB: {mongo_rate / sqlite_rate:.2f}x the SQLite figure")
                stack.stop(oe)
            _client_auth_bench(stack, Path(tmp))
        finally:
            stack.stop()
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


AUTH_REQUESTS = 1000
AUTH_MISS_REQUESTS = 200


def _auth_identities(plane: ControlPlane, tmp: Path) -> tuple[Path, str]:
    """The OE's ServiceAccount (it may create token and access reviews) and a client who may read `bench`'s
    executions; the OE's token directory and the client's token (audience agent-engine)."""
    from kubernetes import client

    with plane.api_client() as api:
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="bench")))
        for name in ("oe", "reader"):
            core.create_namespaced_service_account(
                "bench", client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
            )
        rules = {
            "bench-oe-reviews": [
                client.V1PolicyRule(
                    api_groups=["authentication.k8s.io"], resources=["tokenreviews"], verbs=["create"]
                ),
                client.V1PolicyRule(
                    api_groups=["authorization.k8s.io"], resources=["subjectaccessreviews"], verbs=["create"]
                ),
            ],
            "bench-reader": [
                client.V1PolicyRule(
                    api_groups=["agentengine.io"], resources=["agents/executions"], verbs=["get"]
                )
            ],
        }
        for role, sa in (("bench-oe-reviews", "oe"), ("bench-reader", "reader")):
            rbac.create_cluster_role(
                client.V1ClusterRole(metadata=client.V1ObjectMeta(name=role), rules=rules[role])
            )
            rbac.create_cluster_role_binding(
                client.V1ClusterRoleBinding(
                    metadata=client.V1ObjectMeta(name=role),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role
                    ),
                    subjects=[client.RbacV1Subject(kind="ServiceAccount", name=sa, namespace="bench")],
                )
            )

        def token(name: str, audiences: list[str]) -> str:
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=audiences, expiration_seconds=3600)
            )
            return str(core.create_namespaced_service_account_token(name, "bench", request).status.token)

        sa_dir = tmp / "oe-serviceaccount"
        sa_dir.mkdir()
        (sa_dir / "token").write_text(token("oe", []))
        (sa_dir / "ca.crt").write_bytes(plane.ca.cert_pem)
        return sa_dir, token("reader", ["agent-engine"])


async def _auth_latency(
    oe_port: int, execution_id: str, kube_token: str, *, count: int
) -> tuple[list[float], list[float]]:
    """The same read with the static token and with a Kubernetes token, in turn: (static, kubernetes)."""
    static, kube = [], []
    base = f"http://127.0.0.1:{oe_port}"
    async with (
        httpx.AsyncClient(
            base_url=base, headers={"authorization": f"Bearer {CLIENT_TOKEN}"}, timeout=30
        ) as a,
        httpx.AsyncClient(base_url=base, headers={"authorization": f"Bearer {kube_token}"}, timeout=30) as b,
    ):
        path = f"/execution/{execution_id}"
        for n in range(count + WARMUP_STEPS):
            s = await _timed(lambda: a.get(path), execution_id.encode())
            k = await _timed(lambda: b.get(path), execution_id.encode())
            if n >= WARMUP_STEPS:
                static.append(s)
                kube.append(k)
    return static, kube


def _client_auth_bench(stack: Stack, tmp: Path) -> None:
    """Issue 28: what Kubernetes authn + authz adds to a client request, hit and miss, vs the static token."""
    from tests.cluster.controlplane import ControlPlane, ControlPlaneError, ensure_binaries

    try:
        bin_dir = ensure_binaries()
    except ControlPlaneError as error:
        print(f"client auth: skipped, no test control plane ({str(error).splitlines()[0]})")
        return
    plane = ControlPlane(bin_dir=bin_dir, nodes=1).start()
    try:
        sa_dir, reader = _auth_identities(plane, tmp)
        kube_env = {
            "OE_SQLITE_PATH": str(tmp / "auth.sqlite3"),
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(plane.apiserver_port),
            "OE_SERVICEACCOUNT_DIR": str(sa_dir),
            "OE_CLIENT_AUTH": "kubernetes,static",
        }
        oe, port = stack.start_oe(kube_env)

        async def one_execution() -> str:
            headers = {"authorization": f"Bearer {CLIENT_TOKEN}"}
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
            ) as c:
                return (await _executions(c, 1))[0]

        box: list[str] = []

        async def keep() -> None:
            box.append(await one_execution())

        _run(keep())
        results: dict[str, tuple[list[float], list[float]]] = {}

        async def measure(label: str, count: int) -> None:
            results[label] = await _auth_latency(port, box[0], reader, count=count)

        _run(measure("hit", AUTH_REQUESTS))
        stack.stop(oe)
        # Every request a miss: a TokenReview and a SubjectAccessReview each time.
        oe, port = stack.start_oe({**kube_env, "OE_CLIENT_AUTH_CACHE_TTL_S": "0.000001"})
        _run(measure("miss", AUTH_MISS_REQUESTS))
        stack.stop(oe)
    finally:
        plane.stop()
    print("client authn + authz, GET /execution/{id}, the static token and a Kubernetes token in turn:")
    for label, (static, kube) in results.items():
        added = _percentile(kube, 0.5) - _percentile(static, 0.5)
        added99 = _percentile(kube, 0.99) - _percentile(static, 0.99)
        print(
            f"  cache {label:4}  static p50 {_ms(_percentile(static, 0.5))}  kubernetes p50 "
            f"{_ms(_percentile(kube, 0.5))} p99 {_ms(_percentile(kube, 0.99))}  added p50 {_ms(added)} "
            f"p99 {_ms(added99)}" + ("   (target p50 < 0.3 ms)" if label == "hit" else "")
        )


def _run_value(coroutine: Awaitable[float]) -> float:
    box: list[float] = []

    async def keep() -> None:
        box.append(await coroutine)

    _run(keep())
    return box[0]


if __name__ == "__main__":
    main()
