"""The operator at scale: N Agents applied at once against the real control plane (tests/cluster).

Figures per N (100, then 1,000; BENCH_OPERATOR_SIZES=10000 for a one-off): seconds until every Agent is
Ready; the operator's peak RSS (VmHWM) and CPU (from /proc); the operator's own API requests per Agent (its
request counter, by verb) and all API requests per Agent the API server served meanwhile
(apiserver_request_total, every client: controllers, scheduler, KWOK). Then a restart with all N existing:
seconds from the new process's start until it has converged every Agent once (its log), its peak RSS, CPU
and writes. Baselines in the same run: seconds for this client alone to create the N Agent objects (the API
floor), and seconds for a plain client to apply the very objects the operator renders for N Agents (shared
ones once; 8 concurrent requests, like the operator) until every Deployment is Available (the control
plane's floor).

The controller-manager and scheduler run with raised client QPS here (see `_fast_controllers`): at their
defaults (20 QPS) the ReplicaSet and pod churn of 2,000 Deployments, not the operator, sets the pace.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from agent_operator.inputs import AgentInputs, SecretMeta
from agent_operator.kube import object_path
from agent_operator.models import Agent, Connector
from agent_operator.reconcile import plan_agent
from agent_operator.settings import RenderSettings
from tests.cluster import controlplane
from tests.cluster.controlplane import ControlPlane, ensure_binaries
from tests.conftest import REPO_ROOT, free_port, wait_for_port

SIZES = tuple(int(n) for n in os.environ.get("BENCH_OPERATOR_SIZES", "100,1000").split(","))
# BENCH_OPERATOR_BASELINE=0 skips the plain-client floor (for a one-off size, e.g. 10,000 Agents).
BASELINE = os.environ.get("BENCH_OPERATOR_BASELINE", "1") != "0"
GOAL_SECONDS = 93.0  # the Go peer (controller-runtime) on this machine: issue 23
READY_TIMEOUT = 600.0  # per 1,000 Agents


def _timeout(n: int) -> float:
    return READY_TIMEOUT * max(1.0, n / 1000)


def _poll_seconds(n: int) -> float:
    """Listing every Agent is itself load on the API server: at 10,000 poll every 10 s, not every second."""
    return max(1.0, n / 1000)


GROUP_PATH = "/apis/agentengine.io/v1alpha1"
OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Bench", "version": "1"},
    "paths": {"/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}},
}


def _fast_controllers() -> None:
    """Raise the controllers' client rate limits (benchmark only; the tests keep the defaults)."""
    flags = ["--kube-api-qps=400", "--kube-api-burst=800"]
    cm, sched = controlplane.controller_manager_args, controlplane.scheduler_args
    controlplane.controller_manager_args = lambda **kw: [
        *cm(**kw),
        *flags,
        "--concurrent-deployment-syncs=20",
        "--concurrent-replicaset-syncs=20",
    ]
    controlplane.scheduler_args = lambda **kw: [*sched(**kw), *flags]


