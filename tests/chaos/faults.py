"""Real pods under fire (issue 41): executions in flight and held on the real node while the OE's, the
AER's and the Tool Pod's pods are force-deleted, a tool allocates past its Tool Pod's memory limit
(tests/chaos/oom.py) and the OE's PostgreSQL store is stopped for a while (tests/chaos/store.py), with the
echo provider as the side-effect ledger.

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
from pathlib import Path
from typing import Any

import httpx

from agent_operator.render import component_name
from tests.chaos import oom, store
from tests.install_flow import (
    EXAMPLE_AGENT,
    EXAMPLES,
    OE_DEPLOYMENT,
    OPERATOR_DEPLOYMENT,
    RESUME_PATH,
    SETTLED,
    VERSION,
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
    wait_agent_generation_ready,
    wait_agent_ready,
)

FINAL = ("completed", "failed", "cancelled")
# The example Secret's provider token (examples/kubernetes/echo-agent.yaml), not a credential.
PROVIDER_TOKEN = "example-provider-token"
CHAOS_IMAGES = (f"test/chaos-agent:{VERSION}", f"test/chaos-postgres:{VERSION}")


@dataclass
class ChaosReport:
    """What the tier prints: it fails when a side effect ran twice or an execution was lost."""

    runs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    # Seconds each kind took, injected until its effect was over (what a kind adds to the run).
    fault_seconds: Counter[str] = field(default_factory=Counter)
    started: int = 0
    completed: int = 0
    held: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    lost: int = 0
    # Distinct messages the provider stored: one per execution whose side effect ran.
    stored: int = 0
    seconds: float = 0.0
    oom: oom.OomEvidence = field(default_factory=oom.OomEvidence)
    # The OE's answers while its store was away, "METHOD status [retry-after]": 503s, never a 500.
    store_away: Counter[str] = field(default_factory=Counter)

    @property
    def server_errors(self) -> int:
        """Answers while the store was away that were a 5xx other than a 503 with Retry-After."""
        return sum(
            n for answer, n in self.store_away.items()
            if answer.split()[1].startswith("5") and answer.split()[1:] != ["503", "retry-after"]
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "faults": dict(self.faults),
            "fault_seconds": {kind: round(seconds, 1) for kind, seconds in self.fault_seconds.items()},
            "executions": self.started,
            "completed": self.completed,
            "held": self.held,
            "failed": dict(self.failed),
            "duplicates": self.duplicates,
            "lost": self.lost,
            "messages_stored": self.stored,
            "oom": self.oom.as_dict(),
            "store_away_answers": dict(self.store_away),
            "server_errors": self.server_errors,
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


def _invoke(client: httpx.Client, *, agent: str, app_ns: str, task: dict[str, Any]) -> str:
    answer = client.post("/invoke", json={"agent": f"{app_ns}/{agent}", "input": task})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["execution_id"])


@dataclass
class _Campaign:
    """What the fault injectors share: the cluster, the identities, the report, the round's executions."""

    kube: Kube
    system_ns: str
    app_ns: str
    tokens: tuple[str, str]
    report: ChaosReport
    started: list[str] = field(default_factory=list)  # this round's
    extra: list[str] = field(default_factory=list)  # executions the faults started themselves

    def oom_fault(self) -> None:
        """A tool over its Tool Pod's memory limit while another execution of that Tool Pod stores a
        message (held, approved): the first is told out_of_memory, the second stores once."""
        before = oom.tool_pod_state(self.kube, namespace=self.app_ns)
        text = f"chaos oom message {self.report.faults['tool over its memory limit']}"
        with oe_clients(self.kube, system_ns=self.system_ns, tokens=self.tokens) as (client, _):
            store_one = {"calls": [["echo_createMessage", {"text": text}]]}
            too_much = {"calls": oom.over_the_limit_calls()}
            over = _invoke(client, agent=oom.AGENT, app_ns=self.app_ns, task=too_much)
            other = _invoke(client, agent=oom.AGENT, app_ns=self.app_ns, task=store_one)
        views = _settle_all(
            self.kube, system_ns=self.system_ns, tokens=self.tokens, app_ns=self.app_ns,
            executions=[over, other], timeout=240,
        )  # fmt: skip
        after = oom.wait_counted(self.kube, namespace=self.app_ns, before=before)
        oom.judge(self.report.oom, before=before, after=after, result=views.get(over, {}).get("result"))
        self.extra += [over, other]

    def store_fault(self) -> None:
        """PostgreSQL stopped for store.OUTAGE_S while the clients keep asking, then started again."""
        store.stop(self.kube, namespace=self.system_ns)
        try:
            with oe_clients(self.kube, system_ns=self.system_ns, tokens=self.tokens) as (client, _):
                task = {"text": "while the store is away: store a message"}
                answers, started = store.probe_while_away(
                    client, executions=self.started or self.extra, seconds=store.OUTAGE_S,
                    invoke_body={"agent": f"{self.app_ns}/{EXAMPLE_AGENT}", "input": task},
                )  # fmt: skip
            self.report.store_away.update(answers)
            self.extra += started
        finally:
            store.start(self.kube, namespace=self.system_ns)
        # The OE answers from its store again (it reconnects on its own).
        eventually(
            "the OE serving from its store again",
            lambda: _store_back(self.kube, self.system_ns, self.tokens, (self.started or self.extra)[0]),
            timeout=120,
        )


