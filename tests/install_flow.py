"""The platform team's journey, as steps shared by the real-node tier (tests/cluster) and kind (tests/e2e).

Each step drives the real `helm` and `kubectl` binaries against whatever cluster `Kube.env` points at: the
test control plane (tests/cluster, KWOK fake nodes and one real node) or a kind cluster (tests/e2e). Both
tiers assert through these functions; `run_journey()` is the whole journey in order, and a `Platform` says
the few things that differ between the tiers (how images reach the nodes, how a namespace's pods find the
real node, what the node itself can tell about a running container).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_operator.render import component_name, token_secret_name
from agent_runtime.demo.kube import RETRYABLE, Kube, StepFailed, eventually

__all__ = ["RETRYABLE", "Kube", "StepFailed", "eventually"]

REPO_ROOT = Path(__file__).resolve().parent.parent
CHART = REPO_ROOT / "charts" / "agent-engine"
EXAMPLES = REPO_ROOT / "examples" / "kubernetes"
EXAMPLE_AGENT = "echo-agent"
RELEASE = "agent-engine"
OUR_KINDS = ("agents.agentengine.io", "connectors.agentengine.io")
OPERATOR_DEPLOYMENT = "agent-engine-operator"
OE_DEPLOYMENT = "agent-engine-oe"


def project_version() -> str:
    """The one project version (pyproject.toml): the chart's appVersion and every image's tag."""
    text = (REPO_ROOT / "pyproject.toml").read_text()
    match = re.search(r'^version = "([^"]+)"$', text, flags=re.MULTILINE)
    assert match, "pyproject.toml has no version"
    return match.group(1)


VERSION = project_version()
# The images a user builds (docker build, or images/build.sh without Docker), by repository:
# (Dockerfile, build context), both relative to the repository root.
PROJECT_IMAGES: dict[str, tuple[str, str]] = {
    "agent-engine/runtime": ("images/runtime/Dockerfile", "."),
    "agent-engine/operator": ("images/operator/Dockerfile", "."),
    "example/echo-agent": ("examples/echo-agent/Dockerfile", "examples/echo-agent"),
}


def project_image_refs() -> list[str]:
    return [f"{repository}:{VERSION}" for repository in PROJECT_IMAGES]


def helm_values_args(values: Mapping[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def helm_install(kube: Kube, *, namespace: str, values: Mapping[str, str] | None = None) -> None:
    kube.helm(
        "install", RELEASE, str(CHART), "--namespace", namespace, "--create-namespace", "--wait=false",
        *helm_values_args(values or {}),
    )  # fmt: skip


def helm_upgrade(kube: Kube, *, namespace: str, values: Mapping[str, str] | None = None) -> None:
    kube.helm("upgrade", RELEASE, str(CHART), "--namespace", namespace, *helm_values_args(values or {}))


def helm_uninstall(kube: Kube, *, namespace: str) -> None:
    kube.helm("uninstall", RELEASE, "--namespace", namespace, "--wait")


def crds_established(kube: Kube) -> bool:
    for crd in OUR_KINDS:
        conditions = kube.get_json("crd", crd).get("status", {}).get("conditions", [])
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
    return True


def apply_example(kube: Kube, *, namespace: str, files: Sequence[str] = ("echo-agent.yaml",)) -> None:
    for name in files:
        kube.kubectl("apply", "--namespace", namespace, "-f", str(EXAMPLES / name))


def agent_condition(kube: Kube, *, namespace: str, agent: str, type_: str = "Ready") -> dict[str, Any] | None:
    status = kube.get_json("agent", agent, "--namespace", namespace).get("status") or {}
    return next((c for c in status.get("conditions", []) if c.get("type") == type_), None)


def wait_agent_ready(
    kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT, timeout: float = 180.0
) -> dict:
    def ready() -> dict[str, Any] | None:
        condition = agent_condition(kube, namespace=namespace, agent=agent)
        return condition if condition and condition.get("status") == "True" else None

    eventually(f"Agent {namespace}/{agent} Ready", ready, timeout=timeout)
    return kube.get_json("agent", agent, "--namespace", namespace)


def runtime_token(kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT) -> str:
    secret = kube.get_json("secret", token_secret_name(agent), "--namespace", namespace)
    return base64.b64decode(secret["data"]["token"]).decode()


def tool_service(agent: str = EXAMPLE_AGENT) -> str:
    return component_name(agent, "tool")


def owned_objects(kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT) -> list[str]:
    """Everything in the namespace labelled as belonging to `agent` (what deleting it must remove; the
    objects it shares with the namespace's other Agents are `shared_objects`)."""
    out = kube.kubectl(
        "get", "configmaps,secrets,serviceaccounts,services,deployments,networkpolicies,pods",
        "--namespace", namespace, "-l", f"app.kubernetes.io/instance={agent}", "-o", "name",
    )  # fmt: skip
    return out.split()


def shared_objects(kube: Kube, *, namespace: str) -> list[str]:
    """What the namespace's Agents share (ServiceAccounts, NetworkPolicies, bundle ConfigMaps): no Agent
    owns them, the operator deletes each once no Agent renders it and no pod uses it."""
    out = kube.kubectl(
        "get", "configmaps,serviceaccounts,networkpolicies",
        "--namespace", namespace, "-l", "agentengine.io/shared=true", "-o", "name",
    )  # fmt: skip
    return out.split()


def no_shared_objects(kube: Kube, *, namespace: str) -> bool:
    """A poll: True once the namespace holds no shared object (a StepFailed names those left)."""
    if left := shared_objects(kube, namespace=namespace):
        raise StepFailed(f"shared objects left: {left}")
    return True


def release_leftovers(kube: Kube, *, namespace: str) -> list[str]:
    """Objects of the Helm release still present (after uninstall: only the CRDs Helm keeps may remain)."""
    selector = f"app.kubernetes.io/instance={RELEASE}"
    namespaced = kube.kubectl(
        "get", "deployments,serviceaccounts,roles,rolebindings,kopfpeerings", "--all-namespaces",
        "-l", selector, "-o", "name",
    )  # fmt: skip
    cluster = kube.kubectl(
        "get", "clusterroles,clusterrolebindings,clusterkopfpeerings", "-l", selector, "-o", "name"
    )
    return namespaced.split() + cluster.split()


# ------------------------------------------------------------------------------------------- pods, ports


def create_namespace(kube: Kube, name: str, *, annotations: Mapping[str, str] | None = None) -> None:
    """Create a namespace (before `helm install`, so its annotations are there before any pod)."""
    kube.kubectl("create", "namespace", name)
    if annotations:
        kube.kubectl("annotate", "namespace", name, *(f"{k}={v}" for k, v in annotations.items()))


def rollout(kube: Kube, *, namespace: str, deployment: str, timeout: int = 240) -> None:
    kube.kubectl(
        "rollout", "status", "--namespace", namespace, f"deployment/{deployment}", f"--timeout={timeout}s",
        timeout=timeout + 30,
    )  # fmt: skip


def pods(kube: Kube, *, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ["pods", "--namespace", namespace, *(["-l", selector] if selector else [])]
    return [p for p in kube.get_json(*args)["items"] if not p["metadata"].get("deletionTimestamp")]


def running_pod(kube: Kube, *, namespace: str, selector: str) -> dict[str, Any]:
    """The one Ready pod `selector` names (waits for it)."""

    def ready() -> dict[str, Any] | None:
        for pod in pods(kube, namespace=namespace, selector=selector):
            statuses = pod.get("status", {}).get("containerStatuses", [])
            if statuses and all(s.get("ready") for s in statuses):
                return pod
        return None

    return eventually(f"a Ready pod {namespace}/{selector}", ready, timeout=180)


def component_selector(agent: str, component: str) -> str:
    return f"app.kubernetes.io/instance={agent},app.kubernetes.io/component={component}"


@contextlib.contextmanager
def port_forward(
    kube: Kube, *, namespace: str, service: str, remote: int, timeout: float = 60.0
) -> Iterator[str]:
    """`kubectl port-forward svc/...` on a free loopback port; yields its base URL once /healthz answers.

    The first polls run before kubectl listens: refused connections are retried. A kubectl that gives up is
    started again twice, 2 s apart (a kubelet just restarted may not serve port-forwards yet), then it is a
    failure that quotes kubectl (a missing Service fails within seconds). The port-forward is stopped
    whatever happens.
    """
    from tests.conftest import free_port

    local = free_port()
    argv = [
        str(kube.bin_dir / "kubectl"), "port-forward", "--namespace", namespace, f"svc/{service}",
        f"{local}:{remote}", "--address", "127.0.0.1",
    ]  # fmt: skip
    running: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        running.append(
            subprocess.Popen(argv, env=dict(kube.env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )

    base = f"http://127.0.0.1:{local}"
    start()
    try:

        def healthy() -> bool:
            proc = running[-1]
            if proc.poll() is not None:
                error = f"kubectl port-forward exited {proc.returncode}: {proc.stderr.read()!r}"  # type: ignore[union-attr]
                if len(running) > 2:
                    raise AssertionError(error)
                time.sleep(2.0)
                start()
                raise StepFailed(error)
            return httpx.get(f"{base}/healthz", timeout=5).status_code == 200

        eventually(
            f"port-forward to {namespace}/svc/{service}:{remote}", healthy, timeout=timeout, interval=0.3
        )
        yield base
    finally:
        for proc in running:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
            if proc.stderr is not None:
                proc.stderr.close()


def oe_statement(
    kube: Kube, *, system_ns: str, namespace: str, agent: str = EXAMPLE_AGENT, execution_id: str
) -> str:
    """A statement for a Tool Pod call as the chart's OE signs it (its key from the chart's Secret): what the
    journey presents when it plays the OE, since the Agent's runtime token opens no Tool Pod (issue 27)."""
    from agent_runtime.execution_token import StatementSigner
    from agent_runtime.token_file import RotatingToken

    secret = kube.get_json("secret", f"{RELEASE}-oe-signing-key", "--namespace", system_ns)
    key = base64.b64decode(secret["data"]["signing-key.pem"]).decode()
    signer = StatementSigner(RotatingToken(key, what="OE signing key"))
    statement = signer.issue(
        audience="tool",
        agent=f"{namespace}/{agent}",
        workspace=f"{namespace}.{agent}",
        execution_id=execution_id,
    )
    assert statement is not None
    return statement


def call_tool_through_service(
    kube: Kube, *, namespace: str, system_ns: str, agent: str = EXAMPLE_AGENT, word: str
) -> dict:
    """A real tool call through the Tool Pod's Service: refused without a credential and with the Agent's
    runtime token (what its AER holds), run with the OE's statement for the execution."""
    token = runtime_token(kube, namespace=namespace, agent=agent)
    execution_id = f"journey-{word}"
    statement = oe_statement(
        kube, system_ns=system_ns, namespace=namespace, agent=agent, execution_id=execution_id
    )
    with port_forward(kube, namespace=namespace, service=tool_service(agent), remote=8002) as base:
        refused = httpx.post(f"{base}/execute", json={"tool": "echo_getEcho", "arguments": {}}, timeout=30)
        assert refused.status_code == 401, refused.text
        with_token = httpx.post(
            f"{base}/execute",
            headers={"Authorization": f"Bearer {token}"},
            json={"tool": "echo_getEcho", "arguments": {"word": word}, "execution_id": execution_id},
            timeout=30,
        )
        assert with_token.status_code in (401, 403), with_token.text
        answer = httpx.post(
            f"{base}/execute",
            headers={"Authorization": f"Bearer {statement}"},
            json={
                "tool": "echo_getEcho",
                "arguments": {"word": word, "times": 2},
                "execution_id": f"journey-{word}",
                "step": 1,
            },
            timeout=30,
        ).json()
    assert answer["status"] == "success", answer
    assert answer["result"]["body"]["word"] == word, answer
    return answer


# From inside the AER pod, with its own python and the runtime token mounted in it: POST /execute to its Tool
# Pod's Service, as tenant code (or a tool body a prompt talked into it) would. Prints the HTTP status.
_AER_CALLS_TOOL_POD = (
    "import json, os, sys, urllib.error, urllib.request\n"
    "token = open(os.environ['RUNTIME_TOKEN_FILE']).read().strip()\n"
    "body = json.dumps({'tool': 'sign_message', 'arguments': {'message': 'skip the OE'},\n"
    "                   'execution_id': 'aer-direct', 'step': 1}).encode()\n"
    "request = urllib.request.Request(sys.argv[1] + '/execute', data=body, method='POST',\n"
    "    headers={'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'})\n"
    "try:\n"
    "    print(urllib.request.urlopen(request, timeout=10).status)\n"
    "except urllib.error.HTTPError as error:\n"
    "    print(error.code)\n"
)


def aer_token_at_tool_pod(kube: Kube, *, namespace: str, agent: str = EXAMPLE_AGENT) -> int:
    """The HTTP status the Agent's Tool Pod answers its AER pod's own runtime token with on /execute."""
    aer = running_pod(kube, namespace=namespace, selector=component_selector(agent, "aer"))
    url = f"http://{tool_service(agent)}.{namespace}.svc.cluster.local:8002"
    out = kube.kubectl(
        "exec", "--namespace", namespace, aer["metadata"]["name"], "--", "python", "-c", _AER_CALLS_TOOL_POD,
        url, timeout=60,
    )  # fmt: skip
    return int(out.strip().splitlines()[-1])


# A TCP connect from inside a pod, with the pod's own python: "connected", or the error and exit 1.
_CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()\n"
    "except OSError as error:\n"
    "    print(type(error).__name__, error)\n"
    "    sys.exit(1)\n"
    "print('connected')\n"
)


def connects(kube: Kube, *, namespace: str, pod: str, host: str, port: int, timeout: float = 3.0) -> bool:
    """Whether `pod` (its first container) opens a TCP connection to host:port."""
    out = kube.kubectl(
        "exec", "--namespace", namespace, pod, "--", "python", "-c", _CONNECT, host, str(port), str(timeout),
        check=False, timeout=timeout + 60,
    )  # fmt: skip
    return out.strip().endswith("connected")


# ---------------------------------------------------------------------------------------------- journey


# Two more Agents from the example's image, with Memory, for the trust table's checks (a Tool Pod must not
# reach another Agent's Memory) and with resource limits the node's cgroups must show.
def policy_agent(name: str) -> dict[str, Any]:
    limits = {"aer": {"cpu": "500m", "memory": "256Mi"}, "tool": {"memory": "320Mi"}}
    return {
        "apiVersion": "agentengine.io/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {
            "image": f"example/echo-agent:{VERSION}",
            "entrypoint": "echo_agent.agent:app",
            "connectors": ["echo"],
            "components": {
                "aer": {"resources": {"limits": limits["aer"]}},
                "tool": {
                    "resources": {"limits": limits["tool"]},
                    "secretEnv": [
                        {
                            "name": "ECHO_SIGNING_KEY",
                            "secretKeyRef": {"name": "echo-credentials", "key": "signing-key"},
                        }
                    ],
                },
                "memory": {"enabled": True, "resources": {"limits": {"memory": "768Mi"}}},
            },
        },
    }


POLICY_AGENTS = ("mem-a", "mem-b")

# The model for the example Agent: tests/providers/llm_peer.py (OpenAI's chat-completions wire format) run
# in a pod from the runtime image, with a script of what the model does: two tools that just run (one local
# to the AER, one a connector call in the Tool Pod), one that needs a reviewer's approval, then the answer.
LLM_PEER = "llm-peer"
LLM_KEY = "journey-llm-key"  # the peer's key, not a real one
INVOKE_TEXT = "Count the words in 'hello brave new world', echo 'hello', and sign that sentence."
LLM_SCRIPT = [
    {
        "tool_calls": [
            {"name": "word_count", "args": {"text": "hello brave new world"}},
            {"name": "echo_getEcho", "args": {"word": "hello"}},
        ]
    },
    {"tool_calls": [{"name": "sign_message", "args": {"message": "hello brave new world"}}]},
    {"text": "4 words; the provider echoed 'hello'; the sentence is signed."},
]
_PEER_MAIN = (
    "import json, sys, uvicorn\n"
    "sys.path.insert(0, '/peer')\n"
    "import llm_peer\n"
    "app = llm_peer.LLMPeerApp(api_key=open('/key/key').read().strip())\n"
    "app.push(*json.load(open('/peer/script.json')))\n"
    "uvicorn.run(app, host='0.0.0.0', port=8080, log_level='warning')\n"
)


@dataclass
class Platform:
    """What differs between the tiers that run the journey."""

    name: str
    kube: Kube
    # Put the project's images (references) where the cluster's nodes run them.
    load_images: Callable[[Sequence[str]], None]
    # Annotations for the journey's namespaces (the real node: the selector and toleration for it).
    namespace_annotations: Mapping[str, str] = field(default_factory=dict)
    # Checks only the node itself can make of a running pod (user, root filesystem, cgroup limits).
    pod_checks: Callable[[dict[str, Any]], None] | None = None
    # Starts NetworkPolicy enforcement; None when the cluster enforces from the start.
    enable_network_policies: Callable[[], None] | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        began = time.monotonic()
        yield
        self.timings[name] = round(time.monotonic() - began, 1)


def agents_reconciled(kube: Kube, *, namespace: str) -> int:
    """How many Agents the running operator pod converged since it started (its `agents_reconciled` probe,
    read from inside the pod: an Agent's Ready condition may still be the previous operator's)."""
    pod = running_pod(
        kube,
        namespace=namespace,
        selector="app.kubernetes.io/name=agent-engine,app.kubernetes.io/component=operator",
    )
    read = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8080/healthz').read().decode())"
    out = kube.kubectl("exec", "--namespace", namespace, pod["metadata"]["name"], "--", "python", "-c", read)
    return int(json.loads(out)["agents_reconciled"])


def check_operator_identity(kube: Kube, *, namespace: str) -> dict[str, Any]:
    """The operator runs as a pod with the chart's ServiceAccount and was never refused by the API."""
    deployment = kube.get_json("deployment", OPERATOR_DEPLOYMENT, "--namespace", namespace)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    pod = running_pod(
        kube,
        namespace=namespace,
        selector="app.kubernetes.io/name=agent-engine,app.kubernetes.io/component=operator",
    )
    assert pod["spec"]["serviceAccountName"] == account, (account, pod["spec"]["serviceAccountName"])
    labels = kube.get_json("serviceaccount", account, "--namespace", namespace)["metadata"]["labels"]
    assert labels.get("app.kubernetes.io/instance") == RELEASE, labels  # the chart's own account
    assert labels.get("app.kubernetes.io/managed-by") == "Helm", labels
    logs = kube.kubectl("logs", "--namespace", namespace, pod["metadata"]["name"])
    assert "forbidden" not in logs.lower(), logs[-3000:]
    return pod


def check_network_policies(kube: Kube, *, system_ns: str, app_ns: str) -> dict[str, bool]:
    """The trust table, enforced: an AER cannot reach a Tool Pod, a Tool Pod cannot reach another Agent's
    Memory; the paths the table allows still connect (the OE to a Tool Pod, a Tool Pod to its own Memory).
    The OE's own policy (the chart's): an AER reaches it, a Tool Pod does not, and it reaches no provider."""
    aer = running_pod(kube, namespace=app_ns, selector=component_selector(EXAMPLE_AGENT, "aer"))
    tool = running_pod(kube, namespace=app_ns, selector=component_selector(EXAMPLE_AGENT, "tool"))
    oe = running_pod(kube, namespace=system_ns, selector="app.kubernetes.io/component=oe")
    tool_a = running_pod(kube, namespace=app_ns, selector=component_selector("mem-a", "tool"))
    tool_b = running_pod(kube, namespace=app_ns, selector=component_selector("mem-b", "tool"))
    # Both Tool Pods are governed by one shared NetworkPolicy (its egress reaches any Memory server): what
    # keeps mem-b out of mem-a's Memory is mem-a Memory's own policy, admitting only mem-a's pods.
    governing = {pod["metadata"]["labels"].get("agentengine.io/network-policy") for pod in (tool_a, tool_b)}
    assert len(governing) == 1 and None not in governing, governing
    svc = f"{tool_service()}.{app_ns}.svc.cluster.local"
    memory_a = f"{component_name('mem-a', 'memory')}.{app_ns}.svc.cluster.local"
    memory_b = f"{component_name('mem-b', 'memory')}.{app_ns}.svc.cluster.local"
    oe_svc = f"{OE_DEPLOYMENT}.{system_ns}.svc.cluster.local"
    provider = f"echo-provider.{app_ns}.svc.cluster.local"
    seen = {
        "AER -> Tool Pod (Service)": connects(
            kube, namespace=app_ns, pod=aer["metadata"]["name"], host=svc, port=8002
        ),
        "AER -> Tool Pod (pod IP)": connects(
            kube, namespace=app_ns, pod=aer["metadata"]["name"], host=tool["status"]["podIP"], port=8002
        ),
        "mem-b Tool Pod -> mem-a Memory": connects(
            kube, namespace=app_ns, pod=tool_b["metadata"]["name"], host=memory_a, port=8081
        ),
        "OE -> Tool Pod": connects(
            kube, namespace=system_ns, pod=oe["metadata"]["name"], host=svc, port=8002
        ),
        "mem-a Tool Pod -> mem-a Memory": connects(
            kube, namespace=app_ns, pod=tool_a["metadata"]["name"], host=memory_a, port=8081
        ),
        "mem-b Tool Pod -> mem-b Memory": connects(
            kube, namespace=app_ns, pod=tool_b["metadata"]["name"], host=memory_b, port=8081
        ),
        "AER -> OE": connects(kube, namespace=app_ns, pod=aer["metadata"]["name"], host=oe_svc, port=8080),
        # The Tool Pod's egress allows its providers' port, 8080, anywhere: only the OE's ingress refuses it.
        "Tool Pod -> OE": connects(
            kube, namespace=app_ns, pod=tool["metadata"]["name"], host=oe_svc, port=8080
        ),
        # The provider has no policy of its own: only the OE's egress refuses it.
        "OE -> echo provider": connects(
            kube, namespace=system_ns, pod=oe["metadata"]["name"], host=provider, port=8080
        ),
    }
    allowed = ("OE -> Tool Pod", "mem-a Tool Pod -> mem-a", "mem-b Tool Pod -> mem-b", "AER -> OE")
    expected = {name: name.startswith(allowed) for name in seen}
    if seen != expected:  # a StepFailed: `eventually` retries while the controller catches up
        raise StepFailed(f"connections seen {seen}, the trust table says {expected}")
    return seen


def llm_peer_objects(script: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The scripted model as a Deployment and Service of the app namespace (its code from a ConfigMap);
    `script` defaults to the journey's turns."""
    from tests.install_flow_cli import CLI_LLM_SCRIPT  # here: that module imports this one

    turns = list(script) if script is not None else LLM_SCRIPT + CLI_LLM_SCRIPT
    labels = {"app.kubernetes.io/name": LLM_PEER}
    source = (REPO_ROOT / "tests" / "providers" / "llm_peer.py").read_text()
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": LLM_PEER},
            "data": {"llm_peer.py": source, "script.json": json.dumps(turns)},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm-key"},
            "stringData": {"key": LLM_KEY},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": LLM_PEER, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001},
                        "containers": [
                            {
                                "name": "peer",
                                "image": f"agent-engine/runtime:{VERSION}",
                                "imagePullPolicy": "IfNotPresent",
                                "command": ["python", "-c", _PEER_MAIN],
                                "ports": [{"name": "http", "containerPort": 8080}],
                                "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 2},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "peer", "mountPath": "/peer", "readOnly": True},
                                    {"name": "key", "mountPath": "/key", "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "peer", "configMap": {"name": LLM_PEER}},
                            {"name": "key", "secret": {"secretName": "llm-key"}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": LLM_PEER},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]},
        },
    ]


def use_llm_peer(kube: Kube, *, app_ns: str, script: Sequence[Mapping[str, Any]] | None = None) -> None:
    """Run the scripted model in `app_ns` and point the example Agent's model at it."""
    items = llm_peer_objects(script)
    kube.kubectl(
        "apply", "--namespace", app_ns, "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )  # fmt: skip
    rollout(kube, namespace=app_ns, deployment=LLM_PEER)
    llm = {
        "baseUrl": f"http://{LLM_PEER}.{app_ns}.svc.cluster.local:8080/v1",
        "model": "journey-model",
        "credentials": [{"name": "OPENAI_API_KEY", "secretKeyRef": {"name": "llm-key", "key": "key"}}],
    }
    kube.kubectl(
        "patch", "agent", EXAMPLE_AGENT, "--namespace", app_ns, "--type=merge",
        "-p", json.dumps({"spec": {"llm": llm}}),
    )  # fmt: skip
    wait_agent_generation_ready(kube, namespace=app_ns, agent=EXAMPLE_AGENT)


def wait_agent_generation_ready(kube: Kube, *, namespace: str, agent: str, timeout: float = 240.0) -> None:
    """Ready for the Agent's current spec, and its replaced pods gone: until then an old AER still takes
    executions (the Agent turns Ready as soon as the new pods are available; the old ones drain after)."""

    def ready() -> bool:
        doc = kube.get_json("agent", agent, "--namespace", namespace)
        status = doc.get("status") or {}
        generation = doc["metadata"]["generation"]
        condition = next((c for c in status.get("conditions", []) if c.get("type") == "Ready"), {})
        if condition.get("status") != "True" or condition.get("observedGeneration") != generation:
            return False
        listed = kube.get_json("pods", "--namespace", namespace, "-l", f"app.kubernetes.io/instance={agent}")
        replicas = sum(c.get("replicas", 0) for c in (status.get("components") or {}).values())
        return len(listed["items"]) == replicas and not any(
            p["metadata"].get("deletionTimestamp") for p in listed["items"]
        )

    eventually(f"Agent {namespace}/{agent} Ready at its generation, old pods gone", ready, timeout=timeout)


# The OE's client API takes the cluster's own identities (issue 28): people here are ServiceAccounts, each
# with a token minted for the OE's audience (`kubectl create token NAME --audience agent-engine`).
CLIENT_AUDIENCE = "agent-engine"
INVOKER = "journey-developer"  # `edit` in the Agent's namespace: the chart's invoker role aggregates into it
REVIEWER = "journey-reviewer"  # bound to the chart's reviewer ClusterRole, nothing else


def client_identity(
    kube: Kube,
    *,
    namespace: str,
    name: str,
    cluster_role: str,
    verb: str = "get",
    subresource: str = "executions",
) -> str:
    """A ServiceAccount bound by a RoleBinding in `namespace` to `cluster_role`, and a token of it for the
    OE's audience (an hour): what a person or a front end presents to the client API. Returns once the API
    server grants `verb agents/<subresource>` to it: the OE caches a denial for its TTL, so a first call made
    before the binding (or the aggregation into `edit`) took effect would fail for 10 s."""
    kube.kubectl("create", "serviceaccount", name, "--namespace", namespace)
    kube.kubectl(
        "create", "rolebinding", name, "--namespace", namespace, f"--clusterrole={cluster_role}",
        f"--serviceaccount={namespace}:{name}",
    )  # fmt: skip
    user = f"system:serviceaccount:{namespace}:{name}"
    eventually(
        f"{user} may {verb} agents/{subresource}",
        lambda: kube.kubectl(
            "auth", "can-i", verb, "agents.agentengine.io", f"--subresource={subresource}",
            f"--as={user}", "--namespace", namespace, check=False,
        ).strip() == "yes",
        timeout=60,
        interval=0.2,
    )  # fmt: skip
    return kube.kubectl(
        "create", "token", name, "--namespace", namespace, "--audience", CLIENT_AUDIENCE, "--duration=1h"
    ).strip()


def invoker_and_reviewer(kube: Kube, *, app_ns: str) -> tuple[str, str]:
    """Tokens of a developer (`edit` in `app_ns`: invokes) and a reviewer (the chart's reviewer role)."""
    invoker = client_identity(
        kube, namespace=app_ns, name=INVOKER, cluster_role="edit", verb="create", subresource="invoke"
    )
    reviewer = client_identity(
        kube, namespace=app_ns, name=REVIEWER, cluster_role=f"{RELEASE}-reviewer", verb="create",
        subresource="approve",
    )  # fmt: skip
    return invoker, reviewer


RESUME_PATH = "/api/v1/projects/{ns}/executions/{execution}/resume"
SETTLED = ("suspended", "completed", "failed", "cancelled")


def start_execution(client: httpx.Client, *, app_ns: str, agent: str = EXAMPLE_AGENT) -> str:
    started = client.post("/invoke", json={"agent": f"{app_ns}/{agent}", "input": {"text": INVOKE_TEXT}})
    assert started.status_code == 202, started.text
    return started.json()["execution_id"]


def settled_execution(client: httpx.Client, execution: str, *, timeout: float = 120) -> dict[str, Any]:
    """The execution's view once it is held or final."""

    def settled() -> dict[str, Any] | None:
        view = client.get(f"/execution/{execution}").json()
        return view if view["status"] in SETTLED else None

    return eventually(f"execution {execution} settled", settled, timeout=timeout, interval=0.5)


def approve_and_finish(
    lead: httpx.Client, client: httpx.Client, *, app_ns: str, execution: str, notes: str
) -> dict[str, Any]:
    """Approve the held call as `lead`; the execution's view once it no longer runs."""
    resumed = lead.post(
        RESUME_PATH.format(ns=app_ns, execution=execution),
        json={"decision": "approved", "reviewer_notes": notes},
    )
    assert resumed.status_code == 202, resumed.text
    return eventually(
        f"execution {execution} finished",
        lambda: (v := client.get(f"/execution/{execution}").json())["status"] != "running" and v,
        timeout=120,
        interval=0.5,
    )


@contextlib.contextmanager
def oe_clients(kube: Kube, *, system_ns: str, tokens: Sequence[str]) -> Iterator[list[httpx.Client]]:
    """One client API client per token, through a port-forward to the OE's Service."""
    with port_forward(kube, namespace=system_ns, service=OE_DEPLOYMENT, remote=8080) as base:
        clients = [
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            for token in tokens
        ]
        try:
            yield clients
        finally:
            for client in clients:
                client.close()


def invoke_through_oe(
    kube: Kube, *, system_ns: str, app_ns: str, agent: str = EXAMPLE_AGENT
) -> dict[str, Any]:
    """POST /invoke to the OE as a developer (`edit` in the namespace), approve the held call as a reviewer
    (the chart's reviewer ClusterRole), read the answer and the audit: every model and tool call of the turn
    went AER -> OE -> Tool Pod (or back to the AER), and the execution names who invoked and who approved."""
    invoker, reviewer = invoker_and_reviewer(kube, app_ns=app_ns)
    with oe_clients(kube, system_ns=system_ns, tokens=(invoker, reviewer)) as (client, lead):
        # No token, or one the API server does not accept: 401, nothing started.
        body = {"agent": f"{app_ns}/{agent}", "input": {"text": INVOKE_TEXT}}
        with httpx.Client(base_url=client.base_url, timeout=30) as anonymous:
            for headers in ({}, {"Authorization": "Bearer not-a-token"}):
                refused = anonymous.post("/invoke", json=body, headers=headers)
                assert refused.status_code == 401, refused.text
                assert refused.headers.get("www-authenticate", "").startswith("Bearer"), refused.headers
        execution = start_execution(client, app_ns=app_ns, agent=agent)
        view = settled_execution(client, execution)
        assert view["status"] == "suspended", view
        assert view["suspension"]["tool"] == "sign_message", view["suspension"]
        invoked_by = view["invoked_by"]["username"]
        assert invoked_by == f"system:serviceaccount:{app_ns}:{INVOKER}", view["invoked_by"]
        # `edit` invokes but does not approve: the 403 names the ClusterRole that would grant it.
        denied = client.post(
            RESUME_PATH.format(ns=app_ns, execution=execution), json={"decision": "approved"}
        )
        assert denied.status_code == 403, denied.text
        assert denied.json()["details"]["grantedBy"]["clusterRole"] == "agent-engine-reviewer", denied.text
        view = approve_and_finish(
            lead, client, app_ns=app_ns, execution=execution, notes="approved by the install journey"
        )
        assert view["status"] == "completed", view
        decided_by = view["reviews"][0]["decided_by"]["username"]
        assert decided_by == f"system:serviceaccount:{app_ns}:{REVIEWER}", view["reviews"]
        audit = client.get(f"/execution/{execution}/audit").json()["records"]
    tools = {record.get("tool") for record in audit}
    assert {"word_count", "echo_getEcho", "sign_message"} <= tools, audit
    return {
        "execution": execution,
        "answer": view["result"]["answer"],
        "audit_records": len(audit),
        "invoked_by": invoked_by,
        "decided_by": decided_by,
    }


def run_journey(platform: Platform, *, system_ns: str = "agent-engine", app_ns: str = "agent-apps") -> dict:
    """Install, run, call, police, upgrade, delete, uninstall: the journey every tier runs, step by step."""
    kube = platform.kube
    report: dict[str, Any] = {}
    with platform.step("load images"):
        platform.load_images(project_image_refs())
    with platform.step("helm install, operator and OE Ready"):
        for namespace in (system_ns, app_ns):
            create_namespace(kube, namespace, annotations=platform.namespace_annotations)
        helm_install(kube, namespace=system_ns)
        eventually("CRDs established", lambda: crds_established(kube))
        rollout(kube, namespace=system_ns, deployment=OPERATOR_DEPLOYMENT)
        rollout(kube, namespace=system_ns, deployment=OE_DEPLOYMENT)
        report["operator_pod"] = check_operator_identity(kube, namespace=system_ns)["metadata"]["name"]
    with platform.step("example Agent Ready"):
        apply_example(kube, namespace=app_ns, files=("provider.yaml", "echo-agent.yaml"))
        agent = wait_agent_ready(kube, namespace=app_ns, timeout=300)
        assert agent["status"]["bundle"]["toolCount"] >= 2, agent["status"]
    with platform.step("tool call through the Tool Pod Service"):
        call_tool_through_service(kube, namespace=app_ns, system_ns=system_ns, word="journey")
    with platform.step("the AER's own token refused by its Tool Pod"):
        # Issue 27: the chart's OE signing key makes every Agent's runtimes accept only the OE's statements.
        # Run before any NetworkPolicy is enforced (a tier that enforces from the start says so in the
        # report): the connection opens, and the token itself is what the Tool Pod refuses.
        report["network_policies_enforced_at_aer_check"] = platform.enable_network_policies is None
        report["aer_token_at_tool_pod"] = aer_token_at_tool_pod(kube, namespace=app_ns)
        assert report["aer_token_at_tool_pod"] in (401, 403), report["aer_token_at_tool_pod"]
    with platform.step("two Agents with Memory Ready"):
        for name in POLICY_AGENTS:
            kube.kubectl("apply", "--namespace", app_ns, "-f", "-", stdin=json.dumps(policy_agent(name)))
        for name in POLICY_AGENTS:
            wait_agent_ready(kube, namespace=app_ns, agent=name, timeout=300)
    if platform.pod_checks is not None:
        with platform.step("pod checks on the node"):
            checked = []
            for namespace in (system_ns, app_ns):
                for pod in pods(kube, namespace=namespace):
                    platform.pod_checks(pod)
                    checked.append(pod["metadata"]["name"])
            report["pods_checked"] = checked
    with platform.step("NetworkPolicies enforced"):
        if platform.enable_network_policies is not None:
            # Nothing enforces yet: the same connections all open (the refusals below are the policies').
            aer = running_pod(kube, namespace=app_ns, selector=component_selector(EXAMPLE_AGENT, "aer"))
            report["aer_to_tool_before_enforcement"] = connects(
                kube, namespace=app_ns, pod=aer["metadata"]["name"],
                host=f"{tool_service()}.{app_ns}.svc.cluster.local", port=8002,
            )  # fmt: skip
            assert report["aer_to_tool_before_enforcement"], (
                "without a policy controller the AER reaches the Tool Pod"
            )
            platform.enable_network_policies()
        report["connections"] = eventually(
            "the trust table enforced",
            lambda: check_network_policies(kube, system_ns=system_ns, app_ns=app_ns),
            timeout=60,
            interval=2,
        )
        # Still Ready (kubelet probes pass), and a tool call still goes through.
        for name in (EXAMPLE_AGENT, *POLICY_AGENTS):
            wait_agent_ready(kube, namespace=app_ns, agent=name)
        call_tool_through_service(kube, namespace=app_ns, system_ns=system_ns, word="policed")
    with platform.step("example Agent invoked through the OE, approved, answered"):
        use_llm_peer(kube, app_ns=app_ns)
        report["invocation"] = invoke_through_oe(kube, system_ns=system_ns, app_ns=app_ns)
    with platform.step("agentengine through the kubeconfig: follow, approve --edit, reject, cancel"):
        import tempfile

        from tests.install_flow_cli import cli_through_kubeconfig

        with tempfile.TemporaryDirectory(prefix="journey-cli-") as work:
            report["cli"] = cli_through_kubeconfig(
                kube, system_ns=system_ns, app_ns=app_ns, work=Path(work),
                earlier_execution=report["invocation"]["execution"],
            )  # fmt: skip
    with platform.step("helm upgrade"):
        helm_upgrade(kube, namespace=system_ns, values={"operator.logFormat": "text"})
        rollout(kube, namespace=system_ns, deployment=OPERATOR_DEPLOYMENT)
        wait_agent_ready(kube, namespace=app_ns)
        # The new operator pod took the Agents over (their Ready conditions may still be the old pod's): what
        # they share is collected only by an operator that knows who uses it.
        agents = 1 + len(POLICY_AGENTS)
        eventually(
            f"the upgraded operator converged all {agents} Agents",
            lambda: agents_reconciled(kube, namespace=system_ns) >= agents,
            timeout=120,
        )
    with platform.step("Agents deleted, children gone"):
        for name in (EXAMPLE_AGENT, *POLICY_AGENTS):
            kube.kubectl("delete", "agent", name, "--namespace", app_ns, "--wait=true")
        for name in (EXAMPLE_AGENT, *POLICY_AGENTS):
            eventually(
                f"{name}'s objects and pods removed",
                lambda name=name: not owned_objects(kube, namespace=app_ns, agent=name),
                timeout=180,
            )
        # No Agent is left to use what they shared: the operator removes it once their pods are gone.
        eventually(
            "the namespace's shared objects removed",
            lambda: no_shared_objects(kube, namespace=app_ns),
            timeout=180,
        )
    with platform.step("helm uninstall"):
        helm_uninstall(kube, namespace=system_ns)
        eventually(
            "the release's objects gone",
            lambda: release_leftovers(kube, namespace=system_ns) == [],
            timeout=60,
        )
        # The OE's store outlives an uninstall by design (helm.sh/resource-policy: keep); drop it here.
        kube.kubectl("delete", "pvc", "--namespace", system_ns, "--all", "--wait=false")
    report["timings"] = dict(platform.timings)
    print(f"[{platform.name}] journey timings (s): {json.dumps(platform.timings)}", file=sys.stderr)
    return report


# The previous release, the one the upgrade test starts from: its version and the last commit of main that
# carried it (the commit before the version became 0.2.0).
PREVIOUS_VERSION = "0.1.0"
PREVIOUS_COMMIT = "9e28f0ee3a1a6e96a6114045d4c02e78783ba416"
# Each execution of the upgrade asks the model once for the sensitive call (held), then the peer's brain
# answers from the tool's result: the turns cannot be taken out of order by executions running at once.
UPGRADE_EXECUTIONS = 4
SIGN_TURN = {"tool_calls": [{"name": "sign_message", "args": {"message": "across an upgrade"}}]}


def previous_image_refs() -> list[str]:
    return [f"{repository}:{PREVIOUS_VERSION}" for repository in PROJECT_IMAGES]


@contextlib.contextmanager
def previous_release_tree(work: Path) -> Iterator[Path]:
    """The previous release's source as a git worktree of this repository (removed afterwards)."""
    tree = work / f"agent-engine-{PREVIOUS_VERSION}"
    git = ["git", "-C", str(REPO_ROOT)]
    added = subprocess.run(
        [*git, "worktree", "add", "--detach", str(tree), PREVIOUS_COMMIT], capture_output=True, text=True
    )
    if added.returncode != 0:
        raise StepFailed(
            f"git worktree add {PREVIOUS_COMMIT} (release {PREVIOUS_VERSION}) failed: "
            f"{added.stderr.strip()}; the upgrade test needs main's history (not a shallow clone)"
        )
    try:
        assert f'version = "{PREVIOUS_VERSION}"' in (tree / "pyproject.toml").read_text(), PREVIOUS_COMMIT
        yield tree
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(tree)], capture_output=True, check=False)


def release_images(kube: Kube, *, namespace: str) -> dict[str, str]:
    """The image of the operator's and the OE's Deployments."""
    return {
        name: kube.get_json("deployment", name, "--namespace", namespace)["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
        for name in (OPERATOR_DEPLOYMENT, OE_DEPLOYMENT)
    }


def release_rolled_out(kube: Kube, *, namespace: str, version: str) -> dict[str, str]:
    for deployment in (OPERATOR_DEPLOYMENT, OE_DEPLOYMENT):
        rollout(kube, namespace=namespace, deployment=deployment)
    images = release_images(kube, namespace=namespace)
    assert all(image.endswith(f":{version}") for image in images.values()), (version, images)
    return images


def run_upgrade(
    platform: Platform,
    *,
    previous: Path,
    system_ns: str = "agent-engine-upgrade",
    app_ns: str = "agent-apps-upgrade",
) -> dict[str, Any]:
    """The previous release installed with executions held and one in flight, `helm upgrade` to this
    release (CRDs first), the held ones approved on it, `helm rollback`, the last one approved on the
    previous release again. The previous release's images are on the nodes already (`previous_image_refs`)."""
    kube = platform.kube
    report: dict[str, Any] = {"from": PREVIOUS_VERSION, "to": VERSION, "commit": PREVIOUS_COMMIT}
    old_examples = previous / "examples" / "kubernetes"
    with platform.step("upgrade: the previous release installed"):
        platform.load_images(project_image_refs())
        # helm installs a chart's CRDs only where there are none: an earlier release's uninstall keeps them.
        kube.kubectl("delete", "crd", *OUR_KINDS, "--ignore-not-found", "--wait=true", timeout=120)
        for namespace in (system_ns, app_ns):
            create_namespace(kube, namespace, annotations=platform.namespace_annotations)
        kube.helm(
            "install", RELEASE, str(previous / "charts" / "agent-engine"), "--namespace", system_ns,
            "--wait=false",
        )  # fmt: skip
        eventually("CRDs established", lambda: crds_established(kube))
        report["before"] = release_rolled_out(kube, namespace=system_ns, version=PREVIOUS_VERSION)
    with platform.step("upgrade: executions held on the previous release"):
        apply_manifests = ("apply", "--namespace", app_ns, "-f", str(old_examples / "provider.yaml"))
        kube.kubectl(*apply_manifests, "-f", str(old_examples / "echo-agent.yaml"))
        wait_agent_ready(kube, namespace=app_ns, timeout=300)
        # The last execution's model call is slow: it is still out when the OE's pod is replaced.
        script = [SIGN_TURN] * (UPGRADE_EXECUTIONS - 1) + [{**SIGN_TURN, "delay_s": 30}]
        use_llm_peer(kube, app_ns=app_ns, script=script)
        tokens = invoker_and_reviewer(kube, app_ns=app_ns)
        held = []
        with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, _):
            for _ in range(UPGRADE_EXECUTIONS - 1):
                execution = start_execution(client, app_ns=app_ns)
                view = settled_execution(client, execution)
                assert view["status"] == "suspended" and view["suspension"]["tool"] == "sign_message", view
                held.append(execution)
            # Not waited for: it runs while the release is replaced.
            in_flight = start_execution(client, app_ns=app_ns)
            report["in_flight_at_upgrade"] = client.get(f"/execution/{in_flight}").json()["status"]
    with platform.step("upgrade: helm upgrade to this release"):
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        helm_upgrade(kube, namespace=system_ns)
        report["after"] = release_rolled_out(kube, namespace=system_ns, version=VERSION)
        eventually(
            "the upgraded operator converged the Agent",
            lambda: agents_reconciled(kube, namespace=system_ns) >= 1,
            timeout=120,
        )
        # An Agent written against the previous release's schema still applies and reconciles.
        kube.kubectl(*apply_manifests, "-f", str(old_examples / "echo-agent.yaml"))
        wait_agent_generation_ready(kube, namespace=app_ns, agent=EXAMPLE_AGENT)
    with (
        platform.step("upgrade: held executions approved on this release"),
        oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, lead),
    ):
        for execution in held[:-1]:
            view = approve_and_finish(lead, client, app_ns=app_ns, execution=execution, notes="upgraded")
            assert view["status"] == "completed", view
        view = settled_execution(client, in_flight, timeout=180)
        report["in_flight_after_upgrade"] = view["status"]
        if view["status"] == "suspended":
            view = approve_and_finish(lead, client, app_ns=app_ns, execution=in_flight, notes="upgraded")
        # Completed, or failed with a reason: never lost, never still running.
        assert view["status"] == "completed" or (view["status"] == "failed" and view.get("error")), view
        report["in_flight"] = {"status": view["status"], "error": view.get("error")}
    with platform.step("upgrade: helm rollback to the previous release"):
        kube.helm("rollback", RELEASE, "1", "--namespace", system_ns)
        report["rolled_back"] = release_rolled_out(kube, namespace=system_ns, version=PREVIOUS_VERSION)
        wait_agent_ready(kube, namespace=app_ns)
        with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, lead):
            view = approve_and_finish(lead, client, app_ns=app_ns, execution=held[-1], notes="rolled back")
            assert view["status"] == "completed", view
            report["held_completed"] = len(held)
    with platform.step("upgrade: uninstalled"):
        kube.kubectl("delete", "agent", EXAMPLE_AGENT, "--namespace", app_ns, "--wait=true", timeout=180)
        helm_uninstall(kube, namespace=system_ns)
        kube.kubectl("delete", "pvc", "--namespace", system_ns, "--all", "--wait=false")
    report["timings"] = {k: v for k, v in platform.timings.items() if k.startswith("upgrade:")}
    return report