def _client(plane: ControlPlane) -> httpx.AsyncClient:
    config = yaml.safe_load(plane.kubeconfig.read_text())
    user, cluster = config["users"][0]["user"], config["clusters"][0]["cluster"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    files = {}
    for key, source, field in (
        ("ca", cluster, "certificate-authority-data"),
        ("cert", user, "client-certificate-data"),
        ("key", user, "client-key-data"),
    ):
        files[key] = tmp / key
        files[key].write_bytes(base64.b64decode(source[field]))
    tls = ssl.create_default_context(cafile=str(files["ca"]))
    tls.load_cert_chain(str(files["cert"]), str(files["key"]))
    return httpx.AsyncClient(
        base_url=plane.server, verify=tls, timeout=60, limits=httpx.Limits(max_connections=32)
    )


async def _apply(http: httpx.AsyncClient, path: str, manifest: dict[str, Any]) -> None:
    response = await http.patch(
        path,
        params={"fieldManager": "bench", "force": "true"},
        content=json.dumps(manifest),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    response.raise_for_status()


async def _server_requests(http: httpx.AsyncClient) -> int:
    text = (await http.get("/metrics")).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("apiserver_request_total{") and 'verb="WATCH"' not in line
    )


def _profile_args(n: int, phase: str = "") -> list[str]:
    """BENCH_OPERATOR_PROFILE=DIR writes a cProfile of the operator per size (for finding hot spots)."""
    directory = os.environ.get("BENCH_OPERATOR_PROFILE")
    return ["-m", "cProfile", "-o", f"{directory}/operator-{n}{phase}.prof"] if directory else []


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _peak_rss_mb(pid: int) -> float:
    match = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else float("nan")


async def _setup_namespace(http: httpx.AsyncClient, ns: str) -> None:
    (await http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).raise_for_status()
    base = f"/api/v1/namespaces/{ns}"
    await _apply(
        http,
        f"{base}/configmaps/bench-openapi",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "bench-openapi"},
            "data": {"openapi.json": json.dumps(OPENAPI)},
        },
    )
    await _apply(
        http,
        f"{base}/secrets/llm-keys",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm-keys"},
            "stringData": {"key": "bench"},
        },
    )
    await _apply(
        http,
        f"{GROUP_PATH}/namespaces/{ns}/connectors/bench",
        {
            "apiVersion": "agentengine.io/v1alpha1",
            "kind": "Connector",
            "metadata": {"name": "bench"},
            "spec": {
                "source": {"baseUrl": "https://api.example.com"},
                "catalog": {"configMapKeyRef": {"name": "bench-openapi", "key": "openapi.json"}},
            },
        },
    )


def _agent(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "agentengine.io/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {
            "image": "registry.example.com/bench/agent:1.0.0",
            "entrypoint": "bench.app:app",
            "connectors": ["bench"],
            "llm": {"credentials": [{"name": "LLM_KEY", "secretKeyRef": {"name": "llm-keys", "key": "key"}}]},
        },
    }


async def _create_agents(http: httpx.AsyncClient, ns: str, names: list[str]) -> float:
    started = time.perf_counter()
    sem = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        async with sem:
            await _apply(http, f"{GROUP_PATH}/namespaces/{ns}/agents/{name}", _agent(name))

    await asyncio.gather(*(one(n) for n in names))
    return time.perf_counter() - started


