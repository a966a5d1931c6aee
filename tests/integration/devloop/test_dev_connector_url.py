"""`agentengine dev --connector-url NAME=URL` in a pseudo-terminal: the echo example's OpenAPI connector
(its tool.yaml says http://127.0.0.1:8080) is pointed at a loopback provider on another port for the run, and
the model's call reaches it through the real Tool Pod with the example's credential; a malformed or unknown
`--connector-url` is one line naming the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import AGENTENGINE, DevSession, cli_env
from tests.providers.echo_provider import running_echo_provider

pytestmark = pytest.mark.integration

EXAMPLE = REPO_ROOT / "examples" / "echo-agent"


def test_an_openapi_connector_reaches_the_local_provider(tmp_path: Path) -> None:
    script = tmp_path / "turns.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "echo_getEcho", "args": {"word": "local"}}]}]))
    with running_echo_provider() as provider:
        session = DevSession.start(
            EXAMPLE, "--model", f"scripted:{script}", "--connector-url", f"echo={provider.url}/",
            port=free_port(),
        )  # fmt: skip
        try:
            followed = session.cli("invoke", session.agent, "--text", "echo local", "--follow")
            assert followed.returncode == 0, followed.stderr + followed.stdout
            assert "echo_getEcho success" in followed.stdout, followed.stdout
            execution_id = followed.stdout.split()[1]
            view = session.wait(execution_id, "completed", "failed")
            assert view["status"] == "completed", view
            # The deterministic brain answers with the tool's result: the provider's echo of the request.
            answer = view["result"]["answer"]
            assert "echo_getEcho says:" in answer and "/echo/local" in answer, answer
        finally:
            session.close()


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("echo", "write CONNECTOR=URL with an http(s) URL"),
        ("echo=ftp://127.0.0.1/x", "write CONNECTOR=URL with an http(s) URL"),
        ("nope=http://127.0.0.1:9", "has no OpenAPI connector 'nope' (it has: echo)"),
    ],
)
def test_a_bad_connector_url_names_the_fix(spec: str, said: str) -> None:
    output, status = pexpect.run(
        AGENTENGINE,
        args=["dev", str(EXAMPLE), "--port", str(free_port()), "--connector-url", spec],
        env=cli_env(),
        withexitstatus=True,
        timeout=90,
        encoding="utf-8",
    )
    lines = [line for line in output.replace("\r", "").splitlines() if line.strip()]
    assert status != 0, output
    assert "Traceback" not in output
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and said in errors[0], output
