"""Issue 27, findings 1 and 2 replayed as attacks with real processes (the launcher in each mode, loopback).

The attacker holds what the AER holds (tenant code, or a tool body a prompt talked into it): the Agent's
runtime token, the memory statement of its own run, and any statement it was sent. Nothing it holds may
run a tool or a model call the OE does not know, nor read another user's or another Agent's memory.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_runtime.execution_token import (
    PUBLIC_KEY_FILE_ENV,
    Claims,
    generate_private_key_pem,
    key_id,
    public_key_pem,
    sign,
)
from agent_runtime.sdk.context import RequestContext, run_scope
from agent_runtime.sdk.memory import MemoryClient, MemoryRequestError
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, RUNTIME_TOKEN, Platform
from tests.integration.memory.launched import TOKEN as MEMORY_TOKEN
from tests.integration.memory.launched import start_memory

WORKSPACE = AGENT.replace("/", ".")


def _calls(*pairs: tuple[str, dict[str, object]]) -> dict[str, object]:
    return {"mode": "calls", "calls": [list(pair) for pair in pairs], "quiet": False}


def _claims(audience: str, *, execution_id: str = "ex-1", ttl_s: float = 60, **extra: object) -> Claims:
    now = time.time()
    fields: dict[str, object] = {
        "aud": audience,
        "agent": AGENT,
        "workspace": WORKSPACE,
        "execution_id": execution_id,
        "iat": now,
        "exp": now + ttl_s,
        **extra,
    }
    return Claims.model_validate(fields)


def _bearer(credential: str) -> dict[str, str]:
    return {"authorization": f"Bearer {credential}"}


def _transfer(execution_id: str = "ex-1", step: int = 1) -> dict[str, object]:
    return {
        "tool": "transfer",
        "arguments": {"amount": 9, "to": "mallory"},
        "execution_id": execution_id,
        "step": step,
    }


def _llm(execution_id: str = "ex-1") -> dict[str, object]:
    return {
        "llm_id": "default",
        "messages": [{"role": "user", "content": "spend the key"}],
        "execution_id": execution_id,
        "step": 1,
    }


@pytest.mark.timeout(240)
def test_the_agents_token_opens_no_tool_pod_route_while_the_governed_path_works(
    platform: Platform, llm_peer
) -> None:
    tool = f"http://127.0.0.1:{platform.tool_port}"
    aer = f"http://127.0.0.1:{platform.aer_port}"
    with httpx.Client(timeout=30) as http:
        # Finding 1: with the AER's token, straight to the Tool Pod: refused, nothing ran, no model spend.
        for path, body in (("/execute", _transfer()), ("/invoke_llm", _llm())):
            refused = http.post(tool + path, json=body, headers=_bearer(RUNTIME_TOKEN))
            assert refused.status_code in (401, 403), (path, refused.status_code, refused.text)
            assert RUNTIME_TOKEN not in refused.text
        for path in ("/drain", "/interrupt/call", "/tools"):
            assert http.post(tool + path, json={}, headers=_bearer(RUNTIME_TOKEN)).status_code in (
                401,
                403,
                405,
            )
        assert http.post(tool + "/execute", json=_transfer()).status_code == 401
        assert not platform.ledger.exists(), "the sensitive tool ran without the OE"
        assert llm_peer.requests == [] if hasattr(llm_peer, "requests") else True

        # The AER cannot start a run (and name a user for it) with its token either.
        start = {"execution_id": "ex-evil", "workspace_id": WORKSPACE, "user_id": "victim", "input": {}}
        refused = http.post(aer + "/execute", json=start, headers=_bearer(RUNTIME_TOKEN))
        assert refused.status_code == 403 and refused.json()["error"] == "oe_statement_required"

        # Statements the attacker could get hold of or make: each refused.
        other_key = Ed25519PrivateKey.generate()
        forged = sign(_claims("tool"), other_key, kid=key_id(other_key.public_key()))
        assert http.post(tool + "/execute", json=_transfer(), headers=_bearer(forged)).status_code == 401
        # The right key id on another key's signature: the signature does not verify.
        real_kid = platform.statement("tool", execution_id="ex-1").split(".")[1]
        spoofed = sign(_claims("tool"), other_key, kid=real_kid)
        bad = http.post(tool + "/execute", json=_transfer(), headers=_bearer(spoofed))
        assert bad.status_code == 401 and bad.json()["error"] == "bad_signature"
        # A real statement with its claims edited (another execution): the signature no longer matches.
        genuine = platform.statement("tool", execution_id="ex-1")
        head, kid, payload, signature = genuine.split(".")
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        claims["execution_id"] = "ex-2"
        edited = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
        tampered = ".".join((head, kid, edited, signature))
        assert (
            http.post(tool + "/execute", json=_transfer("ex-2"), headers=_bearer(tampered)).status_code == 401
        )
        expired = platform.statement("tool", execution_id="ex-1", ttl_s=-1)
        bad = http.post(tool + "/execute", json=_transfer(), headers=_bearer(expired))
        assert bad.status_code == 401 and bad.json()["error"] == "expired"
        # What the AER is sent (audience aer, or its run's memory statement), replayed to the Tool Pod.
        for audience in ("aer", "memory"):
            replayed = platform.statement(audience, execution_id="ex-1")
            bad = http.post(tool + "/execute", json=_transfer(), headers=_bearer(replayed))
            assert bad.status_code == 403 and bad.json()["error"] == "wrong_audience", bad.text
        other_agent = platform.statement("tool", execution_id="ex-1", agent="team-b/other")
        bad = http.post(tool + "/execute", json=_transfer(), headers=_bearer(other_agent))
        assert bad.status_code == 403 and bad.json()["error"] == "wrong_workspace"
        # One execution's statement does not open another execution's calls.
        bad = http.post(tool + "/execute", json=_transfer("ex-2"), headers=_bearer(genuine))
        assert bad.status_code == 403 and bad.json()["error"] == "wrong_execution"
        assert not platform.ledger.exists()

    # The governed path: the OE signs, the Tool Pod runs; the sensitive tool waits for its approval.
    execution_id = platform.invoke(
        _calls(("shout", {"text": "hi"}), ("transfer", {"amount": 5, "to": "bob"}))
    )
    view = platform.wait(execution_id)
    assert view["status"] == "suspended" and view["suspension"]["tool"] == "transfer", view
    assert not platform.ledger.exists()
    with platform.client() as client:
        resumed = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        assert resumed.status_code == 202, resumed.text
    view = platform.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"]["results"][0] == {"loud": "HI"}
    assert platform.ledger.read_text().splitlines() == ["5 bob"]
    # No statement, key or token in any component's output.
    output = platform.outputs()
    assert RUNTIME_TOKEN not in output and "aes1." not in output
    assert "BEGIN PRIVATE KEY" not in output


def _memory_keys(tmp_path: Path) -> tuple[Ed25519PrivateKey, str, Path]:
    from cryptography.hazmat.primitives import serialization

    pem = generate_private_key_pem()
    public = tmp_path / "oe-public-key.pem"
    public.write_text(public_key_pem(pem))
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return key, key_id(key.public_key()), public


@pytest.mark.timeout(120)
def test_memory_scope_comes_from_the_oe_statement_alone(
    spawn: Callable[..., Process], tmp_path: Path
) -> None:
    key, kid, public = _memory_keys(tmp_path)
    server = start_memory(spawn, tmp_path, app_id=WORKSPACE, extra={PUBLIC_KEY_FILE_ENV: str(public)})

    def statement(**extra: object) -> str:
        fields: dict[str, object] = {"user_id": "alice", "org_id": "acme", **extra}
        return sign(_claims("memory", ttl_s=float(fields.pop("ttl_s", 60)), **fields), key, kid=kid)

    def headers(credential: str | None) -> dict[str, str]:
        out = {"authorization": f"Bearer {MEMORY_TOKEN}"}
        if credential is not None:
            out["x-agent-engine-statement"] = credential
        return out

    alice = statement()
    bob = statement(user_id="bob")
    record = {"namespace": "prefs", "content": "alice likes window seats", "embed": False}
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        # Alice's run writes without naming anyone: the statement says who she is.
        written = http.post("/memory/semantic/records", json=record, headers=headers(alice))
        assert written.status_code == 201, written.text
        assert (
            http.post(
                "/memory/semantic/records", json={**record, "content": "bob's"}, headers=headers(bob)
            ).status_code
            == 201
        )
        mine = http.post("/memory/semantic/list", json={"namespace": "prefs"}, headers=headers(alice)).json()
        assert [r["content"] for r in mine["results"]] == ["alice likes window seats"]

        # Finding 2: Alice's run (or its tenant code) names Bob. Refused, and the answer is the same for a
        # user that has records and one that has none.
        answers = []
        for victim in ("bob", "nobody-at-all"):
            for path, body in (
                ("/memory/semantic/list", {"namespace": "prefs", "user_id": victim}),
                ("/memory/semantic/search", {"namespace": "prefs", "user_id": victim}),
                ("/memory/semantic/namespaces", {"user_id": victim}),
                ("/memory/semantic/records", {**record, "user_id": victim}),
            ):
                refused = http.post(path, json=body, headers=headers(alice))
                assert refused.status_code == 403, (path, refused.text)
                answers.append((path, refused.json()))
                assert victim not in refused.text
        assert answers[:4] == answers[4:], "the refusal must not tell whether the user exists"
        other_org = http.post(
            "/memory/semantic/list", json={"namespace": "prefs", "org_id": "globex"}, headers=headers(alice)
        )
        assert other_org.status_code == 403 and other_org.json()["error"] == "scope_not_granted"

        # The Agent's token alone, a statement for another Agent's workspace, another audience, expired,
        # forged: each refused with a reason.
        cases = {
            "statement_required": None,
            "statement_wrong_workspace": sign(
                _claims("memory", user_id="alice").model_copy(update={"workspace": "team-b.other"}),
                key,
                kid=kid,
            ),
            "statement_wrong_audience": sign(_claims("tool", user_id="alice"), key, kid=kid),
            "statement_expired": statement(ttl_s=-1),
        }
        other = Ed25519PrivateKey.generate()
        cases["statement_unknown_key"] = sign(
            _claims("memory", user_id="alice"), other, kid=key_id(other.public_key())
        )
        for reason, credential in cases.items():
            refused = http.post(
                "/memory/semantic/list", json={"namespace": "prefs"}, headers=headers(credential)
            )
            assert refused.status_code == 403 and refused.json()["error"] == reason, (reason, refused.text)

        # A read outside an execution (a user exporting her own data): an export statement opens reads of
        # her records only, and no write.
        export = statement(execution_id="", purpose="export")
        exported = http.post("/memory/semantic/list", json={"namespace": "prefs"}, headers=headers(export))
        assert [r["content"] for r in exported.json()["results"]] == ["alice likes window seats"]
        refused = http.post("/memory/semantic/records", json=record, headers=headers(export))
        assert refused.status_code == 403 and refused.json()["error"] == "read_only_statement"

        # Tenant code in Alice's run: MemoryClient sends the run's statement; naming Bob is refused.
        asyncio.run(_tenant_code_in_alices_run(server.base_url, alice))
    assert "aes1." not in server.process.output()


async def _tenant_code_in_alices_run(base_url: str, statement: str) -> None:
    context = RequestContext(
        execution_id="ex-1",
        workspace_id=WORKSPACE,
        user_id="alice",
        org_id="acme",
        memory_credential=statement,
    )
    client = MemoryClient(base_url, token=MEMORY_TOKEN)
    try:
        with run_scope(context, oe=None):
            hits = await client.search(namespace="prefs")
            assert [hit.content for hit in hits] == ["alice likes window seats"]
            with pytest.raises(MemoryRequestError) as refused:
                await client.search(namespace="prefs", user_id="bob")
            assert refused.value.status == 403 and refused.value.error == "scope_not_granted"
        # Outside the run the client has no statement: refused, whatever it names.
        with pytest.raises(MemoryRequestError) as outside:
            await client.search(namespace="prefs", user_id="alice", org_id="acme")
        assert outside.value.status == 403 and outside.value.error == "statement_required"
    finally:
        await client.aclose()


@pytest.mark.timeout(180)
def test_the_internal_resume_route_is_authorized_as_the_gateway_route(platform: Platform) -> None:
    """Issue 27: `POST /resume/{id}` resumed any execution with one token and no project check."""
    execution_id = platform.invoke(_calls(("transfer", {"amount": 7, "to": "eve"})))
    assert platform.wait(execution_id)["status"] == "suspended"
    # The same OE store, now with a client credential that may act in team-b only.
    oe = platform.processes.pop("oe")
    oe.popen.terminate()
    oe.popen.wait(timeout=30)
    platform.start_oe(extra={"OE_CLIENT_TOKEN_NAMESPACES": "team-b"})
    with platform.client() as client:
        internal = client.post(f"/resume/{execution_id}", json={"human_review": {"decision": "approved"}})
        gateway = client.post(
            f"/api/v1/projects/team-a/executions/{execution_id}/resume", json={"decision": "approved"}
        )
        unknown = client.post("/resume/" + "0" * 32, json={"human_review": {"decision": "approved"}})
        # Refused alike, worded like an unknown execution: the caller learns nothing about it.
        assert internal.status_code == gateway.status_code == unknown.status_code == 404, (
            internal.text,
            gateway.text,
        )
        assert internal.json()["error"] == unknown.json()["error"]
    time.sleep(1.0)
    assert not platform.ledger.exists(), "the refused resume ran the approved call"