async def _count_ready(http: httpx.AsyncClient, ns: str) -> int:
    response = await http.get(f"{GROUP_PATH}/namespaces/{ns}/agents")
    response.raise_for_status()
    ready = 0
    for item in response.json()["items"]:
        for cond in (item.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Ready" and cond["status"] == "True":
                ready += 1
    return ready


def _start_operator(env: dict[str, str], n: int, *, phase: str = "") -> tuple[subprocess.Popen[bytes], Path]:
    log = Path(tempfile.mkstemp(prefix=f"bench-operator-{n}{phase}-", suffix=".log")[1])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *_profile_args(n, phase), "-m", "agent_operator"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc, log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _reconciled(log: Path) -> set[str]:
    """Agents the operator's log says it converged ("agent reconciled" lines)."""
    names = set()
    for line in log.read_text(errors="replace").splitlines():
        if '"agent reconciled"' in line:
            with contextlib.suppress(ValueError):
                names.add(json.loads(line).get("agent", ""))
    return names


async def _own_requests(port: int) -> dict[str, int]:
    await asyncio.sleep(11)  # kopf caches probe results for 10 s
    async with httpx.AsyncClient() as local:
        return (await local.get(f"http://127.0.0.1:{port}/healthz")).json().get("api_requests", {})


async def _restart(env: dict[str, str], n: int) -> dict[str, float]:
    """A new operator with all N Agents existing: until it converged each once, peak RSS, CPU, writes."""
    port = free_port()
    proc, log = _start_operator(
        {**env, "AGENT_OPERATOR_LIVENESS": f"http://127.0.0.1:{port}/healthz"}, n, phase="-restart"
    )
    started = time.perf_counter()
    try:
        while len(_reconciled(log)) < n and time.perf_counter() - started < _timeout(n):
            await asyncio.sleep(0.25)
            if proc.poll() is not None:
                raise RuntimeError(f"the restarted operator exited; see {log}")
        steady = time.perf_counter() - started
        cpu = _cpu_seconds(proc.pid)
        own = await _own_requests(port)
        return {
            "restart_seconds": steady,
            "restart_rss_mb": _peak_rss_mb(proc.pid),
            "restart_cpu_seconds": cpu,
            "restart_writes": sum(v for k, v in own.items() if k not in ("GET", "WATCH")),
            "restart_gets": own.get("GET", 0),
        }
    finally:
        _stop(proc)


async def _run_size(plane: ControlPlane, http: httpx.AsyncClient, n: int) -> dict[str, float]:
    ns = f"bench-{n}"
    await _setup_namespace(http, ns)
    port = free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(plane.kubeconfig),
        "AGENT_OPERATOR_NAMESPACES": ns,
        "AGENT_OPERATOR_LIVENESS": f"http://127.0.0.1:{port}/healthz",
        "AGENT_OPERATOR_RESYNC_SECONDS": "0",
        "PYTHONPATH": os.pathsep.join(str(REPO_ROOT / d) for d in ("operator", "runtime", ".")),
    }
    proc, _ = _start_operator(env, n)
    try:
        wait_for_port("127.0.0.1", port, timeout=60, proc=proc)
        await asyncio.sleep(1.0)
        server_before = await _server_requests(http)
        names = [f"agent-{i:04d}" for i in range(n)]
        started = time.perf_counter()
        create_seconds = await _create_agents(http, ns, names)
        ready = 0
        while ready < n and time.perf_counter() - started < _timeout(n):
            await asyncio.sleep(_poll_seconds(n))
            ready = await _count_ready(http, ns)
        all_ready = time.perf_counter() - started
        server_requests = await _server_requests(http) - server_before
        cpu = _cpu_seconds(proc.pid)
        own = await _own_requests(port)
        result: dict[str, Any] = {
            "n": n,
            "ready": ready,
            "create_seconds": create_seconds,
            "ready_seconds": all_ready,
            "rss_mb": _peak_rss_mb(proc.pid),
            "cpu_seconds": cpu,
            "own_per_agent": sum(own.values()) / n,
            "own_writes_per_agent": sum(v for k, v in own.items() if k not in ("GET", "WATCH")) / n,
            "server_per_agent": server_requests / n,
            "own": own,
        }
    finally:
        _stop(proc)
    result.update(await _restart(env, n))
    return result


def _direct_objects(ns: str, n: int) -> list[dict[str, Any]]:
    """What the operator would apply for N Agents, rendered by its pure reconcile (no ownerReferences:
    no Agent objects exist in the baseline namespace)."""
    connector = {
        "metadata": {"name": "bench", "namespace": ns},
        "spec": {
            "source": {"baseUrl": "https://api.example.com"},
            "catalog": {"configMapKeyRef": {"name": "bench-openapi", "key": "openapi.json"}},
        },
    }
    objects: dict[tuple[str, str], dict[str, Any]] = {}  # shared objects once, as the operator writes them
    for i in range(n):
        body = {
            **_agent(f"agent-{i:04d}"),
            "metadata": {"name": f"agent-{i:04d}", "namespace": ns, "uid": "x"},
        }
        inputs = AgentInputs(
            agent=Agent.from_body(body),
            connectors={"bench": Connector.from_body(connector)},
            config_maps={"bench-openapi": {"openapi.json": json.dumps(OPENAPI)}},
            secrets={"llm-keys": SecretMeta(resource_version="1", keys=frozenset({"key"}))},
        )
        for desired in plan_agent(inputs, settings=RenderSettings()).objects:
            manifest = json.loads(json.dumps(desired.manifest))
            manifest["metadata"].pop("ownerReferences", None)
            if desired.generate_token:
                manifest["stringData"] = {"token": "bench"}
            objects[(manifest["kind"], manifest["metadata"]["name"])] = manifest
    return list(objects.values())


