"""The LangGraph.js example on a cluster (issue 40): the chart installed, examples/langgraphjs-agent's Agent
(spec.runtime node, its image FROM agent-engine/runtime-node) Ready with real pods, invoked through the OE
as a developer, its sensitive `issue_refund` held, approved by a reviewer and run exactly once against a
refund provider that counts each POST; then the Agent deleted and the chart uninstalled.

The model is tests/providers/llm_peer.py scripted for the turn, the refund provider
tests/providers/ledger_provider.py, both as pods of the app namespace running the Python runtime image with
their source from a ConfigMap (as install_flow's llm peer does).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import yaml

from tests.install_flow import (
    LLM_KEY,
    OE_DEPLOYMENT,
    OPERATOR_DEPLOYMENT,
    REPO_ROOT,
    RESUME_PATH,
    VERSION,
    Kube,
    Platform,
    approve_and_finish,
    crds_established,
    create_namespace,
    eventually,
    helm_install,
    helm_uninstall,
    invoker_and_reviewer,
    llm_peer_objects,
    oe_clients,
    owned_objects,
    pods,
    port_forward,
    project_image_refs,
    release_leftovers,
    rollout,
    settled_execution,
    wait_agent_ready,
)

EXAMPLE_DIR = REPO_ROOT / "examples" / "langgraphjs-agent"
AGENT = "refund-desk"
PROVIDER = "refund-provider"
NODE_IMAGES = [f"agent-engine/runtime-node:{VERSION}", f"example/langgraphjs-agent:{VERSION}"]
NODE_COMMAND = ["node", "/opt/agent-engine/runner/launcher.js"]
REFUND_SCRIPT = [
    {"tool_calls": [{"name": "lookup_order", "args": {"order": "B200"}}]},
    {"tool_calls": [{"name": "issue_refund", "args": {"order": "B200", "amount": 7.5}}]},
    {"text": "Refunded 7.5 EUR for B200."},
]
TASK = {"messages": [{"role": "user", "content": "B200 never arrived, refund it"}]}
PROVIDER_TOKEN = "refund-provider-token-in-cluster"  # the Tool Pod's REFUND_TOKEN; not a real credential

# The ledger provider plus two routes for the test: /healthz (port_forward's probe) and GET /effects.
_PROVIDER_MAIN = (
    "import json, sys, uvicorn\n"
    "sys.path.insert(0, '/provider')\n"
    "import ledger_provider\n"
    "ledger = ledger_provider.LedgerApp()\n"
    "async def app(scope, receive, send):\n"
    "    read = scope['type'] == 'http' and scope['method'] == 'GET'\n"
    "    if read and scope['path'] in ('/healthz', '/effects'):\n"
    "        effects = [vars(e) for e in ledger.effects]\n"
    "        await ledger_provider._json(send, 200, {'effects': effects})\n"
    "        return\n"
    "    await ledger(scope, receive, send)\n"
    "uvicorn.run(app, host='0.0.0.0', port=8080, log_level='warning', lifespan='on')\n"
)


def provider_objects() -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": PROVIDER}
    source = (REPO_ROOT / "tests" / "providers" / "ledger_provider.py").read_text()
    container = {
        "name": "provider",
        "image": f"agent-engine/runtime:{VERSION}",
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", _PROVIDER_MAIN],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 2},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "provider", "mountPath": "/provider", "readOnly": True}],
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": PROVIDER},
            "data": {"ledger_provider.py": source},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": PROVIDER, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001},
                        "containers": [container],
                        "volumes": [{"name": "provider", "configMap": {"name": PROVIDER}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": PROVIDER},
            "spec": {"selector": labels, "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]},
        },
    ]


def example_objects(*, app_ns: str) -> list[dict[str, Any]]:
    """examples/langgraphjs-agent/kubernetes.yaml as a user applies it, with the peer as its model and the
    journey's provider token."""
    docs = [d for d in yaml.safe_load_all((EXAMPLE_DIR / "kubernetes.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "Secret":
            doc["stringData"] = {"openai-api-key": LLM_KEY, "refund-token": PROVIDER_TOKEN}
        if doc["kind"] == "Agent":
            doc["spec"]["llm"]["baseUrl"] = f"http://llm-peer.{app_ns}.svc.cluster.local:8080/v1"
            doc["spec"]["llm"]["model"] = "journey-model"
    return docs


def _apply(kube: Kube, *, namespace: str, items: list[dict[str, Any]]) -> None:
    kube.kubectl(
        "apply", "--namespace", namespace, "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )  # fmt: skip


def _effects(kube: Kube, *, namespace: str) -> list[dict[str, Any]]:
    with port_forward(kube, namespace=namespace, service=PROVIDER, remote=8080) as base:
        return httpx.get(f"{base}/effects", timeout=10).json()["effects"]


def run_langgraphjs_journey(
    platform: Platform, *, system_ns: str = "agent-engine-ts", app_ns: str = "agent-apps-ts"
) -> dict[str, Any]:
    kube = platform.kube
    report: dict[str, Any] = {}
    with platform.step("load images"):
        platform.load_images([*project_image_refs(), *NODE_IMAGES])
    with platform.step("helm install, operator and OE Ready"):
        for namespace in (system_ns, app_ns):
            create_namespace(kube, namespace, annotations=platform.namespace_annotations)
        helm_install(kube, namespace=system_ns)
        eventually("CRDs established", lambda: crds_established(kube))
        rollout(kube, namespace=system_ns, deployment=OPERATOR_DEPLOYMENT)
        rollout(kube, namespace=system_ns, deployment=OE_DEPLOYMENT)
    with platform.step("model, refund provider and the LangGraph.js Agent Ready"):
        _apply(kube, namespace=app_ns, items=[*llm_peer_objects(REFUND_SCRIPT), *provider_objects()])
        rollout(kube, namespace=app_ns, deployment="llm-peer")
        rollout(kube, namespace=app_ns, deployment=PROVIDER)
        _apply(kube, namespace=app_ns, items=example_objects(app_ns=app_ns))
        agent = wait_agent_ready(kube, namespace=app_ns, agent=AGENT, timeout=300)
        assert agent["spec"]["runtime"] == "node", agent["spec"]
    agent_pods = pods(kube, namespace=app_ns, selector=f"app.kubernetes.io/instance={AGENT}")
    for pod in agent_pods:
        (container,) = pod["spec"]["containers"]
        assert container["command"] == NODE_COMMAND, container["command"]
        assert container["image"] == f"example/langgraphjs-agent:{VERSION}", container["image"]
    report["agent_pods"] = sorted(p["metadata"]["name"] for p in agent_pods)
    if platform.pod_checks is not None:
        with platform.step("pod checks on the node"):
            for pod in agent_pods:
                platform.pod_checks(pod)
    with platform.step("invoked through the OE, the refund held, approved, run once"):
        invoker, reviewer = invoker_and_reviewer(kube, app_ns=app_ns)
        with oe_clients(kube, system_ns=system_ns, tokens=(invoker, reviewer)) as (client, lead):
            started = client.post("/invoke", json={"agent": f"{app_ns}/{AGENT}", "input": TASK})
            assert started.status_code == 202, started.text
            execution = started.json()["execution_id"]
            view = settled_execution(client, execution, timeout=180)
            assert view["status"] == "suspended", view
            assert view["suspension"]["tool"] == "issue_refund", view["suspension"]
            assert view["suspension"]["args"] == {"order": "B200", "amount": 7.5}, view["suspension"]
            assert _effects(kube, namespace=app_ns) == []  # nothing reached the provider before approval
            # The developer may invoke but not approve.
            denied = client.post(
                RESUME_PATH.format(ns=app_ns, execution=execution), json={"decision": "approved"}
            )
            assert denied.status_code == 403, denied.text
            view = approve_and_finish(
                lead, client, app_ns=app_ns, execution=execution, notes="refund approved on the real node"
            )
            assert view["status"] == "completed", view
            audit = client.get(f"/execution/{execution}/audit").json()["records"]
        messages = view["result"]["messages"]
        assert messages[-1]["content"] == "Refunded 7.5 EUR for B200.", messages
        effects = _effects(kube, namespace=app_ns)
        assert [(e["action"], e["order"], e["key"]) for e in effects] == [("refund", "B200", "refund-B200")]
        tools = [r.get("tool") for r in audit if r.get("kind") == "tool" and r.get("decision") == "allow"]
        report.update(
            execution=execution,
            refund_posts=len(effects),
            audit_records=len(audit),
            allowed_tool_steps=tools,
            reviewed_by=view["reviews"][0]["decided_by"]["username"],
        )
    with platform.step("Agent deleted, helm uninstall"):
        kube.kubectl("delete", "agent", AGENT, "--namespace", app_ns, "--wait=true")
        eventually(
            f"{AGENT}'s objects and pods removed",
            lambda: not owned_objects(kube, namespace=app_ns, agent=AGENT),
            timeout=180,
        )
        helm_uninstall(kube, namespace=system_ns)
        eventually(
            "the release's objects gone",
            lambda: release_leftovers(kube, namespace=system_ns) == [],
            timeout=60,
        )
        kube.kubectl("delete", "pvc", "--namespace", system_ns, "--all", "--wait=false")
        kube.kubectl("delete", "namespace", app_ns, system_ns, "--wait=false")
    report["timings"] = dict(platform.timings)
    return report
