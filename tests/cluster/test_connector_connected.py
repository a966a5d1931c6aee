"""A Connector's `Connected` condition (issue 36), on the real control plane: the operator, as the chart's
ServiceAccount with the chart's RBAC and a token for the OE's audience, asks a real OE (its TokenReview and
SubjectAccessReview against the API server) to test the Connector in the Tool Pod the operator rendered
(run from its Deployment with its Secrets), which calls a provider on loopback with the Connector's key.

The provider echoes a credential it refuses in its error body (as some do): the refused key must still be
in no status, Event or operator log line, nor the good one.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client

from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import GROUP, VERSION, Api, RunningOperator, manifests, ready, wait_for
from tests.conftest import REPO_ROOT, Process, free_port
from tests.rendered_pods import run_rendered_container

GOOD_KEY = "ghp-Canary-good-7f3e9a1c2b"
WRONG_KEY = "ghp-Canary-wrong-0d4c8e6f5a"


@contextmanager
def _provider(calls: list[str]) -> Iterator[str]:
    """GitHub's `GET /user` on loopback: 200 for the good key; else 401 naming the token it was sent.
    Each request's path is appended to `calls`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            sent = self.headers.get("Authorization", "")
            if sent == f"Bearer {GOOD_KEY}":
                status, body = 200, {"login": "octo"}
            else:
                status, body = 401, {"message": f"Bad credentials: {sent.removeprefix('Bearer ')}"}
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _objects(namespace: str, provider: str) -> dict[str, dict[str, Any]]:
    objs = manifests(namespace)
    objs["gh-key"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "gh-key", "namespace": namespace},
        "stringData": {"token": GOOD_KEY},
    }
    objs["gh"] = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Connector",
        "metadata": {"name": "gh", "namespace": namespace},
        "spec": {
            "source": {"type": "github"},
            "config": {"base_url": provider},
            "credentials": [
                {"field": "token", "env": "GH_TOKEN", "secretKeyRef": {"name": "gh-key", "key": "token"}}
            ],
        },
    }
    objs["agent"]["spec"]["connectors"] = ["gh"]
    return objs


def _token(cluster: ControlPlane, namespace: str, account: str, *, audience: str | None) -> str:
    """A TokenRequest token of `account` (created when missing) for `audience`."""
    with cluster.api_client() as api:
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[audience] if audience else [], expiration_seconds=3600)
        )
        core = client.CoreV1Api(api)
        names = [a.metadata.name for a in core.list_namespaced_service_account(namespace).items]
        if account not in names:
            core.create_namespaced_service_account(
                namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=account))
            )
        return core.create_namespaced_service_account_token(account, namespace, request).status.token


def _account(api: Api, suffix: str) -> str:
    accounts = api.list("serviceaccounts")
    return next(a["metadata"]["name"] for a in accounts if a["metadata"]["name"].endswith(suffix))


def _connected(api: Api) -> dict[str, Any]:
    body = api.get("connectors", "gh") or {}
    return next(
        (c for c in (body.get("status") or {}).get("conditions") or [] if c["type"] == "Connected"), {}
    )


