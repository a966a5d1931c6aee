"""MCP OAuth's decisions (pure) and its token file with its lock (real files, real processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_runtime.connectors.mcp.oauth import (
    CachedServer,
    OAuthError,
    TokenSet,
    authorization_url,
    challenge_params,
    check_endpoint,
    check_server_name,
    choose_issuer,
    parse_protected_resource,
    parse_server_metadata,
    protected_resource_urls,
    s256,
    server_metadata_urls,
    token_error,
    token_form,
    token_set,
    usable_token,
)
from agent_runtime.connectors.mcp.oauth_store import DIR_ENV, SEED_ENV, TokenStore

MCP = "https://mcp.example.com/mcp"
AS = "https://auth.example.com"
META = {
    "issuer": AS,
    "token_endpoint": f"{AS}/token",
    "authorization_endpoint": f"{AS}/authorize",
    "registration_endpoint": f"{AS}/register",
    "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
    "code_challenge_methods_supported": ["S256"],
}


def test_challenge_params_read_the_resource_metadata_url() -> None:
    header = (
        'Bearer error="invalid_token", error_description="Authentication \\"required\\"", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope=tools'
    )
    params = challenge_params(header)
    assert params["resource_metadata"] == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert params["error_description"] == 'Authentication "required"'
    assert params["scope"] == "tools"
    assert challenge_params('Basic realm="x"') == {}


def test_well_known_places_in_order() -> None:
    assert protected_resource_urls(MCP, announced=None) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_urls(MCP, announced="https://x/y")[0] == "https://x/y"
    assert server_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert server_metadata_urls("http://127.0.0.1:9/")[0] == (
        "http://127.0.0.1:9/.well-known/oauth-authorization-server"
    )


def test_resource_metadata_must_name_this_server() -> None:
    ok = parse_protected_resource({"resource": MCP + "/", "authorization_servers": [AS]}, mcp_url=MCP)
    assert ok.authorization_servers == [AS]
    with pytest.raises(OAuthError, match="another resource"):
        parse_protected_resource(
            {"resource": "https://evil.example/mcp", "authorization_servers": [AS]}, mcp_url=MCP
        )
    with pytest.raises(OAuthError, match="RFC 9728"):
        parse_protected_resource({"resource": MCP}, mcp_url=MCP)


def test_a_pinned_authorization_server_must_be_listed() -> None:
    found = parse_protected_resource(
        {"resource": MCP, "authorization_servers": ["https://evil.example", AS]}, mcp_url=MCP
    )
    assert choose_issuer(found, pinned=None) == "https://evil.example"
    assert choose_issuer(found, pinned=AS + "/") == AS
    with pytest.raises(OAuthError, match=r"auth\.authorization_server"):
        choose_issuer(found, pinned="https://other.example")


def test_server_metadata_checks() -> None:
    meta = parse_server_metadata(META, issuer=AS + "/", mcp_url=MCP, grant="client_credentials")
    assert meta.token_endpoint == f"{AS}/token"
    with pytest.raises(OAuthError, match="another issuer"):
        parse_server_metadata({**META, "issuer": "https://evil.example"}, issuer=AS, mcp_url=MCP,
                              grant="client_credentials")  # fmt: skip
    with pytest.raises(OAuthError, match="not an https URL"):
        parse_server_metadata({**META, "token_endpoint": "http://auth.example.com/token"}, issuer=AS,
                              mcp_url=MCP, grant="client_credentials")  # fmt: skip
    with pytest.raises(OAuthError, match="S256"):
        parse_server_metadata({**META, "code_challenge_methods_supported": ["plain"]}, issuer=AS,
                              mcp_url=MCP, grant="authorization_code")  # fmt: skip
    with pytest.raises(OAuthError, match="does not offer the client_credentials grant"):
        parse_server_metadata({**META, "grant_types_supported": ["authorization_code"]}, issuer=AS,
                              mcp_url=MCP, grant="client_credentials")  # fmt: skip
    # Plain http is for loopback, or beside an MCP server that is plain http itself.
    assert check_endpoint("http://127.0.0.1:8/token", mcp_url=MCP, what="t")
    assert check_endpoint("http://auth.svc:8/token", mcp_url="http://mcp.svc/mcp", what="t")


def test_pkce_s256_is_rfc_7636s_example() -> None:
    assert s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == (
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )
    url = authorization_url(f"{AS}/authorize", client_id="c", redirect_uri="http://127.0.0.1:5/callback",
                            challenge="ch", state="st", resource=MCP, scope="tools")  # fmt: skip
    assert "code_challenge_method=S256" in url and "resource=https%3A%2F%2Fmcp.example.com%2Fmcp" in url


def test_every_token_request_names_the_resource() -> None:
    for grant in ("client_credentials", "refresh_token", "authorization_code"):
        form = token_form(grant, client_id="c", client_secret=None, resource=MCP, refresh_token="r",
                          code="x", code_verifier="v", redirect_uri="http://127.0.0.1/cb")  # fmt: skip
        assert form["resource"] == MCP and "client_secret" not in form


def test_tokens_kept_and_when_they_are_used() -> None:
    first = token_set({"access_token": "a1", "expires_in": 600, "refresh_token": "r1"}, now=1000.0)
    assert first.expires_at == 1600.0
    second = token_set({"access_token": "a2", "expires_in": 600}, now=1500.0, previous=first)
    assert second.refresh_token == "r1"  # a refresh answer without a new one keeps the old one
    assert usable_token(first, now=1500.0) == "a1"
    assert usable_token(first, now=1545.0) is None  # within a minute of its expiry: refresh now
    assert usable_token(first, now=1000.0, rejected="a1") is None
    assert usable_token(TokenSet(access_token="x"), now=1e12) == "x"  # no expiry given
    with pytest.raises(OAuthError, match="Bearer"):
        token_set({"access_token": "a", "token_type": "mac"}, now=0)


def test_token_errors_never_echo_the_server() -> None:
    error = token_error(400, {"error": "invalid_grant", "error_description": "rt-SECRET is revoked"},
                        grant="refresh_token")  # fmt: skip
    assert "connectors login" in error.explanation and "SECRET" not in error.explanation
    odd = token_error(
        400, {"error": "rt-SECRET-value-that-is-long-and-not-a-code"}, grant="client_credentials"
    )
    assert "SECRET" not in odd.explanation and "HTTP 400" in odd.explanation


def test_server_names_cannot_leave_the_directory() -> None:
    assert check_server_name("mcp-github") == "mcp-github"
    for bad in ("../x", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(OAuthError, match="OAuth token file"):
            check_server_name(bad)


# -- the token file and its lock ---------------------------------------------------------------------------


def _state(access: str) -> CachedServer:
    return CachedServer(resource=MCP, issuer=AS, token_endpoint=f"{AS}/token",
                        tokens=TokenSet(access_token=access, refresh_token="r"))  # fmt: skip


def test_the_file_is_0600_and_replaced_whole(tmp_path: Path) -> None:
    store = TokenStore("srv", env={DIR_ENV: str(tmp_path / "oauth")})
    assert store.read() is None
    store.write(_state("a1"))
    store.write(_state("a2"))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    assert store.read().tokens.access_token == "a2"  # type: ignore[union-attr]
    assert sorted(p.name for p in store.directory.iterdir()) == ["srv.json"]  # no temporary left behind


def test_a_seed_fills_in_until_a_file_is_written(tmp_path: Path) -> None:
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "srv.json").write_text(_state("seeded").model_dump_json())
    store = TokenStore("srv", env={DIR_ENV: str(tmp_path / "oauth"), SEED_ENV: str(seed)})
    assert store.read().tokens.access_token == "seeded"  # type: ignore[union-attr]
    store.write(_state("mine"))
    assert store.read().tokens.access_token == "mine"  # type: ignore[union-attr]


def test_a_newer_consent_in_the_seed_replaces_the_kept_file(tmp_path: Path) -> None:
    """The console consent patched the Secret and the kubelet refreshed the mount: the Tool Pod takes the
    newer consent at its next read, without a restart; an older or equal one does not win."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "srv.json").write_text(
        _state("first").model_copy(update={"consented_at": 10.0}).model_dump_json()
    )
    store = TokenStore("srv", env={DIR_ENV: str(tmp_path / "oauth"), SEED_ENV: str(seed)})
    refreshed = store.read().model_copy(update={"tokens": TokenSet(access_token="refreshed")})  # type: ignore[union-attr]
    store.write(refreshed)  # the Tool Pod's own refresh keeps the seed's consented_at
    assert store.read().tokens.access_token == "refreshed"  # type: ignore[union-attr]
    again = seed / "..new"
    again.write_text(_state("second").model_copy(update={"consented_at": 20.0}).model_dump_json())
    again.replace(seed / "srv.json")  # the kubelet swaps the file, never writes it in place
    assert store.read().tokens.access_token == "second"  # type: ignore[union-attr]
    (seed / "srv.json").write_text("{broken")  # a broken seed beside a good kept file: the kept one
    assert store.read().tokens.access_token == "refreshed"  # type: ignore[union-attr]


def test_a_broken_file_names_the_fix(tmp_path: Path) -> None:
    store = TokenStore("srv", env={DIR_ENV: str(tmp_path)})
    store.path.write_text("{not json")
    with pytest.raises(OAuthError, match="connectors login srv"):
        store.read()


_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(60)
    """
)


def _holder(lock_path: Path) -> subprocess.Popen[str]:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock_path)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


async def _take(store: TokenStore, timeout_s: float) -> float:
    started = time.monotonic()
    async with store.locked(timeout_s=timeout_s):
        return time.monotonic() - started


def test_a_live_holder_blocks_and_a_dead_one_does_not(tmp_path: Path) -> None:
    store = TokenStore("srv", env={DIR_ENV: str(tmp_path)})
    holder = _holder(store.lock_path)
    try:
        with pytest.raises(OAuthError, match="held the OAuth token lock"):
            asyncio.run(_take(store, 0.3))
        os.kill(holder.pid, signal.SIGKILL)  # dies holding the lock, no cleanup of its own
        holder.wait(timeout=10)
        assert store.lock_path.exists()  # the file stays; the lock went with the process
        assert asyncio.run(_take(store, 5.0)) < 1.0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
