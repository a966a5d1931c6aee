"""Rotating the runtime token and the OE's client token while executions run through real processes.

Each component reads its own copy of the token Secret, laid out as the kubelet mounts it, and each copy
changes at its own moment, as kubelets on different nodes update them: the AER first, the OE's registration
(the operator republishes it) and the client token next, the Tool Pod last; then a second rotation in the
opposite order. No process restarts. Every call of every execution must succeed, and once the grace period
is over the old tokens are refused everywhere.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_runtime.execution_token import (
    KEY_GRACE_ENV,
    PUBLIC_KEY_FILE_ENV,
    SIGNING_KEY_FILE_ENV,
    generate_private_key_pem,
    public_key_pem,
)
from tests.conftest import Process
from tests.integration.loop.harness import AGENT, CLIENT_TOKEN, RUNTIME_TOKEN, Platform
from tests.mounted_secret import mount_secret_key
from tests.providers.llm_peer import RunningLLMPeer

GRACE_S = 15.0
TOKEN_2 = "loop-runtime-token-second-4c1d"
TOKEN_3 = "loop-runtime-token-third-93be"
CLIENT_TOKEN_2 = "oe-client-token-second-71f0"
# The OE's signing key rotates in the same rolling way (the other direction's credential, issue 27).
OE_KEYS = (generate_private_key_pem(), generate_private_key_pem(), generate_private_key_pem())
WORKERS = 4
FINAL = ("completed", "failed", "cancelled", "suspended")


@dataclass
class RotatingPlatform(Platform):
    """The loop platform with one kubelet-style token mount per component and a grace period set."""

    grace_s: float = GRACE_S

    def token_dir(self, mode: str) -> Path:
        return self.tmp / f"{mode}-token"

    def key_dir(self, mode: str) -> Path:
        return self.tmp / f"{mode}-oe-key"

    def _runtime_env(self, mode: str, port: int) -> dict[str, str]:
        env = super()._runtime_env(mode, port)
        env["RUNTIME_TOKEN_FILE"] = str(mount_secret_key(self.token_dir(mode), RUNTIME_TOKEN))
        env["RUNTIME_TOKEN_GRACE_S"] = str(self.grace_s)
        public = public_key_pem(OE_KEYS[0])
        env[PUBLIC_KEY_FILE_ENV] = str(mount_secret_key(self.key_dir(mode), public, key="public-key.pem"))
        env[KEY_GRACE_ENV] = str(self.grace_s)
        return env

    def rotate_key(self, mode: str, private_pem: str) -> None:
        """One kubelet updates its copy of the OE key (the OE's private key, a runtime's public key)."""
        if mode == "oe":
            mount_secret_key(self.key_dir("oe"), private_pem, key="signing-key.pem")
        else:
            mount_secret_key(self.key_dir(mode), public_key_pem(private_pem), key="public-key.pem")

    def start_oe(self, *, extra: Mapping[str, str] | None = None) -> None:
        client_file = mount_secret_key(self.token_dir("client"), CLIENT_TOKEN)
        super().start_oe(
            extra={
                "OE_CLIENT_TOKEN_FILE": str(client_file),
                "OE_CLIENT_TOKEN_GRACE_S": str(self.grace_s),
                "RUNTIME_TOKEN_GRACE_S": str(self.grace_s),
                SIGNING_KEY_FILE_ENV: str(
                    mount_secret_key(self.key_dir("oe"), OE_KEYS[0], key="signing-key.pem")
                ),
                KEY_GRACE_ENV: str(self.grace_s),
                **(extra or {}),
            }
        )

    def rotate(self, mode: str, token: str) -> None:
        """One kubelet updates its copy of the Secret (`oe`: the operator republishes the registration)."""
        if mode != "oe":
            mount_secret_key(self.token_dir(mode), token)
            return
        path = self.tmp / "registrations" / f"{AGENT.replace('/', '.')}.json"
        document = json.loads(path.read_text())
        document["token"] = token
        staged = path.with_suffix(".staged")  # not a registration suffix: the OE never reads it half-written
        staged.write_text(json.dumps(document))
        os.replace(staged, path)


@pytest.fixture
def rotating(
    tmp_path: Path, spawn: Callable[..., Process], llm_peer: RunningLLMPeer, provider_url: str
) -> RotatingPlatform:
    platform = RotatingPlatform(
        tmp=tmp_path, spawn=spawn, llm_base_url=llm_peer.base_url, provider_url=provider_url
    )
    platform.start()
    return platform


@dataclass
class Load:
    """Clients invoking three-call executions (remote, local, remote) until stopped, each counting."""

    oe_url: str
    client_tokens: list[str] = field(default_factory=lambda: [CLIENT_TOKEN] * WORKERS)
    stop: threading.Event = field(default_factory=threading.Event)
    executions: int = 0
    calls: int = 0
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, worker: int) -> None:
        with httpx.Client(base_url=self.oe_url, timeout=30) as http:
            round_ = 0
            while not self.stop.is_set():
                round_ += 1
                self._one(http, worker, round_)

    def _headers(self, worker: int) -> dict[str, str]:
        return {"authorization": f"Bearer {self.client_tokens[worker]}"}

    def _one(self, http: httpx.Client, worker: int, round_: int) -> None:
        calls = [
            ["shout", {"text": f"w{worker} r{round_}"}],
            ["word_count", {"text": "one two three"}],
            ["shout", {"text": "again"}],
        ]
        task = {"mode": "calls", "calls": calls}
        invoked = http.post("/invoke", json={"agent": AGENT, "input": task}, headers=self._headers(worker))
        if invoked.status_code != 202:
            self._failed(f"invoke answered {invoked.status_code}")
            return
        execution_id = invoked.json()["execution_id"]
        deadline = time.monotonic() + 60
        while True:
            view = http.get(f"/execution/{execution_id}", headers=self._headers(worker))
            if view.status_code != 200:
                self._failed(f"reading {execution_id} answered {view.status_code}")
                return
            body = view.json()
            if body["status"] in FINAL:
                break
            if time.monotonic() > deadline:
                self._failed(f"{execution_id} still {body['status']} after 60 s")
                return
            time.sleep(0.05)
        results: list[Any] = (body.get("result") or {}).get("results") or []
        with self.lock:
            self.executions += 1
            self.calls += len(results)
        if body["status"] != "completed" or len(results) != len(calls):
            self._failed(f"{execution_id} ended {body['status']}: {body.get('error')}")
            return
        for number, result in enumerate(results, start=1):
            if not isinstance(result, dict) or "error" in result:
                self._failed(f"{execution_id} step {number} failed: {result}")

    def _failed(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)


@pytest.fixture
def load(rotating: RotatingPlatform) -> Iterator[Load]:
    running = Load(oe_url=rotating.oe_url)
    threads = [threading.Thread(target=running.run, args=(n,), daemon=True) for n in range(WORKERS)]
    for thread in threads:
        thread.start()
    yield running
    running.stop.set()
    for thread in threads:
        thread.join(timeout=90)


def _status(url: str, token: str, *, method: str = "GET", body: Any = None) -> int:
    headers = {"authorization": f"Bearer {token}"}
    return httpx.request(method, url, headers=headers, json=body, timeout=10).status_code


def test_a_rolling_token_rotation_drops_no_call(rotating: RotatingPlatform, load: Load) -> None:
    pids = {name: proc.popen.pid for name, proc in rotating.processes.items()}
    time.sleep(2)
    # Rotation 1: the AER's kubelet first, the operator's republish (and the client token) next, the Tool
    # Pod's kubelet last. Half the clients take the new client token at once, the rest later.
    rotating.rotate("aer", TOKEN_2)
    rotating.rotate_key("tool", OE_KEYS[1])  # the OE's key: a runtime learns the new one first
    time.sleep(1.5)
    rotating.rotate("oe", TOKEN_2)
    rotating.rotate_key("oe", OE_KEYS[1])
    mount_secret_key(rotating.token_dir("client"), CLIENT_TOKEN_2)
    time.sleep(0.3)
    load.client_tokens[0] = load.client_tokens[1] = CLIENT_TOKEN_2
    time.sleep(1.2)
    rotating.rotate("tool", TOKEN_2)
    rotating.rotate_key("aer", OE_KEYS[1])  # ... and another one after the OE signs with it
    time.sleep(1.0)
    load.client_tokens[2] = load.client_tokens[3] = CLIENT_TOKEN_2
    time.sleep(1.0)
    # Rotation 2, the other way round: the OE first, the AER last.
    rotating.rotate("oe", TOKEN_3)
    rotating.rotate_key("oe", OE_KEYS[2])
    time.sleep(1.5)
    rotating.rotate("tool", TOKEN_3)
    rotating.rotate_key("tool", OE_KEYS[2])
    time.sleep(1.5)
    rotating.rotate("aer", TOKEN_3)
    rotating.rotate_key("aer", OE_KEYS[2])
    last_change = time.monotonic()
    time.sleep(2.0)
    load.stop.set()
    deadline = time.monotonic() + 90
    while load.executions + len(load.failures) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # the workers finish the executions they had started
    with load.lock:
        executions, calls, failures = load.executions, load.calls, list(load.failures)
    print(f"\ntoken rotation: {executions} executions, {calls} calls, {len(failures)} failed")
    assert failures == [], failures[:10]
    assert executions >= 10 and calls == 3 * executions

    # Nothing restarted: every process read its rotated file in place.
    assert {name: proc.popen.pid for name, proc in rotating.processes.items()} == pids
    assert all(proc.popen.poll() is None for proc in rotating.processes.values())
    outputs = rotating.outputs()
    # The AER twice (the Tool Pod no longer takes the runtime token at all: only the OE's statements).
    assert outputs.count("the runtime token changed") >= 2
    assert outputs.count("the OE public key changed") >= 4  # AER and Tool Pod, twice each
    assert outputs.count("the OE signing key changed") >= 2
    assert "the client token changed" in outputs

    # After the grace period only the newest tokens open any door.
    time.sleep(max(0.0, last_change + GRACE_S + 1.5 - time.monotonic()))
    aer = f"http://127.0.0.1:{rotating.aer_port}/tools"
    tool = f"http://127.0.0.1:{rotating.tool_port}/execute"
    oe_runtime = f"{rotating.oe_url}/tool/result"
    direct = {"tool": "shout", "arguments": {"text": "late"}}
    for old in (RUNTIME_TOKEN, TOKEN_2):
        assert _status(aer, old) == 401
        assert _status(tool, old, method="POST", body=direct) == 401
        assert _status(oe_runtime, old, method="POST", body={}) == 401
    assert _status(aer, TOKEN_3) == 200
    assert _status(tool, TOKEN_3, method="POST", body=direct) == 401  # the Agent's token: never here
    # Statements signed by a retired OE key open nothing; the current key's do.
    for index, private in enumerate(OE_KEYS):
        rotating.key_files()[0].write_text(private)
        statement = rotating.statement("tool", execution_id="ex-direct")
        expected = 200 if index == 2 else 401
        assert (
            _status(tool, statement, method="POST", body={**direct, "execution_id": "ex-direct"}) == expected
        )
    assert _status(oe_runtime, TOKEN_3, method="POST", body={}) != 401  # a bad body, but the token is known
    assert _status(f"{rotating.oe_url}/executions", CLIENT_TOKEN) == 401
    assert _status(f"{rotating.oe_url}/executions", CLIENT_TOKEN_2) == 200

    for secret in (RUNTIME_TOKEN, TOKEN_2, TOKEN_3, CLIENT_TOKEN, CLIENT_TOKEN_2):
        assert secret not in rotating.outputs()
