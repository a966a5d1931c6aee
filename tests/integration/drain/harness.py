"""Plays the shared drain and interrupt/call vectors against a real AER and a real Tool Pod.

One platform (the launcher as OE, AER and Tool Pod, on loopback) per runtime settings. The Tool Pod is called
the way the OE calls it (`POST /execute` with an execution and a step); the AER runs the vector's calls as
local tool bodies of a real turn the real OE routes back to it, and what a body answered is read from the
OE's audit log. Both runtimes must give exactly the answers the vector file lists.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from agent_runtime.connectors import build_bundle, write_bundle
from tests.conftest import REPO_ROOT, Process
from tests.integration.loop.harness import AGENT, Platform, Tenant

FIXTURES = REPO_ROOT / "tests" / "fixtures"
DRAIN_VECTORS = FIXTURES / "drain" / "contract.json"
INTERRUPT_VECTORS = FIXTURES / "interrupt-call" / "contract.json"
TENANT_DIR = Path(__file__).resolve().parent / "tenant"
APP_ID = AGENT.replace("/", ".")
UNKNOWN_EXECUTION = "never-served-here"


def _empty_bundle(directory: Path, _provider_url: str) -> Path:
    return write_bundle(build_bundle([]), directory)


DRAIN_TENANT = Tenant(entrypoint="drain_agent:app", pythonpath=TENANT_DIR, bundle=_empty_bundle, tool_env={})


@dataclass
class DrainPlatform(Platform):
    """The loop platform with the drain tenant, and extra env for both runtimes."""

    runtime_env: Mapping[str, str] = field(default_factory=dict)

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        env.update(self.runtime_env)
        return env

    @property
    def aer_url(self) -> str:
        return f"http://127.0.0.1:{self.aer_port}"

    @property
    def tool_url(self) -> str:
        return f"http://127.0.0.1:{self.tool_port}"


def start_platform(tmp: Path, spawn: Callable[..., Process], settings: Mapping[str, str]) -> DrainPlatform:
    tmp.mkdir(parents=True, exist_ok=True)
    return DrainPlatform(
        tmp=tmp,
        spawn=spawn,
        llm_base_url="http://127.0.0.1:9/v1",  # the drain tenant never calls a model
        provider_url="http://127.0.0.1:9",
        tenant=DRAIN_TENANT,
        runtime_env=dict(settings),
    ).start()


@dataclass(frozen=True)
class Vector:
    file: str
    name: str
    settings: Mapping[str, str]
    steps: list[dict[str, Any]]

    @property
    def id(self) -> str:
        return f"{self.file}: {self.name}"


def load_vectors(path: Path) -> list[Vector]:
    document = json.loads(path.read_text())
    assert document["app_id"] == APP_ID, "the vectors' app_id is the test platform's APP_ID"
    return [
        Vector(
            file=path.parent.name,
            name=vector["name"],
            settings=vector.get("settings", {}),
            steps=vector["steps"],
        )
        for vector in document["vectors"]
    ]


def matches(expected: Any, actual: Any) -> bool:
    """`expected` is a subset of `actual`: dict keys recursively, list items each found somewhere."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and matches(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and all(any(matches(e, a) for a in actual) for e in expected)
    return bool(expected == actual)


