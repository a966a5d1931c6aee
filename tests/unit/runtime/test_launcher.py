import pytest

from agent_runtime.contract import RunnerMode
from agent_runtime.launcher import LaunchError, select_mode, select_port


@pytest.mark.parametrize(
    ("raw", "mode"),
    [
        ("aer", RunnerMode.AER),
        (" TOOL ", RunnerMode.TOOL),
        ("oe", RunnerMode.OE),
        ("memory", RunnerMode.MEMORY),
    ],
)
def test_select_mode(raw: str, mode: RunnerMode) -> None:
    assert select_mode({"RUNNER_MODE": raw}) is mode


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "RUNNER_MODE is not set; set it to one of: aer, tool, memory, oe"),
        ({"RUNNER_MODE": "worker"}, "'worker' is not a runner mode"),
    ],
)
def test_select_mode_refuses(env: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        select_mode(env)


def test_select_port() -> None:
    assert select_port(RunnerMode.TOOL, {}) == 8002
    assert select_port(RunnerMode.AER, {}) == 8001
    assert select_port(RunnerMode.TOOL, {"RUNTIME_PORT": "18002"}) == 18002
    with pytest.raises(LaunchError, match="RUNTIME_PORT='x' is not a TCP port"):
        select_port(RunnerMode.TOOL, {"RUNTIME_PORT": "x"})
