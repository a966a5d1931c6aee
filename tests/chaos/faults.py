"""Real pods under fire (issue 41): executions in flight and held on the real node while the OE's, the
AER's and the Tool Pod's pods are force-deleted, with the echo provider as the side-effect ledger.

Each round starts executions that each ask the model once for a sensitive `echo_createMessage` with a text
of its own (the scripted model's turns, then its brain), so every execution is held for a reviewer; a pod
is killed while they start, and another while their approvals run the side effects. Afterwards each
execution must be final or still held (held ones are approved), and no message may have been stored twice:
the provider counts every text it stored. The steps use tests/install_flow.py's, the journey's.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_operator.render import component_name
from tests.install_flow import (
    EXAMPLE_AGENT,
    EXAMPLES,
    OE_DEPLOYMENT,
    OPERATOR_DEPLOYMENT,
    RESUME_PATH,
    SETTLED,
    Kube,
    Platform,
    StepFailed,
    component_selector,
    crds_established,
    create_namespace,
    eventually,
    helm_install,
    helm_uninstall,
    invoker_and_reviewer,
    oe_clients,
    pods,
    port_forward,
    project_image_refs,
    rollout,
    use_llm_peer,
    wait_agent_ready,
)

FINAL = ("completed", "failed", "cancelled")
# The example Secret's provider token (examples/kubernetes/echo-agent.yaml), not a credential.
PROVIDER_TOKEN = "example-provider-token"


@dataclass
class ChaosReport:
    """What the tier prints: it fails when a side effect ran twice or an execution was lost."""

    runs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    started: int = 0
    completed: int = 0
    held: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    lost: int = 0
    # Distinct messages the provider stored: one per execution whose side effect ran.
    stored: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "faults": dict(self.faults),
            "executions": self.started,
            "completed": self.completed,
            "held": self.held,
            "failed": dict(self.failed),
            "duplicates": self.duplicates,
            "lost": self.lost,
            "messages_stored": self.stored,
            "seconds": round(self.seconds, 1),
        }


def pod_faults(kube: Kube, *, system_ns: str, app_ns: str) -> dict[str, Callable[[], None]]:
    """Fault kind -> what injects it and waits for the replacement pod to roll out."""
    targets = {
        "oe pod killed": (system_ns, "app.kubernetes.io/component=oe", OE_DEPLOYMENT),
        "aer pod killed": (
            app_ns,
            component_selector(EXAMPLE_AGENT, "aer"),
            component_name(EXAMPLE_AGENT, "aer"),
        ),
        "tool pod killed": (
            app_ns,
            component_selector(EXAMPLE_AGENT, "tool"),
            component_name(EXAMPLE_AGENT, "tool"),
        ),
    }

    def killer(namespace: str, selector: str, deployment: str) -> Callable[[], None]:
        def inject() -> None:
            kill_pod(kube, namespace=namespace, selector=selector)
            rollout(kube, namespace=namespace, deployment=deployment)

        return inject

    return {kind: killer(*target) for kind, target in targets.items()}


def kill_pod(kube: Kube, *, namespace: str, selector: str) -> str:
    """`kubectl delete pod --grace-period=0 --force` of the selector's running pod: no drain, no goodbye."""
    victim = pods(kube, namespace=namespace, selector=selector)[0]["metadata"]["name"]
    kube.kubectl(
        "delete", "pod", victim, "--namespace", namespace, "--grace-period=0", "--force", "--wait=false"
    )
    return victim


def _statuses(client: httpx.Client, executions: list[str]) -> dict[str, dict[str, Any]]:
    views = {}
    for execution in executions:
        response = client.get(f"/execution/{execution}")
        if response.status_code == 404:
            views[execution] = {"status": "lost"}
        else:
            response.raise_for_status()
            views[execution] = response.json()
    return views


def _settle_all(
    kube: Kube, *, system_ns: str, tokens: tuple[str, str], app_ns: str, executions: list[str], timeout: float
) -> dict[str, dict[str, Any]]:
    """Every execution's view once none runs (held ones approved as they appear); retried across a
    port-forward lost with the OE's pod."""
    deadline = time.monotonic() + timeout
    views: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        try:
            with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, lead):
                while time.monotonic() < deadline:
                    views = _statuses(client, executions)
                    for execution, view in views.items():
                        if view["status"] == "suspended":
                            lead.post(
                                RESUME_PATH.format(ns=app_ns, execution=execution),
                                json={"decision": "approved", "reviewer_notes": "chaos"},
                            )
                    if all(v["status"] in FINAL or v["status"] == "lost" for v in views.values()):
                        return views
                    time.sleep(1.0)
        except (httpx.HTTPError, StepFailed, AssertionError):
            time.sleep(2.0)  # the OE's pod went with the port-forward: forward to its successor
    return views


def _held_or_final(
    kube: Kube, *, system_ns: str, tokens: tuple[str, str], executions: list[str], timeout: float = 180
) -> dict[str, dict[str, Any]]:
    """Every execution's view once each is held or final (a running one waits), across a lost forward."""
    deadline = time.monotonic() + timeout
    views: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        try:
            with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, _):
                while time.monotonic() < deadline:
                    views = _statuses(client, executions)
                    if all(v["status"] in SETTLED or v["status"] == "lost" for v in views.values()):
                        return views
                    time.sleep(1.0)
        except (httpx.HTTPError, StepFailed, AssertionError):
            time.sleep(2.0)
    return views


