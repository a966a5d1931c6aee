"""One Agent's platform on loopback, as real processes: the OE, the AER, the Tool Pod and an LLM peer.

Each component is the launcher in its mode, configured by env exactly as the operator and the chart
render it (paths under a temp dir). The OE learns the Agent from a registration file built from the
AER's own `GET /tools`, as the operator builds it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.component_env import ComponentInputs, ModelSettings, as_process, component_env
from agent_runtime.contract import RunnerMode
from agent_runtime.execution_token import (
    SIGNING_KEY_FILE_ENV,
    Claims,
    generate_private_key_pem,
    public_key_pem,
    sign,
)
from agent_runtime.oe.registration import tool_entries
from tests.conftest import REPO_ROOT, Process, free_port
from tests.integration.runtime.launched import CONNECTOR_SECRET, write_provider_bundle
from tests.providers.echo_provider import running_echo_provider
from tests.providers.llm_peer import running_llm_peer

TENANT_DIR = Path(__file__).resolve().parent / "tenant"
AGENT = "team-a/loop"
RUNTIME_TOKEN = "loop-runtime-token-5be1c0de"
OTHER_TOKEN = "other-runtime-token-77aa01"
CLIENT_TOKEN = "oe-client-token-3c9d"
LLM_KEY = "sk-loop-llm-key-0a9f3e71"
LLM_KEY_ENV = "LOOP_LLM_KEY"
PLANTED = (RUNTIME_TOKEN, OTHER_TOKEN, CLIENT_TOKEN, LLM_KEY, CONNECTOR_SECRET)


@dataclass(frozen=True)
class Tenant:
    """What the Agent's image holds: its code, its connector bundle and the Tool Pod's own secrets."""

    entrypoint: str
    pythonpath: Path
    bundle: Callable[[Path, str], Path]  # (directory, provider URL) -> bundle index
    tool_env: Mapping[str, str]


def _loop_bundle(directory: Path, provider_url: str) -> Path:
    return write_provider_bundle(directory, base_url=provider_url)


LOOP_TENANT = Tenant(
    entrypoint="loop_agent:app",
    pythonpath=TENANT_DIR,
    bundle=_loop_bundle,
    tool_env={"ECHO_TOKEN": CONNECTOR_SECRET},
)


@dataclass
class Platform:
    tmp: Path
    spawn: Callable[..., Process]
    llm_base_url: str
    provider_url: str
    policy: dict[str, Any] = field(default_factory=dict)
    # More registration fields for the test's Agent (spec.limits, spec.notify: issue 34).
    registration: dict[str, Any] = field(default_factory=dict)
    tenant: Tenant = LOOP_TENANT
    publish_tools: bool = True  # False: like the operator, which cannot see the tenant's own tools
    oe_port: int = field(default_factory=free_port)
    aer_port: int = field(default_factory=free_port)
    tool_port: int = field(default_factory=free_port)
    processes: dict[str, Process] = field(default_factory=dict)
    # As the chart and the operator render it: the OE signs its calls, runtimes hold only the public key.
    oe_keys: bool = True

    @property
    def oe_url(self) -> str:
        return f"http://127.0.0.1:{self.oe_port}"

    @property
    def ledger(self) -> Path:
        return self.tmp / "ledger.txt"

    def key_files(self) -> tuple[Path, Path]:
        """The OE's signing key and its public key (the chart's Secret and ConfigMap), made once."""
        directory = self.tmp / "oe-keys"
        private, public = directory / "signing-key.pem", directory / "public-key.pem"
        if not private.exists():
            directory.mkdir(exist_ok=True)
            pem = generate_private_key_pem()
            private.write_text(pem)
            public.write_text(public_key_pem(pem))
        return private, public

    def statement(
        self, audience: str, *, execution_id: str = "", agent: str = AGENT, ttl_s: float = 60
    ) -> str:
        """A statement as the OE signs it, for a test that plays the OE against a runtime directly."""
        from cryptography.hazmat.primitives import serialization

        from agent_runtime.execution_token import key_id

        key = serialization.load_pem_private_key(self.key_files()[0].read_bytes(), password=None)
        now = time.time()
        claims = Claims.model_validate(
            {
                "aud": audience,
                "agent": agent,
                "workspace": agent.replace("/", ".", 1),
                "execution_id": execution_id,
                "purpose": "execution" if execution_id else "control",
                "iat": now,
                "exp": now + ttl_s,
            }
        )
        return sign(claims, key, kid=key_id(key.public_key()))  # type: ignore[arg-type]

    def runtime_headers(self, audience: str, *, execution_id: str = "") -> dict[str, str]:
        """What the OE presents to a runtime (the runtime token when the platform runs without keys)."""
        if not self.oe_keys:
            return {"authorization": f"Bearer {RUNTIME_TOKEN}"}
        return {"authorization": f"Bearer {self.statement(audience, execution_id=execution_id)}"}

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        """The platform variables as the operator renders them (`component_env`, the one function both use),
        with this run's paths and loopback addresses; then what a pod's image and kubelet would give."""
        token_file = self.tmp / "token"
        token_file.write_text(RUNTIME_TOKEN)
        bundle = self.tenant.bundle(self.tmp / "bundle", self.provider_url)
        inputs = ComponentInputs(
            app_id=AGENT.replace("/", "."),
            entrypoint=self.tenant.entrypoint,
            oe_url=self.oe_url,
            token_file=str(token_file),
            oe_public_key_file=str(self.key_files()[1]) if self.oe_keys else None,
            bundle_path=str(bundle),
            model=ModelSettings(
                base_url=self.llm_base_url,
                model="loop-model",
                key_env=LLM_KEY_ENV,
                credential_names=(LLM_KEY_ENV,),
            ),
            pod_ip="127.0.0.1",
        )
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp),
            "PYTHONPATH": f"{self.tenant.pythonpath}{os.pathsep}{REPO_ROOT}",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(port),
            "HOSTNAME": f"loop-{mode}-0",
            **as_process(component_env(RunnerMode(mode), inputs)),
        }

    def start_tool_pod(self) -> None:
        env = self._runtime_env("tool", self.tool_port)
        # Decision 9: the LLM key and the connector's credential reach the Tool Pod only.
        env.update({LLM_KEY_ENV: LLM_KEY, "LOOP_LEDGER": str(self.ledger), **self.tenant.tool_env})
        self.processes["tool"] = self._launch(env, port=self.tool_port)

    def start_aer(self) -> None:
        env = self._runtime_env("aer", self.aer_port)
        self.processes["aer"] = self._launch(env, port=self.aer_port)

    def write_registrations(self) -> None:
        surface = httpx.get(
            f"http://127.0.0.1:{self.aer_port}/tools", headers={"authorization": f"Bearer {RUNTIME_TOKEN}"}
        ).json()["tools"]
        regs = self.tmp / "registrations"
        regs.mkdir(exist_ok=True)
        entries = [entry.model_dump() for entry in tool_entries(surface)] if self.publish_tools else []
        for agent, token in ((AGENT, RUNTIME_TOKEN), ("team-b/other", OTHER_TOKEN)):
            document = {
                "agent": agent,
                "token": token,
                "aerUrl": f"http://127.0.0.1:{self.aer_port}",
                "toolUrl": f"http://127.0.0.1:{self.tool_port}",
                "policy": self.policy,
                "tools": entries,
                **(self.registration if agent == AGENT else {}),
            }
            (regs / f"{agent.replace('/', '.')}.json").write_text(json.dumps(document))

    def start_oe(self, *, extra: Mapping[str, str] | None = None) -> None:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.tmp),
            "PYTHONPATH": str(REPO_ROOT),
            "RUNNER_MODE": "oe",
            "APP_HOST": "127.0.0.1",
            "RUNTIME_PORT": str(self.oe_port),
            "STRUCTURED_LOGGING": "true",
            "OE_SQLITE_PATH": str(self.tmp / "oe" / "oe.sqlite3"),
            "OE_REGISTRATIONS_DIR": str(self.tmp / "registrations"),
            "OE_CLIENT_TOKEN": CLIENT_TOKEN,
            "OE_WATCHDOG_INTERVAL_S": "0.5",
            "OE_AER_LOST_AFTER_S": "2",
            # A stopped Tool Pod is a test's point here, not a restart to wait out.
            "OE_TOOL_POD_RETRY_S": "1",
            **({SIGNING_KEY_FILE_ENV: str(self.key_files()[0])} if self.oe_keys else {}),
            **(extra or {}),
        }
        self.processes["oe"] = self._launch(env, port=self.oe_port)

    def start(self) -> Platform:
        self.start_tool_pod()
        self.start_aer()
        self.write_registrations()
        self.start_oe()
        return self

    def _launch(self, env: dict[str, str], *, port: int, timeout: float = 30) -> Process:
        proc = self.spawn([sys.executable, "-m", "agent_runtime.launcher"], env=env, name=env["RUNNER_MODE"])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"{env['RUNNER_MODE']} exited with {proc.popen.returncode}:\n{proc.output()}"
                )
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=0.5).status_code == 200:
                    return proc
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"{env['RUNNER_MODE']} not ready after {timeout}s:\n{proc.output()}")

    def outputs(self) -> str:
        return "\n".join(proc.output() for proc in self.processes.values())

    # the client's side ------------------------------------------------------------------------------

    def client(self, token: str = CLIENT_TOKEN) -> httpx.Client:
        return httpx.Client(base_url=self.oe_url, headers={"authorization": f"Bearer {token}"}, timeout=30)

    def invoke(self, task: Any, *, agent: str = AGENT) -> str:
        with self.client() as client:
            response = client.post("/invoke", json={"agent": agent, "input": task})
        assert response.status_code == 202, response.text
        return str(response.json()["execution_id"])

    def wait(self, execution_id: str, *states: str, timeout: float = 30) -> dict[str, Any]:
        wanted = states or ("completed", "failed", "suspended", "cancelled")
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                view = client.get(f"/execution/{execution_id}").json()
                if view["status"] in wanted:
                    return dict(view)
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"execution still {view['status']} after {timeout}s:\n{self.outputs()}"
                    )
                time.sleep(0.05)

    def audit(self, execution_id: str) -> list[dict[str, Any]]:
        with self.client() as client:
            return list(client.get(f"/execution/{execution_id}/audit").json()["records"])


@contextmanager
def platform_on_peers(*, tmp: Path, spawn: Any, **settings: Any) -> Iterator[Platform]:
    """A Platform (not started) wired to a loopback model peer and echo provider that live as long as it."""
    with running_llm_peer() as peer, running_echo_provider() as provider:
        urls = {"llm_base_url": peer.base_url, "provider_url": provider.url}
        yield Platform(tmp=tmp, spawn=spawn, **urls, **settings)
