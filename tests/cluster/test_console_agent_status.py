"""The console's Agents page shows a real reconciled Agent's conditions and bundle digest (issue 30).

The operator carries the Agent's status in the registration it publishes (republished when the status
changes); the OE reads it from the registration Secret through the chart's own RBAC (its ServiceAccount may
read Secrets of the registrations' namespace, nothing else) and the console shows it as text.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from playwright.sync_api import expect

from agent_operator.registration import registration_secret_name
from agent_runtime.oe.registration import REGISTRATION_KEY
from tests.browser.conftest import Console, browser, console_for, playwright  # noqa: F401 - fixtures
from tests.cluster.controlplane import ControlPlane
from tests.cluster.operator_harness import Api, RunningOperator, apply_all, manifests, ready, wait_for
from tests.conftest import REPO_ROOT, Process, free_port

STATIC_TOKEN = "console-agent-status-" + "s" * 24


def _registration(api: Api, where: str, name: str) -> dict[str, Any] | None:
    response = api.http.get(f"/api/v1/namespaces/{where}/secrets/{name}")
    if response.status_code == 404:
        return None
    return json.loads(base64.b64decode(response.json()["data"][REGISTRATION_KEY]))


def _oe_service_account_dir(cluster: ControlPlane, api: Api, where: str, tmp: Path) -> Path:
    """The chart's OE ServiceAccount (the harness applied it with its Role in `where`): a token, the CA."""
    accounts = api.http.get(f"/api/v1/namespaces/{api.namespace}/serviceaccounts").json()["items"]
    name = next(a["metadata"]["name"] for a in accounts if a["metadata"]["name"].endswith("-oe"))
    kubeconfig = yaml.safe_load(
        cluster.service_account_kubeconfig(namespace=api.namespace, name=name, path=tmp / "oe.kubeconfig")
        .read_text()
    )  # fmt: skip
    sa_dir = tmp / "oe-sa"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(kubeconfig["users"][0]["user"]["token"])
    (sa_dir / "ca.crt").write_bytes(
        base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    )
    (sa_dir / "namespace").write_text(where)
    return sa_dir


def test_the_agents_page_shows_a_reconciled_agents_ready_condition_and_bundle_digest(
    cluster: ControlPlane,
    api: Api,
    start_operator: Callable[..., RunningOperator],
    spawn: Callable[..., Process],
    tmp_path: Path,
    console_for: Callable[..., Console],  # noqa: F811 - the fixture
) -> None:
    where = f"{api.namespace}-registrations"
    start_operator(extra_env={"AGENT_OPERATOR_REGISTRATIONS_NAMESPACE": where})
    apply_all(api, manifests(api.namespace))
    agent = ready(api)
    digest = agent["status"]["bundle"]["digest"]
    secret = registration_secret_name(api.namespace, "bot")

    def carried_ready() -> dict[str, Any] | None:
        document = _registration(api, where, secret) or {}
        conditions = (document.get("status") or {}).get("conditions") or []
        ok = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
        return document if ok else None

    # Written after the status that says Ready: the registration follows the Agent's status.
    document = wait_for("the registration carries Ready=True", carried_ready, timeout=30)
    assert document["status"]["bundleDigest"] == digest

    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO_ROOT),
        "RUNNER_MODE": "oe",
        "APP_HOST": "127.0.0.1",
        "RUNTIME_PORT": str(port),
        "OE_SQLITE_PATH": str(tmp_path / "oe.sqlite3"),
        "OE_CLIENT_TOKEN": STATIC_TOKEN,
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(cluster.apiserver_port),
        "OE_SERVICEACCOUNT_DIR": str(_oe_service_account_dir(cluster, api, where, tmp_path)),
    }
    oe = spawn([sys.executable, "-m", "agent_runtime.launcher"], env=env, name="oe")
    base = f"http://127.0.0.1:{port}"
    wait_for("the OE ready", lambda: _ready(base, oe), timeout=30)

    console = console_for(base)
    console.sign_in(STATIC_TOKEN)
    console.page.wait_for_url("**/console/inbox")
    console.page.goto(base + "/console/agents")
    card = console.page.locator(f'article[data-agent="{api.namespace}/bot"]')
    expect(card).to_be_visible(timeout=30_000)
    expect(card.locator(".bundle-digest")).to_have_text(digest)
    ready_row = card.locator('tr[data-condition="Ready"]')
    expect(ready_row).to_contain_text("True")
    expect(ready_row).to_contain_text("AllComponentsReady")
    expect(card.locator('tr[data-condition="Registered"]')).to_contain_text("Published")

    assert STATIC_TOKEN not in oe.output()


def _ready(base: str, oe: Process) -> bool:
    if oe.popen.poll() is not None:
        raise RuntimeError(f"the OE exited:\n{oe.output()}")
    try:
        return httpx.get(base + "/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False