def _forwards(kube: Kube, system_ns: str) -> bool:
    try:
        with port_forward(kube, namespace=system_ns, service=OE_DEPLOYMENT, remote=8080, timeout=20):
            return True
    except AssertionError as error:
        raise StepFailed(str(error)) from error


def message_counts(kube: Kube, *, app_ns: str) -> Counter[str]:
    with port_forward(kube, namespace=app_ns, service="echo-provider", remote=8080) as base:
        response = httpx.get(
            f"{base}/messages/counts", headers={"Authorization": f"Bearer {PROVIDER_TOKEN}"}, timeout=30
        )
        response.raise_for_status()
        return Counter(response.json())


def run_chaos(
    platform: Platform,
    *,
    rounds: int,
    executions_per_round: int,
    seed: int,
    restart_kubelet: Callable[[], None] | None = None,
    system_ns: str = "agent-engine-chaos",
    app_ns: str = "agent-apps-chaos",
) -> ChaosReport:
    kube = platform.kube
    rng = random.Random(seed)
    report = ChaosReport()
    began = time.monotonic()
    with platform.step("chaos: installed"):
        platform.load_images(project_image_refs())
        for namespace in (system_ns, app_ns):
            create_namespace(kube, namespace, annotations=platform.namespace_annotations)
        helm_install(kube, namespace=system_ns)
        eventually("CRDs established", lambda: crds_established(kube))
        for deployment in (OPERATOR_DEPLOYMENT, OE_DEPLOYMENT):
            rollout(kube, namespace=system_ns, deployment=deployment)
        kube.kubectl(
            "apply", "--namespace", app_ns, "-f", str(EXAMPLES / "provider.yaml"),
            "-f", str(EXAMPLES / "echo-agent.yaml"),
        )  # fmt: skip
        wait_agent_ready(kube, namespace=app_ns, timeout=300)
        # A round's executions all ask their first question before any is approved, then each asks its
        # second: so a round's turns are its createMessage calls, then its answers. A fault that makes the
        # model be asked again shifts the turns (an execution may then store a second, different message, or
        # none); the ledger's check stays exact: no text is ever stored twice.
        script = [
            turn
            for round_ in range(rounds)
            for turn in [
                *(
                    {
                        "tool_calls": [
                            {"name": "echo_createMessage", "args": {"text": f"chaos message {round_}.{i}"}}
                        ]
                    }
                    for i in range(executions_per_round)
                ),
                *({"text": "stored"} for _ in range(executions_per_round)),
            ]
        ]
        use_llm_peer(kube, app_ns=app_ns, script=script)
        tokens = invoker_and_reviewer(kube, app_ns=app_ns)
    faults = pod_faults(kube, system_ns=system_ns, app_ns=app_ns)
    if restart_kubelet is not None:

        def kubelet_fault() -> None:
            restart_kubelet()
            # The node is Ready before its kubelet serves port-forwards again (what the next steps use).
            eventually("a port-forward through the restarted kubelet", lambda: _forwards(kube, system_ns))

        faults["kubelet restarted"] = kubelet_fault
    kinds = list(faults)
    everything: list[str] = []
    for round_ in range(rounds):
        with platform.step(f"chaos: round {round_}"):
            report.runs += 1
            started: list[str] = []
            # The first fault lands while the executions start (model calls, AER runs); each is held at
            # its createMessage once its model call is answered.
            first, second = kinds[round_ % len(kinds)], rng.choice(kinds)
            with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, _):
                for index in range(executions_per_round):
                    body = {
                        "agent": f"{app_ns}/{EXAMPLE_AGENT}",
                        "input": {"text": f"round {round_} execution {index}: store a message"},
                    }
                    answer = client.post("/invoke", json=body)
                    assert answer.status_code == 202, answer.text
                    started.append(answer.json()["execution_id"])
            time.sleep(rng.uniform(0.0, 1.5))
            faults[first]()
            report.faults[first] += 1
            # The second lands while the approved calls store their messages.
            views = _held_or_final(kube, system_ns=system_ns, tokens=tokens, executions=started)
            with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (_, lead):
                for execution, view in views.items():
                    if view["status"] == "suspended":
                        lead.post(
                            RESUME_PATH.format(ns=app_ns, execution=execution),
                            json={"decision": "approved", "reviewer_notes": "chaos"},
                        )
            time.sleep(rng.uniform(0.0, 1.0))
            faults[second]()
            report.faults[second] += 1
            everything += started
    with platform.step("chaos: every execution settled"):
        views = _settle_all(
            kube, system_ns=system_ns, tokens=tokens, app_ns=app_ns, executions=everything, timeout=300
        )
        report.started = len(everything)
        for view in views.values():
            status = view["status"]
            if status == "completed":
                report.completed += 1
            elif status == "suspended":
                report.held += 1
            elif status in ("failed", "cancelled"):
                report.failed[(view.get("error") or {}).get("category", status)] += 1
            else:
                report.lost += 1  # gone from the store, or still running after the deadline
        counts = message_counts(kube, app_ns=app_ns)
        report.duplicates = sum(n - 1 for n in counts.values() if n > 1)
        report.stored = len(counts)
    with platform.step("chaos: uninstalled"):
        kube.kubectl("delete", "agent", EXAMPLE_AGENT, "--namespace", app_ns, "--wait=true", timeout=180)
        helm_uninstall(kube, namespace=system_ns)
        kube.kubectl("delete", "pvc", "--namespace", system_ns, "--all", "--wait=false")
    report.seconds = time.monotonic() - began
    print(json.dumps({"chaos": report.as_dict(), "timings": platform.timings}, indent=1))
    return report
