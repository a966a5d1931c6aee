"""What `agentengine dev DIR` reads from the directory: entrypoint, name, memory use, database URLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime.devloop import watch
from agent_runtime.devloop.project import (
    DevError,
    agent_name,
    database_address,
    find_entrypoint,
    parse_connector_url,
    project_bundle,
    resolve,
)
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.unit


def _agent(tmp_path: Path, code: str = "app = object()\n") -> Path:
    (tmp_path / "agent.yaml").write_text("version: 1\nconnectors: []\n")
    (tmp_path / "my_agent").mkdir()
    (tmp_path / "my_agent" / "__init__.py").write_text("")
    (tmp_path / "my_agent" / "agent.py").write_text(code)
    return tmp_path


@pytest.mark.parametrize("example", ["echo-agent", "langgraph-agent", "orders-agent"])
def test_each_example_resolves_from_its_dockerfile(example: str) -> None:
    project = resolve(REPO_ROOT / "examples" / example, entrypoint=None, memory=None, environ={})
    assert project.agent == f"dev/{example}"
    assert project.entrypoint.endswith(".agent:app")
    assert not project.uses_memory


def test_the_flag_beats_the_environment_and_the_module_must_exist(tmp_path: Path) -> None:
    directory = _agent(tmp_path)
    env = {"AGENT_ENTRYPOINT": "other.mod:app"}
    assert find_entrypoint(directory, given="my_agent.agent:app", environ=env) == "my_agent.agent:app"
    with pytest.raises(DevError, match=r"\$AGENT_ENTRYPOINT 'other.mod:app': no module other.mod"):
        find_entrypoint(directory, given=None, environ=env)
    with pytest.raises(DevError, match="is not MODULE:APP"):
        find_entrypoint(directory, given="my_agent.agent", environ={})


def test_memory_is_run_when_the_code_uses_it(tmp_path: Path) -> None:
    directory = _agent(tmp_path, "async def run(app):\n    await app.memory.search('x')\n")
    assert resolve(directory, entrypoint="my_agent.agent:app", memory=None, environ={}).uses_memory
    assert not resolve(directory, entrypoint="my_agent.agent:app", memory=False, environ={}).uses_memory


def test_a_directory_name_becomes_a_kubernetes_name() -> None:
    assert agent_name(Path("/x/My_Agent v2")) == "my-agent-v2"
    assert agent_name(Path("/x/___")) == "agent"


def test_a_database_url_becomes_config_and_a_password() -> None:
    address = database_address("shop-db", "postgres", "postgresql://ann:p%40ss@db.local:5433/shop")
    assert address.config == {"host": "db.local", "port": 5433, "database": "shop", "user": "ann"}
    assert address.password == "p@ss"
    with pytest.raises(DevError, match="is not postgresql://"):
        database_address("shop-db", "postgres", "mysql://h/db")
    with pytest.raises(DevError, match="only postgres/mysql do"):
        database_address("hook", "webhook", "postgresql://h/db")


def test_a_change_is_seen_and_caches_are_not(tmp_path: Path) -> None:
    directory = _agent(tmp_path)
    before = watch.snapshot(directory)
    (directory / "my_agent" / "__pycache__").mkdir()
    (directory / "my_agent" / "__pycache__" / "agent.cpython-311.pyc").write_bytes(b"x")
    (directory / ".agent.py.swp").write_text("x")
    assert watch.changed(before, watch.snapshot(directory)) == []
    (directory / "my_agent" / "agent.py").write_text("app = 1\n# edited\n")
    (directory / "my_agent" / "tools.py").write_text("")
    assert watch.changed(before, watch.snapshot(directory)) == ["my_agent/agent.py", "my_agent/tools.py"]


def test_a_connector_url_sets_the_openapi_connectors_base_url() -> None:
    project = resolve(str(REPO_ROOT / "examples" / "echo-agent"), entrypoint=None, memory=None)
    assert parse_connector_url("echo=http://127.0.0.1:9000/") == ("echo", "http://127.0.0.1:9000")
    plain, _ = project_bundle(project, environ={})
    moved, secrets = project_bundle(project, connector_urls=[("echo", "http://127.0.0.1:9000")], environ={})
    assert [c.source.base_url for c in plain.connectors] == ["http://127.0.0.1:8080"]
    assert [c.source.base_url for c in moved.connectors] == ["http://127.0.0.1:9000"]
    assert moved.digest != plain.digest and secrets == {}
    with pytest.raises(DevError, match=r"has no OpenAPI connector 'nope' \(it has: echo\)"):
        project_bundle(project, connector_urls=[("nope", "http://127.0.0.1:9")], environ={})
    for bad in ("echo", "echo=", "=http://h", "echo=ftp://h/x", "echo=http://"):
        with pytest.raises(DevError, match="write CONNECTOR=URL"):
            parse_connector_url(bad)
