import asyncio
import threading
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from agent_runtime.sdk import App, EntrypointError, ToolDefinitionError, load_app, parse_entrypoint


def test_tool_schema_from_docstring_and_hints() -> None:
    app = App()

    @app.tool
    def search(query: str, limit: Annotated[int, Field(ge=1, description="max hits")] = 10) -> list[str]:
        """Search the knowledge base.

        Returns matching titles."""
        return []

    spec = app.tools["search"]
    assert spec.description.startswith("Search the knowledge base.")
    assert spec.schema()["inputSchema"] == {
        "type": "object",
        "properties": {
            "query": {"title": "Query", "type": "string"},
            "limit": {
                "title": "Limit",
                "type": "integer",
                "default": 10,
                "minimum": 1,
                "description": "max hits",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert spec.is_local is False and spec.timeout_s == 30.0


def test_tool_options() -> None:
    app = App()

    @app.tool(
        name="pay-invoice",
        description="Pay it.",
        sensitive=True,
        required_secrets=["STRIPE_KEY"],
        timeout_s=5,
    )
    async def pay(invoice_id: str) -> dict[str, str]:
        return {"paid": invoice_id}

    spec = app.tools["pay-invoice"]
    assert (spec.sensitive, spec.required_secrets, spec.timeout_s, spec.is_async) == (
        True,
        ("STRIPE_KEY",),
        5.0,
        True,
    )
    assert app.remote_tools() == [spec] and app.local_tools() == []


def test_sync_and_async_tools_run_and_validate() -> None:
    app = App()
    threads: list[str] = []

    @app.tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        threads.append(threading.current_thread().name)
        return a + b

    @app.tool(is_local=True)
    async def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    async def run() -> None:
        assert await app.tools["add"].ainvoke({"a": 2}) == 3
        assert await app.tools["shout"].ainvoke({"text": "hi"}) == "HI"
        with pytest.raises(ValidationError) as missing:
            await app.tools["add"].ainvoke({"b": 2})
        assert missing.value.errors()[0]["loc"] == ("a",)
        with pytest.raises(ValidationError) as extra:
            await app.tools["add"].ainvoke({"a": 1, "c": 2})
        assert extra.value.errors()[0]["loc"] == ("c",)

    asyncio.run(run())
    assert threads and threads[0] != threading.main_thread().name  # sync tools leave the event loop free


@pytest.mark.parametrize(
    ("define", "message"),
    [
        (lambda app: app.tool(name="t", description="d")(lambda x: x), "no type hint"),
        (lambda app: app.tool(name="bad name!", description="d")(lambda: None), "1-64 characters"),
        (lambda app: app.tool(name="t", description="d", timeout_s=0)(lambda: None), "timeout_s must be > 0"),
        (
            lambda app: app.tool(name="t", description="d", required_secrets="KEY")(lambda: None),
            "must be a list",
        ),
        (
            lambda app: app.tool(name="t", description="d", required_secrets=["PATH"])(lambda: None),
            "platform variable",
        ),
        (
            lambda app: app.tool(name="t", description="d", is_local=True, required_secrets=["KEY"])(
                lambda: None
            ),
            "AER",
        ),
    ],
)
def test_bad_declarations_name_the_fix(define: object, message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        define(App())  # type: ignore[operator]


def test_missing_description_and_varargs() -> None:
    app = App()

    def undocumented(a: int) -> int:
        return a

    with pytest.raises(ToolDefinitionError, match="docstring"):
        app.tool(undocumented)

    def variadic(*args: int) -> int:
        """Sum."""
        return sum(args)

    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        app.tool(variadic)


def test_duplicate_tool_and_entrypoint() -> None:
    app = App()

    @app.tool
    def one() -> None:
        """One."""

    with pytest.raises(ToolDefinitionError, match="registered twice"):
        app.tool(description="again", name="one")(lambda: None)

    @app.entrypoint
    def main() -> None: ...

    assert app.entrypoint_function is main
    with pytest.raises(ToolDefinitionError, match="already has an entrypoint"):
        app.entrypoint(lambda: None)


@pytest.mark.parametrize("spec", ["nomodule", "a.b", "a:b:c", "1a:app", "pkg.mod:"])
def test_entrypoint_spec_must_be_module_colon_attribute(spec: str) -> None:
    with pytest.raises(EntrypointError, match=r"package\.module:app"):
        parse_entrypoint(spec)


def test_load_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "tenant_pkg_sdk_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text("from agent_runtime.sdk import App\napp = App('t')\nnot_app = 3\n")
    (package / "broken.py").write_text("raise RuntimeError('import-time failure')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_app("tenant_pkg_sdk_test.agent:app").name == "t"
    with pytest.raises(EntrypointError, match=r"not an agent_runtime\.sdk\.App"):
        load_app("tenant_pkg_sdk_test.agent:not_app")
    with pytest.raises(EntrypointError, match="has no attribute 'missing'"):
        load_app("tenant_pkg_sdk_test.agent:missing")
    with pytest.raises(EntrypointError, match="RuntimeError: import-time failure"):
        load_app("tenant_pkg_sdk_test.broken:app")
