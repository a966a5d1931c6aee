"""MCP servers behind OAuth 2.1 (B-23): the connector the Tool Pod runs against a real MCP server (the
official SDK's bearer middleware and RFC 9728 metadata) and a loopback authorization server (the SDK's own
auth routes), both in the SDK's venv. Discovery, client_credentials, a person's PKCE consent, refresh
before expiry and after a 401, revoked tokens, two processes refreshing at once, a dead lock holder; and
no token or secret in any log, error or output."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.connectors import ConnectorError, bundle_from_agent_config
from agent_runtime.connectors.builtin.registry import create_connector
from agent_runtime.connectors.framework import BuiltinConnector, BuiltinToolError
from agent_runtime.connectors.mcp.catalog import DiscoveredTool, materialize_mcp
from agent_runtime.connectors.mcp.oauth import CachedServer, OAuthSettings
from agent_runtime.connectors.mcp.oauth_flow import OAuthSession
from agent_runtime.connectors.mcp.oauth_store import DIR_ENV, TokenStore
from tests.providers.mcp_oauth_peer import CLIENT_ID, CLIENT_SECRET, OAuthPeer, mcp_oauth_server

ID8 = "3f2a9c1e"
NAME = "crm"
ENV = {"CRM_CLIENT_ID": CLIENT_ID, "CRM_CLIENT_SECRET": CLIENT_SECRET}
REPO = Path(__file__).resolve().parents[3]


ISSUERS: dict[str, str] = {}  # a peer's MCP URL -> its issuer: a configured client secret needs the pin


@pytest.fixture
def peer() -> Iterator[OAuthPeer]:
    with mcp_oauth_server() as running:
        ISSUERS[running.url] = running.issuer
        yield running


@pytest.fixture
def oauth_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "mcp-oauth"
    monkeypatch.setenv(DIR_ENV, str(directory))
    return directory


def connector(url: str, *, grant: str = "client_credentials", configured: bool = True,
              pin: str | None = None) -> BuiltinConnector:  # fmt: skip
    auth: dict[str, Any] = {"type": "oauth", "grant": grant}
    if pin is None and configured and grant == "client_credentials":
        pin = ISSUERS.get(url)
    if pin:
        auth["authorization_server"] = pin
    defs = materialize_mcp(
        name=NAME,
        id8=ID8,
        config={"url": url, "auth": auth},
        credentials={"client_id": "CRM_CLIENT_ID", "client_secret": "CRM_CLIENT_SECRET"}
        if configured
        else {},
        tools=[DiscoveredTool(name="echo", readOnly=True), DiscoveredTool(name="whoami", readOnly=True)],
    )
    return create_connector(defs)


async def echo(url: str, *, times: int = 1, **kwargs: Any) -> list[Any]:
    live = connector(url, **kwargs)
    try:
        return [await live.execute(f"mcp.{ID8}.echo", {"text": "hi"}, env=ENV) for _ in range(times)]
    finally:
        await live.aclose()


def echo_text(answer: Any) -> str:
    return json.dumps(answer)


async def consent(url: str) -> None:
    """What a person's browser does: the consent page (approved at once) redirects to the loopback
    listener, which the browser then opens."""
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False) as browser:
        page = await browser.get(url)
        assert page.status_code == 302, page.text
        location = page.headers["location"]
        assert location.startswith("http://127.0.0.1:") and "code=" in location
        done = await browser.get(location)
        assert done.status_code == 200 and "consent received" in done.text


async def login(peer: OAuthPeer) -> CachedServer:
    session = OAuthSession(server=NAME, mcp_url=peer.url, settings=OAuthSettings(grant="authorization_code"),
                           store=TokenStore(NAME), timeout_s=10)  # fmt: skip
    drivers: list[asyncio.Task[None]] = []
    kept = await session.login(open_url=lambda url: drivers.append(asyncio.create_task(consent(url))))
    await asyncio.gather(*drivers)
    return kept


def secrets_in(directory: Path) -> list[str]:
    """Every token and secret the token file holds, and the configured client secret."""
    found = [CLIENT_SECRET]
    for path in directory.glob("*.json"):
        data = json.loads(path.read_text())
        tokens = data.get("tokens") or {}
        found += [
            v
            for v in (tokens.get("access_token"), tokens.get("refresh_token"), data.get("client_secret"))
            if v
        ]
    return found


def test_client_credentials_from_discovery_bound_to_the_server(peer: OAuthPeer, oauth_dir: Path) -> None:
    answers = asyncio.run(echo(peer.url, times=3))
    assert all("echo: hi" in echo_text(a) for a in answers)
    stats = peer.stats()
    assert stats["issued"] == {"client_credentials": 1}  # one token for three calls
    assert stats["resources"] == [peer.url]  # RFC 8707: the token names this server
    path = oauth_dir / f"{NAME}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kept = json.loads(path.read_text())
    assert kept["issuer"] == peer.issuer and kept["resource"] == peer.url
    assert CLIENT_SECRET not in path.read_text()  # a configured secret stays in its Secret


def test_a_revoked_access_token_is_replaced_once_after_the_401(peer: OAuthPeer, oauth_dir: Path) -> None:
    asyncio.run(echo(peer.url))
    peer.revoke()
    answers = asyncio.run(echo(peer.url, times=2))
    assert all("echo: hi" in echo_text(a) for a in answers)
    assert peer.issued("client_credentials") == 2


def test_a_pinned_authorization_server_the_server_does_not_name_gets_nothing(
    peer: OAuthPeer, oauth_dir: Path
) -> None:
    with pytest.raises(BuiltinToolError) as caught:
        asyncio.run(echo(peer.url, pin="https://auth.other.example"))
    assert caught.value.category == "client_error" and "auth.authorization_server" in caught.value.explanation
    assert peer.stats()["issued"] == {}  # the client secret went nowhere
    asyncio.run(echo(peer.url, pin=peer.issuer))  # the right pin works


def test_without_a_client_id_it_registers_or_says_what_to_configure(peer: OAuthPeer, oauth_dir: Path) -> None:
    # The SDK's registration endpoint registers only clients that use authorization_code: the answer
    # must say how to configure a client instead, not fail obscurely.
    with pytest.raises(BuiltinToolError) as caught:
        asyncio.run(echo(peer.url, configured=False))
    assert "client_id" in caught.value.explanation and "Secret" in caught.value.explanation


def test_a_persons_consent_with_pkce_then_refresh_before_expiry(peer: OAuthPeer, oauth_dir: Path) -> None:
    kept = asyncio.run(login(peer))
    assert kept.registered and kept.client_id and kept.tokens and kept.tokens.refresh_token
    stats = peer.stats()
    assert stats["issued"] == {"registration": 1, "authorization_code": 1}
    assert stats["resources"] == [peer.url]
    answers = asyncio.run(echo(peer.url, grant="authorization_code", configured=False))
    assert "echo: hi" in echo_text(answers[0])
    assert peer.issued("refresh_token") == 0  # the consent's token was still good
    _expire_soon(oauth_dir, seconds=30)  # inside the minute before expiry: refreshed before it is refused
    asyncio.run(echo(peer.url, grant="authorization_code", configured=False, times=2))
    assert peer.issued("refresh_token") == 1
    assert peer.stats()["resources"][-1] == peer.url


def test_a_revoked_refresh_token_asks_for_a_new_consent(peer: OAuthPeer, oauth_dir: Path) -> None:
    asyncio.run(login(peer))
    peer.revoke(refresh=True)
    with pytest.raises(BuiltinToolError) as caught:
        asyncio.run(echo(peer.url, grant="authorization_code", configured=False))
    assert caught.value.category == "auth"
    assert "connectors login crm" in caught.value.explanation
    for secret in secrets_in(oauth_dir):
        assert secret not in caught.value.explanation


def test_without_a_consent_the_error_says_to_log_in(peer: OAuthPeer, oauth_dir: Path) -> None:
    with pytest.raises(BuiltinToolError) as caught:
        asyncio.run(echo(peer.url, grant="authorization_code", configured=False))
    assert "agentengine connectors login crm" in caught.value.explanation
    assert peer.stats()["issued"] == {}


_CALLER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    sys.path.insert(0, sys.argv[3])
    from tests.integration.connectors.test_mcp_oauth import echo
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    answers = asyncio.run(echo(sys.argv[1], grant="authorization_code", configured=False))
    print(json.dumps(answers))
    """
)


