"""The OE's Registry through a runtime token rotation: the previous token counts for the grace period."""

from __future__ import annotations

from agent_runtime.oe.registration import AgentRegistration
from agent_runtime.oe.registry import Registry

OLD = "old-token-" + "a" * 30
NEW = "new-token-" + "b" * 30
OTHER = "other-token-" + "c" * 30


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _reg(token: str, agent: str = "team-a/bot") -> AgentRegistration:
    return AgentRegistration.model_validate(
        {"agent": agent, "token": token, "aerUrl": "http://127.0.0.1:1", "toolUrl": "http://127.0.0.1:2"}
    )


def test_the_previous_token_names_the_agent_until_its_grace_period_ends() -> None:
    clock = Clock()
    registry = Registry([_reg(OLD)], grace_s=30, clock=clock)
    registry.replace_all({"a": _reg(NEW)})
    for token in (OLD, NEW):
        found = registry.by_token(token)
        assert found is not None and found.agent == "team-a/bot" and found.token.get_secret_value() == NEW
    current = registry.get("team-a/bot")
    assert current is not None and current.tokens(now=clock.now) == (NEW, OLD)
    clock.now += 31
    assert registry.by_token(OLD) is None and registry.by_token(NEW) is not None
    assert current.tokens(now=clock.now) == (NEW,)


def test_a_rotation_back_and_a_removed_agent_leave_no_retired_token() -> None:
    clock = Clock()
    registry = Registry([_reg(OLD)], grace_s=30, clock=clock)
    registry.upsert(_reg(NEW))
    registry.upsert(_reg(OLD))  # rolled back: OLD is current again, NEW retired
    current = registry.get("team-a/bot")
    assert current is not None and current.tokens(now=clock.now) == (OLD, NEW)
    registry.remove("team-a/bot")
    assert registry.by_token(OLD) is None and registry.by_token(NEW) is None


def test_a_retired_token_never_names_another_agent() -> None:
    clock = Clock()
    registry = Registry([_reg(OLD), _reg(OTHER, "team-b/bot")], grace_s=30, clock=clock)
    registry.replace_all({"a": _reg(NEW), "b": _reg(OTHER, "team-b/bot")})
    other = registry.get("team-b/bot")
    assert other is not None and other.tokens() == (OTHER,)
    found = registry.by_token(OLD)
    assert found is not None and found.agent == "team-a/bot"


def test_an_unchanged_publish_keeps_the_grace_period_running() -> None:
    clock = Clock()
    registry = Registry([_reg(OLD)], grace_s=30, clock=clock)
    registry.replace_all({"a": _reg(NEW)})
    clock.now += 20
    registry.replace_all({"a": _reg(NEW)})  # a resync: same document
    assert registry.by_token(OLD) is not None
    clock.now += 11
    assert registry.by_token(OLD) is None
