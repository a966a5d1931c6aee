"""Whose is an object holding an Agent child's name (adoption.claim): ours, an orphan, foreign or taken."""

from __future__ import annotations

from typing import Any

from agent_operator.adoption import claim, name_taken_message
from agent_operator.render import AGENT_LABEL, MANAGED_BY

UID = "0d4c6a3e-uid-of-bot"


def _live(*, labels: dict[str, str] | None = None, owners: list[dict[str, Any]] | None = None) -> dict:
    meta: dict[str, Any] = {"name": "bot-aer", "labels": labels or {}}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"metadata": meta}


OURS = {"app.kubernetes.io/managed-by": MANAGED_BY, AGENT_LABEL: "bot"}


def test_owned_by_this_agent_is_ours() -> None:
    live = _live(labels=OURS, owners=[{"kind": "Agent", "name": "bot", "uid": UID, "controller": True}])
    assert claim(live, kind="Deployment", agent="bot", agent_uid=UID).verdict == "ours"


def test_an_earlier_agent_of_the_same_name_or_another_controller_has_taken_it() -> None:
    earlier = _live(labels=OURS, owners=[{"kind": "Agent", "name": "bot", "uid": "old", "controller": True}])
    verdict = claim(earlier, kind="Deployment", agent="bot", agent_uid=UID)
    assert verdict.verdict == "taken" and "an earlier Agent bot's" in verdict.holder
    other = _live(owners=[{"kind": "ReplicaSet", "name": "web-1", "uid": "x", "controller": True}])
    verdict = claim(other, kind="Deployment", agent="bot", agent_uid=UID)
    assert verdict.verdict == "taken" and verdict.holder == "Deployment bot-aer (owned by ReplicaSet web-1)"


def test_labelled_by_the_operator_for_this_agent_without_an_owner_is_an_orphan() -> None:
    assert claim(_live(labels=OURS), kind="Secret", agent="bot", agent_uid=UID).verdict == "orphan"
    # Labelled for another Agent: not this one's orphan.
    other = {**OURS, AGENT_LABEL: "other"}
    assert claim(_live(labels=other), kind="Secret", agent="bot", agent_uid=UID).verdict == "foreign"


def test_unlabelled_and_unowned_is_foreign_and_a_non_controller_owner_takes_it() -> None:
    assert claim(_live(), kind="Service", agent="bot", agent_uid=UID).verdict == "foreign"
    owned = _live(owners=[{"kind": "ConfigMap", "name": "team", "uid": "y"}])
    assert claim(owned, kind="Service", agent="bot", agent_uid=UID).verdict == "taken"


def test_the_message_names_every_holder_and_says_nothing_was_applied() -> None:
    message = name_taken_message(["Deployment bot-aer (owned by ReplicaSet web-1)", "Service bot-tool"])
    assert "Deployment bot-aer" in message and "Service bot-tool" in message
    assert "nothing of this Agent was applied" in message
