import pytest

from agent_runtime.contract import PORTS, RunnerMode, is_platform_env, tenant_secret_env


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