async def _run_direct(http: httpx.AsyncClient, n: int) -> float:
    """Baseline: seconds for a plain client to apply the same objects and see every Deployment Available."""
    ns = f"direct-{n}"
    await _setup_namespace(http, ns)
    objects = _direct_objects(ns, n)
    sem = asyncio.Semaphore(8)  # the operator's connection count

    async def one(manifest: dict[str, Any]) -> None:
        path = object_path(manifest["apiVersion"], manifest["kind"], ns, manifest["metadata"]["name"])
        async with sem:
            await _apply(http, path, manifest)

    started = time.perf_counter()
    shared = [m for m in objects if m["kind"] in ("ConfigMap", "ServiceAccount", "NetworkPolicy")]
    await asyncio.gather(*(one(m) for m in shared))  # first, as the operator orders its writes
    await asyncio.gather(*(one(m) for m in objects if m not in shared))
    want = sum(1 for m in objects if m["kind"] == "Deployment")
    available = 0
    while available < want and time.perf_counter() - started < _timeout(n):
        await asyncio.sleep(_poll_seconds(n))
        items = (await http.get(f"/apis/apps/v1/namespaces/{ns}/deployments")).json()["items"]
        available = sum(
            1
            for d in items
            if any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (d.get("status") or {}).get("conditions") or []
            )
            and (d.get("status") or {}).get("updatedReplicas") == d["spec"]["replicas"]
        )
    return time.perf_counter() - started


async def _bench() -> list[dict[str, Any]]:
    _fast_controllers()
    with ControlPlane(bin_dir=ensure_binaries(), nodes=4) as plane:
        async with _client(plane) as http:
            for crd in ("agentengine.io_agents.yaml", "agentengine.io_connectors.yaml"):
                doc = yaml.safe_load((REPO_ROOT / "crds" / crd).read_text())
                await _apply(
                    http,
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}",
                    doc,
                )
            # The OE's namespace: each Agent's registration is published there, as in an installed platform.
            (
                await http.post("/api/v1/namespaces", json={"metadata": {"name": "agent-engine"}})
            ).raise_for_status()
            await asyncio.sleep(3)  # CRDs established
            results = []
            for n in SIZES:
                result = await _run_size(plane, http, n)
                if BASELINE:
                    result["direct_seconds"] = await _run_direct(http, n)
                results.append(result)
            return results


def main() -> None:
    results = asyncio.run(_bench())
    print("operator: N Agents applied at once (1 Connector, LLM Secret; AER + Tool Pod each, KWOK pods)")
    for r in results:
        ok = (
            ""
            if r["ready"] == r["n"]
            else f"  ONLY {r['ready']}/{r['n']} READY after {_timeout(r['n']):.0f}s"
        )
        print(
            f"  N={r['n']:>5}: all Ready in {r['ready_seconds']:7.1f} s "
            f"({r['ready_seconds'] / r['create_seconds']:.1f}x the {r['create_seconds']:.1f} s baseline "
            f"of creating the Agents alone; goal for 1,000: {GOAL_SECONDS:.0f} s){ok}"
        )
        if "direct_seconds" in r:
            print(
                f"           direct apply of the same objects until all Deployments Available: "
                f"{r['direct_seconds']:.1f} s (operator {r['ready_seconds'] / r['direct_seconds']:.2f}x)"
            )
        print(
            f"           operator peak RSS {r['rss_mb']:.0f} MB, CPU {r['cpu_seconds']:.1f} s "
            f"({1000 * r['cpu_seconds'] / r['n']:.1f} ms/Agent); operator API requests/Agent "
            f"{r['own_per_agent']:.1f} ({r['own_writes_per_agent']:.1f} writes; {r['own']}); "
            f"all clients' API requests/Agent {r['server_per_agent']:.1f}"
        )
        print(
            f"           restart with {r['n']} existing: converged in {r['restart_seconds']:.1f} s, peak RSS "
            f"{r['restart_rss_mb']:.0f} MB, CPU {r['restart_cpu_seconds']:.1f} s, "
            f"{r['restart_writes']} writes, {r['restart_gets']} GETs"
        )
    if len(results) > 1:
        first, last = results[0], results[-1]
        per_first = first["ready_seconds"] / first["n"]
        per_last = last["ready_seconds"] / last["n"]
        print(
            f"  seconds per Agent: N={first['n']} {per_first:.3f}, N={last['n']} {per_last:.3f} "
            f"({per_last / per_first:.2f}x)"
        )


if __name__ == "__main__":
    main()
