"""The loop harness's platform with observability settings in every component's environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.conftest import Process
from tests.integration.loop.harness import Platform


@dataclass
class ObservedPlatform(Platform):
    """`observe` goes into every process's env (OE, AER, Tool Pod); `checkpoint_env` into the AER's."""

    observe: dict[str, str] = field(default_factory=dict)
    checkpoint_env: dict[str, str] = field(default_factory=dict)

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        if mode == "aer":
            env.update(self.checkpoint_env)
        return env

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        return super()._launch({**env, **self.observe}, port=port, timeout=timeout)

    def logs(self, execution_id: str) -> dict[str, Any]:
        with self.client() as client:
            response = client.get(f"/execution/{execution_id}/logs")
        assert response.status_code == 200, response.text
        return dict(response.json())
