"""The TypeScript runner's Tool Pod and AER hold the same trust boundaries as the Python ones (issue 27),
played as attacks against real processes (the Python OE, the TS launcher as AER and Tool Pod, loopback).

The attacker holds what the AER holds (tenant code, a prompt-injected tool body): the Agent's runtime token
and any statement it was sent. Nothing it holds may run a tool or a model call the OE does not know, start
a run, or act on another execution; a forged or expired statement opens nothing.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_runtime.execution_token import Claims, sign
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, RUNTIME_TOKEN
from tests.integration.ts_runner.node_platform import NodePlatform, node_platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

WORKSPACE = AGENT.replace("/", ".")


def _bearer(credential: str) -> dict[str, str]:
    return {"authorization": f"Bearer {credential}"}


def _transfer(execution_id: str = "ex-1") -> dict[str, object]:
    arguments = {"amount": 9, "to": "mallory"}
    return {"tool": "transfer", "arguments": arguments, "execution_id": execution_id, "step": 1}


def _forged(audience: str, *, execution_id: str = "ex-1", kid: str = "0" * 16) -> str:
    """A well-formed statement signed by a key that is not the OE's."""
    now = time.time()
    fields = {"aud": audience, "agent": AGENT, "workspace": WORKSPACE, "execution_id": execution_id}
    claims = Claims.model_validate({**fields, "iat": now, "exp": now + 60})
    return sign(claims, Ed25519PrivateKey.generate(), kid=kid)


@pytest.fixture
def platform(tmp_path: Path, spawn: Callable[..., Process]) -> Iterator[NodePlatform]:
    with running_llm_peer() as peer, running_echo_provider() as provider:
        yield node_platform(tmp_path, spawn, llm_base_url=peer.base_url, provider_url=provider.url).start()


@pytest.mark.timeout(240)
def test_nothing_the_aer_holds_opens_the_tool_pod_or_starts_a_run(platform: NodePlatform) -> None:
    tool = f"http://127.0.0.1:{platform.tool_port}"
    aer = f"http://127.0.0.1:{platform.aer_port}"
    # The Agent's runtime token (the AER holds it): no Tool Pod route opens to it.
    model_call = {"llm_id": "main", "messages": [{"type": "human", "content": "x"}]}
    for path, body in (("/execute", _transfer()), ("/invoke_llm", model_call)):
        refused = httpx.post(tool + path, json=body, headers=_bearer(RUNTIME_TOKEN))
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == "oe_statement_required"
    # A statement the OE made for the AER (one the AER was sent) does not open the Tool Pod.
    for_aer = platform.statement("aer", execution_id="ex-1")
    refused = httpx.post(tool + "/execute", json=_transfer(), headers=_bearer(for_aer))
    assert (refused.status_code, refused.json()["error"]) == (403, "wrong_audience")
    # A statement for one execution does not run a call of another.
    for_other = platform.statement("tool", execution_id="ex-other")
    refused = httpx.post(tool + "/execute", json=_transfer("ex-1"), headers=_bearer(for_other))
    assert (refused.status_code, refused.json()["error"]) == (403, "wrong_execution")
    # A statement of another Agent's workspace.
    foreign = platform.statement("tool", execution_id="ex-1", agent="team-b/other")
    refused = httpx.post(tool + "/execute", json=_transfer(), headers=_bearer(foreign))
    assert (refused.status_code, refused.json()["error"]) == (403, "wrong_workspace")
    # Forged signatures, tampered claims, expired statements: 401, nothing runs.
    refused = httpx.post(tool + "/execute", json=_transfer(), headers=_bearer(_forged("tool")))
    assert (refused.status_code, refused.json()["error"]) == (401, "unknown_key")
    genuine = platform.statement("tool", execution_id="ex-1")
    # Signed by another key under the OE's own key id: the signature does not verify.
    refused = httpx.post(
        tool + "/execute", json=_transfer(), headers=_bearer(_forged("tool", kid=genuine.split(".")[1]))
    )
    assert (refused.status_code, refused.json()["error"]) == (401, "bad_signature")
    prefix, kid, payload, signature = genuine.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["execution_id"] = "ex-2"
    tampered = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    refused = httpx.post(
        tool + "/execute", json=_transfer("ex-2"), headers=_bearer(f"{prefix}.{kid}.{tampered}.{signature}")
    )
    assert (refused.status_code, refused.json()["error"]) == (401, "bad_signature")
    expired = platform.statement("tool", execution_id="ex-1", ttl_s=-1)
    refused = httpx.post(tool + "/execute", json=_transfer(), headers=_bearer(expired))
    assert (refused.status_code, refused.json()["error"]) == (401, "expired")
    assert not platform.ledger.exists(), "no attack ran the side effect"
    # The AER's POST /execute opens to the OE's statement only: the token cannot start runs.
    start = {"execution_id": "ex-9", "workspace_id": WORKSPACE, "input": {"mode": "calls", "calls": []}}
    refused = httpx.post(aer + "/execute", json=start, headers=_bearer(RUNTIME_TOKEN))
    assert (refused.status_code, refused.json()["error"]) == (403, "oe_statement_required")
    other_run = platform.statement("aer", execution_id="ex-8")
    refused = httpx.post(aer + "/execute", json=start, headers=_bearer(other_run))
    assert (refused.status_code, refused.json()["error"]) == (403, "wrong_execution")
    # No credential at all: 401 on every route but the probes.
    assert httpx.post(tool + "/execute", json=_transfer()).status_code == 401
    assert httpx.get(aer + "/tools").status_code == 401
    assert httpx.get(aer + "/readyz").status_code == 200
    # The governed path still works: the OE's own statement for the execution runs the call once.
    allowed = httpx.post(tool + "/execute", json=_transfer(), headers=_bearer(genuine))
    assert allowed.status_code == 200 and allowed.json()["status"] == "success", allowed.text
    assert platform.ledger.read_text().splitlines() == ["9 mallory"]


