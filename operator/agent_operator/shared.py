"""Objects the Agents of one namespace share, and when one may go (pure).

What is the same for many Agents is written once per namespace, not once per Agent: the ServiceAccounts
(no pod uses them for API access), the default-deny NetworkPolicy, each component's NetworkPolicy (named by
the digest of its rules, selected through a pod label carrying that digest) and the bundle ConfigMaps (named
by the digest of their index). Shared objects have no ownerReference, so the garbage collector never takes
them; the operator deletes one when no Agent's current rendering uses it and no ReplicaSet with pods still
refers to it (a rolling update mounts the previous bundle until its old pods are gone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PREFIX = "agent-engine"
SHARED_LABEL = "agentengine.io/shared"
# On each AER and Tool Pod: the digest of the NetworkPolicy that governs it.
POLICY_LABEL = "agentengine.io/network-policy"
DEFAULT_DENY = f"{PREFIX}-default-deny"

SharedKey = tuple[str, str]  # kind, name


def service_account_name(component: str) -> str:
    return f"{PREFIX}-{component}"


def policy_name(component: str, digest: str) -> str:
    return f"{PREFIX}-{component}-{digest}"


def held_by_workloads(replica_sets: Iterable[Mapping[str, Any]]) -> set[SharedKey]:
    """Shared objects that pods of these ReplicaSets (those with any replicas) still use."""
    held: set[SharedKey] = set()
    for rs in replica_sets:
        if not ((rs.get("spec") or {}).get("replicas") or (rs.get("status") or {}).get("replicas")):
            continue
        template = (rs.get("spec") or {}).get("template") or {}
        pod = template.get("spec") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        held.add(("NetworkPolicy", DEFAULT_DENY))
        if account := pod.get("serviceAccountName"):
            held.add(("ServiceAccount", account))
        if (digest := labels.get(POLICY_LABEL)) and (component := labels.get("agentengine.io/component")):
            held.add(("NetworkPolicy", policy_name(component, digest)))
        for volume in pod.get("volumes") or []:
            for source in (volume.get("projected") or {}).get("sources") or []:
                if "configMap" in source:
                    held.add(("ConfigMap", source["configMap"]["name"]))
    return held


def garbage(
    *, unused: Iterable[SharedKey], held: set[SharedKey], tampered: set[SharedKey] = frozenset()
) -> list[SharedKey]:
    """Of the shared objects no current rendering uses, those that may be deleted now: not held by running
    pods, or (a bundle ConfigMap) no longer holding what its name promises. Workloads' objects before
    NetworkPolicies, so protection goes last."""
    order = {"ConfigMap": 0, "ServiceAccount": 1, "NetworkPolicy": 2}
    out = [key for key in unused if key not in held or key in tampered]
    return sorted(out, key=lambda k: (order.get(k[0], 9), k[1]))