def _store_back(kube: Kube, system_ns: str, tokens: tuple[str, str], execution: str) -> bool:
    try:
        with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, _):
            return client.get(f"/execution/{execution}").status_code == 200
    except (httpx.HTTPError, AssertionError):
        return False


def _inject(faults: dict[str, Callable[[], None]], kind: str, report: ChaosReport) -> None:
    began = time.monotonic()
    faults[kind]()
    report.faults[kind] += 1
    report.fault_seconds[kind] += time.monotonic() - began


def schedule(kinds: list[str], *, rounds: int, rng: random.Random) -> list[tuple[str, str]]:
    """Each round's (first, second) faults: every kind once in the first rounds (so a short run meets
    them all), then at random."""
    cycle = [kinds[i % len(kinds)] for i in range(2 * ((len(kinds) + 1) // 2))]
    pairs = [(cycle[i], cycle[i + 1]) for i in range(0, len(cycle), 2)]
    return [pairs[r] if r < len(pairs) else (rng.choice(kinds), rng.choice(kinds)) for r in range(rounds)]


def run_chaos(
    platform: Platform,
    *,
    rounds: int,
    executions_per_round: int,
    seed: int,
    restart_kubelet: Callable[[], None] | None = None,
    store_dir: Path | None = None,
    oom_fault: bool = True,
    system_ns: str = "agent-engine-chaos",
    app_ns: str = "agent-apps-chaos",
) -> ChaosReport:
    """The campaign. `store_dir` (a directory of the real node) puts the OE on a PostgreSQL kept there and
    adds the store fault; `oom_fault` adds the chaos Agent and its over-the-limit tool."""
    kube = platform.kube
    rng = random.Random(seed)
    report = ChaosReport()
    began = time.monotonic()
    with platform.step("chaos: installed"):
        platform.load_images([*project_image_refs(), *CHAOS_IMAGES])
        for namespace in (system_ns, app_ns):
            create_namespace(kube, namespace, annotations=platform.namespace_annotations)
        values: dict[str, str] = {}
        if store_dir is not None:
            pg_began = time.monotonic()
            manifest = store.objects(
                image=CHAOS_IMAGES[1], namespace=system_ns, data_dir=store_dir, password=store.new_password()
            )
            kube.kubectl(
                "apply", "--namespace", system_ns, "-f", "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifest}),
            )  # fmt: skip
            rollout(kube, namespace=system_ns, deployment=store.NAME)
            values = store.helm_values()
            platform.timings["chaos: PostgreSQL up"] = round(time.monotonic() - pg_began, 1)
        helm_install(kube, namespace=system_ns, values=values)
        eventually("CRDs established", lambda: crds_established(kube))
        for deployment in (OPERATOR_DEPLOYMENT, OE_DEPLOYMENT):
            rollout(kube, namespace=system_ns, deployment=deployment)
        kube.kubectl(
            "apply", "--namespace", app_ns, "-f", str(EXAMPLES / "provider.yaml"),
            "-f", str(EXAMPLES / "echo-agent.yaml"),
        )  # fmt: skip
        if oom_fault:
            kube.kubectl(
                "apply", "--namespace", app_ns, "-f", "-",
                stdin=json.dumps(oom.agent_manifest(image=CHAOS_IMAGES[0])),
            )  # fmt: skip
        wait_agent_ready(kube, namespace=app_ns, timeout=300)
        # A round's executions all ask their first question before any is approved, then each asks its
        # second: so a round's turns are its createMessage calls, then its answers. A fault that makes the
        # model be asked again shifts the turns (an execution may then store a second, different message, or
        # none); the ledger's check stays exact: no text is ever stored twice. The chaos Agent asks no model.
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
        if oom_fault:
            agent_began = time.monotonic()
            wait_agent_generation_ready(kube, namespace=app_ns, agent=oom.AGENT, timeout=300)
            waited = round(time.monotonic() - agent_began, 1)
            platform.timings["chaos: chaos Agent ready after the echo one"] = waited
        tokens = invoker_and_reviewer(kube, app_ns=app_ns)
    campaign = _Campaign(kube=kube, system_ns=system_ns, app_ns=app_ns, tokens=tokens, report=report)
    faults = pod_faults(kube, system_ns=system_ns, app_ns=app_ns)
    if restart_kubelet is not None:

        def kubelet_fault() -> None:
            restart_kubelet()
            # The node is Ready before its kubelet serves port-forwards again (what the next steps use).
            eventually("a port-forward through the restarted kubelet", lambda: _forwards(kube, system_ns))

        faults["kubelet restarted"] = kubelet_fault
    if oom_fault:
        faults["tool over its memory limit"] = campaign.oom_fault
    if store_dir is not None:
        faults["oe store stopped"] = campaign.store_fault
    everything: list[str] = []
    for round_, (first, second) in enumerate(schedule(list(faults), rounds=rounds, rng=rng)):
        with platform.step(f"chaos: round {round_}"):
            report.runs += 1
            campaign.started = started = []
            # The first fault lands while the executions start (model calls, AER runs); each is held at
            # its createMessage once its model call is answered.
            with oe_clients(kube, system_ns=system_ns, tokens=tokens) as (client, _):
                for index in range(executions_per_round):
                    task = {"text": f"round {round_} execution {index}: store a message"}
                    started.append(_invoke(client, agent=EXAMPLE_AGENT, app_ns=app_ns, task=task))
            time.sleep(rng.uniform(0.0, 1.5))
            _inject(faults, first, report)
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
            _inject(faults, second, report)
            everything += started
    everything += campaign.extra
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
        for agent in (EXAMPLE_AGENT, *((oom.AGENT,) if oom_fault else ())):
            kube.kubectl("delete", "agent", agent, "--namespace", app_ns, "--wait=true", timeout=180)
        helm_uninstall(kube, namespace=system_ns)
        kube.kubectl("delete", "pvc", "--namespace", system_ns, "--all", "--wait=false")
        if store_dir is not None:
            kube.kubectl("delete", "deployment", store.NAME, "--namespace", system_ns, "--wait=false")
    report.seconds = time.monotonic() - began
    print(json.dumps({"chaos": report.as_dict(), "timings": platform.timings}, indent=1))
    return report
