"""`agentengine connectors login NAME`: the real CLI process, a person's consent driven by a real HTTP client
through the loopback redirect, and the Tool Pod's connector working from the file it wrote (as the
operator's Secret mount seeds it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agent_runtime.connectors.mcp.oauth_store import DIR_ENV, SEED_ENV
from tests.integration.connectors.test_mcp_oauth import NAME, echo, echo_text, peer  # noqa: F401
from tests.providers.mcp_oauth_peer import OAuthPeer

CLI = Path(sys.executable).with_name("agentengine")


def test_login_through_the_loopback_redirect_then_the_tool_pod_refreshes_alone(
    peer: OAuthPeer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    laptop = tmp_path / "laptop"
    env = {**os.environ, DIR_ENV: str(laptop)}
    argv = [str(CLI), "connectors", "login", NAME, "--url", peer.url, "--no-browser", "--wait", "60"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = []
        while True:
            line = process.stderr.readline()
            assert line, f"the CLI ended before showing the consent URL: {''.join(lines)}"
            lines.append(line)
            if line.startswith("http://127.0.0.1:"):
                consent = line.strip()
                break
        with httpx.Client(follow_redirects=False, trust_env=False) as browser:
            page = browser.get(consent)
            assert page.status_code == 302
            redirect = page.headers["location"]
            # Something else on the machine answering the listener with another state is turned away,
            # and the login goes on waiting for the real answer.
            forged = redirect.split("?", 1)[0] + "?code=forged&state=not-the-one"
            assert browser.get(forged).status_code == 400
            done = browser.get(redirect)
            assert done.status_code == 200
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, err
    err = "".join(lines) + err
    kept = laptop / f"{NAME}.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert f"create secret generic mcp-oauth-{NAME} --from-file={NAME}.json=" in err
    data = json.loads(kept.read_text())
    assert data["grant"] == "authorization_code" and data["tokens"]["refresh_token"]
    for secret in (data["tokens"]["access_token"], data["tokens"]["refresh_token"]):
        assert secret not in out + err
    assert peer.stats()["issued"] == {"registration": 1, "authorization_code": 1}

    # The cluster: the Secret mounted read-only as the seed, a writable empty directory for the Tool Pod.
    seed, pod_dir = tmp_path / "seed", tmp_path / "pod"
    seed.mkdir()
    shutil.copy(kept, seed / f"{NAME}.json")
    seed.chmod(0o500)
    monkeypatch.setenv(DIR_ENV, str(pod_dir))
    monkeypatch.setenv(SEED_ENV, str(seed))
    try:
        peer.revoke()  # the access token is gone: the Tool Pod must refresh with the seeded refresh token
        answers = asyncio.run(echo(peer.url, grant="authorization_code", configured=False, times=2))
    finally:
        seed.chmod(0o700)
    assert all("echo: hi" in echo_text(a) for a in answers)
    assert peer.issued("refresh_token") == 1
    assert (pod_dir / f"{NAME}.json").exists() and json.loads((seed / f"{NAME}.json").read_text()) == data
