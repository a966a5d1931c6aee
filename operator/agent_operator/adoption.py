"""Whose is an object that already holds the name of one of an Agent's children? (pure)

An Agent's child names are derived from the Agent's name (`bot-aer`, `bot-runtime-token`), so an object of
that name may be there before the operator writes it: its own child (ours), one it made for an earlier
Agent of that name and lost the owner of (`kubectl delete agent --cascade=orphan`: labelled by the
operator, no owner), or somebody else's. Labels prove nothing (anyone who may create the object may label
it), so an orphan is adopted only in a way that gives its author nothing: a workload is replaced whole by
the rendering, a token Secret gets a fresh token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agent_operator.render import AGENT_LABEL, MANAGED_BY

Verdict = Literal["ours", "orphan", "foreign", "taken"]


@dataclass(frozen=True)
class Claim:
    """What holds the name: `ours` (owned by this Agent), `orphan` (labelled by the operator for this Agent,
    no owner), `foreign` (no owner, not the operator's labels), `taken` (another owner controls it)."""

    verdict: Verdict
    holder: str  # for messages: "Deployment bot-aer (owned by ReplicaSet web-1)"; never a value


def controller_of(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)


def claim(live: Mapping[str, Any], *, kind: str, agent: str, agent_uid: str) -> Claim:
    """Judge the live object of a child's name for the Agent `agent` (uid `agent_uid`)."""
    meta = live.get("metadata") or {}
    name = meta.get("name", "")
    labels = meta.get("labels") or {}
    owner = controller_of(meta)
    if owner is not None:
        if owner.get("kind") == "Agent" and owner.get("uid") == agent_uid:
            return Claim("ours", f"{kind} {name}")
        if owner.get("kind") == "Agent" and owner.get("name") == agent:  # deleted and created again
            return Claim(
                "taken", f"{kind} {name} (an earlier Agent {agent}'s, until the garbage collector removes it)"
            )
        return Claim("taken", f"{kind} {name} (owned by {owner.get('kind', '?')} {owner.get('name', '?')})")
    ours = labels.get("app.kubernetes.io/managed-by") == MANAGED_BY and labels.get(AGENT_LABEL) == agent
    if ours:
        return Claim("orphan", f"{kind} {name}")
    others = [o for o in meta.get("ownerReferences") or [] if o.get("uid") != agent_uid]
    if others:
        first = others[0]
        return Claim("taken", f"{kind} {name} (owned by {first.get('kind', '?')} {first.get('name', '?')})")
    return Claim("foreign", f"{kind} {name} (not made by the operator)")


def name_taken_message(holders: list[str]) -> str:
    """The one condition message for children whose names other objects hold."""
    shown = "; ".join(holders)
    return (
        f"the name of this Agent's child is taken by an object the operator does not own: {shown}; nothing "
        "of this Agent was applied. Rename or delete that object, or give this Agent another name"
    )
