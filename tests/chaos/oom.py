"""The chaos tier's "container OOM-killed" fault: a tool that allocates past its Tool Pod's memory limit.

The chaos Agent (tests/chaos/images/agent, image test/chaos-agent) has one tool, `allocate`, and runs
exactly the calls its input lists. Its Tool Pod's limit is `TOOL_MEMORY_LIMIT` (spec.components.tool.
resources); one execution asks `allocate` for `OVER_MIB` between two small calls while another of the same
Agent stores a message through the echo Connector (held, approved) in the same Tool Pod. The kernel's cgroup
OOM killer ends the process that allocates: on this node's cgroup v1 (and on v2 without memory.oom.group)
the tool's worker, not the container; with memory.oom.group the container (status OOMKilled, restarted).
Evidence read from the node itself: the container cgroup's `oom_kill` count on the host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.install_flow import Kube, component_selector, pods

AGENT = "chaos-agent"
TOOL_MEMORY_LIMIT = "384Mi"
OVER_MIB = 1024
SMALL_MIB = 16
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
CGROUP_UNIFIED = Path("/sys/fs/cgroup")


def agent_manifest(*, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "agentengine.io/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": AGENT},
        "spec": {
            "image": image,
            "entrypoint": "chaos_agent.agent:app",
            "connectors": ["echo"],
            "components": {
                "tool": {
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "192Mi"},
                        "limits": {"cpu": "1", "memory": TOOL_MEMORY_LIMIT},
                    }
                }
            },
        },
    }


def over_the_limit_calls() -> list[list[Any]]:
    return [
        ["allocate", {"mebibytes": SMALL_MIB}],
        ["allocate", {"mebibytes": OVER_MIB}],  # past the limit: the kernel ends the process holding it
        ["allocate", {"mebibytes": SMALL_MIB}],  # answered again afterwards
    ]


@dataclass
class ToolPodState:
    pod: str
    container_id: str
    restarts: int
    last_reason: str | None
    oom_kills: int | None


def tool_pod_state(kube: Kube, *, namespace: str) -> ToolPodState:
    pod = pods(kube, namespace=namespace, selector=component_selector(AGENT, "tool"))[0]
    status = next(iter(pod["status"].get("containerStatuses") or []), {})
    container_id = str(status.get("containerID", "")).rpartition("://")[2]
    last = (status.get("lastState") or {}).get("terminated") or {}
    return ToolPodState(
        pod=pod["metadata"]["name"],
        container_id=container_id,
        restarts=int(status.get("restartCount", 0)),
        last_reason=last.get("reason"),
        oom_kills=container_oom_kills(container_id),
    )


def container_oom_kills(container_id: str) -> int | None:
    """The container cgroup's OOM kill count, from the host's cgroupfs (the real node is this machine)."""
    if not container_id:
        return None
    for root, name in ((CGROUP_MEMORY, "memory.oom_control"), (CGROUP_UNIFIED, "memory.events")):
        for directory in root.glob(f"agent-engine-node-*/**/*{container_id}*"):
            counter = directory / name
            if counter.is_file():
                for line in counter.read_text().splitlines():
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
    return None


@dataclass
class OomEvidence:
    """What each OOM fault showed: who the kernel killed, and what the execution that asked was told."""

    worker_killed: int = 0  # the Tool Pod lived on (same container, no restart)
    container_oom_killed: int = 0  # the container went, status OOMKilled
    categories: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "worker_killed": self.worker_killed,
            "container_oom_killed": self.container_oom_killed,
            "categories": self.categories,
            "problems": self.problems,
        }


def judge(
    evidence: OomEvidence, *, before: ToolPodState, after: ToolPodState, result: dict[str, Any] | None
) -> None:
    """Record what one OOM fault did; a problem when the kernel did not do it or the call was not told."""
    results = (result or {}).get("results") or []
    over = results[1] if len(results) == 3 else {}
    category = over.get("error") if isinstance(over, dict) else None
    evidence.categories.append(str(category))
    if after.container_id == before.container_id and after.restarts == before.restarts:
        evidence.worker_killed += 1
        if before.oom_kills is None or after.oom_kills is None or after.oom_kills <= before.oom_kills:
            evidence.problems.append(f"no OOM kill counted in {before.pod}'s cgroup: {before} -> {after}")
    elif after.last_reason == "OOMKilled":
        evidence.container_oom_killed += 1
    else:
        evidence.problems.append(f"{before.pod} restarted, not OOMKilled: {after}")
    if evidence.worker_killed and category != "out_of_memory":
        evidence.problems.append(f"the over-the-limit call was told {over!r}, not out_of_memory")
    if len(results) == 3 and results[2] != {"allocated_mib": SMALL_MIB}:
        evidence.problems.append(f"the call after the OOM kill answered {results[2]!r}")


def wait_counted(kube: Kube, *, namespace: str, before: ToolPodState, timeout: float = 30) -> ToolPodState:
    """The Tool Pod's state once the kernel's count or the container's status shows the kill."""
    deadline = time.monotonic() + timeout
    state = tool_pod_state(kube, namespace=namespace)
    while time.monotonic() < deadline:
        if state.restarts != before.restarts or (state.oom_kills or 0) > (before.oom_kills or 0):
            return state
        time.sleep(1.0)
        state = tool_pod_state(kube, namespace=namespace)
    return state
