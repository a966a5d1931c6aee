import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.servers.auth import BearerTokenGuard, RuntimeTokenError, bearer_matches, load_runtime_token


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        (b"Bearer tok-1", True),
        (b"bearer tok-1", True),
        (b"Bearer  tok-1 ", True),
        (b"Bearer tok-2", False),
        (b"Basic tok-1", False),
        (b"tok-1", False),
        (b"", False),
        (None, False),
    ],
)
def test_bearer_matches(header: bytes | None, ok: bool) -> None:
    assert bearer_matches(header, b"tok-1") is ok


def test_token_from_file_wins_over_env(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    env = {"RUNTIME_TOKEN_FILE": str(token_file), "RUNTIME_TOKEN": "from-env"}
    assert load_runtime_token(env) == "from-file"
    assert load_runtime_token({"RUNTIME_TOKEN": "from-env"}) == "from-env"


def test_token_errors_say_how_to_provide_it(tmp_path: Path) -> None:
    with pytest.raises(RuntimeTokenError, match="RUNTIME_TOKEN_FILE to the mounted token file"):
        load_runtime_token({})
    with pytest.raises(RuntimeTokenError, match="no such file"):
        load_runtime_token({"RUNTIME_TOKEN_FILE": str(tmp_path / "absent")})
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(RuntimeTokenError, match="the file is empty"):
        load_runtime_token({"RUNTIME_TOKEN_FILE": str(tmp_path / "empty")})


def _call(guard: BearerTokenGuard, path: str, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "headers": headers}
    asyncio.run(guard(scope, receive, send))
    return sent


def test_guard_lets_probes_through_and_rejects_without_detail() -> None:
    reached: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    guard = BearerTokenGuard(app, token="tok-1")
    assert _call(guard, "/healthz", []) == []
    assert _call(guard, "/metrics", []) == []
    assert _call(guard, "/execute", [(b"authorization", b"Bearer tok-1")]) == []
    denied = _call(guard, "/execute", [(b"authorization", b"Bearer nope")])
    assert denied[0]["status"] == 401 and denied[1]["body"] == b""
    assert reached == ["/healthz", "/metrics", "/execute"]
