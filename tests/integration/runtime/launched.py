"""Helpers for launcher tests: the files and env the operator renders, and a launched component."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.connectors import (
    build_bundle,
    compile_catalog,
    materialize_connector,
    scaffold_tool_yaml,
    write_bundle,
)
from tests.conftest import REPO_ROOT, Process, free_port

EXAMPLE_AGENT_DIR = REPO_ROOT / "examples" / "echo-agent"
CONNECTOR_SECRET = "echo-connector-credential-7f3a"  # a test value; the tests check it never leaks
SIGNING_KEY = "echo-signing-key-91c2"
RUNTIME_TOKEN = "runtime-token-1"

# A tiny OpenAPI document for the loopback echo provider's routes.
PROVIDER_OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Echo provider", "version": "1"},
    "servers": [{"url": "http://127.0.0.1:9"}],
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/echo/items/{itemId}": {
            "get": {
                "operationId": "getItem",
                "summary": "Fetch one item",
                "parameters": [
                    {"name": "itemId", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "q", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "the item"}},
            }
        },
        "/stall": {
            "get": {
                "operationId": "stall",
                "summary": "Answer after a delay",
                "parameters": [
                    {"name": "delay", "in": "query", "required": True, "schema": {"type": "number"}}
                ],
                "responses": {"200": {"description": "late"}},
            }
        },
        "/leak/{code}": {
            "get": {
                "operationId": "leak",
                "summary": "An error whose body quotes the credentials",
                "parameters": [
                    {"name": "code", "in": "path", "required": True, "schema": {"type": "integer"}}
                ],
                "responses": {"200": {"description": "never"}},
            }
        },
    },
}


def write_provider_bundle(directory: Path, *, base_url: str) -> Path:
    """Compile, select and bind the provider's connector as the operator does; return the index path."""
    catalog = compile_catalog(PROVIDER_OPENAPI, connector_name="echo")
    tool = scaffold_tool_yaml(catalog, base_url=base_url)
    return write_bundle(build_bundle([materialize_connector(tool, catalog)]), directory)


# Where nothing listens: components that never call the OE in a test still need its address.
UNREACHABLE_OE_URL = "http://127.0.0.1:9"


def operator_env(
    tmp_path: Path,
    *,
    mode: str,
    port: int,
    bundle_index: Path | None,
    token: str = RUNTIME_TOKEN,
    oe_url: str = UNREACHABLE_OE_URL,
) -> dict[str, str]:
    """The env the operator renders for a component (paths under tmp_path instead of /etc/agent-engine)."""
    token_dir = tmp_path / "token"
    token_dir.mkdir(exist_ok=True)
    (token_dir / "token").write_text(token)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(EXAMPLE_AGENT_DIR),
        "RUNNER_MODE": mode,
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "RUNTIME_TOKEN_FILE": str(token_dir / "token"),
        "STRUCTURED_LOGGING": "true",
        "AGENT_ENTRYPOINT": "echo_agent.agent:app",
        "ECHO_TOKEN": CONNECTOR_SECRET,
        "ECHO_SIGNING_KEY": SIGNING_KEY,
        "AGENTIC_OE_URL": oe_url,
    }
    if bundle_index is not None:
        env["AGENTIC_CONNECTOR_BUNDLE_PATH"] = str(bundle_index)
    return env


@dataclass
class Component:
    process: Process
    url: str
    token: str

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"authorization": f"Bearer {self.token}"}, **kwargs)


def launch(
    spawn: Callable[..., Process],
    env: Mapping[str, str],
    *,
    token: str = RUNTIME_TOKEN,
    timeout: float = 20,
) -> Component:
    """Start the launcher and wait until /readyz answers 200."""
    host = env.get("APP_HOST", "127.0.0.1")
    url = f"http://[{host}]:{env['RUNTIME_PORT']}" if ":" in host else f"http://{host}:{env['RUNTIME_PORT']}"
    proc = spawn([sys.executable, "-m", "agent_runtime.launcher"], env=dict(env), name=env["RUNNER_MODE"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"launcher exited with {proc.popen.returncode}:\n{proc.output()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200:
                return Component(process=proc, url=url, token=token)
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"launcher not ready at {url} after {timeout}s:\n{proc.output()}")


def new_port(host: str = "127.0.0.1") -> int:
    return free_port(host)
