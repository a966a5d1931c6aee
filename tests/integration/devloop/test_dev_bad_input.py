"""`agentengine dev` refuses what it cannot run with one line naming the fix, a non-zero exit and no
traceback, and leaves nothing behind (each run in a real pseudo-terminal)."""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import AGENTENGINE, cli_env

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "echo-agent"


def _work_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("agentengine-dev-*"))


def _run(*args: str, cwd: Path = REPO_ROOT) -> tuple[int, str]:
    before = _work_dirs()
    output, status = pexpect.run(
        AGENTENGINE,
        args=["dev", *args],
        env=cli_env(),
        cwd=str(cwd),
        withexitstatus=True,
        timeout=120,
        encoding="utf-8",
    )
    assert _work_dirs() <= before, "a refused run left its directory behind"
    return int(status), output


def _one_error_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert "Traceback" not in output, output
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, output
    return errors[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_an_unknown_directory(tmp_path: Path) -> None:
    status, output = _run(str(tmp_path / "nowhere"))
    assert status != 0
    assert "no such directory; give the agent's directory" in _one_error_line(output)


def test_a_directory_without_agent_yaml(tmp_path: Path) -> None:
    status, output = _run(str(tmp_path))
    assert status != 0
    line = _one_error_line(output)
    assert "has no agent.yaml; create one" in line


def test_a_directory_without_an_entrypoint(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("version: 1\nconnectors: []\n")
    status, output = _run(str(tmp_path))
    assert status != 0
    assert "pass --entrypoint MODULE:APP" in _one_error_line(output)


def test_the_oe_port_taken(taken_port: int) -> None:
    status, output = _run(str(EXAMPLE), "--port", str(taken_port))
    assert status != 0
    line = _one_error_line(output)
    assert f"port {taken_port} is taken" in line and "pass --port N" in line


def test_a_malformed_database_url_and_an_unknown_connector() -> None:
    status, output = _run(str(REPO_ROOT / "examples" / "orders-agent"), "--db", "shop-db")
    assert status != 0
    assert "write CONNECTOR=URL" in _one_error_line(output)
    status, output = _run(
        str(REPO_ROOT / "examples" / "orders-agent"),
        "--port",
        str(free_port()),
        "--db",
        "nope=postgresql://h/db",
    )
    assert status != 0
    assert "has no built-in connector 'nope' (it has: order-events, shop-db, team-slack)" in _one_error_line(
        output
    )


def test_a_platform_variable_is_not_a_secret() -> None:
    status, output = _run(str(EXAMPLE), "--set", "RUNNER_MODE=oe")
    assert status == 2
    assert "--set RUNNER_MODE: a platform variable" in _one_error_line(output)


def test_a_bad_model_script(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"say": "hi"}]))
    status, output = _run(str(EXAMPLE), "--model", f"scripted:{script}")
    assert status == 2
    assert "turn 0" in _one_error_line(output)


def test_a_missing_tool_pod_secret_names_where_to_give_it(tmp_path: Path) -> None:
    """The example without its .env: the Tool Pod's own refusal, and how to give the secret locally."""
    import shutil

    target = tmp_path / "echo-agent"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__", ".env"))
    status, output = _run(str(target), "--port", str(free_port()))
    assert status != 0
    line = _one_error_line(output)
    assert "ECHO_SIGNING_KEY" in line and "--set NAME=VALUE" in line
