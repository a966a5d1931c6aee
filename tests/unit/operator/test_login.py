"""The operator's login: which kubeconfig users need the client library, and the light path's token file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from agent_operator.login import kubeconfig_user, login_info, needs_client_library

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
