"""The console's pending MCP consents (console/connector_consent.py): the form's checks, the binding of a
consent to the browser and session that began it, taking it once, expiry and the bound on their number."""

from __future__ import annotations

import pytest

from agent_runtime.connectors.mcp.oauth import CachedServer
from agent_runtime.connectors.mcp.oauth_flow import PendingConsent
from agent_runtime.console.connector_consent import (
    CONSENT_TTL_S,
    BadConsentForm,
    PendingConsents,
    consent_request,
    continue_page,
)

FORM = {"agent": "team-a/loop", "connector": "crm", "url": "http://127.0.0.1:9/mcp"}


def flow(state: str) -> PendingConsent:
    server = CachedServer(resource="http://127.0.0.1:9/mcp", issuer="http://127.0.0.1:8", token_endpoint="x")
    return PendingConsent(
        server=server, verifier="v" * 64, url_state=state, redirect_uri="http://127.0.0.1:7/cb",
        url="http://127.0.0.1:8/authorize?state=" + state,
    )  # fmt: skip


def test_the_form_names_the_wrong_field() -> None:
    assert consent_request(FORM).needs().spec() == {
        "verb": "update", "group": "agentengine.io", "resource": "agents", "namespace": "team-a",
        "name": "loop",
    }  # fmt: skip
    for field, bad in (("agent", "loop"), ("connector", "../x"), ("url", "file:///etc/passwd")):
        with pytest.raises(BadConsentForm) as caught:
            consent_request({**FORM, field: bad})
        assert caught.value.field == field


def test_a_consent_is_for_the_browser_and_session_that_began_it_and_taken_once() -> None:
    now = [0.0]
    pending = PendingConsents(clock=lambda: now[0])
    pending.start(session_id="session-a", request=consent_request(FORM), flow=flow("s1"))
    assert pending.take(state="s1", cookie="", session_id="session-a") is None  # no consent cookie
    assert pending.take(state="s1", cookie="s2", session_id="session-a") is None  # another state's cookie
    assert pending.take(state="s1", cookie="s1", session_id="session-b") is None  # another session
    taken = pending.take(state="s1", cookie="s1", session_id="session-a")
    assert taken is not None and taken.flow.verifier == "v" * 64
    assert pending.take(state="s1", cookie="s1", session_id="session-a") is None  # once
    pending.start(session_id="session-a", request=consent_request(FORM), flow=flow("s3"))
    now[0] += CONSENT_TTL_S
    assert pending.take(state="s3", cookie="s3", session_id=None) is None and len(pending) == 0


def test_the_number_kept_is_bounded_and_nothing_secret_is_shown() -> None:
    pending = PendingConsents(size=2)
    for state in ("a", "b", "c"):
        kept = pending.start(session_id="s", request=consent_request(FORM), flow=flow(state))
    assert len(pending) == 2 and pending.take(state="a", cookie="a", session_id="s") is None
    assert "v" * 64 not in repr(kept)
    page = continue_page(request=consent_request(FORM), authorization_url='http://x/?a="><script>')
    assert "<script>" not in page and "v" * 64 not in page
