"""examples/langgraph-agent: its catalog matches its OpenAPI document and its App builds without calls."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest

from agent_runtime.connectors import compile_catalog, load_tool_defs
from agent_runtime.langgraph import App, LangChainModelAdapter
from agent_runtime.servers.llm_calls import construction_context
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "langgraph-agent"


def test_the_compiled_catalog_is_current() -> None:
    connector = EXAMPLE / "connectors" / "notes"
    fresh = compile_catalog(connector / "openapi.yaml", connector_name="notes")
    assert fresh == load_tool_defs(connector / "tool_defs.yaml")


def test_the_app_builds_for_the_tool_pod_and_registers_chatopenai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("AGENTIC_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AGENTIC_LLM_MODEL", "example-model")
    monkeypatch.setenv("CHECKPOINT_STORE", "memory")
    sys.modules.pop("langgraph_agent.agent", None)
    module: Any = importlib.import_module("langgraph_agent.agent")
    app = module.app
    assert isinstance(app, App) and app.tools["word_count"].is_local
    tools = [{"name": "notes_listNotes", "description": "List", "inputSchema": {"type": "object"}}]
    app.construct(construction_context(tools=tools))
    model = app.llms["main"]
    assert isinstance(model, LangChainModelAdapter) and type(model.model).__name__ == "ChatOpenAI"
