import pytest

from agent_runtime.contract import (
    PORTS,
    WELL_KNOWN_LLM_KEY_NAMES,
    RunnerMode,
    is_platform_env,
    llm_credential_names,
    tenant_env_vars,
    tenant_secret_env,
)


def test_ports_are_fixed_per_mode() -> None:
    assert dict(PORTS) == {
        RunnerMode.AER: 8001,
        RunnerMode.TOOL: 8002,
        RunnerMode.MEMORY: 8081,
        RunnerMode.OE: 8080,
    }


@pytest.mark.parametrize(
    "name",
    [
        "AGENTIC_CONNECTOR_BUNDLE_PATH",
        "AGENT_ENTRYPOINT",
        "RUNTIME_TOKEN_FILE",
        "RUNNER_MODE",
        "KUBERNETES_SERVICE_HOST",
        "PYTHONPATH",
        "LC_ALL",
        "PATH",
        "HOME",
        "HOSTNAME",
        "APP_HOST",
        "STRUCTURED_LOGGING",
        "MEMORY_SERVICE_HOST",
        "MEMORY_SERVICE_PORT_HTTP",
        "MEMORY_PORT_8081_TCP_ADDR",
        "APP_ID",
        "REQUIRE_PROJECT_SCOPED_DB",
        "RUNNER_DRAIN_MAX_DEADLINE_MS",
        "AGENTIC_LLM_CREDENTIAL_NAMES",
    ],
)
def test_platform_variables(name: str) -> None:
    assert is_platform_env(name)


@pytest.mark.parametrize(
    "name", ["JIRA_API_TOKEN", "STRIPE_KEY", "DATABASE_URL", "AGENTX", "DB_PORT", "STRIPE_PORTAL_KEY"]
)
def test_tenant_secrets(name: str) -> None:
    assert not is_platform_env(name)


def test_tenant_secret_env_drops_platform_variables() -> None:
    env = {"PATH": "/bin", "RUNNER_MODE": "tool", "JIRA_API_TOKEN": "s3cret", "X_SERVICE_PORT": "80"}
    assert tenant_secret_env(env) == {"JIRA_API_TOKEN": "s3cret"}


def test_tenant_env_vars_drop_listed_and_well_known_llm_credentials() -> None:
    env = {
        "AGENTIC_LLM_CREDENTIAL_NAMES": " MY_LLM_KEY , ,OTHER_LLM",
        "MY_LLM_KEY": "k1",
        "OTHER_LLM": "k2",
        "OPENAI_API_KEY": "k3",
        "AZURE_OPENAI_API_KEY": "k4",
        "APP_ID": "team-a.bot",
        "TABLEAU_HOST": "127.0.0.1",
    }
    assert tenant_env_vars(env) == {"TABLEAU_HOST": "127.0.0.1"}
    # The Tool Pod's connector secrets are not narrowed by this: only `${VAR}` interpolation is.
    assert "OPENAI_API_KEY" in tenant_secret_env(env) and "APP_ID" not in tenant_secret_env(env)


def test_llm_credential_names_without_the_operator_list_are_the_well_known_ones() -> None:
    assert llm_credential_names({}) == WELL_KNOWN_LLM_KEY_NAMES
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY"} <= WELL_KNOWN_LLM_KEY_NAMES
    assert tenant_env_vars({"GEMINI_API_KEY": "k", "JIRA_API_TOKEN": "t"}) == {"JIRA_API_TOKEN": "t"}
