"""Drift, pure: does a live object still hold what the operator rendered for it?

A hand edit (`kubectl set image`, `set env`, `scale`, a patched NetworkPolicy) shows up as a live value that
differs from the rendered one, a rendered field that is gone, a list of another length, or a field the
operator never renders (an added env var, `hostNetwork`, an init container). What the API server fills in
by itself (defaults, omitted zero values, normalized quantities) is not drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_operator.quantities import quantity as _quantity
from agent_operator.render import canonical_hash

# Fields the API server defaults when the rendering leaves them out: present on every live object.
SERVER_DEFAULTED = frozenset(
    {
        # Deployment, pod template, container, probes
        "progressDeadlineSeconds",
        "dnsPolicy",
        "restartPolicy",
        "serviceAccount",  # the deprecated alias of serviceAccountName, copied from it
        "schedulerName",
        "terminationGracePeriodSeconds",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "timeoutSeconds",
        "successThreshold",
        "scheme",
        # Service
        "clusterIP",
        "clusterIPs",
        "internalTrafficPolicy",
        "ipFamilies",
        "ipFamilyPolicy",
        "sessionAffinity",
    }
)
# Metadata maps others may add to (the Deployment controller's revision annotation, a team's labels).
_OPEN_MAPS = frozenset({"labels", "annotations"})
_SKIPPED_TOP = frozenset({"apiVersion", "kind", "status"})
_KEPT_META = ("labels", "annotations", "ownerReferences")


def projection(live: Mapping[str, Any]) -> dict[str, Any]:
    """What drift is judged on: everything but status, and of the metadata only labels, the operator's
    own annotations and ownerReferences (the rest is the API server's and controllers' bookkeeping)."""
    meta = live.get("metadata") or {}
    kept: dict[str, Any] = {}
    if meta.get("labels"):
        kept["labels"] = dict(meta["labels"])
    ours = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("agentengine.io/")}
    if ours:
        kept["annotations"] = ours
    if meta.get("ownerReferences"):
        kept["ownerReferences"] = list(meta["ownerReferences"])
    if meta.get("generation"):  # not judged (no rendering has it); lets generation_key work on a projection
        kept["generation"] = meta["generation"]
    out = {k: v for k, v in live.items() if k not in _SKIPPED_TOP and k != "metadata"}
    out["metadata"] = kept
    return out


def generation_key(live: Mapping[str, Any]) -> tuple[Any, ...]:
    """For a kind whose metadata.generation moves with every spec change (Deployments): the generation and
    the metadata drift is judged on. An equal key means nothing to check again, without hashing the spec
    (a rollout's status updates come by the dozen)."""
    meta = live.get("metadata") or {}
    ours = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("agentengine.io/")}
    owners = tuple(o.get("uid", "") for o in meta.get("ownerReferences") or [])
    return (
        meta.get("generation"),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted(ours.items())),
        owners,
    )


def fingerprint(live: Mapping[str, Any]) -> str:
    """A short hash of the projection: equal fingerprints, nothing to re-check (status churn is ignored)."""
    return canonical_hash(projection(live))[:32]


def drift(desired: Mapping[str, Any], live_view: Mapping[str, Any]) -> list[str]:
    """Paths where a live object's `projection` departs from `desired`; empty when it holds."""
    found: list[str] = []
    for key, want in desired.items():
        if key in _SKIPPED_TOP:
            continue
        if key == "metadata":
            have_meta = live_view.get("metadata") or {}
            for field in _KEPT_META:
                if field in want:
                    _compare(want[field], have_meta.get(field), f"metadata.{field}", found, open_map=True)
            continue
        _compare(want, live_view.get(key), key, found)
    for key, have in live_view.items():
        if key not in desired and key != "metadata" and not _empty(have):
            found.append(key)
    return found


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _compare(want: Any, have: Any, path: str, found: list[str], *, open_map: bool = False) -> None:
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            if not (_empty(have) and not any(not _empty(v) for v in want.values())):
                found.append(path)
            return
        for key, value in want.items():
            if key not in have:
                if not _empty(value):
                    found.append(f"{path}.{key}")
                continue
            _compare(value, have[key], f"{path}.{key}", found, open_map=key in _OPEN_MAPS)
        if not open_map:
            for key, value in have.items():
                if key not in want and key not in SERVER_DEFAULTED and not _empty(value):
                    found.append(f"{path}.{key}")
        return
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            if not (_empty(want) and _empty(have)):
                found.append(path)
            return
        for index, (w, h) in enumerate(zip(want, have, strict=True)):
            _compare(w, h, f"{path}[{index}]", found)
        return
    if want != have and not _same_quantity(want, have):
        found.append(path)


def _same_quantity(want: Any, have: Any) -> bool:
    """`1000m` and `1`, `1024Mi` and `1Gi`: the API server stores a quantity in its canonical form."""
    a, b = _quantity(want), _quantity(have)
    return a is not None and a == b
