"""One agent's platform as supervised local processes: the OE on SQLite, the AER, the Tool Pod (and the
Memory server when the agent uses it), each the real launcher with the environment `component_env` gives
the operator's pods, plus an offline model stand-in when asked.

`start()` brings everything up, `restart_runtimes()` restarts the AER and Tool Pod (the OE and its
executions stay), `stop()` leaves no process and no directory.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_runtime import contract
from agent_runtime.component_env import (
    ComponentInputs,
    MemoryStoreSettings,
    ModelSettings,
    as_process,
    component_env,
)
from agent_runtime.connectors.bundle import write_bundle
from agent_runtime.contract import RunnerMode
from agent_runtime.devloop.children import Child, free_port, port_taken, start_child, stop_all
from agent_runtime.devloop.project import DevError, DevProject, project_bundle
from agent_runtime.execution_token import generate_private_key_pem, public_key_pem
from agent_runtime.oe import settings as oe_settings
from agent_runtime.oe.registration import tool_entries
from agent_runtime.protocol import OE_TOOL_EXECUTE_PATH

READY_TIMEOUT_S = 60.0
SCRIPTED_MODEL_NAME = "scripted"
# The scripted stand-in needs no key; the Tool Pod still gets one under this name, as a real model's would.
SCRIPTED_KEY_ENV = "AGENTENGINE_DEV_MODEL_KEY"
# What every child may see of this process's environment: where programs and locales are, nothing else
# (a developer's shell holds credentials no component should get by accident).
_INHERITED = ("PATH", "LANG", "LC_ALL", "TZ")

Say = Callable[[str], None]


@dataclass(frozen=True)
class ModelChoice:
    """The model the agent talks to: a URL (OpenAI-compatible) or the scripted stand-in."""

    url: str | None = None  # None: the scripted stand-in
    name: str = SCRIPTED_MODEL_NAME
    key_env: str = SCRIPTED_KEY_ENV
    script: Path | None = None


@dataclass(frozen=True)
class DevOptions:
    """How `agentengine dev` was asked to run."""

    project: DevProject
    oe_port: int = 8180
    model: ModelChoice = ModelChoice()
    tool_env: Mapping[str, str] = field(default_factory=dict)  # --set NAME=VALUE: the Tool Pod's secrets
    databases: tuple[tuple[str, str], ...] = ()  # --db CONNECTOR=URL
    connector_urls: tuple[tuple[str, str], ...] = ()  # --connector-url CONNECTOR=URL


@dataclass
class DevStack:
    """Start with `start()`, stop with `stop()`."""

    options: DevOptions
    say: Say = print
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agentengine-dev-")))
    children: dict[str, Child] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    client_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    _runtime_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    restarts: int = 0

    @property
    def project(self) -> DevProject:
        return self.options.project

    @property
    def oe_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['oe']}"

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    # --- start ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Every component up and the OE holding the agent's registration; DevError on the way names why."""
        if port_taken(self.options.oe_port):
            raise DevError(
                f"port {self.options.oe_port} is taken (another agentengine dev?); pass --port N for the OE"
            )
        self.ports["oe"] = self.options.oe_port
        for name in ("aer", "tool", *(("memory",) if self.project.uses_memory else ())):
            self.ports[name] = free_port()
        self._write_secrets()
        if self.options.model.url is None:
            self.ports["model"] = free_port()
            self._spawn_model()
        self._spawn_oe()
        self._spawn_runtimes()
        if "memory" in self.ports:
            self._spawn("memory", self._component_env(RunnerMode.MEMORY))
        for name in self.children:
            self._wait_ready(name)
        self._register()

    def _write_secrets(self) -> None:
        """The OE's signing key pair, the runtime token and the client token: files only this user reads."""
        keys = self.workdir / "oe-keys"
        keys.mkdir(mode=0o700)
        pem = generate_private_key_pem()
        _private_file(keys / contract.OE_SIGNING_KEY_KEY, pem)
        (keys / contract.OE_PUBLIC_KEY_KEY).write_text(public_key_pem(pem))
        _private_file(self.workdir / "runtime-token", self._runtime_token)
        _private_file(self.workdir / "client-token", self.client_token)
        (self.workdir / "registrations").mkdir()
        (self.workdir / "tmp").mkdir()

    def _base_env(self) -> dict[str, str]:
        env = {name: self.environ[name] for name in _INHERITED if name in self.environ}
        env.setdefault("PATH", "/usr/bin:/bin")
        return env | {
            "HOME": str(self.workdir),
            "TMPDIR": str(self.workdir / "tmp"),
            "PYTHONPATH": str(self.project.directory),
            "PYTHONUNBUFFERED": "1",
            contract.APP_HOST_ENV: "127.0.0.1",
        }

    def _model_settings(self) -> ModelSettings:
        model = self.options.model
        url = model.url or f"http://127.0.0.1:{self.ports['model']}/v1"
        # The key's variable is the Agent's one LLM credential, as spec.llm.credentials would route it.
        return ModelSettings(
            base_url=url, model=model.name, key_env=model.key_env, credential_names=(model.key_env,)
        )

    def _component_env(self, mode: RunnerMode) -> dict[str, str]:
        """The environment the operator would render for `mode`, with this run's paths and addresses."""
        bundle_path = ""
        digest: str | None = None
        if mode != RunnerMode.MEMORY:
            bundle, _ = self._bundle()
            bundle_path = str(write_bundle(bundle, self.workdir / "bundle"))
            digest = bundle.digest
        inputs = ComponentInputs(
            app_id=self.project.app_id,
            entrypoint=self.project.entrypoint,
            oe_url=self.oe_url,
            token_file=str(self.workdir / "runtime-token"),
            oe_public_key_file=str(self.workdir / "oe-keys" / contract.OE_PUBLIC_KEY_KEY),
            bundle_path=bundle_path,
            bundle_digest=digest,
            model=self._model_settings(),
            memory_url=self.url("memory") if "memory" in self.ports else None,
            memory_store=MemoryStoreSettings(sqlite_path=str(self.workdir / "memory.sqlite3")),
            pod_ip="127.0.0.1",
        )
        env = self._base_env() | as_process(component_env(mode, inputs))
        env["RUNTIME_PORT"] = str(self.ports[mode.value])
        env["HOSTNAME"] = f"{self.project.name}-{mode.value}-dev"
        if mode == RunnerMode.AER:
            # LangGraph checkpoints (a SQLite file of this run; the chart would give MongoDB).
            env["CHECKPOINT_SQLITE_PATH"] = str(self.workdir / "checkpoints.sqlite3")
        return env

    def _bundle(self) -> tuple[Any, dict[str, str]]:
        return project_bundle(
            self.project,
            databases=self.options.databases,
            connector_urls=self.options.connector_urls,
            environ=self.environ,
        )

    def _tool_secrets(self) -> dict[str, str]:
        """What only the Tool Pod holds (Decision 9): the model's key, --set values, --db passwords."""
        _, from_urls = self._bundle()
        model = self.options.model
        key = self.environ.get(model.key_env, "") if model.url else "scripted-stand-in"
        return {model.key_env: key, **from_urls, **self.options.tool_env}

    def _spawn_runtimes(self) -> None:
        tool_env = self._component_env(RunnerMode.TOOL)
        self._spawn("tool", {**self._tool_secrets(), **tool_env})
        self._spawn("aer", self._component_env(RunnerMode.AER))

    def _spawn_oe(self) -> None:
        env = self._base_env() | {
            contract.RUNNER_MODE_ENV: RunnerMode.OE.value,
            "RUNTIME_PORT": str(self.ports["oe"]),
            contract.STRUCTURED_LOGGING_ENV: "true",
            oe_settings.SQLITE_PATH_ENV: str(self.workdir / "oe" / "oe.sqlite3"),
            oe_settings.REGISTRATIONS_DIR_ENV: str(self.workdir / "registrations"),
            oe_settings.REGISTRATIONS_INTERVAL_ENV: "0.1",  # a reload's new tools are seen at once
            oe_settings.CLIENT_TOKEN_FILE_ENV: str(self.workdir / "client-token"),
            oe_settings.CLIENT_TOKEN_NAMESPACES_ENV: self.project.agent.split("/", 1)[0],
            contract.OE_SIGNING_KEY_FILE_ENV: str(self.workdir / "oe-keys" / contract.OE_SIGNING_KEY_KEY),
        }
        env["PYTHONPATH"] = ""  # the OE runs no tenant code
        self._spawn("oe", env)

    def _spawn_model(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "agent_runtime.devloop.scripted_model",
            "--port",
            str(self.ports["model"]),
        ]
        if self.options.model.script is not None:
            argv += ["--script", str(self.options.model.script)]
        env = self._base_env() | {"PYTHONPATH": ""}
        self.children["model"] = start_child("model", argv, log_dir=self.workdir, env=env, cwd=self.workdir)

    def _spawn(self, name: str, env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", contract.LAUNCHER_MODULE]
        self.children[name] = start_child(name, argv, log_dir=self.workdir, env=env, cwd=self.workdir)

    def _wait_ready(self, name: str) -> None:
        child = self.children[name]
        path = "/v1/models" if name == "model" else contract.READY_PATH
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if not child.alive():
                hint = _SECRET_HINT if name in ("tool", "aer") and "secret" in child.tail() else ""
                raise DevError(
                    f"{_TITLES[name]} exited with {child.popen.returncode}: {_last_error(child.tail())}{hint}"
                )
            try:
                if httpx.get(f"{self.url(name)}{path}", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.03)
        raise DevError(f"{_TITLES[name]} not ready after {READY_TIMEOUT_S:.0f}s: {_last_error(child.tail())}")

    def _register(self) -> None:
        """The registration the operator would publish, from the AER's own tool surface (Decision 12)."""
        surface = httpx.get(
            f"{self.url('aer')}/tools", headers={"authorization": f"Bearer {self._runtime_token}"}, timeout=10
        ).json()["tools"]
        document = {
            "agent": self.project.agent,
            "token": self._runtime_token,
            "aerUrl": self.url("aer"),
            "toolUrl": self.url("tool"),
            "tools": [entry.model_dump() for entry in tool_entries(surface)],
        }
        target = self.workdir / "registrations" / f"{self.project.app_id}.json"
        staged = target.with_suffix(".tmp")
        staged.write_text(json.dumps(document))
        staged.replace(target)  # the OE never reads half a file
        self._wait_registered()

    def _wait_registered(self) -> None:
        """Until the OE knows the agent's token (it re-reads its registrations directory every second).

        The probe is the runtimes' own route with an empty body: 401 while the token is unknown, a
        validation error (and nothing done) once the registration is in."""
        headers = {"authorization": f"Bearer {self._runtime_token}"}
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            response = httpx.post(f"{self.oe_url}{OE_TOOL_EXECUTE_PATH}", json={}, headers=headers, timeout=5)
            if response.status_code != 401:
                return
            time.sleep(0.05)
        raise DevError("the OE did not take the agent's registration within 15 s; see the OE's log")

    # --- hot reload -------------------------------------------------------------------------------------

    def restart_runtimes(self) -> None:
        """The AER and the Tool Pod again, on the same ports, from the directory as it is now."""
        stop_all([self.children[name] for name in ("aer", "tool")])
        self.restarts += 1
        for name in ("aer", "tool"):
            (self.workdir / f"{name}.log").unlink(missing_ok=True)
        self._spawn_runtimes()
        for name in ("tool", "aer"):
            self._wait_ready(name)
        self._register()

    def dead(self) -> list[str]:
        """The components that exited on their own."""
        return [name for name, child in self.children.items() if not child.alive()]

    def tail(self, name: str) -> str:
        return _last_error(self.children[name].tail())

    # --- stop -------------------------------------------------------------------------------------------

    def stop(self) -> None:
        stop_all(list(self.children.values()))
        self.children.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


# What a secret the Tool Pod lacks means here: the cluster's Secret is a flag or a line of DIR/.env.
_SECRET_HINT = " (locally: --set NAME=VALUE, or a NAME=VALUE line in DIR/.env)"  # noqa: S105 (a hint, not a secret)
_TITLES = {
    "oe": "the OE",
    "aer": "the AER",
    "tool": "the Tool Pod",
    "memory": "the Memory server",
    "model": "the scripted model",
}


def _private_file(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def _last_error(log: str) -> str:
    """The last meaningful line of a component's log (its JSON `message`, else the line)."""
    for line in reversed(log.strip().splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            return line[:400]
        if isinstance(record, dict):
            text = record.get("message") or record.get("msg") or line
            if trace := record.get("exception") or record.get("exc_info"):
                text = f"{text}: {str(trace).strip().splitlines()[-1]}"
            return str(text)[:400]
        return line[:400]
    return "(no output)"