def _expire_soon(directory: Path, *, seconds: float) -> None:
    path = directory / f"{NAME}.json"
    data = json.loads(path.read_text())
    data["tokens"]["expires_at"] = time.time() + seconds
    path.write_text(json.dumps(data))


def test_two_processes_refreshing_at_once_refresh_once(peer: OAuthPeer, oauth_dir: Path) -> None:
    asyncio.run(login(peer))
    _expire_soon(oauth_dir, seconds=-5)  # expired: both processes must get a new one
    start = time.time() + 5  # both have imported everything by then
    env = {**os.environ, **ENV}
    callers = [
        subprocess.Popen(
            [sys.executable, "-c", _CALLER, peer.url, str(start), str(REPO)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [c.communicate(timeout=60) for c in callers]
    for caller, (out, err) in zip(callers, outputs, strict=True):
        assert caller.returncode == 0, err[-2000:]
        assert "echo: hi" in out
    stats = peer.stats()
    assert stats["issued"].get("refresh_token") == 1, stats  # the second found the first one's tokens
    assert stats["refused_refresh"] == 0
    everything = "".join(out + err for out, err in outputs) + peer.output()
    for secret in secrets_in(oauth_dir):
        assert secret not in everything


_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(120)
    """
)


def test_a_lock_held_by_a_process_that_died_blocks_no_one(peer: OAuthPeer, oauth_dir: Path) -> None:
    oauth_dir.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(oauth_dir / f"{NAME}.json.lock")],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)  # killed mid-refresh: no chance to unlock
        holder.wait(timeout=10)
        started = time.monotonic()
        answers = asyncio.run(echo(peer.url))
        assert "echo: hi" in echo_text(answers[0]) and time.monotonic() - started < 5
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)


def test_no_token_or_secret_in_logs_or_errors(
    peer: OAuthPeer, oauth_dir: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    secrets: set[str] = set()
    asyncio.run(login(peer))
    secrets.update(secrets_in(oauth_dir))
    _expire_soon(oauth_dir, seconds=-5)
    asyncio.run(echo(peer.url, grant="authorization_code", configured=False))  # a refresh
    secrets.update(secrets_in(oauth_dir))
    peer.revoke()
    asyncio.run(echo(peer.url, grant="authorization_code", configured=False))  # a 401, a refresh
    secrets.update(secrets_in(oauth_dir))
    peer.revoke(refresh=True)
    for kwargs in ({"grant": "authorization_code", "configured": False}, {"pin": "https://x.example"}, {}):
        try:
            asyncio.run(echo(peer.url, **kwargs))
        except BuiltinToolError as exc:
            texts += [exc.explanation, repr(exc), str(exc.__context__), str(exc.__cause__)]
    captured = capfd.readouterr()
    everything = "\n".join([*texts, caplog.text, captured.out, captured.err, peer.output()])
    assert len(secrets) >= 7  # the client secret, three access and three refresh tokens
    for secret in secrets:
        assert secret not in everything


def test_agent_yaml_servers_behind_oauth_share_the_tool_pods_token_file(
    peer: OAuthPeer, oauth_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    auth = "{type: oauth, client_id_env: CRM_CLIENT_ID, client_secret_env: CRM_CLIENT_SECRET, "
    auth += f"authorization_server: '{peer.issuer}'}}"
    config.write_text(f"version: 1\nmcp:\n  servers:\n    crm:\n      url: {peer.url}\n      auth: {auth}\n")
    bundle = bundle_from_agent_config(config, env={**ENV, "OPENAI_API_KEY": "sk-x"})
    (defs,) = bundle.builtins
    assert defs.name == "mcp-crm" and defs.config["auth"] == {
        "type": "oauth",
        "grant": "client_credentials",
        "authorization_server": peer.issuer,
    }
    assert defs.credentials == {"client_id": "CRM_CLIENT_ID", "client_secret": "CRM_CLIENT_SECRET"}
    assert CLIENT_SECRET.encode() not in b"".join(bundle.files.values())
    echo_tool = next(t.name for t in defs.tools if t.name.endswith(".echo"))

    async def call() -> Any:
        live = create_connector(defs)
        try:
            return await live.execute(echo_tool, {"text": "hi"}, env=ENV)
        finally:
            await live.aclose()

    assert "echo: hi" in echo_text(asyncio.run(call()))
    assert peer.issued("client_credentials") == 1  # the bundle build's token served the Tool Pod's call
    assert (oauth_dir / "mcp-crm.json").exists()

    config.write_text(
        f"version: 1\nmcp:\n  servers:\n    crm:\n      url: {peer.url}\n"
        "      auth: {type: oauth, token_env: CRM_TOKEN}\n"
    )
    with pytest.raises(ConnectorError, match="exclude each other"):
        bundle_from_agent_config(config, env=ENV)