@pytest.mark.timeout(240)
def test_bad_bodies_at_every_ts_edge_are_named_refusals_never_a_500(platform: NodePlatform) -> None:
    tool = f"http://127.0.0.1:{platform.tool_port}"
    aer = f"http://127.0.0.1:{platform.aer_port}"
    bodies: list[bytes] = [
        b"",
        b"{",
        b"[]",
        b"null",
        b'{"tool": 5, "arguments": "x"}',
        b"[" * 200_000 + b"]" * 200_000,
        b'{"execution_id": "e", "step": 1e400}',
        b'{"execution_id": "e", "step": NaN}',
        b"\xff\xfe\x00garbage",
        b'{"execution_id": "' + b"x" * 9_000_000 + b'"}',
    ]
    for base, audience, paths in (
        (tool, "tool", ("/execute", "/invoke_llm", "/drain", "/interrupt/call")),
        (aer, "aer", ("/execute", "/drain", "/interrupt/call")),
    ):
        for path in paths:
            headers = {
                **_bearer(platform.statement(audience, execution_id="e")),
                "content-type": "application/json",
            }
            for body in bodies:
                answer = httpx.post(base + path, content=body, headers=headers, timeout=30)
                where = (path, body[:40], answer.status_code, answer.text[:200])
                if answer.status_code == 404:
                    # A well-formed run of no workspace (unknown fields are ignored): the AER's own refusal.
                    assert (path, audience) == ("/execute", "aer"), where
                    assert "another workspace" in answer.json()["detail"], where
                    continue
                assert answer.status_code in (400, 413, 422), where
                if answer.status_code != 413:
                    detail = answer.json()["detail"]
                    assert isinstance(detail, list) and all("field" in p and "problem" in p for p in detail)
    # Still serving, and nothing of a body was echoed into the logs.
    assert httpx.get(tool + "/readyz").status_code == 200 and httpx.get(aer + "/readyz").status_code == 200
    assert "garbage" not in platform.outputs()
