"""agent.yaml loading: `${VAR}` only on `mcp.servers.*.url`, only from the tenant's variables (L-03)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.agent_config import AgentConfigError, interpolate, load_runtime_agent_config
from agent_runtime.contract import tenant_env_vars

SECRET = "s3cret-value-never-in-errors"
ENVIRON = {
    "TABLEAU_HOST": "127.0.0.1:8443",
    "TABLEAU_TOKEN": SECRET,
    "OPENAI_API_KEY": SECRET,
    "MY_LLM_KEY": SECRET,
    "AGENTIC_LLM_CREDENTIAL_NAMES": "MY_LLM_KEY",
    "RUNNER_MODE": "aer",
    "APP_ID": "team-a.support-bot",
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return path


def _load(tmp_path: Path, url: str, *, extra: str = "") -> str:
    path = _write(tmp_path, f"version: 1\nmcp:\n  servers:\n    tableau:\n      url: '{url}'\n{extra}")
    config = load_runtime_agent_config(path, env_vars=tenant_env_vars(ENVIRON))
    return config.mcp.servers["tableau"].url


def test_happy_path_substitutes_a_tenant_variable(tmp_path: Path) -> None:
    extra = "      auth:\n        token_env: TABLEAU_TOKEN\n"
    path = _write(
        tmp_path,
        "version: 1\nconnectors: []\nmcp:\n  servers:\n    tableau:\n"
        "      url: https://${TABLEAU_HOST}/mcp\n" + extra,
    )
    config = load_runtime_agent_config(path, env_vars=tenant_env_vars(ENVIRON))
    server = config.mcp.servers["tableau"]
    assert server.url == "https://127.0.0.1:8443/mcp"
    assert server.auth is not None and server.auth.token_env == "TABLEAU_TOKEN"
    assert config.version == 1 and config.connectors == []


def test_undefined_variable_is_not_a_tenant_variable(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError) as caught:
        _load(tmp_path, "https://${NOT_SET}/mcp")
    message = str(caught.value)
    assert "agent.yaml: mcp.servers.tableau.url" in message
    assert "${NOT_SET}" in message and "not a tenant variable" in message


@pytest.mark.parametrize(
    ("url", "token"),
    [
        ("https://${}/mcp", "${}"),
        ("https://${1X}/mcp", "${1X}"),
        ("https://${TABLEAU_HOST/mcp", "${TABLEAU_HOST/mcp"),
        ("https://${TABLEAU_HOST:-127.0.0.1}/mcp", "${TABLEAU_HOST:-127.0.0.1}"),
    ],
)
def test_malformed_placeholders_name_the_path_and_the_token(tmp_path: Path, url: str, token: str) -> None:
    with pytest.raises(AgentConfigError) as caught:
        _load(tmp_path, url)
    assert "mcp.servers.tableau.url" in str(caught.value)
    assert repr(token) in str(caught.value)


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_LLM_KEY", "RUNNER_MODE", "APP_ID"])
def test_platform_owned_variables_are_filtered_before_interpolation(tmp_path: Path, name: str) -> None:
    with pytest.raises(AgentConfigError) as caught:
        _load(tmp_path, f"https://127.0.0.1/${{{name}}}")
    assert f"${{{name}}} is not a tenant variable" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_placeholders_outside_the_allow_list_stay_verbatim(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "version: 1\nconnectors:\n  - source: connectors/${TABLEAU_HOST}/tool.yaml\n"
        "notes: '${TABLEAU_HOST} ${X:-d} ${'\n"
        "mcp:\n  servers:\n    tableau:\n      url: https://127.0.0.1/mcp?q=$TABLEAU_HOST\n",
    )
    config = load_runtime_agent_config(path, env_vars=tenant_env_vars(ENVIRON))
    assert config.connectors[0].source == "connectors/${TABLEAU_HOST}/tool.yaml"
    assert config.mcp.servers["tableau"].url == "https://127.0.0.1/mcp?q=$TABLEAU_HOST"
    assert "notes" not in config.model_dump()  # other owners' keys are ignored, not interpolated


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_LLM_KEY", "AGENTIC_OE_URL", "APP_ID"])
def test_token_env_naming_a_platform_variable_is_refused(tmp_path: Path, name: str) -> None:
    path = _write(
        tmp_path,
        "version: 1\nmcp:\n  servers:\n    tableau:\n      url: https://127.0.0.1/mcp\n"
        f"      auth:\n        token_env: {name}\n",
    )
    with pytest.raises(AgentConfigError) as caught:
        load_runtime_agent_config(
            path, env_vars=tenant_env_vars(ENVIRON), llm_credential_names={"OPENAI_API_KEY", "MY_LLM_KEY"}
        )
    assert "mcp.servers.tableau.auth.token_env" in str(caught.value)
    assert f"{name} is a platform variable" in str(caught.value)


def test_double_dollar_escapes_a_literal_placeholder(tmp_path: Path) -> None:
    assert (
        _load(tmp_path, "https://127.0.0.1/mcp?t=$${TABLEAU_HOST}")
        == "https://127.0.0.1/mcp?t=${TABLEAU_HOST}"
    )


def test_an_invalid_url_after_interpolation_never_quotes_the_value(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError) as caught:
        _load(tmp_path, "${TABLEAU_TOKEN}")
    assert "mcp.servers.tableau.url" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://${HOST}/mcp", "https://127.0.0.1/mcp"),
        ("${HOST}${HOST}", "127.0.0.1127.0.0.1"),
        ("$HOST and $ alone", "$HOST and $ alone"),
        ("$${HOST}", "${HOST}"),
        ("${NESTED}", "${HOST}"),  # substituted text is not scanned again
        ("", ""),
    ],
)
def test_interpolate(value: str, expected: str) -> None:
    env = {"HOST": "127.0.0.1", "NESTED": "${HOST}"}
    assert interpolate(value, env_vars=env, path="p") == expected


@pytest.mark.parametrize("value", ["${}", "${1X}", "${X", "${X:-d}", "${X Y}", "${${X}}"])
def test_interpolate_refuses_malformed_placeholders(value: str) -> None:
    with pytest.raises(AgentConfigError, match=r"^p: (malformed|unclosed) placeholder"):
        interpolate(value, env_vars={"X": "1"}, path="p")
