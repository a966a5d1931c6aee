"""OEClient over real HTTP to a fake OE on loopback: answers, failures, retries, and the token."""

import asyncio
from collections.abc import Iterator

import pytest

from agent_runtime.protocol import (
    OE_CALLBACK_PATH,
    OE_TOOL_EXECUTE_PATH,
    OE_TOOL_RESULT_PATH,
    CallbackStatus,
    ExecutorCallback,
    ToolExecuteRequest,
    ToolResultRequest,
)
from agent_runtime.sdk import OEClient, OEConfigError, PlatformFailure, oe_url_from_env
from tests.conftest import free_port
from tests.integration.runtime.fake_oe import RunningFakeOE, running_fake_oe

TOKEN = "oe-client-token-3b9d"
CALL = ToolExecuteRequest(execution_id="ex-1", step=1, tool="lookup", args={"q": "x"})
CALLBACK = ExecutorCallback(execution_id="ex-1", status=CallbackStatus.COMPLETED, result={"ok": True})


@pytest.fixture
def oe() -> Iterator[RunningFakeOE]:
    with running_fake_oe(local_tools={"local_tool"}) as running:
        yield running


async def _with_client(url: str, work: object, **options: float) -> object:
    client = OEClient(url, token=TOKEN, **options)
    try:
        return await work(client)  # type: ignore[operator]
    finally:
        await client.aclose()


def test_answers_and_reports_carry_the_bearer_token(oe: RunningFakeOE) -> None:
    async def work(client: OEClient) -> None:
        answer = await client.tool_execute(CALL)
        assert (answer.step, answer.proceed, answer.status, answer.result) == (
            1,
            True,
            "success",
            {"tool": "lookup", "args": {"q": "x"}},
        )
        routed = await client.tool_execute(CALL.model_copy(update={"tool": "local_tool", "step": 2}))
        assert routed.route_to == "callback"
        await client.tool_result(ToolResultRequest(execution_id="ex-1", step=2, status="success", result=1))
        await client.callback(CALLBACK)

    asyncio.run(_with_client(oe.url, work))
    assert {r.authorization for r in oe.app.requests} == {f"Bearer {TOKEN}"}
    assert oe.callbacks() == [
        {
            "execution_id": "ex-1",
            "status": "COMPLETED",
            "result": {"ok": True},
            "metadata": None,
            "error": None,
        }
    ]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (500, b'{"detail":"boom"}', "the OE answered HTTP 500 to POST /tool/execute (step 1)"),
        (200, b"<html>not json</html>", "is not a valid answer"),
        (200, b'{"step": 1}', "proceed: Field required"),
    ],
)
def test_tool_execute_failures_are_platform_failures(
    oe: RunningFakeOE, status: int, body: bytes, message: str
) -> None:
    oe.app.force(OE_TOOL_EXECUTE_PATH, (status, body))
    with pytest.raises(PlatformFailure) as failure:
        asyncio.run(_with_client(oe.url, lambda client: client.tool_execute(CALL)))
    assert message in failure.value.message and TOKEN not in failure.value.message
    assert len(oe.app.of(OE_TOOL_EXECUTE_PATH)) == 1  # never resent: it could run the tool twice


def test_an_unreachable_oe_is_a_platform_failure() -> None:
    with pytest.raises(PlatformFailure, match="POST /tool/execute to the OE failed: cannot connect"):
        asyncio.run(_with_client(f"http://127.0.0.1:{free_port()}", lambda client: client.tool_execute(CALL)))


def test_a_late_answer_is_a_platform_failure(oe: RunningFakeOE) -> None:
    oe.app.delay_s[OE_TOOL_EXECUTE_PATH] = 2.0
    with pytest.raises(PlatformFailure, match="the OE did not answer POST /tool/execute in time"):
        asyncio.run(_with_client(oe.url, lambda client: client.tool_execute(CALL), call_timeout_s=0.3))


def test_callback_and_result_are_retried_until_acknowledged(oe: RunningFakeOE) -> None:
    oe.app.force(OE_CALLBACK_PATH, (503, b"{}"), (502, b"{}"))
    oe.app.force(OE_TOOL_RESULT_PATH, (503, b"{}"))

    async def work(client: OEClient) -> None:
        await client.callback(CALLBACK)
        await client.tool_result(ToolResultRequest(execution_id="ex-1", step=1, status="success"))

    asyncio.run(_with_client(oe.url, work))
    assert len(oe.app.of(OE_CALLBACK_PATH)) == 3 and len(oe.app.of(OE_TOOL_RESULT_PATH)) == 2


def test_a_refused_callback_is_not_retried_and_an_absent_oe_exhausts_the_budget(oe: RunningFakeOE) -> None:
    oe.app.force(OE_CALLBACK_PATH, (409, b'{"detail":"conflict"}'))
    with pytest.raises(PlatformFailure, match="HTTP 409 to POST /executor/callback"):
        asyncio.run(_with_client(oe.url, lambda client: client.callback(CALLBACK)))
    assert len(oe.app.of(OE_CALLBACK_PATH)) == 1
    down = f"http://127.0.0.1:{free_port()}"
    started = asyncio.run(_timed(down))
    assert 0.5 <= started < 5


async def _timed(url: str) -> float:
    loop = asyncio.get_running_loop()
    begin = loop.time()
    with pytest.raises(PlatformFailure, match="cannot connect"):
        await _with_client(url, lambda client: client.callback(CALLBACK), callback_budget_s=0.8)
    return loop.time() - begin


def test_oe_url_is_required() -> None:
    with pytest.raises(OEConfigError, match="AGENTIC_OE_URL is not set"):
        oe_url_from_env({})
    with pytest.raises(OEConfigError, match="http:// or https://"):
        oe_url_from_env({"AGENTIC_OE_URL": "oe:8080"})
    assert oe_url_from_env({"AGENTIC_OE_URL": " http://oe:8080/ "}) == "http://oe:8080"
