"""`agentengine dev examples/echo-agent` in a pseudo-terminal: the agent answers through the real OE, AER and
Tool Pod; the CLI in another terminal follows and approves; an edit restarts the AER and the Tool Pod while
the OE keeps its executions; the secrets reach only the Tool Pod; Ctrl-C leaves no process and no directory.

The tests of this module share one `agentengine dev` (on a copy of the example, so edits stay in tmp) and run
in file order: the scripted turns are the first invocation's, Ctrl-C is the last test.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_operator import render
from agent_runtime import contract
from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import DevSession, cli_env, environ_of, gone

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "echo-agent"
SHELL_CANARY = "dev-shell-credential-Canary-5d1e"
SCRIPT = [
    {"tool_calls": [{"name": "word_count", "args": {"text": "hello brave new world"}}]},
    {"tool_calls": [{"name": "sign_message", "args": {"message": "hello brave new world"}}]},
    {"text": "4 words, and the sentence is signed."},
]


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("dev") / "echo-agent"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture(scope="module")
def dev(agent_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevSession]:
    script = tmp_path_factory.mktemp("script") / "turns.json"
    script.write_text(json.dumps(SCRIPT))
    # A credential of the developer's shell: no component may see it.
    env = cli_env(DEV_SHELL_SECRET=SHELL_CANARY, OPENAI_API_KEY=SHELL_CANARY)
    session = DevSession.start(agent_dir, "--model", f"scripted:{script}", port=free_port(), env=env)
    yield session
    session.close()


def test_the_banner_says_where_each_part_listens(dev: DevSession) -> None:
    for part in ("OE", "AER", "Tool Pod", "model", "console"):
        assert f"  {part} " in dev.banner
    assert f"{dev.oe_url}/console" in dev.banner
    assert dev.agent == "dev/echo-agent"
    assert "agentengine invoke dev/echo-agent" in dev.banner
    assert dev.workdir.is_dir()
    # The keys and tokens it made are this user's alone.
    assert dev.workdir.stat().st_mode & 0o077 == 0
    for secret in ("oe-keys/signing-key.pem", "runtime-token", "client-token"):
        assert (dev.workdir / secret).stat().st_mode & 0o077 == 0, secret


def test_invoke_follow_shows_the_steps_and_stops_at_the_approval(dev: DevSession) -> None:
    result = dev.cli("invoke", dev.agent, "--text", "count and sign: hello brave new world", "--follow")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "word_count" in result.stdout
    assert "suspended" in result.stdout
    execution_id = result.stdout.split()[1]
    view = dev.wait(execution_id, "suspended")
    assert view["suspension"]["tool"] == "sign_message"
    approved = dev.cli("approve", execution_id, "--notes", "signed off in a test")
    assert approved.returncode == 0, approved.stderr
    view = dev.wait(execution_id, "completed", "failed")
    assert view["status"] == "completed", view
    assert view["result"] == {"answer": "4 words, and the sentence is signed."}
    with dev.client() as client:
        audit = client.audit(execution_id)
    signed = [r for r in audit if r.get("tool") == "sign_message"]
    assert any(r["decision"] == "approved" for r in signed), audit


def test_the_secrets_reach_the_tool_pod_only_and_the_shell_reaches_none(dev: DevSession) -> None:
    pids = dev.components()
    assert set(pids) >= {"oe", "aer", "tool", "model"}, pids
    envs = {mode: environ_of(pid) for mode, pid in pids.items()}
    assert envs["tool"]["ECHO_SIGNING_KEY"] == "example-signing-key"  # from the example's .env
    for mode in ("oe", "aer", "model"):
        assert "ECHO_SIGNING_KEY" not in envs[mode], mode
        assert "ECHO_TOKEN" not in envs[mode], mode
    for mode, env in envs.items():
        assert SHELL_CANARY not in "\0".join(env.values()), mode
    # The model's key variable is named to both runtimes; only the Tool Pod holds a value under it.
    key_env = envs["aer"][contract.LLM_API_KEY_ENV_ENV]
    assert key_env == envs["tool"][contract.LLM_API_KEY_ENV_ENV]
    assert key_env not in envs["aer"] and envs["tool"][key_env]


def test_each_runtime_has_every_variable_the_operator_renders(dev: DevSession) -> None:
    """The local AER and Tool Pod get what the operator's Deployments get (one function makes both)."""
    from agent_operator.models import Agent
    from agent_operator.settings import RenderSettings
    from tests.unit.operator.specimens import agent_body

    agent = Agent.from_body(agent_body())
    settings = RenderSettings(oe_public_key="-----BEGIN PUBLIC KEY-----")
    pids = dev.components()
    for component in ("aer", "tool"):
        rendered = render.component_inputs(agent, settings, bundle_digest="0" * 64)
        names = {e.name for e in render.component_env(render.MODES[component], rendered)}
        local = environ_of(pids[component])
        assert names <= set(local), (component, names - set(local))
        assert local[contract.RUNNER_MODE_ENV] == component
        assert local[contract.APP_ID_ENV] == "dev.echo-agent"


def test_an_edit_restarts_the_aer_and_tool_pod_and_the_oe_keeps_its_executions(
    dev: DevSession, agent_dir: Path
) -> None:
    before = dev.components()
    with dev.client() as client:
        history = client.executions(project="dev", agent=dev.agent)["items"]
    assert history, "the earlier test's execution"
    agent_py = agent_dir / "echo_agent" / "agent.py"
    agent_py.write_text(
        agent_py.read_text()
        + "\n\n@app.tool(is_local=True)\ndef shout(text: str) -> dict[str, str]:\n"
        + '    """Say it louder."""\n    return {"text": text.upper()}\n'
    )
    dev.expect(r"changed: echo_agent/agent\.py; restarting the AER and the Tool Pod")
    dev.expect(r"reloaded in [0-9.]+ s")
    after = dev.components()
    assert after["oe"] == before["oe"]
    assert after["aer"] != before["aer"] and after["tool"] != before["tool"]
    assert gone([before["aer"], before["tool"]]) == []
    registration = json.loads((dev.workdir / "registrations" / "dev.echo-agent.json").read_text())
    assert "shout" in {tool["name"] for tool in registration["tools"]}
    with dev.client() as client:
        kept = client.executions(project="dev", agent=dev.agent)["items"]
        assert {e["execution_id"] for e in history} <= {e["execution_id"] for e in kept}
        execution_id = client.invoke(agent=dev.agent, input={"text": "after the reload"})["execution_id"]
    assert dev.wait(execution_id)["status"] in ("completed", "suspended")


def test_a_broken_edit_keeps_the_oe_and_the_next_fix_restarts(dev: DevSession, agent_dir: Path) -> None:
    oe = dev.components()["oe"]
    broken = agent_dir / "echo_agent" / "broken.py"
    agent_py = agent_dir / "echo_agent" / "agent.py"
    original = agent_py.read_text()
    agent_py.write_text(original + "\nimport echo_agent.broken  # noqa\n")
    broken.write_text("def (:\n")
    dev.expect(r"restart failed: the (AER|Tool Pod) exited with 1: [^\n]*SyntaxError")
    assert dev.components()["oe"] == oe
    time.sleep(0.1)
    agent_py.write_text(original)
    broken.unlink()
    dev.expect(r"reloaded in [0-9.]+ s")
    assert dev.components()["oe"] == oe


def test_ctrl_c_stops_everything_and_leaves_no_directory(dev: DevSession) -> None:
    output, started = dev.interrupt()
    assert "stopped: no process and no directory left behind" in output
    assert "Traceback" not in output
    assert started and gone(started) == [], started
    assert not dev.workdir.exists()
