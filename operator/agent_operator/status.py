"""Agent and Connector status, pure: conditions from the reconcile outcome and the Deployments' real state.

A condition keeps its lastTransitionTime while its status stays the same, so an unchanged world gives an
identical status (and the apply layer writes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_operator.bundle import BUNDLE
from agent_operator.inputs import InputProblem
from agent_operator.reconcile import ConnectorSummary, Plan
from agent_operator.render import APPLIED_HASH, COMPONENTS

READY = "Ready"
REGISTERED = "Registered"
COMPONENT_CONDITIONS = {"aer": "AERReady", "tool": "ToolReady", "memory": "MemoryReady"}
CONDITION_ORDER = (READY, BUNDLE, "AERReady", "ToolReady", "MemoryReady", REGISTERED)


@dataclass(frozen=True)
class DeploymentState:
    """The parts of a live Deployment that decide whether its component is ready."""

    replicas: int
    updated_replicas: int
    ready_replicas: int
    available_replicas: int
    generation: int
    observed_generation: int
    applied_hash: str
    # Pods of any ReplicaSet not yet told to stop, and pods told to stop that still run (status.replicas and
    # status.terminatingReplicas, the latter beta and on by default since 1.35): a replaced AER still
    # answers the connections kept open to it, with its old environment, until it is gone.
    current_pods: int = 0
    terminating_pods: int = 0

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DeploymentState:
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        return cls(
            replicas=int((body.get("spec") or {}).get("replicas", 1)),
            updated_replicas=int(status.get("updatedReplicas") or 0),
            ready_replicas=int(status.get("readyReplicas") or 0),
            available_replicas=int(status.get("availableReplicas") or 0),
            generation=int(meta.get("generation") or 0),
            observed_generation=int(status.get("observedGeneration") or 0),
            applied_hash=(meta.get("annotations") or {}).get(APPLIED_HASH, ""),
            current_pods=int(status.get("replicas") or 0),
            terminating_pods=int(status.get("terminatingReplicas") or 0),
        )


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


def _component_condition(
    component: str, state: DeploymentState | None, desired_hash: str | None, *, enabled: bool
) -> Condition:
    kind = COMPONENT_CONDITIONS[component]
    if not enabled:
        return Condition(kind, "True", "Disabled", f"{component} is not enabled for this Agent")
    if state is None:
        return Condition(kind, "False", "DeploymentMissing", f"the {component} Deployment does not exist yet")
    if desired_hash is not None and state.applied_hash != desired_hash:
        return Condition(kind, "False", "Updating", f"the {component} Deployment is being updated")
    if state.replicas == 0:
        return Condition(kind, "True", "ScaledToZero", f"{component} runs no pods (replicas: 0)")
    if (
        state.observed_generation < state.generation
        or state.updated_replicas < state.replicas
        or state.available_replicas < state.replicas
    ):
        return Condition(
            kind,
            "False",
            "RolloutInProgress",
            f"{component}: {state.updated_replicas}/{state.replicas} pods updated, "
            f"{state.available_replicas} available",
        )
    replaced = max(state.current_pods - state.replicas, 0) + state.terminating_pods
    if replaced:
        return Condition(
            kind,
            "False",
            "RolloutInProgress",
            f"{component}: {state.available_replicas}/{state.replicas} pods available, "
            f"{replaced} replaced pod{'s' if replaced != 1 else ''} still running",
        )
    return Condition(
        kind, "True", "Available", f"{component}: {state.available_replicas}/{state.replicas} pods available"
    )


def merge_conditions(
    previous: Sequence[Mapping[str, Any]], current: Sequence[Condition], *, generation: int, now: str
) -> list[dict[str, Any]]:
    """Kubernetes-style conditions; lastTransitionTime moves only when status changes."""
    before = {c.get("type"): c for c in previous}
    merged = []
    for cond in current:
        old = before.get(cond.type)
        changed = old is None or old.get("status") != cond.status
        merged.append(
            {
                "type": cond.type,
                "status": cond.status,
                "reason": cond.reason,
                "message": cond.message,
                "observedGeneration": generation,
                "lastTransitionTime": now if changed else old.get("lastTransitionTime", now),
            }
        )
    return merged


@dataclass(frozen=True)
class Outcome:
    """What one reconcile decided, reduced to what status needs (kept per Agent between events)."""

    problem: InputProblem | None = None
    deployment_hashes: Mapping[str, str] | None = None
    bundle: Mapping[str, Any] | None = None
    # The OE registration: None while not attempted, "" once published, else why it is not.
    registration: str | None = None

    @classmethod
    def from_plan(cls, plan: Plan) -> Outcome:
        hashes = {
            d.manifest["metadata"]["labels"]["agentengine.io/component"]: d.manifest["metadata"][
                "annotations"
            ][APPLIED_HASH]
            for d in plan.objects
            if d.manifest["kind"] == "Deployment"
        }
        bundle = {
            "configMaps": list(plan.bundle.config_map_names),
            "digest": plan.bundle.digest,
            "toolCount": plan.bundle.tool_count,
        }
        return cls(deployment_hashes=hashes, bundle=bundle)


def agent_status(
    *,
    generation: int,
    previous: Mapping[str, Any],
    outcome: Outcome,
    deployments: Mapping[str, DeploymentState | None],
    memory_enabled: bool,
    now: str,
) -> dict[str, Any]:
    """The whole status subresource for an Agent."""
    prev_conditions = list(previous.get("conditions") or [])
    prev_by_type = {c.get("type"): c for c in prev_conditions}
    problem = outcome.problem
    desired_hashes = outcome.deployment_hashes or {}
    bundle = outcome.bundle
    if bundle is not None and problem is None:
        bundle_cond = Condition(
            BUNDLE,
            "True",
            "BundleMaterialized",
            f"{bundle['toolCount']} tools in {len(bundle['configMaps'])} ConfigMap(s), "
            f"digest {bundle['digest'][:12]}",
        )
    elif problem is not None and problem.condition == BUNDLE:
        bundle_cond = Condition(BUNDLE, "False", problem.reason, problem.message)
    elif (old := prev_by_type.get(BUNDLE)) is not None:
        bundle_cond = Condition(BUNDLE, old["status"], old.get("reason", ""), old.get("message", ""))
    else:
        bundle_cond = Condition(
            BUNDLE, "Unknown", "NotEvaluated", "the spec was refused before the bundle was built"
        )

    components = [
        _component_condition(
            c,
            deployments.get(c),
            desired_hashes.get(c) if problem is None else None,
            enabled=(c != "memory" or memory_enabled),
        )
        for c in COMPONENTS
    ]
    if problem is not None:
        ready = Condition(READY, "False", problem.reason, problem.message)
    else:
        blocking = [c for c in (bundle_cond, *components) if c.status != "True"]
        ready = (
            Condition(READY, "False", blocking[0].reason, f"{blocking[0].type}: {blocking[0].message}")
            if blocking
            else Condition(
                READY, "True", "AllComponentsReady", "the bundle is current and every component is available"
            )
        )

    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": merge_conditions(
            prev_conditions,
            [ready, bundle_cond, *components, _registered_condition(outcome, prev_by_type.get(REGISTERED))],
            generation=generation,
            now=now,
        ),
        "components": {
            c: {
                "replicas": s.replicas,
                "readyReplicas": s.ready_replicas,
                "updatedReplicas": s.updated_replicas,
            }
            for c in COMPONENTS
            if (s := deployments.get(c)) is not None
        },
    }
    if bundle is not None and problem is None:
        status["bundle"] = dict(bundle)
    elif previous.get("bundle"):
        status["bundle"] = previous["bundle"]
    return status


def _registered_condition(outcome: Outcome, old: Mapping[str, Any] | None) -> Condition:
    """Whether the OE knows the Agent, i.e. whether it can take executions (`kubectl get agents`)."""
    if outcome.registration == "":
        return Condition(REGISTERED, "True", "Published", "the Orchestration Engine can run this Agent")
    if outcome.registration is not None:
        return Condition(REGISTERED, "False", "NotPublished", outcome.registration)
    if old is not None:
        return Condition(REGISTERED, old["status"], old.get("reason", ""), old.get("message", ""))
    return Condition(REGISTERED, "Unknown", "NotEvaluated", "the spec was refused before registration")


def connector_status(
    *,
    generation: int,
    previous: Mapping[str, Any],
    summary: ConnectorSummary | None,
    problem: InputProblem | None,
    now: str,
) -> dict[str, Any]:
    if summary is not None:
        cond = Condition(READY, "True", "Compiled", f"{summary.tool_count} tools")
        extra: dict[str, Any] = {"toolCount": summary.tool_count, "digest": summary.digest, "message": ""}
    else:
        assert problem is not None
        cond = Condition(READY, "False", problem.reason, problem.message)
        extra = {"toolCount": 0, "digest": "", "message": problem.message}
    return {
        "observedGeneration": generation,
        "conditions": merge_conditions(
            previous.get("conditions") or [], [cond], generation=generation, now=now
        ),
        **extra,
    }


def warning_event(previous: Mapping[str, Any], problem: InputProblem | None) -> tuple[str, str] | None:
    """(reason, message) for an Event when bad input is new or says something new; else None."""
    if problem is None:
        return None
    old = next((c for c in previous.get("conditions") or [] if c.get("type") == READY), {})
    if (old.get("status"), old.get("reason"), old.get("message")) == (
        "False",
        problem.reason,
        problem.message,
    ):
        return None
    return (problem.reason, problem.message)


ROLLOUT_REASONS = frozenset({"DeploymentMissing", "Updating", "RolloutInProgress"})


def rollout_progress_only(previous: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether `current` differs from `previous` only in how far a rollout got: the Agent was and stays not
    Ready for a rollout, the same generation, and every condition but the components' says the same; or a
    new Agent (no status yet) is rolling out for the first time."""
    if not previous.get("conditions"):
        ready = next((c for c in current.get("conditions") or [] if c.get("type") == READY), None)
        return ready is not None and ready["status"] == "False" and ready["reason"] in ROLLOUT_REASONS
    if previous.get("observedGeneration") != current.get("observedGeneration"):
        return False
    before = {c.get("type"): c for c in previous.get("conditions") or []}
    after = {c.get("type"): c for c in current.get("conditions") or []}
    for kind in (READY, BUNDLE, REGISTERED):
        old, new = before.get(kind), after.get(kind)
        if old is None or new is None or (old["status"], old["reason"]) != (new["status"], new["reason"]):
            return False
    return after[READY]["status"] == "False" and after[READY]["reason"] in ROLLOUT_REASONS


def status_changed(previous: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """True when a write is due; keys the operator does not own are ignored."""
    return any(previous.get(key) != value for key, value in current.items())
