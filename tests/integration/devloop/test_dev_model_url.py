"""`agentengine dev --model-url URL`: an OpenAI-compatible endpoint (here the loopback peer, which refuses a
request without its key) with the key from `$OPENAI_API_KEY`, which only the Tool Pod holds."""

from __future__ import annotations

import pytest

from agent_runtime.devloop.children import free_port
from tests.conftest import REPO_ROOT
from tests.integration.devloop.session import DevSession, cli_env, environ_of
from tests.providers.llm_peer import Turn, running_llm_peer

pytestmark = pytest.mark.integration

KEY = "sk-dev-model-url-Canary-71c2"


def test_a_real_endpoint_gets_the_key_from_the_tool_pod_only() -> None:
    with running_llm_peer(api_key=KEY) as peer:
        session = DevSession.start(
            REPO_ROOT / "examples" / "echo-agent",
            "--model-url", peer.base_url, "--model-name", "peer-model",
            port=free_port(),
            env=cli_env(OPENAI_API_KEY=KEY),
        )  # fmt: skip
        try:
            assert f"{peer.base_url} (peer-model; key from $OPENAI_API_KEY, given to the Tool Pod only)" in (
                session.banner
            )
            peer.push(Turn.answer("answered by the endpoint"))
            with session.client() as client:
                execution_id = client.invoke(agent=session.agent, input={"text": "hi"})["execution_id"]
            view = session.wait(execution_id, "completed", "failed")
            assert view["status"] == "completed", view
            assert view["result"] == {"answer": "answered by the endpoint"}
            assert [r.authorization for r in peer.requests] == [f"Bearer {KEY}"]
            assert [r.body["model"] for r in peer.requests] == ["peer-model"]
            components = session.components()
            assert environ_of(components["tool"])["OPENAI_API_KEY"] == KEY
            for mode in ("aer", "oe"):
                assert KEY not in "\0".join(environ_of(components[mode]).values()), mode
            assert KEY not in session.banner
        finally:
            session.close()


def test_a_model_url_without_its_key_names_the_variable() -> None:
    import pexpect

    from tests.integration.devloop.session import AGENTENGINE

    env = {k: v for k, v in cli_env().items() if k != "OPENAI_API_KEY"}
    output, status = pexpect.run(
        AGENTENGINE,
        args=["dev", str(REPO_ROOT / "examples" / "echo-agent"), "--model-url", "http://127.0.0.1:9/v1"],
        env=env,
        withexitstatus=True,
        timeout=60,
        encoding="utf-8",
    )
    assert status != 0 and "Traceback" not in output
    assert "error: --model-url needs its key in $OPENAI_API_KEY" in output