class RuntimeUnderTest:
    """What a vector does to a runtime; `ToolPodRuntime` and `AERRuntime` do it their own way."""

    name = ""
    path = ""

    def __init__(self, platform: DrainPlatform, workdir: Path) -> None:
        self.platform = platform
        self.workdir = workdir
        self.execution_id = ""
        self.prefix = ""
        self.held: set[int] = set()

    @property
    def url(self) -> str:
        raise NotImplementedError

    # files the tool bodies touch

    def marker(self, step: int) -> str:
        return str(self.workdir / f"{self.prefix}-{step}.started")

    def release_file(self, step: int) -> str:
        return str(self.workdir / f"{self.prefix}-{step}.release")

    def release(self, step: int) -> None:
        Path(self.release_file(step)).touch()
        self.held.discard(step)

    def ran(self, step: int) -> bool:
        return Path(self.marker(step)).exists()

    def wait_started(self, step: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not self.ran(step):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the body at step {step} never started:\n{self.platform.outputs()}")
            time.sleep(0.01)

    def args(self, step: int, work: str) -> dict[str, str]:
        if work == "quick":
            return {"marker": self.marker(step)}
        return {"marker": self.marker(step), "release": self.release_file(step)}

    # the vector's life

    def begin(self, vector: Vector, index: int) -> None:
        self.prefix = f"{self.name}-{index}"
        self.held = set()

    def end(self) -> None:
        for step in list(self.held):
            self.release(step)

    def call(self, step: int, work: str) -> None:
        raise NotImplementedError

    def answer_of(self, step: int) -> dict[str, Any]:
        raise NotImplementedError

    def new_call(self, step: int, *, refused: bool) -> dict[str, Any] | str:
        raise NotImplementedError

    # the contract's own requests

    def post(self, path: str, body: dict[str, Any], *, token: bool = True) -> httpx.Response:
        # What the OE presents: its statement for this runtime and execution (the token without keys).
        headers = (
            self.platform.runtime_headers(self.name, execution_id=str(body.get("execution_id", "")))
            if token
            else {}
        )
        return httpx.post(self.url + path, json=body, headers=headers, timeout=30)


class ToolPodRuntime(RuntimeUnderTest):
    name = "tool"

    def __init__(self, platform: DrainPlatform, workdir: Path) -> None:
        super().__init__(platform, workdir)
        self._answers: dict[int, dict[str, Any]] = {}
        self._threads: dict[int, threading.Thread] = {}

    @property
    def url(self) -> str:
        return self.platform.tool_url

    def begin(self, vector: Vector, index: int) -> None:
        super().begin(vector, index)
        self.execution_id = f"vector-{uuid.uuid4().hex}"
        self._answers, self._threads = {}, {}

    def _execute(self, step: int, tool: str, args: dict[str, str]) -> dict[str, Any]:
        body = {"tool": tool, "arguments": args, "execution_id": self.execution_id, "step": step}
        response = self.post("/execute", body)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def call(self, step: int, work: str) -> None:
        tool = {"quick": "pod_quick", "cooperative": "pod_hold_async", "sync": "pod_hold_sync"}[work]
        if work == "quick":
            self._answers[step] = self._execute(step, tool, self.args(step, work))
            return

        def send() -> None:
            self._answers[step] = self._execute(step, tool, self.args(step, work))

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        self._threads[step] = thread
        self.held.add(step)
        self.wait_started(step)

    def answer_of(self, step: int) -> dict[str, Any]:
        thread = self._threads.get(step)
        if thread is not None:
            thread.join(timeout=20)
        outcome = self._answers[step]
        error = outcome.get("error") or {}
        return {"status": outcome["status"], "category": error.get("category")}

    def new_call(self, step: int, *, refused: bool) -> dict[str, Any] | str:
        outcome = self._execute(step, "pod_quick", self.args(step, "quick"))
        error = outcome.get("error") or {}
        if error.get("category") == "execution_draining":
            return "refused"
        return {"status": outcome["status"], "category": error.get("category")}


class AERRuntime(RuntimeUnderTest):
    name = "aer"

    @property
    def url(self) -> str:
        return self.platform.aer_url

    def begin(self, vector: Vector, index: int) -> None:
        super().begin(vector, index)
        self.execution_id = ""
        plan = self._plan(vector)
        if plan:
            self.execution_id = self.platform.invoke({"plan": plan})

    def _plan(self, vector: Vector) -> list[list[dict[str, Any]]]:
        """The vector's calls as the turn's groups: held calls set up one after another run together."""
        groups: list[list[dict[str, Any]]] = []
        previous_held = False
        for entry in vector.steps:
            if "call" in entry:
                step, work = entry["call"]["step"], entry["call"]["work"]
            elif "new_call" in entry and entry["expect"] != "refused":
                step, work = entry["new_call"]["step"], "quick"
            else:
                continue
            tool = {"quick": "aer_quick", "cooperative": "aer_hold_async", "sync": "aer_hold_sync"}[work]
            call = {"tool": tool, "args": self.args(step, work)}
            held = work != "quick" and "call" in entry
            if held and previous_held:
                groups[-1].append(call)
            else:
                groups.append([call])
            previous_held = held
        return groups

    def call(self, step: int, work: str) -> None:
        if work == "quick":
            self._outcome(step)
        else:
            self.held.add(step)
            self.wait_started(step)

    def _outcome(self, step: int, timeout: float = 20) -> dict[str, Any]:
        """What the local body at `step` reported to the OE, from the OE's audit log."""
        deadline = time.monotonic() + timeout
        while True:
            for record in self.platform.audit(self.execution_id):
                if record["step"] == step and record["decision"] == "callback_result":
                    return {"status": record["status"], "category": record["error_category"]}
            if time.monotonic() > deadline:
                raise TimeoutError(f"step {step} reported nothing to the OE:\n{self.platform.outputs()}")
            time.sleep(0.02)

    def answer_of(self, step: int) -> dict[str, Any]:
        return self._outcome(step)

    def new_call(self, step: int, *, refused: bool) -> dict[str, Any] | str:
        if refused:
            # A new call of a drained execution on the AER is a new run of it: refused at admission.
            body = {"execution_id": self.execution_id, "workspace_id": APP_ID, "input": {"plan": []}}
            response = self.post("/execute", body)
            if response.status_code == 409 and response.json().get("error") == "execution_draining":
                return "refused"
            return {"http_status": response.status_code, "body": response.text}
        return self._outcome(step)


def request_body(template: Mapping[str, Any], runtime: RuntimeUnderTest) -> dict[str, Any]:
    """A vector's request with its placeholders filled and its null fields left out."""
    values = {"$EXECUTION": runtime.execution_id, "$UNKNOWN_EXECUTION": UNKNOWN_EXECUTION, "$APP_ID": APP_ID}
    body: dict[str, Any] = {}
    for key, value in template.items():
        if value is None:
            continue
        if key == "deadline_in_ms":
            body["deadline_at_ms"] = time.time_ns() // 1_000_000 + int(value)
            continue
        body[key] = values.get(value, value) if isinstance(value, str) else value
    return body


def play(vector: Vector, runtime: RuntimeUnderTest) -> None:
    """Run every step of `vector` against `runtime`, asserting each expected answer."""
    for number, entry in enumerate(vector.steps, start=1):
        where = f"{runtime.name}, step {number} of {vector.id!r}"
        if "call" in entry:
            runtime.call(entry["call"]["step"], entry["call"]["work"])
        elif "release" in entry:
            runtime.release(entry["release"]["step"])
        elif "wait_ms" in entry:
            time.sleep(entry["wait_ms"] / 1000)
        elif "answer_of" in entry:
            answer = runtime.answer_of(entry["answer_of"]["step"])
            assert matches(entry["expect"], answer), f"{where}: answer {answer}, expected {entry['expect']}"
        elif "new_call" in entry:
            step = entry["new_call"]["step"]
            answer = runtime.new_call(step, refused=entry["expect"] == "refused")
            assert matches(entry["expect"], answer), f"{where}: new call {answer}, expected {entry['expect']}"
            if "ran" in entry:
                assert runtime.ran(step) is entry["ran"], (
                    f"{where}: the body at step {step} ran={runtime.ran(step)}"
                )
        elif "drain" in entry or "interrupt" in entry:
            path = "/drain" if "drain" in entry else "/interrupt/call"
            body = request_body(entry.get("drain") or entry["interrupt"], runtime)
            response = runtime.post(path, body, token=not entry.get("without_token"))
            check_answer(where, entry["expect"], response, runtime)
        elif "drain_until_final" in entry:
            deadline = time.monotonic() + entry["within_ms"] / 1000
            while True:
                response = runtime.post("/drain", request_body(entry["drain_until_final"], runtime))
                if response.status_code != 202:
                    break
                assert time.monotonic() < deadline, f"{where}: still 202 after {entry['within_ms']} ms"
                time.sleep(0.02)
            check_answer(where, entry["expect"], response, runtime)
        else:
            raise AssertionError(f"{where}: unknown step {entry}")


def check_answer(
    where: str, expect: Mapping[str, Any], response: httpx.Response, runtime: RuntimeUnderTest
) -> None:
    assert response.status_code == expect["status"], f"{where}: HTTP {response.status_code} {response.text}"
    if "body" in expect:
        body = response.json()
        assert matches(expect["body"], body), f"{where}: {body} does not match {expect['body']}"
    if response.status_code in (200, 202) and "outcome" in response.text:
        # Decision 8: every answer names the pod that gave it, so the OE can address it directly.
        body = response.json()
        assert body["pod_name"] == f"loop-{runtime.name}-0", f"{where}: {body}"
        assert body["pod_address"] == runtime.url, f"{where}: {body}"
