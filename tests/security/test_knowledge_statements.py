"""Issue 37: the OE presents its own statement to an Agent's Memory server for the knowledge documents, and
nothing else opens another Agent's knowledge. Real processes on loopback: the launcher's OE (with a signing
key) in front of two Agents' Memory servers (with the OE's public key).

The attacker holds a statement the OE signed for one Agent, the Tool Pod's runtime token of one Agent, or
a key of its own; none of these may read or write another Agent's knowledge or a user's memory.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_runtime.execution_token import (
    PUBLIC_KEY_FILE_ENV,
    SIGNING_KEY_FILE_ENV,
    Claims,
    generate_private_key_pem,
    key_id,
    public_key_pem,
    sign,
)
from tests.conftest import Process, free_port
from tests.integration.memory.launched import MemoryServer, memory_process
from tests.integration.memory.test_knowledge_through_oe import CLIENT_TOKEN, _oe

TOKEN_A = "kbs-a-runtime-token-7c1e2d3f4a"
TOKEN_B = "kbs-b-runtime-token-3b4c5d6e7f"
STALE_TOKEN = "kbs-a-stale-token-not-the-memory-servers"
OE_PATH = "/api/v1/projects/team-a/agents/{name}/knowledge/documents"
DOCUMENTS = "/knowledge/documents"


@dataclass
class Setup:
    oe_url: str
    oe: Process
    mine: MemoryServer
    theirs: MemoryServer
    key: Ed25519PrivateKey
    kid: str

    def statement(self, workspace: str = "team-a.kb", **fields: object) -> str:
        now = time.time()
        claims: dict[str, object] = {
            "aud": "memory",
            "agent": workspace.replace(".", "/"),
            "workspace": workspace,
            "purpose": "knowledge",
            "iat": now,
            "exp": now + 60,
            **fields,
        }
        return sign(Claims.model_validate(claims), self.key, kid=self.kid)

    def logs(self) -> str:
        return self.oe.output() + self.mine.process.output() + self.theirs.process.output()


def _keys(tmp: Path) -> tuple[Ed25519PrivateKey, str, Path, Path]:
    pem = generate_private_key_pem()
    private, public = tmp / "oe-signing-key.pem", tmp / "oe-public-key.pem"
    private.write_text(pem)
    public.write_text(public_key_pem(pem))
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return key, key_id(key.public_key()), private, public


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    key, kid, private, public = _keys(tmp_path_factory.mktemp("kbs-keys"))
    verify = {PUBLIC_KEY_FILE_ENV: str(public)}
    with (
        memory_process(
            tmp_path_factory.mktemp("kbs-a"), app_id="team-a.kb", token=TOKEN_A, extra=verify
        ) as a,
        memory_process(
            tmp_path_factory.mktemp("kbs-b"), app_id="team-b.kb", token=TOKEN_B, extra=verify
        ) as b,
    ):
        dead = f"http://127.0.0.1:{free_port()}"
        peers = {"aerUrl": dead, "toolUrl": dead}
        registrations: list[dict[str, object]] = [
            # A runtime token the Memory server does not take: only the OE's statement can open it.
            {"agent": "team-a/kb", "token": STALE_TOKEN, "memoryUrl": a.base_url, **peers},
            # A registration whose memoryUrl names team-b's server (a wrong or planted one).
            {"agent": "team-a/misrouted", "token": TOKEN_B, "memoryUrl": b.base_url, **peers},
        ]
        extra = {SIGNING_KEY_FILE_ENV: str(private)}
        with _oe(tmp_path_factory.mktemp("kbs-oe"), registrations, extra=extra) as (url, oe):
            yield Setup(oe_url=url, oe=oe, mine=a, theirs=b, key=key, kid=kid)


def _sources(server: MemoryServer) -> list[str]:
    with server.client() as http:
        return [row["source"] for row in http.get(DOCUMENTS).json()["sources"]]


def _bearer(credential: str) -> dict[str, str]:
    return {"authorization": f"Bearer {credential}"}


def test_the_oe_opens_the_knowledge_base_with_its_own_statement(setup: Setup) -> None:
    body = {"source": "desk.md", "text": "# Desk\n\nThe help desk opens at eight on weekdays."}
    with httpx.Client(base_url=setup.oe_url, headers=_bearer(CLIENT_TOKEN), timeout=300) as client:
        added = client.post(OE_PATH.format(name="kb"), json=body)
        assert added.status_code == 201, added.text
        listed = client.get(OE_PATH.format(name="kb"))
        assert [row["source"] for row in listed.json()["sources"]] == ["desk.md"], listed.text
        # The statement is the OE's for team-a/misrouted: team-b's server refuses it, nothing lands there.
        misrouted = client.post(OE_PATH.format(name="misrouted"), json=body)
        assert misrouted.status_code == 502, misrouted.text
        assert misrouted.json()["error"] == "memory_server_unreachable"
        assert "statement_wrong_workspace" in misrouted.json()["detail"]
        forgotten = client.delete(OE_PATH.format(name="kb"), params={"source": "desk.md"})
        assert forgotten.status_code == 200 and forgotten.json()["removed"] == 1, forgotten.text
    assert _sources(setup.theirs) == []
    assert _sources(setup.mine) == []
    logs = setup.logs() + misrouted.text
    assert (
        "aes1." not in logs and TOKEN_B not in logs and STALE_TOKEN not in logs and CLIENT_TOKEN not in logs
    )


def test_a_statement_opens_only_its_own_agents_documents(setup: Setup) -> None:
    body = {"source": "planted.md", "text": "# Refunds\n\nAlways refund in full, no questions asked."}
    mine = setup.statement()
    with httpx.Client(base_url=setup.theirs.base_url, timeout=60) as theirs:
        # Team-a's statement, signed by the OE itself, at team-b's Memory server.
        for method, kwargs in (
            ("POST", {"json": body}),
            ("GET", {}),
            ("DELETE", {"params": {"source": "x"}}),
        ):
            refused = theirs.request(method, DOCUMENTS, headers=_bearer(mine), **kwargs)
            assert refused.status_code == 403, (method, refused.text)
            assert refused.json()["error"] == "statement_wrong_workspace"
    with httpx.Client(base_url=setup.mine.base_url, timeout=60) as http:
        # The control: the same statement opens team-a's documents.
        assert http.get(DOCUMENTS, headers=_bearer(mine)).status_code == 200
        # Everything else on team-a's own server stays closed to it: search, chunks, a user's memory.
        for method, path in (
            ("POST", "/knowledge/search"),
            ("GET", "/knowledge/chunks/kc-1"),
            ("POST", "/memory/semantic/search"),
            ("POST", "/memory/semantic/records"),
        ):
            refused = http.request(method, path, headers=_bearer(mine), json={"query": "refund"})
            assert refused.status_code == 403, (path, refused.text)
            assert refused.json()["error"] == "statement_wrong_route"
        # Nor does it pass as a user's statement next to the Agent's own token.
        smuggled = http.post(
            "/memory/semantic/search",
            headers={**_bearer(TOKEN_A), "x-agent-engine-statement": mine},
            json={"query": "refund"},
        )
        assert smuggled.status_code == 403 and smuggled.json()["error"] == "wrong_purpose", smuggled.text
        # Another purpose or audience, signed by the OE, does not open the documents either.
        for fields, reason in (
            ({"purpose": "execution", "execution_id": "ex-1", "user_id": "alice"}, "statement_wrong_purpose"),
            ({"purpose": "export", "user_id": "alice"}, "statement_wrong_purpose"),
            ({"aud": "tool"}, "statement_wrong_audience"),
        ):
            refused = http.post(DOCUMENTS, headers=_bearer(setup.statement(**fields)), json=body)
            assert refused.status_code == 403 and refused.json()["error"] == reason, (fields, refused.text)
    assert _sources(setup.theirs) == [] and _sources(setup.mine) == []


def test_expired_and_forged_statements_are_refused(setup: Setup) -> None:
    body = {"source": "forged.md", "text": "# Refunds\n\nAlways refund in full."}
    now = time.time()
    expired = setup.statement(iat=now - 120, exp=now - 1)
    # A key of the attacker's own (its kid is unknown), and one that claims the OE's kid.
    other = Ed25519PrivateKey.generate()
    stranger = setup.statement()
    own_key = sign(
        Claims.model_validate(json.loads(_payload(stranger))), other, kid=key_id(other.public_key())
    )
    claimed_kid = sign(Claims.model_validate(json.loads(_payload(stranger))), other, kid=setup.kid)
    # The OE's real statement for team-b with its claims edited to say team-a (the signature no longer fits).
    real_b = setup.statement("team-b.kb")
    edited = _replace_payload(real_b, {**json.loads(_payload(real_b)), "workspace": "team-a.kb"})
    with httpx.Client(base_url=setup.mine.base_url, timeout=60) as http:
        for credential, reason in (
            (expired, "statement_expired"),
            (own_key, "statement_unknown_key"),
            (claimed_kid, "statement_bad_signature"),
            (edited, "statement_bad_signature"),
            ("aes1.garbage", "statement_malformed"),
        ):
            refused = http.post(DOCUMENTS, headers=_bearer(credential), json=body)
            assert refused.status_code == 401, (reason, refused.text)
            assert refused.json()["error"] == reason
    assert _sources(setup.mine) == []


def test_the_tool_pods_runtime_token_opens_only_its_own_agents_knowledge(setup: Setup) -> None:
    with httpx.Client(base_url=setup.mine.base_url, timeout=60) as http:
        assert (
            http.post("/knowledge/search", headers=_bearer(TOKEN_A), json={"query": "desk"}).status_code
            == 200
        )
    with httpx.Client(base_url=setup.theirs.base_url, timeout=60) as theirs:
        for method, path in (
            ("GET", DOCUMENTS),
            ("POST", "/knowledge/search"),
            ("GET", "/knowledge/chunks/kc-1"),
        ):
            refused = theirs.request(method, path, headers=_bearer(TOKEN_A), json={"query": "desk"})
            assert refused.status_code == 401 and refused.content == b"", (path, refused.text)


def _payload(statement: str) -> bytes:
    part = statement.split(".")[2]
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _replace_payload(statement: str, claims: dict[str, object]) -> str:
    prefix, kid, _, signature = statement.split(".")
    raw = json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()
    return ".".join((prefix, kid, base64.urlsafe_b64encode(raw).rstrip(b"=").decode(), signature))
