"""A person's OAuth consent for an MCP connector through the console (issue 37): Chromium drives the form,
the loopback authorization server (`tests/providers/mcp_oauth_server.py`) approves, the OE's callback
exchanges the code and writes the token file, and the Tool Pod's MCP connector calls with it. The attacks:
a forged state, another browser's session replaying the redirect, another team's Agent."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from agent_runtime.connectors.mcp.oauth_store import DIR_ENV
from tests.browser.conftest import Console
from tests.conftest import Process
from tests.integration.connectors.test_mcp_oauth import NAME, echo, echo_text
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, LLM_KEY, Platform
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer
from tests.providers.mcp_oauth_peer import OAuthPeer, mcp_oauth_server


@pytest.fixture(scope="module")
def peer() -> Iterator[OAuthPeer]:
    with mcp_oauth_server() as running:
        yield running


@pytest.fixture(scope="module")
def tokens_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-oauth") / "dir"


@pytest.fixture(scope="module")
def platform(
    tmp_path_factory: pytest.TempPathFactory, module_spawn: Callable[..., Process], tokens_dir: Path
) -> Iterator[Platform]:
    """The browser tier's platform, its OE keeping MCP OAuth tokens (the local mode) and its static
    client token limited to team-a."""
    with running_llm_peer(api_key=LLM_KEY) as llm, running_echo_provider() as provider:
        running = Platform(
            tmp=tmp_path_factory.mktemp("platform"),
            spawn=module_spawn,
            llm_base_url=llm.base_url,
            provider_url=provider.url,
        )
        running.start_tool_pod()
        running.start_aer()
        running.write_registrations()
        running.start_oe(extra={DIR_ENV: str(tokens_dir), "OE_CLIENT_TOKEN_NAMESPACES": "team-a"})
        yield running


def begin(console: Console, *, agent: str, url: str) -> None:
    console.page.goto(console.url(f"/console/connectors/consent?agent={agent}&connector={NAME}"))
    console.page.fill("#consent-url", url)
    console.page.click("#consent-start")


def authorization_link(console: Console) -> str:
    link = console.page.wait_for_selector("#consent-continue", timeout=15_000)
    assert link is not None
    href = link.get_attribute("href")
    assert href is not None
    return href


def redirect_of(authorization_url: str) -> str:
    """The authorization server's answer (it approves at once): the redirect back to the OE's callback."""
    with httpx.Client(follow_redirects=False, trust_env=False) as client:
        answer = client.get(authorization_url)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


def test_consent_through_the_console_is_kept_for_the_tool_pod(
    console: Console, peer: OAuthPeer, platform: Platform, tokens_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From the Agents page: its card links to the form for that Agent.
    console.ready("/console/agents")
    console.page.click(f"article[data-agent='{AGENT}'] a.consent-link")
    console.page.wait_for_selector("#consent-url", timeout=15_000)
    assert console.page.input_value("#consent-agent") == AGENT
    console.page.fill("#consent-connector", NAME)
    console.page.fill("#consent-url", peer.url)
    console.page.click("#consent-start")
    href = authorization_link(console)
    assert "code_challenge_method=S256" in href and "resource=" in href and "code_verifier" not in href
    console.page.click("#consent-continue")
    console.page.wait_for_selector("#consent-done", timeout=15_000)
    assert console.page.url.startswith(platform.oe_url + "/console/connectors/callback")

    kept = tokens_dir / f"{NAME}.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    data = json.loads(kept.read_text())
    assert data["grant"] == "authorization_code" and data["tokens"]["refresh_token"]
    assert peer.stats()["issued"].get("authorization_code") == 1
    page_text = console.page.content()
    for secret in (data["tokens"]["access_token"], data["tokens"]["refresh_token"]):
        assert secret not in page_text
        assert secret not in platform.processes["oe"].output()

    # The Tool Pod's MCP connector reads that directory and calls with the person's token.
    monkeypatch.setenv(DIR_ENV, str(tokens_dir))
    # (in a thread of its own: Playwright's sync API keeps an event loop running in this one)
    with ThreadPoolExecutor(1) as pool:
        call = echo(peer.url, grant="authorization_code", configured=False)
        answers = pool.submit(asyncio.run, call).result()
    assert "hi" in echo_text(answers[0])


def test_a_forged_state_or_another_sessions_browser_is_turned_away(
    console: Console, console_for: Callable[..., Console], peer: OAuthPeer, platform: Platform
) -> None:
    begin(console, agent=AGENT, url=peer.url)
    location = redirect_of(authorization_link(console))
    before = peer.stats()["issued"].get("authorization_code", 0)

    # A forged state, in the browser that began the consent.
    forged = location.split("?", 1)[0] + "?code=forged&state=not-the-one"
    assert console.page.goto(forged).status == 400  # type: ignore[union-attr]

    # Another signed-in browser replaying the real redirect: without this browser's consent cookie, and
    # with it stolen, its own session is not the one that began the consent.
    other = console_for(platform.oe_url)
    other.sign_in(CLIENT_TOKEN)
    other.page.wait_for_url("**/console/inbox")
    assert other.page.goto(location).status == 400  # type: ignore[union-attr]
    state = location.split("state=", 1)[1].split("&", 1)[0]
    other.context.add_cookies(
        [{"name": "ae_console_consent", "value": state, "url": platform.oe_url + "/console/connectors/x"}]
    )
    assert other.page.goto(location).status == 400  # type: ignore[union-attr]
    assert "not for a consent begun in this browser" in other.page.content()
    assert peer.stats()["issued"].get("authorization_code", 0) == before  # no code was redeemed

    # The browser that began it still finishes it.
    console.page.goto(location)
    console.page.wait_for_selector("#consent-done", timeout=15_000)


def test_another_teams_agent_is_refused_before_any_request(console: Console, peer: OAuthPeer) -> None:
    registered = peer.stats()["issued"].get("registration", 0)
    begin(console, agent="team-b/other", url=peer.url)
    console.page.wait_for_selector("#consent-error", timeout=15_000)
    assert "may not update Agent team-b/other" in console.page.content()
    assert peer.stats()["issued"].get("registration", 0) == registered
