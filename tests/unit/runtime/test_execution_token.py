"""The OE's signed statement (agent_runtime.execution_token): issue, verify, refuse, rotate. Pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.execution_token import (
    StatementError,
    StatementSigner,
    StatementVerifier,
    generate_private_key_pem,
    public_key_pem,
)
from agent_runtime.memory.scope import ScopeRefused, check_operation, scoped
from agent_runtime.memory.wire import ListBody
from agent_runtime.token_file import RotatingToken


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _pair(clock: Clock) -> tuple[StatementSigner, StatementVerifier, str]:
    pem = generate_private_key_pem()
    signer = StatementSigner(RotatingToken(pem, what="OE signing key"), clock=clock)
    verifier = StatementVerifier(RotatingToken(public_key_pem(pem), what="OE public key"), clock=clock)
    return signer, verifier, pem


def _issue(signer: StatementSigner, **extra: object) -> str:
    fields: dict[str, object] = {
        "audience": "tool",
        "agent": "team-a/loop",
        "workspace": "team-a.loop",
        "execution_id": "ex-1",
        **extra,
    }
    statement = signer.issue(**fields)  # type: ignore[arg-type]
    assert statement is not None
    return statement


def test_a_statement_verifies_for_its_audience_and_agent_only() -> None:
    clock = Clock()
    signer, verifier, _ = _pair(clock)
    statement = _issue(signer, user_id="alice", org_id="acme")
    claims = verifier.verify(statement, audience="tool", workspace="team-a.loop")
    assert (claims.execution_id, claims.user_id, claims.org_id) == ("ex-1", "alice", "acme")
    for audience, workspace, reason in (
        ("aer", "team-a.loop", "wrong_audience"),
        ("memory", "team-a.loop", "wrong_audience"),
        ("tool", "team-b.other", "wrong_workspace"),
    ):
        with pytest.raises(StatementError) as refused:
            verifier.verify(statement, audience=audience, workspace=workspace)  # type: ignore[arg-type]
        assert (refused.value.reason, refused.value.status) == (reason, 403)


def test_expired_forged_and_edited_statements_are_refused() -> None:
    clock = Clock()
    signer, verifier, _ = _pair(clock)
    other, _, _ = _pair(clock)
    statement = _issue(signer)
    with pytest.raises(StatementError, match="does not know") as unknown:
        verifier.verify(_issue(other), audience="tool", workspace="team-a.loop")
    assert unknown.value.status == 401
    head, kid, _payload, signature = statement.split(".")
    forged_payload = _issue(other, execution_id="ex-2").split(".")[2]
    with pytest.raises(StatementError) as edited:
        verifier.verify(".".join((head, kid, forged_payload, signature)), audience="tool", workspace=None)
    assert edited.value.reason == "bad_signature"
    for garbage in ("aes1.", "aes1.a.b.c", "aes1." + kid + ".!!.!!"):
        with pytest.raises(StatementError):
            verifier.verify(garbage, audience="tool", workspace=None)
    verifier.verify(statement, audience="tool", workspace=None)  # cached now
    clock.now += 61
    with pytest.raises(StatementError) as expired:
        verifier.verify(statement, audience="tool", workspace=None)
    assert expired.value.reason == "expired"


def test_the_signer_reuses_a_statement_until_half_its_life_is_gone() -> None:
    clock = Clock()
    signer, _, _ = _pair(clock)
    first = _issue(signer)
    clock.now += 29
    assert _issue(signer) == first
    clock.now += 2
    assert _issue(signer) != first
    assert _issue(signer, execution_id="ex-2") != _issue(signer)


def test_a_rotated_key_is_accepted_with_the_previous_one_for_the_grace(tmp_path: Path) -> None:
    clock = Clock()
    old, new = generate_private_key_pem(), generate_private_key_pem()
    public_file = tmp_path / "public-key.pem"
    public_file.write_text(public_key_pem(old))
    verifier = StatementVerifier(
        RotatingToken(public_key_pem(old), path=public_file, grace_s=600, check_interval_s=0), clock=clock
    )
    signer_old = StatementSigner(RotatingToken(old), clock=clock)
    signer_new = StatementSigner(RotatingToken(new), clock=clock)
    before = _issue(signer_old)
    # The OE signs with the new key before this runtime's file changed: refused (the OE sends again).
    with pytest.raises(StatementError) as early:
        verifier.verify(_issue(signer_new), audience="tool", workspace=None)
    assert early.value.status == 401
    public_file.write_text(public_key_pem(new))
    assert verifier.verify(_issue(signer_new), audience="tool", workspace=None).aud == "tool"
    assert verifier.verify(before, audience="tool", workspace=None).aud == "tool"  # previous, in grace


def test_memory_scope_is_the_statements_and_export_is_read_only() -> None:
    body = ListBody.model_validate({"namespace": "prefs"})
    assert scoped(body, org_id="acme", user_id="alice").user_id == "alice"
    same = ListBody.model_validate({"namespace": "prefs", "user_id": "alice"})
    assert scoped(same, org_id="acme", user_id="alice").org_id == "acme"
    for other in ({"user_id": "bob"}, {"org_id": "globex"}):
        with pytest.raises(ScopeRefused) as refused:
            scoped(ListBody.model_validate({"namespace": "prefs", **other}), org_id="acme", user_id="alice")
        assert "bob" not in refused.value.detail and refused.value.reason == "scope_not_granted"
    check_operation("list", purpose="export")
    with pytest.raises(ScopeRefused):
        check_operation("write", purpose="export")
    with pytest.raises(ScopeRefused):
        check_operation("list", purpose="control")


def test_the_caches_hold_the_statements_alive_not_every_call_made() -> None:
    """A runtime verifying a statement per execution, 20 a second for 5 minutes (issue 41's soak grew the
    Tool Pod ~1.4 KB a call): expired statements leave the caches, which stay under their limit."""
    from agent_runtime.execution_token import _CACHE_LIMIT

    clock = Clock()
    signer, verifier, _ = _pair(clock)
    for index in range(6_000):
        clock.now += 0.05
        statement = _issue(signer, execution_id=f"ex-{index}")
        verifier.verify(statement, audience="tool", workspace="team-a.loop")
        # Alive: 60 s of statements at 20 a second (the signer's half life: 30 s of them).
        assert len(verifier._cache) <= min(_CACHE_LIMIT, 1201)
        assert len(signer._cache) <= min(_CACHE_LIMIT, 601)
    # A cached statement is still answered from the cache; an expired one is refused, not served from it.
    clock.now += 61
    with pytest.raises(StatementError) as refused:
        verifier.verify(statement, audience="tool", workspace="team-a.loop")
    assert refused.value.reason == "expired"
