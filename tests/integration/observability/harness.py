"""The loop harness's platform with observability settings in every component's environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_runtime.component_env import MEMORY_URL_ENV
from tests.conftest import Process, free_port
from tests.integration.loop.harness import Platform


@dataclass
class ObservedPlatform(Platform):
    """`observe` goes into every process's env (OE, AER, Tool Pod, Memory); `checkpoint_env` into the AER's.
    `memory`: the Agent also has a Memory server (the launcher in memory mode, SQLite), its URL in the
    runtimes' env as the operator renders it."""

    observe: dict[str, str] = field(default_factory=dict)
    checkpoint_env: dict[str, str] = field(default_factory=dict)
    memory: bool = False
    memory_port: int = field(default_factory=free_port)

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        if mode == "aer":
            env.update(self.checkpoint_env)
        if self.memory and mode in ("aer", "tool"):
            env[MEMORY_URL_ENV] = f"http://127.0.0.1:{self.memory_port}"
        return env

    def start_memory(self) -> None:
        env = self._runtime_env("memory", self.memory_port)
        env.update(
            {"MEMORY_STORE_TYPE": "sqlite", "MEMORY_SQLITE_PATH": str(self.tmp / "memory" / "memory.db")}
        )
        self.processes["memory"] = self._launch(env, port=self.memory_port)

    def start(self) -> ObservedPlatform:
        if self.memory:
            self.start_memory()
        super().start()
        return self

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        return super()._launch({**env, **self.observe}, port=port, timeout=timeout)

    def logs(self, execution_id: str) -> dict[str, Any]:
        with self.client() as client:
            response = client.get(f"/execution/{execution_id}/logs")
        assert response.status_code == 200, response.text
        return dict(response.json())