def test_the_connected_condition_says_what_the_tool_pods_test_found_and_never_the_key(
    cluster: ControlPlane,
    api: Api,
    start_operator: Callable[..., RunningOperator],
    spawn: Callable[..., Process],
    tmp_path: Path,
) -> None:
    oe_port = free_port()
    token_file = tmp_path / "operator-oe-token"
    calls: list[str] = []
    with _provider(calls) as provider:
        operator = start_operator(
            extra_env={
                "AGENT_OPERATOR_OE_URL": f"http://127.0.0.1:{oe_port}",
                "AGENT_OPERATOR_OE_TOKEN_FILE": str(token_file),
                "AGENT_OPERATOR_CONNECTION_TEST_SECONDS": "3",
                "AGENT_OPERATOR_CONNECTION_RETRY_SECONDS": "1",
            }
        )
        # The operator's own ServiceAccount (the chart's), with a token for the OE's audience only.
        token_file.write_text(
            _token(cluster, api.namespace, _account(api, "-operator"), audience="agent-engine")
        )
        objs = _objects(api.namespace, provider)
        for key in ("llm", "gh-key", "gh", "agent"):
            api.must_apply(objs[key])
        agent = ready(api)

        # Before the OE runs: Unknown, with a reason and the OE's address; the reconcile goes on.
        early = wait_for(
            "Connected Unknown", lambda: _connected(api).get("reason") == "OEUnreachable" and _connected(api)
        )
        assert early["status"] == "Unknown" and f"127.0.0.1:{oe_port}" in early["message"], early

        config_maps = {
            n: (api.get("configmaps", n) or {})["data"] for n in agent["status"]["bundle"]["configMaps"]
        }

        def tool_pod(key: str, root: str) -> int:
            secrets = {
                name: {
                    k: base64.b64decode(v).decode()
                    for k, v in (api.get("secrets", name) or {})["data"].items()
                }
                for name in ("bot-runtime-token", "gh-key", "llm-keys")
            }
            assert secrets["gh-key"]["token"] == key
            _, port = run_rendered_container(
                deployment=api.get("deployments", "bot-tool") or {},
                config_maps=config_maps,
                secrets=secrets,
                root=tmp_path / root,
                spawn=spawn,
                pythonpath=str(REPO_ROOT),
                overrides={"AGENT_ENTRYPOINT": ""},
            )
            return port

        runtime_token = base64.b64decode(
            (api.get("secrets", "bot-runtime-token") or {})["data"]["token"]
        ).decode()
        registrations = tmp_path / "registrations"
        registrations.mkdir()

        def register(tool_port: int) -> None:
            document = {
                "agent": f"{api.namespace}/bot",
                "token": runtime_token,
                "aerUrl": f"http://127.0.0.1:{free_port()}",
                "toolUrl": f"http://127.0.0.1:{tool_port}",
            }
            (registrations / "bot.json").write_text(json.dumps(document))

        register(tool_pod(GOOD_KEY, "tool-good"))
        oe = _start_oe(
            cluster, api, spawn=spawn, tmp_path=tmp_path, port=oe_port, registrations=registrations
        )

        found = wait_for(
            "Connected True", lambda: _connected(api).get("status") == "True" and _connected(api)
        )
        assert found["reason"] == "Connected", found
        assert "authenticated as octo" in found["message"] and "Agent bot" in found["message"]

        # The key is rotated to a wrong one: the Tool Pod that holds it now is the one the OE asks.
        secret = dict(objs["gh-key"], stringData={"token": WRONG_KEY})
        api.must_apply(secret)
        register(tool_pod(WRONG_KEY, "tool-wrong"))
        failed = wait_for(
            "Connected False",
            lambda: _connected(api).get("status") == "False" and _connected(api),
            timeout=60,
        )
        assert failed["reason"] == "Unauthorized", failed
        assert "HTTP 401" in failed["message"], failed
        events = api.events("gh")
        assert any(e["reason"] == "Unauthorized" and e["type"] == "Warning" for e in events), events
        assert any(e["reason"] == "Connected" and e["type"] == "Normal" for e in events), events

        # A caller the cluster knows but who may not invoke the Agent gets no test run: the OE asks the
        # API server (SubjectAccessReview on agents/invoke) for the operator's call as for any client's.
        token_file.write_text(_token(cluster, api.namespace, "nobody", audience="agent-engine"))
        refused = wait_for(
            "Connected Unknown OperatorForbidden",
            lambda: _connected(api).get("reason") == "OperatorForbidden" and _connected(api),
            timeout=60,
        )
        assert refused["status"] == "Unknown" and "agents/invoke" in refused["message"], refused
        before = len(calls)
        time.sleep(4)  # several more rounds (Unknown is asked again every second here)
        assert len(calls) == before, calls[before:]

    # Neither key in the Connector's status, its Events, the Agent's, or the operator's and the OE's logs.
    texts = {
        "connector": json.dumps(api.get("connectors", "gh")),
        "agent": json.dumps(api.get("agents", "bot")),
        "events": json.dumps(api.events("gh")) + json.dumps(api.events("bot")),
        "operator log": operator.process.output(),
        "oe log": oe.output(),
    }
    leaks = [(where, key) for where, text in texts.items() for key in (GOOD_KEY, WRONG_KEY) if key in text]
    assert not leaks, leaks


def _start_oe(
    cluster: ControlPlane,
    api: Api,
    *,
    spawn: Callable[..., Process],
    tmp_path: Path,
    port: int,
    registrations: Path,
) -> Process:
    """The OE authorizing clients with the cluster (as the chart's OE ServiceAccount, which may create
    TokenReviews and SubjectAccessReviews), its registrations from a directory (the Tool Pod is on
    loopback, not at its Service's name)."""
    sa_dir = tmp_path / "oe-sa"
    sa_dir.mkdir()
    kubeconfig = yaml.safe_load(
        cluster.service_account_kubeconfig(
            namespace=api.namespace, name=_account(api, "-oe"), path=tmp_path / "oe.kubeconfig"
        ).read_text()
    )
    (sa_dir / "token").write_text(kubeconfig["users"][0]["user"]["token"])
    (sa_dir / "ca.crt").write_bytes(
        base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    )
    (sa_dir / "namespace").write_text(api.namespace)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO_ROOT),
        "RUNNER_MODE": "oe",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "OE_SQLITE_PATH": str(tmp_path / "oe.sqlite3"),
        "OE_REGISTRATIONS_DIR": str(registrations),
        "OE_CLIENT_AUTH": "kubernetes",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(cluster.apiserver_port),
        "OE_SERVICEACCOUNT_DIR": str(sa_dir),
    }
    oe = spawn([sys.executable, "-m", "agent_runtime.launcher"], env=env, name="oe")

    def up() -> bool:
        if oe.popen.poll() is not None:
            raise RuntimeError(f"the OE exited:\n{oe.output()}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_for("the OE ready", up, timeout=30)
    return oe
