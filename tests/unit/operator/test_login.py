"""The operator's login: which kubeconfig users need the client library, the light path's token file, and
the operator client's token (`ApiAuth`: a rotated file, one new login for every request refused)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import kopf
import pytest
import yaml

from agent_operator.login import ApiAuth, kubeconfig_user, login_info, needs_client_library
from tests.mounted_secret import mount_secret_key

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="  # any base64: the light path does not parse it
TOKEN = "light-path-token-5e4d"


def write_kubeconfig(
    path: Path, user: dict[str, Any], *, name: str = "dev", current: str | None = "ctx"
) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": CA}}
        ],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": name}}],
    }
    if current:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(
    ("user", "reason"),
    [
        ({"token": "t"}, None),
        ({"client-certificate-data": "x", "client-key-data": "y"}, None),
        ({"tokenFile": "/var/run/token"}, None),
        ({"exec": {"command": "/usr/local/bin/aws", "args": ["eks", "get-token", "--secret"]}}, "(aws)"),
        ({"exec": {"command": "gke-gcloud-auth-plugin"}}, "(gke-gcloud-auth-plugin)"),
        ({"auth-provider": {"name": "oidc", "config": {"refresh-token": "r"}}}, "the oidc auth-provider"),
    ],
)
def test_only_a_program_or_a_refresh_needs_the_client_library(
    user: dict[str, Any], reason: str | None
) -> None:
    found = needs_client_library(user)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found and "--secret" not in found


def test_the_first_file_naming_a_user_wins_and_a_relative_token_file_is_beside_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    first = write_kubeconfig(tmp_path / "a" / "config", {"tokenFile": "token"})
    second = write_kubeconfig(tmp_path / "second", {"token": "other"}, current=None)
    user = kubeconfig_user({"KUBECONFIG": f"{first}:{second}"})
    assert user is not None and user.name == "dev" and user.token_file == tmp_path / "a" / "token"


def test_kubeconfig_problems_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(kopf.LoginError, match=r"cannot be read.*fix KUBECONFIG"):
        kubeconfig_user({"KUBECONFIG": str(tmp_path / "absent")})
    (tmp_path / "bad").write_text("users: [\n  token: leaked-value")
    with pytest.raises(kopf.LoginError, match="not a kubeconfig") as caught:
        kubeconfig_user({"KUBECONFIG": str(tmp_path / "bad")})
    assert "leaked-value" not in str(caught.value)
    no_context = write_kubeconfig(tmp_path / "nocontext", {"token": "t"}, current=None)
    with pytest.raises(kopf.LoginError, match="use-context"):
        kubeconfig_user({"KUBECONFIG": str(no_context)})


def test_the_light_path_reads_a_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = write_kubeconfig(tmp_path / "config", {"tokenFile": str(tmp_path / "token")})
    monkeypatch.setenv("KUBECONFIG", str(config))
    info = login_info(settings=kopf.OperatorSettings(), logger=logging.getLogger("test"))
    assert info is not None and info.token == TOKEN and info.server == "https://127.0.0.1:6443"
    (tmp_path / "token").write_text("")
    with pytest.raises(kopf.LoginError, match="is empty") as caught:
        login_info(settings=kopf.OperatorSettings(), logger=logging.getLogger("test"))
    assert TOKEN not in str(caught.value)


def test_api_auth_reads_a_rotated_token_file_at_most_once_per_interval(tmp_path: Path) -> None:
    now = [100.0]
    path = mount_secret_key(tmp_path / "sa", "first")
    auth = ApiAuth("first", relogin=lambda: None, token_file=path, check_interval_s=5.0, clock=lambda: now[0])

    async def scenario() -> list[str]:
        seen = [await auth.header()]
        mount_secret_key(tmp_path / "sa", "second")
        now[0] += 4.0  # within the interval: the file is not looked at
        seen.append(await auth.header())
        now[0] += 1.0
        seen.append(await auth.header())
        return seen

    assert asyncio.run(scenario()) == ["Bearer first", "Bearer first", "Bearer second"]
    assert auth.renewals == 0


def test_api_auth_renews_once_for_every_request_refused_with_the_same_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logins: list[str] = []
    release = threading.Event()

    def relogin() -> str:
        release.wait(5)  # a slow exec plugin: the other refused requests arrive meanwhile
        logins.append("login")
        return "renewed-token-9a8b"

    auth = ApiAuth("expired", relogin=relogin)

    async def scenario() -> list[str]:
        refused = await auth.header()
        renewals = [asyncio.create_task(auth.renew(refused)) for _ in range(20)]
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(*renewals)
        after = await auth.header()
        await auth.renew(refused)  # a late request refused with the old token: no further login
        return [refused, after]

    with caplog.at_level(logging.INFO, logger="agent_operator.login"):
        assert asyncio.run(scenario()) == ["Bearer expired", "Bearer renewed-token-9a8b"]
    assert logins == ["login"] and auth.renewals == 1
    assert "logged in again after a 401" in caplog.text and "renewed-token-9a8b" not in caplog.text


def test_api_auth_keeps_the_token_when_a_new_login_fails_and_says_why_without_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def relogin() -> str:
        raise RuntimeError("plugin printed secret-token-value")

    auth = ApiAuth("secret-token-value", relogin=relogin)

    async def scenario() -> str:
        refused = await auth.header()
        await auth.renew(refused)
        return await auth.header()

    with caplog.at_level(logging.WARNING, logger="agent_operator.login"):
        assert asyncio.run(scenario()) == "Bearer secret-token-value"
    assert auth.renewals == 0
    assert "logging in again after a 401 failed" in caplog.text and "secret-token-value" not in caplog.text


def test_api_auth_only_for_a_token_login() -> None:
    assert ApiAuth.for_login(SimpleNamespace(token=None), relogin=lambda: None) is None
    auth = ApiAuth.for_login(SimpleNamespace(token="t"), relogin=lambda: SimpleNamespace(token="u"))
    assert auth is not None and asyncio.run(auth.header()) == "Bearer t"
